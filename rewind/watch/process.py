"""The watcher as a process: one per project (a lock), stopped by a signal, gone even if stuck."""

from __future__ import annotations

import os
import signal

from rewind import locations
from rewind.capture.dirty import lock_name
from rewind.lock import try_lock
from rewind.watch.daemon import Watcher

STOP_GRACE_S = 8.0


def _exit_if_stuck() -> None:
    """Asked to stop, the watcher must go even if something hangs: faulthandler's own
    thread (C, no Python lock, safe from a signal handler) exits the process after
    STOP_GRACE_S, printing every thread's stack on stderr."""
    import faulthandler
    try:
        faulthandler.dump_traceback_later(STOP_GRACE_S, exit=True)
    except (RuntimeError, ValueError, OSError):
        pass


def run_watcher(root: str, project_id: int, background: bool, idle_s: float | None,
                on_ready=None) -> int:
    """Run the watcher in this process until stopped. Returns 0, or 1 if one runs already."""
    home = locations.data_dir()
    fd = try_lock(home, lock_name(project_id))
    if fd is None:
        return 1
    try:
        w = Watcher(home, root, project_id, background, idle_s, on_ready)

        def stop(signum, frame):
            w.stop_reason = "stopped" if signum == signal.SIGTERM else "interrupted"
            w.stopping = True               # no lock may be taken here: see Watcher._pause
            _exit_if_stuck()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        if background:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        return w.run()
    finally:
        os.close(fd)
