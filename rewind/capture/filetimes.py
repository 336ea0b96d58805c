"""When did a file last change, on the kernel's clock: the proof that a change a busy
watcher reads late was made before a shell window's command existed (procs.py).

The pid account (procs.py) proves, at each look, that no process of the command exists
yet. A change read before such a look is not the command's; but a watcher whose reading
thread is starved reads it only after a later look found the command. The file itself
then says when it last changed: if its ctime is older than the kernel's clock at the start
of the last look that found the window waiting, by more than a tick of the kernel's coarse
clock (file times lag the true time by up to one tick; so does the clock read here), the
file's last change came before any process of the command existed.

- Both times are the kernel's own wall clock: a file's ctime, and a new pipe's ctime for
  "now". Never this process's clock: a shim that fakes it (a wrong-clock test, faketime)
  leaves the kernel's file times alone, and a clock a year ahead would then prove every
  change older than every look.
- A step of that clock since the look (a jump back would make the command's own change
  look older than the look) shows against the monotonic clock, and gives no proof.
- A file gone since is judged by the directory it was in: an unlink or a rename away
  changes that directory's ctime. A file renamed into place: the later of its and its
  directory's ctime (not every file system counts a rename as a change of the file).
- No proof: a symlink on the way (its target's times are another file's), a time in whole
  seconds (a file system that keeps no more), an unreadable path. The change then stays
  the command's, as the rule in procs.py wants.
"""

from __future__ import annotations

import os
import stat

TICK_NS = 20_000_000             # > a tick of the kernel's coarse clock (4 ms at HZ=250, 10 ms at HZ=100)
STEP_NS = 20_000_000             # the kernel's wall clock moved this much against the monotonic one: a step


def kernel_wall_ns() -> int | None:
    """The kernel's wall clock as it stamps files (coarse: up to a tick behind): a new pipe's
    ctime. Not time.time_ns(): a shim that fakes this process's clock leaves files alone."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        ns = os.fstat(r).st_ctime_ns
    except OSError:
        ns = 0
    finally:
        os.close(r)
        os.close(w)
    return ns or None


def changed_ns(root: str, rel: str, moved_in: bool = False) -> int | None:
    """When `rel` under `root` (or, gone, the deepest directory still on its way) last
    changed, as its ctime; None where that says nothing: a symlink on the way (its target's
    times are another file's), a time in whole seconds (a file system that keeps no more),
    an error. `moved_in`: it was renamed into place, which not every file system counts as
    a change of the file itself; the later of its and its directory's."""
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        parts = [p for p in rel.split("/") if p]
        for i, name in enumerate(parts):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = os.fstat(fd)                # gone: its directory's unlink or rename says when
                break
            if i == len(parts) - 1:
                if moved_in:
                    dst = os.fstat(fd)
                    if dst.st_ctime_ns > st.st_ctime_ns:
                        st = dst
                break
            if not stat.S_ISDIR(st.st_mode):
                return None                      # a symlink (or a file) where a directory was
            try:
                nfd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                st = os.fstat(fd)
                break
            os.close(fd)
            fd = nfd
        else:
            st = os.fstat(fd)                    # rel is the root itself
    except OSError:
        return None
    finally:
        os.close(fd)
    ns = st.st_ctime_ns
    return ns if ns % 1_000_000_000 else None


def made_before(changed: int, look: tuple[int, int], now: tuple[int | None, int]) -> bool:
    """Was a change stamped `changed` (a ctime) made before a look taken at `look`
    (kernel wall clock, monotonic clock)? `now`: the same two clocks now, which tell
    whether the wall clock stepped in between."""
    (look_k, look_m), (now_k, now_m) = look, now
    if now_k is None or abs((now_k - look_k) - (now_m - look_m)) > STEP_NS:
        return False
    return changed + TICK_NS < look_k
