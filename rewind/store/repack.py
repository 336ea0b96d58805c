"""Packs rewritten: the small ones merged into one (gc's step 6, and between gcs), and the raw
ones a first snapshot wrote recompressed once the store is idle. Each writes its new pack,
synced, before the old ones go, so a kill at any point loses nothing."""

from __future__ import annotations

import os

from rewind import clock
from rewind.constants import TMP_DIR
from rewind.lock import try_lock
from rewind.store.objects import BASED, PACKS_DIR, RAW_PREFIX, Store, digest_of, encode
from rewind.store.pack import RAW_SUFFIX, SMALL_PACK, Pack, PackWriter, pack_size
from rewind.store.sweep import GC_LOCK, SmallPack, remove_pack

RECOMPRESS_LOCK = "recompress.lock"   # one rewrite of the raw packs at a time
RECOMPRESS_IDLE_S = 15.0       # the background rewrite of raw packs waits until no project of the
RECOMPRESS_WAIT_MAX_S = 1800.0  # store was scanned or opened a tool window for this long (but no
IDLE_POLL_S = 2.0              # longer than this: a store never idle still gets its disk back)


def write_merged(home: str, packs: list[Pack], keep, deltas: dict[str, str] | None = None,
                 replace: dict[str, bytes] | None = None) -> None:
    """One new pack (synced) with the objects of `packs` that `keep(oid)`, each once; then
    the old packs go. Killed midway, both copies stay: no harm. `deltas`: {id: its
    predecessor's id} (delta.pairs): each such object is stored against its predecessor's
    chain root when that is worth it (delta.against; read whole and verified first, so a
    damaged one is copied as it is). `replace`: {id: body} stored instead of the pack's."""
    writer = PackWriter(os.path.join(home, TMP_DIR))
    store = Store(home) if deltas else None
    if deltas:
        from rewind.store.delta import roots
        deltas = roots(deltas)
    try:
        seen: set[str] = set()
        for pack in packs:
            for oid, off, length in pack.entries():
                if oid in seen or not keep(oid):
                    continue
                seen.add(oid)
                body = replace.get(oid) if replace else None
                if body is None:
                    body = pack.read(off, length)
                    if deltas and oid in deltas and body[:1] and body[0] not in BASED:
                        better = _delta(store, oid, deltas[oid], len(body), deltas)
                        if better is not None:
                            body = better
                writer.append(oid, body)
        writer.finish(os.path.join(home, PACKS_DIR))
    except BaseException:
        writer.abort()
        raise
    for pack in packs:
        remove_pack(home, pack.path)


def _delta(store: Store, oid: str, base: str, own: int, changing) -> bytes | None:
    from rewind.errors import CorruptObject
    from rewind.store.delta import against
    try:
        data = store.get(oid)
    except (CorruptObject, RuntimeError):
        return None
    try:
        return against(store, data, base, own, changing)
    except Exception as e:                 # a codec's own failure: the object stays as it was
        from rewind.log import log
        log(f"delta of {oid[:12]}: stored whole", e)
        return None


def merge_small(home: str, small: list[SmallPack], marked: set[str], counts, dry_run: bool,
                checkpoints=()) -> None:
    """A prompt's checkpoint makes a small pack, and readers open packs one by one; so gc
    copies the referenced objects of the small packs (and of big ones mostly unreferenced),
    all older than its start, into one new pack, synced, before it deletes them. A lone
    pack is rewritten only to leave unreferenced objects out. Killed midway, both copies
    stay: no harm. `small`: what `sweep_packs` returned; their maps are closed here.
    `checkpoints`: those gc kept; the merged objects that are a new version of a path in
    them are stored against the version before (delta.pairs), a base gc marked."""
    try:
        if not small or (len(small) == 1 and small[0].dead == 0):
            return
        counts.packs_merged = len(small)
        keep: dict[str, int] = {}
        copies = 0
        for s in small:
            for oid, _, length in s.pack.entries():
                copies += 1
                if oid in marked:
                    keep.setdefault(oid, length)
        old_bytes = sum(s.size for s in small)
        new_bytes = pack_size(keep.values())
        dead = sum(s.dead for s in small)
        # on disk, the merged packs become one of new_bytes; the copies left out are swept
        counts.packed_dead -= dead
        counts.packed_dead_bytes -= sum(s.dead_bytes for s in small)
        counts.objects_kept -= (copies - dead) - len(keep)     # duplicates become one
        counts.objects_swept += copies - len(keep)
        counts.bytes_swept += old_bytes - new_bytes
        counts.bytes_kept += new_bytes - old_bytes
        if not dry_run:
            from rewind.store.delta import pairs
            deltas = pairs(Store(home), checkpoints, set(keep)) if checkpoints else None
            # (the counts stay those of a dry run, the merged pack's before its deltas: the
            # report's store_bytes says what the disk holds)
            write_merged(home, [s.pack for s in small], marked.__contains__, deltas)
    finally:
        for s in small:
            s.pack.mm.close()


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
        from rewind.store.delta import checkpoints_of, pairs
        candidates = {oid for pack in small for oid, _, _ in pack.entries()}
        write_merged(home, small, lambda oid: True, pairs(Store(home), checkpoints_of(home), candidates))
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
    """The raw pack's file contents compressed: the small ones against a dictionary trained
    on a sample of them (delta.train: 26.1 MiB against 30.8 for zstd alone on the
    benchmark's 101 MiB of text), kept in the new pack and as a loose file, written first;
    the rest with zstd (delta.whole)."""
    from rewind.store import delta
    pack = Pack(path)
    writer = PackWriter(os.path.join(home, TMP_DIR), trickle=trickle)
    try:
        entries = list(pack.entries())
        mm = pack.mm
        small = [(off, length) for _, off, length in entries
                 if 64 < length <= delta.DICT_OBJECT_MAX + 1 and mm[off] == RAW_PREFIX[0]]
        step = max(1, len(small) // delta.DICT_SAMPLES)
        samples, size = [], 0
        for off, length in small[::step]:
            if size + length > delta.DICT_SAMPLE_BYTES:
                break
            samples.append(pack.read(off + 1, length - 1))
            size += length
        dict_bytes = delta.train(samples)
        del samples, small
        dict_id = None
        if dict_bytes is not None:
            dict_id = digest_of(dict_bytes)
            Store(home).mend(dict_id, dict_bytes)          # its loose copy, synced, before any use
            writer.append(dict_id, encode(dict_bytes))
        for oid, off, length in entries:
            body = pack.read(off, length)
            if body[:1] == RAW_PREFIX:
                data = body[1:]
                if digest_of(data) == oid:
                    better = None
                    if dict_id is not None and 64 <= len(data) <= delta.DICT_OBJECT_MAX:
                        better = delta.with_dict(dict_bytes, dict_id, data)
                    body = better or delta.whole(data)
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
