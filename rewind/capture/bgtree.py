"""A shell command the agent runs in the background (Claude Code's `run_in_background`: a
dev server, a build, a watcher) gets its Post event as soon as it has started; its window
stays open until its task ends (hooks/tools.py). While it runs, a change is its command's
only when its processes did something around it: their tree is looked at (which processes
live, and how many write calls each has made, /proc/PID/io `syscw`), and a change made
between two looks that found the same tree doing nothing is not theirs. An unlink, a rename
or an open that truncates without writing shows only when it comes with a new process (rm,
mv): a shell builtin's `: > f` does not show, and neither does a process that left the
tree (setsid and a double fork). A command that keeps writing (a server's log) explains
every change made while it writes: those read `bash`, with its command.
"""

from __future__ import annotations

import os

from rewind.capture.filetimes import TICK_NS
from rewind.capture.proc_read import _PID_MAX, _children, _cmdline, _starttime, _syscw, last_pid


def _needle(command: str | None) -> bytes:
    """A piece of the command that its shell's command line holds however the agent quoted
    it: the longest run without quotes or backslashes, at most 40 bytes."""
    runs = [r.strip() for r in (command or "").replace('"', "'").replace("\\", "'").replace("\n", "'").split("'")]
    best = max(runs, key=len, default="")
    return best[:40].encode() if len(best) >= 4 else b""


def background_roots(agent: int | None, mark: int | None, hooks: set[int], command: str | None) -> str:
    """The processes a shell command left running when its Post event says it goes on in the
    background, as "PID@START,...": the agent's children started after its window's pid mark
    (not the hook's own chain), those whose command line holds the command when any does
    (another hook of the same event is the agent's child too). "" when none can be named."""
    if agent is None or not os.path.isdir(f"/proc/{agent}"):
        return ""
    last = last_pid()
    kids = [p for p in _children(agent) if p not in hooks]
    if mark is not None and last is not None:
        span = (last - mark) % _PID_MAX
        kids = [p for p in kids if 0 < (p - mark) % _PID_MAX <= span]
    needle = _needle(command)
    matched = [p for p in kids if needle and needle in _cmdline(p)]
    out = []
    for p in matched or kids:
        start = _starttime(p)
        if start is not None:
            out.append(f"{p}@{start}")
    return ",".join(out)


def tree_signature(roots: str | None) -> str | None:
    """What the processes of a background command's tree are doing: each live one (the roots
    still alive as the same processes, and everything below them) with its count of write
    calls. "" when none lives; None when /proc cannot say or no process was named."""
    if not roots or not os.path.isdir("/proc/self"):
        return None
    stack = []
    for item in roots.split(","):
        pid, _, start = item.partition("@")
        if pid.isdigit() and _starttime(int(pid)) == start:
            stack.append(int(pid))
    roots_alive = set(stack)
    parts, seen = [], set()
    while stack and len(seen) < 512:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if p not in roots_alive and _starttime(p) is None:
            continue                             # ended (a zombie) or gone since
        parts.append(f"{p}:{_syscw(p)}")
        stack += _children(p)
    return ";".join(sorted(parts))


def activity_between(looks: list[tuple[int | None, str | None]], changed: int | None) -> bool:
    """Whether a background command's tree did something around a change stamped `changed`
    (a ctime; None: not known): the looks (kernel wall clock, signature), oldest first and the
    last one now, from the last one surely before the change on, do not all agree. A look
    that could not read the tree (None) proves nothing: it counts as activity."""
    start = max(0, len(looks) - 3)
    if changed is not None:
        start = 0
        for i, (k, _) in enumerate(looks):
            if k is not None and k + TICK_NS < changed:
                start = i
    sigs = {sig for _, sig in looks[start:]}
    return None in sigs or len(sigs) > 1
