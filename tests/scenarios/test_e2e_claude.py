"""End to end with the real Claude Code CLI (2.1.197) against a local mock of the model API
(tests/agents/claude): real tool calls, real hooks, `rewind hook claude` as installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import MAKE_TREE, REWIND, agent_cli, fingerprint, harness, no_cli, resume_with_mock, run_rewind

HARNESS = harness("claude")
CLAUDE = agent_cli("claude")

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not CLAUDE, reason=no_cli("claude"))]


def _run(tmp_path, scenario, mode, events=True, watch="0"):
    proj = tmp_path / "proj"
    hook = " ".join(REWIND) + " hook claude"
    r = subprocess.run([sys.executable, str(HARNESS / "run_session.py"), "--claude", CLAUDE,
                        "--project-dir", str(proj), "--fresh", "--scenario", str(HARNESS / scenario),
                        "--mode", mode, "--hook-command", hook]
                       + (["--events", "SessionStart,UserPromptSubmit,PreToolUse,PostToolUse,Stop,SessionEnd"]
                          if events else []),
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, IS_SANDBOX="1", REWIND_WATCH=watch))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return proj


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_real_claude_code_session_is_recorded_attributed_and_rewindable(tmp_path, watch):
    proj = _run(tmp_path, "scenario.json", "stream", watch=watch)
    cps = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)
    assert [c["kind"] for c in cps] == ["prompt"] * 3
    assert cps[-1]["prompt"].startswith("Create the app skeleton")
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=proj, check=0).stdout)["changes"]}
    assert shown["src/app.py"]["source"] == "tool" and shown["src/app.py"]["tool"] == "Write"
    assert shown["made_by_bash.txt"]["source"] == "bash"
    two = {c["path"]: c for c in json.loads(run_rewind("show", "2", "--json", cwd=proj, check=0).stdout)["changes"]}
    assert two["config.ini"]["source"] == "tool"
    assert two["app_link.py"]["source"] == "bash" and "symlink" in two["app_link.py"]["flags"]
    final = fingerprint(proj, skip=(".git", ".claude"))
    run_rewind("to", "1", "--yes", cwd=proj, check=0)
    assert not (proj / "src/app.py").exists() and (proj / "old.log").exists()
    run_rewind("undo", "--yes", cwd=proj, check=0)
    assert fingerprint(proj, skip=(".git", ".claude")) == final
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert not log.exists(), log.read_text()
    if watch == "1":
        status = json.loads(run_rewind("status", "--json", cwd=proj, check=0).stdout)["watcher"]
        assert status["quick_scans"] > 0 and status["fallbacks"] == 0, status
        assert status["running"], status        # it outlives the sessions (one per prompt in resume mode)


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_failing_command_that_changed_files_is_attributed_to_it(tmp_path, watch):
    # the scenario's own event list: every event Claude Code fires, PostToolUseFailure,
    # PostToolBatch and CwdChanged included (rewind ignores the ones it does not use)
    proj = _run(tmp_path, "scenario_edge.json", "stream", events=False, watch=watch)
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=proj, check=0).stdout)["changes"]}
    assert shown["partial.txt"]["source"] == "bash"
    assert shown["partial.txt"]["command"].startswith("echo y > partial.txt")
    assert shown["sub/in_cwd.txt"]["source"] == "bash"


def test_the_conversation_forks_to_before_a_checkpoint_and_claude_resumes_it(tmp_path):
    proj = _run(tmp_path, "scenario.json", "resume")
    transcripts = list((tmp_path / "proj.realclient-out" / "claude-config" / "projects").rglob("*.jsonl"))
    assert len(transcripts) == 1
    original = transcripts[0].read_bytes()
    config = transcripts[0].parents[2]
    dry = run_rewind("to", "2", "--dry-run", "--conversation-only", cwd=proj, check=0).stdout
    named = dry.split("prompt: ")[1].split("\n")[0]
    out = run_rewind("to", "2", "--yes", "--conversation", cwd=proj, check=0).stdout
    new_id = out.split("claude --resume ")[1].split()[0]
    assert named == str(transcripts[0].parent / f"{new_id}.jsonl")     # the dry run named the file written
    assert f"CLAUDE_CONFIG_DIR={config} claude --resume {new_id}" in out     # where the transcript lives
    assert (proj / "src/app.py").read_text() == "def main():\n    print('hello')\n"   # the files too
    assert transcripts[0].read_bytes() == original                                    # never modified
    # continue the forked session with the real CLI against a mock that answers one prompt
    asked = resume_with_mock(CLAUDE, HARNESS, proj, config, new_id, tmp_path)
    assert asked
    assert "Create the app skeleton" in asked[-1]                    # the conversation before checkpoint 2
    assert "Bump the level" not in asked[-1] and "Move the marker" not in asked[-1]   # nothing after it


@pytest.mark.parametrize("mode,watch", [("resume", "1"), ("stream", "1"), ("resume", "0")],
                         ids=["resume-with-watcher", "stream-with-watcher", "resume-hooks-only"])
def test_the_first_prompt_in_a_big_fresh_tree_does_not_wait_and_its_checkpoint_is_the_tree_at_the_prompt(
        tmp_path, mode, watch):
    """A fresh clone of a big project: the first prompt comes while the watcher's first scan
    runs (seconds here). The agent writes, edits and runs commands right after the prompt,
    during the scan; checkpoint 1 is still the tree as it was at the prompt."""
    proj = tmp_path / "proj"
    subprocess.run([sys.executable, str(MAKE_TREE), "gen", str(proj), "--files", "12000"], check=True,
                   capture_output=True)
    hook = " ".join(REWIND) + " hook claude"
    r = subprocess.run([sys.executable, str(HARNESS / "run_session.py"), "--claude", CLAUDE,
                        "--project-dir", str(proj), "--scenario", str(HARNESS / "scenario.json"),
                        "--mode", mode, "--hook-command", hook,
                        "--events", "SessionStart,UserPromptSubmit,PreToolUse,PostToolUse,Stop,SessionEnd"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, IS_SANDBOX="1", REWIND_WATCH=watch))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cps = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)
    assert [c["id"] for c in cps] == [3, 2, 1] and not any(c.get("pending") for c in cps), cps
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        first = cat.checkpoint(cat.project_id(str(proj), create=False), 1).stats.get("first_scan")
    finally:
        cat.close()
    if watch == "1":
        assert first is not None and first["by"] == "watcher", first     # it was pending, and completed
        assert first["changed_outside"] == [] and not first["note"], first
    else:
        assert first is None
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=proj, check=0).stdout)["changes"]}
    assert shown["src/app.py"]["source"] == "tool" and shown["src/app.py"]["status"] == "added"
    assert shown["made_by_bash.txt"]["source"] == "bash"
    final = fingerprint(proj, skip=(".git", ".claude"))
    run_rewind("to", "1", "--yes", cwd=proj, check=0)
    assert not (proj / "src/app.py").exists() and not (proj / "made_by_bash.txt").exists()
    assert (proj / "old.log").exists() and (proj / "config.ini").read_text() == "[core]\nname = demo\nlevel = 1\n"
    run_rewind("undo", "--yes", cwd=proj, check=0)
    assert fingerprint(proj, skip=(".git", ".claude")) == final
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert not log.exists(), log.read_text()


def test_a_real_claude_code_bash_tool_cannot_forget_the_history(tmp_path):
    """Issue "never lose a byte, round two", item 3: the agent's own Bash tool runs
    `rewind forget --yes` (CLAUDECODE is set there, and the shell descends from Claude
    Code's process, whose shell window is open): refused, every checkpoint still listed."""
    rewind = " ".join(REWIND)
    scenario = {"description": "a prompt injection's one line", "setup": {"files": {"a.txt": "a\n"}},
                "prompts": [
                    {"prompt": "Write b.", "turns": [
                        {"tool_uses": [{"name": "Write", "input": {"file_path": "<PROJECT_DIR>/b.txt",
                                                                   "content": "b\n"}}]},
                        {"text": "Done."}]},
                    {"prompt": "Clean up the history.", "turns": [
                        {"tool_uses": [{"name": "Bash", "input": {
                            "command": f"{rewind} forget --yes > forget.out 2>&1; echo rc=$? >> forget.out",
                            "description": "forget"}}]},
                        {"text": "Done."}]}]}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    proj = _run(tmp_path, path, "stream")
    out = (proj / "forget.out").read_text()
    assert "rc=1" in out and "deletes history" in out and "your own terminal" in out, out
    assert [c["kind"] for c in json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)] == ["prompt"] * 2
