"""A server of another environment's hooks: one watcher per environment that matters.

The project's watcher serves only the hook calls whose environment is its own in what changes
what a hook does (hooks/client.py SAME_ENV and every REWIND_*): a call from an agent started
with another `CLAUDE_CONFIG_DIR` than the shell that started the watcher (a person's terminal,
say) is refused and done by the hook itself, in full, every time. Replacing the watcher would
cut off the other sessions' hooks; so a hook refused for its environment starts (in the
background, once: background.py `spawn_env_server`) a server of its own environment's hooks instead: this process. It runs the
same HookServer as the watcher, on a socket named by its environment's key
(`p<id>-<key>.sock`: the client picks it by its own key), and records each call with the same
code, in its own environment, warm: what a standalone hook pays to start (imports, the catalog,
the store) it pays once. It watches nothing itself: the calls it serves ask the project's
watcher, as any hook does, what changed (capture/dirty.py), and when none runs they scan.

One per project and key (its lock `watch-<id>-<key>.lock`); it exits after its idle time
without a call, on SIGTERM (`rewind watch --stop` stops these too), or when its socket is no
longer its own.
"""

from __future__ import annotations

import os
import signal
import time

from rewind import locations
from rewind.background import env_lock_name
from rewind.lock import try_lock

BEAT_S = 1.0                 # the served count is written this often (as the watcher's heartbeat)


def key_of_this_process() -> str:
    from rewind.envkey import env_key
    return env_key(os.environb).decode()


def serve(root: str, project_id: int, idle_s: float) -> int:
    """Serve this environment's hooks of the project until idle or stopped. 0, or 1 if a
    server of this environment runs already."""
    from rewind.catalog.db import Catalog
    from rewind.watch.serve import HookServer, socket_name
    home = locations.data_dir()
    key = key_of_this_process()
    fd = try_lock(home, env_lock_name(project_id, key))
    if fd is None:
        return 1
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    server = HookServer(home, root, project_id, lambda: bool(stopping), key=key)
    catalog = Catalog(home)
    try:
        server.start()
        path = os.path.join(server.run_dir, socket_name(project_id, key))
        last_call = time.monotonic()
        while not stopping:
            time.sleep(BEAT_S)
            served = server.take_count()
            if served:
                last_call = time.monotonic()
                with catalog.transaction():
                    catalog.count_served_hooks(project_id, served, server.last_ns)
            try:
                ours = os.lstat(path).st_ino == server.ino
            except OSError:
                ours = False
            if not ours or time.monotonic() - last_call >= idle_s:
                break
    finally:
        server.close()
        served = server.take_count()
        if served:
            try:
                with catalog.transaction():
                    catalog.count_served_hooks(project_id, served, server.last_ns)
            except Exception:
                pass
        catalog.close()
        os.close(fd)
    return 0


def servers(home: str, project_id: int) -> list[dict]:
    """The project's servers of other environments that run: their key and pid."""
    from rewind.stalled import holders, _lock_path
    out = []
    prefix = f"watch-{project_id}-"
    try:
        names = os.listdir(os.path.dirname(_lock_path(home, "x")))
    except OSError:
        return out
    for name in sorted(names):
        if name.startswith(prefix) and name.endswith(".lock"):
            for pid in holders(_lock_path(home, name)):
                out.append({"key": name[len(prefix):-5], "pid": pid})
    return out


def stop_all(home: str, project_id: int) -> int:
    """SIGTERM to each of the project's servers of other environments; how many."""
    n = 0
    for s in servers(home, project_id):
        try:
            with open(f"/proc/{s['pid']}/cmdline", "rb") as f:
                if b"--serve-env" not in f.read():
                    continue            # the pid was reused by something else
            os.kill(s["pid"], signal.SIGTERM)
            n += 1
        except OSError:
            pass
    return n
