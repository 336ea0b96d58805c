"""Per-project file locks (flock) with a bounded wait."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager

from .errors import StoreLocked
from .fsutil import ensure_private_dir


@contextmanager
def project_lock(home: str, project_id: int, timeout: float = 30.0, what: str = "the project"):
    """Exclusive lock for everything that writes a project's checkpoints or its tree."""
    locks = os.path.join(home, "locks")
    ensure_private_dir(locks)
    path = os.path.join(locks, f"project-{project_id}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreLocked(f"{what} is locked by another rewind process",
                                      hint="wait for it to finish, or try again") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock
