"""What a scan must look at: a `DirtySource` says. The watcher's dirty set when its word can
be taken (`WatcherRows`), else the whole tree and why (`FullScan`); tests can hand a scan a
`Fixed` set. See watch/daemon.py for the protocol; this is the hooks' side of it (the cookie
`sync` and the shell windows' `put_marker`)."""

from __future__ import annotations

import os
import time

from rewind import clock
from rewind.capture.ignore import GIT_EXCLUDE, exclude_signature
from rewind.constants import COOKIE_PREFIX, HEARTBEAT_STALE_S
from rewind.lock import try_lock
from rewind.model import PathEvent, ScanState, WatcherRow
from rewind.project import Project
from rewind.structs import dataclass

COOKIE_TIMEOUT_S = 0.5
ANCHOR = "r"        # an event kind that makes the next scan read everything
MARKER_LOST = b"\0marker"   # an anchor's path: a shell window's marker could not be written


@dataclass
class ScanPlan:
    quick: bool                          # True: only the dirty set; False: the whole tree
    reason: str | None                   # why the whole tree although a watcher was expected
    dirty: dict[str, str]                # path -> "m" | "c"
    upto: int                            # watcher events consumed up to this seq
    events: dict[str, PathEvent] | None  # path -> its event, for the attribution


# In the watcher's own process (the hooks it serves, its first scan) a cookie is answered in
# memory: the watcher sets this to its `Answers` (watch/answers.py) while it runs, and then
# writes no answer row for such a cookie, and the caller polls none. None in any other process.
LOCAL_ANSWERS = None


def sync(project: Project, timeout: float = COOKIE_TIMEOUT_S) -> int | None:
    """Create a cookie and wait until the watcher wrote it back: every event before it is
    then in the catalog. Returns the seq the watcher had reached, or None."""
    name = f"{COOKIE_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
    path = os.path.join(project.root, name)
    local = LOCAL_ANSWERS
    waiter = local.expect(project.id, name) if local is not None else None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        if waiter is not None:
            local.take(name)
        return None
    os.close(fd)
    catalog = project.catalog
    try:
        if waiter is not None:
            return waiter.wait(timeout)
        deadline = time.monotonic() + timeout
        delay = 0.0003
        while True:
            seq = catalog.take_cookie(name)
            if seq is not None:
                return seq
            if time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 1.5, 0.005)
    finally:
        if waiter is not None:
            local.take(name)            # (unanswered: the watcher will not answer it now)
        try:
            os.unlink(path)
        except OSError:
            pass


def put_marker(project: Project, what: str) -> None:
    """Put a marker into the watcher's event stream (a file created and removed at once, no
    wait): `what` is "open-ID" or "close-ID,ID". The watcher opens or closes those shell
    windows at exactly that point of its stream, so whether a change came before, inside or
    after a window is read from one queue, not from the clocks of two processes, however
    late the watcher reads. Without a running watcher no marker is put. A marker
    that cannot be written makes the next scan a full one (attribution at hook
    granularity, which needs no marker)."""
    row = project.catalog.watcher(project.id)
    if row is None or row.stopped_ns is not None:
        return
    path = os.path.join(project.root, f"{COOKIE_PREFIX}{what}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:
        with project.catalog.transaction():
            project.catalog.add_watch_event(project.id, MARKER_LOST, ANCHOR, clock.wall_ns())
        return
    try:
        os.unlink(path)
    except OSError:
        pass


class FullScan:
    """The whole tree: no watcher to ask, or a scan that must read everything."""

    def plan(self, project: Project, state: ScanState) -> ScanPlan:
        return ScanPlan(False, None, {}, project.catalog.last_event_seq(project.id), None)


class FullUpto:
    """The whole tree, consuming the watcher's events up to `upto` only (a watcher's first
    scan: what came after it began reading is read again by the next scan)."""

    def __init__(self, upto: int):
        self.upto = upto

    def plan(self, project: Project, state: ScanState) -> ScanPlan:
        return ScanPlan(False, None, {}, self.upto, None)


class Fixed:
    """A dirty set given outright (`path -> "m" | "c"`, with the watcher's `events` if any,
    `path -> (kind, time, writer)`, a `PathEvent` or its fields): incremental scans and
    attribution on a set the caller chose, without an inotify thread. The watcher's rows
    are left for the next scan."""

    def __init__(self, dirty: dict[str, str], events: dict[str, tuple] | None = None):
        self.dirty = dirty
        self.events = {p: PathEvent._make(e) for p, e in events.items()} if events is not None else None

    def plan(self, project: Project, state: ScanState) -> ScanPlan:
        if not state.last_tree:
            return FULL.plan(project, state)     # nothing to build on yet
        return ScanPlan(True, None, dict(self.dirty), state.consumed_seq or 0, self.events)


class WatcherRows:
    """The watcher's events since the last scan, when its word can be taken (running,
    healthy, caught up with a cookie, nothing lost); else the whole tree, and why."""

    def plan(self, project: Project, state: ScanState) -> ScanPlan:
        """Inside the project lock: how the next scan goes."""
        cat = project.catalog
        row = cat.watcher(project.id)
        if row is None or row.stopped_ns is not None or os.environ.get("REWIND_WATCH") == "0":
            return FULL.plan(project, state)

        def full(reason: str) -> ScanPlan:
            return ScanPlan(False, reason, {}, cat.last_event_seq(project.id), None)

        why = healthy(row)
        if why is None and running(project.home, cat, project.id) is None:
            why = "the watcher is not running"
        if why == STARTING or (why is None and (
                not state.last_tree or (state.scan_start_ns or 0) < row.ready_ns)):
            # warming up: this full scan is the base the watcher's events build on (no fallback)
            return ScanPlan(False, None, {}, cat.last_event_seq(project.id), None)
        if why is not None:
            return full(why)
        last = state.stats() or {}
        if last.get("exclude", EXCLUDE_UNKNOWN) != exclude_signature(project.root):
            # not watched (.git/ is not), so looked at: one stat a hook
            return full(f"{GIT_EXCLUDE} changed")
        if last.get("hardlinks_over"):
            return full(f"over {MAX_HARDLINKS} files with other links (a write through another name "
                        "makes no event here)")
        upto = sync(project)
        if upto is None:
            return full(f"the watcher did not answer within {COOKIE_TIMEOUT_S:g} s")
        # a file with other links can be written through a name outside the project, which the
        # watcher never sees: each is looked at again, every time
        dirty: dict[str, str] = {p: "m" for p in last.get("hardlinks", [])}
        events: dict[str, PathEvent] = {}
        make = PathEvent._make
        for e in cat.events(project.id, state.consumed_seq or 0, upto):
            path = e.path
            if e.kind == ANCHOR:
                reason = ("events were lost (inotify queue overflow or watch limit)" if path == ""
                          else "a shell window's marker could not be written" if path == "\0marker"
                          else f"{GIT_EXCLUDE} changed" if path == GIT_EXCLUDE
                          else f"an ignore file changed ({path})")
                return ScanPlan(False, reason, {}, upto, None)
            if e.kind == "c" or path not in dirty:
                dirty[path] = e.kind
            events[path] = make((dirty[path], e.ts, e.writer))
        return ScanPlan(True, None, dirty, upto, events)


FULL = FullScan()
WATCHER = WatcherRows()


MAX_HARDLINKS = 2000
EXCLUDE_UNKNOWN = "?"


def note_hardlinks(stats: dict, found: set[str], prev: dict | None, examined) -> None:
    """The files with other links after a scan: those it found, and the previous scan's it
    did not look at (`examined(path)` says whether it did; None: a full scan looked at all)."""
    kept = set() if examined is None else {p for p in (prev or {}).get("hardlinks", []) if not examined(p)}
    every = sorted(found | kept)
    stats["hardlinks"] = every[:MAX_HARDLINKS]
    if len(every) > MAX_HARDLINKS:
        stats["hardlinks_over"] = len(every)


def merge_stats(root: str, prev: dict | None, new: dict, listed: list[str]) -> dict:
    """A quick scan's skip lists: the new ones for the directories it listed, the previous
    scan's for everything it did not look at."""
    listed_set = set(listed)
    out = {"mode": "quick", "listed_dirs": len(listed)}
    for key in ("large", "unreadable", "special", "changing"):
        kept = [p for p in (prev or {}).get(key, []) if p.rpartition("/")[0] not in listed_set
                and os.path.lexists(os.path.join(root, p))]
        out[key] = sorted(set(kept) | set(new.get(key, [])))[:100]
    return out


# -- the watcher as the hooks see it (watch/ runs it; capture never imports watch/) --------

STARTING = "the watcher is still starting"


def lock_name(project_id: int) -> str:
    return f"watch-{project_id}.lock"


def running(home: str, catalog, project_id: int) -> WatcherRow | None:
    """The live watcher's row, or None. Alive = its lock is held and its heartbeat is fresh."""
    row = catalog.watcher(project_id)
    if row is None or row.stopped_ns is not None:
        return None
    fd = try_lock(home, lock_name(project_id))
    if fd is not None:
        os.close(fd)      # nobody holds it: the watcher died without a word
        return None
    return row


def healthy(row: WatcherRow | None) -> str | None:
    """None if the watcher's word can be taken, else why not."""
    if row is None:
        return "no watcher"
    if row.stopped_ns is not None:
        return f"the watcher stopped ({row.stop_reason})"
    if clock.wall_ns() - row.heartbeat_ns > HEARTBEAT_STALE_S * 1e9:
        return "the watcher's heartbeat is stale"
    if row.ready_ns is None:
        return STARTING
    if row.limit_hit:
        return "the inotify watch limit was reached"
    return None
