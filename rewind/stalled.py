"""A stopped watcher that holds up the hooks: found, verified, killed.

A watcher stopped (SIGSTOP: a debugger, a suspended terminal job, memory pressure) in the
middle of a served call keeps the hook waiting for its answer, and keeps the project lock
it holds from every hook after. Both waits look here once they have lasted STALL_S
(hooks/client.py after its `!`, lock.py's project lock): a holder that is rewind's own
watcher of this project and stopped is killed (SIGKILL: a stopped process cannot handle
SIGTERM) and the lock is taken over; everything rewind writes survives a kill -9.

Killed only when every check says so, each from the kernel:
- it holds the project's watcher lock (`locks/watch-ID.lock`, /proc/locks): rewind's
  watcher of this project, not another project's, not a hook, not a `rewind to`;
- its command line is `rewind watch` (`-m rewind watch ...`);
- it is stopped (/proc/PID/stat state `T` or `t`) now and still STILL_S later: a watcher
  merely slow (two busy loops on two cores: a healthy one may take 100s of ms to answer)
  is running or sleeping, never stopped, and is left alone however long it takes.
Standard library only, and loaded only once a wait has lasted STALL_S: the hook path.
"""

from __future__ import annotations

import os
import signal
import time

from rewind.constants import STILL_S

GONE_S = 2.0             # a SIGKILLed process is gone within this (it cannot refuse)


def proc_state(pid: int) -> str | None:
    """The process's state letter (R, S, D, T, t, Z, ...), None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    rest = raw.rpartition(b")")[2].split()
    return rest[0].decode("ascii", "replace") if rest else None


def stopped(pid: int) -> bool:
    return proc_state(pid) in ("T", "t")


def holders(path: str, kinds=(b"FLOCK",)) -> set[int]:
    """The pids holding a lock of `kinds` (FLOCK, POSIX) on the file at `path` (/proc/locks)."""
    try:
        st = os.stat(path)
        with open("/proc/locks", "rb") as f:
            text = f.read(4 * 1024 * 1024)
    except OSError:
        return set()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}".encode()
    out = set()
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 7074 fe:00:2147278 0 EOF" (a blocked waiter: "1: -> FLOCK ...";
        # SQLite's locks are POSIX ones)
        if len(parts) >= 6 and parts[1] in kinds and parts[5] == dev:
            try:
                out.add(int(parts[4]))
            except ValueError:
                pass
    return out


def _lock_path(home: str, name: str) -> str:
    from rewind.constants import LOCKS_DIR
    return os.path.join(home, LOCKS_DIR, name)


def is_watcher(home: str, project_id: int, pid: int) -> bool:
    """`pid` is rewind's watcher of this project (or a server of another environment's hooks
    of it): it holds the project's watcher lock (or such a server's), and its command line
    says `rewind watch`."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read(64 * 1024).split(b"\0")
    except OSError:
        return False
    if "watch" not in [a.decode("utf-8", "replace") for a in args] or not any(b"rewind" in a for a in args):
        return False
    if pid in holders(_lock_path(home, f"watch-{project_id}.lock")):
        return True
    # or a server of another environment's hooks of the project (watch/envserver.py)
    try:
        names = os.listdir(os.path.dirname(_lock_path(home, "x")))
    except OSError:
        return False
    prefix = f"watch-{project_id}-"
    return any(pid in holders(_lock_path(home, n)) for n in names if n.startswith(prefix) and n.endswith(".lock"))


def take_over(home: str, project_id: int, pids, why: str) -> bool:
    """Kill the one of `pids` that is this project's watcher, verified stopped (see the
    module's doc). Returns whether one was killed (and is gone: its locks are free)."""
    for pid in pids:
        if pid == os.getpid() or not stopped(pid) or not is_watcher(home, project_id, pid):
            continue
        time.sleep(STILL_S)
        if not stopped(pid) or not is_watcher(home, project_id, pid):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline and proc_state(pid) not in (None, "Z", "X"):
            time.sleep(0.01)
        from rewind.log import log
        log(f"killed the watcher {pid} of project {project_id}: stopped (SIGSTOP or a debugger) "
            f"while {why}, and a hook waited for it")
        return True
    return False


def free_project_lock(home: str, project_id: int) -> bool:
    """lock.py, after STALL_S blocked on the project lock: a stopped watcher holding it is
    killed. Whether one was."""
    path = _lock_path(home, f"project-{project_id}.lock")
    return take_over(home, project_id, sorted(holders(path)), "it held the project lock")


def free_catalog(home: str) -> bool:
    """catalog/db.py, when a write transaction found the catalog locked past its busy
    timeout: a stopped watcher (of any project: the catalog is the store's) holding a lock
    on the catalog's files is killed. Whether one was."""
    from rewind.constants import CATALOG_NAME
    pids: set[int] = set()
    for suffix in ("", "-wal", "-shm"):
        pids |= holders(os.path.join(home, CATALOG_NAME + suffix), (b"POSIX", b"OFDLCK"))
    try:
        projects = [int(n[6:-5]) for n in os.listdir(os.path.join(home, _locks_dir()))
                    if n.startswith("watch-") and n.endswith(".lock") and n[6:-5].isdigit()]
    except OSError:
        return False
    for project_id in projects:
        if take_over(home, project_id, sorted(pids), "it held the catalog"):
            return True
    return False


def _locks_dir() -> str:
    from rewind.constants import LOCKS_DIR
    return LOCKS_DIR
