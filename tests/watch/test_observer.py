"""The inotify side of the watcher (watch/observer.py) on its own, with the real watchdog
observer on a real tree: events arrive for every watched directory, however deep and
however new, none for an ignored one, and the watches are counted. (watchdog 7.1.1 changed
how it keeps which watch is which path; a group that wrote into the old bookkeeping got no
events at all, and this is where that shows first.)"""

from __future__ import annotations

import os
import threading
import time

import pytest

from helpers import write

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux inotify")


class Owner:
    """What the group asks of the watcher (daemon.py): which directories to skip, and where
    to say what was lost."""

    def __init__(self, root: str):
        self.ignored = os.fsencode(os.path.join(root, "ignored"))
        self.group = None
        self.said: list[str] = []

    def ignored_dir(self, full: bytes) -> bool:
        return full == self.ignored or full.startswith(self.ignored + b"/")

    def lost(self, what: str) -> None:
        self.said.append(what)


def watching(root: str):
    from watchdog.events import FileSystemEventHandler

    from rewind.watch.observer import observer_classes
    Group, Observer = observer_classes()
    owner = Owner(root)
    Group.owner = owner
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            with lock:
                seen.append((event.event_type, os.fsdecode(event.src_path)))
                if getattr(event, "dest_path", ""):
                    seen.append((event.event_type, os.fsdecode(event.dest_path)))

    observer = Observer()
    observer.start()
    observer.schedule(Handler(), root, recursive=True)
    deadline = time.monotonic() + 10
    while owner.group is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert owner.group is not None, "the emitter never made its watch group"

    def paths() -> set[str]:
        with lock:
            return {os.path.relpath(p, root) for _, p in seen}

    return observer, owner, paths


def until(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    return check()


def test_events_come_from_every_watched_directory_and_none_from_an_ignored_one(tmp_path):
    root = str(tmp_path / "proj")
    write(root, "a/b/c/old.txt", "old")
    write(root, "ignored/x/old.txt", "old")
    observer, owner, paths = watching(root)
    try:
        assert owner.group.watched == 4                       # proj, a, a/b, a/b/c
        write(root, "a/b/c/deep.txt", "new")
        write(root, "top.txt", "new")
        write(root, "ignored/x/skip.txt", "new")
        os.makedirs(os.path.join(root, "d/e"))                  # a new tree: watched as it comes
        assert until(lambda: owner.group.watched == 6), owner.group.watched
        write(root, "d/e/later.txt", "made in a new directory")
        os.rename(os.path.join(root, "a/b/c/old.txt"), os.path.join(root, "a/b/c/moved.txt"))
        want = {"a/b/c/deep.txt", "top.txt", "d/e/later.txt", "a/b/c/old.txt", "a/b/c/moved.txt"}
        assert until(lambda: want <= paths()), sorted(paths())
        time.sleep(0.3)                                         # (an event for it would be in by now)
        assert not {p for p in paths() if p.startswith("ignored")}, sorted(paths())
        assert owner.said == []
        # a directory removed gives its watch back
        for name in os.listdir(os.path.join(root, "d/e")):
            os.unlink(os.path.join(root, "d/e", name))
        os.rmdir(os.path.join(root, "d/e"))
        assert until(lambda: owner.group.watched == 5), owner.group.watched
    finally:
        observer.stop()
        observer.join(10)
