"""Packs: many objects in one file, for a batch too big to be loose files.

A big batch (a prompt's checkpoint, a first snapshot, a rewind) goes into one pack,
objects/pack/<time>-<random>.pack: MAGIC, the objects' stored bodies (codec byte and
payload, as a loose file holds them) one after another, then an index sorted by id (REC
bytes a record: 32-byte id, 8-byte offset, 8-byte length), then a TRAILER (index offset,
count, END); one file and one fsync instead of one per object, and no 4 KB block per
small object. Packs are never modified: gc deletes a pack when nothing in it is
referenced (store/sweep.py) and merges the small ones (store/repack.py). Readers look in
the newest packs first and open older ones only when they must (`PackSet`).

Imported by the store only when a batch becomes a pack or an object is not loose.
"""

from __future__ import annotations

import os

from rewind import clock
from rewind.errors import CorruptObject
from rewind.fsutil import ensure_private_dir, fsync_dir, write_all

SMALL_PACK = 4096        # gc merges packs of at most this many objects
RAW_SUFFIX = "-raw.pack"  # a pack whose file contents were stored uncompressed, for speed (a first
                         # snapshot's, capture/fanout.py): repack.recompress rewrites it compressed
DICT_PACK = 64           # ...and a pack of at most this many has its index read into a dict when opened;
                         # a bigger one is binary-searched in its mmap (~8 us a find), and reads its
BSEARCHES = 64           # index into a dict only after this many finds and count/8 (building the dict
                         # costs ~0.6 us an object: 2.6 ms for 4,096, 60 ms for 100,000; a hook makes
                         # ~100 finds, gc and verify make one per object)
MAGIC, END = b"RWPACK1\n", b"RWPKEND\n"
_BASED = (3, 4, 5)       # objects.BASED: codecs whose body names a base
REC = 48                 # index record: 32-byte id, 8-byte offset, 8-byte length
TRAILER = 24             # index offset, count, END
_WRITE_AT = 1 << 20      # a pack being written gathers small bodies up to this much per write(2)
TRICKLE_AT = 8 << 20     # a trickling writer hands this much to the disk at a time (PackWriter)


def pack_size(lengths) -> int:
    """The size on disk of a pack holding bodies of these lengths."""
    lengths = list(lengths)
    return len(MAGIC) + sum(lengths) + REC * len(lengths) + TRAILER


class PackWriter:
    """The pack a big batch appends to, in tmp/ until `finish`."""

    def __init__(self, tmp_dir: str, trickle: bool = False):
        """`trickle`: start the disk's writeback every TRICKLE_AT bytes (a background job's
        pack of hundreds of MB): its final fsync then has little left to do, and does not hold
        a hook's fsync behind it for a second (ext4 commits one journal for all)."""
        import threading
        self.trickle = trickle and hasattr(os, "posix_fadvise")
        self.advised = 0                     # bytes handed to writeback so far (trickle)
        self.path = os.path.join(tmp_dir, f"pack.{os.getpid()}.{os.urandom(8).hex()}")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.lock = threading.Lock()         # the background writers append too
        self.offset = len(MAGIC)
        self.index: dict[str, int] = {}      # id -> offset << 32 | length (one int: memory)
        self.pending: list[bytes] = [MAGIC]  # bodies not yet written: one write(2) for many
        self.pending_bytes = len(MAGIC)

    def append(self, oid: str, body: bytes) -> None:
        with self.lock:
            if len(body) >= 1 << 32:
                raise ValueError("an object of 4 GB or more")     # MAX_FILE_SIZE keeps far below
            self.pending.append(body)
            self.pending_bytes += len(body)
            self.index[oid] = self.offset << 32 | len(body)
            self.offset += len(body)
            if self.pending_bytes >= _WRITE_AT or len(self.pending) >= 512:
                self._write_pending()

    def _write_pending(self) -> None:
        if not self.pending:
            return
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        done = os.writev(self.fd, pending)         # no copy of the bodies into one buffer
        for body in pending:
            if done >= len(body):
                done -= len(body)
                continue
            write_all(self.fd, memoryview(body)[done:])   # a short write: the rest one by one
            done = 0
        if self.trickle and self.offset - self.advised >= TRICKLE_AT:
            # DONTNEED starts the writeback of these dirty pages without waiting for it (and
            # drops them from the cache once written: nobody reads them back from here)
            try:
                os.posix_fadvise(self.fd, self.advised, self.offset - self.advised, os.POSIX_FADV_DONTNEED)
            except OSError:
                self.trickle = False
            self.advised = self.offset

    def read(self, oid: str) -> bytes:
        v = self.index[oid]
        if self.pending:
            with self.lock:
                self._write_pending()
        return os.pread(self.fd, v & 0xFFFFFFFF, v >> 32)

    def finish(self, packs_dir: str, raw: bool = False, name: str | None = None) -> str:
        """Index and trailer, fsync, rename into objects/pack/, fsync that directory. Returns the
        name (ending in RAW_SUFFIX when `raw`). A failure before the rename (a full disk: the
        last bodies are written here) removes the temporary file: the caller has let go of this
        writer already. `name`: this one instead of a new one."""
        try:
            self._write_pending()
            ids = sorted(self.index)         # hex order is byte order
            index = self.index
            for i in range(0, len(ids), 4096):   # in chunks: a 100,000-object index is 4.8 MB
                write_all(self.fd, b"".join(bytes.fromhex(oid) + (index[oid] >> 32).to_bytes(8, "big")
                                            + (index[oid] & 0xFFFFFFFF).to_bytes(8, "big")
                                            for oid in ids[i:i + 4096]))
            write_all(self.fd, self.offset.to_bytes(8, "big") + len(ids).to_bytes(8, "big") + END)
            os.fsync(self.fd)
        except BaseException:
            self.abort()
            raise
        fd, self.fd = self.fd, -1
        os.close(fd)
        if name is None:      # names sort oldest first
            name = f"{clock.wall_ns():020d}-{os.urandom(6).hex()}{RAW_SUFFIX if raw else '.pack'}"
        ensure_private_dir(packs_dir)
        os.replace(self.path, os.path.join(packs_dir, name))
        fsync_dir(packs_dir)
        return name

    def abort(self) -> None:
        fd, self.fd = self.fd, -1          # once: a second close could hit a reused number
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class Pack:
    """A pack on disk, mapped: `find` is a binary search of its sorted index."""

    def __init__(self, path: str):
        import mmap
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + TRAILER:
                raise ValueError("too short for a pack")
            self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        tail = self.mm[size - TRAILER:]
        if self.mm[:len(MAGIC)] != MAGIC or tail[16:] != END:
            raise ValueError("not a pack")
        self.index_at = int.from_bytes(tail[:8], "big")
        self.count = int.from_bytes(tail[8:16], "big")
        if self.index_at + self.count * REC + TRAILER != size:
            raise ValueError("a pack whose index does not fit")
        self.small: dict[bytes, tuple[int, int]] | None = None
        self._dict: dict[bytes, int] | None = None     # id -> index record, built after BSEARCHES finds
        self._finds = 0
        self._based: list[tuple[str, str, int]] | None = None
        if self.count <= DICT_PACK:
            base, mm = self.index_at, self.mm
            self.small = {mm[at:at + 32]: self._record(at) for at in range(base, base + self.count * REC, REC)}

    def find(self, key: bytes) -> tuple[int, int] | None:
        if self.small is not None:
            return self.small.get(key)
        mm, base = self.mm, self.index_at
        if self._dict is None:
            self._finds += 1
            if self._finds > max(BSEARCHES, self.count >> 3):   # a reader of many objects (gc, verify)
                self._dict = {mm[at:at + 32]: at for at in range(base, base + self.count * REC, REC)}
        if self._dict is not None:
            at = self._dict.get(key)
            return None if at is None else self._record(at)
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            at = base + mid * REC
            k = mm[at:at + 32]
            if k < key:
                lo = mid + 1
            elif k > key:
                hi = mid
            else:
                return self._record(at)
        return None

    def _record(self, at: int) -> tuple[int, int]:
        """(offset, length) of the index record at `at`."""
        mm = self.mm
        return int.from_bytes(mm[at + 32:at + 40], "big"), int.from_bytes(mm[at + 40:at + 48], "big")

    def read(self, off: int, length: int) -> bytes:
        if off + length > self.index_at:
            raise CorruptObject("?", f"an index entry of {os.path.basename(self.path)} points past its objects")
        return self.mm[off:off + length]

    def based(self) -> list[tuple[str, str, int]]:
        """(id, base id, codec) of every object here stored against a base (store/delta.py)."""
        if self._based is None:
            mm, out = self.mm, []
            for oid, off, length in self.entries():
                if length >= 33 and mm[off] in _BASED and off + length <= self.index_at:
                    out.append((oid, mm[off + 1:off + 33].hex(), mm[off]))
            self._based = out
        return self._based

    def entries(self):
        """(id, offset, length) of every object in the pack."""
        mm, base = self.mm, self.index_at
        for at in range(base, base + self.count * REC, REC):
            yield (mm[at:at + 32].hex(), *self._record(at))


class PackSet:
    """The packs of one packs directory as a reader sees them, opened as needed: the packs
    opened so far first, then the others newest first (a hook needs recent trees), then any
    pack written since the last listing."""

    def __init__(self, packs_dir: str, damaged: dict[str, str]):
        self.dir = packs_dir
        self.opened: dict[str, Pack] = {}            # packs opened so far, by name
        self.small: dict[bytes, tuple] = {}          # id -> (pack, offset, length) of the small ones
        self.unopened: list[str] | None = None       # names not opened yet, newest first
        self.damaged = damaged                       # pack file -> why it could not be opened

    def find(self, key: bytes):
        """(pack, offset, length) of the object whose id is `key` (32 bytes), or None."""
        hit = self.small.get(key)
        if hit is not None:
            return hit
        for pack in self.opened.values():
            if pack.small is None:
                found = pack.find(key)
                if found is not None:
                    return (pack, *found)
        for relisted in (False, True):
            if self.unopened is None or relisted:
                self._list()
            while self.unopened:
                pack = self.open(self.unopened.pop(0))
                if pack is None:
                    continue
                found = pack.find(key)
                if found is not None:
                    return (pack, *found)
        return None

    def _list(self) -> None:
        try:
            names = [n for n in os.listdir(self.dir) if n.endswith(".pack")]
        except FileNotFoundError:
            names = []
        self.unopened = sorted((n for n in names if n not in self.opened), reverse=True)

    def open(self, name: str) -> Pack | None:
        try:
            pack = Pack(os.path.join(self.dir, name))
        except FileNotFoundError:
            return None        # deleted meanwhile
        except (OSError, ValueError) as e:
            self.damaged[name] = str(e) or type(e).__name__
            return None        # damaged: `verify` names it
        self.opened[name] = pack
        if pack.small is not None:
            for key, (off, length) in pack.small.items():
                self.small.setdefault(key, (pack, off, length))
        return pack

    def forget(self, pack: Pack) -> None:
        self.opened.pop(os.path.basename(pack.path), None)
        if pack.small is not None:
            self.small = {k: v for k, v in self.small.items() if v[0] is not pack}

    def all(self) -> dict[str, Pack]:
        """Every pack on disk, by file name (all opened)."""
        self._list()
        while self.unopened:
            self.open(self.unopened.pop(0))
        return dict(self.opened)
