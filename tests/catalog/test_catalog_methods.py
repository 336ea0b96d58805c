"""The catalog's named methods for the hooks' and the watcher's rows: each does what its
name says, so no SQL is needed outside `rewind/catalog/`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rewind
from rewind.catalog.db import Catalog


@pytest.fixture
def cat(tmp_path):
    c = Catalog(str(tmp_path / "home"))
    yield c
    c.close()


@pytest.fixture
def pid(cat, tmp_path):
    return cat.project_id(str(tmp_path / "proj"), create=True)


def test_sessions_are_registered_once_and_ended(cat, pid):
    with cat.transaction():
        cat.register_session(pid, "claude", "s1", "/work", "startup", 10)
        cat.register_session(pid, "claude", "s1", "/elsewhere", "resume", 20)   # known: kept as it was
        cat.register_session(pid, "claude", "s2", None, None, 30)
    assert cat.session_project("claude", "s1") == (pid, "/work")
    assert cat.has_sessions(pid) and cat.open_sessions(pid) == 2
    with cat.transaction():
        cat.end_session("claude", "s1", 40)
    assert cat.open_sessions(pid) == 1


def test_windows_open_close_and_are_found_by_tool_use_id_target_or_age(cat, pid):
    with cat.transaction():
        shell = cat.open_shell_window(pid, "claude", "s", None, "t1", "Bash", "ls", 100, 7, 8, "1,2")
        cat.open_tool_window(pid, "claude", "s", None, "t2", "Write", "a.txt", 110)
        cat.open_tool_window(pid, "claude", "s", None, None, "Write", "b.txt", 120)
    assert cat.find_window(pid, "bash", "s", "t1") == shell
    assert cat.find_window(pid, "bash", "s", None) == shell          # no id: the oldest open one
    ids = {w.target: w.id for w in cat.open_windows(pid) if w.kind == "tool"}
    by_id = cat.find_window(pid, "tool", "s", "t2")
    assert by_id == ids["a.txt"]
    assert cat.find_window(pid, "tool", "s", None, "b.txt") == ids["b.txt"]
    assert cat.find_window(pid, "tool", "s", "t2", "a.txt") == by_id
    assert cat.shell_windows(pid) == [(shell, 7, 8, "1,2", None)]
    with cat.transaction():
        cat.close_window(by_id, 130, True, "")
        cat.close_window(shell, 140, False)
    assert cat.find_window(pid, "tool", "s", "t2", "a.txt") == ids["b.txt"]     # closed: the oldest open one
    closed = {w.id: w for w in cat.open_windows(pid)}                # no scan yet: all still count
    assert (closed[by_id].closed_ns, closed[by_id].post_oid, closed[by_id].failed) == (130, "", 1)
    assert (closed[shell].closed_ns, closed[shell].post_oid, closed[shell].failed) == (140, None, 0)
    assert cat.shell_windows(pid) == []
    assert cat.shell_windows(pid, {shell}) == [(shell, 7, 8, "1,2", None)]
    assert cat.shell_windows_since(pid, 140) == [(shell, 7, 8, "1,2", None)]
    assert cat.shell_windows_since(pid, 141) == []
    assert cat.shell_windows_closed_after(pid, 139) == {shell}
    assert cat.last_activity(pid) == 120


def test_close_windows_closes_a_session_s_or_one_subagent_s_and_names_the_shell_ones(cat, pid):
    with cat.transaction():
        main = cat.open_shell_window(pid, "claude", "s", None, None, "Bash", "make", 1, None, None, "")
        sub = cat.open_shell_window(pid, "claude", "s", "agent-1", None, "Bash", "ls", 2, None, None, "")
        cat.open_tool_window(pid, "claude", "s", "agent-1", None, "Edit", "x", 3)
        other = cat.open_shell_window(pid, "claude", "other", None, None, "Bash", "ls", 4, None, None, "")
    with cat.transaction():
        assert cat.close_windows(pid, "claude", "s", "agent-1", 50) == [sub]
    with cat.transaction():
        assert cat.close_windows(pid, "claude", "s", None, 60) == [main]
    assert [r.id for r in cat.shell_windows(pid)] == [other]
    with cat.transaction():
        cat.add_closed_window(pid, "cursor", "c", None, "edit_file", "y.txt", 5, 6, "abc")
    w = [w for w in cat.open_windows(pid) if w.agent == "cursor"][0]
    assert (w.target, w.opened_ns, w.closed_ns, w.post_oid) == ("y.txt", 5, 6, "abc")


def test_preimages_are_roots(cat, pid):
    with cat.transaction():
        cat.add_preimage(pid, None, "a.txt", "ff" * 32, "Write", "t", "s", 1)
    assert cat.roots([pid])["preimages"] == ["ff" * 32]


def test_watcher_rows_events_and_cookies(cat, pid):
    cat.register_watcher(pid, 123, 1000, True)
    with cat.transaction():
        cat.heartbeat(pid, 123, 2000, 5, 9, None, True, ready_ns=1500)
        cat.heartbeat(pid, 999, 3000, 0, 0, None, False)                 # another pid: not this row
    w = cat.watcher(pid)
    assert (w.pid, w.started_ns, w.heartbeat_ns, w.ready_ns, w.dirs, w.events,
            w.limit_hit, w.background) == (123, 1000, 2000, 1500, 5, 9, 1, 1)
    cat.add_watch_events(pid, {"a": ("m", 1, None), "b/c": ("c", 2, "w1")})
    cat.add_watch_events(pid, {}, cookie="cookie-1")
    seq = cat.last_event_seq(pid)
    assert cat.take_cookie("cookie-1") == seq
    assert cat.take_cookie("cookie-1") is None                         # taken: gone
    with cat.transaction():
        cat.add_watch_event(pid, b"\0marker", "r", 3)
    assert cat.events(pid, 0, None) == [("a", "m", 1, None), ("b/c", "c", 2, "w1"),
                                        (os.fsdecode(b"\0marker"), "r", 3, None)]
    with cat.transaction():
        cat.drop_events_upto(pid, seq)
    assert [e[0] for e in cat.events(pid, 0, None)] == [os.fsdecode(b"\0marker")]
    with cat.transaction():
        cat.watcher_stopped(pid, 123, 4000, "idle")
    assert (cat.watcher(pid).stopped_ns, cat.watcher(pid).stop_reason) == (4000, "idle")


def test_the_catalog_s_rows_are_read_by_their_names(cat, pid):
    """What the catalog returns to the stages above is read by name there: a field renamed
    here fails this test, not a reader far away."""
    from rewind.model import Checkpoint
    cat.register_watcher(pid, 321, 1000, False)
    with cat.transaction():
        cat.heartbeat(pid, 321, 2000, 3, 4, 1800, False, ready_ns=1500)
        cat.register_session(pid, "claude", "s", "/work", "startup", 10)
        cat.open_shell_window(pid, "claude", "s", None, "t", "Bash", "ls", 100, 7, 8, "1,2")
        for n, kind in ((1, "prompt"), (2, "rewind")):
            cat.insert_checkpoint(Checkpoint(pid, n, kind, "2024-01-01T00:00:00Z", n * 10, f"tree{n}",
                                             restore_target=1 if kind == "rewind" else None))
        cat.insert_restore(pid, 1, 2, False, ["a.txt"], "2024-01-01T00:00:00Z")
        cat.set_hidden(pid, {1: (50, "old")}, [])
        cat.add_pending_edit(pid, "é.txt", "F", 0o644, "ab", 3, "Write", "s", 60)
    w = cat.watcher(pid)
    assert (w.project_id, w.pid, w.started_ns, w.ready_ns, w.heartbeat_ns, w.dirs, w.events, w.overflow_ns,
            w.limit_hit, w.background, w.stopped_ns, w.stop_reason, w.baseline_ns) == \
        (pid, 321, 1000, 1500, 2000, 3, 4, 1800, 0, 0, None, None, None)
    assert list(w._asdict()) == list(w._fields) and w._asdict()["heartbeat_ns"] == 2000
    (shell,) = cat.shell_windows(pid)
    assert (shell.agent_pid, shell.pid_mark, shell.hook_pids) == (7, 8, "1,2")
    assert cat.shell_windows_since(pid, 0)[0].agent_pid == 7
    assert cat.session_project("claude", "s").project_id == pid
    newest, oldest = cat.retention_rows(pid)
    assert (newest.number, newest.created_ns, newest.kind, newest.restore_target, newest.hidden_ns,
            bool(newest.by_agent), newest.hidden_why) == (2, 20, "rewind", 1, None, False, None)
    assert (oldest.number, oldest.hidden_ns, oldest.hidden_why) == (1, 50, "old")
    (hidden,) = cat.hidden(pid)
    assert (hidden.number, hidden.hidden_ns, hidden.hidden_why) == (1, 50, "old")
    undo = cat.newest_undoable(pid)
    assert (undo.target, undo.safety, undo.paths) == (1, 2, ["a.txt"])
    assert cat.restore_made(pid, 2).paths == ["a.txt"] and cat.restore_made(pid, 2).id == undo.id
    assert sorted((c.project_id, c.number, c.tree) for c in cat.roots([pid])["checkpoints"]) == \
        [(pid, 1, "tree1"), (pid, 2, "tree2")]
    cat.add_watch_events(pid, {"a": ("c", 5, "w:1")})
    (e,) = cat.events(pid, 0, None)
    assert (e.path, e.kind, e.ts, e.writer) == ("a", "c", 5, "w:1")
    (s,) = cat.events_seq(pid, 0)
    assert (s.seq, s.path, s.kind, s.ts, s.writer) == (cat.last_event_seq(pid), "a", "c", 5, "w:1")
    (edit,) = cat.pending_edits(pid)
    assert (edit.path, edit.kind, edit.mode, edit.oid, edit.size, edit.tool, edit.session_id, edit.ts) == \
        ("é.txt", "F", 0o644, "ab", 3, "Write", "s", 60)


def test_next_number_quick_check_and_change_paths(cat, pid):
    assert cat.next_number(pid) == 1 and cat.next_number(pid + 1) == 1
    with cat.transaction():
        assert cat.allocate_number(pid) == 1
    assert cat.next_number(pid) == 2
    assert cat.quick_check() == "ok"
    from rewind.model import ChangeRow
    with cat.transaction():
        cat.insert_changes(pid, 1, [ChangeRow("d/é.txt", "added", None, "file", None, 0o644, None, "ab", None, 2)])
    assert list(cat.change_paths([pid])) == [(pid, 1, "d/é.txt", [])]
    assert list(cat.change_paths([])) == []


def test_no_sql_outside_the_catalog_package():
    """ARCHITECTURE.md, seam 1: `grep -rn "execute(" rewind` names only rewind/catalog/."""
    package = Path(rewind.__file__).parent
    outside = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if "catalog" not in p.relative_to(package).parts[:1] and "execute(" in p.read_text())
    assert outside == []
