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

from rewind.constants import LOCKS_DIR, STALL_S, STILL_S
from rewind.errors import StoreLocked
from rewind.fsutil import ensure_private_dir

RETRIES_S = 5.0     # a try that follows the last within this continues its wait
LOCK_TIMEOUT_S = 30.0       # a command's wait for a lock, then StoreLocked (exit 11)
SCAN_LOCK_TIMEOUT = 60.0    # a hook's wait for the lock of its scan or of a store write


def _open(home: str, name: str) -> int:
    locks = os.path.join(home, LOCKS_DIR)
    ensure_private_dir(locks)
    return os.open(os.path.join(locks, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


# lock name -> (since when this process waits for it, its last look): a caller that retries
# in short tries (a hook's prompt, 1 s each) has waited the sum of them
_waiting_since: dict[str, tuple[float, float]] = {}


def _acquire(fd: int, op: int, timeout: float, what: str, stalled=None, name: str = "") -> None:
    """`stalled()`, called once this process has waited STALL_S for lock `name` (in one wait
    or several) and every STILL_S after, may free the lock (a stopped watcher holding it:
    stalled.py)."""
    start = time.monotonic()
    deadline = start + timeout
    since, last = _waiting_since.get(name, (start, start))
    if start - last > RETRIES_S:
        since = start                        # a wait given up long ago, not one retried now
    look = since + STALL_S
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            _waiting_since.pop(name, None)
            return
        except BlockingIOError:
            now = time.monotonic()
            if stalled is not None:
                _waiting_since[name] = (since, now)
                if now >= look:
                    look = now + STILL_S
                    if stalled():
                        continue
            if time.monotonic() >= deadline:
                raise StoreLocked(f"{what} is locked by another rewind process",
                                  hint="wait for it to finish, or try again") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


@contextmanager
def store_lock(home: str, exclusive: bool = False, timeout: float = LOCK_TIMEOUT_S, what: str = "the store"):
    fd = _open(home, "store.lock")
    try:
        _acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout, what)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def project_lock(home: str, project_id: int, timeout: float = LOCK_TIMEOUT_S, what: str = "the project"):
    """Exclusive lock for everything that writes a project's checkpoints or its tree. A
    stopped watcher holding it is killed once the wait has lasted STALL_S (stalled.py)."""
    def stalled() -> bool:
        from rewind.stalled import free_project_lock
        return free_project_lock(home, project_id)

    with store_lock(home, timeout=timeout, what=what):
        name = f"project-{project_id}.lock"
        fd = _open(home, name)
        try:
            _acquire(fd, fcntl.LOCK_EX, timeout, what, stalled, os.path.join(home, name))
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
