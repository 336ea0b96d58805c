"""The store's side of gc: what it does to the on-disk layout, asked by name.

history/gc.py decides what is marked and when it is safe to delete (its numbered protocol);
this module knows where objects live and how they go: the sweep of loose objects and packs
(step 5), the trash that makes a deletion atomic and a killed gc harmless, and the staging
files of killed writers. The merge of small packs (step 6) and the rewrite of raw packs are
store/repack.py; the sizes `status` reports, store/usage.py.

Every function that counts adds to `counts`: a `SweepCounts`, or gc's report (the same
fields). With `dry_run` each counts exactly what it would do and changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from rewind import clock
from rewind.constants import OBJECTS_DIR, TMP_DIR
from rewind.store.objects import PACKS_DIR, is_oid, loose_path
from rewind.store.pack import RAW_SUFFIX, SMALL_PACK, Pack
from rewind.store.usage import is_loose_name, shards
from rewind.structs import dataclass

TRASH_DIR = "gc-trash"
GC_LOCK = "gc.lock"            # gc and the pack merge, never both at once
TMP_MAX_AGE_S = 86400          # staged files of a writer that died are removed after a day

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


class SmallPack(NamedTuple):
    """A pack the sweep kept that repack.merge_small rewrites (its map still open)."""
    pack: Pack
    dead: int            # its unreferenced objects
    dead_bytes: int      # ...and their bytes
    size: int            # the pack file's bytes


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
        elif is_oid(name):
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
    in_shards = shards(objects)
    for i, shard in enumerate(in_shards):
        sdir = os.path.join(objects, shard)
        try:
            it = list(os.scandir(sdir))
        except FileNotFoundError:
            continue
        for de in it:
            if not is_loose_name(de.name):
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
            progress("sweeping", i + 1, len(in_shards))


def sweep_packs(home: str, marked: set[str], start_ns: int, counts, dry_run: bool) -> list[SmallPack]:
    """A pack goes when nothing in it is referenced (and it is older than the start);
    otherwise it stays whole, its unreferenced objects counted as `packed_dead`. Nothing
    relies on an unreferenced packed object (`put` writes a loose copy), so no second look
    is needed before the delete. Returns the packs to merge, for repack.merge_small."""
    pdir = os.path.join(home, PACKS_DIR)
    try:
        names = sorted(n for n in os.listdir(pdir) if n.endswith(".pack"))
    except FileNotFoundError:
        return []
    small: list[SmallPack] = []
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
            small.append(SmallPack(pack, dead, dead_bytes, size))
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
