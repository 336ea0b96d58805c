"""Which processes are the agent's shell command: Linux /proc, unprivileged.

inotify does not say who wrote a file, and an unprivileged process cannot learn it. What
it can learn is whether the command of an open shell window is running at all: a process
that descends from the agent and started after the window opened. A change made while no
such process runs (the command waits for permission, or has ended) is not the command's.
"""

from __future__ import annotations

import os
import threading
import time

SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox"}
START_SLACK_NS = 30_000_000      # /proc start times have clock-tick (10 ms) resolution
RECENT_NS = 60_000_000           # a command seen alive this recently still counts as running


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time in ns since the epoch) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    ppid, start_ticks = int(fields[1]), int(fields[19])
    return ppid, _BOOT_NS + start_ticks * _TICK_NS


def _boot_ns() -> int:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return int(line.split()[1]) * 10**9
    except OSError:
        pass
    return 0


_BOOT_NS = _boot_ns()
_TICK_NS = 10**9 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def agent_pid() -> int | None:
    """For a hook: the agent that ran it, i.e. the nearest ancestor that is not a shell."""
    pid = os.getppid()
    for _ in range(8):
        if pid <= 1:
            return None
        if _comm(pid) not in SHELLS:
            return pid
        st = _stat(pid)
        if st is None:
            return None
        pid = st[0]
    return None


def _is_hook(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return b"rewind" in cmd and b"hook" in cmd


class Commands:
    """Tracks, for open shell windows, whether their command's processes are running.
    `windows`: [(window id, agent pid, opened_ns)], refreshed by the caller."""

    def __init__(self):
        self.lock = threading.Lock()
        self.windows: list[tuple[int, int, int]] = []
        self.parent: dict[int, int] = {}
        self.start: dict[int, int] = {}
        self.fresh: dict[int, set[int]] = {}     # window id -> its command's pids
        self.last_alive_ns = 0
        self.last_poll_ns = 0
        self.alive_now = False
        self.checked: set[int] = set()           # windows whose candidates included every pid
        self.available = os.path.isdir("/proc/self")

    @property
    def active(self) -> bool:
        return bool(self.windows) and self.available

    def set_windows(self, windows: list[tuple[int, int, int]]) -> None:
        with self.lock:
            self.windows = [w for w in windows if w[1]]
            keep = {w[0] for w in self.windows}
            self.fresh = {k: v for k, v in self.fresh.items() if k in keep}
            self.checked &= keep

    def _descends(self, pid: int, ancestor: int) -> bool:
        for _ in range(64):
            pid = self.parent.get(pid, 0)
            if pid == ancestor:
                return True
            if pid <= 1:
                return False
        return False

    def poll(self) -> bool:
        """Look at /proc once; True if some window's command runs now."""
        if not self.active:
            return False
        with self.lock:
            try:
                pids = {int(n) for n in os.listdir("/proc") if n.isdigit()}
            except OSError:
                return False
            for gone in set(self.parent) - pids:
                self.parent.pop(gone, None)
                self.start.pop(gone, None)
            new = [p for p in pids if p not in self.parent]
            for p in new:
                st = _stat(p)
                if st is not None:
                    self.parent[p], self.start[p] = st
            alive = False
            for wid, agent, opened in self.windows:
                mine = self.fresh.setdefault(wid, set())
                candidates = new if wid in self.checked else list(self.parent)
                self.checked.add(wid)
                for p in candidates:
                    if p in self.start and self.start[p] >= opened - START_SLACK_NS \
                            and self._descends(p, agent) and not _is_hook(p):
                        mine.add(p)
                mine &= pids
                alive = alive or bool(mine)
            now = time.time_ns()
            if alive:
                self.last_alive_ns = now
            self.last_poll_ns, self.alive_now = now, alive
            return alive

    def writer_hint(self) -> str | None:
        """For an event now: "cmd" if a window's command runs (or just ran), "none" if a
        shell window is open but no process of its command runs, None without a window."""
        if not self.active:
            return None
        now = time.time_ns()
        alive = self.alive_now if now - self.last_poll_ns < 3_000_000 else self.poll()
        if alive or now - self.last_alive_ns <= RECENT_NS:
            return "cmd"
        return "none"
