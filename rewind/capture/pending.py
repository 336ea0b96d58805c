"""The first prompt does not wait for the first snapshot.

The watcher's first scan of a big tree takes seconds to minutes. A prompt that comes
meanwhile is recorded at once as a *pending* checkpoint (its number, its time, its
prompt; no tree yet), and the watcher completes it when its scan is in. What the tree was
at the prompt is then rebuilt from three things the watcher and the hooks kept meanwhile:

- the tree now (a quick scan right after the first one);
- the watcher's events since the first scan began, each with its time;
- what the agent's edit tools found at their targets before they wrote (`pending_edits`,
  recorded by the edit tool's PreToolUse while a checkpoint is pending).

A path nobody touched after the prompt is as it is now. A path an edit tool wrote after
the prompt is what that tool found (the first such tool), unless something else changed it
between the prompt and the tool. A path that changed only after the first scan had read
everything (the watcher answers a cookie right after the scan) is what the scan read. A
shell command cannot change the tree meanwhile: its PreToolUse waits for the scan (it
could write anywhere, before the scan reads it). What is left changed from outside the
agent after the prompt, and its content at the prompt is not known: the checkpoint holds
its later content and says so (`stats["first_scan"]["changed_outside"]`).

A watcher that dies before it completes them leaves the pending checkpoints to the next
hook (or command) that takes the project lock (`working_copy.locked`): it completes them
the same way from a full scan and the events the watcher wrote before it died, and says
that changes from outside after the watcher stopped cannot be told apart.
"""

from __future__ import annotations

import os
import stat as S
import time

from rewind import clock
from rewind.clock import iso, now_ns
from rewind.model import Checkpoint
from rewind.project import Project, git_state

SETTLE_POLL_S = 0.2


def begin(project: Project, kind: str, message: str | None, meta: dict) -> int | None:
    """Record a pending checkpoint if the watcher's first scan runs; its number, or None (the
    caller takes the checkpoint itself, as always)."""
    head, branch = git_state(project.root)
    created = now_ns()
    cp = Checkpoint(project_id=project.id, number=0, kind=kind, created_at=iso(created), created_ns=created,
                    tree="", message=message, git_head=head, git_branch=branch, **meta)
    return project.catalog.begin_pending(cp)


def note_edit(project: Project, rel: str, full: str, data: bytes | None, oid: str | None,
              tool: str | None, session_id: str | None) -> None:
    """While a checkpoint is pending, an edit tool's target as it is before the tool writes
    (`data`/`oid`: the regular file's content, already stored by the caller)."""
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        kind, mode, size = "-", None, None
    except OSError:
        kind, mode, size = "?", None, None
    else:
        mode = S.S_IMODE(st.st_mode)
        if S.S_ISREG(st.st_mode) and oid is not None and data is not None:
            kind, size = "F", len(data)
        elif S.S_ISLNK(st.st_mode):
            try:
                target = os.fsencode(os.readlink(full))
            except OSError:
                kind, size = "?", None
            else:
                from rewind.lock import store_lock
                with store_lock(project.home, timeout=60.0):
                    oid = project.store.put(target)
                    project.store.flush()
                    kind, mode, size = "L", 0o777, len(target)
                    with project.catalog.transaction():
                        project.catalog.add_pending_edit(project.id, rel, kind, mode, oid, size, tool,
                                                         session_id, clock.wall_ns())
                return
        else:
            kind, size = "?", None
    with project.catalog.transaction():
        project.catalog.add_pending_edit(project.id, rel, kind, mode, oid if kind == "F" else None, size, tool,
                                         session_id, clock.wall_ns())


def settle(project: Project, number: int, timeout_s: float, tick=None) -> Checkpoint | None:
    """Wait until pending checkpoint `number` is complete and return it; None if it is not
    within `timeout_s` (or is no longer pending: never was, or dropped). While the watcher's
    first scan runs, the watcher completes it; otherwise this process does, under the
    project lock (`working_copy.locked` completes what is pending)."""
    from rewind.capture.working_copy import locked
    from rewind.errors import StoreLocked
    catalog = project.catalog
    deadline = time.monotonic() + timeout_s
    while True:
        cp = catalog.checkpoint(project.id, number)
        if cp is not None:
            return cp
        if catalog.pending_one(project.id, number) is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not catalog.baseline_running(project.id, clock.wall_ns()):
            try:
                with locked(project, max(0.5, min(left, 5.0))):
                    pass
            except StoreLocked:
                pass
            continue
        if tick is not None:
            tick()
        time.sleep(SETTLE_POLL_S)
