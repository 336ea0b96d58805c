"""Capture through a locked working copy (jj's `LockedWorkingCopy`):

    with locked(project, timeout) as wc:
        scanned = wc.scan(Scan.auto())          # objects durable, changes attributed
        cp = wc.commit(scanned, Commit("prompt", message=prompt))   # or wc.commit(scanned)

`scan` reads the tree into objects (flushed before it returns), and attributes the segment of
changes since the previous scan; `commit` writes, in one transaction, the segment's
observations, the checkpoint row when one is asked for, the stat cache and the scan state.
Write order is objects first, catalog rows last: a checkpoint exists once its row commits,
and every object it names is on disk by then.

A scan is a named request (`Scan`), one per way rewind reads the tree:
- `Scan.auto()`: the watcher's dirty set when its word can be taken, else the whole tree;
- `Scan.full()`: the whole tree, whatever the watcher says (a restore needs every path);
- `Scan.baseline()`: the watcher's own first scan, the base its events build on;
- `Scan.written(paths, hints, by)`: only `paths` (what a restore just wrote) are read again,
  the watcher's events stay for the next scan; `hints` are stat-cache entries of the files
  written, trusted as any cache entry; `by` gives every change one `Source` (`rewind`);
- `Scan.nothing()`: nothing is read: the tree of the previous scan, with its figures (the
  safety checkpoint of a restore, committed right after the restore's full scan).
Each request may carry a `source` (a `DirtySource`), which says what may have changed: by
default the watcher's rows (`WatcherRows`), else `FullScan`, or a `Fixed` set in tests.
A written or nothing scan of a project never scanned reads as `auto` does. `commit_tree`
commits a tree known already (a pending checkpoint's, rebuilt as at its prompt: pending.py).
`locked` only takes the lock; callers that complete what is pending first use
`pending.locked_completing`. Past the house's ~350 lines on purpose: `WorkingCopy` keeps scan
and commit together, since the write order above is its contract; the requests are named here.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from rewind import config
from rewind import clock
from rewind.capture import dirty as dirtymod
from rewind.capture import gitmove
from rewind.capture.attribution import (apply_observations, attribute_segment, fallback_rewind,
                                        flag_unrecorded, restored_authors)
from rewind.capture.ignore import exclude_signature
from rewind.capture.scan import ScanResult, scan, scan_dirty
from rewind.capture.snapshot import Hinted, TreeLoader, binary_in, examined_by, keep_hints, project_clock
from rewind.clock import iso, now_ns
from rewind.errors import CorruptObject
from rewind.lock import LOCK_TIMEOUT_S, project_lock
from rewind.model import ChangeRow, Checkpoint, PathEvent, ScanState, Source, StatEntry
from rewind.project import Project, git_state
from rewind.retention import enforce
from rewind.store.treediff import change_rows, diff_trees
from rewind.structs import dataclass


@dataclass(frozen=True)
class Scan:
    """What to read of the tree (see the module docstring)."""
    mode: str                               # auto | full | baseline | written | nothing
    paths: dict[str, str] | None = None     # written: path -> "m" | "c", as the watcher's events
    hints: dict[str, StatEntry] | None = None   # written: stat-cache rows of the files written
    by: Source | None = None                # written: every change's source
    progress: object = None                 # a callable ticked per file (full scans)
    source: object = None                   # a DirtySource; None: the watcher's rows
    held: object = None                     # full: paths a restore's target holds, read even if ignored

    @classmethod
    def auto(cls, source=None) -> "Scan":
        return cls("auto", source=source)

    @classmethod
    def full(cls, progress=None, held=None) -> "Scan":
        return cls("full", progress=progress, held=held)

    @classmethod
    def baseline(cls, source=None) -> "Scan":
        return cls("baseline", source=source)

    @classmethod
    def written(cls, paths: dict[str, str], hints: dict[str, StatEntry] | None = None,
                by: Source | None = None) -> "Scan":
        return cls("written", paths=paths, hints=hints, by=by)

    @classmethod
    def nothing(cls) -> "Scan":
        return cls("nothing")

    @property
    def partial(self) -> bool:
        """Reads only what it names: the watcher's events stay, and it counts as no scan."""
        return self.mode in ("written", "nothing")


@dataclass(frozen=True)
class Commit:
    """The checkpoint a commit takes: its kind and what the catalog keeps beside the tree.
    `settings` are the ring and retention enforced after it (config.LOAD: read the project's;
    None: enforce nothing, the caller does it later)."""
    kind: str
    message: str | None = None
    meta: dict | None = None
    restore_target: int | None = None
    settings: object = config.LOAD
    pending: object = None                  # a pending checkpoint (pending.py) this completes: its number and time


@dataclass
class Scanned:
    """A scan's outcome, objects durable, not yet in the catalog."""
    request: Scan
    plan: dirtymod.ScanPlan
    state: ScanState
    result: ScanResult
    load: TreeLoader
    stats: dict
    segment: list
    prev: Checkpoint | None
    scan_start: int
    stamp: int
    bg_sigs: dict | None = None     # background commands' tree signatures it looked at (attribution.py)


STATCACHE_CHUNK = 2000   # stat cache rows a transaction, when a scan has many (a first snapshot)


class WorkingCopy:
    """The project's tree, read and committed under the project lock (see `locked`).
    `between_chunks`: called between two transactions of a big scan's stat cache rows (the
    watcher lets a served call in there: watch/first_scan.py)."""

    def __init__(self, project: Project):
        self.project = project
        self.between_chunks = None

    def scan(self, request: Scan) -> Scanned:
        project = self.project
        store, catalog = project.store, project.catalog
        state = catalog.scan_state(project.id)
        hints = request.hints
        # the paths to read again (written, nothing), None: as the request's source says
        touched = (request.paths if request.mode == "written" else {}) if request.partial else None
        if touched is not None and state.last_tree:
            plan = dirtymod.ScanPlan(True, None, touched, state.consumed_seq or 0, None)
        else:
            if touched is not None:         # never scanned: read as `auto` does
                touched = None
                request = Scan("auto", None, hints, request.by, request.progress, request.source)
            source = request.source or (dirtymod.FULL if request.mode in ("full", "baseline")
                                        else dirtymod.WATCHER)
            plan = source.plan(project, state)
        last_tree, last_ns = state.last_tree, state.last_scan_ns or 0
        load = TreeLoader(store)
        fs_now = project_clock(project.root, store)
        scan_start = clock.wall_ns()
        damaged = catalog.damaged()
        if damaged and plan.quick:
            # a quick scan keeps unchanged subtrees as they were, damaged objects and all
            plan = dirtymod.ScanPlan(False, "objects found damaged are stored afresh", {}, plan.upto, None)
        try:
            if plan.quick:
                cache = catalog.statcache_lookup(project.id)
                if hints:
                    hints = {p: h for p, h in hints.items() if h.mtime_ns < fs_now}   # git's racy rule
                    cache = Hinted(cache, hints)
                try:
                    result = scan_dirty(project.root, store, cache, fs_now, last_tree, load, plan.dirty)
                    if hints:
                        keep_hints(result, load, hints)
                except CorruptObject as e:
                    # the last tree is damaged: a full scan needs none of it
                    store.discard()
                    damaged = damaged | {e.digest}
                    plan = dirtymod.ScanPlan(False, f"a tree of the last scan is damaged ({e.digest[:12]})",
                                             {}, plan.upto, None)
            if not plan.quick:
                result = scan(project.root, store, catalog.load_statcache(project.id), fs_now,
                              progress=request.progress, damaged=damaged, held=request.held)
            store.flush()
            if result.raw_packs:                  # the workers stored contents raw, for speed
                start_recompress(store.home)      # (it waits for the store to be idle)
        except BaseException:
            store.discard()
            raise
        stamp = clock.wall_ns()
        prev = catalog.latest(project.id, hidden=True)
        if last_tree is None and prev is not None:
            last_tree = prev.tree
        load.cache.update(result.trees)
        stats = result.stats.to_json()
        last_stats = state.stats()
        if touched == {}:                 # nothing read: the checkpoint of the last scan, its figures
            stats = last_stats or stats
        else:
            if plan.quick:
                stats = dirtymod.merge_stats(project.root, last_stats, stats, result.listed or [])
            dirtymod.note_hardlinks(stats, result.hardlinks, last_stats,
                                    examined_by(plan.dirty) if plan.quick else None)
            stats["exclude"] = exclude_signature(project.root)
        segment: list[ChangeRow] = []
        sigs = None
        if last_tree is not None and last_tree != result.root:
            try:
                segment = change_rows(list(diff_trees(load, last_tree, result.root)))
            except CorruptObject:
                segment = []       # the last scan's tree is damaged: what changed since is unknown
            sigs = attribute_segment(project, segment, last_ns, request.by, plan.events,
                                     state.scan_start_ns or None)
        return Scanned(request=request, plan=plan, state=state, result=result, load=load, stats=stats,
                       segment=segment, prev=prev, scan_start=scan_start, stamp=stamp, bg_sigs=sigs)

    def commit_tree(self, root: str, checkpoint: Commit, load: TreeLoader, stats: dict, stamp: int,
                    hardlinks: set[str], events: dict[str, PathEvent] | None = None) -> Checkpoint:
        """Commit tree `root`, known already (its objects durable), as a scan that read
        nothing would have found it at `stamp`: the checkpoint of it, with `stats`; its
        changes since the last scan are the segment, attributed with the watcher's `events`
        (path -> its `PathEvent`; None: the tool windows alone). The stat cache and the
        watcher's events stay as they are."""
        project = self.project
        catalog = project.catalog
        state = catalog.scan_state(project.id)
        prev = catalog.latest(project.id, hidden=True)
        last_tree = state.last_tree or (prev.tree if prev else None)
        segment: list[ChangeRow] = []
        if last_tree and last_tree != root:
            segment = change_rows(list(diff_trees(load, last_tree, root)))
            attribute_segment(project, segment, state.last_scan_ns or 0, None, events, state.scan_start_ns or None)
        result = ScanResult(root=root, trees={}, stats=None, protected=set(), hardlinks=hardlinks)
        return self.commit(Scanned(request=Scan.nothing(),
                                   plan=dirtymod.ScanPlan(True, None, {}, state.consumed_seq or 0, None),
                                   state=state, result=result, load=load, stats=stats, segment=segment,
                                   prev=prev, scan_start=state.scan_start_ns or 0, stamp=stamp), checkpoint)

    def commit(self, scanned: Scanned, checkpoint: Commit | None = None) -> Checkpoint | None:
        """The scan's rows in one transaction; with `checkpoint`, the checkpoint of its tree."""
        project = self.project
        store, catalog = project.store, project.catalog
        result, prev, plan, state, stamp = scanned.result, scanned.prev, scanned.plan, scanned.state, scanned.stamp
        partial = scanned.request.partial
        cp = None
        settings = None
        if checkpoint is not None:
            settings = checkpoint.settings
            if settings is config.LOAD:
                settings = config.load_quietly(project.root)
            if checkpoint.pending is not None:
                p = checkpoint.pending
                cp = Checkpoint(project_id=project.id, number=p.number, kind=p.kind, created_at=p.created_at,
                                created_ns=p.created_ns, tree=result.root, message=p.message, agent=p.agent,
                                session_id=p.session_id, prompt_id=p.prompt_id, prompt_source=p.prompt_source,
                                transcript_path=p.transcript_path, git_head=p.git_head, git_branch=p.git_branch,
                                folds_under=p.folds_under, stats=scanned.stats)
            else:
                head, branch = git_state(project.root)
                created = now_ns()
                cp = Checkpoint(project_id=project.id, number=0, kind=checkpoint.kind, created_at=iso(created),
                                created_ns=created, tree=result.root, message=checkpoint.message, git_head=head,
                                git_branch=branch, restore_target=checkpoint.restore_target,
                                stats=scanned.stats, **(checkpoint.meta or {}))
        rows: list[ChangeRow] = []
        unknown = None
        if cp is not None and prev is not None:
            try:
                pairs = list(diff_trees(scanned.load, prev.tree, result.root))
            except CorruptObject as e:
                # the previous checkpoint's tree is damaged: this checkpoint is taken all the
                # same (damage stays local); what changed between the two is unknown
                pairs = []
                unknown = f"its tree is damaged ({e.digest[:12]}): what changed after it is unknown"
            rows = change_rows(pairs, binary_in(store), result.hardlinks)
        scan_start = scanned.scan_start
        upserts = result.cache_upserts
        if len(upserts) > 2 * STATCACHE_CHUNK:
            self._statcache_in_chunks(upserts)
            upserts = {}
        with catalog.transaction():
            base = prev.number if prev else None
            if scanned.segment:
                catalog.insert_observations(project.id, base, scanned.segment, stamp)
            for wid, sig in (scanned.bg_sigs or {}).items():
                catalog.set_bg_sig(wid, sig)
            if cp is not None:
                if prev is not None:
                    rows = apply_observations(rows, catalog.observations(project.id, base))
                    fallback_rewind(project, prev, rows)
                    restored_authors(project, prev, rows)
                    flag_unrecorded(project.root, rows)
                    if gitmove.moved((prev.git_head, prev.git_branch), (cp.git_head, cp.git_branch)):
                        by = gitmove.mover(project, prev.created_ns, cp.created_ns, (cp.git_head, cp.git_branch))
                        rows.append(gitmove.git_row(prev, cp, by))
                if checkpoint.pending is not None:
                    catalog.drop_pending(project.id, cp.number)     # its number was taken at the prompt
                else:
                    cp.number = catalog.allocate_number(project.id)
                catalog.insert_checkpoint(cp)
                if prev is not None:
                    catalog.insert_changes(project.id, prev.number, rows)
                    if unknown:
                        catalog.set_stats(project.id, prev.number, dict(prev.stats, changes_unknown=unknown))
                if settings is not None:
                    enforce(catalog, project.id, settings, cp.created_ns)
            catalog.update_statcache(project.id, upserts, result.cache_removed, result.removed_prefixes)
            if result.mended:
                catalog.clear_damaged(result.mended)
            counts = {} if partial else {"quick_scans": state.quick_scans + 1} if plan.quick \
                else {"full_scans": state.full_scans + 1}
            if plan.reason:
                counts.update(fallbacks=state.fallbacks + 1, fallback=plan.reason, fallback_ns=stamp)
            if partial:                    # the base the watcher's events build on is still the last full one
                scan_start = state.scan_start_ns or 0
            catalog.set_state(project.id, result.root, stamp, scan_start_ns=scan_start,
                              consumed_seq=plan.upto, last_stats=json.dumps(scanned.stats), **counts)
            catalog.drop_events_upto(project.id, plan.upto)
        if plan.reason:
            from rewind.log import log
            log(f"{project.root}: full scan: {plan.reason}")
        return cp

    def _statcache_in_chunks(self, upserts: dict) -> None:
        """A first snapshot's 100,000 stat cache rows held the catalog's write lock for 0.5 s
        in its one transaction, and every hook that writes a row (an edit tool's pre-image,
        a pending prompt) waited for it. They go first, in transactions of STATCACHE_CHUNK,
        with room for others between. Safe before the scan's own transaction: the objects
        are durable (`scan` flushed the store), a row is trusted only for a file whose stat
        matches it exactly, and gc counts the cache's ids as roots."""
        catalog, pid = self.project.catalog, self.project.id
        items = list(upserts.items())
        for i in range(0, len(items), STATCACHE_CHUNK):
            with catalog.transaction():
                catalog.update_statcache(pid, dict(items[i:i + STATCACHE_CHUNK]), set())
            if self.between_chunks is not None:
                self.between_chunks()


@contextmanager
def locked(project: Project, timeout: float = LOCK_TIMEOUT_S):
    """The project's working copy, under its lock (`StoreLocked` after `timeout` seconds).
    Taking it reads and writes nothing: pending checkpoints are the caller's choice
    (`pending.locked_completing`)."""
    with project_lock(project.home, project.id, timeout=timeout):
        yield WorkingCopy(project)


def capture(project: Project, kind: str, *, message: str | None = None, meta: dict | None = None,
            full: bool = False, progress=None, settings=config.LOAD,
            lock_timeout: float = LOCK_TIMEOUT_S, lock=locked) -> tuple[Checkpoint, ScanResult]:
    """Take a checkpoint of the project's tree: scan (whole with `full`), commit. `lock`
    takes the working copy (`pending.locked_completing`: after what is pending)."""
    with lock(project, lock_timeout) as wc:
        scanned = wc.scan(Scan.full(progress) if full else Scan("auto", progress=progress))
        cp = wc.commit(scanned, Commit(kind, message=message, meta=meta, settings=settings))
    return cp, scanned.result


def start_recompress(home: str) -> None:
    """The job that compresses a first snapshot's raw packs, detached (background.py);
    failing to start it fails nothing: gc does it later."""
    from rewind.background import spawn_recompress
    try:
        spawn_recompress(home)
    except OSError as e:
        from rewind.log import log
        log("could not start the recompression of a first snapshot", e)
