"""File locks (flock) with a bounded wait.

Two kinds:
- the store lock, held *shared* by every process that writes objects or relies on objects
  staying put (a checkpoint from its first read of the catalog to its commit, a restore
  from its plan to its last write), and taken *exclusive* by gc for its sweep: while gc
  holds it no writer is in flight, so the catalog gc reads then names everything any
  writer needs, and nothing can start relying on an object while it is deleted;
- the project lock, exclusive, for everything that writes a project's checkpoints or its
  tree (it takes the store lock shared first).
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager

from rewind.constants import LOCKS_DIR
from rewind.errors import StoreLocked
from rewind.fsutil import ensure_private_dir


def _open(home: str, name: str) -> int:
    locks = os.path.join(home, LOCKS_DIR)
    ensure_private_dir(locks)
    return os.open(os.path.join(locks, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _acquire(fd: int, op: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreLocked(f"{what} is locked by another rewind process",
                                  hint="wait for it to finish, or try again") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


@contextmanager
def store_lock(home: str, exclusive: bool = False, timeout: float = 30.0, what: str = "the store"):
    fd = _open(home, "store.lock")
    try:
        _acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout, what)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def project_lock(home: str, project_id: int, timeout: float = 30.0, what: str = "the project"):
    """Exclusive lock for everything that writes a project's checkpoints or its tree."""
    with store_lock(home, timeout=timeout, what=what):
        fd = _open(home, f"project-{project_id}.lock")
        try:
            _acquire(fd, fcntl.LOCK_EX, timeout, what)
            yield
        finally:
            os.close(fd)


def try_lock(home: str, name: str) -> int | None:
    """A non-blocking exclusive lock held until the returned fd is closed; None if taken."""
    fd = _open(home, name)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
        return None
