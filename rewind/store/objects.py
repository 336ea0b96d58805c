"""Content-addressed objects: blobs (file bytes, symlink targets) and trees.

An object's id is the SHA-256 of its uncompressed bytes. On disk it lives at
objects/<2 hex>/<62 hex>, mode 0600, as one codec byte followed by the payload
(0 = stored raw, 1 = zlib). Every read decompresses and re-hashes, so a damaged object
is always caught. Writes are staged in tmp/ and made durable in batches: data synced,
then renamed into place, then the directories synced, so a crash never leaves a half
object under a real name.

A batch of at most _SMALL objects (an edit tool's pre-image) becomes loose files, synced
on a few threads. A bigger one (a prompt's checkpoint, a first snapshot, a rewind) goes
into one pack, objects/pack/<time>-<random>.pack: the objects' bodies one after another, then an
index sorted by id (id, offset, length), then a trailer; one file and one fsync instead
of one per object, and no 4 KB block per small object. Packs are never modified. Readers
look in the newest packs first and open older ones only when they must; gc deletes a
pack when nothing in it is referenced and merges the small ones. `put` never relies on a
packed object (it writes a new copy if no loose one exists), so gc's protocol for reused
objects concerns loose files only; packed objects are reached from checkpoints, last
scanned trees and stat caches, all of which gc marks.
"""

from __future__ import annotations

import hashlib
import os
import zlib

from rewind.errors import CorruptObject
from rewind.fsutil import ensure_private_dir, fsync_dir, in_parallel, write_all

RAW, ZLIB = 0, 1
_SAMPLE = 64 * 1024
_SMALL = 8               # a batch of at most this many objects is loose files; a bigger one a pack
_SMALL_PACK = 4096       # gc merges packs of at most this many objects
_DICT_PACK = 64          # ...and a pack of at most this many has its index read into a dict when opened;
                         # a bigger one is binary-searched in its mmap (~8 us a find), and reads its
_BSEARCHES = 64          # index into a dict only after this many finds and count/8 (building the dict
                         # costs ~0.6 us an object: 2.6 ms for 4,096, 60 ms for 100,000; a hook makes
                         # ~100 finds, gc and verify make one per object)
MERGE_AT = 16            # this many packs: a hook starts a merge of the small ones (gc.merge_packs)
PACKS_DIR = os.path.join("objects", "pack")   # content lives under objects/ and nowhere else
_MAGIC, _END = b"RWPACK1\n", b"RWPKEND\n"
_REC = 48                # index record: 32-byte id, 8-byte offset, 8-byte length
_TRAILER = 24            # index offset, count, _END
_PACKED = ""             # _staged value of an object in the batch's pack
_HELD = "-"              # ... of one held in memory until the batch is known to be small or not


_ASYNC_AFTER = 256      # a batch past this many objects compresses and writes on other threads
_ASYNC_MIN = 2048       # ...those of this size or more (smaller ones are not worth a hand-off)
_ASYNC_THREADS = 2
_ASYNC_BYTES = 16 << 20  # at most this much data waiting for the writers (peak memory)


def _fixed_mmap_threshold() -> None:
    """glibc raises its mmap threshold each time a large block is freed, so buffers read on
    one thread and freed on another pile up in the heap: a first snapshot of 100,000 files
    peaked at 320 MB with the writers, 123 MB with the threshold fixed at 64 KB."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 * 1024)      # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass                             # not glibc: its allocator, its behaviour


class _Writers:
    """Threads that compress and write staged objects while the scan reads on. zlib and
    hashlib release the GIL on large buffers, so a first snapshot uses a second core; the
    queue holds at most _ASYNC_BYTES, so memory stays bounded."""

    def __init__(self, write):
        import threading
        _fixed_mmap_threshold()
        self.write = write
        self.cond = threading.Condition()
        self.items: list[tuple[bytes, str]] = []     # (data, tmp path or the id of a packed one)
        self.waiting = 0
        self.busy = 0
        self.closing = False
        self.error: BaseException | None = None
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(_ASYNC_THREADS)]
        for t in self.threads:
            t.start()

    def submit(self, data: bytes, tmp: str) -> None:
        with self.cond:
            while self.waiting + len(data) > _ASYNC_BYTES and self.items and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise self.error
            self.items.append((data, tmp))
            self.waiting += len(data)
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.items and not self.closing:
                    self.cond.wait()
                if not self.items:
                    return
                data, tmp = self.items.pop()
                self.busy += 1
            try:
                if self.error is None:
                    self.write(data, tmp)
            except BaseException as e:  # handed to the scan at its next submit or at flush
                with self.cond:
                    self.error = self.error or e
            finally:
                with self.cond:
                    self.busy -= 1
                    self.waiting -= len(data)
                    self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        for t in self.threads:
            t.join()
        if self.error is not None:
            raise self.error


def is_oid(value) -> bool:
    """64 lowercase hex digits: the only names the store resolves (never a path)."""
    return isinstance(value, str) and len(value) == 64 and not value.strip("0123456789abcdef")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode(data: bytes) -> bytes:
    """Compress unless the data does not compress (a sample decides for large inputs)."""
    if len(data) > _SAMPLE and len(zlib.compress(data[:_SAMPLE], 1)) > 0.9 * _SAMPLE:
        return bytes([RAW]) + data
    packed = zlib.compress(data, 1)
    if len(packed) < len(data):
        return bytes([ZLIB]) + packed
    return bytes([RAW]) + data


def decode(raw: bytes) -> bytes:
    if not raw:
        raise ValueError("empty object file")
    codec = raw[0]
    if codec == RAW:
        return raw[1:]
    if codec == ZLIB:
        return zlib.decompress(raw[1:])
    raise ValueError(f"unknown codec {codec}")


class Store:
    """The object store under `<home>/objects`. Cheap to create; touches the disk lazily."""

    def __init__(self, home: str):
        self.home = home
        self.objects = os.path.join(home, "objects")
        self.tmp = os.path.join(home, "tmp")
        self._staged: dict[str, str] = {}   # id -> temp file
        self._pool: _Writers | None = None  # background compress-and-write, for big batches
        self._held: dict[str, bytes] = {}       # the batch's first objects, while it may stay small
        self._loose_tmps: list[str] = []        # staging files written by flush
        self._pack: _PackWriter | None = None   # this batch's pack, once it is not small
        self._packs: dict[str, _Pack] = {}      # packs opened so far, by name
        self._small: dict[bytes, tuple] = {}    # id -> (pack, offset, length) of the small ones
        self._unopened: list[str] | None = None  # names not opened yet, newest first
        self._binary: dict[str, bool] = {}       # id -> a NUL in its first 8 KB, for blobs seen whole
        self.found_damaged: dict[str, str] = {}  # id -> problem, found by this process's reads
        self.damaged_packs: dict[str, str] = {}  # pack file -> why it could not be opened

    def fs_now(self) -> int:
        """The filesystem's idea of now, read from a file made in tmp/: file times lag and
        are coarser than time.time(), and they are what the stat cache and gc compare."""
        ensure_private_dir(self.tmp)
        path = os.path.join(self.tmp, f"now.{os.getpid()}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)
            os.unlink(path)

    # -- paths -----------------------------------------------------------------------
    def path(self, oid: str) -> str:
        if not is_oid(oid):
            raise CorruptObject(str(oid)[:64], "not an object id (a damaged catalog or tree)")
        return os.path.join(self.objects, oid[:2], oid[2:])

    # -- writing ---------------------------------------------------------------------
    def put(self, data: bytes, oid: str | None = None) -> str:
        """Stage `data`; returns its id. The object is durable after `flush()`."""
        if oid is None:
            oid = digest_of(data)
        if oid in self._staged:
            return oid
        final = self.path(oid)
        try:
            os.utime(final)  # reuse: refresh mtime (gc sweeps under the store lock, which callers hold)
            return oid
        except FileNotFoundError:
            pass
        if self._pack is None and len(self._held) < _SMALL:
            self._held[oid] = data
            self._staged[oid] = _HELD
            return oid
        if self._pack is None:
            ensure_private_dir(self.tmp)
            self._pack = _PackWriter(self.tmp)
            held, self._held = self._held, {}
            for hoid, hdata in held.items():
                self._staged[hoid] = _PACKED
                self._pack.append(hoid, encode(hdata))
        self._staged[oid] = _PACKED
        if len(self._staged) > _ASYNC_AFTER and len(data) >= _ASYNC_MIN:
            self._writers().submit(data, oid)
        else:
            try:
                self._write(data, oid)
            except BaseException:
                del self._staged[oid]
                raise
        return oid

    def _write(self, data: bytes, oid: str) -> None:
        """Compress one object and append it to the batch's pack."""
        self._pack.append(oid, encode(data))

    def _write_loose(self, item: tuple[str, str, bytes]) -> None:
        """Write and sync one object's staging file."""
        _, tmp, data = item
        body = encode(data)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, body)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)       # a full disk leaves no half object behind
            except OSError:
                pass
            raise
        os.close(fd)

    def _writers(self) -> "_Writers":
        if self._pool is None:
            self._pool = _Writers(self._write)
        return self._pool

    def _settle(self) -> None:
        """Wait for the background writers; raise the first error they met."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()

    def flush(self) -> None:
        """Make every staged object durable under its real name."""
        if not self._staged:
            return
        self._settle()
        loose = []
        if self._held:
            ensure_private_dir(self.tmp)
            for i, (oid, data) in enumerate(self._held.items()):
                tmp = os.path.join(self.tmp, f"{oid[:16]}.{os.getpid()}.{i}")
                self._loose_tmps.append(tmp)
                loose.append((oid, tmp, data))
            in_parallel(self._write_loose, loose)
        if self._pack is not None:
            pack, self._pack = self._pack, None
            name = pack.finish(os.path.join(self.home, PACKS_DIR))     # synced, renamed, dir synced
            self._open_pack(name)
        shards = set()
        for oid, tmp, _ in loose:
            shard = os.path.join(self.objects, oid[:2])
            if shard not in shards:
                ensure_private_dir(shard)
                shards.add(shard)
            os.replace(tmp, self.path(oid))
        in_parallel(fsync_dir, shards)
        self._held.clear()
        self._loose_tmps.clear()
        self._staged.clear()

    def mend(self, oid: str, data: bytes) -> None:
        """Write a whole loose copy of an object whose stored copy is damaged or missing (the
        bytes are checked against the id first); reads take the loose copy first."""
        if digest_of(data) != oid:
            raise CorruptObject(oid, "the bytes offered to mend it do not match its id")
        ensure_private_dir(self.tmp)
        tmp = os.path.join(self.tmp, f"{oid[:16]}.{os.getpid()}.mend")
        self._write_loose((oid, tmp, data))
        shard = os.path.join(self.objects, oid[:2])
        ensure_private_dir(shard)
        os.replace(tmp, self.path(oid))
        fsync_dir(shard)

    def discard(self) -> None:
        try:
            self._settle()
        except BaseException:
            pass                         # what they wrote is removed below all the same
        for tmp in self._loose_tmps:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if self._pack is not None:
            self._pack.abort()
            self._pack = None
        self._loose_tmps.clear()
        self._held.clear()
        self._staged.clear()

    # -- reading ---------------------------------------------------------------------
    def note_binary(self, oid: str, data: bytes) -> None:
        """Remember whether a blob this process holds whole is binary (a NUL in its first
        8 KB), so that `is_binary` need not read it back."""
        self._binary[oid] = data.find(b"\0", 0, 8192) != -1

    def known_binary(self, oid: str) -> bool | None:
        """The remembered flag of a blob this process held whole, or None."""
        return self._binary.get(oid)

    def is_binary(self, oid: str) -> bool:
        """A NUL in the blob's first 8 KB (git's test), remembered or read from its head."""
        got = self._binary.get(oid)
        if got is None:
            got = self._binary[oid] = b"\0" in self.head(oid, 8192)
        return got

    def head(self, oid: str, n: int = 8192) -> bytes:
        """The first `n` bytes of an object, unverified: for a look (is it binary?), never
        for restoring. Reads only the start of the file and inflates only n bytes."""
        staged = self._staged.get(oid)
        if staged is not None and self._pool is not None:
            self._settle()
        f = None
        if staged is None:
            try:
                f = open(self.path(oid), "rb")
            except FileNotFoundError:
                pass
        if f is None:
            import io
            f = io.BytesIO(self._raw(oid))       # packed: its body is one slice anyway
        with f:
            codec = f.read(1)
            if codec != bytes([ZLIB]):
                return f.read(n)
            d, out = zlib.decompressobj(), b""
            while len(out) < n and not d.eof:
                more = d.unconsumed_tail or f.read(16384)
                if not more:
                    break
                out += d.decompress(more, n - len(out))
            return out

    def _raw(self, oid: str) -> bytes:
        """An object's stored bytes (codec byte and payload): staged, loose or packed."""
        staged = self._staged.get(oid)
        if staged is not None and self._pool is not None:
            self._settle()
        if staged == _PACKED:
            return self._pack.read(oid)
        if staged == _HELD:
            return bytes([RAW]) + self._held[oid]
        try:
            with open(self.path(oid), "rb") as f:
                return f.read()
        except FileNotFoundError:
            pass
        for _ in range(3):             # a pack gc merged away meanwhile: look again
            found = self._find_packed(oid)
            if found is None:
                raise CorruptObject(oid, "missing")
            pack, off, length = found
            try:
                return pack.read(off, length)
            except FileNotFoundError:
                self._forget_pack(pack)
        raise CorruptObject(oid, "missing")

    def _find_packed(self, oid: str):
        """(pack, offset, length) of a packed object, or None. The packs opened so far
        first, then the others newest first (a hook needs recent trees), then any pack
        written since the last listing."""
        if not is_oid(oid):
            return None
        key = bytes.fromhex(oid)
        hit = self._small.get(key)
        if hit is not None:
            return hit
        for pack in self._packs.values():
            if pack.small is None:
                found = pack.find(key)
                if found is not None:
                    return (pack, *found)
        for relisted in (False, True):
            if self._unopened is None or relisted:
                self._list_packs()
            while self._unopened:
                pack = self._open_pack(self._unopened.pop(0))
                if pack is None:
                    continue
                found = pack.find(key)
                if found is not None:
                    return (pack, *found)
        return None

    def _list_packs(self) -> None:
        pdir = os.path.join(self.home, PACKS_DIR)
        try:
            names = [n for n in os.listdir(pdir) if n.endswith(".pack")]
        except FileNotFoundError:
            names = []
        self._unopened = sorted((n for n in names if n not in self._packs), reverse=True)

    def _open_pack(self, name: str) -> "_Pack | None":
        try:
            pack = _Pack(os.path.join(self.home, PACKS_DIR, name))
        except FileNotFoundError:
            return None        # deleted meanwhile
        except (OSError, ValueError) as e:
            self.damaged_packs[name] = str(e) or type(e).__name__
            return None        # damaged: `verify` names it
        self._packs[name] = pack
        if pack.small is not None:
            for key, (off, length) in pack.small.items():
                self._small.setdefault(key, (pack, off, length))
        return pack

    def _forget_pack(self, pack: "_Pack") -> None:
        self._packs.pop(os.path.basename(pack.path), None)
        if pack.small is not None:
            self._small = {k: v for k, v in self._small.items() if v[0] is not pack}

    def packs(self) -> dict[str, "_Pack"]:
        """Every pack on disk, by file name (all opened)."""
        self._list_packs()
        while self._unopened:
            self._open_pack(self._unopened.pop(0))
        return dict(self._packs)

    def get(self, oid: str) -> bytes:
        """The object's bytes, verified against its id (CorruptObject otherwise). What is
        found damaged or missing is remembered (`found_damaged`)."""
        try:
            try:
                return _verified(oid, self._raw(oid))
            except CorruptObject as e:
                if e.problem == "missing" or oid in self._staged:
                    raise
                found = self._find_packed(oid)       # a damaged loose copy: a packed one may be whole
                if found is None:
                    raise
                pack, off, length = found
                return _verified(oid, pack.read(off, length))
        except CorruptObject as e:
            if is_oid(oid):
                self.found_damaged[oid] = e.problem
            raise


def _verified(oid: str, raw: bytes) -> bytes:
    try:
        data = decode(raw)
    except (ValueError, zlib.error):
        raise CorruptObject(oid, "damaged (does not decompress)") from None
    if digest_of(data) != oid:
        raise CorruptObject(oid, "damaged (content does not match its id)")
    return data


class _PackWriter:
    """The pack a big batch appends to, in tmp/ until `finish`."""

    def __init__(self, tmp_dir: str):
        import threading
        self.path = os.path.join(tmp_dir, f"pack.{os.getpid()}.{os.urandom(8).hex()}")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.lock = threading.Lock()         # the background writers append too
        self.offset = len(_MAGIC)
        self.index: dict[str, int] = {}      # id -> offset << 32 | length (one int: memory)
        write_all(self.fd, _MAGIC)

    def append(self, oid: str, body: bytes) -> None:
        with self.lock:
            if len(body) >= 1 << 32:
                raise ValueError("an object of 4 GB or more")     # MAX_FILE_SIZE keeps far below
            write_all(self.fd, body)
            self.index[oid] = self.offset << 32 | len(body)
            self.offset += len(body)

    def read(self, oid: str) -> bytes:
        v = self.index[oid]
        return os.pread(self.fd, v & 0xFFFFFFFF, v >> 32)

    def finish(self, packs_dir: str) -> str:
        """Index and trailer, fsync, rename into objects/pack/, fsync that directory. Returns the name."""
        ids = sorted(self.index)         # hex order is byte order
        index = self.index
        for i in range(0, len(ids), 4096):   # in chunks: a 100,000-object index is 4.8 MB
            write_all(self.fd, b"".join(bytes.fromhex(oid) + (index[oid] >> 32).to_bytes(8, "big")
                                        + (index[oid] & 0xFFFFFFFF).to_bytes(8, "big")
                                        for oid in ids[i:i + 4096]))
        write_all(self.fd, self.offset.to_bytes(8, "big") + len(ids).to_bytes(8, "big") + _END)
        os.fsync(self.fd)
        os.close(self.fd)
        import time
        name = f"{time.time_ns():020d}-{os.urandom(6).hex()}.pack"   # names sort oldest first
        ensure_private_dir(packs_dir)
        os.replace(self.path, os.path.join(packs_dir, name))
        fsync_dir(packs_dir)
        return name

    def abort(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class _Pack:
    """A pack on disk, mapped: `find` is a binary search of its sorted index."""

    def __init__(self, path: str):
        import mmap
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(_MAGIC) + _TRAILER:
                raise ValueError("too short for a pack")
            self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        tail = self.mm[size - _TRAILER:]
        if self.mm[:len(_MAGIC)] != _MAGIC or tail[16:] != _END:
            raise ValueError("not a pack")
        self.index_at = int.from_bytes(tail[:8], "big")
        self.count = int.from_bytes(tail[8:16], "big")
        if self.index_at + self.count * _REC + _TRAILER != size:
            raise ValueError("a pack whose index does not fit")
        self.small: dict[bytes, tuple[int, int]] | None = None
        self._dict: dict[bytes, int] | None = None     # id -> index record, built after _BSEARCHES finds
        self._finds = 0
        if self.count <= _DICT_PACK:
            base, mm = self.index_at, self.mm
            self.small = {mm[at:at + 32]: self._record(at) for at in range(base, base + self.count * _REC, _REC)}

    def find(self, key: bytes) -> tuple[int, int] | None:
        if self.small is not None:
            return self.small.get(key)
        mm, base = self.mm, self.index_at
        if self._dict is None:
            self._finds += 1
            if self._finds > max(_BSEARCHES, self.count >> 3):   # a reader of many objects (gc, verify)
                self._dict = {mm[at:at + 32]: at for at in range(base, base + self.count * _REC, _REC)}
        if self._dict is not None:
            at = self._dict.get(key)
            return None if at is None else self._record(at)
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            at = base + mid * _REC
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

    def entries(self):
        """(id, offset, length) of every object in the pack."""
        mm, base = self.mm, self.index_at
        for at in range(base, base + self.count * _REC, _REC):
            yield (mm[at:at + 32].hex(), *self._record(at))
