"""The walker trusts the stat cache only where it may: an unchanged tree is not re-read,
and git's racy-timestamp rule holds (capture/walker.py)."""

from __future__ import annotations

import os
import time

from helpers import age_files, project, write
from rewind.capture.working_copy import capture


def test_a_second_save_of_an_unchanged_10000_file_tree_reads_no_file(tmp_path):
    root = tmp_path / "big"
    for d in range(100):
        sub = root / f"d{d:03}" / "inner"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"f{f:03}.txt").write_bytes(b"line %d %d\n" % (d, f) * 20)
    age_files(root)
    proj = project(root)
    _, first = capture(proj, "manual")
    assert first.stats.files == 10_000 and first.stats.hashed == 10_000
    _, second = capture(proj, "manual")
    assert second.stats.files == 10_000
    assert second.stats.hashed == 0
    assert second.root == first.root
    # one change: exactly one file read
    changed = write(root, "d050/inner/f050.txt", "changed")
    past = int((time.time() - 60) * 1e9)
    os.utime(changed, ns=(past, past))
    _, third = capture(proj, "manual")
    assert third.stats.hashed == 1


def test_a_file_as_new_as_the_scan_is_read_again_even_if_its_stat_looks_the_same(tmp_path):
    root = tmp_path / "proj"
    p = write(root, "racy.txt", "aaaa")
    proj = project(root)
    # the file's mtime is "now" on the filesystem's clock: the cache must not trust it
    now = proj.store.fs_now()
    os.utime(p, ns=(now, now))
    cp1, r1 = capture(proj, "manual")
    # same size, same mtime, new content: a stat-only check would miss this
    p.write_bytes(b"bbbb")
    os.utime(p, ns=(now, now))
    cp2, r2 = capture(proj, "manual")
    assert r2.stats.hashed == 1
    assert cp1.tree != cp2.tree


def test_an_old_entry_is_trusted_and_a_touched_one_is_not(tmp_path):
    root = tmp_path / "proj"
    p = write(root, "a.txt", "aaaa")
    past = int((time.time() - 100) * 1e9)
    os.utime(p, ns=(past, past))
    proj = project(root)
    capture(proj, "manual")
    _, again = capture(proj, "manual")
    assert again.stats.hashed == 0
    os.chmod(p, 0o755)   # ctime and mode change
    _, after_chmod = capture(proj, "manual")
    assert after_chmod.stats.hashed == 1
