"""The conversation fork of Gemini CLI, Qwen Code, Copilot CLI and OpenCode sessions, on the sessions the
real CLIs wrote in the end-to-end matrix (tests/agents/<agent>/sessions): where the cut is,
that kept events are the agent's bytes with only the session renamed, the refusals, and that
the same point forked again is the same session. The forks resumed by the real CLIs are in
test_e2e_matrix.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rewind.errors import ConversationUnavailable
from rewind.history.conversation import fork
from rewind.history.forks import opencode
from rewind.model import Checkpoint

HERE = Path(__file__).resolve().parent.parent / "agents"
PROMPTS = ("Add a discount module and a guide, then write a report.",
           "Round the totals, point the settings at the new host, move the notes into the guide and link the cart.",
           "Clean the build and try the tests.")
QWEN_ID = "9d7397d5-7ffe-4015-9b10-0dceaf89a4b1"
COPILOT_ID = "6e9481e1-f4ec-44a7-bce6-29206673986a"
GEMINI_ID, GEMINI_FILE = "01373364-110a-461b-972f-9c4ffbdb81f8", "session-2026-12-07T16-59-01373364.jsonl"


def checkpoint(agent: str, session: str, path, number: int = 2, message: str = PROMPTS[1]) -> Checkpoint:
    return Checkpoint(project_id=1, number=number, kind="prompt", created_at="", created_ns=0, tree="", agent=agent,
                      session_id=session, transcript_path=str(path) if path else None, message=message)


@pytest.fixture
def qwen_session(tmp_path) -> Path:
    chats = tmp_path / "home" / ".qwen" / "projects" / "-proj" / "chats"
    chats.mkdir(parents=True)
    return Path(shutil.copy(HERE / "qwen" / "sessions" / f"{QWEN_ID}.jsonl", chats))


@pytest.fixture
def copilot_session(tmp_path) -> Path:
    states = tmp_path / "home" / ".copilot" / "session-state"
    shutil.copytree(HERE / "copilot" / "sessions" / COPILOT_ID, states / COPILOT_ID)
    return states / COPILOT_ID / "events.jsonl"


@pytest.fixture
def gemini_session(tmp_path) -> Path:
    chats = tmp_path / "home" / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    return Path(shutil.copy(HERE / "gemini" / "sessions" / GEMINI_FILE, chats))


@pytest.mark.parametrize("number", [2, 3])
def test_gemini_keeps_the_earlier_prompts_lines_as_they_were_with_the_new_session(gemini_session, number):
    """Gemini CLI's session file (0.61.0, as the real CLI wrote it in the matrix): the lines
    before the prompt's user record, byte for byte but for the session id in the headers
    (one per start of the CLI) and the `$set` lines, in `session-<start>-<id8>.jsonl`."""
    original = gemini_session.read_bytes()
    c = checkpoint("gemini", GEMINI_ID, gemini_session, number=number, message=PROMPTS[number - 1])
    planned = fork(c, dry_run=True)
    assert not Path(planned[1]).exists()
    new_id, path = fork(c)
    assert (new_id, path) == planned == fork(c)                          # the same point again: the same session
    assert Path(path).parent == gemini_session.parent
    assert Path(path).name == f"session-2026-12-07T16-59-{new_id[:8]}.jsonl"
    lines = original.split(b"\n")
    cut = next(i for i, line in enumerate(lines) if PROMPTS[number - 1].encode() in line and b'"type":"user"' in line)
    renamed = b"\n".join(lines[:cut]).replace(b'"sessionId":"%s"' % GEMINI_ID.encode(),
                                             b'"sessionId":"%s"' % new_id.encode())
    assert Path(path).read_bytes() == renamed + b"\n"
    assert GEMINI_ID.encode() not in Path(path).read_bytes()
    assert gemini_session.read_bytes() == original                       # never modified
    written = Path(path).read_text()
    assert all(p in written for p in PROMPTS[:number - 1]) and not any(p in written for p in PROMPTS[number - 1:])
    headers = [json.loads(line) for line in written.splitlines() if '"projectHash"' in line]
    assert len(headers) == number and {h["sessionId"] for h in headers} == {new_id}     # (the prompt's own start too)


def test_gemini_refuses_the_first_prompt_and_resumes_under_its_home(gemini_session, tmp_path):
    from rewind.history.conversation import resume_command
    with pytest.raises(ConversationUnavailable, match="before the first prompt"):
        fork(checkpoint("gemini", GEMINI_ID, gemini_session, number=1, message=PROMPTS[0]))
    c = checkpoint("gemini", GEMINI_ID, gemini_session)
    new_id, path = fork(c, dry_run=True)
    assert resume_command(c, "/p", new_id, path) == \
        f"cd /p && GEMINI_CLI_HOME={tmp_path / 'home'} gemini --resume {new_id}"


def test_gemini_warns_of_its_own_sweep_until_its_settings_turn_it_off(gemini_session, tmp_path):
    """Gemini CLI 0.61 deletes a session resumed in a later minute than it began at its next
    start (its session retention sweep; seen in the matrix): the fork says so, and how to stop
    it, until the user's settings or the workspace's (which win) turn the sweep off."""
    from rewind.history.conversation import caveat
    c = checkpoint("gemini", GEMINI_ID, gemini_session)
    root = tmp_path / "proj"
    (root / ".gemini").mkdir(parents=True)
    user = tmp_path / "home" / ".gemini" / "settings.json"
    workspace = root / ".gemini" / "settings.json"

    def said(user_text: str | None, workspace_text: str | None) -> str | None:
        for path, text in ((user, user_text), (workspace, workspace_text)):
            path.unlink(missing_ok=True)
            if text is not None:
                path.write_text(text)
        return caveat(c, str(root), str(gemini_session))

    off, on = ('{"general": {"sessionRetention": {"enabled": %s}}}' % v for v in ("false", "true"))
    assert "gemini-cli#27368" in said(None, None) and '"enabled": false' in said(None, None)
    assert said('{"general": {}}', '{"hooks": {}}') is not None
    assert said(off, None) is None and said(None, off) is None and said(on, off) is None
    assert said(off, on) is not None                     # the workspace's settings win
    assert said("{ // a comment\n}", None) is not None   # unreadable as JSON: cannot tell, so it says
    assert caveat(checkpoint("qwen", QWEN_ID, gemini_session), str(root), str(gemini_session)) is None


def test_qwen_keeps_the_first_prompts_lines_as_they_were_with_the_new_session(qwen_session):
    original = qwen_session.read_bytes()
    new_id, path = fork(checkpoint("qwen", QWEN_ID, qwen_session))
    assert Path(path).parent == qwen_session.parent and Path(path).name == f"{new_id}.jsonl"
    lines = original.split(b"\n")
    cut = next(i for i, line in enumerate(lines) if PROMPTS[1].encode() in line and b'"type":"user"' in line)
    renamed = b"\n".join(lines[:cut]).replace(b'"sessionId":"%s"' % QWEN_ID.encode(), b'"sessionId":"%s"' % new_id.encode())
    assert Path(path).read_bytes() == renamed + b"\n"         # (its telemetry's prompt ids are history: as they were)
    assert PROMPTS[0].encode() in Path(path).read_bytes()
    assert qwen_session.read_bytes() == original                        # never modified
    entries = [json.loads(line) for line in Path(path).read_bytes().splitlines()]
    assert {e["sessionId"] for e in entries} == {new_id}
    assert entries[-1]["type"] != "user"                                # it ends with the first prompt's answer


def test_qwen_the_dry_run_names_the_fork_and_the_same_point_again_is_the_same_session(qwen_session):
    c = checkpoint("qwen", QWEN_ID, qwen_session)
    planned = fork(c, dry_run=True)
    assert not Path(planned[1]).exists()
    assert fork(c) == planned == fork(c)
    with open(planned[1], "ab") as f:                                   # the fork resumed and continued
        f.write(b'{"type":"user","sessionId":"' + planned[0].encode() + b'"}\n')
    assert fork(c)[0] != planned[0]


@pytest.mark.parametrize("number, message, why", [
    (1, PROMPTS[0], "before the first prompt"), (2, "a prompt nobody typed", "not in"),
])
def test_qwen_refuses_what_it_cannot_fork(qwen_session, number, message, why):
    with pytest.raises(ConversationUnavailable, match=why):
        fork(checkpoint("qwen", QWEN_ID, qwen_session, number, message))
    assert sorted(p.name for p in qwen_session.parent.iterdir()) == [qwen_session.name]


def test_copilot_forks_a_session_folder_without_the_prompts_hooks_and_copilots_own_snapshots(copilot_session):
    folder = copilot_session.parent
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    new_id, path = fork(checkpoint("copilot", COPILOT_ID, copilot_session, 3, PROMPTS[2]))
    new = Path(path).parent
    assert new.parent == folder.parent and new.name == new_id and Path(path).name == "events.jsonl"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before    # the original folder, untouched
    assert sorted(p.name for p in new.iterdir()) == ["events.jsonl", "workspace.yaml"]
    yaml = (new / "workspace.yaml").read_text()
    assert f"id: {new_id}\n" in yaml and COPILOT_ID not in yaml
    events = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert events[0]["type"] == "session.start" and events[0]["data"]["sessionId"] == new_id
    users = [e["data"]["content"] for e in events if e["type"] == "user.message"]
    assert users == list(PROMPTS[:2])
    last = events[-1]
    assert not (last["type"].startswith("hook.") and last["data"].get("hookType") == "userPromptSubmitted")
    assert last["type"] != "session.resume"
    # every kept line but the start is the agent's bytes
    raw = copilot_session.read_bytes().split(b"\n")
    assert Path(path).read_bytes().split(b"\n")[1:-1] == raw[1:len(events)]


def test_copilot_the_same_point_again_is_the_same_session_and_a_first_prompt_is_refused(copilot_session):
    c = checkpoint("copilot", COPILOT_ID, copilot_session)
    planned = fork(c, dry_run=True)
    assert not Path(planned[1]).parent.exists()
    assert fork(c) == planned == fork(c)
    with pytest.raises(ConversationUnavailable, match="before the first prompt"):
        fork(checkpoint("copilot", COPILOT_ID, copilot_session, 1, PROMPTS[0]))
    with pytest.raises(ConversationUnavailable, match="no session folder"):
        fork(checkpoint("copilot", COPILOT_ID, None))


def test_copilot_checkpoints_know_where_the_session_lives(tmp_path):
    from rewind.hooks.copilot import parse
    payload = {"hook_event_name": "userPromptSubmitted", "sessionId": COPILOT_ID, "prompt": "x", "cwd": "/p"}
    assert parse(payload, {"HOME": "/h"}).transcript_path == f"/h/.copilot/session-state/{COPILOT_ID}/events.jsonl"
    assert parse(payload, {"HOME": "/h", "COPILOT_HOME": "/c"}).transcript_path == \
        f"/c/session-state/{COPILOT_ID}/events.jsonl"
    assert parse(dict(payload, sessionId="../x"), {"HOME": "/h"}).transcript_path is None


def test_opencode_checkpoints_know_which_database_holds_the_session():
    from rewind.hooks.opencode import parse
    payload = {"hook_event_name": "chat.message", "directory": "/p", "input": {"sessionID": "ses_1"},
               "output": {"message": {"role": "user"}, "parts": [{"type": "text", "text": "hi"}]}}
    assert parse(payload, {"HOME": "/h"}).transcript_path == "/h/.local/share/opencode/opencode.db"
    assert parse(payload, {"HOME": "/h", "XDG_DATA_HOME": "/d"}).transcript_path == "/d/opencode/opencode.db"
    assert parse(payload, {"XDG_DATA_HOME": "relative"}).transcript_path is None


def test_opencode_ids_keep_their_order_and_every_reference_follows_them():
    data = json.loads((HERE / "opencode" / "sessions" / "export.json").read_text())
    messages = data["messages"]
    olds = [data["info"]["id"]] + [i for m in messages for i in [m["info"]["id"]] + [p["id"] for p in m["parts"]]]
    ids = {old: opencode._new_id(old, "seed") for old in olds}
    assert len(set(ids.values())) == len(ids) and not set(ids.values()) & set(ids)
    assert all(len(new) == len(old) and new[:16] == old[:16] for old, new in ids.items())
    msg_ids = [m["info"]["id"] for m in messages]
    assert sorted(ids[i] for i in msg_ids) == [ids[i] for i in sorted(msg_ids)]      # the order is the original's
    moved = json.dumps(opencode._replaced(data, ids))
    assert not [old for old in olds if old in moved]                    # no reference to the original is left
    assert opencode._new_id(olds[1], "seed") == ids[olds[1]] != opencode._new_id(olds[1], "other")


def test_a_look_into_opencodes_database_reads_and_never_writes(tmp_path):
    """The columns OpenCode 1.18 has (session.id, message.id, message.session_id); any other
    layout, or no database, is Unreadable (the fork then asks `opencode export`)."""
    import sqlite3
    from rewind.catalog.foreign import Unreadable, opencode_messages
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE session (id TEXT PRIMARY KEY); CREATE TABLE message (id TEXT, session_id TEXT);"
                      "INSERT INTO session VALUES ('ses_a'), ('ses_b');"
                      "INSERT INTO message VALUES ('msg_2', 'ses_a'), ('msg_1', 'ses_a'), ('msg_3', 'ses_c');")
    con.close()
    before = db.read_bytes()
    assert opencode_messages(str(db), "ses_a") == ["msg_1", "msg_2"]
    assert opencode_messages(str(db), "ses_b") == [] and opencode_messages(str(db), "ses_c") is None
    assert db.read_bytes() == before
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    for path in (other, tmp_path / "none.db"):
        with pytest.raises(Unreadable):
            opencode_messages(str(path), "ses_a")


def test_opencode_finds_the_prompt_as_typed_and_needs_its_cli(tmp_path, monkeypatch):
    data = json.loads((HERE / "opencode" / "sessions" / "export.json").read_text())
    said = [opencode._prompt_text(m) for m in data["messages"]]
    assert [t for t in said if t is not None] == list(PROMPTS)          # `opencode run`'s quotes taken off
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConversationUnavailable, match="`opencode` is not on PATH"):
        fork(checkpoint("opencode", data["info"]["id"], None))


@pytest.mark.parametrize("agent", ["codex", "cline", "cursor", None])
def test_other_agents_get_one_line_that_says_why(agent, tmp_path):
    with pytest.raises(ConversationUnavailable) as e:
        fork(checkpoint(agent, "s", tmp_path / "x.jsonl"))
    assert "works for Claude Code, Gemini CLI, Qwen Code, Copilot CLI and OpenCode sessions" in e.value.message
    assert "\n" not in e.value.message


def test_an_opencode_dry_run_reads_the_database_and_names_the_session_the_export_gives(tmp_path, monkeypatch):
    """A dry run reads the session from OpenCode's database (its 1.18 layout: ids in columns,
    the rest as JSON in `data`) without a start of OpenCode, and computes the id the real
    run, from `opencode export`, imports; an unreadable database falls back to the export."""
    import sqlite3
    data = json.loads((HERE / "opencode" / "sessions" / "export.json").read_text())
    sid = data["info"]["id"]
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT);"
                      "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT);"
                      "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);")
    con.execute("INSERT INTO session VALUES (?, ?)", (sid, str(tmp_path)))
    for m in reversed(data["messages"]):              # rows in no particular order
        info = {k: v for k, v in m["info"].items() if k not in ("id", "sessionID")}
        con.execute("INSERT INTO message VALUES (?, ?, ?)", (m["info"]["id"], sid, json.dumps(info)))
        for p in reversed(m["parts"]):
            rest = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
            con.execute("INSERT INTO part VALUES (?, ?, ?, ?)", (p["id"], m["info"]["id"], sid, json.dumps(rest)))
    con.commit()
    con.close()
    before = db.read_bytes()
    from rewind.catalog.foreign import opencode_session
    read = opencode_session(str(db), sid)
    assert [(m["info"]["id"], m["info"]["role"], [p["id"] for p in m["parts"]]) for m in read] == \
        [(m["info"]["id"], m["info"]["role"], [p["id"] for p in m["parts"]]) for m in data["messages"]]
    assert [opencode._prompt_text(m) for m in read] == [opencode._prompt_text(m) for m in data["messages"]]
    # an `opencode` that can only export (the fixture), logging each start
    bin_dir, starts = tmp_path / "bin", tmp_path / "starts"
    bin_dir.mkdir()
    (tmp_path / "export.json").write_text(json.dumps(data))
    exe = bin_dir / "opencode"
    exe.write_text(f'#!/bin/sh\necho "$1 $3" >> {starts}\n'
                   f'[ "$1 $3" = "export {sid}" ] && exec cat {tmp_path / "export.json"}\nexit 1\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cp = checkpoint("opencode", sid, db, message=PROMPTS[1])
    dry_id, where = opencode.fork(cp, dry_run=True, root=str(tmp_path))
    assert not starts.exists() and where == str(db) and db.read_bytes() == before
    db.rename(db.with_suffix(".gone"))            # the database unreadable: the export, the same id
    assert opencode.fork(checkpoint("opencode", sid, db, message=PROMPTS[1]), dry_run=True,
                         root=str(tmp_path))[0] == dry_id
    assert starts.read_text().splitlines() == [f"export {sid}", f"export {dry_id}"]     # the session; is the id free
