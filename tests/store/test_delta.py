"""Store format 2: objects stored against a base (store/delta.py). A store written by the
format-1 code (tests/data/store-v1.tar.gz) is taken up in place; gc's merges store new
versions against old ones; gc keeps a base as long as something needs it; damage to a base
names every checkpoint that needs it and no other; purge and reads never follow a chain
deeper than the format allows."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tarfile
import zlib
from pathlib import Path

import pytest

from helpers import run_rewind
from rewind.errors import CorruptObject
from rewind.store import tree as treemod
from rewind.store.objects import BASED, RAW_PREFIX, ZLIB_DELTA, ZSTD_DELTA, ZSTD_DICT, Store, digest_of, loose_path
from rewind.store.pack import Pack

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "store-v1.tar.gz"


def unpack(tmp_path: Path) -> tuple[Path, dict]:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "home", json.loads((tmp_path / "manifest.json").read_text())


def files_of(store: Store, tid: str, prefix: str = "") -> dict:
    out = {}
    for name, e in treemod.parse(store.get(tid)).items():
        path = f"{prefix}{name}"
        if e.kind == treemod.DIR:
            out.update(files_of(store, e.oid, path + "/"))
        elif e.kind == treemod.LINK:
            out[path] = ["link", store.get(e.oid).decode()]
        else:
            out[path] = ["file", hashlib.sha256(store.get(e.oid)).hexdigest()]
    return out


def based(home: Path) -> dict[str, tuple[str, int]]:
    """{id: (base id, codec)} of every packed object stored against a base."""
    out = {}
    for name in os.listdir(home / "objects" / "pack"):
        pack = Pack(str(home / "objects" / "pack" / name))
        for oid, base, codec in pack.based():
            out[oid] = (base, codec)
        pack.mm.close()
    return out


def gc(home: Path):
    return run_rewind("gc", env={"REWIND_HOME": str(home)}, check=0)


def verify(home: Path) -> dict:
    proc = run_rewind("verify", "--json", env={"REWIND_HOME": str(home)})
    return json.loads(proc.stdout)


def test_a_format_1_store_is_read_as_it_was_then_gains_deltas_in_place(tmp_path):
    home, manifest = unpack(tmp_path)
    assert based(home) == {}                              # format 1: every object whole
    assert verify(home)["problems"] == []
    db = sqlite3.connect(home / "catalog.sqlite")
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("11",)
    db.close()
    gc(home)                                              # merges the prompts' packs: with deltas
    deltas = based(home)
    codecs = {codec for _, codec in deltas.values()}
    assert ZLIB_DELTA in codecs and ZSTD_DELTA in codecs, deltas
    store = Store(str(home))
    for base, _ in deltas.values():
        assert base not in deltas                         # one base deep
    for number, cp in manifest.items():
        assert files_of(store, cp["tree"]) == cp["files"], number
    assert verify(home)["problems"] == []


def delta_store(tmp_path) -> tuple[Path, dict, dict]:
    home, manifest = unpack(tmp_path)
    gc(home)
    return home, manifest, based(home)


def needs(store: Store, manifest: dict, oid: str) -> set[int]:
    """The checkpoints whose trees reach `oid` or an object stored against it."""
    deps = {o for o, (b, _) in based(Path(store.home)).items() if b == oid} | {oid}
    out = set()
    for number, cp in manifest.items():
        stack = [cp["tree"]]
        while stack:
            tid = stack.pop()
            if tid in deps:
                out.add(int(number))
            for e in treemod.parse(store.get(tid)).values():
                if e.kind == treemod.DIR:
                    stack.append(e.oid)
                elif e.oid in deps:
                    out.add(int(number))
    return out


def damage(home: Path, oid: str, how: str) -> None:
    for name in os.listdir(home / "objects" / "pack"):
        path = home / "objects" / "pack" / name
        pack = Pack(str(path))
        found = pack.find(bytes.fromhex(oid))
        pack.mm.close()
        if found:
            off, length = found
            with open(path, "r+b") as f:
                if how == "flip":
                    f.seek(off + length // 2)
                    f.write(b"\xff\x00\xff")
                else:                                     # the payload's second half gone
                    f.seek(off + 33 + (length - 33) // 2)
                    f.write(b"\0" * (length - 33 - (length - 33) // 2))
            return
    raise AssertionError(f"{oid} is not packed")


def test_a_damaged_base_names_every_checkpoint_that_needs_it_and_no_other(tmp_path):
    home, manifest, deltas = delta_store(tmp_path)
    counts: dict[str, int] = {}
    for base, codec in deltas.values():
        if codec == ZSTD_DELTA:
            counts[base] = counts.get(base, 0) + 1
    base = max(counts, key=counts.get)                     # a file's version others are stored against
    store = Store(str(home))
    expected = needs(store, manifest, base)
    assert expected and expected != set(map(int, manifest))   # some checkpoints, not all
    damage(home, base, "flip")
    report = verify(home)
    named = {n for p in report["problems"] if "object" in p for n in p.get("checkpoints", [])}
    assert named == expected
    assert any(p["object"] == base for p in report["problems"])
    dependents = [o for o, (b, _) in deltas.items() if b == base]
    assert any(p["object"] in dependents and f"needs base {base[:12]}" in p["problem"]
               for p in report["problems"])
    # the other checkpoints read back whole
    store = Store(str(home))
    for number, cp in manifest.items():
        if int(number) not in expected:
            assert files_of(store, cp["tree"]) == cp["files"]


def test_a_truncated_delta_is_damaged_and_its_base_is_not(tmp_path):
    home, manifest, deltas = delta_store(tmp_path)
    oid, (base, _) = next((o, v) for o, v in deltas.items() if v[1] == ZSTD_DELTA)
    damage(home, oid, "cut")
    store = Store(str(home))
    with pytest.raises(CorruptObject):
        store.get(oid)
    store.get(base)
    problems = verify(home)["problems"]
    assert [p["object"] for p in problems if "object" in p] == [oid]


def test_gc_keeps_a_base_no_kept_checkpoint_names_while_a_delta_needs_it(tmp_path):
    home, manifest, deltas = delta_store(tmp_path)
    db = sqlite3.connect(home / "catalog.sqlite")
    db.execute("DELETE FROM checkpoints WHERE number < 5")       # as the ring would drop them
    db.commit()
    db.close()
    gc(home)
    store = Store(str(home))
    for number in ("5", "6"):
        assert files_of(store, manifest[number]["tree"]) == manifest[number]["files"]
    left = based(home)
    assert any(b not in left for b, _ in left.values())    # bases kept that only deltas need
    assert verify(home)["problems"] == []


def test_purge_stores_whole_what_was_stored_against_what_it_deletes(tmp_path):
    from rewind.history.purge import _delete
    home, manifest, deltas = delta_store(tmp_path)
    oid, (base, _) = next((o, v) for o, v in deltas.items() if v[1] == ZSTD_DELTA)
    data = Store(str(home)).get(oid)
    _delete(str(home), {base})
    store = Store(str(home))
    assert store.get(oid) == data
    with pytest.raises(CorruptObject, match="missing"):
        store.get(base)
    assert oid not in based(home)


def _loose(home: Path, oid: str, body: bytes) -> None:
    path = Path(loose_path(str(home / "objects"), oid))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def test_a_read_follows_no_chain_deeper_than_the_format_allows(tmp_path):
    """A delta of a delta of a delta (hostile or damaged bytes: the rewrites never make one)."""
    a, b, c = b"base " * 100, b"base " * 100 + b"one", b"base " * 100 + b"two"
    ia, ib, ic = digest_of(a), digest_of(b), digest_of(c)
    _loose(tmp_path, ia, b"\x01" + zlib.compress(a))

    def zdelta(data, base):
        comp = zlib.compressobj(6, zdict=base)
        return bytes([ZLIB_DELTA]) + bytes.fromhex(digest_of(base)) + comp.compress(data) + comp.flush()
    _loose(tmp_path, ib, zdelta(b, a))
    _loose(tmp_path, ic, zdelta(c, b))
    store = Store(str(tmp_path))
    assert store.get(ib) == b                            # one base: read, verified
    assert store.get(ic) == c                            # two: the format's bound
    ie = digest_of(b"e")
    _loose(tmp_path, ie, zdelta(b"e", c))
    with pytest.raises(CorruptObject, match="deeper"):
        Store(str(tmp_path)).get(ie)
    loop = digest_of(b"loop")
    _loose(tmp_path, loop, bytes([ZLIB_DELTA]) + bytes.fromhex(loop) + b"x")
    with pytest.raises(CorruptObject):
        Store(str(tmp_path)).get(loop)


def test_a_first_snapshot_is_recompressed_against_a_dictionary_kept_twice(tmp_path):
    from rewind.history.purge import _delete
    from rewind.store.repack import recompress
    import random
    rng = random.Random(3)
    words = b"def class return value index config store tree entry path data self import".split()
    store = Store(str(tmp_path))
    store.raw_packs = True
    contents = {}
    for i in range(600):
        data = b"\n".join(b" ".join(rng.choice(words) for _ in range(9)) for _ in range(rng.randint(30, 120)))
        contents[store.put(data, body=RAW_PREFIX + data)] = data   # as a fanout worker stores it
    store.flush()
    assert recompress(str(tmp_path)) == 1
    deps = based(tmp_path)
    dicts = {b for b, codec in deps.values() if codec == ZSTD_DICT}
    assert len(dicts) == 1 and len(deps) > 500
    (dict_id,) = dicts
    loose = Path(loose_path(str(tmp_path / "objects"), dict_id))
    assert loose.exists()
    loose.write_bytes(b"\x01damaged")                     # one copy damaged: the other reads
    store = Store(str(tmp_path))
    for oid, data in contents.items():
        assert store.get(oid) == data
    gone = next(iter(contents))
    _delete(str(tmp_path), {gone})                        # the dictionary may hold pieces of it
    assert not loose.exists() and based(tmp_path) == {}
    store = Store(str(tmp_path))
    for oid, data in contents.items():
        if oid != gone:
            assert store.get(oid) == data
    assert BASED == {3, 4, 5}
