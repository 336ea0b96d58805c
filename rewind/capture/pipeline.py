"""Reading a file as it was at one instant (`read_still`), and doing it on reader threads
for a big scan (`Pipeline`).

A full scan with many files to read (a first snapshot) reads, hashes and compresses them
on READERS threads: the reads wait on the disk, and hashlib and zlib release the GIL on
large buffers, so a second core does useful work. The walk stays on the scan's thread (see
walk_reads.py); each result is taken back there in submission order, so whatever it records
(trees, stats, objects) comes out as a sequential scan would record it. At most AHEAD
hand-offs or AHEAD_BYTES bytes are in flight, read or not yet taken back: memory stays
bounded.

The threads start only for such a scan: the hooks' small scans use `read_still` alone.
"""

from __future__ import annotations

import os
import stat as S
from collections import deque

from rewind.fsutil import read_fd
from rewind.store.objects import Store, digest_of, encode

_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_TRIES = 3
READERS = min(4, max(2, os.cpu_count() or 1))
AHEAD = 32               # hand-offs in flight (walk_reads.py hands up to 16 files at once: ~512 files)
AHEAD_BYTES = 16 << 20


def read_still(dfd: int, name: str, hot_since: int):
    """(bytes, the fstat they belong to, None), or (None, None, why not): None when the file
    is gone, else ("unreadable" or "special", detail) or ("changing", None). Opened with
    O_NOFOLLOW|O_NONBLOCK and checked with fstat, so a file swapped for a link or a FIFO
    since the walk saw it is reported, never followed or waited on.

    A write that starts during the read changes the file's times (checked by an fstat
    before and after). One already under way when the read began does not: the kernel
    sets the times when write(2) starts, then copies the data, so a read alongside the
    copy can get a mix of old and new pages that the file never held at any instant.
    A file written since `hot_since` (walk_reads.HOT_NS before the scan) is therefore read
    twice: the same bytes and the same fstat both times means each page held that
    content from the end of the first read to the start of the second, so the bytes are
    the file as it was at one instant. Otherwise it is read again, and after _READ_TRIES
    it is reported as changing. Limits: an instant at which a writer rewriting the file in
    place had done part of it counts as one (that mix is what the file held, and is what
    gets stored); and a write(2) still copying more than HOT_NS after it began (a stalled
    writer) can still give a mix. Only reads (it runs on reader threads): the caller
    records."""
    for _ in range(_READ_TRIES):
        try:
            fd = os.open(name, _OPEN_FILE, dir_fd=dfd)
        except FileNotFoundError:
            return None, None, None
        except OSError as e:
            return None, None, ("unreadable", e.strerror or str(e))
        try:
            before = os.fstat(fd)
            if not S.S_ISREG(before.st_mode):
                return None, None, ("special", special_kind(before.st_mode))
            data = read_fd(fd, before.st_size)
            after = os.fstat(fd)
            still = _same(before, after) and len(data) == after.st_size
            if still and after.st_mtime_ns >= hot_since:
                os.lseek(fd, 0, os.SEEK_SET)
                still = read_fd(fd, after.st_size) == data and _same(after, os.fstat(fd))
        except OSError as e:
            return None, None, ("unreadable", e.strerror or str(e))
        finally:
            os.close(fd)
        if still:
            return data, after, None
    return None, None, ("changing", None)


def read_batch(dfd: int, names: list[str], hot_since: int, store: Store | None) -> list[tuple]:
    """A reader thread's part: for each file of one directory, read_still's answer, with
    the id and, when the store wants the object, its compressed body."""
    out = []
    for name in names:
        data, st, problem = read_still(dfd, name, hot_since)
        if data is None:
            out.append((data, st, problem))
            continue
        oid = digest_of(data)
        out.append((data, st, None, oid, encode(data, fast=True) if store is not None and store.wanted(oid) else None))
    return out


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return a.st_mtime_ns == b.st_mtime_ns and a.st_ctime_ns == b.st_ctime_ns and a.st_size == b.st_size


def special_kind(mode: int) -> str:
    if S.S_ISFIFO(mode):
        return "fifo"
    if S.S_ISSOCK(mode):
        return "socket"
    if S.S_ISCHR(mode) or S.S_ISBLK(mode):
        return "device"
    return "special file"


class Pipeline:
    """Work handed to reader threads, taken back on the caller's thread in the order it was
    handed out."""

    def __init__(self, readers: int = READERS):
        from concurrent.futures import ThreadPoolExecutor   # here: a hook's scan never gets this far
        from rewind.store.writers import fix_mmap_threshold
        fix_mmap_threshold()      # buffers read on one thread, freed on another
        self.pool = ThreadPoolExecutor(readers, thread_name_prefix="rewind-read")
        self.queue: deque = deque()   # (future, bytes, take), in submission order
        self.bytes = 0

    def submit(self, size: int, take, fn, *args) -> None:
        """fn(*args) on a reader thread; take(its result) later on this thread, in order.
        `size`: the bytes it will hold. Waits while too much is in flight."""
        while self.queue and (len(self.queue) >= AHEAD or self.bytes + size > AHEAD_BYTES):
            self.take_one()
        self.queue.append((self.pool.submit(fn, *args), size, take))
        self.bytes += size
        while self.queue and self.queue[0][0].done():
            self.take_one()

    def take_one(self) -> None:
        """Wait for the oldest result and take it; a reader's exception is raised here."""
        future, size, take = self.queue.popleft()
        self.bytes -= size
        take(future.result())

    def drain(self) -> None:
        while self.queue:
            self.take_one()

    def close(self) -> None:
        """Stop the readers: what was not started is dropped (after an error), what runs ends."""
        self.queue.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)
