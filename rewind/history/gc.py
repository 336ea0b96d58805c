"""gc: drop what the ring and the retention drop, then sweep the objects nothing needs.

Safe while hooks write (DESIGN.md "retention"), in this order:
1. `start`: the filesystem's clock, read before anything else. Objects whose mtime is not
   older than `start` are never swept (a writer's fresh or reused object: `Store.put`
   refreshes the mtime of one it reuses).
2. The catalog rows go first: each project's policy is enforced, and caches older than
   the retention are cleared.
3. Mark, beside the hooks (the long part): every tree of every kept checkpoint, the last
   scanned trees, the pre-images and the stat cache's ids. A checkpoint tree that cannot
   be read stops gc before anything is deleted.
4. Then the store lock, exclusive. Every writer holds it shared from its first catalog
   read to its commit, so while gc holds it no writer is in flight: gc reads the roots
   again and marks what was committed since step 3 (a tree marked in step 3 has its whole
   subtree marked, so this is quick), and sweeps. Nothing can start relying on an object
   while it is swept, so the sweep's safety rests on the catalog alone, not on clocks or
   on any reasoning about what a writer may reuse; the time rule of step 1 and the trash
   below stay as a second line. Hooks wait for this step (`seconds_exclusive`).
5. Sweep: an unmarked object older than `start` is moved into `gc-trash/` (atomic), its
   mtime checked again there, and only then unlinked; a pack goes when nothing in it is
   marked (see `_sweep_packs`).
6. After the lock: small packs are merged, leaving out what no root named under the lock.
   The merged pack is written and synced before the old ones go, and nothing a writer can
   come to rely on is left out (`put` never relies on a packed copy; the caches and trees
   it may reuse were all roots), so hooks do not wait for this copy, which may be large.
`dry_run` stops after computing the same plan, deleting nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
from rewind.structs import dataclass
from rewind.structs import field
from collections.abc import Callable

from rewind import config
from rewind.store import tree as treemod
from rewind.catalog.db import Catalog
from rewind.clock import iso, now_ns
from rewind.constants import OBJECTS_DIR, TMP_DIR
from rewind.errors import CorruptObject, RewindError
from rewind.lock import store_lock, try_lock
from rewind.store.objects import _SMALL_PACK
from rewind.store.objects import PACKS_DIR
from rewind.store.objects import Store
from rewind.store.objects import _Pack
from rewind.store.objects import _PackWriter
from rewind.retention import enforce
from rewind.store.tree import DIR
from rewind.store.tree import FILE
from rewind.store.tree import LARGE
from rewind.store.tree import LINK

TRASH_DIR = "gc-trash"
STAMP = "gc.stamp"
TMP_MAX_AGE_S = 86400          # staged files of a writer that died are removed after a day
BARRIER_TIMEOUT_S = 120.0
_HEX2 = re.compile(r"^[0-9a-f]{2}$")
_HEX62 = re.compile(r"^[0-9a-f]{62}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[str, int, int], None]   # (phase, done, total)


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
    seconds: float = 0.0
    seconds_exclusive: float = 0.0   # how long hooks had to wait for the sweep

    def to_json(self) -> dict:
        return dict(self.__dict__)


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
                raise RewindError(f"gc stopped before deleting anything: tree {tid[:12]} of {where} "
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
    for i, (pid, number, tree) in enumerate(cps):
        walk(tree, True, f"checkpoint {number} (project {pid})")
        if progress:
            progress("marking", i + 1, len(cps))
    for tree in roots["last_trees"]:
        walk(tree, False, "the last scan")
    marked.update(roots["preimages"])
    for kind, oid in roots["cached"]:
        if kind == DIR:
            walk(oid, False, "the stat cache")
        elif kind in (FILE, LINK) and oid:
            marked.add(oid)
    return marked


def _shards(objects: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(objects) if _HEX2.match(n))
    except FileNotFoundError:
        return []


def _recover_trash(home: str) -> None:
    """Objects a killed gc left in its trash go back; the sweep decides again."""
    trash = os.path.join(home, TRASH_DIR)
    try:
        names = os.listdir(trash)
    except FileNotFoundError:
        return
    for name in names:
        src = os.path.join(trash, name)
        if name.startswith("pack-") and name.endswith(".pack"):
            dst = os.path.join(home, PACKS_DIR, name[len("pack-"):])
        elif _HEX64.match(name):
            dst = os.path.join(home, OBJECTS_DIR, name[:2], name[2:])
        else:
            continue
        try:
            if os.path.exists(dst):
                os.unlink(src)
            else:
                os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
                os.rename(src, dst)
        except OSError:
            pass


def _sweep(home: str, marked: set[str], start_ns: int, report: GcReport, dry_run: bool,
           progress: Progress | None) -> None:
    objects = os.path.join(home, OBJECTS_DIR)
    trash = os.path.join(home, TRASH_DIR)
    if not dry_run:
        os.makedirs(trash, mode=0o700, exist_ok=True)
    shards = _shards(objects)
    for i, shard in enumerate(shards):
        sdir = os.path.join(objects, shard)
        try:
            it = list(os.scandir(sdir))
        except FileNotFoundError:
            continue
        for de in it:
            if not _HEX62.match(de.name):
                continue
            oid = shard + de.name
            try:
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if oid in marked:
                report.objects_kept += 1
                report.bytes_kept += st.st_size
                continue
            if st.st_mtime_ns >= start_ns:
                report.objects_spared += 1
                report.bytes_kept += st.st_size
                continue
            if dry_run:
                report.objects_swept += 1
                report.bytes_swept += st.st_size
                continue
            held = os.path.join(trash, oid)
            try:
                os.rename(de.path, held)
            except FileNotFoundError:
                continue
            try:
                again = os.stat(held)
            except FileNotFoundError:
                continue
            if again.st_mtime_ns >= start_ns:   # reused while we looked: put it back
                os.rename(held, de.path)
                report.objects_spared += 1
                report.bytes_kept += again.st_size
                continue
            os.unlink(held)
            report.objects_swept += 1
            report.bytes_swept += again.st_size
        if progress:
            progress("sweeping", i + 1, len(shards))


def _sweep_packs(home: str, marked: set[str], start_ns: int, report: GcReport, dry_run: bool) -> list:
    """A pack goes when nothing in it is referenced (and it is older than the start);
    otherwise it stays whole, its unreferenced objects counted as `packed_dead`. Nothing
    relies on an unreferenced packed object (`put` writes a loose copy), so no second look
    is needed before the delete."""
    pdir = os.path.join(home, PACKS_DIR)
    try:
        names = sorted(n for n in os.listdir(pdir) if n.endswith(".pack"))
    except FileNotFoundError:
        return []
    small: list[tuple[_Pack, int, int, int]] = []   # (pack, unreferenced, their bytes, pack bytes)
    for name in names:
        path = os.path.join(pdir, name)
        try:
            pack = _Pack(path)
            st = os.stat(path)
        except (OSError, ValueError):
            continue                   # damaged or gone: kept; `verify` names what it held
        size, mtime = st.st_size, st.st_mtime_ns
        entries = list(pack.entries())
        live = [n for oid, _, n in entries if oid in marked]
        dead, dead_bytes = len(entries) - len(live), sum(n for _, _, n in entries) - sum(live)
        if live and mtime < start_ns and (pack.count <= _SMALL_PACK or 2 * dead_bytes > size):
            small.append((pack, dead, dead_bytes, size))
        else:
            pack.mm.close()
        if live:
            report.objects_kept += len(live)
            report.bytes_kept += size
            report.packed_dead += dead
            report.packed_dead_bytes += dead_bytes
        elif mtime >= start_ns:
            report.objects_spared += len(entries)
            report.bytes_kept += size
        else:
            report.objects_swept += len(entries)
            report.bytes_swept += size
            if not dry_run:
                _remove_pack(home, path)
    return small             # for _merge_small, after the lock: it copies before it deletes


def _remove_pack(home: str, path: str) -> None:
    """Through gc-trash, as loose objects go: a killed gc's leftover is put back, never half."""
    os.makedirs(os.path.join(home, TRASH_DIR), mode=0o700, exist_ok=True)
    held = os.path.join(home, TRASH_DIR, f"pack-{os.path.basename(path)}")
    try:
        os.rename(path, held)
        os.unlink(held)
    except FileNotFoundError:
        pass


def _write_merged(home: str, packs: list[_Pack], keep) -> None:
    """One new pack (synced) with the objects of `packs` that `keep(oid)`, each once; then
    the old packs go. Killed midway, both copies stay: no harm."""
    writer = _PackWriter(os.path.join(home, TMP_DIR))
    try:
        seen: set[str] = set()
        for pack in packs:
            for oid, off, length in pack.entries():
                if oid not in seen and keep(oid):
                    seen.add(oid)
                    writer.append(oid, pack.read(off, length))
        writer.finish(os.path.join(home, PACKS_DIR))
    except BaseException:
        writer.abort()
        raise
    for pack in packs:
        _remove_pack(home, pack.path)


def _merge_small(home: str, small: list, marked: set[str], report: GcReport, dry_run: bool) -> None:
    """A prompt's checkpoint makes a small pack, and readers open packs one by one; so gc
    copies the referenced objects of the small packs (and of big ones mostly unreferenced),
    all older than its start, into one new pack, synced, before it deletes them. A lone
    pack is rewritten only to leave unreferenced objects out. Killed midway, both copies
    stay: no harm."""
    try:
        if not small or (len(small) == 1 and small[0][1] == 0):
            return
        from rewind.store.objects import _MAGIC
        from rewind.store.objects import _REC
        from rewind.store.objects import _TRAILER
        report.packs_merged = len(small)
        keep: dict[str, int] = {}
        copies = 0
        for pack, *_ in small:
            for oid, _, length in pack.entries():
                copies += 1
                if oid in marked:
                    keep.setdefault(oid, length)
        old_bytes = sum(size for *_, size in small)
        new_bytes = len(_MAGIC) + sum(keep.values()) + _REC * len(keep) + _TRAILER
        dead = sum(d for _, d, _, _ in small)
        # on disk, the merged packs become one of new_bytes; the copies left out are swept
        report.packed_dead -= dead
        report.packed_dead_bytes -= sum(b for _, _, b, _ in small)
        report.objects_kept -= (copies - dead) - len(keep)     # duplicates become one
        report.objects_swept += copies - len(keep)
        report.bytes_swept += old_bytes - new_bytes
        report.bytes_kept += new_bytes - old_bytes
        if not dry_run:
            _write_merged(home, [pack for pack, *_ in small], marked.__contains__)
    finally:
        for pack, *_ in small:
            pack.mm.close()


def merge_packs(home: str) -> int:
    """Copy every object of the small packs into one new pack, synced, then delete them.
    Each prompt's checkpoint adds a small pack and a hook opens packs one by one, so a
    day of prompts would slow every hook until gc; this keeps the count low between gcs.
    Nothing is dropped (no marking): every object is in the new pack before its old pack
    goes. Under gc's lock, so never beside a gc. Returns the number of packs merged."""
    fd = try_lock(home, "gc.lock")
    if fd is None:
        return 0
    small: list[_Pack] = []
    try:
        for pack in Store(home).packs().values():
            if pack.count <= _SMALL_PACK:
                small.append(pack)
            else:
                pack.mm.close()
        if len(small) < 2:
            return 0
        _write_merged(home, small, lambda oid: True)
        return len(small)
    finally:
        for pack in small:
            pack.mm.close()
        os.close(fd)


def _spawn_detached(home: str, args: list[str]) -> None:
    """Start `python ARGS` in its own session, never waited for: off the caller's time."""
    import subprocess
    import sys
    subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, cwd=home)


def spawn_merge(home: str) -> None:
    """`merge_packs` detached (a hook counted MERGE_AT packs)."""
    import rewind
    src = os.path.dirname(os.path.dirname(os.path.abspath(rewind.__file__)))
    _spawn_detached(home, ["-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from rewind.history.gc import merge_packs; merge_packs(sys.argv[2])", src, home])


def _clean_tmp(home: str, report: GcReport, dry_run: bool) -> None:
    tmp = os.path.join(home, TMP_DIR)
    cutoff = time.time() - TMP_MAX_AGE_S
    try:
        entries = list(os.scandir(tmp))
    except FileNotFoundError:
        return
    for de in entries:
        try:
            if de.is_file(follow_symlinks=False) and de.stat(follow_symlinks=False).st_mtime < cutoff:
                if not dry_run:
                    os.unlink(de.path)
                report.temp_files_removed += 1
        except FileNotFoundError:
            pass


def run(home: str, catalog: Catalog, dry_run: bool = False, progress: Progress | None = None,
        only: list[int] | None = None, auto: bool = False) -> GcReport:
    """Drop, mark, sweep (see the module docstring). `only`: enforce the policy in these
    projects alone (the sweep is always store-wide: objects are shared)."""
    began = time.monotonic()
    lock_fd = try_lock(home, "gc.lock")
    if lock_fd is None:
        raise GcBusy("another gc is running", hint="it reports what it freed in `rewind status`")
    try:
        report = GcReport(dry_run=dry_run)
        if not dry_run:
            _recover_trash(home)
        store = Store(home)
        start = store.fs_now()
        now = now_ns()
        report.started_at = iso(now)
        projects = catalog.projects()
        would_drop: set[tuple[int, int]] = set()
        for pid, root in projects:
            if only is not None and pid not in only:
                continue
            try:
                settings = config.load(root)
            except config.ConfigError as e:
                report.config_problems.append(f"{e.message} (nothing dropped in {root})")
                continue
            with catalog.transaction():
                changed = enforce(catalog, pid, settings, now, dry_run=dry_run, confirm=True,
                                  apply_shortened=not auto)
                if not dry_run:
                    # never before the oldest checkpoint still there (hidden ones too): a clock
                    # far ahead prunes nothing a checkpoint may need
                    rows = catalog.retention_rows(pid)
                    oldest = min((r[1] for r in rows), default=None)
                    before = now - settings.retention_ns if oldest is None else min(now - settings.retention_ns,
                                                                                     oldest)
                    if not rows and catalog.state(pid)[1] < before:
                        catalog.forget_state(pid)
                    report.rows_pruned += catalog.prune_history(pid, before)
            for v in changed:
                if v.keep:
                    continue
                if v.hide:
                    report.hidden.append({"project": root, "number": v.number, "reason": v.reason})
                    continue
                report.dropped.append({"project": root, "number": v.number, "reason": v.reason})
                would_drop.add((pid, v.number))
        lost = catalog.any_lost()
        if lost:
            # checkpoints the catalog lost (a deleted WAL) may be brought back from a backup of
            # it: none of their content is swept until the user decides (`gc --forget-lost`)
            report.held = (f"{len(lost)} project(s) lost their newest checkpoints from the catalog "
                           "(catalog.sqlite-wal deleted?): nothing is swept until `rewind gc --forget-lost`")
            report.seconds = round(time.monotonic() - began, 3)
            return report
        # the long walk first, beside the hooks: every tree the roots reach now
        roots = catalog.roots()
        if would_drop:
            roots["checkpoints"] = [r for r in roots["checkpoints"] if (r[0], r[1]) not in would_drop]
        unread: set[str] = set()
        marked = mark(store, roots, progress, unread=unread)
        if dry_run:
            _sweep(home, marked, start, report, dry_run, progress)
            small = _sweep_packs(home, marked, start, report, dry_run)
        else:
            # then, with no writer in flight, what they committed meanwhile, and the sweep
            with store_lock(home, exclusive=True, timeout=BARRIER_TIMEOUT_S,
                            what="the store (gc waits for hooks in flight)"):
                held = time.monotonic()
                roots = catalog.roots()
                # a tree the first pass could not read may sit below one it walked: then the
                # walk starts over, so that a checkpoint's unreadable tree still stops gc
                marked = mark(store, roots, None, None if unread else marked)
                _sweep(home, marked, start, report, dry_run, progress)
                small = _sweep_packs(home, marked, start, report, dry_run)
                report.seconds_exclusive = round(time.monotonic() - held, 3)
        # merging small packs writes one new pack (it may be large) before deleting them and
        # drops only what no root named under the lock: nothing a writer can come to rely on
        # (put never relies on a packed copy), so hooks need not wait for it
        _merge_small(home, small, marked, report, dry_run)
        _clean_tmp(home, report, dry_run)
        report.seconds = round(time.monotonic() - began, 3)
        if not dry_run:
            with catalog.transaction():
                catalog.set_meta("last_gc", json.dumps(report.to_json(), sort_keys=True))
            touch_stamp(home)
        return report
    finally:
        os.close(lock_fd)


def object_sizes(home: str) -> dict[str, int]:
    """Every object in the store and its size on disk."""
    out: dict[str, int] = {}
    objects = os.path.join(home, OBJECTS_DIR)
    for shard in _shards(objects):
        try:
            with os.scandir(os.path.join(objects, shard)) as it:
                for de in it:
                    if _HEX62.match(de.name):
                        try:
                            out[shard + de.name] = de.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            pass
        except FileNotFoundError:
            pass
    for pack in Store(home).packs().values():
        for oid, _, n in pack.entries():
            out.setdefault(oid, n)
    return out


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


# -- gc by itself ------------------------------------------------------------------------

def touch_stamp(home: str) -> None:
    path = os.path.join(home, STAMP)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    os.utime(path)


def due(home: str, interval_hours: float) -> bool:
    """Whether gc should run by itself; the first call only starts the clock."""
    if interval_hours <= 0:
        return False
    path = os.path.join(home, STAMP)
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        try:
            touch_stamp(home)
        except OSError:
            pass
        return False
    # a stamp in the future: made under a clock that was ahead; gc would never be due again
    return age >= interval_hours * 3600 or age < -3600


def spawn_if_due(home: str) -> bool:
    """Start `rewind gc --auto` detached when it is due: never inside the caller's time.
    The stamp is refreshed first, so racing callers start one gc, not many."""
    settings = config.load_quietly(None)
    if settings is None or not due(home, settings.gc_interval_hours):
        return False
    touch_stamp(home)
    _spawn_detached(home, ["-m", "rewind", "gc", "--auto"])
    return True
