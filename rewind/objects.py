"""Content-addressed objects: blobs (file bytes, symlink targets) and trees.

An object's id is the SHA-256 of its uncompressed bytes. On disk it lives at
objects/<2 hex>/<62 hex>, mode 0600, as one codec byte followed by the payload
(0 = stored raw, 1 = zlib). Every read decompresses and re-hashes, so a damaged object
is always caught. Writes are staged in tmp/ and made durable in batches: data synced,
then renamed into place, then the shard directories synced, so a crash never leaves a
half object under a real name. A hook's batch syncs its files on a few threads (the
filesystem commits them together); a first snapshot of 100,000 files syncs the
filesystem once instead of paying 100,000 fsyncs.
"""

from __future__ import annotations

import hashlib
import os
import zlib

from .errors import CorruptObject
from .fsutil import ensure_private_dir, fsync_dir, fsync_path, in_parallel, write_all

RAW, ZLIB = 0, 1
_SAMPLE = 64 * 1024
_FEW = 256  # batches up to this size sync file by file (a hook's); larger ones sync everything once


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
        self.written = 0                     # objects newly written by this Store
        self.written_bytes = 0

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

    def has(self, oid: str) -> bool:
        return oid in self._staged or os.path.exists(self.path(oid))

    # -- writing ---------------------------------------------------------------------
    def put(self, data: bytes, oid: str | None = None) -> str:
        """Stage `data`; returns its id. The object is durable after `flush()`."""
        if oid is None:
            oid = digest_of(data)
        if oid in self._staged:
            return oid
        final = self.path(oid)
        try:
            os.utime(final)  # reuse: refresh mtime so a concurrent sweep keeps it
            return oid
        except FileNotFoundError:
            pass
        ensure_private_dir(self.tmp)
        tmp = os.path.join(self.tmp, f"{oid[:16]}.{os.getpid()}.{len(self._staged)}")
        body = encode(data)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, body)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)       # a full disk leaves no half object behind
            except OSError:
                pass
            raise
        os.close(fd)
        self._staged[oid] = tmp
        self.written += 1
        self.written_bytes += len(body)
        return oid

    def flush(self) -> None:
        """Make every staged object durable under its real name."""
        if not self._staged:
            return
        many = len(self._staged) > _FEW
        if many:
            os.sync()
        else:
            in_parallel(fsync_path, self._staged.values())
        shards = set()
        for oid, tmp in self._staged.items():
            shard = os.path.join(self.objects, oid[:2])
            if shard not in shards:
                ensure_private_dir(shard)
                shards.add(shard)
            os.replace(tmp, self.path(oid))
        if many:
            os.sync()
        else:
            in_parallel(fsync_dir, shards)
        self._staged.clear()

    def discard(self) -> None:
        for tmp in self._staged.values():
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        self._staged.clear()

    # -- reading ---------------------------------------------------------------------
    def head(self, oid: str, n: int = 8192) -> bytes:
        """The first `n` bytes of an object, unverified: for a look (is it binary?), never
        for restoring. Reads only the start of the file and inflates only n bytes."""
        with open(self._staged.get(oid) or self.path(oid), "rb") as f:
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

    def get(self, oid: str) -> bytes:
        """The object's bytes, verified against its id (CorruptObject otherwise)."""
        staged = self._staged.get(oid)
        try:
            with open(staged or self.path(oid), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise CorruptObject(oid, "missing") from None
        try:
            data = decode(raw)
        except (ValueError, zlib.error):
            raise CorruptObject(oid, "damaged (does not decompress)") from None
        if digest_of(data) != oid:
            raise CorruptObject(oid, "damaged (content does not match its id)")
        return data
