"""gc: drop what the ring and the retention drop, then sweep the objects nothing needs.

Safe while hooks write (docs/design.md, "Ring and retention"), in this order:
1. `start`: the filesystem's clock, read before anything else (`plan_gc`). Objects whose
   mtime is not older than `start` are never swept (a writer's fresh or reused object:
   `Store.put` refreshes the mtime of one it reuses).
2. The catalog rows go first: each project's policy is enforced, caches older than the
   retention are cleared, and the trash's batches older than a day (`TRASH_NS`, on the
   retention's clock) are emptied; what a settings change hid goes to the trash first.
3. Mark, beside the hooks (the long part): every tree of every kept checkpoint, the last
   scanned trees, the pre-images, the stat cache's ids and the trash's trees. A checkpoint tree that cannot
   be read stops gc before anything is deleted.
4. Then the store lock, exclusive. Every writer holds it shared from its first catalog
   read to its commit, so while gc holds it no writer is in flight: gc reads the roots
   again and marks what was committed since step 3 (a tree marked in step 3 has its whole
   subtree marked, so this is quick), and sweeps. Nothing can start relying on an object
   while it is swept, so the sweep's safety rests on the catalog alone, not on clocks or
   on any reasoning about what a writer may reuse; the time rule of step 1 and the trash
   below stay as a second line. Hooks wait for this step (`seconds_exclusive`).
5. Sweep (`sweep.sweep_loose`, `sweep.sweep_packs`): an unmarked object older than `start`
   is moved into `gc-trash/` (atomic), its mtime checked again there, and only then
   unlinked; a pack goes when nothing in it is marked.
6. After the lock: small packs are merged (`repack.merge_small`), leaving out what no root
   named under the lock. The merged pack is written and synced before the old ones go, and
   nothing a writer can come to rely on is left out (`put` never relies on a packed copy;
   the caches and trees it may reuse were all roots), so hooks do not wait for this copy,
   which may be large.
Plan, then apply, both under gc's lock (`locked`): `plan_gc` fixes steps 1-2 (the
start, the instant, the settings, the verdicts) and changes nothing; `apply` carries them
out, then steps 3-6, which cannot be fixed in advance without marking before the rows go
or sweeping outside the lock. A dry run's plan previews steps 3-6 as `apply` would take
them (the same functions, with `dry_run`), deleting nothing. The store's side of steps 5-6
(its layout, the trash, packs) is store/sweep.py and store/repack.py. Past the house's ~350
lines on purpose: the steps above are one procedure, kept in one file so its order reads in one
place; a third of it is this account.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager

from rewind import config
from rewind.background import touch_stamp
from rewind.catalog.db import Catalog
from rewind.clock import iso, now_ns
from rewind.errors import CorruptObject, GcStopped, RewindError
from rewind.lock import store_lock, try_lock
from rewind.retention import enforce
from rewind.store import tree as treemod
from rewind.store.objects import Store
from rewind.store.repack import merge_small, recompress
from rewind.store.sweep import GC_LOCK, Progress, SweepCounts, clean_tmp, recover_trash, sweep_loose, sweep_packs
from rewind.store.usage import object_sizes, totals
from rewind.store.tree import DIR, FILE, LARGE, LINK
from rewind.structs import dataclass, field

BARRIER_TIMEOUT_S = 120.0
TRASH_NS = 86400 * 10**9         # what a command that deletes history took stays this long


@dataclass
class GcReport:
    dry_run: bool
    started_at: str = ""
    dropped: list[dict] = field(default_factory=list)     # {project, number, reason}
    hidden: list[dict] = field(default_factory=list)      # newly hidden: deleted by a later gc
    held: str | None = None                               # why nothing was swept
    config_problems: list[str] = field(default_factory=list)
    rows_pruned: int = 0
    objects_kept: int = 0
    bytes_kept: int = 0
    objects_swept: int = 0
    bytes_swept: int = 0
    objects_spared: int = 0      # unreferenced but newer than the start (a writer's, in flight)
    packed_dead: int = 0         # unreferenced, kept in a pack that holds referenced ones
    packed_dead_bytes: int = 0
    packs_merged: int = 0        # small packs whose referenced objects went into one
    temp_files_removed: int = 0
    trash_emptied: int = 0       # trashed checkpoints past their day, given up
    seconds: float = 0.0
    seconds_exclusive: float = 0.0   # how long hooks had to wait for the sweep
    # the store once gc is done (a dry run: as it is now), counted as `status` counts it
    store_objects: int = 0
    store_bytes: int = 0

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class GcPlan:
    """What gc is to do, decided under its lock before anything changes."""
    start_ns: int                 # step 1: nothing whose mtime is not older is swept
    now_ns: int                   # the retention's clock
    began: float                  # time.monotonic() at the start, for the report's seconds
    auto: bool = False            # gc --auto: a shortened setting only hides
    policies: list[tuple] = field(default_factory=list)   # (project id, root, settings) to enforce
    dropped: list[dict] = field(default_factory=list)     # {project, number, reason}
    hidden: list[dict] = field(default_factory=list)      # newly hidden: deleted by a later gc
    config_problems: list[str] = field(default_factory=list)
    held: str | None = None                               # why nothing would be swept
    preview: SweepCounts | None = None                    # dry run: steps 3-6 as they would go
    shortened: dict = field(default_factory=dict)         # project id -> numbers only a shortened setting drops
    trash_expired: int = 0                                # trashed checkpoints past their day
    home: str = ""

    def report(self) -> GcReport:
        """The plan as a dry run reports it (`gc --dry-run`, its text and JSON)."""
        objects, size = totals(self.home)
        return GcReport(True, iso(self.now_ns), self.dropped, self.hidden, self.held, self.config_problems,
                        **(self.preview or SweepCounts()).__dict__, trash_emptied=self.trash_expired,
                        seconds=round(time.monotonic() - self.began, 3), store_objects=objects, store_bytes=size)


class GcBusy(RewindError):
    pass


def mark(store: Store, roots: dict[str, list], progress: Progress | None = None,
         marked: set[str] | None = None, unread: set[str] | None = None) -> set[str]:
    """Every object id the roots reach. Checkpoint trees must be readable (a missing one
    would hide what it needs, so gc stops); the caches' trees are followed when present,
    and those that cannot be read are kept and added to `unread`. `marked`: the result of
    an earlier pass that left `unread` empty (a marked tree's whole subtree is marked, so
    the walk stops there)."""
    marked = set() if marked is None else marked
    unread = set() if unread is None else unread

    def walk(oid: str, strict: bool, where: str) -> None:
        stack = [oid]
        while stack:
            tid = stack.pop()
            if tid in marked:
                continue
            try:
                entries = treemod.parse(store.get(tid))
            except (CorruptObject, ValueError) as e:
                if not strict:
                    marked.add(tid)
                    unread.add(tid)
                    continue
                problem = e.problem if isinstance(e, CorruptObject) else f"does not parse ({e})"
                raise GcStopped(f"gc stopped before deleting anything: tree {tid[:12]} of {where} "
                                f"is {problem}",
                                hint="`rewind verify` lists the damage") from None
            marked.add(tid)
            for e in entries.values():
                if e.kind == DIR:
                    if e.oid not in marked:
                        stack.append(e.oid)
                elif e.kind != LARGE and e.oid:
                    marked.add(e.oid)

    marked.add(treemod.EMPTY_TREE_ID)
    cps = roots["checkpoints"]
    for i, cp in enumerate(cps):
        walk(cp.tree, True, f"checkpoint {cp.number} (project {cp.project_id})")
        if progress:
            progress("marking", i + 1, len(cps))
    for tree in roots["last_trees"]:
        walk(tree, False, "the last scan")
    for tree in roots.get("trashed", ()):
        walk(tree, False, "the trash")
    marked.update(roots["preimages"])
    for kind, oid in roots["cached"]:
        if kind == DIR:
            walk(oid, False, "the stat cache")
        elif kind in (FILE, LINK) and oid:
            marked.add(oid)
    from rewind.store.delta import mark_bases
    return mark_bases(store, marked)       # and what those are stored against


@contextmanager
def locked(home: str):
    """gc's lock, for a plan and its execution: one gc at a time, and no pack merge beside it."""
    lock_fd = try_lock(home, GC_LOCK)
    if lock_fd is None:
        raise GcBusy("another gc or a bisect is running (a bisect keeps the store as it is until it ends)",
                     hint="a gc reports what it freed in `rewind status`")
    try:
        yield
    finally:
        os.close(lock_fd)


def _note(out, root: str, changed) -> set[int]:
    """The verdicts that drop or newly hide, into `out` (a plan or a report); the numbers dropped."""
    dropped = set()
    for v in changed:
        if v.keep:
            continue
        if v.hide:
            out.hidden.append({"project": root, "number": v.number, "reason": v.reason})
            continue
        out.dropped.append({"project": root, "number": v.number, "reason": v.reason})
        dropped.add(v.number)
    return dropped


def _lost(lost: list) -> str:
    # checkpoints the catalog lost (a deleted WAL) may be brought back from a backup of
    # it: none of their content is swept until the user decides (`gc --forget-lost`)
    return (f"{len(lost)} project(s) lost their newest checkpoints from the catalog "
            "(catalog.sqlite-wal deleted?): nothing is swept until `rewind gc --forget-lost`")


def plan_gc(home: str, catalog: Catalog, dry_run: bool = False, progress: Progress | None = None,
            only: list[int] | None = None, auto: bool = False) -> GcPlan:
    """Steps 1-2 decided, nothing changed (call it under `locked(home)`). `only`: enforce
    the policy in these projects alone (the sweep is always store-wide: objects are
    shared). `dry_run`: also preview steps 3-6, marking what the kept checkpoints reach."""
    began = time.monotonic()
    store = Store(home)
    plan = GcPlan(store.fs_now(), now_ns(), began, auto, home=home)
    would_drop: set[tuple[int, int]] = set()
    for pid, root in catalog.projects():
        if only is not None and pid not in only:
            continue
        try:
            settings = config.load(root)
        except config.ConfigError as e:
            plan.config_problems.append(f"{e.message} (nothing dropped in {root})")
            continue
        plan.policies.append((pid, root, settings))
        with catalog.transaction():
            changed = enforce(catalog, pid, settings, plan.now_ns, dry_run=True, confirm=True,
                              apply_shortened=not auto)
            if not auto:       # what only the shortened setting drops (it goes to the trash)
                usual = enforce(catalog, pid, settings, plan.now_ns, dry_run=True, confirm=True)
                gone = {v.number for v in usual if not v.keep and not v.hide}
                only = sorted(v.number for v in changed if not v.keep and not v.hide and v.number not in gone)
                if only:
                    plan.shortened[pid] = only
        would_drop.update((pid, n) for n in _note(plan, root, changed))
    lost = catalog.any_lost()
    if lost:
        plan.held = _lost(lost)
    kept_trash, plan.trash_expired = catalog.trash_kept(plan.now_ns - TRASH_NS)
    if dry_run and not lost:
        plan.preview = counts = SweepCounts()
        roots = catalog.roots()
        roots["trashed"] = kept_trash
        roots["checkpoints"] = [c for c in roots["checkpoints"] if (c.project_id, c.number) not in would_drop
                                or c.number in plan.shortened.get(c.project_id, ())]      # to the trash
        marked = mark(store, roots, progress, unread=set())
        small = _sweep(home, marked, plan.start_ns, counts, True, progress)
        merge_small(home, small, marked, counts, True)
        clean_tmp(home, counts, True)
    return plan


def _sweep(home: str, marked: set[str], start_ns: int, counts, dry_run: bool,
           progress: Progress | None) -> list:
    """Step 5: the loose objects, then the packs; returns the packs to merge (step 6)."""
    sweep_loose(home, marked, start_ns, counts, dry_run, progress)
    return sweep_packs(home, marked, start_ns, counts, dry_run)


def apply(plan: GcPlan, home: str, catalog: Catalog, progress: Progress | None = None) -> GcReport:
    """Steps 2-6 for a plan of `plan_gc`, under the same `locked(home)`. The policy is
    applied at the plan's instant with its settings: the plan's verdicts, unless a hook
    committed a checkpoint since (the report says what went)."""
    report = GcReport(dry_run=False, started_at=iso(plan.now_ns), config_problems=list(plan.config_problems))
    recover_trash(home)        # what a killed gc left: back in place, decided again below
    now = plan.now_ns
    with catalog.transaction():
        report.trash_emptied = catalog.empty_trash(now - TRASH_NS)
    for pid, root, settings in plan.policies:
        with catalog.transaction():
            shortened = plan.shortened.get(pid)
            if shortened:      # the person's gc applies a shortened setting: to the trash first
                catalog.trash_checkpoints(pid, shortened, "a shortened ring_size or retention_days "
                                                          "applied by `rewind gc`", now, drop=False)
            changed = enforce(catalog, pid, settings, now, confirm=True, apply_shortened=not plan.auto)
            # never before the oldest checkpoint still there (hidden ones too): a clock
            # far ahead prunes nothing a checkpoint may need
            rows = catalog.retention_rows(pid)
            oldest = min((r.created_ns for r in rows), default=None)
            before = now - settings.retention_ns if oldest is None else min(now - settings.retention_ns, oldest)
            if not rows and catalog.state(pid)[1] < before:
                catalog.forget_state(pid)
            report.rows_pruned += catalog.prune_history(pid, before)
        _note(report, root, changed)
    lost = catalog.any_lost()
    if lost:
        report.held = _lost(lost)
        report.store_objects, report.store_bytes = totals(home)
        report.seconds = round(time.monotonic() - plan.began, 3)
        return report
    # the long walk first, beside the hooks: every tree the roots reach now
    store = Store(home)
    unread: set[str] = set()
    marked = mark(store, catalog.roots(), progress, unread=unread)
    # then, with no writer in flight, what they committed meanwhile, and the sweep
    with store_lock(home, exclusive=True, timeout=BARRIER_TIMEOUT_S,
                    what="the store (gc waits for hooks in flight)"):
        held = time.monotonic()
        roots = catalog.roots()
        # a tree the first pass could not read may sit below one it walked: then the
        # walk starts over, so that a checkpoint's unreadable tree still stops gc
        marked = mark(store, roots, None, None if unread else marked)
        small = _sweep(home, marked, plan.start_ns, report, False, progress)
        report.seconds_exclusive = round(time.monotonic() - held, 3)
    # merging small packs writes one new pack (it may be large) before deleting them and
    # drops only what no root named under the lock: nothing a writer can come to rely on
    # (put never relies on a packed copy), so hooks need not wait for it
    merge_small(home, small, marked, report, False, roots["checkpoints"])
    try:
        recompress(home)      # a first snapshot's raw packs its background job left (killed, say)
    except Exception as e:    # they stay raw, whole: never a reason for gc to fail
        from rewind.log import log
        log("gc: the raw packs could not be recompressed", e)
    clean_tmp(home, report, False)
    report.store_objects, report.store_bytes = totals(home)
    report.seconds = round(time.monotonic() - plan.began, 3)
    with catalog.transaction():
        catalog.set_meta("last_gc", json.dumps(report.to_json(), sort_keys=True))
    touch_stamp(home)
    return report


def run(home: str, catalog: Catalog, dry_run: bool = False, progress: Progress | None = None,
        only: list[int] | None = None, auto: bool = False) -> GcReport:
    """Plan, then apply (see the module docstring); `dry_run`: the plan's report, nothing changed."""
    with locked(home):
        plan = plan_gc(home, catalog, dry_run, progress, only, auto)
        return plan.report() if dry_run else apply(plan, home, catalog, progress)


def usage(home: str, catalog: Catalog, project_ids: list[int],
          sizes: dict[str, int] | None = None) -> dict[int, tuple[int, int]]:
    """Per project: (objects, bytes) its checkpoints and caches reach. Projects share
    identical content, so these add up to more than the store holds."""
    sizes = object_sizes(home) if sizes is None else sizes
    store = Store(home)
    out = {}
    for pid in project_ids:
        try:
            reached = mark(store, catalog.roots([pid]))
        except RewindError:
            reached = set()
        present = [sizes[o] for o in reached if o in sizes]
        out[pid] = (len(present), sum(present))
    return out


def last_report(catalog: Catalog) -> dict | None:
    raw = catalog.meta("last_gc")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
