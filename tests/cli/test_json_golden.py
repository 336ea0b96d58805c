"""Golden JSON: every `--json` output of the command line keeps its shape (docs/design.md,
"Command-line contract": fields are only ever added).

Each `tests/golden/<name>.json` was written from a real run of the installed `rewind` on the
scenario its `scenario` field tells, and holds:

    {"command": "rewind show 2 --json",      what was run (in the project's directory)
     "scenario": "...",                       the state it was run on
     "exit_code": 0,
     "output": <the output's shape>}

The shape is the real output with every volatile value (times, ids, paths, sizes, digests,
pids, counts, free text) replaced by a type marker; what docs/design.md fixes stays as it was:

    "<int>" "<float>" "<str>" "<bool>" "<null>"   a value of that JSON type; "<str|null>": either
    any other string, number, true/false, null  pinned: the output has exactly this value
                                                (the `kind`, `status`, `source`, `tool`,
                                                `agent`, `flags`, `scope` enums, every boolean
                                                such as `ok`, and the nulls of the scenario)
    {"key": shape, ...}                          an object with at least these keys (more may
                                                come: fields are only ever added)
    [shape, shape]                               a list of exactly these items, in this order
    {"<each>": shape}                            a list of at least one item, each of this shape
                                                (for lists whose length depends on the machine)

A key that is missing, a type that changed or a pinned value that moved fails, naming the
key path (`$.changes[2].old.kind`). `REWIND_UPDATE_GOLDEN=1 pytest tests/cli/test_json_golden.py`
(re)writes the files from the current behaviour; what is pinned and what is typed is decided
here (PINNED, and each case's `each` and `loosen`), so a rewrite reproduces the same contract.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers import REWIND, git, run_rewind, write
from rewind.cli.replay import bundled_session, fill, replay
from rewind.locations import config_dir

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("REWIND_UPDATE_GOLDEN") == "1"

# keys whose values docs/design.md fixes (enums): pinned wherever they appear as a string or null
# (or a list of them, as `flags`), not where such a key counts something (`summary.sources.tool`)
PINNED = {"kind", "status", "source", "tool", "agent", "flags", "scope", "outcome"}
EACH = "<each>"
TYPES = ("int", "float", "str", "bool", "null")


# -- the shape: written from an output, checked against one --------------------------------------

def type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    for name, cls in (("int", int), ("float", float), ("str", str), ("list", list), ("object", dict)):
        if isinstance(value, cls):
            return name
    raise TypeError(f"not a JSON value: {value!r}")


def marker_types(shape) -> list[str] | None:
    """The JSON types a marker such as "<str|null>" allows; None if `shape` is no marker."""
    if isinstance(shape, str) and shape.startswith("<") and shape.endswith(">"):
        names = shape[1:-1].split("|")
        if all(n in TYPES for n in names):
            return names
    return None


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def shape_of(value, path: str = "$", each: frozenset = frozenset(), loosen: dict | None = None,
             pinned: bool = False, typed: bool = False):
    """The golden shape of an output (see the module docstring). `each`: key paths of lists
    written as {"<each>": shape}; `loosen`: key path -> the marker to write there; `typed`:
    pin nothing (inside an <each>)."""
    loosen = loosen or {}
    if path in loosen:
        return loosen[path]
    if isinstance(value, dict):
        return {k: shape_of(v, _key(path, k), each, loosen, pinned=k in PINNED and not typed, typed=typed)
                for k, v in value.items()}
    if isinstance(value, list):
        if path in each:
            assert value, f"{path}: an <each> list must have items in the scenario"
            items = [shape_of(v, f"{path}[*]", each, loosen, typed=True) for v in value]
            merged = items[0]
            for item in items[1:]:
                merged = _merge(merged, item, f"{path}[*]")
            return {EACH: merged}
        return [shape_of(v, f"{path}[{i}]", each, loosen, pinned=pinned, typed=typed) for i, v in enumerate(value)]
    if (pinned and (value is None or isinstance(value, str))) or (
            not typed and (value is None or isinstance(value, bool))):
        return value
    return f"<{type_name(value)}>"


def _merge(a, b, path: str):
    """One shape both item shapes fit: markers joined, the keys every item has."""
    ta, tb = marker_types(a), marker_types(b)
    if ta is not None and tb is not None:
        names = [n for n in TYPES if n in ta or n in tb]
        return f"<{'|'.join(names)}>"
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a[k], b[k], _key(path, k)) for k in a if k in b}
    if a == b:
        return a
    raise AssertionError(f"{path}: the items of an <each> list differ in kind: {a!r} / {b!r}")


def _show(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def compare(shape, actual, path: str = "$") -> list[str]:
    """Every way `actual` breaks `shape`, each naming its key path; [] when it fits."""
    names = marker_types(shape)
    if names is not None:
        if type_name(actual) in names:
            return []
        return [f"{path}: type changed: the golden says {shape}, the output has {type_name(actual)} {_show(actual)}"]
    if isinstance(shape, dict) and set(shape) == {EACH}:
        if not isinstance(actual, list):
            return [f"{path}: type changed: the golden says a list, the output has {type_name(actual)} {_show(actual)}"]
        if not actual:
            return [f"{path}: the golden says at least one item, the output has none"]
        return [p for i, item in enumerate(actual) for p in compare(shape[EACH], item, f"{path}[{i}]")]
    if isinstance(shape, dict):
        if not isinstance(actual, dict):
            return [f"{path}: type changed: the golden says an object, the output has {type_name(actual)} "
                    f"{_show(actual)}"]
        problems = []
        for key, sub in shape.items():
            if key not in actual:
                problems.append(f"{_key(path, key)}: missing (fields are only ever added)")
            else:
                problems += compare(sub, actual[key], _key(path, key))
        return problems
    if isinstance(shape, list):
        if not isinstance(actual, list):
            return [f"{path}: type changed: the golden says a list, the output has {type_name(actual)} {_show(actual)}"]
        problems = []
        if len(actual) != len(shape):
            problems.append(f"{path}: {len(actual)} items, the golden has {len(shape)}")
        for i, (sub, item) in enumerate(zip(shape, actual)):
            problems += compare(sub, item, f"{path}[{i}]")
        return problems
    if type_name(actual) != type_name(shape):
        return [f"{path}: type changed: the golden pins {_show(shape)}, the output has {type_name(actual)} "
                f"{_show(actual)}"]
    if actual != shape:
        return [f"{path}: pinned value changed: the golden says {_show(shape)}, the output has {_show(actual)}"]
    return []


def check(name: str, args: list[str], scenario: str, cwd, env: dict | None = None, exit_code: int = 0,
          each: tuple[str, ...] = (), loosen: dict | None = None) -> list[str]:
    """Run `rewind ARGS` and hold its JSON to tests/golden/NAME.json (or write it, updating)."""
    proc = run_rewind(*args, cwd=cwd, env=env)
    command = "rewind " + " ".join(args)
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        return [f"{name}.json: `{command}` printed no JSON (exit {proc.returncode}): "
                f"{proc.stdout[:200]!r} {proc.stderr[:300]!r}"]
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        golden = {"command": command, "scenario": scenario, "exit_code": proc.returncode,
                  "output": shape_of(output, each=frozenset(each), loosen=loosen)}
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(golden, indent=2, ensure_ascii=False) + "\n")
        return [] if proc.returncode == exit_code else [f"{name}.json: `{command}` exited {proc.returncode}"]
    if not path.exists():
        return [f"{name}.json: no golden file for `{command}` (REWIND_UPDATE_GOLDEN=1 writes it)"]
    golden = json.loads(path.read_text())
    problems = [] if golden["command"] == command else [
        f"{name}.json: the golden was made by `{golden['command']}`, this test runs `{command}`"]
    if proc.returncode != golden["exit_code"]:
        problems.append(f"{name}.json: `{command}` exited {proc.returncode}, the golden says "
                        f"{golden['exit_code']} (stderr: {proc.stderr[:300]!r})")
    problems += [f"{name}.json: {p}" for p in compare(golden["output"], output)]
    return problems


def _at(days: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the scenarios -------------------------------------------------------------------------------

SETUP = {"README.md": "# demo project\n", "config.ini": "[core]\nname = demo\nlevel = 1\n",
         "old.log": "stale log line\n", "a.txt": "alpha\n"}
SESSION = ("a git project with rewind's claude hooks installed; the bundled Claude Code session "
           "(5 prompts: Write, Edit, Bash, a symlink, a failing command) replayed through real "
           "`rewind hook claude` processes, with a hand edit before prompt 2; then `rewind save -m` (6), "
           "`rewind to 2 --yes` (its safety checkpoint: 7) and a file written after it")


def _replay_session(root: Path, tmp_path: Path) -> None:
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))

    def deliver(payload):
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env,
                           cwd=payload.get("cwd") if os.path.isdir(payload.get("cwd", "")) else root,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout == "", (payload["hook_event_name"], r.stdout, r.stderr)

    prompts = []

    def between(payload):
        if len(prompts) == 1:
            with open(root / "README.md", "a") as f:
                f.write("edited by hand\n")
        prompts.append(payload)

    session = [fill(p, str(root), "s-golden", str(tmp_path / "cfg")) for p in bundled_session()]
    replay(session, deliver, between)


@pytest.fixture
def recorded(tmp_path):
    root = tmp_path / "proj"
    for name, text in SETUP.items():
        write(root, name, text)
    git("init", "-q", cwd=root)
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    _replay_session(root, tmp_path)
    write(root, "by_hand.txt", "saved by hand\n")
    run_rewind("save", "-m", "saved by hand", cwd=root, check=0)
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    write(root, "after.txt", "written after the rewind\n")
    return root


def test_every_json_output_of_a_recorded_session_keeps_its_golden_shape(recorded):
    root = recorded
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["id"] for c in cps] == [7, 6, 5, 4, 3, 2, 1], "the scenario itself changed"
    problems = []
    for name, args, extra in [
        ("list", ["list", "--json"], {}),
        ("list-all", ["list", "--all", "--json"], {}),
        ("show", ["show", "2", "--json"], {}),
        ("show-rewind", ["show", "7", "--json"], {}),
        ("diff", ["diff", "1", "--json"], {}),
        ("diff-working-tree", ["diff", "last", "--json"], {}),
        ("diff-name-only", ["diff", "1", "--name-only", "--json"], {}),
        ("verify", ["verify", "--json"], {}),
        ("export", ["export", "2", "--branch", "from-rewind", "--json"], {}),
        ("hooks-status", ["hooks", "status", "claude", "--json"], {}),
        # the plans of a restore and of an undo, as JSON (nothing changed)
        ("to-dry-run", ["to", "1", "--dry-run", "--json"], {}),
        ("undo-dry-run", ["undo", "--dry-run", "--json"], {}),
        ("revert-dry-run", ["revert", "3", "--dry-run", "--json"], {}),
        # the findings depend on the machine (its disk, its inotify limit): their shape is pinned
        ("doctor", ["doctor", "--json"], {"each": ("$.findings",), "loosen": {"$.findings[*].fix": "<str|null>"}}),
    ]:
        problems += check(name, args, SESSION, root, **extra)

    # a ring of 3 (shorter than the one applied so far): `gc` drops what it leaves out; 40 days
    # on, the dry run also hides the rest (expired, not yet confirmed: docs/design.md, "Ring and retention")
    config = Path(config_dir()) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("ring_size = 3\n")
    retention = SESSION + "; then ring_size = 3 in the user's config.toml"
    problems += check("gc-dry-run", ["gc", "--dry-run", "--json"], retention + "; the clock 40 days ahead",
                      root, env={"REWIND_NOW": _at(40)})
    problems += check("gc", ["gc", "--json"], retention, root)
    after_gc = retention + "; then `rewind gc`"
    problems += check("status", ["status", "--json"], after_gc, root)
    problems += check("status-all", ["status", "--all", "--json"], after_gc, root)
    problems += check("forget", ["forget", "--yes", "--json"], after_gc, root)
    problems += check("trash", ["trash", "--json"], after_gc + "; then `rewind forget --yes`", root,
                      each=("$", "$[*].checkpoints"))
    assert not problems, "\n".join(problems)


def _wait_watching(root, proc) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        st = json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)
        # ready: running, no problem, and its first scan done (on a busy machine the scan of
        # even two files can outlast the start, and the golden is of a watcher at rest)
        if st["running"] and st["problem"] is None and st["first_scan_since"] is None:
            return st
        time.sleep(0.2)
    raise AssertionError(f"the watcher never got ready: {st}")


def test_watch_status_json_of_a_running_watcher_keeps_its_golden_shape(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    write(root, "src/b.txt", "b\n")
    run_rewind("save", cwd=root, check=0)
    proc = subprocess.Popen([*REWIND, "watch"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_watching(root, proc)
        problems = check("watch-status", ["watch", "--status", "--json"],
                         "a project with one checkpoint and `rewind watch` running in the foreground", root,
                         loosen={"$.problem": "<str|null>"})   # a busy machine may stall its heartbeat
        assert "stopped the watcher" in run_rewind("watch", "--stop", cwd=root, check=0).stdout
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    problems += check("watch-status-stopped", ["watch", "--status", "--json"],
                      "the same project after `rewind watch --stop`", root)
    assert not problems, "\n".join(problems)


def test_verify_json_with_a_missing_object_keeps_its_golden_shape(tmp_path):
    import hashlib
    root = tmp_path / "proj"
    write(root, "a.txt", "only copy\n")
    run_rewind("save", cwd=root, check=0)
    oid = hashlib.sha256(b"only copy\n").hexdigest()
    os.unlink(os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:]))
    problems = check("verify-damaged", ["verify", "--json"],
                     "one checkpoint whose only file's object was deleted from the store", root, exit_code=1)
    assert not problems, "\n".join(problems)


def test_revert_json_of_what_was_done_keeps_its_golden_shape(tmp_path):
    """`revert --yes --json`: what it did, with a merge, a rename, a conflict and a kept change."""
    from helpers import replayed_session
    root = tmp_path / "proj"
    write(root, "src/a.py", "".join(f"line {i}\n" for i in range(1, 11)))
    write(root, "old.py", "old\n")
    write(root, "b.txt", "b\n")

    def person(i):
        if i == 2:
            (root / "notes.md").write_text("mine\n")
    replayed_session(root, tmp_path, "0", [
        [("write", str(root / "x.py"), "x\n")],
        [("bash", "sed -i 's/^line 2$/line 2 bad/' src/a.py && mv old.py new.py && echo bad > b.txt")],
        [("bash", "sed -i 's/^line 9$/line 9 good/' src/a.py && echo worse > b.txt")],
    ], between=person, in_process=True)
    problems = check("revert", ["revert", "2", "--yes", "--json"],
                     "a session replayed through `rewind hook claude`: prompt 2 edits line 2 of src/a.py, "
                     "moves old.py to new.py and rewrites b.txt, the person writes notes.md; prompt 3 "
                     "edits line 9 of src/a.py and rewrites b.txt again", root, exit_code=1)
    assert not problems, "\n".join(problems)


def test_bisect_json_keeps_its_golden_shape(tmp_path):
    from helpers import replayed_session
    root = tmp_path / "proj"
    write(root, "lib.py", "def value():\n    return 1\n")
    write(root, "check.py", "import lib, sys\nsys.exit(0 if lib.value() == 1 else 1)\n")
    replayed_session(root, tmp_path, "0", [
        [("write", str(root / "a.txt"), "a\n")],
        [("bash", "sed -i 's/return 1/return 2/' lib.py")],
        [("write", str(root / "b.txt"), "b\n")],
    ], in_process=True)
    problems = check("bisect", ["bisect", "--json", "--", "python3", "check.py"],
                     "a session replayed through `rewind hook claude`: prompt 2 makes check.py fail", root,
                     each=("$.steps",))
    assert not problems, "\n".join(problems)


def test_list_and_show_json_of_a_pending_checkpoint_keep_their_golden_shape(tmp_path):
    from test_pending import FirstScan
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    scenario = ("a project with one checkpoint saved by hand; then a prompt recorded as pending (2) while "
                "the watcher's first scan runs")
    with FirstScan(root) as scan:
        scan.prompt("a prompt during the first scan")
        problems = check("list-pending", ["list", "--json"], scenario, root)
        problems += check("show-pending", ["show", "2", "--json"], scenario, root)
    assert not problems, "\n".join(problems)


# -- the contract's own guards ---------------------------------------------------------------------

def _json_commands() -> set[str]:
    """Every command of the CLI that takes --json, as "hooks status"."""
    from rewind.cli.app import build

    found = set()

    def walk(cmd, prefix):
        if hasattr(cmd, "commands"):          # a group (typer carries its own click)
            for name, sub in cmd.commands.items():
                walk(sub, [*prefix, name])
        elif any("--json" in p.opts for p in cmd.params):
            found.add(" ".join(prefix))
    walk(build(), [])
    return found


def test_every_command_with_json_has_a_golden():
    if UPDATE:
        pytest.skip("the goldens are being written")
    commands = [json.loads(p.read_text())["command"] for p in GOLDEN.glob("*.json")]
    missing = [c for c in sorted(_json_commands())
               if not any(g.startswith(f"rewind {c} ") for g in commands)]
    assert not missing, f"--json output without a golden file in tests/golden: {missing}"


def test_the_check_names_the_key_path_of_what_broke():
    golden = {"id": "<int>", "kind": "prompt", "git_head": "<str|null>", "flags": ["symlink"],
              "changes": [{"old": {"size": "<int>"}}], "findings": {EACH: {"level": "<str>"}}}
    fits = {"id": 3, "kind": "prompt", "git_head": None, "flags": ["symlink"], "new_field": 1,
            "changes": [{"old": {"size": 5, "mode": "644"}}], "findings": [{"level": "ok"}, {"level": "warn"}]}
    assert compare(golden, fits) == []          # a field added is fine
    broken = {"id": "3", "kind": "manual", "git_head": 7, "flags": [],
              "changes": [{"old": {}}], "findings": [{"level": "ok"}, {}]}
    assert compare(golden, broken) == [
        '$.id: type changed: the golden says <int>, the output has str "3"',
        '$.kind: pinned value changed: the golden says "prompt", the output has "manual"',
        "$.git_head: type changed: the golden says <str|null>, the output has int 7",
        "$.flags: 0 items, the golden has 1",
        "$.changes[0].old.size: missing (fields are only ever added)",
        "$.findings[1].level: missing (fields are only ever added)",
    ]
    assert compare(golden, {k: v for k, v in fits.items() if k != "kind"}) == [
        "$.kind: missing (fields are only ever added)"]
    assert compare({"findings": {EACH: {"level": "<str>"}}}, {"findings": []}) == [
        "$.findings: the golden says at least one item, the output has none"]
    assert shape_of({"id": 3, "kind": "prompt", "ok": True, "tool": None, "at": "2026",
                     "flags": ["symlink"], "xs": [{"a": 1, "b": None}, {"a": 2, "b": "x"}]},
                    each=frozenset({"$.xs"})) == {
        "id": "<int>", "kind": "prompt", "ok": True, "tool": None, "at": "<str>", "flags": ["symlink"],
        "xs": {EACH: {"a": "<int>", "b": "<str|null>"}}}
