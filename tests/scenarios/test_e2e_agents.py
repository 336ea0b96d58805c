"""End to end with the real Gemini CLI (0.61.0) and Codex CLI (0.171.0) against local mocks of
their model APIs (tests/agents/gemini, tests/agents/codex): real tool calls, real
hooks. rewind's hooks get there through `rewind hooks install AGENT` itself: a small wrapper
installs them right before each run of the agent, on top of the harness's own recorder, so
the test also proves that the installer's entries (and Codex's trust entries) make the
agent run them. Skipped when the CLIs are missing."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REWIND, agent_cli, fingerprint, harness, no_cli, run_rewind

GEMINI = agent_cli("gemini")
CODEX = agent_cli("codex")

pytestmark = pytest.mark.e2e


def wrapper(tmp_path: Path, agent: str, real: str, scope: str) -> str:
    """An executable that installs rewind's hooks, then runs the real agent."""
    script = tmp_path / f"{agent}-with-rewind"
    install = " ".join(map(shlex.quote, [*REWIND, "hooks", "install", agent, "--scope", scope]))
    script.write_text("#!/bin/sh\n"
                      f'if [ "$1" != "--version" ]; then {install} --project "$PWD" >/dev/null || exit 97; fi\n'
                      f"exec {shlex.quote(real)} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def session(tmp_path: Path, agent: str, exe_flag: str, exe: str, *extra: str, watch: str = "0",
            env: dict | None = None) -> Path:
    proj = tmp_path / "proj"
    r = subprocess.run([sys.executable, str(harness(agent) / "run_session.py"), exe_flag, exe,
                        "--project-dir", str(proj), "--fresh", *extra],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, REWIND_WATCH=watch, **(env or {})), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return proj


def changes(proj: Path, n: int) -> dict[str, dict]:
    shown = json.loads(run_rewind("show", str(n), "--json", cwd=proj, check=0).stdout)
    return {c["path"]: c for c in shown["changes"]}


def rewind_story(proj: Path, skip: tuple, states: dict[int, dict[str, object]]) -> None:
    """`to` each checkpoint gives its tree (checked on the files that tell them apart),
    then `undo` three times walks back to the end of the session."""
    final = fingerprint(proj, skip=skip)
    for n in (2, 1, 3):
        run_rewind("to", str(n), "--yes", cwd=proj, check=0)
        for path, want in states[n].items():
            p = proj / path
            if want is None:
                assert not os.path.lexists(p), (n, path)
            elif isinstance(want, tuple):
                assert os.readlink(p) == want[1], (n, path)
            else:
                assert p.read_text() == want, (n, path)
    for _ in range(3):
        run_rewind("undo", "--yes", cwd=proj, check=0)
    assert fingerprint(proj, skip=skip) == final


@pytest.mark.skipif(not GEMINI, reason=no_cli("gemini"))
@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_real_gemini_cli_session_is_recorded_attributed_and_rewindable(tmp_path, watch):
    # Gemini CLI relaunches itself (node -> node, more heap): twice the start-up CPU. The
    # relaunch's process chain matters to the watcher's pid account, so the watcher run keeps
    # it; the hooks-only run (no pid account) does without
    proj = session(tmp_path, "gemini", "--gemini", wrapper(tmp_path, "gemini", GEMINI, "project"), watch=watch,
                   env={"GEMINI_CLI_NO_RELAUNCH": "true"} if watch == "0" else None)
    cps = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)
    assert [c["kind"] for c in cps] == ["prompt"] * 3 and all(c["agent"] == "gemini" for c in cps)
    assert cps[-1]["prompt"].startswith("Create the app skeleton")
    one = changes(proj, 1)
    assert one["src/app.py"]["source"] == "tool" and one["src/app.py"]["tool"] == "write_file"
    assert one["notes.md"]["source"] == "tool"
    assert one["made_by_shell.txt"]["source"] == "bash" and one["made_by_shell.txt"]["command"] == "echo x > made_by_shell.txt"
    two = changes(proj, 2)
    assert two["config.ini"]["source"] == "tool" and two["config.ini"]["tool"] == "replace"
    assert two["app_link.py"]["source"] == "bash" and "symlink" in two["app_link.py"]["flags"]
    assert two["old.log"]["status"] == "deleted" and two["old.log"]["source"] == "bash"
    three = changes(proj, 3)
    assert three["docs/made_by_shell.txt"]["source"] == "bash"
    assert three["docs/index.md"]["source"] == "tool"
    rewind_story(proj, (".git", ".gemini"), {
        1: {"config.ini": "[core]\nname = demo\nlevel = 1\n", "old.log": "stale log line\n", "src/app.py": None,
            "notes.md": None, "made_by_shell.txt": None},
        2: {"src/app.py": "def main():\n    print('hello')\n", "made_by_shell.txt": "x\n",
            "config.ini": "[core]\nname = demo\nlevel = 1\n", "app_link.py": None},
        3: {"config.ini": "[core]\nname = demo\nlevel = 2\n", "app_link.py": ("link", "src/app.py"),
            "old.log": None, "made_by_shell.txt": "x\n", "docs": None},
    })
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert not log.exists(), log.read_text()


@pytest.mark.skipif(not CODEX, reason=no_cli("codex"))
@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_real_codex_session_is_recorded_attributed_and_rewindable(tmp_path, watch):
    # the wrapper installs into $CODEX_HOME (the harness's isolated one): hooks.json and the
    # [hooks.state] trust entries in config.toml; no bypass flag anywhere
    proj = session(tmp_path, "codex", "--codex", wrapper(tmp_path, "codex", CODEX, "user"), watch=watch)
    cps = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)
    assert [c["kind"] for c in cps] == ["prompt"] * 3 and all(c["agent"] == "codex" for c in cps)
    assert cps[-1]["prompt"].startswith("Create the app skeleton")
    one = changes(proj, 1)
    assert one["src/app.py"]["source"] == "tool" and one["src/app.py"]["tool"] == "apply_patch"
    assert one["notes.md"]["source"] == "tool"
    assert one["made_by_shell.txt"]["source"] == "bash"
    two = changes(proj, 2)
    assert two["config.ini"]["source"] == "tool" and two["src/app.py"]["source"] == "tool"
    assert two["app_link.py"]["source"] == "bash" and "symlink" in two["app_link.py"]["flags"]
    three = changes(proj, 3)
    assert three["docs/made_by_shell.txt"]["source"] == "bash"
    assert three["notes.md"]["status"] == "deleted" and three["notes.md"]["source"] == "tool"
    assert three["docs/README.md"]["source"] == "tool"
    rewind_story(proj, (".git", ".codex"), {
        1: {"config.ini": "[core]\nname = demo\nlevel = 1\n", "old.log": "stale log line\n", "src/app.py": None,
            "notes.md": None},
        2: {"src/app.py": "def main():\n    print('hello')\n", "made_by_shell.txt": "x\n", "app_link.py": None},
        3: {"src/app.py": "def main():\n    print('hello, world')\n", "app_link.py": ("link", "src/app.py"),
            "old.log": None, "docs": None, "notes.md": "# notes\n\n- first prompt\n"},
    })
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert not log.exists(), log.read_text()
