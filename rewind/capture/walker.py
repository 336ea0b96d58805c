"""The walker: one directory after another into tree objects, trusting the stat cache where it can.

The walk goes through directory file descriptors opened with O_NOFOLLOW, so a directory
swapped for a symlink mid-walk is never followed, and path length never limits it.
Symlinks are recorded as links (their target is a blob), never followed. FIFOs, sockets
and devices are reported and skipped without being opened; regular files are read by
walk_reads.py (opened with O_NONBLOCK|O_NOFOLLOW and checked again with fstat, so a swap
cannot block the walk).

Stat cache: a `StatEntry` is trusted only when every field matches the path's lstat. Git's
racy-timestamp rule: an entry whose mtime is not strictly older than the scan's start (read
on the filesystem's own clock) is saved with size -1, so the next scan hashes it again.

`Walker` is driven by scan.py's entry points (a whole tree, or the directories on the way
to dirty paths) and by the fan-out's worker processes (some entries of one directory each).
Past the house's ~350 lines on purpose: the descent through directory fds and the stat-cache
checks are one loop, so each path is judged in one place; reading a file is apart (walk_reads.py).
"""

from __future__ import annotations

import os
import stat as S

from rewind.capture.ignore import IgnoreRules, is_always_ignored
from rewind.capture.pipeline import special_kind
from rewind.capture.walk_reads import FileReads
from rewind.model import StatEntry
from rewind.store.objects import Store, digest_of
from rewind.store.tree import DIR, LINK, Entry, Tree, tree_id
from rewind.structs import dataclass, field

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_HELD = 256          # directories held open for reads in flight, at most (file descriptors)


@dataclass
class ScanStats:
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    hashed: int = 0          # files whose content was read (stat cache misses)
    hashed_bytes: int = 0
    ignored: int = 0
    large: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    special: list[tuple[str, str]] = field(default_factory=list)
    changing: list[str] = field(default_factory=list)   # kept changing while being read

    def to_json(self) -> dict:
        return {"files": self.files, "dirs": self.dirs, "symlinks": self.symlinks, "bytes": self.bytes,
                "hashed": self.hashed, "hashed_bytes": self.hashed_bytes, "ignored": self.ignored,
                "large": self.large[:100], "unreadable": [p for p, _ in self.unreadable][:100],
                "special": [p for p, _ in self.special][:100], "changing": self.changing[:100]}

    def add(self, other: ScanStats) -> None:
        """Another walk's figures (a fan-out share's) on top of these, its lists after these."""
        for name, value in vars(other).items():
            if isinstance(value, list):
                getattr(self, name).extend(value)
            else:
                setattr(self, name, getattr(self, name) + value)


@dataclass
class ShareFound:
    """What a walk of some entries of one directory found (a fan-out worker's answer): the
    entries, the trees below them, and what the parent's walker adds to its own."""
    tree: Tree
    trees: dict[str, Tree]
    stats: ScanStats
    protected: set[str]
    hardlinks: set[str]
    upserts: dict[str, StatEntry]
    mended: set[str]
    handed: list[tuple[str, bytes]]      # (id, bytes) of trees and link targets, for the parent to store


class Walker(FileReads):
    """One scan's walk, and what it found. Used by scan.py (`walk_dir` from the root) and by
    the fan-out (fanout.py: `walk_names` in a worker, `absorb` and `finish_dir` in the parent).

    What it found, read by its drivers: `stats`, `trees` (by id), `protected` (paths a restore
    must never touch: not stored), `hardlinks`, `upserts` (stat-cache rows to write), `seen`
    (cache keys still there), `mended`, `forced`; incremental walks also `listed`, `removed`,
    `removed_prefixes`. `for_worker`: file contents are stored raw and trees and link targets
    handed back (`ShareFound.handed`), so a worker's raw pack holds only file contents."""

    def __init__(self, root: str, store: Store | None, cache, fs_now_ns: int, max_size: int,
                 damaged: frozenset[str] | set[str] = frozenset(), for_worker: bool = False):
        self.root = root
        self.store = store
        self.cache = cache               # path -> StatEntry (needs only .get())
        self.fs_now_ns = fs_now_ns
        self.damaged = damaged           # ids known damaged: never trusted, stored afresh
        self.mended: set[str] = set()
        self.max_size = max_size
        self.stats = ScanStats()
        self.trees: dict[str, Tree] = {}
        self.protected: set[str] = set()
        self.hardlinks: set[str] = set()
        self.upserts: dict[str, StatEntry] = {}
        self.seen: set[str] = set()
        self.progress = None             # (phase, done, total) now and then, for a long first scan
        # a restore's scan: paths today's rules ignore but its target holds are read all the
        # same (`target_holds(path)`), so the safety checkpoint stores what the restore overwrites
        self.target_holds = None
        self.forced: list[str] = []
        # incremental mode (scan.scan_dirty): the previous trees by id, the directories that
        # must be listed, the directories whose whole subtree must be read again
        self.old = None
        self.need: set[str] = set()
        self.fresh: set[str] = set()
        self.listed: list[str] = []
        self.removed: set[str] = set()
        self.removed_prefixes: set[str] = set()
        self.handed: list | None = [] if for_worker else None
        self.workers = 0                 # fan-out worker processes that did this scan
        self.raw_packs: list[str] = []   # ...and the packs they stored raw
        self.held: set[DirNode] = set()  # directories whose tree waits for reads, fd held open
        self.start_reads(raw_bodies=for_worker)

    # -- storing -------------------------------------------------------------------------
    def store_object(self, data: bytes, oid: str, body: bytes | None = None) -> None:
        """Store an object; one known damaged or missing gets a whole copy written now."""
        if oid in self.damaged:
            self.store.mend(oid, data)
            self.mended.add(oid)
        else:
            self.store.put(data, oid, body)

    def _put_small(self, data: bytes, oid: str) -> None:
        """A tree or a link target: stored, or, by a fan-out worker, handed to the parent."""
        if self.handed is not None:
            self.handed.append((oid, data))
        else:
            self.store_object(data, oid)

    def _remember(self, rel: str, value: StatEntry) -> None:
        if self.store is None:
            return
        self.seen.add(rel)
        if self.cache.get(rel) != value:
            self.upserts[rel] = value

    def _refuse(self, found: list, rel_path: str, why: str) -> None:
        """Note a path the walk cannot store (unreadable, special) and protect it. Reads in
        flight are taken back first, so the lists keep the walk's order."""
        self.settle_reads()
        found.append((rel_path, why))
        self.protected.add(rel_path)

    def _skipped(self, rel_path: str) -> None:
        self.stats.ignored += 1
        self.protected.add(rel_path)

    def _held_back(self, rel_path: str) -> bool:
        """For a path today's rules ignore: True to skip it, False when a restore's target
        holds it (then it is read all the same)."""
        if self.target_holds is None or not self.target_holds(rel_path):
            return True
        self.forced.append(rel_path)
        return False

    # -- walking -------------------------------------------------------------------------
    def walk_dir(self, dfd: int, rel: str, rules: IgnoreRules, old: Tree | None = None,
                 full: bool = True) -> str | DirNode:
        """The directory `rel`, open as `dfd`. `old`: its previous tree (incremental mode);
        `full`: no reuse below. Returns the tree's id, or, while files of it are still being
        read, its `DirNode`."""
        tree: Tree = {}
        node = DirNode(tree, rel)
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            # listed as unreadable by the caller; an empty listing would make a restore delete it
            raise Unreadable(str(e)) from None
        if self.old is not None:
            self.listed.append(rel)
        for de in entries:
            self.walk_entry(dfd, rel, rules, node, de.name, de.stat, old, full)
        if old is not None:
            # what the stat cache knew here and is gone (or changed kind)
            for name, e in old.items():
                now = tree.get(name)
                if now is None or (now.kind == DIR) != (e.kind == DIR):
                    key = f"{rel}/{name}" if rel else name
                    if e.kind == DIR:
                        self.removed.add(key + "/")
                        self.removed_prefixes.add(key + "/")
                    else:
                        self.removed.add(key)
        self.send_reads(node)
        if node.waiting:
            node.walked = True
            return node
        return self.finish_dir(tree, rel)

    def walk_names(self, dfd: int, rel: str, rules: IgnoreRules, names: list[str]) -> ShareFound:
        """Some entries of the directory `rel` (open as `dfd`), by name, one after another on
        this thread: a fan-out share, with all it found."""
        from functools import partial
        node = DirNode({}, rel)
        for name in names:
            self.walk_entry(dfd, rel, rules, node, name, partial(os.stat, name, dir_fd=dfd))
        return ShareFound(node.tree, self.trees, self.stats, self.protected, self.hardlinks, self.upserts,
                          self.mended, self.handed or [])

    def walk_entry(self, dfd: int, rel: str, rules: IgnoreRules, node: DirNode, name: str, stat_of,
                   old: Tree | None = None, full: bool = True) -> None:
        """One entry of the directory `node` (open as `dfd`): into its tree, or refused.
        `stat_of(follow_symlinks=False)`: its lstat (a DirEntry's, or os.stat's by name)."""
        tree = node.tree
        rel_path = f"{rel}/{name}" if rel else name
        if is_always_ignored(name):
            self.protected.add(rel_path)
            return
        if old is not None and not full and rel_path not in self.need:
            prev = old.get(name)
            if prev is not None:
                # no event at or below this path: the previous entry (a whole subtree for a
                # directory) stands, not even stat'ed
                tree[name] = prev
                return
        try:
            st = stat_of(follow_symlinks=False)
        except FileNotFoundError:
            return  # vanished during the walk
        except OSError as e:
            self._refuse(self.stats.unreadable, rel_path, e.strerror or str(e))
            return
        mode = st.st_mode
        if S.S_ISDIR(mode):
            self._subdir(dfd, rel_path, rules, node, name, mode, old, full)
        elif S.S_ISREG(mode):
            if rules.is_ignored(rel_path, False) and self._held_back(rel_path):   # (one call per file)
                self._skipped(rel_path)
                return
            entry = self.read_file(dfd, name, rel_path, st, node)
            if entry is not None:
                tree[name] = entry
        elif S.S_ISLNK(mode):
            if rules.is_ignored(rel_path, False) and self._held_back(rel_path):
                self._skipped(rel_path)
                return
            try:
                target = os.fsencode(os.readlink(name, dir_fd=dfd))
            except OSError as e:
                self._refuse(self.stats.unreadable, rel_path, e.strerror or str(e))
                return
            oid = digest_of(target)
            cached = self.cache.get(rel_path)
            if self.store is not None and (cached is None or cached.oid != oid or oid in self.damaged):
                self._put_small(target, oid)
            self._remember(rel_path, StatEntry((LINK, len(target), 0, 0, 0, 0o777, oid)))
            tree[name] = Entry(LINK, 0o777, oid, len(target))
            self.stats.symlinks += 1
        else:
            self._refuse(self.stats.special, rel_path, special_kind(mode))

    def _subdir(self, dfd: int, rel_path: str, rules: IgnoreRules, node: DirNode, name: str, mode: int,
                old: Tree | None, full: bool) -> None:
        ignored = rules.is_ignored(rel_path, True)
        if ignored and (self.target_holds is None or not self.target_holds(rel_path)):
            self._skipped(rel_path)
            return
        if ignored:
            self.forced.append(rel_path)
        prev = old.get(name) if old is not None else None
        if prev is not None and prev.kind != DIR:
            prev = None
        sub_old = self.old(prev.oid) if self.old is not None and prev is not None else None
        sub_full = full or rel_path in self.fresh or sub_old is None
        try:
            sub = os.open(name, OPEN_DIR, dir_fd=dfd)
        except OSError as e:
            self._refuse(self.stats.unreadable, rel_path, e.strerror or str(e))
            return
        try:
            oid = self.walk_dir(sub, rel_path,
                                _INSIDE_IGNORED if ignored else
                                rules.for_subdir(rel_path, os.path.join(self.root, rel_path)),
                                sub_old, sub_full)
        except Unreadable as e:
            os.close(sub)
            self._refuse(self.stats.unreadable, rel_path, str(e))
            return
        except BaseException:
            self.stop_reads()         # no reader may still use `sub`
            os.close(sub)
            raise
        self.stats.dirs += 1
        if isinstance(oid, DirNode):
            # files below are being read (from `sub`): its entry comes with its tree
            oid.parent, oid.name, oid.mode, oid.fd = node, name, S.S_IMODE(mode), sub
            node.waiting += 1
            self.held.add(oid)
            while len(self.held) > _MAX_HELD and self.pipeline.queue:
                self.pipeline.take_one()
            return
        os.close(sub)
        node.tree[name] = Entry(DIR, S.S_IMODE(mode), oid, 0)

    def finish_dir(self, tree: Tree, rel: str) -> str:
        """The directory's tree, all of it known: its id, stored."""
        oid, data = tree_id(tree)
        self.trees[oid] = tree
        if self.store is not None:
            cached = self.cache.get(rel + "/")
            if cached is None or cached.oid != oid or oid in self.damaged:
                self._put_small(data, oid)
            self._remember(rel + "/", StatEntry((DIR, 0, 0, 0, 0, 0, oid)))
        return oid

    def absorb(self, found: ShareFound) -> None:
        """A fan-out share's findings (the parent's walker): its trees and link targets
        stored here, its figures and rows added to these."""
        for oid, data in found.handed:
            self.store_object(data, oid)      # trees and link targets: zlib, in the parent's batch
        self.trees.update(found.trees)
        self.stats.add(found.stats)
        self.protected |= found.protected
        self.hardlinks |= found.hardlinks
        self.upserts.update(found.upserts)
        self.seen.update(found.upserts)
        self.mended |= found.mended


class DirNode:
    """A directory being walked; in a parallel scan, one whose tree waits for files in flight
    (`waiting`: its files and subdirectories not back yet), held open by `fd`."""
    __slots__ = ("tree", "rel", "waiting", "walked", "parent", "name", "mode", "fd", "oid")

    def __init__(self, tree: Tree, rel: str):
        self.tree, self.rel = tree, rel
        self.waiting = 0
        self.walked = False
        self.parent: DirNode | None = None
        self.name, self.mode, self.fd, self.oid = "", 0, None, ""


class Unreadable(Exception):
    """A directory that could not be listed: the caller records it as unreadable."""


class _InsideIgnored:
    """The rules inside a directory today's rules ignore, entered for a restore's target:
    everything in it is ignored (git never looks inside), so only what the target holds is
    read, and the rest stays protected."""

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        return True

    def for_subdir(self, rel_dir: str, abs_dir: str) -> "_InsideIgnored":
        return self


_INSIDE_IGNORED = _InsideIgnored()
