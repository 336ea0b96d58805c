"""The per-event logic of DESIGN.md's "How a prompt is recorded", agent-neutral.

Every agent adapter turns its payload into an `Event`; `handle` does the rest. Shell
windows are bracketed by scans (the scan before opening and the scan before closing
separate what the command did from what happened before it); edit tools never scan the
tree: they store the target's pre-image and, afterwards, the hash of what they wrote.
"""

from __future__ import annotations

import os
import stat as S
import time

from rewind import clock, config
from rewind.capture.ignore import IgnoreRules
from rewind.constants import MAX_FILE_SIZE
from rewind.fsutil import read_fd
from rewind.hooks.base import Event
from rewind.errors import StoreLocked
from rewind.lock import store_lock
from rewind.project import Project, open_catalog, resolve_root
from rewind.store.objects import Store, digest_of


def scan(project: Project, checkpoint: dict | None = None, timeout: float | None = None):
    """Scan the tree (the watcher's dirty set, or whole) and commit it; with `checkpoint`
    (the fields of a `Commit`), the checkpoint of it. Returns (checkpoint or None, the scan's
    time). The capture modules are imported here, when a scan is due: an edit tool's hooks
    never scan, and they (and the watcher's, through dirty) are most of a hook's imports."""
    from rewind.capture.working_copy import Commit, Scan, locked
    with locked(project, timeout or SCAN_LOCK_TIMEOUT) as wc:
        scanned = wc.scan(Scan.auto())
        return wc.commit(scanned, Commit(**checkpoint) if checkpoint else None), scanned.stamp

SCAN_LOCK_TIMEOUT = 60.0
SHELL_WAIT_S = 110.0          # a shell command's PreToolUse waits this long for the first scan (its hook timeout is 120 s)
WATCHER_START_WAIT_S = 10.0   # a prompt waits this long for a starting watcher to begin its first scan
WATCHER_APPEAR_S = 3.0        # (and this long for the watcher's process to take its lock)
PENDING_GRACE_S = 0.25        # and this long for a tree not known to be big to be completed at once,
YOUNG_SCAN_S = 1.0            # when its first scan began less than this ago


class FirstScanRunning(Exception):
    """A served shell PreToolUse while the watcher's first scan runs: it must wait for the
    scan, and a served call must not hold the watcher's one serving slot that long (the
    client does it itself)."""


def _usable_dir(path: str | None) -> str | None:
    if not path or not os.path.isabs(path) or "\0" in path:
        return None
    return path if os.path.isdir(path) else None


def project_root(ev: Event, catalog) -> tuple[str | None, bool]:
    """(the session's project, whether the session is known already): known from its first
    event, else the agent's project dir, else the cwd (which follows `cd` inside shell
    commands, hence last)."""
    known = catalog.session_project(ev.agent, ev.session_id)
    if known is not None:
        return catalog.project_root(known[0]), True
    base = _usable_dir(ev.project_dir) or _usable_dir(ev.cwd)
    if base is None:
        return None, False
    root = resolve_root(base)
    return (None if not_a_project(root, catalog) else root), False


def not_a_project(root: str, catalog) -> bool:
    """Whether a hook refuses `root` as a project: the whole filesystem, a tree holding
    rewind's own store (or inside it), a system directory or the home directory itself
    (unless allowed, or already a project)."""
    home = os.path.realpath(catalog.home)
    if root == "/" or root == home or home.startswith(root.rstrip("/") + "/") or root.startswith(home + "/"):
        return True
    from rewind.project import refused_root
    return bool(refused_root(root)) and catalog.project_id(root, create=False) is None


class OtherProject(Exception):
    """A served call's event belongs to another project than the watcher's (watch/serve.py):
    the client records it itself."""


def handle(ev: Event, pid: int | None = None, served_root: str | None = None, fallback: str | None = None,
           catalog=None) -> str:
    """Act on one event. Returns a short note of what was done (for the log and tests).
    `pid`: the hook's process (a served call's client, not this process); `served_root`:
    the project the serving watcher watches (none other is served); a standalone call is
    counted, with `fallback`, why the watcher did not serve it. `catalog`: a connection
    lent by the serving watcher (left open), else one of this call's own."""
    lent = catalog is not None
    if lent:
        home = catalog.home
    else:
        home, catalog = open_catalog()
    project = None
    try:
        root, known = project_root(ev, catalog)
        if served_root is not None and root != served_root:
            raise OtherProject(root)
        if root is None:
            return f"ignored: no usable project directory (cwd={ev.cwd!r})"
        project_id = catalog.project_id(root, create=True)
        project = Project(home, root, project_id, catalog, Store(home))
        if served_root is None:
            catalog.count_standalone_hook(project.id, fallback, clock.wall_ns())
        if not known or (ev.kind == "session_start" and ev.source
                         and catalog.session_lacks_source(ev.agent, ev.session_id)):
            _register(project, ev)      # (a SessionStart may come after its prompt: its source)
        note = _dispatch(project, ev, pid or os.getpid(), served_root is not None)
        catalog.flush_riders()
        return note
    finally:
        if project is not None:
            project.close(keep_catalog=lent)     # remembers what it found damaged
        elif not lent:
            catalog.close()


def _register(project: Project, ev: Event) -> None:
    with project.catalog.transaction():
        project.catalog.register_session(project.id, ev.agent, ev.session_id, ev.cwd, ev.source, clock.wall_ns())


def _close_windows(project: Project, ev: Event, scope: str = "session") -> None:
    """Close the session's open windows (a cancelled tool sends no Post event), then mark
    the place in the watcher's stream. Called right before a scan: its segment still counts
    them (closed after it began), the next one no longer does."""
    with project.catalog.transaction():
        ids = project.catalog.close_windows(project.id, ev.agent, ev.session_id,
                                            ev.agent_id if scope == "agent" else None, clock.wall_ns())
    if ids:
        from rewind.capture.dirty import mark
        mark(project, "close-" + ",".join(map(str, ids[:40])))


def _ensure_watcher(project: Project, settings) -> str:
    """Start the project's watcher in the background unless one runs or it is turned off."""
    if settings is None or not settings.watch:
        return "watcher off"
    from rewind.capture.dirty import running
    from rewind.watch.control import start_background
    if running(project.home, project.catalog, project.id) is not None:
        return "watcher running"
    start_background(project.root, settings.watch_idle_minutes)
    return "watcher started"


def _first_scan_running(project: Project, wait_for_start: bool = False) -> bool:
    """Whether the watcher's first scan runs now (pending.py). With `wait_for_start`, a
    watcher that is starting (its first scan not begun yet) is waited for a little."""
    from rewind.capture.pending import first_scan_running
    catalog = project.catalog
    if first_scan_running(project):
        return True
    if not wait_for_start:
        return False
    from rewind.capture.dirty import running
    now = time.monotonic()
    deadline, appear_by = now + WATCHER_START_WAIT_S, now + WATCHER_APPEAR_S
    sized = False
    while time.monotonic() < deadline:
        if first_scan_running(project):
            return True
        row = running(project.home, catalog, project.id)
        if row is not None and row["ready_ns"] is not None and \
                catalog.scan_state(project.id)["scan_start_ns"] >= row["ready_ns"]:
            return False                 # its first scan is in (the usual case: one look)
        if row is None and time.monotonic() > appear_by:
            return False                 # no watcher came
        if not sized:
            sized = True
            if _size(project) is False:
                return False             # a small tree: scanned sooner than a watcher starts
        time.sleep(0.05)
    return False


AFTER_EDIT_ONLY = ("cursor",)


def _pending_prompt(project: Project, ev: Event, meta: dict) -> str | None:
    """The first prompt does not wait for the first snapshot: recorded now, completed by it
    (capture/pending.py). None if the first scan ended meanwhile."""
    from rewind.capture import pending
    number = pending.begin(project, "prompt", ev.prompt, meta)
    if number is None:
        return None
    since = project.catalog.baseline_since(project.id) or 0
    young = clock.wall_ns() - since < YOUNG_SCAN_S * 1e9     # else not a small tree
    if young and not _size(project) and pending.settle(project, number, PENDING_GRACE_S, wait_only=True):
        return f"checkpoint {number}"     # a small tree's first scan was in right after
    return f"checkpoint {number} pending"


def _dispatch(project: Project, ev: Event, pid: int, served: bool = False) -> str:
    if ev.kind == "session_start":
        return "session registered; " + _ensure_watcher(project, config.load_quietly(project.root))
    if ev.kind == "session_end":
        _close_windows(project, ev)
        with project.catalog.transaction():
            project.catalog.end_session(ev.agent, ev.session_id, clock.wall_ns())
        # the watcher stays: `claude -p`, resumed sessions, `codex exec` and Gemini CLI start
        # a session per prompt, and a watcher restarted each time would rescan the whole tree
        # each time. It exits after its idle time (watch_idle_minutes) instead.
        return "session ended"
    if ev.kind == "prompt":
        settings = config.load_quietly(project.root)
        started = _ensure_watcher(project, settings)   # a watcher that died comes back (this scan is a full one)
        meta = {"agent": ev.agent, "session_id": ev.session_id, "prompt_id": ev.prompt_id,
                "prompt_source": ev.prompt_source, "transcript_path": ev.transcript_path}
        _close_windows(project, ev)
        # an agent that reports an edit only after it (Cursor) leaves nothing to put back: its
        # prompts wait for the first scan, as before
        may_pend = ev.agent not in AFTER_EDIT_ONLY
        if may_pend and _first_scan_running(project, wait_for_start=started != "watcher off"):
            note = _pending_prompt(project, ev, meta)
            if note:
                return note
        deadline = time.monotonic() + SCAN_LOCK_TIMEOUT
        while True:
            try:
                # short tries: a first scan that begins meanwhile takes the prompt as pending
                cp, _ = scan(project, dict(kind="prompt", message=ev.prompt, meta=meta, settings=settings),
                             timeout=max(0.1, min(1.0, deadline - time.monotonic())))
                return f"checkpoint {cp.number}"
            except StoreLocked:
                if may_pend and _first_scan_running(project):
                    note = _pending_prompt(project, ev, meta)
                    if note:
                        return note
                if time.monotonic() >= deadline:
                    raise
    if ev.kind == "stop":
        _close_windows(project, ev, ev.stop_scope)
        if _first_scan_running(project):
            return "turn closed (the first scan completes it)"
        scan(project)
        return "turn closed"
    if ev.kind == "file_edited":
        return _edited(project, ev)
    if ev.tool_kind == "shell":
        return _shell(project, ev, pid, served)
    if ev.tool_kind == "edit":
        return _edit(project, ev)
    return "nothing to do"


def _size(project: Project) -> bool | None:
    """Whether the tree had over BIG_TREE files at the last scan (None: never scanned). A
    prompt waits a little for a starting watcher to begin the first scan of a tree not known
    to be small (a second full scan is saved, and the prompt need not wait for the first),
    and a little for it to complete one not known to be big."""
    import json
    state = project.catalog.scan_state(project.id)
    if not state["last_tree"]:
        return None
    try:
        return json.loads(state["last_stats"] or "{}").get("files", 0) >= BIG_TREE
    except (ValueError, AttributeError):
        return None


BIG_TREE = 5000


def _edited(project: Project, ev: Event) -> str:
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


def _shell(project: Project, ev: Event, pid: int, served: bool = False) -> str:
    """A shell window: opened after a scan (what came before is not the command's), closed
    before one (the scan's segment ends with it). Each is marked in the watcher's stream."""
    from rewind.capture.dirty import mark
    from rewind.capture.procs import hook_chain, last_pid
    catalog = project.catalog
    if ev.kind == "pre_tool":
        timeout = SCAN_LOCK_TIMEOUT
        waits = _first_scan_running(project)
        if waits:
            # a command could write anywhere before the first scan has read it: it waits
            if served:
                raise FirstScanRunning()
            timeout = SHELL_WAIT_S
        try:
            _, stamp = scan(project, timeout=timeout)
        except StoreLocked:
            if not (waits and _first_scan_running(project)):
                raise
            # the first scan outlasted the wait (the agent's hook timeout is near): the command
            # runs in its window all the same, and the pending checkpoints say it ran
            stamp = clock.wall_ns()
            if project.catalog.has_pending(project.id):
                with project.catalog.transaction():
                    project.catalog.add_pending_edit(project.id, "", "!", None, None, None,
                                                     (ev.command or "")[:200], ev.session_id, stamp)
        agent, chain = hook_chain(pid)
        with project.catalog.transaction():
            wid = catalog.open_shell_window(project.id, ev.agent, ev.session_id, ev.agent_id, ev.tool_use_id,
                                            ev.tool, ev.command, stamp, agent, last_pid(), ",".join(map(str, chain)))
        mark(project, f"open-{wid}")
        return "shell window opened"
    with project.catalog.transaction():
        wid = catalog.find_window(project.id, "bash", ev.session_id, ev.tool_use_id)
        if wid is not None:
            catalog.close_window(wid, clock.wall_ns(), ev.failed)
    if wid is not None:
        mark(project, f"close-{wid}")
    if not _first_scan_running(project):
        scan(project)
    return "shell window closed"


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


def _edit(project: Project, ev: Event) -> str:
    from rewind.model import ChangeRow
    catalog = project.catalog
    notes = []
    for raw in ev.targets[:20]:
        full, rel, flags = _target(project, ev, raw)
        if rel is None or "ignored" in flags:
            # not captured by any snapshot: listed under the current checkpoint
            if ev.kind == "pre_tool":
                latest = catalog.latest(project.id)
                row = ChangeRow(path=rel if rel is not None else full, status="modified",
                                old_kind=None, new_kind=None, old_mode=None, new_mode=None,
                                old_oid=None, new_oid=None, old_size=None, new_size=None,
                                source="tool", tool=ev.tool, session_id=ev.session_id, flags=flags)
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
