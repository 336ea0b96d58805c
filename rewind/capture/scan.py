"""Walk a project into tree objects, hashing only what the stat cache cannot vouch for.

The walk goes through directory file descriptors opened with O_NOFOLLOW, so a directory
swapped for a symlink mid-walk is never followed, and path length never limits it.
Symlinks are recorded as links (their target is a blob), never followed. FIFOs, sockets
and devices are reported and skipped without being opened; regular files are opened
with O_NONBLOCK|O_NOFOLLOW and checked again with fstat, so a swap cannot block us.

Stat cache: an entry (kind, size, mtime_ns, ctime_ns, inode, mode, id) is trusted only
when every field matches. Git's racy-timestamp rule: an entry whose mtime is not strictly
older than the scan's start (read on the filesystem's own clock) is saved with size -1,
so the next scan hashes it again.

Files are read by pipeline.read_still (as they were at one instant, or reported). A full
scan with more than PARALLEL_AFTER files to read (a first snapshot, a lost stat cache)
reads, hashes and compresses the rest on reader threads (pipeline.Pipeline). The
walk itself stays on this thread and in order, and each file's result is recorded in walk
order, so the trees, the stats and the stored objects are the sequential scan's; a
directory's tree is made once the last of its files is back. Small scans (the hooks'
incremental ones) never start a thread. A full scan with an empty stat cache and at least
fanout.FANOUT_FILES files runs on worker processes instead (fanout.py), each running this
walk on its share of the tree.
"""

from __future__ import annotations

import os
import stat as S

from rewind import clock
from rewind.capture.ignore import IgnoreRules, is_always_ignored
from rewind.capture.pipeline import read_batch, read_still, special_kind
from rewind.constants import MAX_FILE_SIZE
from rewind.store.objects import RAW_PREFIX, Store, digest_of
from rewind.store.tree import DIR, FILE, LARGE, LINK, Entry, Tree, tree_id
from rewind.structs import dataclass, field

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
HOT_NS = 2 * 10**9       # a file written this recently may have a write(2) still copying into it
PARALLEL_AFTER = 256     # a full scan reads files on threads past this many to read
_MAX_HELD = 256          # directories held open for reads in flight, at most (file descriptors)
_BATCH_FILES, _BATCH_BYTES = 16, 256 << 10   # one hand-off to a reader: a directory's files, up to this


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


@dataclass
class ScanResult:
    root: str                                  # id of the root tree
    trees: dict[str, Tree]                     # every tree of this scan, by id
    stats: ScanStats
    protected: set[str]                        # paths a restore must never touch (not stored)
    hardlinks: set[str]
    cache_upserts: dict[str, tuple] = field(default_factory=dict)
    cache_removed: set[str] = field(default_factory=set)
    listed: list[str] | None = None            # incremental: the directories listed (None: all)
    removed_prefixes: set[str] = field(default_factory=set)
    mended: set[str] = field(default_factory=set)  # known damaged ids written whole again
    workers: int = 0                           # worker processes that did the scan (fanout.py)
    raw_packs: list[str] = field(default_factory=list)   # their packs, stored raw: to recompress
    forced: list[str] = field(default_factory=list)     # ignored now, read for a restore's target (held)


class _Scanner:
    def __init__(self, root: str, store: Store | None, cache: dict[str, tuple], fs_now_ns: int,
                 max_size: int):
        self.root = root
        self.store = store
        self.cache = cache
        self.fs_now_ns = fs_now_ns
        self.damaged: frozenset[str] | set[str] = frozenset()   # ids known damaged: stored afresh
        self.mended: set[str] = set()
        self.hot_since = (fs_now_ns or clock.wall_ns()) - HOT_NS
        self.max_size = max_size
        self.stats = ScanStats()
        self.trees: dict[str, Tree] = {}
        self.protected: set[str] = set()
        self.hardlinks: set[str] = set()
        self.upserts: dict[str, tuple] = {}
        self.seen: set[str] = set()
        # incremental mode (see scan_dirty): the previous tree, the directories that must be
        # listed, the directories whose whole subtree must be read again
        self.progress = None             # (phase, done, total) now and then, for a long first scan
        # a restore's scan: paths today's rules ignore but its target holds are read all the
        # same (`target_holds(path)`), so the safety checkpoint stores what the restore overwrites
        self.target_holds = None
        self.forced: list[str] = []
        self.old = None
        self.need: set[str] = set()
        self.fresh: set[str] = set()
        self.listed: list[str] = []
        self.removed: set[str] = set()
        self.removed_prefixes: set[str] = set()
        # parallel reads (full scans): the reader threads once started, the files read so far
        self.parallel_after: int | None = None
        self.raw_bodies = False          # file contents stored uncompressed (a fan-out worker's)
        self.handed: list | None = None  # ...which hands its trees and link targets to the parent
                                         # (so a raw pack holds only file contents: recompress's)
        self.workers = 0                 # fan-out worker processes that did this scan
        self.raw_packs: list[str] = []   # ...and the packs they stored raw
        self.to_read = 0
        self.pipeline = None
        self.held: set[_Dir] = set()     # directories whose tree waits for reads, fd held open
        self.batch: list[tuple[str, str]] = []    # (name, path) of files to hand off together
        self.batch_at: tuple[_Dir, int] | None = None   # ...in this directory (node, fd)
        self.batch_bytes = 0

    def _refuse(self, found: list, rel_path: str, why: str) -> None:
        """Note a path the walk cannot store (unreadable, special) and protect it. Reads in
        flight are taken back first, so the lists keep the walk's order."""
        if self.pipeline is not None:
            self._send()
            self.pipeline.drain()
        found.append((rel_path, why))
        self.protected.add(rel_path)

    def _force(self, rel_path: str) -> bool:
        """An ignored path read all the same: the restore's target holds it."""
        if not self.target_holds(rel_path):
            return False
        self.forced.append(rel_path)
        return True

    def _put(self, data: bytes, oid: str, body: bytes | None = None) -> None:
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
            self._put(data, oid)

    def _remember(self, rel: str, value: tuple) -> None:
        if self.store is None:
            return
        self.seen.add(rel)
        if self.cache.get(rel) != value:
            self.upserts[rel] = value

    def scan_dir(self, dfd: int, rel: str, rules: IgnoreRules, old: Tree | None = None,
                 full: bool = True) -> str | _Dir:
        """`old`: this directory's previous tree (incremental mode); `full`: no reuse below.
        Returns the tree's id, or, while files of it are still being read, its `_Dir`."""
        tree: Tree = {}
        node = _Dir(tree, rel)
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            # listed as unreadable by the caller; an empty listing would make a restore delete it
            raise _Unreadable(str(e)) from None
        if self.old is not None:
            self.listed.append(rel)
        for de in entries:
            self._entry(dfd, rel, rules, node, de.name, de.stat, old, full)
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
        if self.batch and self.batch_at[0] is node:
            self._send()
        if node.waiting:
            node.walked = True
            return node
        return self._finish(tree, rel)

    def _entry(self, dfd: int, rel: str, rules: IgnoreRules, node: _Dir, name: str, stat_of,
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
            ignored = rules.is_ignored(rel_path, True)
            if ignored and not (self.target_holds is not None and self._force(rel_path)):
                self.stats.ignored += 1
                self.protected.add(rel_path)
                return
            prev = old.get(name) if old is not None else None
            if prev is not None and prev.kind != DIR:
                prev = None
            sub_old = self.old(prev.oid) if self.old is not None and prev is not None else None
            sub_full = full or rel_path in self.fresh or sub_old is None
            try:
                sub = os.open(name, _OPEN_DIR, dir_fd=dfd)
            except OSError as e:
                self._refuse(self.stats.unreadable, rel_path, e.strerror or str(e))
                return
            try:
                oid = self.scan_dir(sub, rel_path,
                                    _INSIDE_IGNORED if ignored else
                                    rules.for_subdir(rel_path, os.path.join(self.root, rel_path)),
                                    sub_old, sub_full)
            except _Unreadable as e:
                os.close(sub)
                self._refuse(self.stats.unreadable, rel_path, str(e))
                return
            except BaseException:
                if self.pipeline is not None:
                    self.pipeline.close()     # no reader may still use `sub`
                os.close(sub)
                raise
            self.stats.dirs += 1
            if isinstance(oid, _Dir):
                # files below are being read (from `sub`): its entry comes with its tree
                oid.parent, oid.name, oid.mode, oid.fd = node, name, S.S_IMODE(mode), sub
                node.waiting += 1
                self.held.add(oid)
                while len(self.held) > _MAX_HELD and self.pipeline.queue:
                    self.pipeline.take_one()
                return
            os.close(sub)
            tree[name] = Entry(DIR, S.S_IMODE(mode), oid, 0)
        elif S.S_ISREG(mode):
            if rules.is_ignored(rel_path, False) and not (self.target_holds is not None and self._force(rel_path)):
                self.stats.ignored += 1
                self.protected.add(rel_path)
                return
            entry = self._file(dfd, name, rel_path, st, node)
            if entry is not None:
                tree[name] = entry
        elif S.S_ISLNK(mode):
            if rules.is_ignored(rel_path, False) and not (self.target_holds is not None and self._force(rel_path)):
                self.stats.ignored += 1
                self.protected.add(rel_path)
                return
            try:
                target = os.fsencode(os.readlink(name, dir_fd=dfd))
            except OSError as e:
                self._refuse(self.stats.unreadable, rel_path, e.strerror or str(e))
                return
            oid = digest_of(target)
            cached = self.cache.get(rel_path)
            if self.store is not None and (cached is None or cached[6] != oid or oid in self.damaged):
                self._put_small(target, oid)
            self._remember(rel_path, (LINK, len(target), 0, 0, 0, 0o777, oid))
            tree[name] = Entry(LINK, 0o777, oid, len(target))
            self.stats.symlinks += 1
        else:
            self._refuse(self.stats.special, rel_path, special_kind(mode))

    def _finish(self, tree: Tree, rel: str) -> str:
        """The directory's tree, all of it known: its id, stored."""
        oid, data = tree_id(tree)
        self.trees[oid] = tree
        if self.store is not None:
            cached = self.cache.get(rel + "/")
            if cached is None or cached[6] != oid or oid in self.damaged:
                self._put_small(data, oid)
            self._remember(rel + "/", (DIR, 0, 0, 0, 0, 0, oid))
        return oid

    def _resolve(self, node: _Dir, name: str, entry: Entry | None) -> None:
        """A file read on a reader thread is back: its entry joins its directory's tree, and
        each directory that waited only for it gets its tree, up the chain."""
        if entry is not None:
            node.tree[name] = entry
        node.waiting -= 1
        while node.waiting == 0 and node.walked:
            node.oid = self._finish(node.tree, node.rel)
            parent = node.parent
            if parent is None:
                return
            self.held.discard(node)
            os.close(node.fd)
            node.fd = None
            parent.tree[node.name] = Entry(DIR, node.mode, node.oid, 0)
            parent.waiting -= 1
            node = parent

    def _file(self, dfd: int, name: str, rel_path: str, st: os.stat_result, node: _Dir) -> Entry | None:
        perm = S.S_IMODE(st.st_mode)
        self.stats.files += 1
        if self.progress is not None and self.stats.files % 512 == 0:
            self.progress("files read", self.stats.files, 0)
        self.stats.bytes += st.st_size
        if st.st_nlink > 1:
            self.hardlinks.add(rel_path)
        if st.st_size > self.max_size:
            self.stats.large.append(rel_path)
            self.protected.add(rel_path)
            return Entry(LARGE, perm, "", st.st_size)
        c = self.cache.get(rel_path)
        if (c is not None and c[0] == FILE and c[1] == st.st_size and c[2] == st.st_mtime_ns
                and c[3] == st.st_ctime_ns and c[4] == st.st_ino and c[5] == perm
                and not (self.damaged and c[6] in self.damaged)):
            self.seen.add(rel_path)
            return Entry(FILE, perm, c[6], st.st_size)
        if self.pipeline is None and self.parallel_after is not None:
            self.to_read += 1
            if self.to_read > self.parallel_after:
                from rewind.capture.pipeline import Pipeline
                self.pipeline = Pipeline()
        if self.pipeline is not None:
            if self.batch and self.batch_at[0] is not node:
                self._send()
            self.batch.append((name, rel_path))
            self.batch_at = node, dfd
            self.batch_bytes += 2 * st.st_size + 512     # its bytes and their compressed copy
            node.waiting += 1
            if len(self.batch) >= _BATCH_FILES or self.batch_bytes >= _BATCH_BYTES:
                self._send()
            return None
        return self._took(rel_path, *read_still(dfd, name, self.hot_since))

    def _send(self) -> None:
        """Hand the gathered files to a reader; their results are taken back in this order."""
        if not self.batch:
            return
        batch, (node, dfd), size = self.batch, self.batch_at, self.batch_bytes
        self.batch, self.batch_at, self.batch_bytes = [], None, 0

        def take(results: list) -> None:
            for (name, rel_path), got in zip(batch, results):
                self._resolve(node, name, self._took(rel_path, *got))
        self.pipeline.submit(size, take, read_batch, dfd, [name for name, _ in batch], self.hot_since,
                             self.store)

    def _took(self, rel_path: str, data: bytes | None, st, problem: tuple | None,
              oid: str | None = None, body: bytes | None = None) -> Entry | None:
        """Record what reading a file gave (read_still's answer; from a reader thread, with
        the id and maybe the compressed body too): its blob staged and its stat cache row,
        or why it has none."""
        if data is None:
            if problem is not None:
                kind, why = problem
                if kind == "changing":
                    self.stats.changing.append(rel_path)
                else:
                    getattr(self.stats, kind).append((rel_path, why))
                self.protected.add(rel_path)
            return None
        perm = S.S_IMODE(st.st_mode)
        if oid is None:
            oid = digest_of(data)
        self.stats.hashed += 1
        self.stats.hashed_bytes += len(data)
        if self.store is not None:
            if self.raw_bodies:
                # a fan-out worker: compressed later (an object already stored: nothing to write)
                body = RAW_PREFIX + data if self.store.wanted(oid) else None
            self._put(data, oid, body)
            self.store.note_binary(oid, data)
        racy = st.st_mtime_ns >= self.fs_now_ns
        self._remember(rel_path, (FILE, -1 if racy else st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                  st.st_ino, perm, oid))
        return Entry(FILE, perm, oid, len(data))


class _Dir:
    """A directory being walked; in a parallel scan, one whose tree waits for files in flight
    (`waiting`: its files and subdirectories not back yet), held open by `fd`."""
    __slots__ = ("tree", "rel", "waiting", "walked", "parent", "name", "mode", "fd", "oid")

    def __init__(self, tree: Tree, rel: str):
        self.tree, self.rel = tree, rel
        self.waiting = 0
        self.walked = False
        self.parent: _Dir | None = None
        self.name, self.mode, self.fd, self.oid = "", 0, None, ""


class _Unreadable(Exception):
    pass


class _InsideIgnored:
    """The rules inside a directory today's rules ignore, entered for a restore's target:
    everything in it is ignored (git never looks inside), so only what the target holds is
    read, and the rest stays protected."""

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        return True

    def for_subdir(self, rel_dir: str, abs_dir: str) -> "_InsideIgnored":
        return self


_INSIDE_IGNORED = _InsideIgnored()


def scan_dirty(root: str, store: Store, cache, fs_now_ns: int, old_root: str, load,
               dirty: dict[str, str], max_size: int = MAX_FILE_SIZE) -> ScanResult:
    """An incremental scan: only the directories on the way to a dirty path are listed;
    every other subtree is the previous scan's, unread. `dirty`: path -> "m" (the path or
    its entries changed) or "c" (created or moved in: its whole subtree is read). `cache`
    needs only `.get()`. The result names the directories it listed (`listed`), and the
    cache keys and key prefixes that are gone; the same tree a full scan would build, as
    long as the dirty set is complete (the watcher's job, checked by the caller)."""
    scanner = _Scanner(root, store, cache, fs_now_ns, max_size)
    scanner.old = load
    for path, kind in dirty.items():
        parts = path.split("/") if path else []
        for i in range(len(parts)):
            scanner.need.add("/".join(parts[:i]))
        scanner.need.add(path)
        if kind == "c":
            scanner.fresh.add(path)
    if not dirty:
        return ScanResult(old_root, {}, scanner.stats, set(), set(), {}, set(), listed=[])
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        oid = scanner.scan_dir(rfd, "", IgnoreRules.for_root(root), load(old_root), "" in scanner.fresh)
    finally:
        os.close(rfd)
    return ScanResult(oid, scanner.trees, scanner.stats, scanner.protected, scanner.hardlinks,
                      scanner.upserts, scanner.removed, listed=scanner.listed,
                      removed_prefixes=scanner.removed_prefixes)


def scan(root: str, store: Store | None = None, cache: dict[str, tuple] | None = None,
         fs_now_ns: int = 0, max_size: int = MAX_FILE_SIZE, progress=None,
         damaged: set[str] | frozenset[str] = frozenset(),
         parallel_after: int | None = PARALLEL_AFTER, fanout_after: int | None = None,
         held=None) -> ScanResult:
    """Walk `root`. With a store, every blob and tree is staged in it and cache updates are
    returned; without one, nothing is written (a read-only look at the working tree).
    `damaged`: ids whose stored copy is known bad: never trusted from the cache, and
    written afresh (`ScanResult.mended` names those). Files to read past `parallel_after`
    are read on reader threads (None: never). With an empty cache and at least
    `fanout_after` files (None: fanout.FANOUT_FILES), on worker processes (fanout.py).
    `held(path)`: a restore's target holds `path`; read even when today's rules ignore it
    (never on worker processes: they do not know the target)."""
    scanner = _Scanner(root, store, cache or {}, fs_now_ns, max_size)
    scanner.damaged = damaged
    scanner.target_holds = held
    scanner.progress = progress
    scanner.parallel_after = parallel_after
    if progress is not None:
        progress("files read", 0, 0)
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rules = IgnoreRules.for_root(root)
        oid = None
        if store is not None and not scanner.cache and parallel_after is not None and held is None:
            oid = _fan_out(root, scanner, rfd, rules, damaged, progress, fanout_after)
        if oid is None:
            oid = scanner.scan_dir(rfd, "", rules)
        if scanner.pipeline is not None:
            scanner.pipeline.drain()
        if isinstance(oid, _Dir):
            oid = oid.oid
    finally:
        if scanner.pipeline is not None:
            scanner.pipeline.close()          # no reader uses a directory past this point
            for node in scanner.held:
                os.close(node.fd)
        os.close(rfd)
    removed = set()
    if store is not None:
        removed = {p for p in scanner.cache if p not in scanner.seen}
    return ScanResult(oid, scanner.trees, scanner.stats, scanner.protected, scanner.hardlinks,
                      scanner.upserts, removed, mended=scanner.mended, workers=scanner.workers,
                      raw_packs=scanner.raw_packs, forced=scanner.forced)


def _fan_out(root: str, scanner: _Scanner, rfd: int, rules: IgnoreRules, damaged, progress,
             fanout_after: int | None) -> str | None:
    """A first snapshot on worker processes: the root tree's id, or None to scan here."""
    from rewind.capture import fanout
    if fanout.workers() < 2:
        return None
    try:
        return fanout.scan(root, scanner, rfd, rules, damaged, progress,
                           fanout.FANOUT_FILES if fanout_after is None else fanout_after)
    except fanout.Failed as e:
        from rewind.log import log
        log(f"scan {root}: {e}; scanning on threads instead")
        return None
