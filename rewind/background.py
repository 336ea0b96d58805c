"""Detached jobs: gc when it is due, a merge of small packs, a project's watcher.

Each starts through `spawn`: its own session, no stdin, stdout or stderr, never waited
for, so it costs the caller (often a hook) no time. On the hook path: standard library
only, and imported only where a job may start.
"""

from __future__ import annotations

import os
from rewind import clock

STAMP = "gc.stamp"


def spawn(args: list[str], cwd: str) -> None:
    """Start `python ARGS` in its own session, never waited for: off the caller's time."""
    import subprocess
    import sys
    subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, cwd=cwd)


def spawn_watcher(root: str, idle_minutes: float | None = None) -> None:
    """Start `rewind watch` for the project, detached (a no-op when one runs: it exits)."""
    args = ["-m", "rewind", "watch", "--project", root, "--background"]
    if idle_minutes is not None:
        args += ["--idle-minutes", repr(idle_minutes)]
    spawn(args, cwd="/")


ENV_SERVER_STAMP_S = 10.0     # a hook that started an env server less than this ago does not start another


def env_lock_name(project_id: int, key: str) -> str:
    """The lock a server of another environment's hooks holds (watch/envserver.py)."""
    return f"watch-{project_id}-{key}.lock"


def spawn_env_server(home: str, root: str, project_id: int, key: str, idle_minutes: float) -> bool:
    """From a hook the project's watcher refused for its environment (`key`: hooks/client.py
    env_key of it): start a server of this environment's hooks (watch/envserver.py), detached,
    unless one runs or was started less than ENV_SERVER_STAMP_S ago (on its way). Returns
    whether one was started."""
    import time
    from rewind.lock import try_lock
    stamp = os.path.join(home, "run", f".p{project_id}-{key}.starting")
    try:
        if time.time_ns() - os.stat(stamp).st_mtime_ns < ENV_SERVER_STAMP_S * 1e9:
            return False
    except OSError:
        pass
    fd = try_lock(home, env_lock_name(project_id, key))
    if fd is None:
        return False                  # it runs (and did not answer: busy, or still starting)
    os.close(fd)
    try:
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
        os.utime(stamp)
    except OSError:
        pass
    spawn(["-m", "rewind", "watch", "--project", root, "--serve-env", "--idle-minutes", repr(idle_minutes)],
          cwd="/")
    return True


# -- gc by itself ------------------------------------------------------------------------

def touch_stamp(home: str) -> None:
    path = os.path.join(home, STAMP)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    os.utime(path)


def due(home: str, interval_hours: float) -> bool:
    """Whether gc should run by itself; the first call only starts the clock."""
    if interval_hours <= 0:
        return False
    path = os.path.join(home, STAMP)
    try:
        age = clock.wall() - os.stat(path).st_mtime
    except FileNotFoundError:
        try:
            touch_stamp(home)
        except OSError:
            pass
        return False
    # a stamp in the future: made under a clock that was ahead; gc would never be due again
    return age >= interval_hours * 3600 or age < -3600


def spawn_if_due(home: str) -> bool:
    """Start `rewind gc --auto` detached when it is due: never inside the caller's time.
    The stamp is refreshed first, so racing callers start one gc, not many."""
    from rewind import config
    settings = config.load_quietly(None)
    if settings is None or not due(home, settings.gc_interval_hours):
        return False
    touch_stamp(home)
    spawn(["-m", "rewind", "gc", "--auto"], cwd=home)
    return True


def spawn_recompress(home: str) -> None:
    """`repack.recompress` detached and niced: a first snapshot's raw packs rewritten
    compressed, on whatever CPU the session leaves (zstd needs site-packages: no -S), once
    the store is idle (repack.wait_for_idle)."""
    import rewind
    src = os.path.dirname(os.path.dirname(os.path.abspath(rewind.__file__)))
    spawn(["-c", "import os, sys; os.nice(19); sys.path.insert(0, sys.argv[1]); "
           "from rewind.store.repack import recompress; recompress(sys.argv[2], wait=True)", src, home], cwd=home)


def spawn_merge(home: str) -> None:
    """`merge_packs` detached (a hook counted MERGE_AT packs)."""
    import rewind
    src = os.path.dirname(os.path.dirname(os.path.abspath(rewind.__file__)))
    spawn(["-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
           "from rewind.store.repack import merge_packs; merge_packs(sys.argv[2])", src, home], cwd=home)
