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
hook (or command) that takes the project lock to scan (`locked_completing`): it completes
them the same way from a full scan and the events the watcher wrote before it died, and
says that changes from outside after the watcher stopped cannot be told apart. The tree
at a prompt is rebuilt in prompt_tree.py.
"""

from __future__ import annotations

import os
import stat as S
import time
from contextlib import contextmanager

from rewind import clock
from rewind.clock import iso, now_ns
from rewind.lock import LOCK_TIMEOUT_S
from rewind.model import Checkpoint, PathEvent, PendingEdit, SeqEvent
from rewind.project import Project, git_state

SETTLE_POLL_S = 0.2


def first_scan_running(project: Project) -> bool:
    """Whether the project's watcher runs its first scan now: it says so, its heartbeat is
    fresh, and its lock is held (a watcher killed meanwhile holds none)."""
    from rewind.capture.dirty import running
    catalog = project.catalog
    return catalog.baseline_running(project.id, clock.wall_ns()) and \
        running(project.home, catalog, project.id) is not None


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
                from rewind.lock import SCAN_LOCK_TIMEOUT, store_lock
                with store_lock(project.home, timeout=SCAN_LOCK_TIMEOUT):
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


def settle(project: Project, number: int, timeout_s: float, tick=None, wait_only: bool = False) -> Checkpoint | None:
    """Wait until pending checkpoint `number` is complete and return it; None if it is not
    within `timeout_s` (or is no longer pending: never was, or dropped). While the watcher's
    first scan runs, the watcher completes it; otherwise this process does, under the
    project lock (`locked_completing`), unless `wait_only`."""
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
        if not wait_only and not first_scan_running(project):
            try:
                with locked_completing(project, max(0.5, min(left, 5.0))):
                    pass
            except StoreLocked:
                pass
            if catalog.checkpoint(project.id, number) is None and catalog.pending_one(project.id, number):
                time.sleep(min(SETTLE_POLL_S, max(0.005, (deadline - time.monotonic()) / 10)))   # not completed: a failure, logged
            continue
        if tick is not None:
            tick()
        time.sleep(min(SETTLE_POLL_S, max(0.005, left / 10)))


# -- completing ------------------------------------------------------------------------

@contextmanager
def locked_completing(project: Project, timeout: float = LOCK_TIMEOUT_S):
    """The working copy under the project lock (`working_copy.locked`), once the pending
    checkpoints a watcher left (it died during its first scan, or failed to complete them)
    are completed: whoever takes the lock to scan next does it. Failing to complete them is
    logged, and the lock is held all the same."""
    from rewind.capture.working_copy import locked
    with locked(project, timeout) as wc:
        if project.catalog.has_pending(project.id):
            try:
                complete(wc, by="hook")
            except Exception as e:
                from rewind.log import log
                log(f"{project.root}: pending checkpoints not completed", e)
        yield wc


def complete(wc, by: str, first_root: str | None = None, first_done_seq: int | None = None,
             watching_since: int | None = None) -> list[int]:
    """Complete the project's pending checkpoints (under the project lock, `wc`): each gets
    the tree as it was at its prompt, then the tree now is committed as the last scan.
    `by`: "watcher" (right after its first scan: `first_root`, `first_done_seq`; a prompt
    from before `watching_since` came while an earlier watcher ran) or "hook" (a watcher
    died or failed: whoever holds the lock next). Returns their numbers."""
    from rewind import config
    from rewind.capture import dirty as dirtymod
    from rewind.capture.attribution import attribute_segment
    from rewind.capture.prompt_tree import patch_tree, tree_at
    from rewind.capture.working_copy import Commit, Scan
    from rewind.store.treediff import change_rows, diff_trees
    from rewind.structs import replace
    project = wc.project
    catalog, store = project.catalog, project.store
    stopped_ns = None
    if by == "hook":
        row = catalog.watcher(project.id)
        stopped_ns = row.heartbeat_ns if row else None
        catalog.clear_baseline(project.id)      # first: no prompt goes pending on a dead watcher's word
    if not catalog.has_pending(project.id):
        return []
    state = catalog.scan_state(project.id)
    before_root = first_root or state.last_tree
    scanned = wc.scan(Scan.auto())               # the tree now
    if by == "watcher":
        dirtymod.sync(project, timeout=5.0)      # every event until now is in
    # read after the scan: an edit tool's pre-state or a write the scan may have read is here
    pend = catalog.pending(project.id)
    raw_events = catalog.events_seq(project.id, state.consumed_seq or 0)
    raw_edits = catalog.pending_edits(project.id)
    upto = scanned.plan.upto
    load, now_root = scanned.load, scanned.result.root
    events: dict[str, list[SeqEvent]] = {}
    lost = False
    rules_changed_ns = []
    for e in raw_events:
        if e.kind == dirtymod.ANCHOR:
            if e.path in ("", "\0marker"):
                lost = True
            else:
                rules_changed_ns.append(e.ts)
        events.setdefault(e.path, []).append(e)
    edits: dict[str, list[PendingEdit]] = {}
    shells: list[tuple[int, str]] = []
    for edit in raw_edits:
        if edit.kind == "!":
            shells.append((edit.ts, edit.tool or "a shell command"))
        else:
            edits.setdefault(edit.path, []).append(edit)
    writers = [e for e in raw_events if e.seq <= upto]
    trees = []
    for p in pend:
        try:
            patch, unknown = tree_at(load, now_root, first_root, first_done_seq, p.created_ns, events, edits,
                                     before_root)
            root, problem = patch_tree(store, load, now_root, patch), None
        except Exception as e:       # a damaged tree, say: the checkpoint is taken all the same, and says so
            from rewind.log import log
            log(f"{project.root}: checkpoint {p.number} could not be rebuilt as at its prompt", e)
            root, unknown, problem = now_root, [], f"{type(e).__name__}: {e}"
        trees.append((p, root, sorted(set(unknown)), problem))
    store.flush()
    done_ns = clock.wall_ns()

    def note_of(p, problem) -> str | None:
        notes = []
        if problem:
            notes.append(f"could not be rebuilt as at the prompt ({problem}): it holds the tree as of "
                         f"{iso(done_ns)}")
        if by == "hook":
            notes.append("completed by a later hook: the watcher did not complete it (it stopped or failed during "
                         "its first scan" + (f"; last heard of {iso(stopped_ns)}" if stopped_ns else "") + "); a "
                         "change from outside the agent after that is in this checkpoint as if made before the prompt")
        elif watching_since is not None and p.created_ns < watching_since:
            notes.append("the watcher that ran at the prompt stopped before completing it; a change from outside "
                         f"the agent between the prompt and {iso(watching_since)} is in it as if made before")
        if lost:
            notes.append("the watcher lost events during its first scan")
        if any(ts > p.created_ns for ts in rules_changed_ns):
            notes.append("an ignore file changed after the prompt: what it newly ignores or no longer ignores "
                         "is as it is now")
        ran = [cmd for ts, cmd in shells if ts > p.created_ns]
        if ran:
            notes.append(f"a shell command ran before the first scan was in ({ran[0][:80]}): what it changed holds "
                         "its later content")
        return "; ".join(notes) or None

    def events_between(lo: int, hi: int | None) -> dict[str, PathEvent]:
        out: dict[str, PathEvent] = {}
        for e in writers:
            if e.ts > lo and (hi is None or e.ts <= hi) and e.kind != dirtymod.ANCHOR:
                prev = out.get(e.path)
                out[e.path] = PathEvent("c" if (e.kind == "c" or (prev and prev.kind == "c")) else "m", e.ts, e.writer)
        return out

    numbers = []
    last_ns = state.scan_start_ns or 0         # the first scan's start: events from there on
    for p, root, unknown, problem in trees:
        stats = dict(scanned.stats, first_scan={
            "pending_ns": p.created_ns, "completed_ns": done_ns, "by": by, "changed_outside": unknown[:100],
            "changed_outside_count": len(unknown), "events_lost": lost, "note": note_of(p, problem)})
        wc.commit_tree(root, Commit(p.kind, settings=config.load_quietly(project.root), pending=p), load, stats,
                       stamp=p.created_ns, hardlinks=scanned.result.hardlinks,
                       events=events_between(last_ns, p.created_ns) if by == "watcher" or writers else None)
        numbers.append(p.number)
        last_ns = p.created_ns
    # the tree now, as the last scan: its changes since the last prompt are the next checkpoint's
    st = catalog.scan_state(project.id)
    segment = []
    if st.last_tree != now_root:
        segment = change_rows(list(diff_trees(load, st.last_tree, now_root)))
        attribute_segment(project, segment, last_ns, None,
                          events_between(last_ns, None) if writers else None, st.scan_start_ns or None)
    final = replace(scanned, state=replace(scanned.state, last_scan_ns=st.last_scan_ns), segment=segment,
                    prev=catalog.latest(project.id, hidden=True))
    with catalog.transaction():
        catalog.clear_pending_edits(project.id)  # (those of a checkpoint still pending stay)
    wc.commit(final)
    return numbers
