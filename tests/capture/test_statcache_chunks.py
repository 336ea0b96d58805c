"""A big scan's stat cache rows go to the catalog in transactions of their own, before the
scan's (working_copy.STATCACHE_CHUNK): a first snapshot held the catalog's write lock for
0.5 s in one transaction, and every hook that writes a row waited for it."""

from __future__ import annotations

from helpers import project, write
from rewind.capture import working_copy
from rewind.capture.dirty import FULL
from rewind.capture.working_copy import Commit, Scan, locked
from rewind.catalog.db import Catalog


def _project(tmp_path, monkeypatch, names):
    """A project of these files, with chunks of 25 rows."""
    monkeypatch.setattr(working_copy, "STATCACHE_CHUNK", 25)
    for i, name in enumerate(names):
        write(tmp_path / "proj", name, f"{i}\n")
    return project(tmp_path / "proj")


def test_a_big_scans_cache_rows_are_all_written_in_chunks_with_room_between(tmp_path, monkeypatch):
    proj = _project(tmp_path, monkeypatch, [f"d{i % 7}/f{i}.txt" for i in range(180)])
    others: list[int] = []

    def between():
        # another connection (a hook, say) writes between two chunks: the lock is free here
        other = Catalog(proj.home)
        try:
            with other.transaction():
                other.set_meta("test-between", str(len(others)))
            others.append(1)
        finally:
            other.close()
    try:
        with locked(proj) as wc:
            wc.between_chunks = between
            first = wc.commit(wc.scan(Scan.auto(FULL)), Commit("manual"))
        assert len(others) == 180 // 25 + 1                        # 8 chunks, room after each
        rows = proj.catalog.db.execute("SELECT count(*) FROM statcache WHERE project_id=?",
                                       (proj.id,)).fetchone()[0]
        assert rows == 180 + 7 + 1                                 # every file, directory and the root
        with locked(proj) as wc:                                   # the cache vouches for everything
            scanned = wc.scan(Scan.full())
            second = wc.commit(scanned, Commit("manual"))
        assert scanned.result.stats.hashed == 0 and second.tree == first.tree
    finally:
        proj.close()


def test_a_small_scan_keeps_its_one_transaction(tmp_path, monkeypatch):
    proj = _project(tmp_path, monkeypatch, [f"f{i}.txt" for i in range(40)])
    calls = []
    try:
        with locked(proj) as wc:
            wc.between_chunks = lambda: calls.append(1)
            wc.commit(wc.scan(Scan.auto(FULL)), Commit("manual"))
        assert calls == []
    finally:
        proj.close()
