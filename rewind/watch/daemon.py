"""The watcher process: a watchdog observer per project that timestamps every change.

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
in the background it outlives the sessions that started it (an agent that starts a session
per prompt would otherwise pay a full scan per prompt) and exits after an idle time, or
when the project or rewind's data directory is gone, or the project's directory was
replaced by another (renamed away, a new one made at its path). A lost watch is written
with the batch that carries its anchor: the very next hook distrusts the watcher. A
watcher stopped in a served call, or holding the project lock, is killed by the hook that
waits for it (rewind/stalled.py).

It serves the project's hooks over a private socket (serve.py): a hook is then a thin
client, and the event is recorded here, warm. Its first scan runs on a thread of its own
(first_scan.py); a prompt meanwhile does not wait for it (capture/pending.py). The process
around it (its lock, its signals): process.py.

Past the house's ~350 lines on purpose: the event path, the flush and the main loop share the
watcher's buffer and its locks, and stay together; the rest is apart (windows.py, serve.py,
first_scan.py, process.py, report.py, answers.py).
"""

from __future__ import annotations

import os
import threading
import time

from rewind import clock
from rewind.capture.ignore import GIT_EXCLUDE, IGNORE_FILES, exclude_signature
from rewind.catalog.db import Catalog
from rewind.constants import COOKIE_PREFIX  # shared with the hooks' side (dirty.py), which must not load this
from rewind.model import PathEvent
from rewind.watch.answers import Answers
from rewind.watch.observer import Rules, observer_classes
from rewind.watch.windows import ShellWindows

HEARTBEAT_S = 1.0
FLUSH_S = 0.05
BACKGROUND_LOOK_S = 0.25         # while a command runs in the background: looks at its tree
COMMAND_POLL_S = 0.02            # while a shell window waits for its command: the pid account


class Watcher(ShellWindows):
    """One project's observer, its event buffer and its catalog rows (the shell windows it
    tags events with: windows.py)."""

    def __init__(self, home: str, root: str, project_id: int, background: bool, idle_s: float | None,
                 on_ready=None):
        self.on_ready = on_ready
        self.home, self.root, self.project_id = home, root, project_id
        self.background, self.idle_s = background, idle_s
        self.rules = Rules(root)
        self.buffered: list[tuple[str, str, int, str | None]] = []   # events not yet written
        self.lock = threading.Lock()
        self.stopping = False                    # set by the signal handler: a plain flag, no lock
        self.stop_reason = "stopped"
        self.overflow_ns: int | None = None
        self.limit_hit = False
        self.limit_unsaved = False               # a lost watch its batch has not written yet
        self.group = None
        self.events = 0
        from rewind.capture.procs import Commands
        self.commands = Commands(root)
        self.closed: set[int] = set()            # windows a close marker took out
        self.exclude = exclude_signature(root)   # .git/info/exclude as the rules read it
        self.windows_lock = threading.RLock()    # markers (observer thread) and refreshes (main)
        self.windows_loaded = False              # load_windows() has run
        self.watching_since = clock.wall_ns()
        self.flush_lock = threading.Lock()       # a batch is taken and committed as one step
        self._local = threading.local()          # one catalog connection per thread
        self.server = None                       # the hooks it serves (serve.py), once ready
        self._catalogs: list[Catalog] = []
        self.answers = Answers(project_id)       # this process's own cookies, answered in memory
        from rewind.watch.report import Report
        self.report = Report(root, foreground=not background)   # what it says, and where

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
        now = clock.wall_ns()
        if what == "overflow":
            self.overflow_ns = now
        else:
            self.limit_hit = True
        with self.lock:
            if what != "overflow":
                self.limit_unsaved = True        # written with this anchor, in its transaction
            self.buffered.append(("", "r", now, None))
        if self.report is not None:
            self.report.lost(what)

    def on_event(self, event) -> None:
        if not self.windows_loaded:
            self.load_windows()
        now = clock.wall_ns()
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
            writer = self.commands.explaining(rel, moved_in=etype == "moved" and kind == "c")
            with self.lock:
                self.buffered.append((rel, kind, now, writer))

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
            self.buffered.append((GIT_EXCLUDE, "r", clock.wall_ns(), None))

    def flush(self, cookie: str | None = None) -> None:
        """Write the buffered events (and a cookie's answer after them): under flush_lock, so
        a cookie's seq is never below an event that came before it. A cookie made in this
        process (`Answers`) is answered in memory, once the events are committed."""
        with self.flush_lock:
            with self.lock:
                batch, self.buffered = self.buffered, []
                limit, self.limit_unsaved = self.limit_unsaved, False
            waiter = self.answers.take(cookie) if cookie is not None else None
            if waiter is None:
                if batch or cookie is not None:
                    self._write(batch, cookie, limit)
                return
            seq = None
            try:
                if batch:
                    self._write(batch, None, limit)
                seq = self.catalog.last_event_seq(self.project_id)
            finally:
                waiter.answer(seq)              # None: the caller scans the whole tree at once

    def _write(self, batch: list, cookie: str | None, limit: bool = False) -> None:
        merged: dict[str, PathEvent] = {}
        rank = {"m": 0, "c": 1, "r": 2}
        make = PathEvent._make
        for rel, kind, ts, writer in batch:
            prev = merged.get(rel)
            if prev is not None and rank[prev.kind] > rank[kind]:
                kind = prev.kind
            merged[rel] = make((kind, ts, writer))
        self.catalog.add_watch_events(self.project_id, merged, cookie, os.getpid() if limit else None)
        self.events += len(merged)

    # -- life --------------------------------------------------------------------------
    def register(self, cat: Catalog) -> None:
        now = clock.wall_ns()
        cat.register_watcher(self.project_id, os.getpid(), now, self.background)

    def heartbeat(self, cat: Catalog, ready_ns: int | None = None) -> None:
        dirs = self.group.watched if self.group is not None else 0
        served = self.server.take_count() if self.server is not None else 0
        try:
            with cat.transaction():
                cat.heartbeat(self.project_id, os.getpid(), clock.wall_ns(), dirs, self.events, self.overflow_ns,
                              self.limit_hit, ready_ns)
                if served:
                    cat.count_served_hooks(self.project_id, served, self.server.last_ns)
        except BaseException:
            if served:
                with self.server.count_lock:
                    self.server.served += served     # counted at the next beat
            raise

    def serve_hooks(self) -> None:
        """From now on the hooks are served here (serve.py); a watcher that cannot open its
        socket goes on watching, and the hooks do their work themselves."""
        from rewind.watch.serve import HookServer
        server = HookServer(self.home, self.root, self.project_id, lambda: self.stopping)
        try:
            server.start()
        except OSError as e:
            from rewind.log import log
            log(f"watch {self.root}: cannot serve the hooks", e)
            return
        self.server = server

    def idle_for(self, cat: Catalog, started_ns: int) -> float:
        last = cat.last_activity(self.project_id)
        return (clock.wall_ns() - max(last or 0, started_ns)) / 1e9

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

        Group, Observer = observer_classes()
        Group.owner = self
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                try:
                    watcher.on_event(event)
                except Exception as e:  # one bad event must not kill the watcher
                    from rewind.log import log
                    log(f"watch {watcher.root}: event {event!r} failed", e)

        self.report.take_logging()
        self.register(self.catalog)
        root_id = _identity(self.root)           # a root replaced under it is another directory
        started = clock.wall_ns()
        self.watching_since = started            # before the watches: windows open from here are loaded
        observer = Observer()
        observer.start()
        try:
            observer.schedule(Handler(), self.root, recursive=True, event_filter=[
                FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
                DirCreatedEvent, DirDeletedEvent, DirModifiedEvent, DirMovedEvent, *attrib])
            self.load_windows()                  # (if no event came first)
            ready = clock.wall_ns()
            self.heartbeat(self.catalog, ready_ns=ready)
            from rewind.capture import dirty
            dirty.LOCAL_ANSWERS = self.answers   # the watches are in: this process's cookies come here
            self.serve_hooks()                   # from the start: a prompt during the first scan is pending
            from rewind.watch.first_scan import first_scan
            first = threading.Thread(target=first_scan, args=(self,), name="rewind-first-scan", daemon=True)
            first.start()
            next_beat = time.monotonic() + HEARTBEAT_S
            next_windows = next_bg = 0.0
            while not self._pause(COMMAND_POLL_S if self.commands.active else FLUSH_S):
                if first is not None and not first.is_alive():
                    first = None
                    if self.on_ready is not None:
                        self.on_ready(self.group.watched if self.group is not None else 0)
                if time.monotonic() >= next_windows:
                    next_windows = time.monotonic() + 1.0
                    self.refresh_windows()
                if self.commands.active:
                    self.commands.poll()
                if self.commands.background and time.monotonic() >= next_bg:
                    next_bg = time.monotonic() + BACKGROUND_LOOK_S
                    self.commands.look_background()
                self.flush()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + HEARTBEAT_S
                    self.heartbeat(self.catalog)
                    self.check_exclude()
                    if self.idle_s is not None and self.idle_for(self.catalog, started) >= self.idle_s:
                        self.stop_reason = "idle"
                        break
                    now_id = _identity(self.root)
                    if now_id is None:
                        self.stop_reason = "the project directory is gone"
                        break
                    if now_id != root_id:
                        # renamed away and another put in its place: these watches see the
                        # old one, and the hooks' cookies in the new one would go unanswered
                        # (each hook waiting COOKIE_TIMEOUT_S); the next prompt starts a
                        # watcher on the new one
                        self.stop_reason = "the project directory was replaced"
                        break
                    if not os.path.isdir(self.home):
                        self.stop_reason = "rewind's data directory is gone"
                        break
            if first is not None and not first.is_alive() and self.on_ready is not None:
                # the first scan was in before a stop ended the loop's pause: still said
                # (a `watch --stop` right after the ready mark found no "watching" line)
                self.on_ready(self.group.watched if self.group is not None else 0)
        finally:
            from rewind.capture import dirty
            if dirty.LOCAL_ANSWERS is self.answers:
                dirty.LOCAL_ANSWERS = None
            if self.server is not None:
                self.server.close()              # the call being served finishes first
            observer.stop()
            observer.join(timeout=5)
            try:
                if os.path.isdir(self.home):
                    self.flush()
                    served = self.server.take_count() if self.server is not None else 0
                    with self.catalog.transaction():
                        if served:
                            self.catalog.count_served_hooks(self.project_id, served, self.server.last_ns)
                        self.catalog.watcher_stopped(self.project_id, os.getpid(), clock.wall_ns(),
                                                     self.stop_reason)
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


def _identity(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the directory at `path`, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
