"""Content-addressed objects: blobs (file bytes, symlink targets) and trees; the store's facade.

An object's id is the SHA-256 of its uncompressed bytes. Loose, it lives at
objects/<2 hex>/<62 hex>, mode 0600, as one codec byte followed by the payload
(0 = stored raw, 1 = zlib, 2 = zstd). Every read decompresses and re-hashes, so a damaged
object is always caught. zstd (the zstandard package, level 1) compresses the file
contents of big scans, a first snapshot above all: 2.2x zlib-1's speed on source-like text
at a slightly better ratio (measured on the 100,000-file benchmark tree, see the
CHANGELOG). Everything else, and every process that cannot import it (the hook runs
`python -S`: no site-packages), writes zlib; trees and symlink targets are always zlib, so
a hook's scan never needs zstd to read. Writes are staged in tmp/ and made durable in batches: data synced,
then renamed into place, then the directories synced, so a crash never leaves a half
object under a real name.

A batch of at most SMALL_BATCH objects (an edit tool's pre-image) becomes loose files, synced
on a few threads. A bigger one (a prompt's checkpoint, a first snapshot, a rewind) goes
into one pack under objects/pack/ (store/pack.py: the format, and the readers' view of
the packs), its objects compressed on background threads when it is big
(store/writers.py); gc's sweep of both lives in store/sweep.py, the merges in
store/repack.py. `put` never relies on a packed object (it writes a new copy if no loose
one exists), so gc's protocol for reused objects concerns loose files only; packed objects
are reached from checkpoints, last scanned trees and stat caches, all of which gc marks.

The codec, the loose layout and the Store facade (writing and reading) stay in this one
module, past the house's ~350 lines on purpose: every hook that records imports all three,
and each module more is one more import on every hook (0.17 ms for a small module under
`python -S`, measured here, where a hook's whole budget is a few ms). What a hook does not
need lives elsewhere: packs (pack.py) and the background writers (writers.py) load only
when a batch or a read needs them; the sweep, merges and sizes never load in a hook.
"""

from __future__ import annotations

import hashlib
import os
import zlib

from rewind.constants import MAX_FILE_SIZE, OBJECTS_DIR, TMP_DIR
from rewind.errors import CorruptObject
from rewind.fsutil import ensure_private_dir, fsync_dir, in_parallel, write_all

RAW, ZLIB, ZSTD = 0, 1, 2
# against a base (store format 2): the codec byte, the base's 32-byte id, then the payload,
# made with the base's content as the compressor's dictionary; written only by the
# background rewrites (store/delta.py), never by a hook
ZSTD_DELTA = 3           # zstd, the base's content as a raw prefix (a new version of a file)
ZLIB_DELTA = 4           # zlib, the base's content as zdict (trees: a hook reads them with zlib)
ZSTD_DICT = 5            # zstd with a trained dictionary; the base is the dictionary object
BASED = frozenset((ZSTD_DELTA, ZLIB_DELTA, ZSTD_DICT))
MAX_DEPTH = 2            # a delta's base may be dictionary-compressed, a dictionary's base nothing:
                         # a read follows at most two bases (checked: deeper is damage)
RAW_PREFIX = bytes([RAW])   # a stored body's first byte when it is kept as it is
ZSTD_LEVEL = 1
_SAMPLE = 64 * 1024
SMALL_BATCH = 8          # a batch of at most this many objects is loose files; a bigger one a pack
MERGE_AT = 16            # this many packs: a hook starts a merge of the small ones (repack.merge_packs)
PACKS_DIR = os.path.join(OBJECTS_DIR, "pack")   # content lives under objects/ and nothing else
_PACKED = ""             # _staged value of an object in the batch's pack
_HELD = "-"              # ... of one held in memory until the batch is known to be small or not
_ASYNC_AFTER = 256       # a batch past this many objects compresses and writes on other threads
_ASYNC_MIN = 2048        # ...those of this size or more (smaller ones are not worth a hand-off)
_BASE_CACHE, _BASE_CACHE_ONE = 64, 1 << 20   # bases kept read: this many, each at most this big


# -- the codec ---------------------------------------------------------------------------

def is_oid(value) -> bool:
    """64 lowercase hex digits: the only names the store resolves (never a path)."""
    return isinstance(value, str) and len(value) == 64 and not value.strip("0123456789abcdef")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CodecUnavailable(RuntimeError):
    """A zstd object read by a process that cannot import zstandard: the object is whole,
    this process cannot read it (never taken for damage)."""


_zstd = None            # the zstandard module once looked for; False: not importable
_zstd_local = None      # threading.local: a compressor per thread (one is not thread-safe)


def _zstd_module():
    global _zstd
    if _zstd is None:
        try:
            import zstandard
            _zstd = zstandard
        except ImportError:
            _zstd = False
    return _zstd


def _zstd_compressor(level: int = ZSTD_LEVEL):
    global _zstd_local
    z = _zstd_module()
    if not z:
        return None
    if _zstd_local is None:
        import threading
        _zstd_local = threading.local()
    cs = getattr(_zstd_local, "c", None)
    if cs is None:
        cs = _zstd_local.c = {}
    c = cs.get(level)
    if c is None:
        c = cs[level] = z.ZstdCompressor(level=level)
    return c


def _zlib1(data: bytes) -> bytes:
    return zlib.compress(data, 1)


def encode(data: bytes, fast: bool = False, level: int = ZSTD_LEVEL) -> bytes:
    """Compress unless the data does not compress (a sample decides for large inputs).
    `fast`: zstd (at `level`) when this process has it (a big scan's file contents), else zlib."""
    c = _zstd_compressor(level) if fast else None
    codec, compress = (ZSTD, c.compress) if c is not None else (ZLIB, _zlib1)
    if len(data) > _SAMPLE and len(compress(data[:_SAMPLE])) > 0.9 * _SAMPLE:
        return RAW_PREFIX + data
    packed = compress(data)
    if len(packed) < len(data):
        return bytes([codec]) + packed
    return RAW_PREFIX + data


def _zstd_reader():
    z = _zstd_module()
    if not z:
        raise CodecUnavailable("a zstd object, and this Python cannot import zstandard "
                               "(pip install zstandard, or run rewind from its own environment)")
    return z


def base_of(raw) -> str | None:
    """The id of the base a stored body needs, or None."""
    if raw and raw[0] in BASED:
        if len(raw) < 33:
            raise ValueError("a based object too short for its base's id")
        return bytes(raw[1:33]).hex()
    return None


_dicts = None           # threading.local: {dictionary id: ZstdDecompressor} per thread


def decode_based(raw: bytes, base: bytes, base_id: str) -> bytes:
    """The content of a body whose codec needs a base, given the base's (verified) content."""
    codec, payload = raw[0], raw[33:]
    if codec == ZLIB_DELTA:
        d = zlib.decompressobj(zdict=base)
        out = d.decompress(payload, MAX_FILE_SIZE)
        if not d.eof or d.unconsumed_tail:
            raise ValueError("zlib delta: truncated or too long")
        return out
    z = _zstd_reader()
    try:
        size = z.frame_content_size(payload)
        if size < 0 or size > MAX_FILE_SIZE:
            raise ValueError("zstd frame of no or an impossible size")
        if codec == ZSTD_DELTA:
            zd = z.ZstdCompressionDict(base, dict_type=z.DICT_TYPE_RAWCONTENT)
            return z.ZstdDecompressor(dict_data=zd).decompress(payload, max_output_size=size)
        global _dicts
        if _dicts is None:
            import threading
            _dicts = threading.local()
        cache = getattr(_dicts, "c", None)
        if cache is None:
            cache = _dicts.c = {}
        dec = cache.get(base_id)
        if dec is None:
            if len(cache) > 8:
                cache.clear()
            dec = cache[base_id] = z.ZstdDecompressor(
                dict_data=z.ZstdCompressionDict(base, dict_type=z.DICT_TYPE_FULLDICT))
        return dec.decompress(payload, max_output_size=size)
    except z.ZstdError as e:
        raise ValueError(f"zstd: {e}") from None


def decode(raw: bytes) -> bytes:
    if not raw:
        raise ValueError("empty object file")
    codec = raw[0]
    if codec in BASED:
        raise ValueError("an object stored against a base, read without it")
    if codec == RAW:
        return raw[1:]
    if codec == ZLIB:
        return zlib.decompress(raw[1:])
    if codec == ZSTD:
        z = _zstd_reader()
        try:
            size = z.frame_content_size(raw[1:])
            if size < 0 or size > MAX_FILE_SIZE:     # unknown, or more than any stored file
                raise ValueError("zstd frame of no or an impossible size")
            return z.ZstdDecompressor().decompress(raw[1:], max_output_size=size)
        except z.ZstdError as e:
            raise ValueError(f"zstd: {e}") from None
    raise ValueError(f"unknown codec {codec}")


def _verified(oid: str, raw: bytes) -> bytes:
    try:
        data = decode(raw)
    except (ValueError, zlib.error):
        raise CorruptObject(oid, "damaged (does not decompress)") from None
    if digest_of(data) != oid:
        raise CorruptObject(oid, "damaged (content does not match its id)")
    return data


# -- the loose layout --------------------------------------------------------------------

def loose_path(objects_dir: str, oid: str) -> str:
    """Where the loose copy of `oid` lives: objects/<2 hex>/<62 hex>."""
    return os.path.join(objects_dir, oid[:2], oid[2:])


class Store:
    """The object store under `<home>/objects`. Cheap to create; touches the disk lazily."""

    def __init__(self, home: str):
        self.home = home
        self.objects = os.path.join(home, OBJECTS_DIR)
        self.tmp = os.path.join(home, TMP_DIR)
        self._staged: dict[str, str] = {}   # id -> temp file
        self._pool = None                       # writers.Writers: background compress-and-write, for big batches
        self._held: dict[str, bytes] = {}       # the batch's first objects, while it may stay small
        self._loose_tmps: list[str] = []        # staging files written by flush
        self._pack = None                       # pack.PackWriter: this batch's pack, once it is not small
        self._shards: frozenset[str] | None = None   # objects/<2 hex> dirs when the pack began
        self._packset = None                    # pack.PackSet: the packs on disk, opened as reads need them
        self._binary: dict[str, bool] = {}       # id -> a NUL in its first 8 KB, for blobs seen whole
        self.found_damaged: dict[str, str] = {}  # id -> problem, found by this process's reads
        self.damaged_packs: dict[str, str] = {}  # pack file -> why it could not be opened
        self.raw_packs = False                   # packs of file contents stored raw (pack.RAW_SUFFIX)
        self.written: list[str] = []             # the packs `flush` made, by file name
        self._bases: dict[str, bytes] = {}       # bases read lately, verified (a restore of versions)

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
        return loose_path(self.objects, oid)

    # -- writing ---------------------------------------------------------------------
    def wanted(self, oid: str) -> bool:
        """Whether `put` would write this object (not staged, no loose copy): a scan's reader
        threads compress only what is wanted. A hint: `put` checks again."""
        if oid in self._staged:
            return False
        return not self._may_be_loose(oid) or not os.path.exists(loose_path(self.objects, oid))

    def _may_be_loose(self, oid: str) -> bool:
        """False when the batch's pack began with no objects/<2 hex> dir for it: a first
        snapshot then spends no failed utime per object. A shard made since by another
        process only costs a second copy in the pack, never a reuse without a refresh."""
        shards = self._shards
        return shards is None or oid[:2] in shards

    def put(self, data: bytes, oid: str | None = None, body: bytes | None = None) -> str:
        """Stage `data`; returns its id. The object is durable after `flush()`. `body`:
        `encode(data)`, when another thread has made it already."""
        if oid is None:
            oid = digest_of(data)
        if oid in self._staged:
            return oid
        if not is_oid(oid):
            raise CorruptObject(str(oid)[:64], "not an object id (a damaged catalog or tree)")
        if self._may_be_loose(oid):
            try:
                os.utime(loose_path(self.objects, oid))   # reuse: refresh mtime (gc sweeps under
                                                          # the store lock, which callers hold)
                return oid
            except FileNotFoundError:
                pass
        if self._pack is None and len(self._held) < SMALL_BATCH:
            self._held[oid] = data
            self._staged[oid] = _HELD
            return oid
        if self._pack is None:
            from rewind.store.pack import PackWriter
            ensure_private_dir(self.tmp)
            self._pack = PackWriter(self.tmp)
            try:
                self._shards = frozenset(n for n in os.listdir(self.objects) if len(n) == 2)
            except FileNotFoundError:
                self._shards = frozenset()
            held, self._held = self._held, {}
            for hoid, hdata in held.items():
                self._staged[hoid] = _PACKED
                self._pack.append(hoid, encode(hdata))
        self._staged[oid] = _PACKED
        if body is None and len(self._staged) > _ASYNC_AFTER and len(data) >= _ASYNC_MIN:
            self._writers().submit(data, oid)
        else:
            try:
                self._pack.append(oid, encode(data) if body is None else body)
            except BaseException:
                del self._staged[oid]
                raise
        return oid

    def _write(self, data: bytes, oid: str) -> None:
        """Compress one object (a big batch's: zstd if this process has it) and append it
        to the batch's pack."""
        self._pack.append(oid, encode(data, fast=True))

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

    def _writers(self):
        if self._pool is None:
            from rewind.store.writers import Writers
            self._pool = Writers(self._write)
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
            name = pack.finish(os.path.join(self.home, PACKS_DIR), self.raw_packs)   # synced, renamed, dir synced
            self.written.append(name)
            self._packs().open(name)
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
        self._shards = None

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
        self._shards = None

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
            if codec and codec[0] in BASED:
                return self.get(oid)[:n]
            if codec == bytes([ZSTD]):
                out = b""
                with _zstd_reader().ZstdDecompressor().stream_reader(f, closefd=False) as r:
                    while len(out) < n:
                        more = r.read(n - len(out))
                        if not more:
                            break
                        out += more
                return out
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
            return RAW_PREFIX + self._held[oid]
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
                self._packs().forget(pack)
        raise CorruptObject(oid, "missing")

    def _find_packed(self, oid: str):
        """(pack, offset, length) of a packed object, or None."""
        if not is_oid(oid):
            return None
        return self._packs().find(bytes.fromhex(oid))

    def _packs(self):
        if self._packset is None:
            from rewind.store.pack import PackSet
            self._packset = PackSet(os.path.join(self.home, PACKS_DIR), self.damaged_packs)
        return self._packset

    def packs(self) -> dict:
        """Every pack on disk, by file name (all opened): {name: pack.Pack}."""
        return self._packs().all()

    def get(self, oid: str, _depth: int = 0) -> bytes:
        """The object's bytes, verified against its id (CorruptObject otherwise). What is
        found damaged or missing is remembered (`found_damaged`). An object stored against
        a base (a delta, or a dictionary's) reads its base first, verified as well; a damaged
        base makes this object damaged too, and says which base."""
        try:
            try:
                return self._whole(oid, self._raw(oid), _depth)
            except CorruptObject as e:
                if e.problem == "missing" or oid in self._staged or e.problem.startswith("needs"):
                    raise
                found = self._find_packed(oid)       # a damaged loose copy: a packed one may be whole
                if found is None:
                    raise
                pack, off, length = found
                return self._whole(oid, pack.read(off, length), _depth)
        except CorruptObject as e:
            if is_oid(oid):
                self.found_damaged[oid] = e.problem
            raise

    def _whole(self, oid: str, raw: bytes, depth: int) -> bytes:
        try:
            base_id = base_of(raw)
        except ValueError:
            raise CorruptObject(oid, "damaged (does not decompress)") from None
        if base_id is None:
            return _verified(oid, raw)
        if depth >= MAX_DEPTH or base_id == oid:
            raise CorruptObject(oid, "damaged (a chain of bases deeper than the format allows)")
        try:
            base = self._bases.get(base_id)
            if base is None:
                base = self.get(base_id, depth + 1)
                if len(base) <= _BASE_CACHE_ONE:      # versions of one file share a base: read once
                    if len(self._bases) >= _BASE_CACHE:
                        self._bases.pop(next(iter(self._bases)))
                    self._bases[base_id] = base
        except CorruptObject as e:
            raise CorruptObject(oid, f"needs base {base_id[:12]}, which is {e.problem}") from None
        try:
            data = decode_based(raw, base, base_id)
        except (ValueError, zlib.error):
            raise CorruptObject(oid, "damaged (does not decompress)") from None
        if digest_of(data) != oid:
            raise CorruptObject(oid, "damaged (content does not match its id)")
        return data
