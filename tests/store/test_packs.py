"""Packs: a big batch (a first snapshot, a large rewind) goes into one pack file. Restores
from it are exact, gc deletes a pack only when nothing in it is referenced, a damaged pack
is named by verify and stops `to` before anything is written, and a killed save leaves no
pack behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from helpers import REWIND, fingerprint, project, run_rewind, write
from rewind.store.objects import PACKS_DIR, SMALL_BATCH, Store


def packs(home) -> list[Path]:
    d = Path(home) / PACKS_DIR
    return sorted(d.glob("*.pack")) if d.exists() else []


def loose(home) -> int:
    base = Path(home) / "objects"
    return sum(1 for s in base.iterdir() if len(s.name) == 2 for _ in s.iterdir()) if base.exists() else 0


def big_tree(root: Path, n: int = 600) -> None:
    for i in range(n):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"file {i}\n" + "x" * (i % 300))
    os.symlink("d0/sub0/f0.txt", root / "link")


def test_a_big_first_snapshot_goes_into_one_pack_and_restores_exactly(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root)
    run_rewind("save", "-m", "first", cwd=root, check=0)
    assert len(packs(home)) == 1 and loose(home) == 0
    first = fingerprint(root)
    proj = project(root)
    store = Store(home)
    tree = proj.catalog.checkpoint(proj.id, 1).tree
    assert store.get(tree)              # the root tree is read back, verified
    proj.close()
    for i in range(0, 600, 3):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"changed {i}")
    os.unlink(root / "link")
    run_rewind("save", "-m", "second", cwd=root, check=0)
    second = fingerprint(root)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert fingerprint(root) == first
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == second
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)
    assert report["ok"] and report["objects"] > 600
    status = json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)
    on_disk = loose(home) + sum(1 for p in packs(home) for _ in Store(home).packs()[p.name].entries())
    assert status["store"]["objects"] <= on_disk      # an id both loose and packed counts once


def test_gc_deletes_a_pack_only_when_nothing_in_it_is_referenced(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root)
    run_rewind("save", cwd=root, check=0)
    [pack] = packs(home)
    past = time.time() - 3600          # older than any gc's start
    os.utime(pack, (past, past))
    for i in range(0, 600, 2):        # half the files change; the other half stay referenced
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"new {i}")
    run_rewind("save", cwd=root, check=0)
    second = fingerprint(root)
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert gc["packed_dead"] == 0 and gc["objects_swept"] == 0   # both checkpoints name all of it
    assert gc["packs_merged"] == 2 and len(packs(home)) == 1        # the two small packs became one
    [pack] = packs(home)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == second
    os.utime(pack, (past, past))
    other = tmp_path / "other"
    write(other, "a.txt", "a")
    run_rewind("save", cwd=other, check=0)
    out = json.loads(run_rewind("forget", "--project", str(root), "--yes", "--now", "--json", cwd=other,
                                check=0).stdout)
    assert packs(home) == [] and out["gc"]["objects_swept"] >= 600
    assert json.loads(run_rewind("verify", "--json", cwd=other, check=0).stdout)["ok"]


def ring_of_one(root: Path, home, every: int) -> tuple[Path, float]:
    """A 600-file first checkpoint (its pack aged past any gc's start), then one in
    `every` file changed and saved with ring_size 1: checkpoint 1 is dropped."""
    big_tree(root)
    write(root, ".rewind.toml", "ring_size = 1\n")
    run_rewind("save", cwd=root, check=0)
    [first] = packs(home)
    past = time.time() - 3600
    os.utime(first, (past, past))
    for i in range(0, 600, every):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"new {i}")
    run_rewind("save", cwd=root, check=0)
    return first, past


def test_gc_merges_small_packs_leaving_out_what_nothing_references(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    first, past = ring_of_one(root, home, every=2)
    [second] = [p for p in packs(home) if p != first]
    future = time.time() + 3600                    # as if a writer were still making it
    os.utime(second, (future, future))
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert gc["packs_merged"] == 1 and not first.exists() and second.exists()   # rewritten without the dead
    assert gc["packed_dead"] == 0 and gc["objects_swept"] >= 300
    os.utime(second, (past, past))
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert gc["packs_merged"] == 2 and gc["objects_swept"] == 0 and len(packs(home)) == 1
    assert not second.exists()
    before = fingerprint(root)
    write(root, "d1/sub1/f1.txt", "scribble")
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == before
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]


def test_a_big_pack_mostly_referenced_stays_whole_and_its_dead_are_reported(tmp_path, monkeypatch):
    from rewind.catalog.db import Catalog
    from rewind.history import gc as gcmod
    from rewind.store import sweep
    monkeypatch.setattr(sweep, "SMALL_PACK", 10)    # 600 objects: a big pack, for this test
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    first, _ = ring_of_one(root, home, every=10)    # a tenth of the files change
    catalog = Catalog(home)
    report = gcmod.run(home, catalog)
    catalog.close()
    assert first.exists() and report.packed_dead >= 60 and report.packed_dead_bytes > 0
    before = fingerprint(root)
    write(root, "d1/sub1/f1.txt", "scribble")
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == before


def test_a_prompts_checkpoint_is_one_small_pack_and_an_edit_tools_pre_image_a_loose_file(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root, 100)
    run_rewind("save", cwd=root, check=0)
    n_packs, n_loose = len(packs(home)), loose(home)
    for i in range(10):
        write(root, f"d{i}/sub{i % 7}/f{i}.txt", f"edit {i}")
    run_rewind("save", cwd=root, check=0)          # ten blobs and their directories: a pack
    assert len(packs(home)) == n_packs + 1 and loose(home) == n_loose
    store = Store(home)
    oid = store.put(b"one pre-image")               # a batch of one: a loose file
    store.flush()
    assert loose(home) == n_loose + 1 and os.path.exists(store.path(oid))
    assert SMALL_BATCH >= 1


def test_a_damaged_pack_is_named_by_verify_and_stops_to_before_anything_is_written(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root)
    run_rewind("save", cwd=root, check=0)
    for i in range(600):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"later {i}")
    run_rewind("save", cwd=root, check=0)
    [first, *_] = packs(home)
    store = Store(home)
    pack = store.packs()[first.name]
    proj = project(root)
    blobs = set()                                 # what `to 1` must write: checkpoint 1's files
    stack = [proj.catalog.checkpoint(proj.id, 1).tree]
    while stack:
        from rewind.store.tree import DIR, FILE, parse
        for name, e in parse(store.get(stack.pop())).items():
            if e.kind == DIR:
                stack.append(e.oid)
            elif e.kind == FILE and name.startswith("f"):
                blobs.add(e.oid)
    proj.close()
    oid, off, length = next(x for x in pack.entries() if x[0] in blobs)
    pack.mm.close()
    with open(first, "r+b") as f:                 # one byte of one packed object
        f.seek(off + length // 2)
        b = f.read(1)
        f.seek(off + length // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    assert not report["ok"] and any(p["object"] == oid for p in report["problems"])
    before = fingerprint(root)
    r = run_rewind("to", "1", "--yes", cwd=root)
    assert r.returncode != 0 and "Traceback" not in r.stderr and oid[:12] in r.stderr
    assert fingerprint(root) == before


def test_a_save_killed_while_writing_its_pack_leaves_no_pack_and_loses_nothing(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    write(root, "keep.txt", "kept")
    run_rewind("save", cwd=root, check=0)
    for i in range(4000):
        write(root, f"big/{i % 40}/f{i}.txt", os.urandom(3000).hex())
    proc = subprocess.Popen([*REWIND, "save"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp = Path(home) / "tmp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp.glob("pack.*")):
        time.sleep(0.005)
    assert list(tmp.glob("pack.*")), "the save finished before it started a pack"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert packs(home) == []
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert len(cps) == 1
    run_rewind("save", cwd=root, check=0)
    assert len(packs(home)) == 1
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    state = fingerprint(root)
    write(root, "keep.txt", "changed")
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == state


def test_hooks_start_a_merge_of_small_packs_that_loses_nothing(tmp_path):
    """A prompt's checkpoint adds a small pack; past MERGE_AT packs a hook starts their
    merge detached, and every checkpoint still restores exactly."""
    from rewind.cli.replay import bundled_session, fill
    from rewind.store.objects import MERGE_AT
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root, 60)
    ups = next(p for p in bundled_session() if p["hook_event_name"] == "UserPromptSubmit")
    states = {}
    for n in range(MERGE_AT + 4):
        for i in range(n % 7, 60, 7):                # 9 changed files and their directories: a pack
            write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"prompt {n} file {i}")
        p = fill(ups, str(root), "s-merge", str(tmp_path / "cc"))
        p["prompt"] = f"prompt {n}"
        proc = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), capture_output=True, text=True,
                              cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "0"})
        assert proc.returncode == 0 and proc.stdout == ""
        states[n + 1] = fingerprint(root)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(packs(home)) >= MERGE_AT:
        time.sleep(0.1)
    assert len(packs(home)) < MERGE_AT, "no merge happened"
    from rewind.lock import try_lock
    while (fd := try_lock(home, "gc.lock")) is None:     # the merge is done when it lets go
        time.sleep(0.05)
    os.close(fd)
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    for number in (1, MERGE_AT // 2, MERGE_AT + 4):
        run_rewind("to", str(number), "--yes", cwd=root, check=0)
        assert fingerprint(root) == states[number]
    assert not (Path(home) / "rewind.log").exists()


def test_a_pack_index_is_searched_then_read_into_a_dict_and_both_find_the_same(tmp_path):
    """A hook's few lookups binary-search the mmap; past BSEARCHES finds the index becomes a
    dict. Every object is found, with its bytes, either way; ids that are not there (below,
    above and between the stored ones) are not."""
    import hashlib
    from rewind.store.objects import decode, encode
    from rewind.store.pack import BSEARCHES, DICT_PACK, Pack, PackWriter
    (tmp_path / "tmp").mkdir()
    writer = PackWriter(str(tmp_path / "tmp"))
    stored = {}
    for i in range(300):
        data = f"object {i}\n".encode() * (i % 7 + 1)
        oid = hashlib.sha256(data).hexdigest()
        stored[oid] = data
        writer.append(oid, encode(data))
    pack = Pack(str(tmp_path / "packs" / writer.finish(str(tmp_path / "packs"))))
    assert pack.count == 300 > DICT_PACK and pack.small is None
    ids = sorted(stored)
    def next_id(oid: str) -> bytes:
        key = bytes.fromhex(oid)
        return key[:31] + bytes([(key[31] + 1) % 256])
    absent = [bytes(32), b"\xff" * 32] + [k for k in map(next_id, ids) if k.hex() not in stored][:20]
    for phase in ("searched", "dict"):
        if phase == "dict":
            assert pack._dict is not None
        for oid in ids:
            off, length = pack.find(bytes.fromhex(oid))
            assert decode(pack.read(off, length)) == stored[oid]
        for key in absent:
            assert pack.find(key) is None
        if phase == "searched":
            assert pack._finds > BSEARCHES     # the switch happened during this pass
    pack.mm.close()


def test_a_big_batch_reuses_loose_objects_and_buffers_its_writes(tmp_path):
    """A loose object is reused by a big batch (its mtime refreshed for gc, no second copy),
    whether or not its shard held it when the pack began; an object whose shard did not
    exist then is written again into the pack (a harmless copy, never a reuse without the
    refresh). Bodies gathered for one write are readable before the batch ends."""
    home = tmp_path / "home"
    store = Store(str(home))
    early = b"loose before the batch"
    early_id = store.put(early)
    store.flush()
    path = store.path(early_id)
    past = time.time() - 3 * 86400
    os.utime(path, (past, past))
    blobs = [f"blob {i}".encode() for i in range(SMALL_BATCH + 50)]
    for b in blobs[:SMALL_BATCH + 1]:
        store.put(b)                      # now a pack: the shards of this moment are known
    store.put(early)
    assert os.stat(path).st_mtime > past + 86400 and not store.wanted(early_id)
    late = b"made loose by another process meanwhile"
    other = Store(str(home))
    late_id = other.put(late)
    other.flush()
    in_new_shard = late_id[:2] != early_id[:2]
    assert store.wanted(late_id) == in_new_shard
    store.put(late)
    for b in blobs[SMALL_BATCH + 1:]:
        store.put(b)
    assert store.get(store.put(blobs[-1])) == blobs[-1]        # still pending in the writer
    store.flush()
    (pack,) = store.packs().values()
    packed = {oid for oid, _, _ in pack.entries()}
    assert early_id not in packed and (late_id in packed) == in_new_shard
    assert {Store(str(home)).get(oid) for oid in packed} >= set(blobs)
