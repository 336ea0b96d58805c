"""Which processes are the agent's shell command: Linux /proc, unprivileged.

inotify does not say who wrote a file, and an unprivileged process cannot learn it. What
it can learn is whether the command of an open shell window is running at all: a process
that descends from the agent and started after the window opened. A change made while no
such process runs (the command waits for permission, or has ended) is not the command's.

Polling can miss a command that starts and ends between two looks (`echo x > f` lives a
few milliseconds). So "no command ran" is said only with evidence: every pid the kernel
handed out since the last look (the namespace's `ns_last_pid`) was seen, or else the agent
did not reap a child in that time (its children's counters in /proc/PID/stat did not
move). A process that was born and reaped unseen while the agent's counters moved counts
as the command having just run.
"""

from __future__ import annotations

import os
import threading
import time

SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox"}
START_SLACK_NS = 30_000_000      # /proc start times have clock-tick (10 ms) resolution
RECENT_NS = 250_000_000          # a command seen alive this recently still counts as running
                                 # (covers the watcher's own lag between a write and its event)
LATE_NS = 200_000_000            # a window first seen this long after it opened: its command
                                 # may have run unseen before the first look


def _fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses):
    field 3 of proc(5) is [0]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time in ns since the epoch) of a process, or None."""
    fields = _fields(pid)
    if fields is None:
        return None
    return int(fields[1]), _BOOT_NS + int(fields[19]) * _TICK_NS


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


def _reaped(pid: int) -> tuple[int, ...] | None:
    """What a process's reaped children cost it (cminflt, cmajflt, cutime, cstime): it moves
    whenever the process waits for a child that has ended, and only then."""
    fields = _fields(pid)
    if fields is None:
        return None
    return int(fields[8]), int(fields[10]), int(fields[13]), int(fields[14])


def _last_pid() -> int | None:
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1 << 22


_PID_MAX = _pid_max()
MAX_GAP = 4096                   # more pids than this since the last look: assume anything


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
        self.last_pid: int | None = None         # ns_last_pid at the last look
        self.reaped: dict[int, tuple | None] = {}  # agent pid -> its reaped children's counters
        self.unseen = 0                          # looks that found a command may have run unseen
        self.available = os.path.isdir("/proc/self")

    @property
    def active(self) -> bool:
        return bool(self.windows) and self.available

    def set_windows(self, windows: list[tuple[int, int, int]]) -> None:
        with self.lock:
            self.windows = [w for w in windows if w[1]]
            if not self.windows:                 # no look until the next window: start afresh
                self.last_pid, self.reaped = None, {}
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
            last = _last_pid()
            try:
                pids = {int(n) for n in os.listdir("/proc") if n.isdigit()}
            except OSError:
                return False
            unseen = self._unseen(pids, last)
            for gone in set(self.parent) - pids:
                self.parent.pop(gone, None)
                self.start.pop(gone, None)
            new = [p for p in pids if p not in self.parent]
            for p in new:
                st = _stat(p)
                if st is not None:
                    self.parent[p], self.start[p] = st
            now = time.time_ns()
            alive = False
            moved = False
            for agent in {w[1] for w in self.windows}:
                before, self.reaped[agent] = self.reaped.get(agent), _reaped(agent)
                moved = moved or (before is not None and before != self.reaped[agent])
            for wid, agent, opened in self.windows:
                mine = self.fresh.setdefault(wid, set())
                first = wid not in self.checked
                candidates = list(self.parent) if first else new
                self.checked.add(wid)
                if first and now - opened > LATE_NS:
                    alive = True                 # found late: its command may have come and gone
                for p in candidates:
                    if p in self.start and self.start[p] >= opened - START_SLACK_NS \
                            and self._descends(p, agent) and not _is_hook(p):
                        mine.add(p)
                mine &= pids
                alive = alive or bool(mine)
            if unseen and moved and not alive:
                self.unseen += 1
                alive = True                     # a process came and went, reaped by the agent
            if alive:
                self.last_alive_ns = now
            self.last_poll_ns, self.alive_now = now, alive
            return alive

    def _unseen(self, pids: set[int], last: int | None) -> bool:
        """Was a pid handed out since the last look that is gone already (not a live thread)?"""
        before, self.last_pid = self.last_pid, last
        if before is None or last is None:
            return False                         # the first look: a baseline, nothing to judge
        gap = (last - before) % _PID_MAX
        if gap > MAX_GAP:
            return True
        for k in range(1, gap + 1):
            p = (before + k) % _PID_MAX
            if p not in pids and not os.path.exists(f"/proc/{p}"):
                return True
        return False

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
