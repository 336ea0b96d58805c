"""record(): scan the tree, make its objects durable, attribute what changed since the last
scan, and (for a checkpoint) commit the checkpoint row.

Write order is objects first, catalog row last: a checkpoint exists once its row commits,
and every object it names is on disk by then.

Attribution at hook granularity: every scan closes a *segment* (from the previous scan to
now). The tool windows open across a segment say who made its changes: one shell window
-> `bash` with its command; several -> `bash`, flagged `ambiguous`; an edit tool's target
whose content is what the tool wrote -> `tool`; no window -> `external` (or `unknown` in a
project no agent hook has ever reported on). Segments are stored as observations; when
the next checkpoint is taken, each changed path takes its latest observation.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext

from rewind import config
from rewind.capture import dirty as dirtymod
from rewind.store import tree as treemod
from rewind.model import ChangeRow
from rewind.model import Checkpoint
from rewind.clock import iso, now_ns
from rewind.diff import change_rows, diff_trees
from rewind.errors import CorruptObject
from rewind.capture.ignore import exclude_signature
from rewind.lock import project_lock
from rewind.store.objects import Store
from rewind.project import Project, git_state
from rewind.retention import enforce
from rewind.capture.scan import ScanResult
from rewind.capture.scan import scan
from rewind.capture.scan import scan_dirty
from rewind.store.tree import DIR
from rewind.store.tree import FILE
from rewind.store.tree import Entry
from rewind.store.tree import Tree


class TreeLoader:
    """Trees by id: from a scan held in memory first, then from the store (verified)."""

    def __init__(self, store: Store, *extra: dict[str, Tree]):
        self.store = store
        self.cache: dict[str, Tree] = {treemod.EMPTY_TREE_ID: {}}
        for trees in extra:
            self.cache.update(trees)

    def __call__(self, oid: str) -> Tree:
        t = self.cache.get(oid)
        if t is None:
            try:
                t = treemod.parse(self.store.get(oid))
            except ValueError as e:
                self.store.found_damaged[oid] = "damaged (a tree that does not parse)"
                raise CorruptObject(oid, f"damaged (a tree that does not parse: {e})") from None
            self.cache[oid] = t
        return t


def working_scan(project: Project) -> ScanResult:
    """A read-only scan of the working tree: hashes what the stat cache cannot vouch for,
    writes nothing."""
    cache = project.catalog.load_statcache(project.id)
    return scan(project.root, None, cache)


def _shell_source(shells: list[dict]) -> tuple | None:
    """The source for a change these open shell windows explain: the one command, or all of
    them flagged `ambiguous`; None without a window."""
    if len(shells) == 1:
        w = shells[0]
        return "bash", w["tool"], w["command"], w["session_id"], []
    if shells:
        return ("bash", shells[0]["tool"], " | ".join(w["command"] or "" for w in shells), None,
                ["ambiguous"])
    return None


def _default_source(project: Project, windows: list[dict], since_ns: int, since_start: int | None = None) -> tuple:
    """(source, tool, command, session_id, flags) for a change the watcher did not place in
    time: the shell windows open across the segment (opened by its start, not closed before
    the scan that began it started: that scan may have read a directory before the command
    wrote there, and a window is closed right before the scan that ends its segment), else
    outside every window."""
    closed_after = since_ns if since_start is None else min(since_ns, since_start)
    shell = _shell_source([w for w in windows if w["kind"] == "bash" and w["opened_ns"] <= since_ns
                           and (w["closed_ns"] is None or w["closed_ns"] > closed_after)])
    if shell is not None:
        return shell
    if project.catalog.has_sessions(project.id):
        return "external", None, None, None, []
    return "unknown", None, None, None, []


def _event_of(events: dict[str, tuple], path: str) -> tuple[int, str | None] | None:
    """When the watcher saw `path` change (and which shell windows could explain it): its
    own latest event, else the nearest ancestor created or moved in (a directory moved as a
    whole reports no event for its contents)."""
    own = events.get(path)
    if own is not None:
        return own[1], own[2]
    while path:
        path = path.rpartition("/")[0]
        e = events.get(path)
        if e is not None and e[0] == "c":
            return e[1], e[2]
    return None


def _source_at(project: Project, windows: list[dict], row: ChangeRow, ts: int, writer: str | None,
               anyone: tuple) -> tuple:
    """The source of a change the watcher read at `ts`:
    - the edit tool whose target it is, if its window was open by then and is still open,
      or the file holds what the tool wrote (the tool's own write may be read late);
    - else the shell windows the watcher named for it (`writer` "w:ID,..."): those open at
      the change's place in its event stream whose command could have made it (procs.py);
      a window closed before this segment began is a stale name (its close marker was lost);
    - else outside every window.
    `writer` "cmd"/"none" come from a watcher of an earlier version (timestamps)."""
    for w in reversed(windows):
        if w["kind"] == "tool" and w["target"] == row.path and w["opened_ns"] <= ts and (
                w["closed_ns"] is None or ts <= w["closed_ns"] or w["post_oid"] == (row.new_oid or "")):
            return "tool", w["tool"], None, w["session_id"], []
    if writer is not None and writer.startswith("w:"):
        ids = {int(x) for x in writer[2:].split(",") if x.isdigit()}
        shell = _shell_source([w for w in windows if w["kind"] == "bash" and w["id"] in ids])
        return shell if shell is not None else anyone
    if writer != "cmd":
        return anyone
    shell = _shell_source([w for w in windows if w["kind"] == "bash" and w["opened_ns"] <= ts
                           and (w["closed_ns"] is None or ts <= w["closed_ns"])])
    return shell if shell is not None else anyone


def attribute_segment(project: Project, rows: list[ChangeRow], since_ns: int,
                      forced: tuple | None = None,
                      events: dict[str, tuple] | None = None, since_start: int | None = None) -> None:
    """Give each change of one segment its source (see the module docstring). With the
    watcher's `events`, each change is placed in time against the tool windows."""
    if forced is not None:
        for r in rows:
            r.source, r.tool, r.command, r.session_id = forced
        return
    windows = project.catalog.open_windows(project.id)
    default = _default_source(project, windows, since_ns, since_start)
    anyone = (("external" if project.catalog.has_sessions(project.id) else "unknown"),
              None, None, None, []) if events is not None else None
    edits: dict[str, list[dict]] = {}
    for w in windows:
        if w["kind"] == "tool" and w["target"] is not None:
            edits.setdefault(w["target"], []).append(w)
    for r in rows:
        source = default
        seen = _event_of(events, r.path) if events is not None else None
        if seen is not None:
            source = _source_at(project, windows, r, seen[0], seen[1], anyone)
        else:
            for w in reversed(edits.get(r.path, [])):
                if w["closed_ns"] is None or w["post_oid"] == (r.new_oid or ""):
                    source = ("tool", w["tool"], None, w["session_id"], [])
                    break
        r.source, r.tool, r.command, r.session_id = source[:4]
        r.flags = r.flags + [f for f in source[4] if f not in r.flags]


def _apply_observations(rows: list[ChangeRow], obs: dict[str, tuple]) -> list[ChangeRow]:
    """Sources from the latest observation of each path; observations of paths no tree
    holds (an edit outside the project, an ignored path) become rows of their own."""
    seen = set()
    for r in rows:
        o = obs.get(r.path)
        seen.add(r.path)
        if o is None:
            continue
        r.source, r.tool, r.command, r.session_id = o[:4]
        r.flags += [f for f in o[4].split(",") if f and f not in r.flags]
    extra = []
    for path, o in obs.items():
        flags = [f for f in o[4].split(",") if f]
        if path not in seen and ("outside" in flags or "ignored" in flags):
            extra.append(ChangeRow(path=path, status="modified", old_kind=None, new_kind=None,
                                   old_mode=None, new_mode=None, old_oid=None, new_oid=None,
                                   old_size=None, new_size=None, source=o[0], tool=o[1],
                                   command=o[2], session_id=o[3], flags=flags))
    return rows + extra


def _git_moved(prev: Checkpoint, cp: Checkpoint) -> bool:
    return (prev.git_head, prev.git_branch) != (cp.git_head, cp.git_branch) and \
        not (prev.git_head is None and cp.git_head is None)


def _git_row(prev: Checkpoint, head: str | None, branch: str | None, source: tuple) -> ChangeRow:
    return ChangeRow(path=".git/HEAD", status="modified", old_kind=None, new_kind=None,
                     old_mode=None, new_mode=None, old_oid=prev.git_head, new_oid=head,
                     old_size=None, new_size=None, source=source[0], tool=source[1],
                     command=source[2], session_id=source[3], flags=["git"])


def record(project: Project, kind: str | None, *, message: str | None = None, meta: dict | None = None,
           lock_timeout: float = 30.0, restore_target: int | None = None, locked: bool = False,
           forced: tuple | None = None, extra: list[ChangeRow] | None = None, full: bool = False,
           baseline: bool = False, progress=None, settings=config.LOAD,
           touched: dict[str, str] | None = None, hints: dict[str, tuple] | None = None):
    """Scan, attribute the segment since the last scan, and with a `kind` take checkpoint.
    The scan is quick (the watcher's dirty set) when the watcher can be trusted, else full;
    `full` forces a full one (a restore needs every protected path), `baseline` is the
    watcher's own first scan; `touched` (path -> "m" or "c", as the watcher's events) is
    everything a restore just wrote: only those paths are read again, and the watcher's
    events stay for the next scan; `hints` are stat-cache entries of files the restore wrote,
    trusted as any cache entry (same inode, size, times and mode, and older than the scan).
    Returns (checkpoint or None, scan result, timestamp)."""
    guard = nullcontext() if locked else project_lock(project.home, project.id, timeout=lock_timeout)
    with guard:
        store, catalog = project.store, project.catalog
        state = catalog.scan_state(project.id)
        if touched is not None and state["last_tree"]:
            plan = dirtymod.ScanPlan(True, None, touched, state.get("consumed_seq") or 0, None)
        else:
            touched = None
            plan = dirtymod.plan(project, state, force_full=full or baseline)
        last_tree, last_ns = state["last_tree"], state["last_scan_ns"] or 0
        load = TreeLoader(store)
        fs_now = project_clock(project.root, store)
        scan_start = time.time_ns()
        damaged = catalog.damaged()
        if damaged and plan.quick:
            # a quick scan keeps unchanged subtrees as they were, damaged objects and all
            plan = dirtymod.ScanPlan(False, "objects found damaged are stored afresh", {}, plan.upto, None)
        try:
            if plan.quick:
                cache = catalog.statcache_lookup(project.id)
                if hints:
                    hints = {p: h for p, h in hints.items() if h[2] < fs_now}   # git's racy rule
                    cache = _Hinted(cache, hints)
                try:
                    result = scan_dirty(project.root, store, cache, fs_now, last_tree, load, plan.dirty)
                    if hints:
                        _keep_hints(result, load, hints)
                except CorruptObject as e:
                    # the last tree is damaged: a full scan needs none of it
                    store.discard()
                    damaged = damaged | {e.digest}
                    plan = dirtymod.ScanPlan(False, f"a tree of the last scan is damaged ({e.digest[:12]})",
                                             {}, plan.upto, None)
            if not plan.quick:
                result = scan(project.root, store, catalog.load_statcache(project.id), fs_now, progress=progress,
                              damaged=damaged)
            store.flush()
        except BaseException:
            store.discard()
            raise
        stamp = time.time_ns()
        prev = catalog.latest(project.id, hidden=True)
        if last_tree is None and prev is not None:
            last_tree = prev.tree
        load.cache.update(result.trees)
        stats = result.stats.to_json()
        last_stats = _json(state["last_stats"])
        if touched == {}:                 # nothing read: the checkpoint of the last scan, its figures
            stats = last_stats or stats
        else:
            if plan.quick:
                stats = dirtymod.merge_stats(project.root, last_stats, stats, result.listed or [])
            dirtymod.note_hardlinks(stats, result.hardlinks, last_stats,
                                    _examined(plan.dirty) if plan.quick else None)
            stats["exclude"] = exclude_signature(project.root)
        segment: list[ChangeRow] = []
        if last_tree is not None and last_tree != result.root:
            try:
                segment = change_rows(list(diff_trees(load, last_tree, result.root)))
            except CorruptObject:
                segment = []       # the last scan's tree is damaged: what changed since is unknown
            attribute_segment(project, segment, last_ns, forced, plan.events, state.get("scan_start_ns") or None)
        segment += extra or []
        cp = None
        if kind is not None:
            if settings is config.LOAD:
                settings = config.load_quietly(project.root)
            head, branch = git_state(project.root)
            created = now_ns()
            cp = Checkpoint(project_id=project.id, number=0, kind=kind, created_at=iso(created),
                            created_ns=created, tree=result.root, message=message, git_head=head,
                            git_branch=branch, restore_target=restore_target,
                            stats=stats, **(meta or {}))
        rows: list[ChangeRow] = []
        unknown = None
        if cp is not None and prev is not None:
            try:
                pairs = list(diff_trees(load, prev.tree, result.root))
            except CorruptObject as e:
                # the previous checkpoint's tree is damaged: this checkpoint is taken all the
                # same (damage stays local); what changed between the two is unknown
                pairs = []
                unknown = f"its tree is damaged ({e.digest[:12]}): what changed after it is unknown"
            rows = change_rows(pairs, _binary_in(store), result.hardlinks)
        with catalog.transaction():
            base = prev.number if prev else None
            if segment:
                catalog.insert_observations(project.id, base, segment, stamp)
            if cp is not None:
                if prev is not None:
                    rows = _apply_observations(rows, catalog.observations(project.id, base))
                    _fallback_rewind(project, prev, rows)
                    _restored_authors(project, prev, rows)
                    if _git_moved(prev, cp):
                        source = _default_source(project, catalog.open_windows(project.id), last_ns)
                        rows.append(_git_row(prev, cp.git_head, cp.git_branch, source))
                cp.number = catalog.allocate_number(project.id)
                catalog.insert_checkpoint(cp)
                if prev is not None:
                    catalog.insert_changes(project.id, prev.number, rows)
                    if unknown:
                        catalog.set_stats(project.id, prev.number, dict(prev.stats, changes_unknown=unknown))
                if settings is not None:
                    enforce(catalog, project.id, settings, cp.created_ns)
            catalog.update_statcache(project.id, result.cache_upserts, result.cache_removed,
                                     result.removed_prefixes)
            if result.mended:
                catalog.clear_damaged(result.mended)
            counts = {} if touched is not None else {"quick_scans": state["quick_scans"] + 1} if plan.quick \
                else {"full_scans": state["full_scans"] + 1}
            if plan.reason:
                counts.update(fallbacks=state["fallbacks"] + 1, fallback=plan.reason, fallback_ns=stamp)
            if touched is not None:        # the base the watcher's events build on is still the last full one
                scan_start = state["scan_start_ns"] or 0
            catalog.set_state(project.id, result.root, stamp, scan_start_ns=scan_start,
                              consumed_seq=plan.upto, last_stats=json.dumps(stats), **counts)
            catalog.drop_events_upto(project.id, plan.upto)
        if plan.reason:
            from rewind.log import log
            log(f"{project.root}: full scan: {plan.reason}")
        return cp, result, stamp


def _examined(dirty: dict[str, str]):
    """Whether a quick scan of `dirty` looked at a path again (the path itself, or a
    directory created or moved in above it, read whole)."""
    def examined(path: str) -> bool:
        if path in dirty:
            return True
        while "/" in path:
            path = path.rpartition("/")[0]
            if dirty.get(path) == "c":
                return True
        return dirty.get("") == "c"
    return examined


COARSEST_NS = 2 * 10**9    # FAT's mtime granularity, the coarsest a project may have


def project_clock(root: str, store: Store) -> int:
    """"Now" on the project's filesystem, read from a file made there: git's racy rule
    compares file times with it, and they are the project filesystem's, which may count
    whole seconds (ext4 with 128-byte inodes, FAT, HFS+, some network mounts) and, over a
    network, run on another machine's clock. The store's filesystem answers when it is the
    same one. A project that cannot be written to gets the store's clock less the coarsest
    granularity: anything touched in the last two seconds is read again next time."""
    try:
        if os.stat(root).st_dev == os.stat(store.home).st_dev:
            return store.fs_now()
    except OSError:
        pass
    from rewind.constants import TMP_PREFIX
    path = os.path.join(root, f"{TMP_PREFIX}0.{os.getpid()}{time.monotonic_ns()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return store.fs_now() - COARSEST_NS
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass


class _Hinted:
    """A stat cache with a restore's fresh entries on top."""

    def __init__(self, base, hints: dict[str, tuple]):
        self.base, self.hints = base, hints

    def get(self, key: str):
        hint = self.hints.get(key)
        return hint if hint is not None else self.base.get(key)


def _keep_hints(result: ScanResult, load, hints: dict[str, tuple]) -> None:
    """The hints the scan used (the file is in the tree with the hinted content and was not
    read again) become the stat cache's rows."""
    def get(oid: str):
        got = result.trees.get(oid)
        return got if got is not None else load(oid)
    for path, hint in hints.items():
        if path in result.cache_upserts:
            continue
        tree, parts = get(result.root), path.split("/")
        for part in parts[:-1]:
            e = tree.get(part)
            tree = get(e.oid) if e is not None and e.kind == DIR else {}
        e = tree.get(parts[-1])
        if e is not None and e.kind == FILE and e.oid == hint[6]:
            result.cache_upserts[path] = hint


def _json(text: str | None) -> dict | None:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def capture(project: Project, kind: str, **kw) -> tuple[Checkpoint, ScanResult]:
    """Take a checkpoint of the project's tree."""
    cp, result, _ = record(project, kind, **kw)
    return cp, result


def _binary_in(store: Store, limit: int = 2000):
    """A binary check that reads at most `limit` blobs (large change sets stay cheap)."""
    budget = [limit]

    def guarded(e: Entry) -> bool:
        if e.kind != FILE or budget[0] <= 0:
            return False
        budget[0] -= 1
        return _blob_binary(store, e.oid)
    return guarded


def _fallback_rewind(project: Project, cp: Checkpoint, rows: list[ChangeRow]) -> None:
    """Without an observation, what a rewind's plan touched is `rewind`."""
    if cp.kind != "rewind":
        return
    made = project.catalog.restore_made(project.id, cp.number)
    if made is None:
        return
    restored = set(made[1] or [])
    for row in rows:
        if row.source == "unknown" and (row.path in restored
                                        or any(row.path.startswith(p + "/") for p in restored)):
            row.source = "rewind"


def _restored_authors(project: Project, cp: Checkpoint, rows: list[ChangeRow]) -> None:
    """A rewind's changes stay `rewind`; each also names who wrote the content it put back:
    the author of that path's content in the checkpoint restored (its newest change before
    it, itself followed back through earlier restores), so that after `to` and `undo` a
    person's edit put back is still the person's."""
    if cp.kind != "rewind" or cp.restore_target is None:
        return
    target = cp.restore_target
    for row in rows:
        if row.source != "rewind" or row.status == "deleted" or row.restored:
            continue
        before = project.catalog.latest_change(project.id, row.path, target)
        if before is not None and before.source == "rewind":
            row.restored = dict(before.restored or {"source": None, "tool": None, "command": None,
                                                    "session_id": None}, checkpoint=target)
        else:
            row.restored = {"checkpoint": target,
                            "source": before.source if before is not None else None,
                            "tool": before.tool if before is not None else None,
                            "command": before.command if before is not None else None,
                            "session_id": before.session_id if before is not None else None}


def live_changes(project: Project, cp: Checkpoint,
                 result: ScanResult | None = None) -> tuple[list[ChangeRow], ScanResult]:
    """Changes under the newest checkpoint: from it to the working tree, now (`result`: a
    read-only scan of the working tree the caller already made)."""
    result = result or working_scan(project)
    load = TreeLoader(project.store, result.trees)
    pairs = list(diff_trees(load, cp.tree, result.root))
    rows = change_rows(pairs, None, result.hardlinks)
    for row, (path, old, new) in zip(rows, pairs):
        if (old is not None and old.kind == FILE and _blob_binary(project.store, old.oid)) or \
                (new is not None and new.kind == FILE and _file_binary(project.store, new.oid,
                                                                       os.path.join(project.root, path))):
            row.flags.append("binary")
    # what changed since the last scan has no observation yet: attribute it as a segment would
    last_tree, last_ns = project.catalog.state(project.id)
    if last_tree is not None and last_tree != result.root:
        recent = {path for path, _, _ in diff_trees(load, last_tree, result.root)}
        pending = [r for r in rows if r.path in recent]
        attribute_segment(project, pending, last_ns,
                          since_start=project.catalog.scan_state(project.id).get("scan_start_ns") or None)
    else:
        recent = set()
    obs = project.catalog.observations(project.id, cp.number)
    rows = _apply_observations([r for r in rows if r.path not in recent], obs) + \
        [r for r in rows if r.path in recent]
    rows.sort(key=lambda r: r.path)
    _fallback_rewind(project, cp, rows)
    _restored_authors(project, cp, rows)
    return rows, result


def _blob_binary(store: Store, oid: str) -> bool:
    try:
        return store.is_binary(oid)
    except Exception:
        return False


def _file_binary(store: Store, oid: str, path: str) -> bool:
    """The working file's binary flag: remembered when this process read it, else read."""
    known = store.known_binary(oid)
    if known is not None:
        return known
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(8192)
    except OSError:
        return False


def changes_under(project: Project, cp: Checkpoint, current: ScanResult | None = None) -> list[ChangeRow]:
    """Changes under `cp`: stored when a later checkpoint exists, else live. A damaged tree
    keeps its damage to itself: its live changes are unknown (empty, and the store
    remembers the damage), and every other command goes on."""
    if project.catalog.next_after(project.id, cp.number) is not None:
        return project.catalog.changes(project.id, cp.number) or []
    if not os.path.isdir(project.root):
        cp.stats = dict(cp.stats, changes_unknown="the project's directory is gone (moved?)")
        return []
    try:
        return live_changes(project, cp, current)[0]
    except CorruptObject as e:
        cp.stats = dict(cp.stats, changes_unknown=f"its tree is damaged ({e.digest[:12]}): "
                                                   "what changed after it is unknown")
        return []
