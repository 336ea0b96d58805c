"""The inotify side of the watcher: ignore rules per directory, and watchdog's observer with
a watch group that skips ignored directories and symlinks and reports a reached watch limit
and queue overflows instead of hiding them."""

from __future__ import annotations

import errno
import os

from rewind.capture.ignore import IgnoreRules, is_always_ignored


class Rules:
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


def observer_classes():
    """watchdog's inotify observer with a watch group that skips ignored directories and
    symlinks, and reports a reached watch limit and queue overflows instead of hiding them.

    It leans on three of watchdog's overridable methods, the same from 7.1.0 on: the group's
    `_add_all_callbacks` (which directories get a watch: ours skips the ignored ones) and
    `_add_callback` (one watch), and the inotify reader's `add_callback`, the one call that
    adds a watch (where a reached limit shows, and the live watches are counted). Where
    watchdog keeps which watch is which path is its own business: 7.1.1 replaced its two
    dicts with a tree, and a group that wrote into the dicts got no events at all."""
    from watchdog.observers.api import BaseObserver
    from watchdog.observers.inotify import InotifyFullEmitter, InotifyWatchGroup
    from watchdog.observers.inotify_c import InotifyFD

    class Reader(InotifyFD):
        """The inotify instance: says when a watch could not be added for want of watches or
        instances, and counts the watches it holds."""

        def __init__(self) -> None:
            super().__init__()
            self.live: set = set()

        def add_callback(self, path, mask, callback, id_):
            try:
                wd = super().add_callback(path, mask, callback, id_)
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.EMFILE) and Group.owner is not None:
                    Group.owner.lost("limit")
                raise
            self.live.add(wd)
            return wd

        def remove_callbacks(self, callbacks) -> None:
            super().remove_callbacks(callbacks)
            for wd, _ in callbacks:
                self.live.discard(wd)

    class Group(InotifyWatchGroup):
        owner = None                     # the Watcher (daemon.py) its events go to

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
                super()._add_callback(path)
            except OSError:
                if path == self.path:
                    raise
                # a directory gone meanwhile, or past the limit (the reader said so): the
                # rest of the tree is watched all the same

        def on_watch_deleted(self, wd) -> None:
            self._inotify_fd.live.discard(wd)
            super().on_watch_deleted(wd)

        def on_queue_overflow(self) -> None:
            if Group.owner is not None:
                Group.owner.lost("overflow")
            super().on_queue_overflow()

        @property
        def watched(self) -> int:
            return len(self._inotify_fd.live)

    class Emitter(InotifyFullEmitter):
        def on_thread_start(self) -> None:
            self._inotify = Group(self._inotify_fd, os.fsencode(self.watch.path), is_recursive=True,
                                  event_mask=self.get_event_mask_from_filter(), follow_symlink=False)
            Group.owner.group = self._inotify

    class Observer(BaseObserver):
        def __init__(self) -> None:
            self._inotify_fd = Reader()
            self._inotify_fd.start()
            super().__init__(Emitter, timeout=0.2, inotify_fd=self._inotify_fd)

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self._inotify_fd.stop()
            self._inotify_fd.join()

    return Group, Observer
