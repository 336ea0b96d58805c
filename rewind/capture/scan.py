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
"""

from __future__ import annotations

import os
import stat as S

from rewind import clock
from rewind.capture.ignore import IgnoreRules, is_always_ignored
from rewind.constants import MAX_FILE_SIZE
from rewind.fsutil import read_fd
from rewind.store.objects import Store, digest_of
from rewind.store.tree import DIR, FILE, LARGE, LINK, Entry, Tree, tree_id
from rewind.structs import dataclass, field

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_TRIES = 3
HOT_NS = 2 * 10**9       # a file written this recently may have a write(2) still copying into it


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
        self.old = None
        self.need: set[str] = set()
        self.fresh: set[str] = set()
        self.listed: list[str] = []
        self.removed: set[str] = set()
        self.removed_prefixes: set[str] = set()

    def _put(self, data: bytes, oid: str) -> None:
        """Store an object; one known damaged or missing gets a whole copy written now."""
        if oid in self.damaged:
            self.store.mend(oid, data)
            self.mended.add(oid)
        else:
            self.store.put(data, oid)

    def _remember(self, rel: str, value: tuple) -> None:
        if self.store is None:
            return
        self.seen.add(rel)
        if self.cache.get(rel) != value:
            self.upserts[rel] = value

    def scan_dir(self, dfd: int, rel: str, rules: IgnoreRules, old: Tree | None = None,
                 full: bool = True) -> str:
        """`old`: this directory's previous tree (incremental mode); `full`: no reuse below."""
        tree: Tree = {}
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            # listed as unreadable by the caller; an empty listing would make a restore delete it
            raise _Unreadable(str(e)) from None
        if self.old is not None:
            self.listed.append(rel)
        for de in entries:
            name = de.name
            rel_path = f"{rel}/{name}" if rel else name
            if is_always_ignored(name):
                self.protected.add(rel_path)
                continue
            if old is not None and not full and rel_path not in self.need:
                prev = old.get(name)
                if prev is not None:
                    # no event at or below this path: the previous entry (a whole subtree for a
                    # directory) stands, not even stat'ed
                    tree[name] = prev
                    continue
            try:
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished during the walk
            except OSError as e:
                self.stats.unreadable.append((rel_path, e.strerror or str(e)))
                self.protected.add(rel_path)
                continue
            mode = st.st_mode
            if S.S_ISDIR(mode):
                if rules.is_ignored(rel_path, True):
                    self.stats.ignored += 1
                    self.protected.add(rel_path)
                    continue
                prev = old.get(name) if old is not None else None
                if prev is not None and prev.kind != DIR:
                    prev = None
                sub_old = self.old(prev.oid) if self.old is not None and prev is not None else None
                sub_full = full or rel_path in self.fresh or sub_old is None
                try:
                    sub = os.open(name, _OPEN_DIR, dir_fd=dfd)
                except OSError as e:
                    self.stats.unreadable.append((rel_path, e.strerror or str(e)))
                    self.protected.add(rel_path)
                    continue
                try:
                    oid = self.scan_dir(sub, rel_path,
                                        rules.for_subdir(rel_path, os.path.join(self.root, rel_path)),
                                        sub_old, sub_full)
                except _Unreadable as e:
                    self.stats.unreadable.append((rel_path, str(e)))
                    self.protected.add(rel_path)
                    continue
                finally:
                    os.close(sub)
                tree[name] = Entry(DIR, S.S_IMODE(mode), oid, 0)
                self.stats.dirs += 1
            elif S.S_ISREG(mode):
                if rules.is_ignored(rel_path, False):
                    self.stats.ignored += 1
                    self.protected.add(rel_path)
                    continue
                entry = self._file(dfd, name, rel_path, st)
                if entry is not None:
                    tree[name] = entry
            elif S.S_ISLNK(mode):
                if rules.is_ignored(rel_path, False):
                    self.stats.ignored += 1
                    self.protected.add(rel_path)
                    continue
                try:
                    target = os.fsencode(os.readlink(name, dir_fd=dfd))
                except OSError as e:
                    self.stats.unreadable.append((rel_path, e.strerror or str(e)))
                    self.protected.add(rel_path)
                    continue
                oid = digest_of(target)
                cached = self.cache.get(rel_path)
                if self.store is not None and (cached is None or cached[6] != oid or oid in self.damaged):
                    self._put(target, oid)
                self._remember(rel_path, (LINK, len(target), 0, 0, 0, 0o777, oid))
                tree[name] = Entry(LINK, 0o777, oid, len(target))
                self.stats.symlinks += 1
            else:
                self.stats.special.append((rel_path, _special_kind(mode)))
                self.protected.add(rel_path)
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
        oid, data = tree_id(tree)
        self.trees[oid] = tree
        if self.store is not None:
            cached = self.cache.get(rel + "/")
            if cached is None or cached[6] != oid or oid in self.damaged:
                self._put(data, oid)
            self._remember(rel + "/", (DIR, 0, 0, 0, 0, 0, oid))
        return oid

    def _file(self, dfd: int, name: str, rel_path: str, st: os.stat_result) -> Entry | None:
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
        got = self._read(dfd, name, rel_path)
        if got is None:
            return None
        data, st = got
        perm = S.S_IMODE(st.st_mode)
        oid = digest_of(data)
        self.stats.hashed += 1
        self.stats.hashed_bytes += len(data)
        if self.store is not None:
            self._put(data, oid)
            self.store.note_binary(oid, data)
        racy = st.st_mtime_ns >= self.fs_now_ns
        self._remember(rel_path, (FILE, -1 if racy else st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                  st.st_ino, perm, oid))
        return Entry(FILE, perm, oid, len(data))

    def _read(self, dfd: int, name: str, rel_path: str):
        """The file's bytes and the fstat they belong to; None if unreadable or never still.

        A write that starts during the read changes the file's times (checked by an fstat
        before and after). One already under way when the read began does not: the kernel
        sets the times when write(2) starts, then copies the data, so a read alongside the
        copy can get a mix of old and new pages that the file never held at any instant.
        A file written moments ago (HOT_NS) is therefore read twice: the same bytes and the
        same fstat both times means each page held that content from the end of the first
        read to the start of the second, so the bytes are the file as it was at one
        instant. Otherwise it is read again, and after _READ_TRIES it is reported as
        changing (and never stored half-written)."""
        for _ in range(_READ_TRIES):
            try:
                fd = os.open(name, _OPEN_FILE, dir_fd=dfd)
            except FileNotFoundError:
                return None
            except OSError as e:
                self.stats.unreadable.append((rel_path, e.strerror or str(e)))
                self.protected.add(rel_path)
                return None
            try:
                before = os.fstat(fd)
                if not S.S_ISREG(before.st_mode):
                    self.stats.special.append((rel_path, _special_kind(before.st_mode)))
                    self.protected.add(rel_path)
                    return None
                data = read_fd(fd)
                after = os.fstat(fd)
                still = _same(before, after) and len(data) == after.st_size
                if still and after.st_mtime_ns >= self.hot_since:
                    os.lseek(fd, 0, os.SEEK_SET)
                    still = read_fd(fd) == data and _same(after, os.fstat(fd))
            except OSError as e:
                self.stats.unreadable.append((rel_path, e.strerror or str(e)))
                self.protected.add(rel_path)
                return None
            finally:
                os.close(fd)
            if still:
                return data, after
        self.stats.changing.append(rel_path)
        self.protected.add(rel_path)
        return None


class _Unreadable(Exception):
    pass


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return a.st_mtime_ns == b.st_mtime_ns and a.st_ctime_ns == b.st_ctime_ns and a.st_size == b.st_size


def _special_kind(mode: int) -> str:
    if S.S_ISFIFO(mode):
        return "fifo"
    if S.S_ISSOCK(mode):
        return "socket"
    if S.S_ISCHR(mode) or S.S_ISBLK(mode):
        return "device"
    return "special file"


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
         damaged: set[str] | frozenset[str] = frozenset()) -> ScanResult:
    """Walk `root`. With a store, every blob and tree is staged in it and cache updates are
    returned; without one, nothing is written (a read-only look at the working tree).
    `damaged`: ids whose stored copy is known bad: never trusted from the cache, and
    written afresh (`ScanResult.mended` names those)."""
    scanner = _Scanner(root, store, cache or {}, fs_now_ns, max_size)
    scanner.damaged = damaged
    scanner.progress = progress
    if progress is not None:
        progress("files read", 0, 0)
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        oid = scanner.scan_dir(rfd, "", IgnoreRules.for_root(root))
    finally:
        os.close(rfd)
    removed = set()
    if store is not None:
        removed = {p for p in scanner.cache if p not in scanner.seen}
    return ScanResult(oid, scanner.trees, scanner.stats, scanner.protected, scanner.hardlinks,
                      scanner.upserts, removed, mended=scanner.mended)
