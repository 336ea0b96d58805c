"""Could an open shell window's command have made a change? Linux /proc, unprivileged.

inotify does not say who wrote a file, and an unprivileged process cannot learn it. The
rule (README, "What it cannot tell"): a change inside an open shell window is the
command's, unless rewind can *show* that the command could not have made it. The one
thing it can show is that no process of the command existed yet (the agent waits for
the person's permission before it starts the command). Everything else, a command that
lives a few milliseconds, a shell started through a pty or an intermediate process, a
command reaped before the first look, lacks that proof and stays the command's.

The proof is an account of process ids, not of process start times. The hook that opens a window writes
down the namespace's last handed-out pid (`ns_last_pid`) and its own process chain. Every
pid handed out after that mark belongs to a process that started after the window
opened; the command, if it ran, is one of them. At each look the watcher walks the pids
handed out since the previous look:
- alive and not descended from the agent (nor from the hook that opened the window): not
  the command, and it never will be (a process only ever moves away from its ancestors);
- alive and descended from the agent: the command may have started;
- a thread (its /proc entry exists, unlisted, and names another process as its thread
  group): belongs to a process accounted for already;
- unlisted but a process after all (its own thread group): it was still being created when
  the listing was read (the kernel hands out the pid before it lists the process); it is
  accounted for as if listed, never taken for a thread;
- gone: a process born and ended unseen; it may have been the command.
A window stays "waiting" only while every pid is accounted for as "not the command", its
agent is still alive (a hook run through a short-lived wrapper gives no agent to watch),
and the agent had no shell of its own when the window opened (a persistent shell can run
`echo x > f` without a new process). A change read by the watcher before a look that still
finds the window waiting happened before any process of the command existed: not the
command's. Once not waiting, a window stays so until it closes.

A watcher that reads its events late (a busy machine: its reading thread starved while
the command starts) reads a change made before such a look only after a later look found
the command; then the file's own ctime says whether it changed before that look
(filetimes.py).

No process start times are compared: /proc's process start times count clock ticks from a boot
time given in whole seconds, so a command that started right after its window could look
up to a second older than it (seen here: every shell change of a Gemini session came out
`external`).
"""

from __future__ import annotations

import os
import threading
import time

from rewind.capture.bgtree import activity_between, tree_signature
from rewind.capture.filetimes import TICK_NS, changed_ns, kernel_wall_ns, made_before
from rewind.capture.proc_read import _PID_MAX, _comm, _ppid, _tgid, last_pid
from rewind.model import ShellWindow

SHELLS = {"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox"}
MAX_GAP = 4096                   # more pids than this since the last look: no proof


def hook_chain(hook_pid: int | None = None) -> tuple[int | None, list[int]]:
    """For a hook: (the agent that ran it, the hook's process and the shells between it and
    the agent). The agent is the nearest ancestor that is not a shell. `hook_pid`: the hook's
    process when it is not this one (a call the watcher serves: its client's)."""
    if hook_pid is None or hook_pid == os.getpid():
        chain, pid = [os.getpid()], os.getppid()
    else:
        chain, pid = [hook_pid], _ppid(hook_pid) or 0
    for _ in range(8):
        if pid <= 1:
            return None, chain
        if _comm(pid) not in SHELLS:
            return pid, chain
        chain.append(pid)
        pid = _ppid(pid) or 0
    return None, chain


def agent_pid() -> int | None:
    return hook_chain()[0]


def ancestors(pid: int | None = None, limit: int = 256) -> list[int]:
    """The parent, grandparent, ... of `pid` (this process by default), up to init; empty
    where /proc cannot be read. A process that was re-parented (setsid and a double fork)
    has lost its true ancestors: history/guard.py says what protects the history then."""
    out: list[int] = []
    cur = os.getppid() if pid is None else (_ppid(pid) or 0)
    while cur > 1 and len(out) < limit and cur not in out:
        out.append(cur)
        cur = _ppid(cur) or 0
    return out


class _Window:
    __slots__ = ("id", "agent", "mark", "hooks", "waiting", "why", "first", "waited", "bg", "looks")

    def __init__(self, wid: int, agent: int | None, mark: int | None, hooks: set[int]):
        self.id, self.agent, self.mark, self.hooks = wid, agent, mark, hooks
        self.waiting = agent is not None and mark is not None
        self.why = "" if self.waiting else "no agent process or pid mark"
        self.first = True
        # (kernel wall clock, monotonic clock) at the start of the last look that found it
        # waiting: a file last changed before that is not its command's
        self.waited: tuple[int, int] | None = None
        self.bg: str | None = None               # gone on in the background: its processes
        self.looks: list[tuple[int | None, str | None]] = []    # and the looks at their tree

    def background(self, roots: str) -> None:
        self.bg, self.waiting, self.why = roots, False, "in the background"
        self.look()

    def look(self) -> None:
        self.looks.append((kernel_wall_ns(), tree_signature(self.bg)))
        if len(self.looks) > 64:
            del self.looks[:-48]


class Commands:
    """The open shell windows in the watcher's event order, and for each whether its
    command provably has not started yet (see the module docstring)."""

    def __init__(self, root: str | None = None):
        self.lock = threading.Lock()
        self.root = root                         # the project: where explaining()'s paths are
        self.windows: dict[int, _Window] = {}
        self.available = os.path.isdir("/proc/self") and last_pid() is not None

    @property
    def active(self) -> bool:
        """Some window still waits: looks keep its pid account current."""
        return any(w.waiting for w in self.windows.values())

    @property
    def background(self) -> bool:
        """Some command runs in the background: looks at its tree keep its account short."""
        return any(w.bg is not None for w in self.windows.values())

    def update(self, rows: list[ShellWindow], drop: set[int]) -> None:
        """Windows join; those in `drop` leave. A window already known keeps its account,
        and moves to the background when its row says its command went there."""
        with self.lock:
            for wid in drop:
                self.windows.pop(wid, None)
            for w in rows:
                if w.id not in self.windows and w.id not in drop:
                    pids = {int(p) for p in (w.hook_pids or "").split(",") if p.isdigit()}
                    self.windows[w.id] = _Window(w.id, w.agent_pid, w.pid_mark if self.available else None, pids)
                known = self.windows.get(w.id)
                if known is not None and known.bg is None and w.bg_pids is not None:
                    known.background(w.bg_pids)

    def explaining(self, rel: str | None = None, moved_in: bool = False) -> str | None:
        """For a change to `rel` (under the root) the watcher has just read: the windows
        whose command may have made it, as "w:ID,ID" ("w:" when windows are open but none
        of their commands had started when it was made), or None when no shell window is
        open. Without `rel`, only the pid account speaks; `moved_in`: `rel` is where a
        rename put something."""
        with self.lock:
            if not self.windows:
                return None
            if any(w.waiting for w in self.windows.values()):
                self._look()
            ids = [w.id for w in self.windows.values() if not w.waiting and w.bg is None]
            if ids and rel is not None and self.root is not None:
                ids = self._made_since(ids, rel, moved_in)
            bg = [w for w in self.windows.values() if w.bg is not None]
            untied = False
            if bg:
                changed = changed_ns(self.root, rel, moved_in) if rel is not None and self.root else None
                for w in bg:
                    last = w.looks[-1][0] if w.looks else None
                    if changed is None or last is None or last <= changed + TICK_NS:
                        w.look()                 # (a look after the change: a flood of them shares one)
                    if activity_between(w.looks, changed):
                        ids.append(w.id)
                    else:
                        untied = True
            # "/b": a command ran in the background whose processes did nothing around it
            return "w:" + ",".join(map(str, sorted(ids))) + ("/b" if untied else "")

    def _made_since(self, ids: list[int], rel: str, moved_in: bool) -> list[int]:
        """Of windows `ids` (not waiting), those whose command may have made `rel`'s last
        change: all but those a look found waiting after it (see the module docstring)."""
        looked = [self.windows[i] for i in ids if self.windows[i].waited is not None]
        if not looked:
            return ids
        changed = changed_ns(self.root, rel, moved_in)
        if changed is None:
            return ids
        now = (kernel_wall_ns(), time.monotonic_ns())
        before = {w.id for w in looked if made_before(changed, w.waited, now)}
        return [i for i in ids if i not in before]

    def poll(self) -> None:
        """A look between changes: keeps the account of a waiting window short."""
        with self.lock:
            if any(w.waiting for w in self.windows.values()):
                self._look()

    def look_background(self) -> None:
        """A look at each background command's tree between changes: a change is then placed
        between two looks close to it."""
        with self.lock:
            for w in self.windows.values():
                if w.bg is not None:
                    w.look()

    # -- inside the lock ---------------------------------------------------------------
    def _look(self) -> None:
        # First the mark, then the listing. Not every pid up to the mark is listed: a
        # process still being created has its pid (the mark counts it) but is neither
        # listed nor found under /proc until the kernel attaches it, which a busy machine
        # can delay; _account looks such a pid up again and never takes it for a thread.
        # The clocks come before the mark: a process of the command has a pid past the mark,
        # so it started after them.
        started = (kernel_wall_ns(), time.monotonic_ns())
        last = last_pid()
        try:
            listed = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        except OSError:
            listed = None
        parents: dict[int, int | None] = {}
        for w in self.windows.values():
            if w.waiting:
                why = self._account(w, last, listed, parents)
                if why:
                    w.waiting, w.why = False, why
                elif started[0] is not None:
                    w.waited = started

    def _account(self, w: _Window, last: int | None, listed: set[int] | None,
                 parents: dict[int, int | None]) -> str:
        """Why window `w` is no longer provably waiting, or "" (and its mark moved on)."""
        if last is None or listed is None:
            return "/proc cannot be read"
        if w.agent not in listed:
            return "its agent process is gone"
        if w.first:
            w.first = False
            shell = self._agents_shell(w, listed, parents)
            if shell:
                return f"the agent has a shell of its own ({shell})"
        gap = (last - w.mark) % _PID_MAX
        if gap > MAX_GAP:
            return f"{gap} pids handed out since the last look"
        unseen = ""
        for k in range(1, gap + 1):
            p = (w.mark + k) % _PID_MAX
            if p not in listed:
                tgid = _tgid(p)
                if tgid is None:
                    # Gone (or not yet attached): no proof. Go on all the same, so that the
                    # reason names the command's own process when this look saw it.
                    unseen = unseen or f"process {p} came and went unseen"
                    continue
                if tgid != p:
                    continue             # a thread of a process accounted for already
                # A process the listing missed: it was being created when /proc was read.
                # Had it been taken for a thread, the mark would have moved past it unlooked
                # at, and if it was the command, the window would have stayed "waiting" and
                # the command's changes would have come out `external`.
            whose = self._descends(p, w.agent, w.hooks, parents)
            if whose == "agent":
                return f"process {p} descends from the agent"
            if whose == "gone":          # no proof either, but no sign of the agent
                while parents.get(p) is not None:
                    p = parents[p]       # the one that vanished: p or a parent of it
                unseen = unseen or f"process {p} came and went unseen"
        if unseen:
            return unseen
        w.mark = last
        return ""

    def _descends(self, pid: int, agent: int, hooks: set[int], parents: dict[int, int | None]) -> str:
        """"agent" if `pid` descends from the agent (other than through the hook that opened
        the window), "hook" if through that hook, "" if from neither, "gone" if it or a
        parent vanished before the walk was done (it may have been anything)."""
        for _ in range(64):
            if pid in hooks:
                return "hook"
            if pid == agent:
                return "agent"
            if pid <= 1:
                return ""
            if pid not in parents:
                parents[pid] = _ppid(pid)
            nxt = parents[pid]
            if nxt is None:
                return "gone"
            pid = nxt
        return "agent"

    def _agents_shell(self, w: _Window, listed: set[int], parents: dict[int, int | None]) -> str:
        """A live shell below the agent that is not the opening hook's own: it could run a
        command without starting a process."""
        for p in listed:
            if p == w.agent:
                continue
            if self._descends(p, w.agent, w.hooks, parents) not in ("agent", "gone"):
                continue
            comm = _comm(p)
            if comm in SHELLS:
                return f"{comm} {p}"
        return ""

    def why(self) -> dict[int, str]:
        with self.lock:
            return {w.id: ("waiting" if w.waiting else w.why) for w in self.windows.values()}
