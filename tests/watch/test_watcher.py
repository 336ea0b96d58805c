"""The watcher, with the real watchdog observer and real hook processes: attribution by
time, quick scans, falling back when it cannot be trusted, and no process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REWIND, project, run_rewind, state, wait_ready, write
from rewind.catalog.db import Catalog
from rewind.cli.replay import bundled_session, fill

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")

SESSION = bundled_session()


def payload(event: str, root: Path, tool: str | None = None, session: str = "s-watch", **tool_input) -> dict:
    """A captured payload of this event (and tool), with our paths and tool input."""
    p = next(x for x in SESSION if x["hook_event_name"] == event and (tool is None or x.get("tool_name") == tool))
    p = fill(p, str(root), session, str(root.parent / "cc"))
    if tool_input:
        p["tool_input"] = {**p["tool_input"], **tool_input}
        if "tool_use_id" in p:
            p["tool_use_id"] = f"toolu_{time.monotonic_ns()}"
    return p


def hook(p: dict, root: Path, **env) -> None:
    proc = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), capture_output=True, text=True,
                          cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1",
                                         **env}, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "", proc


def tool_pair(root: Path, tool: str, **tool_input) -> tuple[dict, dict]:
    pre = payload("PreToolUse", root, tool, **tool_input)
    post = payload("PostToolUse", root, tool)
    post["tool_input"], post["tool_use_id"] = pre["tool_input"], pre["tool_use_id"]
    return pre, post


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def end_session(root: Path, session: str = "s-watch") -> None:
    """SessionEnd leaves a running watcher running (an agent that starts a session per prompt
    must not pay a full scan per prompt); `rewind watch --stop` then stops it."""
    row = state(root)[0]
    running = row is not None and row["stopped_ns"] is None and alive(row["pid"])
    hook(payload("SessionEnd", root, session=session), root)
    if running:
        assert alive(row["pid"]) and state(root)[0]["pid"] == row["pid"], "SessionEnd stopped the watcher"
        run_rewind("watch", "--stop", cwd=root, check=0)
        assert wait_gone(row["pid"]), "the watcher outlived `rewind watch --stop`"


def recorded(root: Path, rel: str, timeout: float = 60) -> str | None:
    """Until the watcher has written down an event of `rel`: the writer it gave it ("w:IDS",
    or None outside shell windows). Read in this process: a process started now would be
    one the pid account must look at."""
    deadline = time.monotonic() + timeout
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        pid = cat.project_id(str(root), create=False)
        while time.monotonic() < deadline:
            row = cat.db.execute("SELECT writer FROM watch_events WHERE project_id=? AND path=? ORDER BY seq DESC",
                                 (pid, os.fsencode(rel))).fetchone()
            if row is not None:
                return row[0]
            time.sleep(0.02)
    finally:
        cat.close()
    raise AssertionError(f"the watcher never wrote down {rel}")


def changes(root: Path, number: int) -> dict[str, dict]:
    out = json.loads(run_rewind("show", str(number), "--json", cwd=root, check=0).stdout)
    return {c["path"]: c for c in out["changes"]}


@pytest.fixture
def session(tmp_path):
    """A project whose session started the watcher; ended (and checked) afterwards."""
    root = tmp_path / "proj"
    for i in range(20):
        write(root, f"src/m{i}.py", f"x = {i}\n")
    write(root, ".gitignore", "node_modules/\n")
    write(root, "node_modules/pkg/index.js", "ignored")
    hook(payload("SessionStart", root), root)
    row = wait_ready(root)
    yield root, row
    end_session(root)


def test_changes_are_placed_in_time_against_the_tool_windows(session):
    root, row = session
    hook(payload("UserPromptSubmit", root), root)                       # checkpoint 1
    # the command waits for permission (seconds, for a person): the person edits meanwhile,
    # and the watcher reads the edit before the command starts. On a starved machine that
    # can take longer than any fixed sleep; without a look that finds the command not
    # started after the edit, the edit is rightly the command's (README, "What it cannot tell").
    # On a busy machine a process elsewhere can be born and end between two looks: that
    # leaves no proof either (procs.py), so the person's edit is tried again, in a new window,
    # a few times; the first one proved the person's is the one checked below.
    for attempt in range(6):
        pre, post = tool_pair(root, "Bash", command=f"sleep 0.5; echo built > out.txt # {attempt}")
        hook(pre, root)
        notes = f"notes{attempt}.txt"
        write(root, notes, "typed while Claude asked for permission")
        if recorded(root, notes) == "w:":
            break
        hook(post, root)
    else:
        raise AssertionError("no look of the watcher's ever found the command not started after the edit")
    subprocess.run(pre["tool_input"]["command"], shell=True, cwd=root, check=True)   # the command runs
    hook(post, root)
    wpre, wpost = tool_pair(root, "Write", file_path=str(root / "src/m1.py"), content="x = 'tool'\n")
    hook(wpre, root)
    (root / "src/m1.py").write_text("x = 'tool'\n")                   # the Write tool
    write(root, "src/m2.py", "an editor saves another file during the Write")
    hook(wpost, root)
    write(root, "later.txt", "after every tool, before the next prompt")
    hook(payload("UserPromptSubmit", root), root)                       # checkpoint 2
    got = changes(root, 1)
    assert got["out.txt"]["source"] == "bash" and "echo built" in got["out.txt"]["command"]
    assert got[notes]["source"] == "external"
    assert got["src/m1.py"]["source"] == "tool" and got["src/m1.py"]["tool"] == "Write"
    assert got["src/m2.py"]["source"] == "external"
    assert got["later.txt"]["source"] == "external"
    _, st = state(root)
    assert st["quick_scans"] >= 4 and st["fallbacks"] == 0, st


def test_a_command_too_quick_to_be_seen_running_is_still_the_commands(session):
    """`echo x > f` lives a few milliseconds: it can start, write and be reaped between two
    looks at /proc. The watcher is stopped meanwhile, so here it surely does."""
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    pre, post = tool_pair(root, "Bash", command="echo x > quick.txt")
    hook(pre, root)
    os.kill(row["pid"], signal.SIGSTOP)
    try:
        subprocess.run(pre["tool_input"]["command"], shell=True, cwd=root, check=True)
    finally:
        os.kill(row["pid"], signal.SIGCONT)
    hook(post, root)
    hook(payload("UserPromptSubmit", root), root)
    got = changes(root, 1)
    assert got["quick.txt"]["source"] == "bash", got["quick.txt"]
    _, st = state(root)
    assert st["fallbacks"] == 0, st


def test_a_command_reaped_before_the_watcher_first_looks_is_the_commands(session):
    """The watcher is stopped before the window opens: it reads the window's marker, and
    only then the command's change, after the command is long gone."""
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    pre, post = tool_pair(root, "Bash", command="rm src/m3.py && echo x > reaped.txt")
    os.kill(row["pid"], signal.SIGSTOP)
    try:
        hook(pre, root)                          # its scan falls back: no watcher answers
        subprocess.run(pre["tool_input"]["command"], shell=True, cwd=root, check=True)
        time.sleep(0.3)
    finally:
        os.kill(row["pid"], signal.SIGCONT)
    hook(post, root)
    hook(payload("UserPromptSubmit", root), root)
    got = changes(root, 1)
    assert got["reaped.txt"]["source"] == "bash" and got["src/m3.py"]["source"] == "bash", got


def test_a_command_run_through_a_pty_is_the_commands(session):
    """Gemini CLI runs shell commands in a pty (node -> bash -> bash -> command)."""
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    pre, post = tool_pair(root, "Bash", command="mkdir -p deep/er && echo x > deep/er/pty.txt")
    hook(pre, root)
    code = ("import pty, sys; pty.spawn(['bash', '-c', sys.argv[1]])")
    subprocess.run([sys.executable, "-c", code, pre["tool_input"]["command"]], cwd=root, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    hook(post, root)
    write(root, "later.txt", "after the command, before the next prompt")
    hook(payload("UserPromptSubmit", root), root)
    got = changes(root, 1)
    assert got["deep/er/pty.txt"]["source"] == "bash", got
    assert got["deep/er/pty.txt"]["command"].startswith("mkdir -p deep/er")
    assert got["later.txt"]["source"] == "external"
    _, st = state(root)
    assert st["fallbacks"] == 0, st


def test_a_watcher_reading_late_still_places_changes_by_its_markers(session):
    """The watcher sees the command running, then is stopped before it reads the command's
    write, and reads it long after the command ended and its window closed; the person's
    edit after the window comes after the close marker in the same queue."""
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    pre, post = tool_pair(root, "Bash", command="sleep 0.6; echo built > out.txt")
    hook(pre, root)
    cmd = subprocess.Popen(pre["tool_input"]["command"], shell=True, cwd=root)
    time.sleep(0.3)                              # the watcher has seen it running
    os.kill(row["pid"], signal.SIGSTOP)
    try:
        assert cmd.wait(timeout=30) == 0
        time.sleep(0.6)                          # long after the command was last seen
    finally:
        os.kill(row["pid"], signal.SIGCONT)
    hook(post, root)
    os.kill(row["pid"], signal.SIGSTOP)
    try:
        write(root, "after.txt", "the person, once the command was done")
        time.sleep(0.3)
    finally:
        os.kill(row["pid"], signal.SIGCONT)
    hook(payload("UserPromptSubmit", root), root)
    got = changes(root, 1)
    assert got["out.txt"]["source"] == "bash", got
    assert got["after.txt"]["source"] == "external", got
    _, st = state(root)
    assert st["fallbacks"] == 0, st


def test_a_command_run_by_a_shell_the_agent_kept_is_the_commands(session):
    """An agent that keeps one shell for its commands: `echo x > f` is a builtin there and
    starts no process at all, so no look at /proc can ever see the command."""
    root, row = session
    shell = subprocess.Popen(["bash"], stdin=subprocess.PIPE, cwd=root, text=True)
    try:
        hook(payload("UserPromptSubmit", root), root)
        pre, post = tool_pair(root, "Bash", command="echo kept > kept.txt")
        hook(pre, root)
        time.sleep(0.2)
        shell.stdin.write(pre["tool_input"]["command"] + "\n")
        shell.stdin.flush()
        deadline = time.monotonic() + 10
        while not (root / "kept.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        hook(post, root)
        hook(payload("UserPromptSubmit", root), root)
    finally:
        shell.stdin.close()
        shell.wait(timeout=10)
    got = changes(root, 1)
    assert got["kept.txt"]["source"] == "bash", got


def test_the_hooks_scan_only_what_changed_and_build_the_same_tree(session):
    root, _ = session
    hook(payload("UserPromptSubmit", root), root)
    write(root, "src/m3.py", "changed")
    (root / "src/m4.py").unlink()
    os.symlink("m5.py", root / "src/link.py")
    os.makedirs(root / "new/deep")
    write(root, "new/deep/f.txt", "new")
    os.rename(root / "src", root / "source")
    hook(payload("UserPromptSubmit", root), root)
    _, st = state(root)
    assert st["fallbacks"] == 0 and st["quick_scans"] >= 2
    proj = project(root)
    cps = proj.catalog.checkpoints(proj.id)
    from rewind.capture.snapshot import working_scan
    assert cps[0].tree == working_scan(proj).root        # a full scan agrees with the quick one
    assert json.loads(cps[0].stats and json.dumps(cps[0].stats))["mode"] == "quick"
    proj.close()


def test_sigkill_loses_nothing_and_the_next_hook_says_so(session):
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    os.kill(row["pid"], signal.SIGKILL)
    assert wait_gone(row["pid"])
    write(root, "after_kill.txt", "written while no watcher ran")
    write(root, "src/m7.py", "changed while no watcher ran")
    hook(payload("UserPromptSubmit", root), root)        # full scan; and a new watcher starts
    got = changes(root, 1)
    assert {"after_kill.txt", "src/m7.py"} <= set(got)
    _, st = state(root)
    assert st["fallbacks"] >= 1 and "not running" in st["fallback"]
    text = run_rewind("status", cwd=root, check=0).stdout
    assert "fell back to a full scan" in text and "not running" in text
    new = wait_ready(root)
    assert new["pid"] != row["pid"]
    session_row = dict(row)
    row.update(new)            # the fixture waits for the new one to stop
    assert session_row["pid"] != row["pid"]


def test_lost_events_and_ignore_changes_fall_back_to_a_full_scan(session):
    root, row = session
    hook(payload("UserPromptSubmit", root), root)
    write(root, ".gitignore", "node_modules/\nsrc/m9.py\n")
    hook(payload("UserPromptSubmit", root), root)
    _, st = state(root)
    assert st["fallback"] == "an ignore file changed (.gitignore)"
    # an inotify queue overflow: the watcher records it as a lost-events marker
    cat = Catalog(os.environ["REWIND_HOME"])
    pid = cat.project_id(str(root), create=False)
    with cat.transaction():
        cat.db.execute("INSERT INTO watch_events(project_id, path, kind, ts) VALUES (?, x'', 'r', ?)",
                       (pid, time.time_ns()))
    cat.close()
    write(root, "src/m8.py", "changed")
    hook(payload("UserPromptSubmit", root), root)
    _, st = state(root)
    assert "events were lost" in st["fallback"]
    assert "src/m8.py" in changes(root, 2)


def test_ignored_directories_are_not_watched(session):
    root, row = session
    dirs = state(root)[0]["dirs"]
    assert dirs == 2          # the root and src; not node_modules or node_modules/pkg
    for i in range(50):
        write(root, f"node_modules/pkg/f{i}.js", "ignored")
    time.sleep(0.3)
    cat = Catalog(os.environ["REWIND_HOME"])
    rows = cat.db.execute("SELECT path FROM watch_events").fetchall()
    cat.close()
    assert not any(p.startswith(b"node_modules") for (p,) in rows)


def test_the_watcher_outlives_its_session_and_exits_when_the_data_dir_goes(tmp_path):
    """A session per prompt (`claude -p`, resume, `codex exec`) keeps one warm watcher: the
    second session's prompt finds it running and scans quickly. It goes with rewind's data
    directory (a deleted store has nothing to watch for)."""
    import shutil
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    hook(payload("SessionStart", root, session="s-one"), root)
    row = wait_ready(root)
    hook(payload("UserPromptSubmit", root, session="s-one"), root)
    hook(payload("SessionEnd", root, session="s-one"), root)
    hook(payload("SessionStart", root, session="s-two"), root)
    write(root, "b.txt", "b")
    hook(payload("UserPromptSubmit", root, session="s-two"), root)
    assert alive(row["pid"]) and state(root)[0]["pid"] == row["pid"]
    assert set(changes(root, 1)) == {"b.txt"}                       # what came after prompt 1
    assert state(root)[1]["fallbacks"] == 0, state(root)            # both prompts scanned quickly
    shutil.rmtree(os.environ["REWIND_HOME"])
    assert wait_gone(row["pid"], timeout=10), "the watcher outlived its data directory"
    assert not os.path.exists(os.environ["REWIND_HOME"]), "the watcher made its data directory again"


def test_the_watcher_exits_when_idle(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    write(root, ".rewind.toml", "watch_idle_minutes = 0.03\n")   # ~2 s
    hook(payload("SessionStart", root), root)
    row = wait_ready(root)
    assert wait_gone(row["pid"], timeout=20)
    assert state(root)[0]["stop_reason"] == "idle"


def test_two_projects_watched_at_once_do_not_mix(tmp_path):
    roots = [tmp_path / "a", tmp_path / "b"]
    rows = []
    for r in roots:
        write(r, "f.txt", r.name)
        hook(payload("SessionStart", r, session=f"s-{r.name}"), r)
    for r in roots:
        rows.append(wait_ready(r))
    try:
        assert rows[0]["pid"] != rows[1]["pid"]
        for r in roots:
            hook(payload("UserPromptSubmit", r, session=f"s-{r.name}"), r)
        write(roots[0], "only_a.txt", "a")
        write(roots[1], "only_b.txt", "b")
        for r in roots:
            hook(payload("UserPromptSubmit", r, session=f"s-{r.name}"), r)
        assert set(changes(roots[0], 1)) == {"only_a.txt"}
        assert set(changes(roots[1], 1)) == {"only_b.txt"}
        for r in roots:
            assert state(r)[1]["fallbacks"] == 0
    finally:
        for r in roots:
            end_session(r, session=f"s-{r.name}")
    assert not any(alive(r["pid"]) for r in rows)


def test_watch_in_the_foreground_and_its_controls(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    env = {**os.environ, "REWIND_WATCH": "0"}
    proc = subprocess.Popen([*REWIND, "watch"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env)
    try:
        wait_ready(root)
        st = json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)
        assert st["running"] and st["pid"] == proc.pid and st["directories"] == 1
        second = run_rewind("watch", cwd=root)
        assert second.returncode == 1 and "already runs" in second.stderr
        assert "stopped the watcher" in run_rewind("watch", "--stop", cwd=root, check=0).stdout
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.stdout.read()
    assert "watching" in out and "stopped" in out
    st = json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)
    assert not st["running"] and st["stopped"]["reason"] == "stopped"


def test_a_watcher_stuck_after_being_asked_to_stop_exits_and_prints_its_threads(tmp_path):
    """The stop signal sets a flag the main loop checks; if a thread hangs instead, the
    process must still go (`watch --stop` counts on it) and say where it hung."""
    code = ("import time, rewind.watch.process as w\n"
            "w.STOP_GRACE_S = 0.5\n"
            "w._exit_if_stuck()\n"
            "time.sleep(60)      # a main thread that never comes back to its loop\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "REWIND_HOME": str(tmp_path / "home")},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and time.monotonic() - started < 20
    assert 'File "<string>", line 4' in proc.stderr      # the stuck main thread's stack


def test_a_watcher_stops_on_sigterm_whatever_it_was_doing(tmp_path):
    """SIGTERM at any moment of the main loop: once, a handler that set a threading.Event
    deadlocked against the Event.wait it interrupted."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    for attempt in range(6):
        proc = subprocess.Popen([*REWIND, "watch", "--project", str(root)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        proc.stdout.readline()                       # "watching ...": the loop runs
        time.sleep(0.05 + attempt * 0.037)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def test_a_window_opens_at_its_marker_even_if_the_catalog_closed_it_since(tmp_path):
    """A watcher stopped across a whole command reads the open marker after the window was
    closed in the catalog: the window still opens there, and closes at its close marker,
    so the command's changes read in between are named for it."""
    from rewind.watch.daemon import Watcher
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    proj = project(root)
    try:
        with proj.catalog.transaction():
            wid = proj.catalog.db.execute(
                "INSERT INTO windows(project_id, agent, session_id, tool, kind, command, opened_ns, closed_ns)"
                " VALUES (?, 'claude', 's', 'Bash', 'bash', 'echo x > f', ?, ?)",
                (proj.id, time.time_ns() - 10**9, time.time_ns())).lastrowid
    finally:
        proj.close()
    w = Watcher(os.environ["REWIND_HOME"], str(root), proj.id, background=False, idle_s=None)
    assert w.commands.explaining() is None
    w.marker(f"open-{wid}-1-1", "marker")
    assert w.commands.explaining() == f"w:{wid}"
    w.refresh_windows()                          # a periodic look at the catalog keeps it
    assert w.commands.explaining() == f"w:{wid}"
    w.marker(f"close-{wid}-1-1", "marker")
    assert w.commands.explaining() is None
    w.refresh_windows()
    assert w.commands.explaining() is None


def test_a_hard_link_written_through_its_name_outside_the_project_is_captured(session, tmp_path):
    """inotify reports a write to the name it was made through: a write through a link
    outside the project makes no event here. Files with other links are looked at again
    at every scan."""
    root, row = session
    outside = tmp_path / "outside.txt"
    outside.write_text("v1")
    os.link(outside, root / "linked.txt")
    hook(payload("UserPromptSubmit", root), root)        # checkpoint 1: v1
    with open(outside, "w") as f:                        # the same inode, through the other name
        f.write("v2 written from outside the project")
    time.sleep(0.2)
    hook(payload("UserPromptSubmit", root), root)        # checkpoint 2
    got = changes(root, 1)
    assert got["linked.txt"]["status"] == "modified" and "hardlink" in got["linked.txt"]["flags"], got
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "linked.txt").read_text() == "v1"
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "linked.txt").read_text() == "v2 written from outside the project"
    _, st = state(root)
    assert st["fallbacks"] == 0 and st["quick_scans"] >= 2, st


def test_an_edited_git_info_exclude_is_noticed(tmp_path):
    """.git/ is not watched: removing a path from .git/info/exclude must still make it
    captured (and watched), or the agent's deletion of it would lose it."""
    root = tmp_path / "proj"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".git/info/exclude", "secret/\n")
    write(root, "secret/keys.txt", "precious")
    write(root, "a.txt", "a")
    hook(payload("SessionStart", root), root)
    row = wait_ready(root)
    try:
        hook(payload("UserPromptSubmit", root), root)                  # checkpoint 1: no secret/
        (root / ".git/info/exclude").write_text("")                    # the person un-ignores it
        time.sleep(1.5)                                                # a watcher heartbeat
        hook(payload("UserPromptSubmit", root), root)                  # checkpoint 2: with it
        write(root, "secret/more.txt", "also precious")                # watched now
        hook(payload("UserPromptSubmit", root), root)                  # checkpoint 3
        (root / "secret/keys.txt").unlink()                            # the agent deletes it
        hook(payload("UserPromptSubmit", root), root)                  # checkpoint 4
    finally:
        end_session(root)
    assert not alive(row["pid"])
    assert "secret/keys.txt" in changes(root, 1)
    assert changes(root, 2)["secret/more.txt"]["status"] == "added"
    assert changes(root, 3)["secret/keys.txt"]["status"] == "deleted"
    run_rewind("to", "3", "--yes", cwd=root, check=0)
    assert (root / "secret/keys.txt").read_text() == "precious"
    _, st = state(root)
    assert st["fallback"] == ".git/info/exclude changed", st


def test_a_window_opened_while_the_watcher_was_starting_is_known_from_its_first_event(tmp_path):
    """A watcher started by SessionStart may put its watches in just after a hook wrote a
    window's open marker (missed) and the command ran: its first events must already be
    placed in that window, closed since or not."""
    from watchdog.events import FileCreatedEvent, FileDeletedEvent
    from rewind.watch.daemon import Watcher
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    proj = project(root)
    w = Watcher(os.environ["REWIND_HOME"], str(root), proj.id, background=False, idle_s=None)
    w.watching_since = time.time_ns()              # the watches go in here
    try:
        with proj.catalog.transaction():
            still_open = proj.catalog.db.execute(
                "INSERT INTO windows(project_id, agent, session_id, tool, kind, command, opened_ns)"
                " VALUES (?, 'codex', 's', 'Bash', 'bash', 'rm -r build', ?)", (proj.id, time.time_ns())).lastrowid
            closed_since = proj.catalog.db.execute(
                "INSERT INTO windows(project_id, agent, session_id, tool, kind, command, opened_ns, closed_ns)"
                " VALUES (?, 'codex', 's', 'Bash', 'bash', 'echo x > y', ?, ?)",
                (proj.id, time.time_ns(), time.time_ns())).lastrowid
    finally:
        proj.close()
    w.on_event(FileDeletedEvent(str(root / "a.txt")))
    assert w.buffered[-1][3] == f"w:{still_open},{closed_since}", w.buffered
    w.marker(f"close-{closed_since}-1-1", "marker")
    w.on_event(FileCreatedEvent(str(root / "b.txt")))
    assert w.buffered[-1][3] == f"w:{still_open}"


def test_a_tool_that_wrote_during_a_long_scan_behind_it_is_still_the_tools(tmp_path):
    """The watcher's first scan of a big tree (or any long scan) lists a directory, then an
    edit tool writes there and its window closes while the scan goes on: the scan misses
    the file, the next one finds it, and the tool's closed window must still explain it
    (a segment counts windows closed after the scan before it *began*)."""
    from rewind.capture.working_copy import Scan, locked
    root = tmp_path / "proj"
    write(root, "a_docs/readme.md", "docs")
    for i in range(700):                                   # walked after a_docs/
        write(root, f"z/f{i}.txt", str(i))
    env = {"REWIND_WATCH": "0"}
    hook(payload("UserPromptSubmit", root), root, **env)     # checkpoint 1
    pre, post = tool_pair(root, "Write", file_path=str(root / "a_docs/new.md"), content="new\n")
    done = []

    def meanwhile(phase, n, total):
        if n >= 512 and not done:                          # a_docs/ is listed already
            done.append(1)
            hook(pre, root, **env)
            (root / "a_docs/new.md").write_text("new\n")
            hook(post, root, **env)
    proj = project(root)
    try:
        with locked(proj, 60) as wc:
            wc.commit(wc.scan(Scan.full(meanwhile)))
    finally:
        proj.close()
    assert done
    hook(payload("UserPromptSubmit", root), root, **env)     # checkpoint 2
    got = changes(root, 1)
    assert got["a_docs/new.md"]["source"] == "tool" and got["a_docs/new.md"]["tool"] == "Write", got
