"""gc is a plan, then its execution: what `gc --dry-run` shows is what the next `gc` does,
on a real store with loose objects, packs to delete, packs to merge and a stale temporary
file; and what it reports as swept is what leaves the disk."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from helpers import fingerprint, run_rewind, write
from rewind.clock import iso
from rewind.store.objects import PACKS_DIR, Store

COUNTS = ("objects_kept", "bytes_kept", "objects_swept", "bytes_swept", "objects_spared", "packed_dead",
          "packed_dead_bytes", "packs_merged", "temp_files_removed")


def on_disk(home: str) -> tuple[int, int]:
    """(copies, bytes) the store holds: loose files, and every entry and byte of every pack."""
    copies = size = 0
    base = Path(home) / "objects"
    for shard in base.iterdir():
        if len(shard.name) == 2:
            for f in shard.iterdir():
                copies, size = copies + 1, size + f.stat().st_size
    for name, pack in Store(home).packs().items():
        copies += pack.count
        size += (Path(home) / PACKS_DIR / name).stat().st_size
        pack.mm.close()
    return copies, size


def age(home: str, seconds: float) -> None:
    past = time.time() - seconds
    for d, _, names in os.walk(Path(home) / "objects"):
        for name in names:
            os.utime(os.path.join(d, name), (past, past))


def test_gc_does_what_its_dry_run_planned(tmp_path):
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    for i in range(300):
        write(root, f"d{i % 10}/f{i}.txt", f"file {i}\n" + "x" * (i % 200))
    run_rewind("save", "-m", "one", cwd=root, check=0)                 # a big pack
    for n, every in ((2, 2), (3, 5), (4, 7)):                          # smaller packs, half shared
        for i in range(0, 300, every):
            write(root, f"d{i % 10}/f{i}.txt", f"save {n} file {i}\n")
        run_rewind("save", "-m", str(n), cwd=root, check=0)
    kept = fingerprint(root)
    write(root, ".rewind.toml", "ring_size = 2\n")                    # the user's gc drops 1 and 2
    first = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert [d["number"] for d in first["dropped"]] == [2, 1]
    assert first["objects_swept"] == 0                                # into the trash, for a day
    later = {"REWIND_NOW": iso(time.time_ns() + 2 * 86400 * 10**9)}    # the day is over: gc empties it
    store = Store(home)
    store.put(b"an orphan nothing references")                        # a loose object to sweep
    store.flush()
    age(home, 3600)                                                    # all older than gc's start
    stale = Path(home) / "tmp" / "stale.1234.0"                        # a killed writer's leftover
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)

    plan = json.loads(run_rewind("gc", "--dry-run", "--json", cwd=root, env=later, check=0).stdout)
    before = on_disk(home)
    assert plan["dry_run"] and stale.exists()
    done = json.loads(run_rewind("gc", "--json", cwd=root, env=later, check=0).stdout)
    after = on_disk(home)

    assert not done["dry_run"] and done["held"] is None and plan["held"] is None
    assert plan["trash_emptied"] == done["trash_emptied"] == 2
    assert plan["dropped"] == done["dropped"] and plan["hidden"] == done["hidden"]
    assert {k: plan[k] for k in COUNTS} == {k: done[k] for k in COUNTS}
    # (the first gc, which trashed 1 and 2, merged the small packs it could already: one is left)
    assert done["objects_swept"] > 200 and done["packs_merged"] >= 1 and done["temp_files_removed"] == 1
    # what it said it swept is what left the disk: every copy and every byte
    assert before[0] - after[0] == done["objects_swept"]
    assert before[1] - after[1] == done["bytes_swept"]
    assert not stale.exists()
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    write(root, "d1/f1.txt", "scribble")
    run_rewind("to", "4", "--yes", cwd=root, env=later, check=0)
    assert fingerprint(root) == kept
    again = json.loads(run_rewind("gc", "--dry-run", "--json", cwd=root, env=later, check=0).stdout)
    assert again["dropped"] == [] and again["objects_swept"] == 0


def test_a_plan_is_taken_under_gcs_lock_and_changes_nothing(tmp_path, monkeypatch):
    """plan_gc decides; only apply deletes. The lock is gc's: a second gc is refused."""
    from rewind.catalog.db import Catalog
    from rewind.history import gc as gcmod
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    write(root, "a.txt", "one")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "two")
    run_rewind("save", cwd=root, check=0)
    write(root, ".rewind.toml", "ring_size = 1\n")
    first = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    assert [d["number"] for d in first["dropped"]] == [1] and first["objects_swept"] == 0   # to the trash
    monkeypatch.setenv("REWIND_NOW", iso(time.time_ns() + 2 * 86400 * 10**9))             # a day later
    age(home, 3600)
    catalog = Catalog(home)
    try:
        with gcmod.locked(home):
            try:
                with gcmod.locked(home):
                    raise AssertionError("a second gc took the lock")
            except gcmod.GcBusy:
                pass
            before = on_disk(home)
            plan = gcmod.plan_gc(home, catalog, dry_run=True)
            assert plan.trash_expired == 1 and plan.preview.objects_swept >= 1
            assert on_disk(home) == before and catalog.trash_batches()
            report = gcmod.apply(plan, home, catalog)
        assert report.dropped == plan.dropped and report.trash_emptied == 1 and not catalog.trash_batches()
        assert report.objects_swept == plan.preview.objects_swept
        assert on_disk(home)[0] == before[0] - report.objects_swept
    finally:
        catalog.close()
