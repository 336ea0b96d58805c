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


_ASYNC_AFTER = 64       # a batch past this many objects compresses and writes on other threads
_ASYNC_MIN = 2048       # ...those of this size or more (smaller ones are not worth a hand-off)
_ASYNC_THREADS = 2
_ASYNC_BYTES = 64 << 20  # at most this much data waiting for the writers


class _Writers:
    """Threads that compress and write staged objects while the scan reads on. zlib and
    hashlib release the GIL on large buffers, so a first snapshot uses a second core; the
    queue holds at most _ASYNC_BYTES, so memory stays bounded."""

    def __init__(self, write):
        import threading
        self.write = write
        self.cond = threading.Condition()
        self.items: list[tuple[bytes, str]] = []
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
        self._staged[oid] = tmp
        if len(self._staged) > _ASYNC_AFTER and len(data) >= _ASYNC_MIN:
            self._writers().submit(data, tmp)
        else:
            try:
                self._write(data, tmp)
            except BaseException:
                del self._staged[oid]
                raise
        return oid

    def _write(self, data: bytes, tmp: str) -> None:
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
        try:
            self._settle()
        except BaseException:
            pass                         # what they wrote is removed below all the same
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
        if staged is not None and self._pool is not None:
            self._settle()
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
