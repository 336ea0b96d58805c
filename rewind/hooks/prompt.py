"""A prompt's checkpoint: scanned now, or pending on the watcher's first scan (`decide`).

The first prompt of a big tree does not wait for the first snapshot: it is recorded at once
as a pending checkpoint the watcher's first scan completes (capture/pending.py). Which way
a prompt goes is decided in one place, `decide`, from the facts `record` gathers.
"""

from __future__ import annotations

import time

from rewind import clock
from rewind.errors import StoreLocked
from rewind.hooks.base import Event
from rewind.hooks.tools import SCAN_LOCK_TIMEOUT, close_windows, first_scan_running, scan
from rewind.project import Project
from rewind.structs import dataclass, replace

WATCHER_START_WAIT_S = 10.0   # a prompt waits this long for a starting watcher to begin its first scan
WATCHER_APPEAR_S = 3.0        # (and this long for the watcher's process to take its lock)
PENDING_GRACE_S = 0.25        # and this long for a tree not known to be big to be completed at once,
YOUNG_SCAN_S = 1.0            # when its first scan began less than this ago
BIG_TREE = 5000               # files at the last scan: a tree known to be big
AFTER_EDIT_ONLY = ("cursor",)

SCAN_NOW = "scan now"
PENDING = "pending"
PENDING_GRACE = "pending, completed at once if it can be"


@dataclass(frozen=True)
class PromptFacts:
    after_edit_only: bool          # (1) the agent reports an edit only after it
    watcher_on: bool               # (2) a watcher runs or was just started for the project
    first_scan_running: bool       # (3) the watcher's first scan runs now
    first_scan_young: bool         # (4) it began less than YOUNG_SCAN_S ago (False: not looked up yet)
    tree_big: bool | None          # (5) the last scan saw BIG_TREE files or more (None: never scanned)
    lock_busy: bool = False        # (6) a try at the project lock timed out (the prompt is retrying)


def decide(facts: PromptFacts) -> str:
    """How a prompt's checkpoint is made: SCAN_NOW, PENDING or PENDING_GRACE.

    (1) after_edit_only: an agent that reports an edit only after it (Cursor) leaves nothing
        to put back into a pending checkpoint: its prompts always scan now (waiting for the
        first scan, behind the project lock).
    (2) watcher_on: `gather` waits (WATCHER_START_WAIT_S at most) for a starting watcher to
        begin its first scan: a second full scan is saved, and the prompt need not wait for
        the first. Without a watcher there is no first scan to pend on.
    (3) first_scan_running: the watcher's first scan runs: the prompt is recorded now as a
        pending checkpoint the scan completes. Else it scans now.
    (4) first_scan_young and (5) tree_big, looked up once the pending checkpoint has begun:
        a first scan begun less than YOUNG_SCAN_S ago on a tree not known to be big is
        likely done within PENDING_GRACE_S: the prompt waits that long for it
        (PENDING_GRACE), and usually says "checkpoint N", not pending.
    (6) lock_busy: a scan now found the project lock taken (each try is short): the facts
        are gathered again (without waiting for a watcher) and a first scan that began
        meanwhile takes the prompt as pending.
    A pending checkpoint that cannot begin (the first scan ended meanwhile) scans now.
    """
    if facts.after_edit_only or not facts.first_scan_running:
        return SCAN_NOW
    if facts.first_scan_young and not facts.tree_big:
        return PENDING_GRACE
    return PENDING


def gather(project: Project, ev: Event, watcher_on: bool, lock_busy: bool = False) -> PromptFacts:
    """The facts `decide` takes before a pending checkpoint begins, each looked up only where
    it can change the decision; (4) and (5) are looked up once one has begun (`_pend`)."""
    after_edit_only = ev.agent in AFTER_EDIT_ONLY
    running = not after_edit_only and _first_scan_running(project, wait_for_start=watcher_on and not lock_busy)
    return PromptFacts(after_edit_only, watcher_on, running, False, None, lock_busy)


def record(project: Project, ev: Event, settings, watcher_on: bool) -> str:
    """Make the prompt's checkpoint, the way `decide` says. Returns the hook's note."""
    meta = {"agent": ev.agent, "session_id": ev.session_id, "prompt_id": ev.prompt_id,
            "prompt_source": ev.prompt_source, "transcript_path": ev.transcript_path}
    if ev.task:
        ev.prompt, meta["folds_under"] = task_label(project, ev)
    close_windows(project, ev)
    note = _pend(project, ev, meta, gather(project, ev, watcher_on))
    if note:
        return note
    deadline = time.monotonic() + SCAN_LOCK_TIMEOUT
    while True:
        try:
            # short tries: a first scan that begins meanwhile takes the prompt as pending
            cp, _ = scan(project, dict(kind="prompt", message=ev.prompt, meta=meta, settings=settings),
                         timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return f"checkpoint {cp.number}"
        except StoreLocked:
            note = _pend(project, ev, meta, gather(project, ev, watcher_on, lock_busy=True))
            if note:
                return note
            if time.monotonic() >= deadline:
                raise


def task_label(project: Project, ev: Event) -> tuple[str, int | None]:
    """A task notification's checkpoint: its message (what ended, and the command), and the
    prompt it folds under, the one that started the task (None: not known)."""
    task = ev.task or {}
    w = project.catalog.window_of_tool(project.id, ev.session_id, task["tool_use_id"]) \
        if task.get("tool_use_id") else None
    what = task.get("summary") or f"background task {task.get('task_id') or '?'} {task.get('status') or 'ended'}"
    if w is not None and w.command:
        what += f": {' '.join(w.command.split())[:200]}"
    return what, project.catalog.prompt_at(project.id, ev.session_id, w.opened_ns) if w is not None else None


def _pend(project: Project, ev: Event, meta: dict, facts: PromptFacts) -> str | None:
    """A pending checkpoint, if `decide` says so (capture/pending.py). None if the prompt is
    to scan now, or the first scan ended meanwhile."""
    if decide(facts) == SCAN_NOW:
        return None
    from rewind.capture import pending
    number = pending.begin(project, "prompt", ev.prompt, meta)
    if number is None:
        return None
    since = project.catalog.baseline_since(project.id) or 0
    young = clock.wall_ns() - since < YOUNG_SCAN_S * 1e9     # else not a small tree
    facts = replace(facts, first_scan_young=young, tree_big=tree_big(project) if young else None)
    if decide(facts) == PENDING_GRACE and pending.settle(project, number, PENDING_GRACE_S, wait_only=True):
        return f"checkpoint {number}"     # a small tree's first scan was in right after
    return f"checkpoint {number} pending"


def _first_scan_running(project: Project, wait_for_start: bool = False) -> bool:
    """Whether the watcher's first scan runs now (pending.py). With `wait_for_start`, a
    watcher that is starting (its first scan not begun yet) is waited for a little."""
    catalog = project.catalog
    if first_scan_running(project):
        return True
    if not wait_for_start:
        return False
    from rewind.capture.dirty import running
    now = time.monotonic()
    deadline, appear_by = now + WATCHER_START_WAIT_S, now + WATCHER_APPEAR_S
    sized = False
    while time.monotonic() < deadline:
        if first_scan_running(project):
            return True
        row = running(project.home, catalog, project.id)
        if row is not None and row.ready_ns is not None and \
                catalog.scan_state(project.id).scan_start_ns >= row.ready_ns:
            return False                 # its first scan is in (the usual case: one look)
        if row is None and time.monotonic() > appear_by:
            return False                 # no watcher came
        if not sized:
            sized = True
            if tree_big(project) is False:
                return False             # a small tree: scanned sooner than a watcher starts
        time.sleep(0.05)
    return False


def tree_big(project: Project) -> bool | None:
    """Whether the tree had BIG_TREE files or more at the last scan (None: never scanned). A
    prompt waits a little for a starting watcher to begin the first scan of a tree not known
    to be small (a second full scan is saved, and the prompt need not wait for the first),
    and a little for it to complete one not known to be big."""
    import json
    state = project.catalog.scan_state(project.id)
    if not state.last_tree:
        return None
    try:
        return json.loads(state.last_stats or "{}").get("files", 0) >= BIG_TREE
    except (ValueError, AttributeError):
        return None
