"""Reading a process's facts from Linux /proc, unprivileged: each reader returns None (or an
empty value) for a process that is gone or cannot be read, never raises. The pid account
(procs.py) and the background commands' trees (bgtree.py) are built on them."""

from __future__ import annotations

import os


def _fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses):
    field 3 of proc(5) is [0]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def _ppid(pid: int) -> int | None:
    fields = _fields(pid)
    return int(fields[1]) if fields else None


def _tgid(pid: int) -> int | None:
    """The thread group (the process) that task `pid` belongs to; None if it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def last_pid() -> int | None:
    """The pid the kernel handed out last in this pid namespace (threads included)."""
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


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _starttime(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of proc(5)): with the
    pid, it names one process, not a later one given the same pid. None for a zombie (it
    has ended; its parent has not reaped it yet) and a process that is gone."""
    fields = _fields(pid)
    return fields[19].decode() if fields and len(fields) > 19 and fields[0] != b"Z" else None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _syscw(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            for line in f:
                if line.startswith(b"syscw:"):
                    return line.split()[1].decode()
    except (OSError, IndexError):
        pass
    return "?"
