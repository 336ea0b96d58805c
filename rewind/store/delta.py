"""Objects stored against a base (store format 2): a new version of a file, or a directory's
tree, against an earlier version of the same path; and a first snapshot's file contents
against a zstd dictionary trained on them.

Made only when packs are rewritten in the background (store/repack.py: the merges between
gcs and gc's, and the recompression of a first snapshot's raw packs), never by a hook, so
the hooks' cost is unchanged; git makes its deltas in `git gc` for the same reason. The
body is the codec byte (objects.ZSTD_DELTA, ZLIB_DELTA, ZSTD_DICT), the base's 32-byte id,
then the payload.

Chains stay one base deep: a version is stored against the root of its predecessor's chain
(the predecessor itself when it is whole), and a delta that is not at most KEEP_DELTA of the
object's own body is not kept, so that version becomes a root for the next. A root may be
dictionary-compressed and a dictionary is never based, so a read follows at most two bases
(objects.MAX_DEPTH). Trees use zlib with the base as zdict: a hook's scan reads trees with
the standard library only.

Who relies on a base: gc marks the bases of everything it marks (`mark_bases`), so a base
lives as long as one object needs it, whatever checkpoint it came from; purge re-stores the
objects based on what it deletes, whole, first (history/purge.py); `verify` names, for a
damaged base, every checkpoint whose objects need it (their reads fail, naming the base).
A dictionary is kept twice, in its pack and as a loose file: every object of its pack
needs it.
"""

from __future__ import annotations

import zlib

from rewind.errors import CorruptObject
from rewind.store.objects import (ZLIB_DELTA, ZSTD_DELTA, ZSTD_DICT, Store, _zstd_module, base_of, digest_of,
                                  encode)

LEVEL = 3                # zstd for rewritten contents: 30.8 MiB against level 1's 32.3 on the
                         # benchmark's 101 MiB of text, at 208 against 228 MB/s (one core, measured)
ZLIB_LEVEL = 6
KEEP_DELTA = 0.5         # a delta is kept when it is at most this share of the object's own body
DELTA_MAX = 16 << 20     # objects and bases above this are stored whole (the window a delta needs)
DICT_SIZE = 112 * 1024   # zstd's default dictionary size
DICT_OBJECT_MAX = 128 * 1024   # a dictionary helps small files; bigger ones compress well alone
DICT_MIN_BYTES = 1 << 20       # ...and needs this much sample to be worth training
DICT_SAMPLES = 4000            # samples at most (training takes ~0.5 s for 1,000 of 10 KB)
DICT_SAMPLE_BYTES = 16 << 20


def zstd():
    return _zstd_module() or None


_compressors: dict = {}


def _compressor(dict_bytes: bytes):
    """A compressor with this trained dictionary (one per dictionary, kept: a recompression
    uses one for a whole pack)."""
    z = zstd()
    key = digest_of(dict_bytes)
    c = _compressors.get(key)
    if c is None:
        d = z.ZstdCompressionDict(dict_bytes, dict_type=z.DICT_TYPE_FULLDICT)
        c = z.ZstdCompressor(level=LEVEL, dict_data=d)
        if len(_compressors) > 8:
            _compressors.clear()
        _compressors[key] = c
    return c


def whole(data: bytes) -> bytes:
    """An object's own body, as a rewrite stores it: zstd at LEVEL when this process has it."""
    return encode(data, fast=True, level=LEVEL)


def is_tree(data: bytes) -> bool:
    from rewind.constants import TREE_FORMAT
    return data.startswith(TREE_FORMAT)


def against(store: Store, data: bytes, base_id: str, own: int, changing=()) -> bytes | None:
    """`data` stored against the root of `base_id`'s chain, or None when that is not worth
    it (not at most KEEP_DELTA of `own`, the length of its own body) or cannot be done (the
    base is damaged, missing or too big, or its root is in `changing`: becoming a delta in
    the same rewrite)."""
    if len(data) > DELTA_MAX:
        return None
    try:
        raw = store._raw(base_id)
        root = base_of(raw)
        if root is not None and raw[0] != ZSTD_DICT:
            base_id = root                     # the predecessor is a delta: its root instead
            if root in changing:
                return None
        base = store.get(base_id)
    except (CorruptObject, ValueError, RuntimeError):
        return None
    if len(base) > DELTA_MAX or not base:
        return None
    head = bytes.fromhex(base_id)
    z = zstd()
    if is_tree(data) or z is None:
        c = zlib.compressobj(ZLIB_LEVEL, zdict=base)
        body = bytes([ZLIB_DELTA]) + head + c.compress(data) + c.flush()
    else:
        d = z.ZstdCompressionDict(base, dict_type=z.DICT_TYPE_RAWCONTENT)
        params = z.ZstdCompressionParameters.from_level(LEVEL, source_size=len(data),
                                                        window_log=max(17, min(27, (len(base) + len(data)).bit_length())))
        body = bytes([ZSTD_DELTA]) + head + z.ZstdCompressor(compression_params=params, dict_data=d).compress(data)
    return body if len(body) <= KEEP_DELTA * own else None


def roots(deltas: dict[str, str]) -> dict[str, str]:
    """{object id: the base it is stored against} for a rewrite whose `deltas` are {id: its
    predecessor} (`pairs`): each chain of predecessors inside the rewrite is followed to its
    first object outside it, which the rewrite leaves as it is, so that every object of the
    chain is stored against that one and no base becomes a delta in the same rewrite (a
    chain one deep). A cycle (a file that went back to an earlier content) is cut where it
    closes: that object stays whole."""
    deltas = dict(deltas)
    out: dict[str, str] = {}
    for start in list(deltas):
        if start in out or start not in deltas:
            continue
        path, on_path, r = [], set(), start
        while r in deltas and r not in out:
            if r in on_path:
                del deltas[r]            # the cycle closes here: r stays as it is
                break
            path.append(r)
            on_path.add(r)
            r = deltas[r]
        final = out.get(r, r)
        for p in path:
            if p in deltas and p != final:
                out[p] = final
    return out


def pairs(store: Store, checkpoints, candidates) -> dict[str, str]:
    """{object id: the id of the same path's version in the checkpoint before} for the
    objects in `candidates` (those being rewritten): each project's consecutive checkpoints,
    walked down the directories that differ. A tree that cannot be read is left out."""
    out: dict[str, str] = {}
    parsed: dict[str, dict | None] = {}

    def tree(oid: str):
        if oid not in parsed:
            from rewind.store import tree as treemod
            try:
                parsed[oid] = treemod.parse(store.get(oid))
            except (CorruptObject, ValueError, RuntimeError):
                parsed[oid] = None
            if len(parsed) > 4096:
                parsed.clear()
        return parsed.get(oid)

    def walk(new: str, old: str) -> None:
        stack = [(new, old)]
        while stack:
            n, o = stack.pop()
            if n == o or n not in candidates or n in out:
                continue
            out[n] = o
            nt, ot = tree(n), tree(o)
            if not nt or not ot:
                continue
            for name, e in nt.items():
                f = ot.get(name)
                if f is None or not e.oid or not f.oid or f.oid == e.oid or e.kind != f.kind:
                    continue
                if e.kind == "D":
                    stack.append((e.oid, f.oid))
                elif e.kind == "F" and e.oid in candidates and e.oid not in out:
                    out[e.oid] = f.oid

    by_project: dict[int, list] = {}
    for cp in checkpoints:
        by_project.setdefault(cp.project_id, []).append(cp)
    for cps in by_project.values():
        cps.sort(key=lambda cp: cp.number)
        for prev, cur in zip(cps, cps[1:]):
            if cur.tree != prev.tree:
                walk(cur.tree, prev.tree)
    return out


def checkpoints_of(home: str) -> list:
    """Every checkpoint of the store (hidden ones and the trash's too), for `pairs`; [] when
    the catalog cannot be read (the rewrite then makes no deltas)."""
    import os
    from rewind.constants import CATALOG_NAME
    if not os.path.exists(os.path.join(home, CATALOG_NAME)):
        return []
    try:
        from rewind.catalog.db import Catalog
        cat = Catalog(home)
        try:
            return list(cat.roots()["checkpoints"])
        finally:
            cat.close()
    except Exception:
        return []


def mark_bases(store: Store, marked: set[str]) -> set[str]:
    """Add to `marked` the bases its packed objects need (and theirs): gc keeps them."""
    based = [pack.based() for pack in store.packs().values()]
    todo = True
    while todo:
        todo = False
        for entries in based:
            for oid, base, _ in entries:
                if oid in marked and base not in marked:
                    marked.add(base)
                    todo = True
    return marked


def train(samples: list[bytes]) -> bytes | None:
    """A zstd dictionary trained on `samples`, or None (no zstd, too little sample, training failed)."""
    z = zstd()
    if z is None or sum(map(len, samples)) < DICT_MIN_BYTES:
        return None
    try:
        return z.train_dictionary(DICT_SIZE, samples, level=LEVEL).as_bytes()
    except Exception:
        return None


def with_dict(dict_bytes: bytes, dict_id: str, data: bytes) -> bytes | None:
    """`data` compressed with the dictionary, or None when that saves less than 10%."""
    payload = _compressor(dict_bytes).compress(data)
    if len(payload) + 33 >= 0.9 * len(data):
        return None
    return bytes([ZSTD_DICT]) + bytes.fromhex(dict_id) + payload
