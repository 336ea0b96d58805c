"""The catalog's view of the tree as last scanned: the per-project stat cache, the scan
state (last tree, when, how far into the watcher's events), and the objects found damaged
(which the stat cache must not vouch for)."""

from __future__ import annotations

import os
import sys
from operator import itemgetter

from rewind.model import ScanState, StatEntry

_FIELDS = itemgetter(slice(0, 7))          # a row's StatEntry fields (its path is the 8th)


class StatCacheMixin:
    # -- stat cache --------------------------------------------------------------------
    def load_statcache(self, project_id: int) -> dict[str, StatEntry]:
        # 100,000 rows make 200,000 objects the cyclic collector walks again and again while
        # they are made, and none can be part of a cycle: it waits. CPU time for 100,000 rows
        # (2 shared cores): 283-285 ms paused, 326-366 ms running; plain tuples, running: 282-296 ms
        import gc
        enc = sys.getfilesystemencoding()      # os.fsdecode, without a Python call per row
        paused = gc.isenabled()
        gc.disable()
        try:
            # the entries made by `map`, not a call per row in a comprehension: as cheap as
            # the plain tuples were (10,000 rows: 26.2-26.6 ms, a comprehension 27.9-29.9)
            rows = self.db.execute("SELECT kind, size, mtime_ns, ctime_ns, ino, mode, oid, path FROM statcache "
                                   "WHERE project_id=?", (project_id,)).fetchall()
            return dict(zip([r[7].decode(enc, "surrogateescape") for r in rows],
                            map(StatEntry, map(_FIELDS, rows))))
        finally:
            if paused:
                gc.enable()

    def statcache_lookup(self, project_id: int) -> "_LazyCache":
        return _LazyCache(self.db, project_id)

    def update_statcache(self, project_id: int, upserts: dict[str, StatEntry], removed: set[str],
                         removed_prefixes: set[str] = frozenset()) -> None:
        for prefix in removed_prefixes:
            lo = os.fsencode(prefix)
            self.db.execute("DELETE FROM statcache WHERE project_id=? AND path>=? AND path<?",
                            (project_id, lo, lo[:-1] + b"0"))   # '0' follows '/'
        if removed:
            self.db.executemany("DELETE FROM statcache WHERE project_id=? AND path=?",
                                [(project_id, os.fsencode(p)) for p in removed])
        if upserts:
            self.db.executemany("INSERT OR REPLACE INTO statcache(project_id, path, kind, size, mtime_ns,"
                                " ctime_ns, ino, mode, oid) VALUES (?,?,?,?,?,?,?,?,?)",
                                ((project_id, os.fsencode(p), *v) for p, v in upserts.items()))   # no list: memory

    # -- scan state ----------------------------------------------------------------------
    def state(self, project_id: int) -> tuple[str | None, int]:
        row = self.db.execute("SELECT last_tree, last_scan_ns FROM project_state WHERE project_id=?",
                              (project_id,)).fetchone()
        return (row[0], row[1]) if row else (None, 0)

    def set_state(self, project_id: int, last_tree: str, last_scan_ns: int, **more) -> None:
        """Inside a transaction: the last scan's tree and time (and any other column)."""
        self.db.execute("INSERT OR IGNORE INTO project_state(project_id) VALUES (?)", (project_id,))
        cols = {"last_tree": last_tree, "last_scan_ns": last_scan_ns, **more}
        self.db.execute(f"UPDATE project_state SET {', '.join(f'{c}=?' for c in cols)} WHERE project_id=?",
                        (*cols.values(), project_id))

    def scan_state(self, project_id: int) -> ScanState:
        row = self.db.execute(f"SELECT {','.join(ScanState._fields)} FROM project_state WHERE project_id=?",
                              (project_id,)).fetchone()
        return ScanState(*row) if row else ScanState()

    def forget_state(self, project_id: int) -> None:
        """Inside a transaction: the caches that describe the tree as last scanned."""
        self.db.execute("DELETE FROM project_state WHERE project_id=?", (project_id,))
        self.db.execute("DELETE FROM statcache WHERE project_id=?", (project_id,))

    # -- damage ------------------------------------------------------------------------
    def note_damaged(self, found: dict[str, str], now_ns: int) -> None:
        """Objects found damaged or missing: the next scan stores their content afresh
        instead of trusting the stat cache (a damaged blob must not be reused)."""
        if found:
            with self.transaction():
                self.db.executemany("INSERT OR IGNORE INTO damaged(oid, problem, found_ns) VALUES (?,?,?)",
                                    [(oid, problem, now_ns) for oid, problem in found.items()])

    def damaged(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT oid FROM damaged")}

    def clear_damaged(self, oids) -> None:
        """Inside a transaction: these are whole again."""
        self.db.executemany("DELETE FROM damaged WHERE oid=?", [(o,) for o in oids])


class _LazyCache:
    """The stat cache, one row at a time (an incremental scan looks at a few paths)."""

    def __init__(self, db, project_id: int):
        self.db, self.project_id, self.memo = db, project_id, {}

    def get(self, key: str) -> StatEntry | None:
        if key not in self.memo:
            row = self.db.execute("SELECT kind, size, mtime_ns, ctime_ns, ino, mode, oid FROM statcache "
                                  "WHERE project_id=? AND path=?", (self.project_id, os.fsencode(key))).fetchone()
            self.memo[key] = StatEntry(row) if row else None
        return self.memo[key]

    def __iter__(self):
        return iter(())
