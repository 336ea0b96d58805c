"""What a restore, an undo and a plan hand back are named records, read by name: the safety
checkpoint, the plan applied, the operations done; what the safety scan stored at each path
the restore replaces; the rows a plan changes and the paths it leaves."""

from __future__ import annotations

import os

from helpers import project, write
from rewind import clock
from rewind.capture.working_copy import capture
from rewind.history.restore import RestoreResult, UndoResult, restore, undo
from rewind.history.restore_apply import Expectation, expectations
from rewind.history.restore_plan import LeftAlone, PlanRow, plan_for_display
from rewind.store.objects import digest_of
from rewind.store.tree import DIR, FILE, LINK


def test_restore_and_undo_say_what_they_did_by_name(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "v1")
    proj = project(root)
    try:
        cp, _ = capture(proj, "manual")
        write(root, "a.txt", "v2")
        write(root, "b.txt", "new")

        result = restore(proj, cp)
        assert isinstance(result, RestoreResult)
        assert result.safety is not None and result.safety.number > cp.number
        assert result.plan.target.number == cp.number
        assert result.done == len(result.plan.ops) == 2
        assert result.plan.rows() == [PlanRow("a.txt", "write", result.plan.ops[0]),
                                      PlanRow("b.txt", "delete", result.plan.ops[1])]
        assert (root / "a.txt").read_text() == "v1" and not (root / "b.txt").exists()

        undone = undo(proj)
        assert isinstance(undone, UndoResult)
        assert undone.rewound_to == cp.number
        assert undone.plan.target.number == result.safety.number
        assert undone.safety is not None and undone.done == 2
        assert (root / "a.txt").read_text() == "v2" and (root / "b.txt").read_text() == "new"

        again = restore(proj, cp, ["a.txt"], skip_if_empty=True)
        assert again.safety is not None and [row.path for row in again.plan.rows()] == ["a.txt"]
        nothing = restore(proj, cp, ["a.txt"], skip_if_empty=True)
        assert nothing == RestoreResult(None, nothing.plan, 0) and nothing.plan.empty
    finally:
        proj.close()


def test_expectations_name_what_the_safety_scan_stored(tmp_path):
    root = tmp_path / "proj"
    write(root, "f.txt", "v1")
    write(root, "d/inner.txt", "x")
    write(root, "e", "a file")
    os.symlink("f.txt", root / "link")
    proj = project(root)
    try:
        cp, _ = capture(proj, "manual")
        write(root, "f.txt", "v2")
        os.unlink(root / "link")
        os.symlink("d/inner.txt", root / "link")
        os.unlink(root / "d/inner.txt")
        os.rmdir(root / "d")
        os.mkdir(root / "d")                 # an empty directory, where the checkpoint has one with a file
        write(root, "g.txt", "made since")
        os.unlink(root / "e")
        write(root, "e/y.txt", "y")
        capture(proj, "manual")              # the stat cache knows the tree as it is now
        plan = plan_for_display(proj, cp, None)
        expect = expectations(proj, plan, clock.wall_ns())

        f = expect["f.txt"]
        assert isinstance(f, Expectation) and f.kind == FILE and f.oid == digest_of(b"v2")
        assert f.reread                      # written within two seconds of the scan: hashed again
        assert f.ino in (None, os.lstat(root / "f.txt").st_ino)
        assert expect["link"] == Expectation(LINK, digest_of(b"d/inner.txt"))
        assert (expect["g.txt"].kind, expect["g.txt"].oid) == (FILE, digest_of(b"made since"))
        assert expect["e"] == Expectation(DIR)   # a directory where the checkpoint has a file
        assert expect["e/y.txt"].kind == FILE
        assert "d/inner.txt" in expect and expect["d/inner.txt"] is None   # nothing there now
        assert all(e is None or isinstance(e, Expectation) for e in expect.values())
    finally:
        proj.close()


def test_what_a_plan_leaves_is_named_with_why(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "v1")
    proj = project(root)
    try:
        cp, _ = capture(proj, "manual")
        write(root, ".gitignore", "*.log\n")
        write(root, "d/keep.log", "ignored: never stored")
        write(root, "d/x.txt", "stored")
        capture(proj, "manual")
        plan = plan_for_display(proj, cp, None)
        kept = [s for s in plan.skipped if s.path == "d"]
        assert kept == [LeftAlone("d", "directory kept: it holds files rewind does not remove")]
        assert kept[0].why.startswith("directory kept")
    finally:
        proj.close()
