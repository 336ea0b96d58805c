"""Background writers: threads that compress and write a big batch's objects while the scan
reads on. Imported by the store only for a batch big enough to use them."""

from __future__ import annotations

ASYNC_THREADS = 2
ASYNC_BYTES = 16 << 20   # at most this much data waiting for the writers (peak memory)


def fix_mmap_threshold() -> None:
    """glibc raises its mmap threshold each time a large block is freed, so buffers read on
    one thread and freed on another pile up in the heap: a first snapshot of 100,000 files
    peaked at 320 MB with the writers, 123 MB with the threshold fixed at 64 KB."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 * 1024)      # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass                             # not glibc: its allocator, its behaviour


class Writers:
    """Threads that compress and write staged objects while the scan reads on. zlib and
    hashlib release the GIL on large buffers, so a first snapshot uses a second core; the
    queue holds at most ASYNC_BYTES, so memory stays bounded."""

    def __init__(self, write):
        import threading
        fix_mmap_threshold()
        self.write = write
        self.cond = threading.Condition()
        self.items: list[tuple[bytes, str]] = []     # (data, tmp path or the id of a packed one)
        self.waiting = 0
        self.busy = 0
        self.closing = False
        self.error: BaseException | None = None
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(ASYNC_THREADS)]
        for t in self.threads:
            t.start()

    def submit(self, data: bytes, tmp: str) -> None:
        with self.cond:
            while self.waiting + len(data) > ASYNC_BYTES and self.items and self.error is None:
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
