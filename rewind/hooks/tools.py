"""A tool call's hooks: shell windows bracketed by scans, edit tools' pre-images and targets.

Shell windows are bracketed by scans (the scan before opening and the scan before closing
separate what the command did from what happened before it); edit tools never scan the
tree: they store the target's pre-image and, afterwards, the hash of what they wrote.
"""

from __future__ import annotations

import os
import stat as S

from rewind import clock
from rewind.capture.ignore import IgnoreRules
from rewind.constants import MAX_FILE_SIZE
from rewind.errors import StoreLocked
from rewind.fsutil import read_fd
from rewind.hooks.base import Event
from rewind.lock import SCAN_LOCK_TIMEOUT, store_lock
from rewind.project import Project, git_mark
from rewind.store.objects import digest_of

SHELL_WAIT_S = 110.0          # a shell command's PreToolUse waits this long for the first scan (its hook timeout is 120 s)


class FirstScanRunning(Exception):
    """A served shell PreToolUse while the watcher's first scan runs: it must wait for the
    scan, and a served call must not hold the watcher's one serving slot that long (the
    client does it itself)."""


def scan(project: Project, checkpoint: dict | None = None, timeout: float | None = None):
    """Scan the tree (the watcher's dirty set, or whole) and commit it; with `checkpoint`
    (the fields of a `Commit`), the checkpoint of it. Returns (checkpoint or None, the scan's
    time). The capture modules are imported here, when a scan is due: an edit tool's hooks
    never scan, and they (and the watcher's, through dirty) are most of a hook's imports."""
    from rewind.capture.pending import locked_completing
    from rewind.capture.working_copy import Commit, Scan
    close_finished_tasks(project)
    with locked_completing(project, timeout or SCAN_LOCK_TIMEOUT) as wc:
        scanned = wc.scan(Scan.auto())
        return wc.commit(scanned, Commit(**checkpoint) if checkpoint else None), scanned.stamp


def first_scan_running(project: Project) -> bool:
    """Whether the watcher's first scan runs now (capture/pending.py)."""
    from rewind.capture.pending import first_scan_running
    return first_scan_running(project)


def close_windows(project: Project, ev: Event, scope: str = "session") -> None:
    """Close the session's open windows (a cancelled tool sends no Post event), then put a
    marker at the place in the watcher's stream. Called right before a scan: its segment
    still counts them (closed after it began), the next one no longer does. `scope`:
    "session", "agent" (one subagent's), "exact" (the event's own agent's: the main agent's
    when it has no agent id), or "all" (the session's end: its background commands' too).
    The windows of commands gone on in the background stay open until their task ends:
    `end_tasks` says when."""
    now = clock.wall_ns()
    with project.catalog.transaction():
        ids = project.catalog.close_windows(project.id, ev.agent, ev.session_id,
                                            ev.agent_id if scope in ("agent", "exact") else None, now,
                                            exact=scope == "exact", background=scope == "all")
        note_git_moves(project, project.catalog.shell_git(ids), now)
    _closed(project, ids)
    if scope != "all":
        end_tasks(project, ev)


def _closed(project: Project, ids: list[int]) -> None:
    if ids:
        from rewind.capture.dirty import put_marker
        put_marker(project, "close-" + ",".join(map(str, ids[:40])))


def end_tasks(project: Project, ev: Event) -> None:
    """Close the windows of background commands whose task the agent says has ended: a
    turn's end that no longer lists it as running, or its task notification (a prompt)."""
    catalog = project.catalog
    if ev.running_tasks is None and not ev.task:
        return
    ended = []
    for w in catalog.background_windows(project.id, ev.session_id):
        if ev.task and (w.tool_use_id == ev.task.get("tool_use_id") or w.task == ev.task.get("task_id")):
            ended.append(w.id)
        elif ev.running_tasks is not None and w.task not in ev.running_tasks:
            ended.append(w.id)
    _close_ids(project, ended)


def close_finished_tasks(project: Project) -> None:
    """Before a scan: close the windows of background commands none of whose processes
    lives any more (an agent that never says a task ended; one killed with its agent)."""
    from rewind.capture.bgtree import tree_signature
    windows = project.catalog.background_windows(project.id)
    _close_ids(project, [w.id for w in windows if tree_signature(w.bg_pids) == ""])


def _close_ids(project: Project, ids: list[int]) -> None:
    if not ids:
        return
    now = clock.wall_ns()
    with project.catalog.transaction():
        for wid in ids:
            project.catalog.close_window(wid, now, False)
        note_git_moves(project, project.catalog.shell_git(ids), now)
    _closed(project, ids)


def note_git_moves(project: Project, windows: list, now_ns: int) -> None:
    """Inside a transaction: each closing shell window (`ShellGit`) that found HEAD or the
    branch elsewhere when it opened made that move (its command ran `git checkout`, `git
    commit`, ...): a git move, the command's. Reading the state is two or three small files."""
    if not windows:
        return
    now = git_mark(project.root)
    for w in windows:
        if w.git_pre != now:
            project.catalog.add_git_move(project.id, now_ns, w.git_pre, now, "bash", w.tool, w.command,
                                         w.session_id)


def edited(project: Project, ev: Event) -> str:
    """An agent that reports an edit only after it (Cursor's afterFileEdit): a tool window
    from the last scan until now, closed, with the hash of what the file holds now. The
    pre-image is the last scan's (or the watcher's)."""
    catalog = project.catalog
    now = clock.wall_ns()
    since = catalog.state(project.id)[1] or now - 60 * 10**9
    notes = []
    for raw in ev.targets[:20]:
        full, rel, flags = _target(project, ev, raw)
        if rel is None or "ignored" in flags:
            notes.append(f"{raw}: {','.join(flags)}")
            continue
        data = _read_regular(full)
        with catalog.transaction():
            catalog.add_closed_window(project.id, ev.agent, ev.session_id, ev.tool_use_id, ev.tool, rel,
                                      min(since, now), now, digest_of(data) if data is not None else "")
        notes.append(f"{rel}: edited")
    return "; ".join(notes) or "no target"


def shell(project: Project, ev: Event, pid: int, served: bool = False) -> str:
    """A shell window: opened after a scan (what came before is not the command's), closed
    before one (the scan's segment ends with it). Each gets a marker in the watcher's stream."""
    from rewind.capture.dirty import put_marker
    from rewind.capture.procs import hook_chain, last_pid
    catalog = project.catalog
    if ev.kind == "pre_tool":
        timeout = SCAN_LOCK_TIMEOUT
        waits = first_scan_running(project)
        if waits:
            # a command could write anywhere before the first scan has read it: it waits
            if served:
                raise FirstScanRunning()
            timeout = SHELL_WAIT_S
        try:
            _, stamp = scan(project, timeout=timeout)
        except StoreLocked:
            if not (waits and first_scan_running(project)):
                raise
            # the first scan outlasted the wait (the agent's hook timeout is near): the command
            # runs in its window all the same, and the pending checkpoints say it ran
            stamp = clock.wall_ns()
            if project.catalog.has_pending(project.id):
                with project.catalog.transaction():
                    project.catalog.add_pending_edit(project.id, "", "!", None, None, None,
                                                     (ev.command or "")[:200], ev.session_id, stamp)
        agent, chain = hook_chain(pid)
        git_pre = git_mark(project.root)
        with project.catalog.transaction():
            wid = catalog.open_shell_window(project.id, ev.agent, ev.session_id, ev.agent_id, ev.tool_use_id,
                                            ev.tool, ev.command, stamp, agent, last_pid(), ",".join(map(str, chain)),
                                            git_pre)
        put_marker(project, f"open-{wid}")
        return "shell window opened"
    background = None
    if ev.background and not ev.failed:
        # the command goes on in the background: its window stays open until its task ends,
        # with the processes it left running (bgtree.py), from this marker on
        from rewind.capture.bgtree import background_roots, tree_signature
        w = catalog.window_of_tool(project.id, ev.session_id, ev.tool_use_id) if ev.tool_use_id else None
        if w is not None and w.closed_ns is None:
            row = catalog.shell_windows(project.id, {w.id})[0]
            hooks = {int(p) for p in (row.hook_pids or "").split(",") if p.isdigit()}
            background = background_roots(row.agent_pid, row.pid_mark, hooks | set(hook_chain(pid)[1]),
                                          ev.command)
            now = clock.wall_ns()
            with catalog.transaction():
                catalog.to_background(w.id, now, ev.background, background, tree_signature(background))
                # a move of HEAD or branch it made until now is its own; one found when its task
                # ends may be any other command's meanwhile (a `git commit`): not named for it
                note_git_moves(project, catalog.shell_git([w.id]), now)
                catalog.forget_git_pre(w.id)
            put_marker(project, f"bg-{w.id}")
    if background is None:
        with project.catalog.transaction():
            wid = catalog.find_window(project.id, "bash", ev.session_id, ev.tool_use_id)
            if wid is not None:
                now = clock.wall_ns()
                catalog.close_window(wid, now, ev.failed)
                note_git_moves(project, catalog.shell_git([wid]), now)
        if wid is not None:
            put_marker(project, f"close-{wid}")
    if not first_scan_running(project):
        scan(project)
    return "shell window closed" if background is None else f"shell window in the background ({ev.background})"


def _target(project: Project, ev: Event, raw: str) -> tuple[str, str | None, list[str]]:
    """(absolute path, project-relative path or None, flags) for an edit tool's target."""
    path = raw if os.path.isabs(raw) else os.path.join(ev.cwd or project.root, raw)
    path = os.path.normpath(path)
    parent, name = os.path.split(path)
    real_parent = os.path.realpath(parent)
    root = project.root.rstrip("/")
    flags = []
    if os.path.islink(path):
        flags.append("symlink")
        real = os.path.realpath(path)
        if not real.startswith(root + "/"):
            flags.append("outside")
            return path, None, flags
    full = os.path.join(real_parent, name)
    if not full.startswith(root + "/"):
        flags.append("outside")
        return path, None, flags
    rel = full[len(root) + 1:]
    rules = IgnoreRules.for_root(project.root)
    parts = rel.split("/")
    for i in range(len(parts)):
        sub = "/".join(parts[: i + 1])
        is_dir = i < len(parts) - 1
        if rules.is_ignored(sub, is_dir):
            flags.append("ignored")
            break
        if is_dir:
            rules = rules.for_subdir(sub, os.path.join(project.root, sub))
    return full, rel, flags


def _read_regular(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not S.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_SIZE:
            return None
        return read_fd(fd)
    finally:
        os.close(fd)


def edit(project: Project, ev: Event) -> str:
    """An edit tool's Pre event stores its targets' pre-images and opens a window on each;
    its Post event closes them with the hash of what it wrote."""
    from rewind.model import ChangeRow
    catalog = project.catalog
    notes = []
    for raw in ev.targets[:20]:
        full, rel, flags = _target(project, ev, raw)
        if rel is None or "ignored" in flags:
            # not captured by any snapshot: listed under the current checkpoint
            if ev.kind == "pre_tool":
                latest = catalog.latest(project.id)
                row = ChangeRow.placeholder(rel if rel is not None else full, source="tool", tool=ev.tool,
                                            session_id=ev.session_id, flags=flags)
                with catalog.transaction():
                    catalog.insert_observations(project.id, latest.number if latest else None,
                                                [row], clock.wall_ns())
            notes.append(f"{raw}: {','.join(flags)}")
            continue
        if ev.kind == "pre_tool":
            data = None if "symlink" in flags else _read_regular(full)
            latest = catalog.latest(project.id)
            oid = None
            if data is not None:
                # shared store lock from the put to the row: a concurrent gc cannot sweep it
                with store_lock(project.home, timeout=SCAN_LOCK_TIMEOUT):
                    oid = project.store.put(data)
                    project.store.flush()
                    with catalog.transaction():
                        catalog.add_preimage(project.id, latest.number if latest else None, rel,
                                             oid, ev.tool, ev.tool_use_id, ev.session_id, clock.wall_ns())
            if catalog.has_pending(project.id):
                # what the pending checkpoint puts back for this path (pending.py)
                from rewind.capture import pending
                pending.note_edit(project, rel, full, data, oid, ev.tool, ev.session_id)
            with catalog.transaction():
                catalog.open_tool_window(project.id, ev.agent, ev.session_id, ev.agent_id, ev.tool_use_id,
                                         ev.tool, rel, clock.wall_ns())
            notes.append(f"{rel}: pre-image {'stored' if data is not None else 'absent'}")
        else:
            data = _read_regular(full)
            post = digest_of(data) if data is not None else ""
            with catalog.transaction():
                wid = catalog.find_window(project.id, "tool", ev.session_id, ev.tool_use_id, rel)
                if wid is not None:
                    catalog.close_window(wid, clock.wall_ns(), ev.failed, post)
            notes.append(f"{rel}: closed")
    return "; ".join(notes) or "no target"
