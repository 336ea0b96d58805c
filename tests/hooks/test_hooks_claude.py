"""Claude Code's real hook payloads (2.1.197, captured by tests/agents/claude) replayed through
`rewind hook claude`, with the tools' effects really carried out."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import REWIND, fingerprint, harness, run_rewind, write
from rewind.cli.replay import bundled_session, fill, hook_in_process, replay

CAPTURED = harness("claude") / "payloads"
SETUP = {"README.md": "# demo project\n", "config.ini": "[core]\nname = demo\nlevel = 1\n",
         "old.log": "stale log line\n", "a.txt": "alpha\n"}


def _session(root, tmp_path, session="s-1"):
    return [fill(p, str(root), session, str(tmp_path / "cfg")) for p in bundled_session()]


def deliver_by_process(root):
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))

    def deliver(payload):
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env,
                           cwd=payload.get("cwd") if os.path.isdir(payload.get("cwd", "")) else root,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout == "", (payload["hook_event_name"], r.stdout, r.stderr)
    return deliver


def test_the_bundled_payloads_are_the_captured_ones():
    captured = [json.loads(line)["payload"] for f in ("sequence.jsonl", "edge/sequence.jsonl")
                for line in (CAPTURED / f).read_text().splitlines()]
    captured = [p for p in captured if p["hook_event_name"] not in ("PostToolBatch", "CwdChanged")]
    assert bundled_session() == captured


@pytest.fixture
def played(tmp_path):
    """The scripted multi-prompt session, played through the real `rewind hook claude`
    processes, with a hand edit between prompts 1 and 2; the tree at each prompt kept."""
    root = tmp_path / "proj"
    for name, text in SETUP.items():
        write(root, name, text)
    at_prompt = []

    def between(payload):
        if len(at_prompt) == 1:
            with open(root / "README.md", "a") as f:
                f.write("edited by hand\n")
        at_prompt.append(fingerprint(root))

    replay(_session(root, tmp_path), deliver_by_process(root), between)
    return root, at_prompt


def test_a_scripted_session_is_recorded_and_attributed(played):
    root, at_prompt = played
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["id"] for c in cps] == [5, 4, 3, 2, 1]
    assert cps[-1]["prompt"].startswith("Create the app skeleton")
    assert cps[0]["prompt"] == "Where does the next prompt start?"
    assert all(c["kind"] == "prompt" and c["agent"] == "claude" for c in cps)

    def changes(n):
        shown = json.loads(run_rewind("show", str(n), "--json", cwd=root, check=0).stdout)
        return {c["path"]: c for c in shown["changes"]}

    one = changes(1)
    assert one["src/app.py"]["source"] == "tool" and one["src/app.py"]["tool"] == "Write"
    assert one["made_by_bash.txt"]["source"] == "bash"
    assert one["made_by_bash.txt"]["command"] == "echo x > made_by_bash.txt"
    assert one["README.md"]["source"] == "external"
    two = changes(2)
    assert two["config.ini"]["source"] == "tool" and two["config.ini"]["tool"] == "Edit"
    assert two["old.log"]["status"] == "deleted" and two["old.log"]["source"] == "bash"
    assert two["app_link.py"]["source"] == "bash" and "symlink" in two["app_link.py"]["flags"]
    four = changes(4)
    # a command that wrote a file and then failed (PostToolUseFailure) is still `bash`
    assert four["partial.txt"]["source"] == "bash"
    assert four["partial.txt"]["command"] == "echo y > partial.txt && exit 3"
    # written after `cd sub`: the project is still the root, not the new cwd
    assert four["sub/in_cwd.txt"]["source"] == "bash"


def test_to_each_checkpoint_gives_back_its_tree_and_undo_returns(played):
    root, at_prompt = played
    final = fingerprint(root)
    for n in range(len(at_prompt), 0, -1):
        run_rewind("to", str(n), "--yes", cwd=root, check=0)
        assert fingerprint(root) == at_prompt[n - 1], n
    for _ in range(len(at_prompt)):
        run_rewind("undo", "--yes", cwd=root, check=0)
    assert fingerprint(root) == final


def test_to_names_the_paths_someone_else_changed(played):
    root, _ = played
    write(root, "config.ini", "my own edit after the agent\n")
    out = run_rewind("to", "2", "--dry-run", cwd=root, check=0).stdout
    line = [x for x in out.splitlines() if x.strip().startswith("config.ini")][0]
    assert "not written by the agent" in line
    line = [x for x in out.splitlines() if x.strip().startswith("docs/index.md")][0]
    assert "tool (Edit)" in line and "not written" not in line


def test_after_to_and_undo_a_persons_edit_put_back_is_still_not_the_agents(played):
    """The restore's changes stay `rewind`, and name who wrote what they put back: the
    next plan still warns before overwriting the person's edit."""
    root, _ = played
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    run_rewind("undo", "--yes", cwd=root, check=0)
    undo_cp = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]
    assert undo_cp["kind"] == "rewind" and undo_cp["message"] == "undo"
    shown = {c["path"]: c for c in json.loads(run_rewind("show", str(undo_cp["id"]), "--json", cwd=root,
                                                           check=0).stdout)["changes"]}
    readme = shown["README.md"]
    assert readme["source"] == "rewind"
    assert readme["restored_author"]["source"] == "external"
    assert readme["restored_author"]["checkpoint"] == undo_cp["restore_target"]
    assert shown["src/app.py"]["restored_author"]["source"] == "tool"
    assert shown["src/app.py"]["restored_author"]["tool"] == "Edit"
    out = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    line = [x for x in out.splitlines() if x.strip().startswith("README.md")][0]
    assert "not written by the agent" in line and "rewind" in line, line
    line = [x for x in out.splitlines() if x.strip().startswith("src/app.py")][0]
    assert "not written" not in line, line
    assert sum("not written by the agent" in x for x in out.splitlines()) == 1, out


BAD_PAYLOADS = [
    b"not json at all",
    b"",
    b"[1, 2, 3]",
    b'{"hook_event_name": 42, "session_id": ["x"]}',
    b'{"hook_event_name": "UserPromptSubmit"}',
    b'{"hook_event_name": "NoSuchEvent", "session_id": "s", "cwd": "/"}',
    b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write", "tool_input": "oops"}',
    b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": 7}}',
    b'{"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": "relative/dir", "prompt": "x"}',
    b'{"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": "/", "prompt": "x"}',
    b'{"hook_event_name": "SessionStart", "session_id": "s\\u0000x", "cwd": "/nonexistent/dir"}',
    b'\xff\xfe invalid utf-8 {',
]


@pytest.mark.parametrize("payload", BAD_PAYLOADS)
def test_bad_payloads_exit_0_print_nothing_and_change_nothing(tmp_path, payload):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    before = fingerprint(root)
    env = dict(os.environ)
    env.pop("CLAUDE_PROJECT_DIR", None)
    r = subprocess.run([*REWIND, "hook", "claude"], input=payload, cwd=root, env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == b""
    assert fingerprint(root) == before


def test_bad_payloads_are_logged(tmp_path):
    subprocess.run([*REWIND, "hook", "claude"], input=b"{broken", capture_output=True, timeout=60)
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert "not JSON" in log.read_text()


def test_hostile_edit_targets_never_write_outside_or_break(tmp_path):
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(root, "a.txt", "a")
    write(outside, "secret.txt", "s")
    os.symlink(outside, root / "escape")
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))
    targets = [str(outside / "secret.txt"), "../outside/secret.txt", str(root / "escape/secret.txt"),
               str(root / "../outside/x"), "a.txt", "", "x" * 5000, str(root / "a.txt") + "\u0000z"]
    before_out = fingerprint(outside)
    for t in targets:
        for event in ("PreToolUse", "PostToolUse"):
            payload = {"hook_event_name": event, "session_id": "s", "cwd": str(root),
                       "tool_name": "Write", "tool_use_id": "t", "tool_input": {"file_path": t, "content": "x"}}
            r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and r.stdout == ""
    assert fingerprint(outside) == before_out
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": "p"}
    subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(prompt), env=env, check=True, timeout=60, text=True)
    shown = json.loads(run_rewind("show", "last~0", "--json", cwd=root, check=0).stdout)
    assert shown["kind"] == "prompt"
    log = (Path(os.environ["REWIND_HOME"]) / "rewind.log")
    assert not log.exists() or "Traceback" not in log.read_text()


def test_a_2mb_prompt_is_recorded_whole(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    big = "p" * (2 * 1024 * 1024)
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": big}
    r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, CLAUDE_PROJECT_DIR=str(root)))
    assert r.returncode == 0 and r.stdout == ""
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    assert shown["prompt"] == big


def test_the_first_hook_calls_of_a_fresh_store_in_parallel_lose_nothing(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))

    def fire(i):
        payload = {"hook_event_name": "UserPromptSubmit", "session_id": f"s{i}", "cwd": str(root),
                   "prompt": f"prompt {i}", "prompt_id": f"p{i}"}
        return subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env,
                              capture_output=True, text=True, timeout=120)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(fire, range(8)))
    assert all(r.returncode == 0 and r.stdout == "" for r in results)
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert sorted(c["prompt"] for c in cps) == sorted(f"prompt {i}" for i in range(8))
    assert sorted(c["id"] for c in cps) == list(range(1, 9))
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    assert not log.exists(), log.read_text()


def test_in_process_replay_matches(tmp_path):
    root = tmp_path / "proj"
    for name, text in SETUP.items():
        write(root, name, text)
    replay(_session(root, tmp_path), hook_in_process(str(root)))
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert len(cps) == 5


def test_two_shell_windows_open_at_once_are_reported_as_ambiguous(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    deliver = hook_in_process(str(root))

    def ev(name, session, **extra):
        return {"hook_event_name": name, "session_id": session, "cwd": str(root), **extra}
    deliver(ev("UserPromptSubmit", "A", prompt="first"))
    deliver(ev("PreToolUse", "A", tool_name="Bash", tool_use_id="a1", tool_input={"command": "make a"}))
    deliver(ev("PreToolUse", "B", tool_name="Bash", tool_use_id="b1", tool_input={"command": "make b"}))
    write(root, "who.txt", "either of them")
    deliver(ev("PostToolUse", "A", tool_name="Bash", tool_use_id="a1", tool_input={"command": "make a"}))
    deliver(ev("PostToolUse", "B", tool_name="Bash", tool_use_id="b1", tool_input={"command": "make b"}))
    write(root, "after.txt", "nobody's window")
    deliver(ev("UserPromptSubmit", "A", prompt="second"))
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert shown["who.txt"]["source"] == "bash" and "ambiguous" in shown["who.txt"]["flags"]
    assert "make a" in shown["who.txt"]["command"] and "make b" in shown["who.txt"]["command"]
    assert shown["after.txt"]["source"] == "external"


def test_an_edit_after_the_tool_wrote_is_not_blamed_on_the_tool(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    deliver = hook_in_process(str(root))
    target = str(root / "a.txt")

    def ev(name, **extra):
        return {"hook_event_name": name, "session_id": "S", "cwd": str(root), **extra}
    deliver(ev("UserPromptSubmit", prompt="edit a"))
    deliver(ev("PreToolUse", tool_name="Write", tool_use_id="w", tool_input={"file_path": target, "content": "tool"}))
    write(root, "a.txt", "tool")
    deliver(ev("PostToolUse", tool_name="Write", tool_use_id="w", tool_input={"file_path": target, "content": "tool"}))
    write(root, "b.txt", "b by hand")
    deliver(ev("Stop"))
    deliver(ev("UserPromptSubmit", prompt="next"))
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert shown["a.txt"]["source"] == "tool" and shown["a.txt"]["tool"] == "Write"
    assert shown["b.txt"]["source"] == "external"
    # a hand edit of the same file after the tool: the latest change is not the tool's
    write(root, "a.txt", "hand over the tool's work")
    deliver(ev("Stop"))
    live = {c["path"]: c for c in json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)["changes"]}
    assert live["a.txt"]["source"] == "external"


def test_a_background_command_and_its_task_notification_parse_as_captured():
    """Claude Code 2.1.197's own payloads (payloads/background, stream mode): the Bash call's
    PostToolUse names its background task, each Stop the tasks still running, and the task's
    end comes as a prompt of its own."""
    from rewind.hooks import claude
    seq = [json.loads(line) for line in (harness("claude") / "payloads/background/sequence.jsonl").open()]
    events = [claude.parse(r["payload"], r.get("env", {})) for r in seq]
    post = next(e for e in events if e and e.kind == "post_tool" and e.tool == "Bash")
    assert post.background and post.command.startswith("sleep 1; echo one")
    stops = [e for e in events if e and e.kind == "stop"]
    assert stops[0].running_tasks == [post.background] and stops[-1].running_tasks == []
    prompts = [e for e in events if e and e.kind == "prompt"]
    assert [p.prompt_source for p in prompts] == [None, None, "task-notification"]
    task = prompts[-1].task
    assert task["task_id"] == post.background and task["tool_use_id"] == post.tool_use_id
    assert task["status"] == "completed" and task["summary"].startswith('Background command "build"')
    # a person's prompt that merely mentions the tag is a prompt
    person = dict(seq[1]["payload"], prompt="what does <task-notification> mean?")
    assert claude.parse(person, {}).task is None
