"""The conversation fork: its refusals, on transcripts it cannot use; the lines it keeps,
copied byte for byte (a cut emoji as Node writes it, bytes that are not UTF-8); and the real
Claude Code resuming such a fork (the plain real format is exercised end to end in
test_e2e_claude.py)."""

from __future__ import annotations

import json

import pytest

from rewind.errors import RewindError
from rewind.history.conversation import fork
from rewind.model import Checkpoint


def cp(tmp_path, lines, **kw) -> Checkpoint:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    base = dict(project_id=1, number=2, kind="prompt", created_at="", created_ns=0, tree="", agent="claude",
                session_id="s", prompt_id="p2", transcript_path=str(path), message="second")
    return Checkpoint(**{**base, **kw})


def user(text, pid, sid="s"):
    return {"type": "user", "promptId": pid, "sessionId": sid, "message": {"role": "user", "content": text}}


def test_the_cut_is_before_the_prompt_and_every_entry_moves_to_the_new_session(tmp_path):
    c = cp(tmp_path, [user("first", "p1"), {"type": "assistant", "sessionId": "s", "message": {"content": []}},
                      "this line is not JSON", {"type": "queue-operation", "sessionId": "s"},
                      user("second", "p2"), {"type": "assistant", "sessionId": "s"}])
    new_id, path = fork(c)
    got = open(path).read().splitlines()
    assert [json.loads(x)["sessionId"] for x in got if x.startswith("{")] == [new_id, new_id]
    assert "this line is not JSON" in got and len(got) == 3          # the queueing of "second" is cut
    assert open(c.transcript_path).read().count("second") == 1        # the original is untouched


def test_the_dry_run_names_the_file_the_fork_writes_and_a_fork_again_is_the_same_session(tmp_path):
    c = cp(tmp_path, [user("first", "p1"), {"type": "assistant", "sessionId": "s"}, user("second", "p2")])
    planned = fork(c, dry_run=True)
    assert not (tmp_path / f"{planned[0]}.jsonl").exists()
    assert fork(c) == planned and open(planned[1]).read().count(planned[0]) == 2
    assert fork(c) == planned                                # the same point again: the same session
    with open(planned[1], "a") as f:                          # the fork resumed and continued
        f.write(json.dumps(user("more", "p9", sid=planned[0])) + "\n")
    again = fork(c, dry_run=True)
    assert again[0] != planned[0] and fork(c) == again
    assert "more" in open(planned[1]).read() and "more" not in open(again[1]).read()


def test_the_resume_command_names_a_config_dir_that_is_not_the_default(tmp_path, monkeypatch):
    from rewind.cli.restore_view import resume_command
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr("rewind.cli.render.display_path", lambda p: p)
    cases = [("claude", tmp_path / "cfg dir" / "projects" / "-proj" / "abc.jsonl",
              f"CLAUDE_CONFIG_DIR='{tmp_path / 'cfg dir'}' claude --resume abc"),
             ("claude", tmp_path / "home" / ".claude" / "projects" / "-proj" / "abc.jsonl", "claude --resume abc"),
             ("qwen", tmp_path / "q" / "projects" / "-proj" / "chats" / "abc.jsonl",
              f"QWEN_RUNTIME_DIR={tmp_path / 'q'} qwen --resume abc"),
             ("qwen", tmp_path / "home" / ".qwen" / "projects" / "-proj" / "chats" / "abc.jsonl", "qwen --resume abc"),
             ("copilot", tmp_path / "c" / "session-state" / "abc" / "events.jsonl",
              f"COPILOT_HOME={tmp_path / 'c'} copilot --resume=abc"),
             ("copilot", tmp_path / "home" / ".copilot" / "session-state" / "abc" / "events.jsonl",
              "copilot --resume=abc"),
             ("opencode", tmp_path / "d" / "opencode" / "opencode.db", f"XDG_DATA_HOME={tmp_path / 'd'} opencode --session abc"),
             ("opencode", tmp_path / "home" / ".local" / "share" / "opencode" / "opencode.db", "opencode --session abc")]
    for agent, where, command in cases:
        c = Checkpoint(project_id=1, number=2, kind="prompt", created_at="", created_ns=0, tree="", agent=agent)
        assert resume_command(c, "/proj", "abc", str(where)) == f"cd /proj && {command}", agent


def test_by_prompt_text_when_the_agent_sent_no_prompt_id(tmp_path):
    c = cp(tmp_path, [user("first", None), {"type": "assistant", "sessionId": "s"}, user("second", None)],
           prompt_id=None)
    _, path = fork(c)
    assert "second" not in open(path).read()


@pytest.mark.parametrize("case, message", [
    ("format", "does not understand"), ("first", "before the first prompt"), ("missing", "cannot read"),
    ("agent", "Claude Code, Gemini CLI, Qwen Code, Copilot CLI and OpenCode sessions")])
def test_refusals_are_clear(tmp_path, case, message):
    if case == "format":
        c = cp(tmp_path, [{"kind": "something else entirely"}])
    elif case == "first":
        c = cp(tmp_path, [user("second", "p2")])
    elif case == "missing":
        c = cp(tmp_path, [], transcript_path=str(tmp_path / "gone.jsonl"))
    else:
        c = cp(tmp_path, [], agent="cursor")
    with pytest.raises(RewindError, match=message):
        fork(c)


# -- lines the fork keeps are Claude Code's bytes ------------------------------------------

SID, P1, P2 = "5b1d6a0e-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000001", \
    "00000000-0000-4000-8000-000000000002"


def _entry(kind: str, sid: str, extra: str) -> bytes:
    """A transcript line as Node's JSON.stringify writes one (no spaces, raw UTF-8)."""
    return (b'{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/p","sessionId":"'
            + sid.encode() + b'","version":"2.1.197","type":"' + kind.encode() + b'",' + extra + b'}')


def transcript_lines(sid: str = SID) -> list[bytes]:
    """Two prompts; before the second: a cut emoji (the escape Node writes for a lone
    surrogate), raw bytes that are not UTF-8, non-ASCII, number and escape spellings that
    Python would write differently, and a nested sessionId that is not the entry's."""
    return [
        _entry("user", sid, b'"promptId":"' + P1.encode() + b'","message":{"role":"user","content":"first \xc3\xa9t\xc3\xa9"}'),
        _entry("assistant", sid, b'"message":{"content":[{"type":"text","text":"cut emoji: \\ud83d and \\ud83d\\ude00 '
                                 b'\\u00e9 \\/ \\u001b"}],"usage":{"cost":1.0,"big":1e21,"tiny":5E-7}}'),
        _entry("user", sid, b'"message":{"content":[{"type":"tool_result","content":"bytes \xff\xfe \xed\xa0\xbd"}]},'
                            b'"toolUseResult":{"sessionId":"another-session","stdout":"\xc3("}'),
        b'this line is not JSON \xff',
        _entry("user", sid, b'"promptId":"' + P2.encode() + b'","message":{"role":"user","content":"second"}'),
        _entry("assistant", sid, b'"message":{"content":[{"type":"text","text":"after the cut"}]}'),
    ]


def expected_fork(lines: list[bytes], new_id: str, sid: str = SID) -> list[bytes]:
    """The kept lines with the entry's own sessionId value replaced and nothing else."""
    old = b'"sessionId":"' + sid.encode() + b'"'
    out = []
    for line in lines[:4]:
        assert line.count(old) <= 1
        out.append(line.replace(old, b'"sessionId":"' + new_id.encode() + b'"'))
    return out


def test_kept_lines_are_copied_byte_for_byte_surrogates_and_invalid_utf8_included(tmp_path):
    lines = transcript_lines()
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    base = dict(project_id=1, number=2, kind="prompt", created_at="", created_ns=0, tree="", agent="claude",
                session_id=SID, prompt_id=P2, transcript_path=str(path), message="second")
    new_id, out = fork(Checkpoint(**base))
    got = open(out, "rb").read()
    assert got.split(b"\n") == expected_fork(lines, new_id) + [b""]
    assert b"another-session" in got                        # a nested sessionId is not the entry's
    # by prompt text too (no prompt id), a prompt that holds the cut emoji
    lines[4] = lines[4].replace(b'"content":"second"', b'"content":"second \\ud83d"').replace(P2.encode(), b"x")
    path.write_bytes(b"\n".join(lines) + b"\n")
    new_id, out = fork(Checkpoint(**{**base, "prompt_id": None, "message": "second \\ud83d"}))   # as stored
    assert open(out, "rb").read().split(b"\n") == expected_fork(lines, new_id) + [b""]


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_rewind_to_conversation_only_forks_such_a_transcript_from_a_real_hook_session(tmp_path, watch):
    import os
    import subprocess

    from helpers import REWIND, run_rewind, write
    from rewind.cli.replay import bundled_session, fill

    proj = tmp_path / "proj"
    write(proj, "a.txt", "alpha\n")
    cfg = tmp_path / "cfg"
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(proj), REWIND_WATCH=watch)
    prompts = 0
    for p in bundled_session():
        if p["hook_event_name"] not in ("SessionStart", "UserPromptSubmit") or prompts == 2:
            continue
        p = fill(p, str(proj), SID, str(cfg))
        if p["hook_event_name"] == "UserPromptSubmit":
            prompts += 1
            if prompts == 1:       # the transcript Claude Code writes as the session goes
                transcript = p["transcript_path"]
                os.makedirs(os.path.dirname(transcript), exist_ok=True)
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), env=env, cwd=proj,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout == "", r
    shown = json.loads(run_rewind("show", "2", "--json", cwd=proj, check=0).stdout)
    assert shown["agent"] == "claude" and shown["session_id"] == SID
    lines = transcript_lines()
    with open(transcript, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    before = open(transcript, "rb").read()
    r = run_rewind("to", "2", "--conversation-only", "--yes", cwd=proj, env={"REWIND_WATCH": watch})
    assert r.returncode == 0, (r.stdout, r.stderr)
    new_id = r.stdout.split("claude --resume ")[1].split()[0]
    forked = os.path.join(os.path.dirname(transcript), new_id + ".jsonl")
    assert open(forked, "rb").read().split(b"\n") == expected_fork(lines, new_id) + [b""]
    assert open(transcript, "rb").read() == before           # the original is never modified
    assert (proj / "a.txt").read_text() == "alpha\n"         # and the files are left alone


# -- and the real Claude Code resumes such a fork --------------------------------------------

@pytest.mark.e2e
def test_real_claude_resumes_a_fork_of_a_transcript_with_a_cut_emoji(tmp_path):
    """The real CLI (2.1.197, tests/agents/claude) writes the transcript; a cut emoji is put
    into one of its assistant lines as Node writes one; `rewind to 2 --conversation-only`
    forks it byte for byte and `claude --resume` continues it."""
    import os
    import subprocess
    import sys

    from helpers import AGENTS, REWIND, agent_cli, no_cli, resume_with_mock, run_rewind

    harness = AGENTS / "claude"
    claude = agent_cli("claude")
    if not claude:
        pytest.skip(no_cli("claude"))
    proj = tmp_path / "proj"
    r = subprocess.run([sys.executable, str(harness / "run_session.py"), "--claude", claude, "--project-dir", str(proj),
                        "--fresh", "--scenario", str(harness / "scenario.json"), "--mode", "resume",
                        "--hook-command", " ".join(REWIND) + " hook claude",
                        "--events", "SessionStart,UserPromptSubmit,PreToolUse,PostToolUse,Stop,SessionEnd"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, IS_SANDBOX="1"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [transcript] = (tmp_path / "proj.realclient-out" / "claude-config" / "projects").rglob("*.jsonl")
    data = transcript.read_bytes()
    assert data.count(b"I'll create the files.") == 1
    transcript.write_bytes(data.replace(b"I'll create the files.", b"I'll create the files. \\ud83d"))
    lines = transcript.read_bytes().split(b"\n")
    sid = transcript.stem
    out = run_rewind("to", "2", "--conversation-only", "--yes", cwd=proj, check=0).stdout
    new_id = out.split("claude --resume ")[1].split()[0]
    forked = (transcript.parent / f"{new_id}.jsonl").read_bytes().split(b"\n")
    old, new = f'"sessionId":"{sid}"'.encode(), f'"sessionId":"{new_id}"'.encode()
    assert forked[-1] == b"" and len(forked) > 2
    for got in forked[:-1]:                       # each kept line is an original one, as it was
        assert got.replace(new, old) in lines and got.count(new) <= 1, got
    assert any(b"\\ud83d" in got for got in forked)
    asked = resume_with_mock(claude, harness, proj, transcript.parents[2], new_id, tmp_path)
    assert asked and "Create the app skeleton" in asked[-1] and "I'll create the files." in asked[-1]
    assert "Bump the level" not in asked[-1]
