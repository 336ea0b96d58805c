"""rewind compiles its own modules where the interpreter does not cache them (bytecode.py):
on a copy of the package, under PYTHONDONTWRITEBYTECODE=1, as an editable install in a
container has it."""

import importlib.util
import os
import shutil
import subprocess
import sys

import rewind

HOOK_PATH = ("__init__.py", "hooks/__init__.py", "hooks/client.py", "locations.py", "hooks/entry.py",
             "hooks/recorder.py", "catalog/__init__.py")


def _copy(tmp_path):
    dst = tmp_path / "site" / "rewind"
    shutil.copytree(os.path.dirname(rewind.__file__), dst,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _compile(site) -> str:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-S", "-c",
                          "import sys; sys.path.insert(0, sys.argv[1]); from rewind.bytecode import ensure_compiled; "
                          "print(ensure_compiled())", str(site)],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return out.stdout.strip()


def _pyc(pkg, rel):
    return importlib.util.cache_from_source(str(pkg / rel))


def test_missing_bytecode_is_written_and_fresh_bytecode_left_alone(tmp_path):
    pkg = _copy(tmp_path)
    assert not any(p.name == "__pycache__" for p in pkg.rglob("*"))
    # an import under PYTHONDONTWRITEBYTECODE writes nothing: every hook call would compile
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import rewind.hooks.client",
                    str(pkg.parent)], env=env, check=True)
    assert not os.path.exists(_pyc(pkg, "hooks/client.py"))

    assert _compile(pkg.parent) == "True"
    for rel in HOOK_PATH:
        assert os.path.getsize(_pyc(pkg, rel)) > 16, rel
    before = {rel: os.stat(_pyc(pkg, rel)).st_mtime_ns for rel in HOOK_PATH}

    os.utime(pkg / "hooks" / "client.py", ns=(before["hooks/client.py"] + 5 * 10**9,) * 2)   # an update
    assert _compile(pkg.parent) == "True"
    after = {rel: os.stat(_pyc(pkg, rel)).st_mtime_ns for rel in HOOK_PATH}
    assert after["hooks/client.py"] != before["hooks/client.py"]          # stale: recompiled
    assert {k: v for k, v in after.items() if k != "hooks/client.py"} == \
        {k: v for k, v in before.items() if k != "hooks/client.py"}       # fresh: untouched


def test_a_module_that_does_not_compile_costs_nothing_but_its_own_bytecode(tmp_path):
    pkg = _copy(tmp_path)
    (pkg / "broken_extra.py").write_text("def (:\n")
    assert _compile(pkg.parent) == "False"        # said, not raised, nothing printed
    assert os.path.exists(_pyc(pkg, "hooks/client.py"))
    assert not os.path.exists(_pyc(pkg, "broken_extra.py"))
