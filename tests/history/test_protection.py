"""History belongs to the person (issue "never lose a byte, round two", item 3): the commands
that delete history refuse to run from inside an agent's tool, found by ancestry (a process
of an open shell window of a recorded session among the caller's ancestors) or by the
agents' own markers; a save from an agent's tool never evicts a checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rewind.history.guard import MARKERS
from conftest import AGENT_MARKERS
from helpers import REWIND, project, run_rewind, wait_ready, write

# The fake agent: a real long-lived process, as Claude Code's node process is. It runs the
# hook for a Bash tool call as its own child (so the window records it as the agent), then
# the "tool": a shell that runs the command, and prints what that shell got.
FAKE_AGENT = r"""
import json, os, subprocess, sys
rewind, root, payload, command = json.loads(sys.argv[1])
env = dict(os.environ, CLAUDE_PROJECT_DIR=root)
hook = subprocess.run([*rewind, "hook", "claude"], input=json.dumps(payload), text=True,
                      capture_output=True, cwd=root, env=env, timeout=120)
tool = subprocess.run(["sh", "-c", command], text=True, capture_output=True, cwd=root, env=env,
                      stdin=subprocess.DEVNULL, timeout=120)
print(json.dumps({"hook": hook.returncode, "rc": tool.returncode, "out": tool.stdout, "err": tool.stderr}))
"""


def hook(payload: dict, root, env: dict | None = None):
    return subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), capture_output=True, text=True,
                          cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), **(env or {})}, timeout=120)


def session(root, watch: str, prompts: int = 2) -> dict:
    """A Claude-Code-shaped session with `prompts` checkpoints."""
    base = {"session_id": "sess-1", "cwd": str(root), "transcript_path": str(root / ".t.jsonl")}
    env = {"REWIND_WATCH": watch}
    assert hook({**base, "hook_event_name": "SessionStart", "source": "startup"}, root, env).returncode == 0
    if watch == "1":
        wait_ready(root, timeout=60)
    for i in range(prompts):
        write(root, "a.txt", f"version {i}")
        assert hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": f"prompt {i}"}, root, env).returncode == 0
    return base


def agent_runs(tmp_path, root, base: dict, command: str, watch: str) -> dict:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
           "tool_input": {"command": command}}
    proc = subprocess.run([sys.executable, str(script), json.dumps([REWIND, str(root), pre, command])],
                          capture_output=True, text=True, env={**os.environ, "REWIND_WATCH": watch}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def numbers(root) -> list[int]:
    return [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]


@pytest.mark.parametrize("watch", ["0", "1"])
def test_forget_from_inside_an_open_shell_window_is_refused_and_the_person_may(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    base = session(root, watch)
    assert numbers(root) == [2, 1]
    # no marker in the environment: the ancestry alone tells (conftest cleared them)
    got = agent_runs(tmp_path, root, base, "rewind forget --yes", watch)
    assert got["hook"] == 0
    assert got["rc"] == 1, got
    err = got["err"].strip().splitlines()
    assert err[0].startswith("error: `rewind forget` deletes history") and "Traceback" not in got["err"]
    assert "session sess-1" in err[0] and any("your own terminal" in line for line in err), err
    assert numbers(root) == [2, 1]
    # the window is still open (no PostToolUse came), but the person's own process is not in it
    done = run_rewind("forget", "--yes", cwd=root, check=0)
    assert "forgot 2 checkpoints" in done.stdout
    assert numbers(root) == []


@pytest.mark.parametrize("marker", ["CLAUDECODE", "GEMINI_CLI", "QWEN_CODE", "COPILOT_CLI", "CODEX_MANAGED_BY_NPM",
                                    "CODEX_THREAD_ID"])
def test_an_agents_marker_without_a_window_is_refused(tmp_path, marker):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    proc = run_rewind("forget", "--yes", cwd=root, env={marker: "1"})
    assert proc.returncode == 1 and f"{marker}=1 is set" in proc.stderr and "Traceback" not in proc.stderr
    assert "run `rewind forget` yourself, in your own terminal" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    purge = run_rewind("forget", "--yes", "--", "a.txt", cwd=root, env={marker: "1"})
    assert purge.returncode == 1 and "deletes history" in purge.stderr
    assert numbers(root) == [1]


def test_the_markers_rewind_knows_are_the_ones_the_tests_clear():
    assert set(MARKERS) == AGENT_MARKERS


@pytest.mark.parametrize("where", ["project", "user"])
def test_gc_applying_a_shortened_setting_is_the_persons(tmp_path, where):
    root = tmp_path / "proj"
    for i in range(3):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
    path = root / ".rewind.toml" if where == "project" else tmp_path / "home-cfg"
    env = {}
    if where == "user":
        env = {"REWIND_CONFIG_HOME": str(path)}
        path.mkdir()
        path = path / "config.toml"
    path.write_text("ring_size = 1\n")
    proc = run_rewind("gc", cwd=root, env={**env, "CLAUDECODE": "1"})
    assert proc.returncode == 1 and "shortened ring_size" in proc.stderr and "rewind gc" in proc.stderr
    assert len(json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)) == 1   # hidden only
    # the person's gc applies it, into the trash: recoverable for a day
    run_rewind("gc", cwd=root, env=env, check=0)
    trash = json.loads(run_rewind("trash", "--json", cwd=root, env=env, check=0).stdout)
    assert [t["checkpoints"] for t in trash] == [[1, 2]]
    path.write_text("")
    run_rewind("trash", "--restore", str(trash[0]["batch"]), cwd=root, env=env, check=0)
    assert numbers(root) == [3, 2, 1]
    run_rewind("to", "1", "--yes", cwd=root, env=env, check=0)
    assert (root / "a.txt").read_text() == "v0"


def test_verify_drop_damaged_and_forget_lost_from_an_agent_are_refused(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    home = os.environ["REWIND_HOME"]
    for d, _, files in os.walk(os.path.join(home, "objects")):
        for f in files:
            os.unlink(os.path.join(d, f))
    proc = run_rewind("verify", "--drop-damaged", "--yes", cwd=root, env={"GEMINI_CLI": "1"})
    assert proc.returncode == 1 and "--drop-damaged` deletes history" in proc.stderr
    assert numbers(root) == [1]
    p = project(root)
    try:
        with p.catalog.transaction():
            p.catalog.set_meta(f"lost:{p.id}", json.dumps({"first": 5, "last": 6, "found_ns": 1}))
    finally:
        p.close()
    proc = run_rewind("gc", "--forget-lost", cwd=root, env={"CLAUDECODE": "1"})
    assert proc.returncode == 1 and "--forget-lost` deletes history" in proc.stderr
    p = project(root)
    try:
        assert p.catalog.any_lost()
    finally:
        p.close()
    # the person's own drop goes to the trash
    out = run_rewind("verify", "--drop-damaged", "--yes", cwd=root, check=0).stdout
    assert "trash" in out and numbers(root) == []
    assert [t["checkpoints"] for t in json.loads(run_rewind("trash", "--json", cwd=root, check=0).stdout)] == [[1]]


def test_saves_from_an_agents_tool_never_evict_the_persons_checkpoints(tmp_path):
    root = tmp_path / "proj"
    (root).mkdir()
    (root / ".rewind.toml").write_text("ring_size = 2\n")
    for i in range(2):
        write(root, "a.txt", f"person {i}")
        run_rewind("save", cwd=root, check=0)
    for i in range(3):
        write(root, "a.txt", f"agent {i}")
        run_rewind("save", cwd=root, env={"CLAUDECODE": "1"}, check=0)
    # the agent's saves have a ring of their own (the next command applies it: 3 goes);
    # the person's two are all there
    assert numbers(root) == [5, 4, 2, 1]
    write(root, "a.txt", "person 2")
    run_rewind("save", cwd=root, check=0)
    # the person's ring of 2: 6 and 2 (1 goes, as it would have anyway)
    assert numbers(root) == [6, 5, 4, 2]
