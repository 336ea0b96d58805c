"""A restore never writes outside the project, never acts on a damaged store, never acts
without confirmation, and touches only what it was asked to."""

from __future__ import annotations

import json
import os

from helpers import fingerprint, project, run_rewind, write
from rewind.capture.working_copy import capture
from rewind.errors import RewindError
from rewind.history.restore import restore
from rewind.history.restore_apply import recover
from rewind.history.restore_plan import plan_for_display


def test_a_symlink_planted_since_the_checkpoint_cannot_redirect_the_restore(tmp_path):
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(root, "d/f.txt", "checkpoint content")
    write(outside, "f.txt", "precious, outside the project")
    run_rewind("save", cwd=root, check=0)
    os.unlink(root / "d/f.txt")
    os.rmdir(root / "d")
    os.symlink(outside, root / "d")       # d now leads outside
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (outside / "f.txt").read_text() == "precious, outside the project"
    assert sorted(os.listdir(outside)) == ["f.txt"]
    assert not os.path.islink(root / "d")
    assert (root / "d/f.txt").read_text() == "checkpoint content"


def test_a_link_swapped_in_after_planning_stops_the_restore_before_writing_through_it(tmp_path):
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(root, "d/f.txt", "v1")
    outside.mkdir()
    proj = project(root)
    cp, _ = capture(proj, "manual")
    write(root, "d/f.txt", "v2")
    plan = plan_for_display(proj, cp, None)
    assert [op.action for op in plan.ops] == ["write"]
    # the race: between the plan and the write, d becomes a link to outside
    os.rename(root / "d", tmp_path / "d-moved")
    os.symlink(outside, root / "d")
    from rewind.history.restore_apply import apply_plan
    try:
        apply_plan(proj, plan, {}, "t")
        raise AssertionError("the restore wrote through a symlink")
    except RewindError as e:
        assert "without following a link" in e.message
    assert os.listdir(outside) == []


def _corrupt_one_blob(home, data: bytes):
    """Flip a byte in the object holding `data`."""
    import hashlib
    oid = hashlib.sha256(data).hexdigest()
    path = os.path.join(home, "objects", oid[:2], oid[2:])
    os.chmod(path, 0o600)
    raw = bytearray(open(path, "rb").read())
    raw[-1] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    return oid


def test_a_corrupt_object_is_found_by_verify_and_stops_to_before_anything_is_written(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha original\n")
    write(root, "b.txt", "beta original\n")
    run_rewind("save", cwd=root, check=0)
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"] is True
    oid = _corrupt_one_blob(os.environ["REWIND_HOME"], b"beta original\n")
    write(root, "a.txt", "alpha changed\n")
    write(root, "b.txt", "beta changed\n")
    write(root, "new.txt", "new\n")
    before = fingerprint(root)

    v = run_rewind("verify", "--json", cwd=root, check=1)
    report = json.loads(v.stdout)
    assert report["ok"] is False
    assert [p["object"] for p in report["problems"]] == [oid]
    assert "does not match" in report["problems"][0]["problem"]

    r = run_rewind("to", "1", "--yes", cwd=root)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert oid[:12] in r.stderr
    assert fingerprint(root) == before


def test_a_missing_object_is_named_by_verify(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "only copy\n")
    run_rewind("save", cwd=root, check=0)
    import hashlib
    oid = hashlib.sha256(b"only copy\n").hexdigest()
    os.unlink(os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:]))
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    assert report["problems"] == [{"object": oid, "problem": "blob 'a.txt' missing", "checkpoint": 1,
                                   "checkpoints": [1]}]


def test_to_without_yes_and_without_a_terminal_changes_nothing(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "v2")
    write(root, "b.txt", "new")
    before = fingerprint(root)
    r = run_rewind("to", "1", cwd=root, input="y\n")
    assert r.returncode == 1
    assert "--yes" in r.stderr
    assert fingerprint(root) == before
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 1  # no safety point either


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "v2")
    write(root, "b.txt", "new")
    before = fingerprint(root)
    out = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    ops = [line.split() for line in out.splitlines() if line.startswith("  ")]
    assert ["write", "a.txt"] in ops and ["delete", "b.txt"] in ops
    assert fingerprint(root) == before


def test_a_partial_restore_touches_only_the_named_paths(tmp_path):
    root = tmp_path / "proj"
    write(root, "keep/a.txt", "a1")
    write(root, "src/b.txt", "b1")
    write(root, "src/deep/c.txt", "c1")
    write(root, "top.txt", "t1")
    run_rewind("save", cwd=root, check=0)
    write(root, "keep/a.txt", "a2")
    write(root, "src/b.txt", "b2")
    os.unlink(root / "src/deep/c.txt")
    write(root, "src/new.txt", "n")
    write(root, "top.txt", "t2")
    run_rewind("to", "1", "--yes", "--", "src", cwd=root, check=0)
    assert (root / "src/b.txt").read_text() == "b1"
    assert (root / "src/deep/c.txt").read_text() == "c1"
    assert not (root / "src/new.txt").exists()
    assert (root / "keep/a.txt").read_text() == "a2"
    assert (root / "top.txt").read_text() == "t2"
    # a single file, named relative to the current directory
    run_rewind("to", "1", "--yes", "--", "a.txt", cwd=root / "keep", check=0)
    assert (root / "keep/a.txt").read_text() == "a1"
    assert (root / "top.txt").read_text() == "t2"
    # a path outside the project is refused
    r = run_rewind("to", "1", "--yes", "--", str(tmp_path), cwd=root)
    assert r.returncode == 1 and "outside the project" in r.stderr


def test_ignored_files_are_neither_stored_nor_touched(tmp_path):
    root = tmp_path / "proj"
    write(root, ".gitignore", "build/\n*.log\n")
    write(root, "build/out.bin", "built")
    write(root, "app.log", "log v1")
    write(root, "src/a.py", "a")
    run_rewind("save", cwd=root, check=0)
    write(root, "app.log", "log v2")
    write(root, "build/out.bin", "rebuilt")
    write(root, "src/a.py", "changed")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "app.log").read_text() == "log v2"
    assert (root / "build/out.bin").read_text() == "rebuilt"
    assert (root / "src/a.py").read_text() == "a"


def test_a_directory_holding_ignored_files_is_kept_when_the_checkpoint_lacks_it(tmp_path):
    root = tmp_path / "proj"
    write(root, ".gitignore", "*.tmp\n")
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    write(root, "d/tracked.txt", "t")
    write(root, "d/scratch.tmp", "precious, ignored")
    out = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert not (root / "d/tracked.txt").exists()
    assert (root / "d/scratch.tmp").read_text() == "precious, ignored"
    assert "directory kept" in out


def test_special_files_are_reported_and_never_opened(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    os.mkfifo(root / "pipe")      # opening it for reading would block forever
    r = run_rewind("save", cwd=root, check=0)
    assert "special" in r.stderr and "pipe" in r.stderr
    os.unlink(root / "a.txt")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "a"
    assert os.path.exists(root / "pipe")


def test_an_interrupted_restore_is_cleaned_up_and_reported_by_the_next_command(tmp_path):
    root = tmp_path / "proj"
    write(root, "d/f.txt", "v1")
    proj = project(root)
    cp, _ = capture(proj, "manual")
    write(root, "d/f.txt", "v2")
    # a restore that dies half-way: its journal and a temp file are left behind
    from rewind.fsutil import atomic_write
    from rewind.history.restore_apply import journal_path
    os.makedirs(os.path.dirname(journal_path(proj)), exist_ok=True)
    atomic_write(journal_path(proj), json.dumps(
        {"target": 1, "safety": 2, "tag": "2", "dirs": ["d"]}).encode())
    write(root, "d/.rewind-tmp-2.1", "half written")
    proj.close()
    r = run_rewind("list", cwd=root, check=0)
    assert "interrupted" in r.stderr and "rewind to 1" in r.stderr
    assert not (root / "d/.rewind-tmp-2.1").exists()
    assert (root / "d/f.txt").read_text() == "v2"
    # reported once
    assert "interrupted" not in run_rewind("list", cwd=root, check=0).stderr
    proj = project(root)
    assert recover(proj) is None


def test_every_object_the_restore_needs_is_verified_before_the_tree_is_touched(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "aaa")
    write(root, "z.txt", "zzz")
    proj = project(root)
    cp, _ = capture(proj, "manual")
    _corrupt_one_blob(proj.home, b"zzz")
    write(root, "a.txt", "changed a")   # sorted first: would be written first
    write(root, "z.txt", "changed z")
    try:
        restore(proj, cp)
        raise AssertionError("restore went ahead with a damaged object")
    except RewindError:
        pass
    assert (root / "a.txt").read_text() == "changed a"


def test_the_scan_after_a_rewind_trusts_what_it_wrote_and_agrees_with_a_full_scan(tmp_path):
    """`to` reads back none of the files it wrote: their stat-cache rows come from the write
    itself. The tree it records must still be the one a full read of the tree gives."""
    import time

    from rewind.capture.snapshot import working_scan
    root = tmp_path / "proj"
    for i in range(30):
        write(root, f"d{i % 3}/f{i}.txt", f"v1 {i}")
    write(root, "gone/x.txt", "x")
    run_rewind("save", cwd=root, check=0)
    for i in range(0, 30, 2):
        write(root, f"d{i % 3}/f{i}.txt", f"v2 {i}, longer")
    os.unlink(root / "gone/x.txt")
    os.rmdir(root / "gone")
    write(root, "new/n.txt", "n")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    time.sleep(0.05)          # past the racy window of the files just written
    proj = project(root)
    state = proj.catalog.scan_state(proj.id)
    full = working_scan(proj)
    assert full.root == state.last_tree == proj.catalog.checkpoint(proj.id, 1).tree
    assert full.stats.hashed == 0, "the stat cache does not cover the files the rewind wrote"
    proj.close()
    # a file changed right after the rewind is read again, not taken from the rewind's row
    write(root, "d0/f0.txt", "v3, after")
    run_rewind("save", cwd=root, check=0)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "d0/f0.txt").read_text() == "v1 0"
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "d0/f0.txt").read_text() == "v3, after"


def test_to_yes_with_nothing_to_do_takes_no_checkpoint(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    out = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert "Nothing to do" in out
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 1
    write(root, "a.txt", "v2")
    out = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert "write" in out and "a.txt" in out and "Rewound to checkpoint 1" in out
    assert (root / "a.txt").read_text() == "v1"


def test_the_safety_checkpoint_is_committed_durably_before_the_first_write(tmp_path):
    """The catalog runs with synchronous=NORMAL (a commit reaches the disk at the next WAL
    checkpoint); a rewind's safety checkpoint and its restore row are committed with the WAL
    synced (FULL) instead, so a power cut during the writes cannot lose the only copy of
    what they overwrite. Observed: FULL while they are committed, both committed (another
    connection sees them) at the first write, NORMAL again after."""
    import rewind.history.restore as restoremod
    from rewind.catalog.db import Catalog
    root = tmp_path / "proj"
    write(root, "a.txt", "first\n")
    proj = project(root)
    first, _ = capture(proj, "manual")
    write(root, "a.txt", "second, not in any checkpoint\n")
    seen = []
    real_insert, real_apply = Catalog.insert_restore, restoremod.apply_plan

    def insert_and_look(self, *args):
        seen.append(("insert_restore", self.db.execute("PRAGMA synchronous").fetchone()[0]))
        return real_insert(self, *args)

    def apply_and_look(p, plan, *args, **kw):
        other = Catalog(p.home)
        try:
            seen.append(("apply", other.latest(p.id).kind, other.newest_undoable(p.id) is not None))
        finally:
            other.close()
        return real_apply(p, plan, *args, **kw)
    Catalog.insert_restore, restoremod.apply_plan = insert_and_look, apply_and_look
    try:
        restore(proj, first)
    finally:
        Catalog.insert_restore, restoremod.apply_plan = real_insert, real_apply
    assert seen == [("insert_restore", 2), ("apply", "rewind", True)]     # 2: FULL
    assert proj.catalog.db.execute("PRAGMA synchronous").fetchone()[0] == 1   # NORMAL
    assert (root / "a.txt").read_text() == "first\n"
    proj.close()
