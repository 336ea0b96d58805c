"""The watcher: a watchdog observer per project that timestamps every change.

It is a hint, never the truth (jj's fsmonitor, watchman's cookies):
- every event becomes a row (path, kind, time) in the catalog, batched; hooks read the rows
  as the dirty set, so a checkpoint lists only the directories on the way to a change;
- a hook first creates a *cookie* file in the project and waits until the watcher has
  written it back: every event from before the cookie is then in the catalog;
- whenever that cannot be trusted (no watcher, a stale heartbeat, a watcher younger than
  the last scan, a lost event: inotify queue overflow or the watch limit, a changed ignore
  file, no cookie answer) the hook scans the whole tree instead, and says so in
  `rewind status`. A missed event costs speed, never correctness.

Ignored directories are never watched (inotify watches are a limited resource) and
symlinks are never followed. One watcher per project (a lock), a heartbeat every second;
in the background it exits after an idle time, and SessionEnd stops it when no session of
the project is left.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time

from rewind import locations
from rewind.catalog.db import Catalog
from rewind.constants import COOKIE_PREFIX  # shared with the hooks' side (dirty.py), which must not load this
from rewind.capture.ignore import IgnoreRules
from rewind.capture.ignore import exclude_signature
from rewind.capture.ignore import is_always_ignored
from rewind.lock import try_lock

IGNORE_FILES = (".gitignore", ".rewindignore")
HEARTBEAT_S = 1.0
STALE_S = 5.0                    # a heartbeat older than this: the watcher is gone
FLUSH_S = 0.05
COMMAND_POLL_S = 0.02            # while a shell window waits for its command: the pid account
WINDOW_LOST_S = 30.0             # a window closed this long ago without its marker: gone
STARTING = "the watcher is still starting"


def lock_name(project_id: int) -> str:
    return f"watch-{project_id}.lock"


# -- the observer ------------------------------------------------------------------------

class _Rules:
    """Ignore rules per directory, computed on demand (the watch list and event filter)."""

    def __init__(self, root: str):
        self.root = root
        self.by_dir: dict[str, IgnoreRules] = {"": IgnoreRules.for_root(root)}

    def reset(self) -> None:
        self.by_dir = {"": IgnoreRules.for_root(self.root)}

    def rules(self, rel_dir: str) -> IgnoreRules:
        got = self.by_dir.get(rel_dir)
        if got is None:
            parent = rel_dir.rpartition("/")[0]
            got = self.rules(parent).for_subdir(rel_dir, os.path.join(self.root, rel_dir))
            self.by_dir[rel_dir] = got
        return got

    def ignored(self, rel: str, is_dir: bool) -> bool:
        if not rel:
            return False
        parts = rel.split("/")
        if any(is_always_ignored(p) for p in parts):
            return True
        # an ignored ancestor hides everything below it
        for i in range(1, len(parts)):
            if self.rules("/".join(parts[:i - 1])).is_ignored("/".join(parts[:i]), True):
                return True
        return self.rules("/".join(parts[:-1])).is_ignored(rel, is_dir)


def _observer_classes():
    """watchdog's inotify observer with a watch group that skips ignored directories and
    symlinks, and reports a reached watch limit and queue overflows instead of hiding them."""
    from watchdog.observers.api import BaseObserver
    from watchdog.observers.inotify import InotifyFullEmitter, InotifyWatchGroup
    from watchdog.observers.inotify_c import InotifyFD

    class Group(InotifyWatchGroup):
        owner: "Watcher | None" = None

        def _add_all_callbacks(self, path: bytes) -> None:
            owner = Group.owner
            is_dir = os.path.isdir(path)
            self._add_callback(path)
            if not (is_dir and self.is_recursive):
                return
            for top, dirnames, _ in os.walk(path):
                keep = []
                for d in dirnames:
                    full = os.path.join(top, d)
                    if os.path.islink(full) or (owner is not None and owner.ignored_dir(full)):
                        continue
                    keep.append(d)
                    self._add_callback(full)
                dirnames[:] = keep

        def _add_callback(self, path: bytes) -> None:
            try:
                wd = self._inotify_fd.add_callback(path, self.event_mask, self._callback, self._id)
                self._active_callbacks_by_path[path] = wd
                self._active_callbacks_by_watch[wd] = path
            except OSError as e:
                if e.errno == errno.ENOSPC and Group.owner is not None:
                    Group.owner.lost("limit")
                if path == self.path:
                    raise

        def on_queue_overflow(self) -> None:
            if Group.owner is not None:
                Group.owner.lost("overflow")
            super().on_queue_overflow()

        @property
        def watched(self) -> int:
            return len(self._active_callbacks_by_path)

    class Emitter(InotifyFullEmitter):
        def on_thread_start(self) -> None:
            self._inotify = Group(self._inotify_fd, os.fsencode(self.watch.path), is_recursive=True,
                                  event_mask=self.get_event_mask_from_filter(), follow_symlink=False)
            Group.owner.group = self._inotify

    class Observer(BaseObserver):
        def __init__(self) -> None:
            self._inotify_fd = InotifyFD()
            self._inotify_fd.start()
            super().__init__(Emitter, timeout=0.2, inotify_fd=self._inotify_fd)

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self._inotify_fd.stop()
            self._inotify_fd.join()

    return Group, Observer


class Watcher:
    """One project's observer, its event buffer and its catalog rows."""

    def __init__(self, home: str, root: str, project_id: int, background: bool, idle_s: float | None,
                 on_ready=None):
        self.on_ready = on_ready
        self.home, self.root, self.project_id = home, root, project_id
        self.background, self.idle_s = background, idle_s
        self.rules = _Rules(root)
        self.pending: list[tuple[str, str, int, str | None]] = []
        self.lock = threading.Lock()
        self.stopping = False                    # set by the signal handler: a plain flag, no lock
        self.stop_reason = "stopped"
        self.overflow_ns: int | None = None
        self.limit_hit = False
        self.group = None
        self.events = 0
        from rewind.capture.procs import Commands
        self.commands = Commands()
        self.closed: set[int] = set()            # windows a close marker took out
        self.exclude = exclude_signature(root)   # .git/info/exclude as the rules read it
        self.windows_lock = threading.RLock()    # markers (observer thread) and refreshes (main)
        self.windows_loaded = False              # load_windows() has run
        self.watching_since = time.time_ns()
        self.flush_lock = threading.Lock()       # a batch is taken and committed as one step
        self._local = threading.local()          # one catalog connection per thread
        self._catalogs: list[Catalog] = []

    @property
    def catalog(self) -> Catalog:
        cat = getattr(self._local, "catalog", None)
        if cat is None:
            cat = self._local.catalog = Catalog(self.home)
            self._catalogs.append(cat)
        return cat

    # -- filtering ---------------------------------------------------------------------
    def rel(self, path) -> str | None:
        path = os.fsdecode(path)
        if path == self.root:
            return ""
        if not path.startswith(self.root + "/"):
            return None
        return path[len(self.root) + 1:]

    def ignored_dir(self, path) -> bool:
        rel = self.rel(path)
        return rel is None or self.rules.ignored(rel, True)

    # -- events ------------------------------------------------------------------------
    def lost(self, what: str) -> None:
        """Events were lost: the next scan must read everything (an anchor event says so)."""
        now = time.time_ns()
        if what == "overflow":
            self.overflow_ns = now
        else:
            self.limit_hit = True
        with self.lock:
            self.pending.append(("", "r", now, None))

    def load_windows(self) -> None:
        """Once, before the first event is placed: every shell window open when the watches
        went in, closed since or not (a hook may have opened one, and the command run,
        before this watcher could see the open marker; its close marker comes later in the
        stream and takes it out there). Until then a window's changes would go untagged."""
        with self.windows_lock:
            if self.windows_loaded:
                return
            rows = self.catalog.db.execute(
                "SELECT id, agent_pid, pid_mark, hook_pids FROM windows WHERE project_id=? AND kind='bash' "
                "AND (closed_ns IS NULL OR closed_ns >= ?)", (self.project_id, self.watching_since)).fetchall()
            self.commands.update([r for r in rows if r[0] not in self.closed], set())
            self.windows_loaded = True

    def on_event(self, event) -> None:
        if not self.windows_loaded:
            self.load_windows()
        now = time.time_ns()
        kinds = []
        etype = event.event_type
        if etype == "moved":
            kinds = [(event.src_path, "m"), (event.dest_path, "c")]
        elif etype == "created":
            kinds = [(event.src_path, "c")]
        elif etype in ("deleted", "modified", "closed", "attrib"):
            kinds = [(event.src_path, "m")]
        for path, kind in kinds:
            if not path:
                continue
            rel = self.rel(path)
            if rel is None:
                continue
            name = rel.rpartition("/")[2]
            if name.startswith(COOKIE_PREFIX) and "/" not in rel:
                if kind == "c":
                    self.marker(name[len(COOKIE_PREFIX):], name)
                continue
            if self.rules.ignored(rel, event.is_directory):
                continue
            if name in IGNORE_FILES:
                # what is ignored changed: the next scan reads everything, and newly
                # unignored directories get watches
                self.rules.reset()
                kind = "r"
                if self.group is not None:
                    try:
                        self.group._add_all_callbacks(os.fsencode(self.root))
                    except OSError:
                        pass
            writer = self.commands.explaining()
            with self.lock:
                self.pending.append((rel, kind, now, writer))

    def marker(self, what: str, name: str) -> None:
        """A hook's marker, at its place in the event stream: a shell window opens or
        closes exactly here (dirty.mark); any other cookie is a sync to answer."""
        kind, _, rest = what.partition("-")
        if kind in ("open", "close"):
            ids = {int(x) for x in rest.split("-", 1)[0].split(",") if x.isdigit()}
            with self.windows_lock:
                if kind == "open":
                    self.refresh_windows(ids)
                else:
                    self.closed.update(ids)
                    self.commands.update([], ids)
            return
        self.refresh_windows()                 # a hook may have just opened a shell window
        self.flush(cookie=name)

    def check_exclude(self) -> None:
        """.git/info/exclude is not watched (.git/ is not): looked at every heartbeat. When it
        changed, what is ignored changed: the rules are read again, newly unignored
        directories get watches, and the next scan reads everything."""
        sig = exclude_signature(self.root)
        if sig == self.exclude:
            return
        self.exclude = sig
        self.rules.reset()
        if self.group is not None:
            try:
                self.group._add_all_callbacks(os.fsencode(self.root))
            except OSError:
                pass
        with self.lock:
            self.pending.append((".git/info/exclude", "r", time.time_ns(), None))

    def refresh_windows(self, ids: set[int] | None = None) -> None:
        """Shell windows open in the catalog join the watcher's view (those named by an open
        marker, or all of them). Only a close marker takes one out, at its place in the
        stream: a window the catalog says is closed may still have changes of its command
        waiting in the queue. A window closed WINDOW_LOST_S ago whose marker never came (it
        could not be written) leaves then."""
        with self.windows_lock:
            # named by an open marker: it opens here even if the catalog says it closed since
            # (a watcher this late reads its close marker further on)
            rows = self.catalog.db.execute(
                "SELECT id, agent_pid, pid_mark, hook_pids FROM windows WHERE project_id=? AND kind='bash' AND "
                + ("id IN (%s)" % ",".join(map(str, ids)) if ids else "closed_ns IS NULL"),
                (self.project_id,)).fetchall()
            lost = set()
            if ids is None:
                known = set(self.commands.windows)
                recent = {r[0] for r in self.catalog.db.execute(
                    "SELECT id FROM windows WHERE project_id=? AND kind='bash' AND closed_ns > ?",
                    (self.project_id, time.time_ns() - int(WINDOW_LOST_S * 1e9)))}
                lost = known - {r[0] for r in rows} - recent
            self.commands.update([r for r in rows if r[0] not in self.closed], lost)
            if len(self.closed) > 1000:
                self.closed = set(sorted(self.closed)[-100:])

    def flush(self, cookie: str | None = None) -> None:
        """Write the pending events (and a cookie's answer after them): under flush_lock, so
        a cookie's seq is never below an event that came before it."""
        with self.flush_lock:
            with self.lock:
                batch, self.pending = self.pending, []
            if batch or cookie is not None:
                self._write(batch, cookie)

    def _write(self, batch: list, cookie: str | None) -> None:
        merged: dict[str, tuple[str, int, str | None]] = {}
        rank = {"m": 0, "c": 1, "r": 2}
        for rel, kind, ts, writer in batch:
            prev = merged.get(rel)
            if prev is not None and rank[prev[0]] > rank[kind]:
                kind = prev[0]
            merged[rel] = (kind, ts, writer)
        cat = self.catalog
        with cat.transaction():
            cat.db.executemany("INSERT INTO watch_events(project_id, path, kind, ts, writer) VALUES (?,?,?,?,?)",
                               [(self.project_id, os.fsencode(p), k, ts, w) for p, (k, ts, w) in merged.items()])
            if cookie is not None:
                cat.db.execute("INSERT OR REPLACE INTO watch_cookies(name, project_id, seq) VALUES (?,?,?)",
                               (cookie, self.project_id, cat.last_event_seq(self.project_id)))
        self.events += len(merged)

    # -- life --------------------------------------------------------------------------
    def register(self, cat: Catalog) -> None:
        now = time.time_ns()
        with cat.transaction():
            cat.db.execute("INSERT OR REPLACE INTO watchers(project_id, pid, started_ns, heartbeat_ns, "
                           "background) VALUES (?,?,?,?,?)",
                           (self.project_id, os.getpid(), now, now, int(self.background)))

    def heartbeat(self, cat: Catalog, ready_ns: int | None = None) -> None:
        dirs = self.group.watched if self.group is not None else 0
        with cat.transaction():
            cat.db.execute("UPDATE watchers SET heartbeat_ns=?, dirs=?, events=?, overflow_ns=?, limit_hit=?"
                           + (", ready_ns=?" if ready_ns else "") + " WHERE project_id=? AND pid=?",
                           (time.time_ns(), dirs, self.events, self.overflow_ns, int(self.limit_hit),
                            *((ready_ns,) if ready_ns else ()), self.project_id, os.getpid()))

    def idle_for(self, cat: Catalog, started_ns: int) -> float:
        last = cat.db.execute(
            "SELECT max(coalesce((SELECT last_scan_ns FROM project_state WHERE project_id=?), 0),"
            " coalesce((SELECT max(opened_ns) FROM windows WHERE project_id=?), 0))",
            (self.project_id, self.project_id)).fetchone()[0]
        return (time.time_ns() - max(last or 0, started_ns)) / 1e9

    def run(self) -> int:
        from watchdog.events import FileSystemEventHandler
        from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent,
                                     FileClosedEvent, FileCreatedEvent, FileDeletedEvent,
                                     FileModifiedEvent, FileMovedEvent)
        try:
            from watchdog.events import DirAttribEvent, FileAttribEvent
            attrib = [DirAttribEvent, FileAttribEvent]
        except ImportError:  # pragma: no cover - older watchdog reports chmod as modified
            attrib = []

        Group, Observer = _observer_classes()
        Group.owner = self
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                try:
                    watcher.on_event(event)
                except Exception as e:  # one bad event must not kill the watcher
                    from rewind.log import log
                    log(f"watch {watcher.root}: event {event!r} failed", e)

        self.register(self.catalog)
        started = time.time_ns()
        self.watching_since = started            # before the watches: windows open from here are loaded
        observer = Observer()
        observer.start()
        try:
            observer.schedule(Handler(), self.root, recursive=True, event_filter=[
                FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
                DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent, *attrib])
            self.load_windows()                  # (if no event came first)
            ready = time.time_ns()
            self.heartbeat(self.catalog, ready_ns=ready)
            self._baseline()
            if self.on_ready is not None:
                self.on_ready(self.group.watched if self.group is not None else 0)
            next_beat = time.monotonic() + HEARTBEAT_S
            next_windows = 0.0
            while not self._pause(COMMAND_POLL_S if self.commands.active else FLUSH_S):
                if time.monotonic() >= next_windows:
                    next_windows = time.monotonic() + 1.0
                    self.refresh_windows()
                if self.commands.active:
                    self.commands.poll()
                self.flush()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + HEARTBEAT_S
                    self.heartbeat(self.catalog)
                    self.check_exclude()
                    if self.idle_s is not None and self.idle_for(self.catalog, started) >= self.idle_s:
                        self.stop_reason = "idle"
                        break
                    if not os.path.isdir(self.root):
                        self.stop_reason = "the project directory is gone"
                        break
        finally:
            observer.stop()
            observer.join(timeout=5)
            try:
                self.flush()
                with self.catalog.transaction():
                    self.catalog.db.execute("UPDATE watchers SET stopped_ns=?, stop_reason=? WHERE "
                                            "project_id=? AND pid=?", (time.time_ns(), self.stop_reason,
                                                                       self.project_id, os.getpid()))
            finally:
                for cat in self._catalogs:
                    try:
                        cat.close()
                    except Exception:
                        pass
        return 0

    def _pause(self, seconds: float) -> bool:
        """Sleep, then say whether to stop. Not threading.Event.wait: a signal handler that
        sets an Event while the main thread sits inside Event.wait takes the lock that wait
        holds, and the watcher deadlocks (seen once: gdb showed exactly that)."""
        time.sleep(seconds)
        return self.stopping

    def _baseline(self) -> None:
        """A full scan right after the watches are in place: the base every later
        incremental scan builds on (the first snapshot of a big tree, off the hooks' time)."""
        from rewind.project import open_project
        from rewind.capture.snapshot import record
        try:
            project = open_project(self.root, create=True)
            try:
                record(project, None, lock_timeout=120.0, baseline=True)
            finally:
                project.close()
        except Exception as e:
            from rewind.log import log
            log(f"watch {self.root}: the first scan failed", e)


STOP_GRACE_S = 8.0


def _exit_if_stuck() -> None:
    """Asked to stop, the watcher must go even if something hangs: faulthandler's own
    thread (C, no Python lock, safe from a signal handler) exits the process after
    STOP_GRACE_S, printing every thread's stack on stderr."""
    import faulthandler
    try:
        faulthandler.dump_traceback_later(STOP_GRACE_S, exit=True)
    except (RuntimeError, ValueError, OSError):
        pass


def serve(root: str, project_id: int, background: bool, idle_s: float | None,
          on_ready=None) -> int:
    """Run the watcher in this process until stopped. Returns 0, or 1 if one runs already."""
    home = locations.data_dir()
    fd = try_lock(home, lock_name(project_id))
    if fd is None:
        return 1
    try:
        w = Watcher(home, root, project_id, background, idle_s, on_ready)

        def stop(signum, frame):
            w.stop_reason = "stopped" if signum == signal.SIGTERM else "interrupted"
            w.stopping = True               # no lock may be taken here: see Watcher._pause
            _exit_if_stuck()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        if background:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        return w.run()
    finally:
        os.close(fd)


# -- control from other processes ----------------------------------------------------------

def running(home: str, catalog: Catalog, project_id: int) -> dict | None:
    """The live watcher's row, or None. Alive = its lock is held and its heartbeat is fresh."""
    row = catalog.watcher(project_id)
    if row is None or row["stopped_ns"] is not None:
        return None
    fd = try_lock(home, lock_name(project_id))
    if fd is not None:
        os.close(fd)      # nobody holds it: the watcher died without a word
        return None
    return row


def healthy(row: dict | None) -> str | None:
    """None if the watcher's word can be taken, else why not."""
    if row is None:
        return "no watcher"
    if row["stopped_ns"] is not None:
        return f"the watcher stopped ({row['stop_reason']})"
    if time.time_ns() - row["heartbeat_ns"] > STALE_S * 1e9:
        return "the watcher's heartbeat is stale"
    if row["ready_ns"] is None:
        return STARTING
    if row["limit_hit"]:
        return "the inotify watch limit was reached"
    return None


def start_background(root: str, idle_minutes: float | None = None) -> None:
    """Start `rewind watch` for the project, detached (a no-op when one runs: it exits)."""
    from rewind.background import spawn
    args = ["-m", "rewind", "watch", "--project", root, "--background"]
    if idle_minutes is not None:
        args += ["--idle-minutes", repr(idle_minutes)]
    spawn(args, cwd="/")


def stop(home: str, catalog: Catalog, project_id: int, wait_s: float = 0.0) -> bool:
    """Ask the project's watcher to stop (SIGTERM). Returns whether one was running."""
    row = running(home, catalog, project_id)
    if row is None:
        return False
    pid = row["pid"]
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        if b"watch" not in cmd:
            return False        # the pid was reused by something else
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        fd = try_lock(home, lock_name(project_id))
        if fd is not None:
            os.close(fd)
            break
        time.sleep(0.02)
    return True
