"""A first snapshot on worker processes (capture/fanout.py) records exactly what the
sequential scan records: the same trees, stats, protected paths, stat cache rows and stored
objects, on real trees, with real worker processes. A worker that dies, a worker that
cannot start, and a directory swapped for a symlink after the plan listed it: the scan runs
again on threads and still records what the sequential scan records."""

from __future__ import annotations

import os
import random
import shutil
import sys

import pytest

from rewind.capture import fanout, fanout_worker
from rewind.capture.scan import scan
from rewind.errors import CorruptObject
from rewind.log import log_path
from rewind.store.objects import RAW, Store
from rewind.store.pack import RAW_SUFFIX, Pack
from rewind.store.repack import _recompress_one, merge_packs, recompress
from test_parallel_scan import LIMIT, busy_tree, contents, scanned, write

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX")


@pytest.fixture(autouse=True)
def small_shares(monkeypatch):
    """Shares of a few files, on two workers whatever the machine: a small tree is cut
    into many shares, directories split between them, as a big one is."""
    monkeypatch.setattr(fanout, "MIN_SHARE", 8)
    monkeypatch.setattr(fanout, "workers", lambda: 2)


def fanned(root, home, **kw):
    store = Store(str(home))
    result = scan(str(root), store, {}, 2**62, fanout_after=1, **kw)
    store.flush()
    return result, store


def tree_of(tmp_path):
    root = tmp_path / "proj"
    busy_tree(str(root), random.Random(3), files=500)
    for i in range(300):                        # one directory bigger than a share
        write(str(root), f"flat/f{i:03}.txt", f"flat {i}\n")
    write(str(root), "flat/.gitignore", "f1*.txt\n")
    write(str(root), "deep/" + "/".join(f"l{i}" for i in range(30)) + "/leaf.txt", "deep")
    os.symlink("flat", str(root / "flatlink"))
    os.makedirs(str(root / ".git"))
    write(str(root), ".git/HEAD", "ref: refs/heads/main\n")
    write(str(root), "nonutf8/" + os.fsdecode(b"caf\xe9.txt"), "a name that is not UTF-8")
    # special files all over, the root's before and after its big directories in the listing:
    # the lists of them must keep the walk's order
    for where in ("flat/", "deep/l0/", "deep/l0/l1/l2/", "nonutf8/", *(f"d{i}/" for i in range(6)),
                  *(f"p{i}-" for i in range(12))):
        os.makedirs(str(root / where.rpartition("/")[0]), exist_ok=True)
        os.mkfifo(str(root / f"{where}pipe"))
    return root


def same_as_sequential(root, tmp_path, got, got_store):
    seq, seq_store = scanned(root, None, tmp_path / "seq", max_size=LIMIT)
    assert got.root == seq.root
    assert got.trees == seq.trees
    assert got.stats == seq.stats            # the lists of large, special, ... files in the same order
    assert got.protected == seq.protected and got.hardlinks == seq.hardlinks
    assert got.cache_upserts == seq.cache_upserts
    stored = contents(got_store)
    assert stored.keys() >= contents(seq_store).keys()      # a worker may store a blob the other stored too
    for tree in got.trees.values():
        for e in tree.values():
            if e.kind in ("F", "L"):
                assert e.oid in stored


def test_workers_record_what_the_sequential_scan_records(tmp_path):
    root = tree_of(tmp_path)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    assert got.workers == 2
    same_as_sequential(root, tmp_path, got, store)
    assert got.stats.large == ["big/too_large.bin"] and len(got.stats.special) == 23
    assert ".git" in got.protected and "build" in got.protected and "hard.txt" in got.hardlinks
    flat = got.trees[got.trees[got.root]["flat"].oid]
    assert len(flat) == 300 - 100 + 1        # f100-f199 ignored by its own .gitignore
    # each worker made its pack durable under objects/pack, named raw; nothing is left in tmp/
    # (a worker that started late on a busy machine may have found every share taken)
    assert 1 <= len(got.raw_packs) <= 2 and set(got.raw_packs) <= set(os.listdir(packs_dir(store)))
    assert not [n for n in os.listdir(store.tmp) if n.startswith("pack.")]
    # read back by a process that did not write it
    fresh = Store(store.home)
    for oid in got.trees:
        assert fresh.get(oid)


def test_a_small_tree_is_scanned_in_process(tmp_path):
    root = tmp_path / "proj"
    for i in range(40):
        write(str(root), f"d{i % 3}/f{i}.txt", f"file {i}")
    store = Store(str(tmp_path / "home"))
    got = scan(str(root), store, {}, 2**62, fanout_after=41)
    assert got.workers == 0 and got.stats.files == 40


def test_a_stat_cache_means_no_workers(tmp_path):
    """Only a scan with nothing to go by reads everything; any other is mostly cache hits."""
    root = tree_of(tmp_path)
    first, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    again = scan(str(root), store, dict(first.cache_upserts), 2**62, fanout_after=1, max_size=LIMIT)
    assert again.workers == 0 and again.root == first.root


def _log() -> str:
    try:
        with open(log_path(), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_a_worker_killed_mid_scan_hands_the_scan_to_threads(tmp_path, monkeypatch):
    root = tree_of(tmp_path)
    call = fanout_worker.WorkerProcess.call
    killed = []

    def call_then_die(self, *msg):
        if msg[0] == "share" and not killed:
            self.proc.kill()                      # a real death, at a known point
            self.proc.wait()
            killed.append(self.proc.pid)
        return call(self, *msg)
    monkeypatch.setattr(fanout_worker.WorkerProcess, "call", call_then_die)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    assert killed and got.workers == 0
    same_as_sequential(root, tmp_path, got, store)
    assert "a worker stopped answering" in _log() and "scanning on threads instead" in _log()


def test_no_worker_can_start(tmp_path, monkeypatch):
    root = tree_of(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    assert got.workers == 0
    same_as_sequential(root, tmp_path, got, store)
    assert "no worker could start" in _log()


def test_a_directory_swapped_for_a_link_after_the_plan(tmp_path, monkeypatch):
    """The plan listed `flat` (split over several shares, so its workers open it by path);
    it becomes a symlink before they do: they refuse to follow it and the scan runs again
    on threads, which records the link."""
    root = tree_of(tmp_path)
    cut = fanout._cut

    def cut_then_swap(*args):
        got = cut(*args)
        if not args[1]:                      # the root's cut: the whole plan is made
            shutil.move(str(root / "flat"), str(tmp_path / "elsewhere"))
            os.symlink(str(tmp_path / "elsewhere"), str(root / "flat"))
        return got
    monkeypatch.setattr(fanout, "_cut", cut_then_swap)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    assert got.workers == 0
    assert got.trees[got.root]["flat"].kind == "L"
    same_as_sequential(root, tmp_path, got, store)
    assert "changed since it was listed" in _log()


def packs_dir(store: Store) -> str:
    return os.path.join(store.home, "objects", "pack")


def pack_bytes(store: Store) -> int:
    return sum(os.path.getsize(os.path.join(packs_dir(store), n)) for n in os.listdir(packs_dir(store)))


def test_raw_packs_are_rewritten_compressed_with_every_object(tmp_path):
    root = tree_of(tmp_path)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    bodies = [Pack(os.path.join(packs_dir(store), n)) for n in got.raw_packs]
    codecs = [p.read(off, n)[0] for p in bodies for oid, off, n in p.entries() if oid not in got.trees]
    # file contents raw; only a batch's first few objects (and link targets) went through zlib
    assert codecs.count(RAW) > 0.95 * len(codecs)
    before, size = contents(store), pack_bytes(store)
    merge_packs(store.home)                      # a hook's merge of small packs leaves them be
    assert set(got.raw_packs) <= set(os.listdir(packs_dir(store)))
    assert recompress(store.home) == len(got.raw_packs)
    names = os.listdir(packs_dir(store))
    assert not [n for n in names if n.endswith(RAW_SUFFIX)] and names
    assert contents(Store(store.home)) == before
    assert pack_bytes(store) < 0.8 * size        # its text compresses; its random bytes do not
    assert recompress(store.home) == 0           # nothing left to do


def test_a_damaged_body_in_a_raw_pack_stays_damaged(tmp_path):
    """Recompressing never launders a body that no longer matches its id: copied as it is,
    it still fails its check, and the others are whole."""
    root = tree_of(tmp_path)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    path = os.path.join(packs_dir(store), got.raw_packs[0])
    pack = Pack(path)
    oid, off, n = next((oid, off, n) for oid, off, n in pack.entries() if n > 100 and oid not in got.trees)
    pack.mm.close()
    with open(path, "r+b") as f:
        f.seek(off + 50)
        byte = f.read(1)
        f.seek(off + 50)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert recompress(store.home) == len(got.raw_packs)
    fresh = Store(store.home)
    with pytest.raises(CorruptObject):
        fresh.get(oid)
    for tree in got.trees.values():
        for e in tree.values():
            if e.kind == "F" and e.oid != oid:
                assert fresh.get(e.oid) is not None


def test_a_recompress_killed_after_its_new_pack_makes_no_second_copy(tmp_path):
    """Killed between writing the compressed pack and deleting the raw one: the next run
    finds the compressed pack by its name and only deletes the raw one."""
    root = tree_of(tmp_path)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    before = contents(store)
    raw = got.raw_packs[0]
    final = raw[:-len(RAW_SUFFIX)] + ".pack"
    _recompress_one(store.home, os.path.join(packs_dir(store), raw), final)   # ...and killed here
    names = set(os.listdir(packs_dir(store)))
    assert {raw, final} <= names
    assert recompress(store.home) == len(got.raw_packs)
    after = set(os.listdir(packs_dir(store)))
    assert len(after) == len(names) - 1 and raw not in after and final in after
    assert contents(Store(store.home)) == before


def test_workers_never_import_the_scanned_project(tmp_path, monkeypatch):
    """A project with its own `rewind` package (rewind's own repository) or a `pickle.py`,
    scanned from its root as a hook or `rewind save` is: the workers run rewind's code."""
    root = tree_of(tmp_path)
    write(str(root), "rewind/__init__.py", "raise SystemExit('the project\'s own rewind')\n")
    write(str(root), "rewind/capture/__init__.py", "")
    write(str(root), "pickle.py", "raise SystemExit('the project\'s own pickle')\n")
    monkeypatch.chdir(root)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    assert got.workers == 2
    same_as_sequential(root, tmp_path, got, store)


def catalog_with_activity(home, ago_s: float) -> None:
    """A store whose one project was last scanned `ago_s` seconds ago (negative: a clock
    that jumped back), through the catalog's own code."""
    import time
    from rewind.catalog.db import Catalog
    cat = Catalog(str(home))
    try:
        pid = cat.project_id(str(home / "p"), create=True)
        with cat.transaction():
            cat.db.execute("INSERT OR REPLACE INTO project_state(project_id, last_scan_ns) VALUES (?, ?)",
                           (pid, time.time_ns() - int(ago_s * 1e9)))
    finally:
        cat.close()


def test_the_background_recompression_waits_for_an_idle_store(tmp_path):
    """The job (background.spawn_recompress) runs a pack only after no project of the
    store was scanned for RECOMPRESS_IDLE_S; each wait is time going by (a fake sleep that
    moves the last scan back), and a pack is done only once the store is idle again."""
    from rewind.store import repack
    root = tree_of(tmp_path)
    got, store = fanned(root, tmp_path / "fan", max_size=LIMIT)
    before = contents(store)
    catalog_with_activity(tmp_path / "fan", ago_s=3.0)
    slept, raw_left = [], []

    def sleep(s):                                 # time passes: the scan is `s` seconds older
        slept.append(s)
        raw_left.append(len([n for n in os.listdir(packs_dir(store)) if n.endswith(RAW_SUFFIX)]))
        catalog_with_activity(tmp_path / "fan", ago_s=3.0 + sum(slept))

    assert repack.recompress(store.home, wait=True, sleep=sleep) == len(got.raw_packs)
    assert slept and abs(slept[0] - (repack.RECOMPRESS_IDLE_S - 3.0)) < 1.0   # until 15 s after the scan
    assert raw_left[0] == len(got.raw_packs)      # nothing rewritten while it waited
    assert not [n for n in os.listdir(packs_dir(store)) if n.endswith(RAW_SUFFIX)]
    assert contents(Store(store.home)) == before


def test_waiting_for_idle_gives_up_on_a_clock_that_went_back(tmp_path):
    """A last scan in the future (the clock jumped back) never looks idle: the wait ends
    at its bound, in polls, not in one sleep of the jump's size. An idle store or none
    waits nothing."""
    from rewind.store import repack
    home = tmp_path / "home"
    assert repack.wait_for_idle(str(home), sleep=pytest.fail) < 0.5          # no catalog yet
    catalog_with_activity(home, ago_s=60.0)
    assert repack.wait_for_idle(str(home), sleep=pytest.fail) < 0.5          # idle for a minute
    catalog_with_activity(home, ago_s=-3600.0)
    slept = []
    waited = repack.wait_for_idle(str(home), idle_s=15.0, max_wait_s=0.3,
                                 sleep=lambda s: (slept.append(s), __import__("time").sleep(0.05)))
    assert 0.3 <= waited < 2.0 and len(slept) > 1 and max(slept) <= repack.IDLE_POLL_S


def test_a_trickling_pack_writer_writes_the_same_pack(tmp_path):
    """The background job's writer hands its writes to the disk as it goes: byte for byte
    the pack a plain writer makes, every object readable."""
    from rewind.store import pack as packmod
    rng = random.Random(7)
    bodies = {f"{i:064x}": bytes([1]) + rng.randbytes(rng.randrange(1, 3 << 20)) for i in range(12)}
    made = []
    for trickle in (False, True):
        (tmp_path / "tmp").mkdir(exist_ok=True)
        w = packmod.PackWriter(str(tmp_path / "tmp"), trickle=trickle)
        for oid, body in bodies.items():
            w.append(oid, body)
        name = w.finish(str(tmp_path / f"packs{trickle}"), name="p.pack")
        made.append((tmp_path / f"packs{trickle}" / name).read_bytes())
        assert not trickle or w.advised >= packmod.TRICKLE_AT
    assert made[0] == made[1]
    p = Pack(str(tmp_path / "packsTrue" / "p.pack"))
    assert {oid: p.read(off, n) for oid, off, n in p.entries()} == bodies
