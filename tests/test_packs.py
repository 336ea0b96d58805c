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
from rewind.objects import _FEW, PACKS_DIR, Store


def packs(home) -> list[Path]:
    d = Path(home) / PACKS_DIR
    return sorted(d.glob("*.pack")) if d.exists() else []


def loose(home) -> int:
    base = Path(home) / "objects"
    return sum(1 for s in base.iterdir() for _ in s.iterdir()) if base.exists() else 0


def big_tree(root: Path, n: int = 600) -> None:
    for i in range(n):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"file {i}\n" + "x" * (i % 300))
    os.symlink("d0/sub0/f0.txt", root / "link")


def test_a_big_first_snapshot_goes_into_one_pack_and_restores_exactly(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root)
    run_rewind("save", "-m", "first", cwd=root, check=0)
    assert len(packs(home)) == 1
    assert loose(home) == _FEW          # the batch's first objects stay loose
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
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert pack.exists() and gc["packed_dead"] == 0       # checkpoint 1 still names all of it
    other = tmp_path / "other"
    write(other, "a.txt", "a")
    run_rewind("save", cwd=other, check=0)
    out = json.loads(run_rewind("forget", "--project", str(root), "--yes", "--json", cwd=other, check=0).stdout)
    assert not pack.exists() and out["gc"]["objects_swept"] >= 600 - _FEW
    assert json.loads(run_rewind("verify", "--json", cwd=other, check=0).stdout)["ok"]


def test_a_pack_kept_for_some_objects_reports_the_rest_as_packed_dead(tmp_path, monkeypatch):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    big_tree(root)
    write(root, ".rewind.toml", "ring_size = 1\n")
    run_rewind("save", cwd=root, check=0)
    [pack] = packs(home)
    past = time.time() - 3600
    os.utime(pack, (past, past))
    for i in range(0, 600, 2):
        write(root, f"d{i % 20}/sub{i % 7}/f{i}.txt", f"new {i}")
    run_rewind("save", cwd=root, check=0)           # the ring drops checkpoint 1
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert pack.exists() and gc["packed_dead"] > 0 and gc["packed_dead_bytes"] > 0
    assert "stay in packs" in run_rewind("gc", "--dry-run", cwd=root, check=0).stdout
    before = fingerprint(root)
    write(root, "d1/sub1/f1.txt", "scribble")
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == before


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
        from rewind.tree import DIR, FILE, parse
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
