"""Restore, the protocol: plan first, then take a safety checkpoint, verify, and apply.

`restore` scans the tree (storing it), plans from that scan (`restore_plan`), verifies
every object the plan needs and what it overwrites, commits the safety checkpoint of the
scanned tree durably, then applies the plan (`restore_apply`) and records what it wrote.
`undo` is one more restore: from the safety checkpoint of the newest rewind not undone.
A restore that stops half-way says exactly what state the tree is in (`_failed`).
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

from rewind import clock
from rewind.capture.pending import locked_completing
from rewind.capture.working_copy import Commit, Scan
from rewind.clock import iso_now
from rewind.errors import CheckpointNotFound, DamagedCopy, RestoreStopped, RewindError, UndoUnavailable
from rewind.fsutil import atomic_write, ensure_private_dir, read_fd
from rewind.history.restore_apply import Dirs, apply_plan, expectations, journal_path, recover, split_path
from rewind.history.restore_plan import RestorePlan, held_by, plan_restore
from rewind.lock import LOCK_TIMEOUT_S
from rewind.model import Checkpoint, Source
from rewind.project import Project
from rewind.store.tree import FILE, LINK, serialize

_MEMORY_BUDGET = 256 * 1024 * 1024


class RestoreResult(NamedTuple):
    """What a restore did: its safety checkpoint (None when `skip_if_empty` found nothing to
    do), the plan it applied (with what it left, `plan.left` and `plan.unmet`), and how many
    operations it carried out."""
    safety: Checkpoint | None
    plan: RestorePlan
    done: int


class UndoResult(NamedTuple):
    """What an undo did: the checkpoint the undone rewind went to, and the restore that put
    back what it overwrote (`safety` None when the rewind changed nothing)."""
    rewound_to: int
    safety: Checkpoint | None
    plan: RestorePlan
    done: int


def restore(project: Project, target: Checkpoint, paths: list[str] | None = None,
            is_undo: bool = False, lock_timeout: float = LOCK_TIMEOUT_S, progress=None, before_apply=None,
            skip_if_empty: bool = False, cross_mounts: bool = False, revert=None) -> RestoreResult:
    """Scan the tree (storing it), plan from that scan, take the safety checkpoint of it,
    verify every object, apply. `before_apply(plan, scan)` sees the plan before anything is
    written (it may raise to stop); with `skip_if_empty` an empty plan takes no checkpoint
    (its result's `safety` is None).
    The scan reads every path the target holds, even one today's ignore rules skip: what
    the restore overwrites there is in the safety checkpoint too; the next scan (right after
    the restore) lists those paths again under today's rules. What the plan leaves that the
    target holds is `plan.unmet` (the caller names it and fails)."""
    with locked_completing(project, lock_timeout) as wc:
        recover(project)
        if project.catalog.checkpoint(project.id, target.number) is None:
            raise CheckpointNotFound(f"checkpoint {target.number} was dropped while this rewind waited",
                                     hint="the ring or the retention removed it; `rewind list` shows what is left")
        scan_ns = clock.wall_ns()
        scanned = wc.scan(Scan.full(progress, held=held_by(project, target, paths)))
        wc.commit(scanned)
        current = scanned.result
        # paths read despite today's rules are in the scan's tree only for the safety
        # checkpoint: however this ends, the next scan lists them again under the rules
        relist = {path: "m" for path in current.forced}
        try:
            if revert is not None:
                reverted = revert(current)
                # limited to the paths it changes (none: nothing, never "every path")
                plan = (plan_restore(project, reverted.target(), current, reverted.paths, cross_mounts,
                                     trees=reverted.trees) if reverted.paths else RestorePlan(reverted.target()))
                plan.extra.update({oid: blob for oid, blob in reverted.blobs.items()
                                   if any(op.entry is not None and op.entry.oid == oid for op in plan.ops)})
                plan.revert = reverted
            else:
                plan = plan_restore(project, target, current, paths, cross_mounts)
            if before_apply is not None:
                before_apply(plan, current)
            if skip_if_empty and plan.empty:
                return RestoreResult(None, plan, 0)
            # every object the plan needs is read and verified before anything is recorded or
            # written: a damaged object stops the rewind with the ring as it was
            data: dict[str, bytes] = {}
            budget = _MEMORY_BUDGET
            for op in plan.ops:
                if op.action in ("write", "symlink") and op.entry.oid not in data:
                    if op.entry.oid in plan.extra:
                        data[op.entry.oid] = plan.extra[op.entry.oid]
                        continue
                    blob = project.store.get(op.entry.oid)
                    project.store.note_binary(op.entry.oid, blob)
                    if len(blob) <= budget:
                        data[op.entry.oid] = blob
                        budget -= len(blob)
            _whole(project, plan)
            if plan.revert is not None:     # its trees, so that an undo can tell what changed since
                for oid, tree in plan.revert.trees.items():
                    project.store.put(serialize(tree), oid)
            if plan.extra or plan.revert is not None:  # contents the plan made (merges, settings)
                for oid, blob in plan.extra.items():
                    project.store.put(blob, oid)
                project.store.flush()
            # the checkpoint of the tree just scanned: nothing is read again; on disk (objects and
            # catalog rows) before the first write, a power cut included. It evicts nothing until
            # the restore has written something (a restore that fails first leaves the ring).
            with project.catalog.durable():
                safety = wc.commit(wc.scan(Scan.nothing()), _safety_commit(target, paths, is_undo, plan.revert))
                with project.catalog.transaction():
                    if plan.revert is not None:
                        safety.stats = dict(safety.stats, revert_tree=plan.revert.root)
                        project.catalog.set_stats(project.id, safety.number, safety.stats)
                    project.catalog.insert_restore(project.id, target.number, safety.number, is_undo,
                                                   plan.touched(), iso_now())
            tag = f"{safety.number}"
            journal = {"project": project.root, "target": target.number, "safety": safety.number,
                       "tag": tag, "started_at": iso_now(),
                       "dirs": sorted({split_path(op.path)[0] for op in plan.ops})}
            jpath = journal_path(project)
            ensure_private_dir(os.path.dirname(jpath))
            atomic_write(jpath, json.dumps(journal).encode())
            written: dict[str, tuple] = {}
            try:
                done = apply_plan(project, plan, data, tag, progress, written,
                                  expect=expectations(project, plan, scan_ns, current.hardlinks))
            except Exception as e:
                raise _failed(project, plan, safety, jpath, e) from None
            os.sync()
            os.unlink(jpath)
            # what the restore wrote is attributed to it; only those paths are read again
            touched = {op.path: ("c" if op.action == "mkdir" else "m") for op in plan.ops}
            for path in relist:              # read despite today's rules: listed again under them
                touched.setdefault(path, "m")
            relist = {}
            wc.commit(wc.scan(Scan.written(touched, hints=written, by=Source.rewind())))
            _enforce_ring(project)
            return RestoreResult(safety, plan, done)
        finally:
            if relist:
                _relist(wc, relist)


def _safety_commit(target: Checkpoint, paths: list[str] | None, is_undo: bool, reverted) -> Commit:
    """The safety checkpoint's kind and message: `undo`, `before rewind [of PATHS ]to N`,
    or `before revert of N[..M]` (which names the checkpoints it takes back)."""
    if reverted is not None:
        numbers = reverted.numbers
        span = f"{numbers[-1]}..{numbers[0]}" if len(numbers) > 1 else f"{numbers[0]}"
        only = f" ({_of(paths).strip().replace('of ', 'only ', 1)})" if paths else ""
        return Commit("rewind", settings=None, message=f"before revert of {span}{only}",
                      meta={"reverts": list(numbers)})
    return Commit("rewind", restore_target=target.number, settings=None,
                  message=("undo" if is_undo else f"before rewind {_of(paths)}to {target.number}"))


def _relist(wc, paths: dict[str, str]) -> None:
    """A restore that wrote nothing there: its ignored paths leave the last scan's tree."""
    try:
        wc.commit(wc.scan(Scan.written(paths)))
    except Exception as e:          # the next full scan does it; this must not hide the first error
        from rewind.log import log
        log(f"{wc.project.root}: ignored paths not listed again after a restore", e)


def _whole(project: Project, plan: RestorePlan) -> None:
    """What the plan overwrites or removes must be whole in the store, or the safety
    checkpoint could not give it back: each object is read and verified, and one found
    damaged is mended from the file itself when its bytes still match; otherwise the
    rewind stops here, before anything is recorded or written."""
    dirs = Dirs(project.root)
    try:
        for op in plan.overwrites():
            if op.old is None or op.old.kind not in (FILE, LINK):
                continue
            try:
                project.store.get(op.old.oid)
                continue
            except RewindError:
                pass
            parent, name = split_path(op.path)
            try:
                pfd = dirs.open(parent)
                if op.old.kind == LINK:
                    found = os.fsencode(os.readlink(name, dir_fd=pfd))
                else:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
                    try:
                        found = read_fd(fd)
                    finally:
                        os.close(fd)
                project.store.mend(op.old.oid, found)
            except (OSError, RewindError):
                raise DamagedCopy(f"{op.path}: its stored copy is damaged and the file no longer matches it, "
                                  "so the safety checkpoint could not give it back; nothing was changed",
                                  hint="`rewind verify` names the damage; `rewind save` stores the file "
                                       "as it is now, then rewind again") from None
    finally:
        dirs.close()


def _failed(project: Project, plan: RestorePlan, safety: Checkpoint, jpath: str, e: Exception) -> RewindError:
    """What a restore that stopped half-way says: exactly what state the tree is in, and what
    brings it back. One that wrote nothing takes its safety checkpoint away again (the tree
    is that checkpoint's, and the ring is as it was)."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    where = f" ({render_path(e.filename)})" if isinstance(e, OSError) and e.filename else ""
    if plan.applied == 0:
        try:
            os.unlink(jpath)
        except OSError:
            pass
        with project.catalog.transaction():
            project.catalog.drop_checkpoints(project.id, [safety.number])
        return RestoreStopped(f"the rewind stopped before changing anything: {why}{where}; the tree is as it was",
                              hint="fix the cause (free space, permissions), then rewind again")
    total = len(plan.ops)
    return RestoreStopped(f"the rewind stopped after {plan.applied} of {total} steps: {why}{where}. The tree is "
                          f"part checkpoint {plan.target.number}, part as it was; everything it overwrote is in "
                          f"checkpoint {safety.number}",
                          hint=f"`rewind to {safety.number}` puts the tree back as it was before the rewind; "
                               f"`rewind to {plan.target.number}` tries again")


def render_path(name) -> str:
    try:
        return os.fsdecode(name)
    except (TypeError, ValueError):
        return str(name)


def _enforce_ring(project: Project) -> None:
    from rewind import config
    from rewind.clock import now_ns
    from rewind.retention import enforce
    settings = config.load_quietly(project.root)
    if settings is not None:
        with project.catalog.transaction():
            enforce(project.catalog, project.id, settings, now_ns())


def undo(project: Project, lock_timeout: float = LOCK_TIMEOUT_S, cross_mounts: bool = False) -> UndoResult | None:
    """Revert the newest rewind not yet undone: put back, from its safety checkpoint, the
    paths it touched. None when there is no rewind to undo."""
    row = project.catalog.newest_undoable(project.id)
    if row is None:
        return None
    restore_id, target_number, safety_number = row.id, row.target, row.safety
    safety = project.catalog.checkpoint(project.id, safety_number)
    if safety is None:
        raise UndoUnavailable(f"the safety checkpoint {safety_number} of that rewind is gone",
                              hint="it was dropped by retention; `rewind list` shows what is left")
    touched = project.catalog.restore_made(project.id, safety_number).paths or []
    if touched:
        result = restore(project, safety, touched, is_undo=True, lock_timeout=lock_timeout,
                         cross_mounts=cross_mounts)
    else:
        result = RestoreResult(None, RestorePlan(safety), 0)
    with project.catalog.transaction():
        project.catalog.mark_undone(restore_id)
    return UndoResult(target_number, result.safety, result.plan, result.done)


def _of(paths: list[str] | None) -> str:
    """`of README.md ` for a restore of some paths only (the safety checkpoint says so)."""
    if not paths:
        return ""
    shown = ", ".join(p or "." for p in paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return f"of {shown} "
