"""The working copy's own contract: taking its lock reads and writes nothing (pending
checkpoints are completed only where the caller asks, `pending.locked_completing`), and
`commit_tree` commits a tree known already as a scan that read nothing would. Real
catalog, store and tree in tmp_path; the watcher that leaves a checkpoint pending is a row
whose process holds no lock (it died during its first scan)."""

from __future__ import annotations

import os

from helpers import project, write
from rewind import clock
from rewind.capture import pending
from rewind.capture.prompt_tree import patch_tree
from rewind.capture.working_copy import Commit, Scan, capture, locked


def _pending_left_by_a_dead_watcher(proj) -> int:
    """A prompt recorded as pending during a watcher's first scan; the watcher is gone."""
    cat = proj.catalog
    cat.register_watcher(proj.id, os.getpid(), clock.wall_ns(), False)
    cat.set_baseline(proj.id, os.getpid(), clock.wall_ns())
    number = pending.begin(proj, "prompt", "during the first scan", {"agent": "claude", "session_id": "s"})
    assert number is not None, "the first scan should count as running"
    return number


def test_taking_the_lock_completes_nothing_and_locked_completing_completes_what_is_pending(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "at the prompt")
    proj = project(root)
    try:
        capture(proj, "manual")
        number = _pending_left_by_a_dead_watcher(proj)
        with locked(proj, 10):
            pass
        assert proj.catalog.pending_one(proj.id, number) is not None, "taking the lock completed it"
        assert proj.catalog.checkpoint(proj.id, number) is None
        with pending.locked_completing(proj, 10) as wc:
            assert wc.project is proj
            assert proj.catalog.pending_one(proj.id, number) is None
        cp = proj.catalog.checkpoint(proj.id, number)
        assert cp is not None and cp.kind == "prompt" and cp.message == "during the first scan"
        assert cp.stats["first_scan"]["by"] == "hook"
        assert cp.tree == proj.catalog.checkpoint(proj.id, 1).tree
    finally:
        proj.close()


def test_commit_tree_commits_a_known_tree_as_a_scan_that_read_nothing(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "one")
    write(root, "b.txt", "two")
    proj = project(root)
    try:
        first, _ = capture(proj, "manual")
        with locked(proj, 10) as wc:
            scanned = wc.scan(Scan.full())
            wc.commit(scanned)
            known = patch_tree(proj.store, scanned.load, first.tree, {"b.txt": None})
            proj.store.flush()
            before = proj.catalog.scan_state(proj.id)
            stamp = clock.wall_ns()
            cp = wc.commit_tree(known, Commit("prompt", message="known"), scanned.load, {"files": 1},
                                stamp=stamp, hardlinks=set())
        assert Scan.nothing().mode == "nothing" and Scan.nothing().partial
        assert (cp.number, cp.tree, cp.message, cp.stats) == (2, known, "known", {"files": 1})
        assert proj.catalog.checkpoint(proj.id, 2).tree == known
        after = proj.catalog.scan_state(proj.id)
        assert (after.last_tree, after.last_scan_ns) == (known, stamp)
        # no scan of its own: the counts and the watcher's base stay
        assert (after.full_scans, after.quick_scans, after.scan_start_ns, after.consumed_seq) == \
            (before.full_scans, before.quick_scans, before.scan_start_ns, before.consumed_seq)
        rows = proj.catalog.changes(proj.id, 1)
        assert [(r.path, r.status) for r in rows] == [("b.txt", "deleted")]
        assert rows[0].source == "unknown"           # no agent hook ever reported on this project
        # the tree on disk is untouched: the next scan finds it again
        with locked(proj, 10) as wc:
            again = wc.scan(Scan.full())
        assert again.result.root == first.tree
    finally:
        proj.close()
