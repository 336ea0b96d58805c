"""The stat cache's rows: `StatEntry`, read by name from the catalog and from the lazy lookup.
(What the walker trusts of them: tests/capture/test_walker.py.)"""

from __future__ import annotations

import os

from helpers import age_files, project, write
from rewind.capture.working_copy import capture


def test_stat_cache_rows_are_read_by_name_from_the_catalog_and_the_lazy_lookup(tmp_path):
    import pickle
    import stat as S

    from rewind.model import StatEntry
    from rewind.store.objects import digest_of
    from rewind.store.tree import DIR, FILE, LINK
    root = tmp_path / "proj"
    p = write(root, "d/a.txt", "hello")
    os.symlink("d/a.txt", root / "link")
    age_files(root)
    proj = project(root)
    try:
        _, result = capture(proj, "manual")
        st = os.lstat(p)
        rows = proj.catalog.load_statcache(proj.id)
        a = rows["d/a.txt"]
        assert isinstance(a, StatEntry) and a == result.cache_upserts["d/a.txt"]
        assert (a.kind, a.size, a.mtime_ns, a.ctime_ns, a.ino, a.mode, a.oid) == (
            FILE, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, S.S_IMODE(st.st_mode), digest_of(b"hello"))
        assert (rows["link"].kind, rows["link"].size, rows["link"].oid) == (LINK, 7, digest_of(b"d/a.txt"))
        assert rows["d/"].kind == DIR and rows["d/"].oid == result.trees[result.root]["d"].oid
        lazy = proj.catalog.statcache_lookup(proj.id)
        assert isinstance(lazy.get("d/a.txt"), StatEntry) and lazy.get("d/a.txt") == a
        assert lazy.get("missing") is None
        again = pickle.loads(pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL))   # a fan-out worker's rows
        assert type(again) is StatEntry and again == a and again.oid == a.oid
        assert "oid=" in repr(a)
    finally:
        proj.close()
