"""The watcher, controlled from other processes: stop one. (One is started in the background
by background.py's `spawn_watcher`; whether one runs and can be trusted is capture/dirty.py's
`running` and `healthy`.)"""

from __future__ import annotations

import os
import signal
import time

from rewind.capture.dirty import lock_name, running
from rewind.catalog.db import Catalog
from rewind.lock import try_lock


def stop(home: str, catalog: Catalog, project_id: int, wait_s: float = 0.0) -> bool:
    """Ask the project's watcher to stop (SIGTERM). Returns whether one was running."""
    row = running(home, catalog, project_id)
    if row is None:
        return False
    pid = row.pid
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        if b"watch" not in cmd:
            return False        # the pid was reused by something else
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        fd = try_lock(home, lock_name(project_id))
        if fd is not None:
            os.close(fd)
            break
        time.sleep(0.02)
    return True
