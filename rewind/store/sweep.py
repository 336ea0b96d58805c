"""The store's side of gc: what it does to the on-disk layout, asked by name.

history/gc.py decides what is marked and when it is safe to delete (its numbered protocol);
this module knows where objects live and how they go: the sweep of loose objects and packs
(step 5), the trash that makes a deletion atomic and a killed gc harmless, the merge of
small packs (step 6), staging files of killed writers, and the sizes `status` reports.

Every function that counts adds to `counts`: a `SweepCounts`, or gc's report (the same
fields). With `dry_run` each counts exactly what it would do and changes nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from rewind import clock
from rewind.constants import OBJECTS_DIR, TMP_DIR
from rewind.lock import try_lock
from rewind.store.objects import PACKS_DIR, RAW_PREFIX, Store, digest_of, encode, loose_path
from rewind.store.pack import RAW_SUFFIX, SMALL_PACK, Pack, PackWriter, pack_size
from rewind.structs import dataclass

TRASH_DIR = "gc-trash"
GC_LOCK = "gc.lock"            # gc and the pack merge, never both at once
RECOMPRESS_LOCK = "recompress.lock"   # one rewrite of the raw packs at a time
RECOMPRESS_IDLE_S = 15.0       # the background rewrite of raw packs waits until no project of the
RECOMPRESS_WAIT_MAX_S = 1800.0  # store was scanned or opened a tool window for this long (but no
IDLE_POLL_S = 2.0              # longer than this: a store never idle still gets its disk back)
TMP_MAX_AGE_S = 86400          # staged files of a writer that died are removed after a day
_HEX2 = re.compile(r"^[0-9a-f]{2}$")
_HEX62 = re.compile(r"^[0-9a-f]{62}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[str, int, int], None]   # (phase, done, total)


@dataclass
class SweepCounts:
    objects_kept: int = 0
    bytes_kept: int = 0
    objects_swept: int = 0
    bytes_swept: int = 0
    objects_spared: int = 0      # unreferenced but newer than the start (a writer's, in flight)
    packed_dead: int = 0         # unreferenced, kept in a pack that holds referenced ones
    packed_dead_bytes: int = 0
    packs_merged: int = 0        # small packs whose referenced objects went into one
    temp_files_removed: int = 0


def _shards(objects: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(objects) if _HEX2.match(n))
    except FileNotFoundError:
        return []


def recover_trash(home: str) -> None:
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
            dst = loose_path(os.path.join(home, OBJECTS_DIR), name)
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


def sweep_loose(home: str, marked: set[str], start_ns: int, counts, dry_run: bool,
                progress: Progress | None) -> None:
    """An unmarked loose object older than `start_ns` is moved into gc-trash/ (atomic), its
    mtime checked again there (a writer may have reused it meanwhile: then it goes back),
    and only then unlinked."""
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
                counts.objects_kept += 1
                counts.bytes_kept += st.st_size
                continue
            if st.st_mtime_ns >= start_ns:
                counts.objects_spared += 1
                counts.bytes_kept += st.st_size
                continue
            if dry_run:
                counts.objects_swept += 1
                counts.bytes_swept += st.st_size
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
                counts.objects_spared += 1
                counts.bytes_kept += again.st_size
                continue
            os.unlink(held)
            counts.objects_swept += 1
            counts.bytes_swept += again.st_size
        if progress:
            progress("sweeping", i + 1, len(shards))


def sweep_packs(home: str, marked: set[str], start_ns: int, counts, dry_run: bool) -> list:
    """A pack goes when nothing in it is referenced (and it is older than the start);
    otherwise it stays whole, its unreferenced objects counted as `packed_dead`. Nothing
    relies on an unreferenced packed object (`put` writes a loose copy), so no second look
    is needed before the delete. Returns the packs to merge, for `merge_small`."""
    pdir = os.path.join(home, PACKS_DIR)
    try:
        names = sorted(n for n in os.listdir(pdir) if n.endswith(".pack"))
    except FileNotFoundError:
        return []
    small: list[tuple[Pack, int, int, int]] = []   # (pack, unreferenced, their bytes, pack bytes)
    for name in names:
        path = os.path.join(pdir, name)
        try:
            pack = Pack(path)
            st = os.stat(path)
        except (OSError, ValueError):
            continue                   # damaged or gone: kept; `verify` names what it held
        size, mtime = st.st_size, st.st_mtime_ns
        entries = list(pack.entries())
        live = [n for oid, _, n in entries if oid in marked]
        dead, dead_bytes = len(entries) - len(live), sum(n for _, _, n in entries) - sum(live)
        if live and mtime < start_ns and (pack.count <= SMALL_PACK or 2 * dead_bytes > size) \
                and not name.endswith(RAW_SUFFIX):       # recompress rewrites those
            small.append((pack, dead, dead_bytes, size))
        else:
            pack.mm.close()
        if live:
            counts.objects_kept += len(live)
            counts.bytes_kept += size
            counts.packed_dead += dead
            counts.packed_dead_bytes += dead_bytes
        elif mtime >= start_ns:
            counts.objects_spared += len(entries)
            counts.bytes_kept += size
        else:
            counts.objects_swept += len(entries)
            counts.bytes_swept += size
            if not dry_run:
                remove_pack(home, path)
    return small             # for merge_small, after the lock: it copies before it deletes


def remove_pack(home: str, path: str) -> None:
    """Through gc-trash, as loose objects go: a killed gc's leftover is put back, never half."""
    os.makedirs(os.path.join(home, TRASH_DIR), mode=0o700, exist_ok=True)
    held = os.path.join(home, TRASH_DIR, f"pack-{os.path.basename(path)}")
    try:
        os.rename(path, held)
        os.unlink(held)
    except FileNotFoundError:
        pass


def write_merged(home: str, packs: list[Pack], keep) -> None:
    """One new pack (synced) with the objects of `packs` that `keep(oid)`, each once; then
    the old packs go. Killed midway, both copies stay: no harm."""
    writer = PackWriter(os.path.join(home, TMP_DIR))
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
        remove_pack(home, pack.path)


def merge_small(home: str, small: list, marked: set[str], counts, dry_run: bool) -> None:
    """A prompt's checkpoint makes a small pack, and readers open packs one by one; so gc
    copies the referenced objects of the small packs (and of big ones mostly unreferenced),
    all older than its start, into one new pack, synced, before it deletes them. A lone
    pack is rewritten only to leave unreferenced objects out. Killed midway, both copies
    stay: no harm. `small`: what `sweep_packs` returned; their maps are closed here."""
    try:
        if not small or (len(small) == 1 and small[0][1] == 0):
            return
        counts.packs_merged = len(small)
        keep: dict[str, int] = {}
        copies = 0
        for pack, *_ in small:
            for oid, _, length in pack.entries():
                copies += 1
                if oid in marked:
                    keep.setdefault(oid, length)
        old_bytes = sum(size for *_, size in small)
        new_bytes = pack_size(keep.values())
        dead = sum(d for _, d, _, _ in small)
        # on disk, the merged packs become one of new_bytes; the copies left out are swept
        counts.packed_dead -= dead
        counts.packed_dead_bytes -= sum(b for _, _, b, _ in small)
        counts.objects_kept -= (copies - dead) - len(keep)     # duplicates become one
        counts.objects_swept += copies - len(keep)
        counts.bytes_swept += old_bytes - new_bytes
        counts.bytes_kept += new_bytes - old_bytes
        if not dry_run:
            write_merged(home, [pack for pack, *_ in small], marked.__contains__)
    finally:
        for pack, *_ in small:
            pack.mm.close()


def merge_packs(home: str) -> int:
    """Copy every object of the small packs into one new pack, synced, then delete them.
    Each prompt's checkpoint adds a small pack and a hook opens packs one by one, so a
    day of prompts would slow every hook until gc; this keeps the count low between gcs.
    Nothing is dropped (no marking): every object is in the new pack before its old pack
    goes. Under gc's lock, so never beside a gc. Returns the number of packs merged."""
    fd = try_lock(home, GC_LOCK)
    if fd is None:
        return 0
    small: list[Pack] = []
    try:
        for name, pack in Store(home).packs().items():
            if pack.count <= SMALL_PACK and not name.endswith(RAW_SUFFIX):   # recompress's
                small.append(pack)
            else:
                pack.mm.close()
        if len(small) < 2:
            return 0
        write_merged(home, small, lambda oid: True)
        return len(small)
    finally:
        for pack in small:
            pack.mm.close()
        os.close(fd)


def recompress(home: str, wait: bool = False, sleep=None) -> int:
    """Rewrite each raw pack (a first snapshot's file contents, stored uncompressed for
    speed: capture/fanout.py) as a normal one of the same name without "-raw", compressed,
    then delete it; returns the packs rewritten. The new pack is synced before the raw one
    goes, so a kill at any point loses nothing; a run that finds the new pack there already
    (a kill between the two) only deletes the raw one, so no second copy is ever made. No gc
    lock: gc and merges never merge a raw pack, and deleting one a gc deleted first is no
    harm. A body that no longer matches its id is copied as it is, for `verify`; a pack that
    cannot be read, or a full disk, leaves that pack raw (logged) and goes on.

    `wait` (the background job, background.spawn_recompress): before each pack, wait until
    the store is idle (wait_for_idle). It reads and writes the whole snapshot again and
    deletes a pack as big as the project: run beside a session, its syncs and the delete
    held a hook's commit back by half a second (measured, a stream session's first shell
    PreToolUse: 493 ms against 21 ms). Its pack's writeback trickles (PackWriter)."""
    fd = try_lock(home, RECOMPRESS_LOCK)
    if fd is None:
        return 0                       # another run is at it
    done = 0
    try:
        pdir = os.path.join(home, PACKS_DIR)
        try:
            names = sorted(n for n in os.listdir(pdir) if n.endswith(RAW_SUFFIX))
        except FileNotFoundError:
            return 0
        for name in names:
            if wait:
                wait_for_idle(home, sleep=sleep)
            path = os.path.join(pdir, name)
            final = name[:-len(RAW_SUFFIX)] + ".pack"
            if not os.path.exists(os.path.join(pdir, final)):
                try:
                    _recompress_one(home, path, final, trickle=wait)
                except FileNotFoundError:
                    continue           # gc swept it meanwhile
                except Exception as e:
                    from rewind.log import log
                    log(f"recompress {path}: left as it is", e)
                    continue
            remove_pack(home, path)
            done += 1
    finally:
        os.close(fd)
    return done


def _recompress_one(home: str, path: str, final: str, trickle: bool = False) -> None:
    pack = Pack(path)
    writer = PackWriter(os.path.join(home, TMP_DIR), trickle=trickle)
    try:
        for oid, off, length in pack.entries():
            body = pack.read(off, length)
            if body[:1] == RAW_PREFIX:
                data = body[1:]
                if digest_of(data) == oid:
                    body = encode(data, fast=True)
            writer.append(oid, body)
        writer.finish(os.path.dirname(path), name=final)
    except BaseException:
        writer.abort()
        raise
    finally:
        pack.mm.close()


def _last_activity(home: str) -> int | None:
    """When a project of this store was last scanned or opened a tool window (wall ns; 0:
    never, or no catalog), from the catalog; None when it cannot be read."""
    from rewind.constants import CATALOG_NAME
    if not os.path.exists(os.path.join(home, CATALOG_NAME)):
        return 0                       # (and none is made: the home may be on its way out)
    try:
        from rewind.catalog.db import Catalog
        cat = Catalog(home)
        try:
            return cat.last_activity()
        finally:
            cat.close()
    except Exception:                  # a damaged or newer catalog, a busy one: not known
        return None


def wait_for_idle(home: str, idle_s: float = RECOMPRESS_IDLE_S, max_wait_s: float = RECOMPRESS_WAIT_MAX_S,
                  sleep=None) -> float:
    """Wait until no project of the store was scanned or opened a tool window for `idle_s`
    (a hook's mark: every prompt, shell command and turn's end scans), or `max_wait_s` went
    by, or the catalog cannot be read. A clock that jumped back (activity in the future) only
    waits the longest. Returns the seconds waited."""
    import time
    sleep = sleep or time.sleep
    began = time.monotonic()
    while True:
        last = _last_activity(home)
        if last is None:
            break
        quiet = (clock.wall_ns() - last) / 1e9
        if quiet >= idle_s:
            break
        left = max_wait_s - (time.monotonic() - began)
        if left <= 0:
            break
        sleep(min(left, max(IDLE_POLL_S, idle_s - quiet) if quiet >= 0 else IDLE_POLL_S))
    return time.monotonic() - began


def clean_tmp(home: str, counts, dry_run: bool) -> None:
    """Staging files older than TMP_MAX_AGE_S: left by writers that were killed."""
    tmp = os.path.join(home, TMP_DIR)
    cutoff = clock.wall() - TMP_MAX_AGE_S
    try:
        entries = list(os.scandir(tmp))
    except FileNotFoundError:
        return
    for de in entries:
        try:
            if de.is_file(follow_symlinks=False) and de.stat(follow_symlinks=False).st_mtime < cutoff:
                if not dry_run:
                    os.unlink(de.path)
                counts.temp_files_removed += 1
        except FileNotFoundError:
            pass


def totals(home: str) -> tuple[int, int]:
    """(objects, bytes) of the store as `status` and `gc` both report it: each object once,
    loose or packed, and the bytes its files take on disk (loose files and whole packs)."""
    ids: set[str] = set()
    size = 0
    objects = os.path.join(home, OBJECTS_DIR)
    for shard in _shards(objects):
        try:
            with os.scandir(os.path.join(objects, shard)) as it:
                for de in it:
                    if _HEX62.match(de.name):
                        try:
                            size += de.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            continue
                        ids.add(shard + de.name)
        except FileNotFoundError:
            pass
    for pack in Store(home).packs().values():
        try:
            size += os.stat(pack.path).st_size
        except OSError:
            continue
        ids.update(oid for oid, _, _ in pack.entries())
    return len(ids), size


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
