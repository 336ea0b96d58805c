"""The catalog: SQLite (WAL) beside the objects.

Projects, checkpoints (numbered per project, never reused), the changes under each
checkpoint, the restores (for undo), and the per-project stat cache. Writes are short
transactions with a busy timeout, because concurrent hook processes are normal. The
schema is built in a temporary file and linked into place, so racing first calls can
never see half a schema.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from contextlib import contextmanager
from rewind.structs import dataclass
from rewind.structs import field

from rewind.constants import CATALOG_NAME, SCHEMA_VERSION
from rewind.errors import RewindError
from rewind.fsutil import ensure_private_dir

BUSY_TIMEOUT_S = 30

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE projects (
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    next_number INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE checkpoints (
    project_id INTEGER NOT NULL REFERENCES projects(id),
    number INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    tree TEXT NOT NULL,
    message TEXT,
    agent TEXT,
    session_id TEXT,
    prompt_id TEXT,
    prompt_source TEXT,
    transcript_path TEXT,
    git_head TEXT,
    git_branch TEXT,
    restore_target INTEGER,
    stats TEXT,
    PRIMARY KEY (project_id, number)
) WITHOUT ROWID;
CREATE TABLE changes (
    project_id INTEGER NOT NULL,
    number INTEGER NOT NULL,
    path BLOB NOT NULL,
    status TEXT NOT NULL,
    old_kind TEXT, new_kind TEXT,
    old_mode INTEGER, new_mode INTEGER,
    old_oid TEXT, new_oid TEXT,
    old_size INTEGER, new_size INTEGER,
    source TEXT NOT NULL,
    tool TEXT,
    command TEXT,
    session_id TEXT,
    flags TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (project_id, number, path)
) WITHOUT ROWID;
CREATE TABLE restores (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL,
    target INTEGER NOT NULL,
    safety INTEGER NOT NULL,
    is_undo INTEGER NOT NULL DEFAULT 0,
    undone INTEGER NOT NULL DEFAULT 0,
    paths TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE project_state (
    project_id INTEGER PRIMARY KEY,
    last_tree TEXT,
    last_scan_ns INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE sessions (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    project_id INTEGER NOT NULL,
    first_cwd TEXT,
    source TEXT,
    started_ns INTEGER NOT NULL,
    ended_ns INTEGER,
    PRIMARY KEY (agent, session_id)
);
CREATE TABLE windows (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL,
    agent TEXT NOT NULL,
    session_id TEXT,
    agent_id TEXT,
    tool_use_id TEXT,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    command TEXT,
    target BLOB,
    opened_ns INTEGER NOT NULL,
    closed_ns INTEGER,
    post_oid TEXT,
    failed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX windows_open ON windows(project_id, closed_ns);
CREATE TABLE observations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL,
    base INTEGER,
    path BLOB NOT NULL,
    source TEXT NOT NULL,
    tool TEXT,
    command TEXT,
    session_id TEXT,
    flags TEXT NOT NULL DEFAULT '',
    ts INTEGER NOT NULL
);
CREATE INDEX observations_base ON observations(project_id, base);
CREATE TABLE preimages (
    project_id INTEGER NOT NULL,
    base INTEGER,
    path BLOB NOT NULL,
    oid TEXT NOT NULL,
    tool TEXT,
    tool_use_id TEXT,
    session_id TEXT,
    ts INTEGER NOT NULL
);
CREATE TABLE statcache (
    project_id INTEGER NOT NULL,
    path BLOB NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mode INTEGER NOT NULL,
    oid TEXT NOT NULL,
    PRIMARY KEY (project_id, path)
) WITHOUT ROWID;
"""


@dataclass
class Checkpoint:
    project_id: int
    number: int
    kind: str
    created_at: str
    created_ns: int
    tree: str
    message: str | None = None
    agent: str | None = None
    session_id: str | None = None
    prompt_id: str | None = None
    prompt_source: str | None = None
    transcript_path: str | None = None
    git_head: str | None = None
    git_branch: str | None = None
    restore_target: int | None = None
    stats: dict = field(default_factory=dict)


_CP_COLS = ("project_id", "number", "kind", "created_at", "created_ns", "tree", "message", "agent",
            "session_id", "prompt_id", "prompt_source", "transcript_path", "git_head", "git_branch",
            "restore_target", "stats")


def _row_to_checkpoint(row) -> Checkpoint:
    values = dict(zip(_CP_COLS, row))
    values["stats"] = json.loads(values["stats"] or "{}")
    return Checkpoint(**values)


@dataclass
class ChangeRow:
    path: str
    status: str
    old_kind: str | None
    new_kind: str | None
    old_mode: int | None
    new_mode: int | None
    old_oid: str | None
    new_oid: str | None
    old_size: int | None
    new_size: int | None
    source: str = "unknown"
    tool: str | None = None
    command: str | None = None
    session_id: str | None = None
    flags: list[str] = field(default_factory=list)
    # a restore's change: who wrote the content it put back, and from which checkpoint
    # ({"checkpoint": N, "source": ..., "tool": ..., "command": ..., "session_id": ...})
    restored: dict | None = None


_CH_COLS = ("path", "status", "old_kind", "new_kind", "old_mode", "new_mode", "old_oid", "new_oid",
            "old_size", "new_size", "source", "tool", "command", "session_id", "flags", "restored")


# Schema changes, in order: _MIGRATIONS[v] takes a catalog from version v+1 to v+2.
_MIGRATIONS = [
    # 2: the watcher (issue 4)
    """
    CREATE TABLE watch_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id INTEGER NOT NULL,
        path BLOB NOT NULL,
        kind TEXT NOT NULL,
        ts INTEGER NOT NULL,
        writer TEXT
    );
    CREATE INDEX watch_events_seq ON watch_events(project_id, seq);
    CREATE TABLE watchers (
        project_id INTEGER PRIMARY KEY,
        pid INTEGER NOT NULL,
        started_ns INTEGER NOT NULL,
        ready_ns INTEGER,
        heartbeat_ns INTEGER NOT NULL,
        dirs INTEGER NOT NULL DEFAULT 0,
        events INTEGER NOT NULL DEFAULT 0,
        overflow_ns INTEGER,
        limit_hit INTEGER NOT NULL DEFAULT 0,
        background INTEGER NOT NULL DEFAULT 0,
        stopped_ns INTEGER,
        stop_reason TEXT
    );
    CREATE TABLE watch_cookies (name TEXT PRIMARY KEY, project_id INTEGER NOT NULL, seq INTEGER NOT NULL);
    ALTER TABLE project_state ADD COLUMN scan_start_ns INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE project_state ADD COLUMN consumed_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE project_state ADD COLUMN last_stats TEXT;
    ALTER TABLE project_state ADD COLUMN full_scans INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE project_state ADD COLUMN quick_scans INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE project_state ADD COLUMN fallbacks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE project_state ADD COLUMN fallback TEXT;
    ALTER TABLE project_state ADD COLUMN fallback_ns INTEGER;
    ALTER TABLE windows ADD COLUMN agent_pid INTEGER;
    """,
    # 3: attribution that holds in real sessions (issue 14): a shell window's pid account
    # (procs.py), and who wrote the content a restore put back
    """
    ALTER TABLE windows ADD COLUMN pid_mark INTEGER;
    ALTER TABLE windows ADD COLUMN hook_pids TEXT;
    ALTER TABLE changes ADD COLUMN restored TEXT;
    CREATE TABLE damaged (oid TEXT PRIMARY KEY, problem TEXT NOT NULL, found_ns INTEGER NOT NULL);
    ALTER TABLE checkpoints ADD COLUMN hidden_ns INTEGER;
    ALTER TABLE checkpoints ADD COLUMN hidden_why TEXT;
    """,
]


def _json_or_none(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _migrate(db, version: int) -> None:
    """Bring a catalog at `version` up to SCHEMA_VERSION, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        current = int(db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        for step in range(current - 1, SCHEMA_VERSION - 1):
            for stmt in _MIGRATIONS[step].split(";"):
                if stmt.strip():
                    db.execute(stmt)
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class Catalog:
    def __init__(self, home: str):
        self.home = home
        self.path = os.path.join(home, CATALOG_NAME)
        if not os.path.exists(self.path):
            _create(home, self.path)
        self._pending_marks: dict[str, int] = {}
        self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self.db.execute("PRAGMA synchronous=NORMAL")
        version = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if version is None or int(version[0]) > SCHEMA_VERSION:
            raise RewindError(f"the catalog at {self.path} has schema {version and version[0]}, "
                              f"newer than this rewind understands ({SCHEMA_VERSION})",
                              hint="upgrade rewind")
        if int(version[0]) < SCHEMA_VERSION:
            _migrate(self.db, int(version[0]))

    def close(self) -> None:
        self.db.close()

    # -- transactions ------------------------------------------------------------------
    def transaction(self):
        return _Txn(self.db, self)

    @contextmanager
    def durable(self):
        """Commits inside are on disk when they return (the WAL synced at each commit), not
        only after the next checkpoint of the WAL: for what must survive a power cut, such
        as a rewind's safety checkpoint before the rewind writes a byte."""
        self.db.execute("PRAGMA synchronous=FULL")
        try:
            yield
        finally:
            self.db.execute("PRAGMA synchronous=NORMAL")

    # -- projects ------------------------------------------------------------------------
    def project_id(self, root: str, create: bool) -> int | None:
        row = self.db.execute("SELECT id FROM projects WHERE root=?", (root,)).fetchone()
        if row or not create:
            return row[0] if row else None
        from rewind.clock import iso_now
        with self.transaction():
            self.db.execute("INSERT OR IGNORE INTO projects(root, created_at) VALUES (?, ?)",
                            (root, iso_now()))
        return self.db.execute("SELECT id FROM projects WHERE root=?", (root,)).fetchone()[0]

    def projects(self) -> list[tuple[int, str]]:
        return self.db.execute("SELECT id, root FROM projects ORDER BY root").fetchall()

    def project_root(self, project_id: int) -> str:
        return self.db.execute("SELECT root FROM projects WHERE id=?", (project_id,)).fetchone()[0]

    # -- checkpoints -------------------------------------------------------------------
    def allocate_number(self, project_id: int) -> int:
        """Inside a transaction: the next checkpoint number, never handed out twice, also when
        the catalog lost its newest commits (a deleted `catalog.sqlite-wal`): the highest
        number ever handed out is also kept outside it (`marks/`), written once the
        transaction commits, and a number at or below it is not handed out again."""
        row = self.db.execute("UPDATE projects SET next_number = next_number + 1 WHERE id=? "
                              "RETURNING next_number - 1", (project_id,)).fetchone()
        n = row[0]
        root = self.project_root(project_id)
        mark = read_mark(self.home, root)
        if mark is not None and n <= mark:
            self._lost(project_id, n, mark)
            n = mark + 1
            self.db.execute("UPDATE projects SET next_number=? WHERE id=?", (n + 1, project_id))
        self._pending_marks[root] = n
        return n

    def check_lost(self, project_id: int) -> dict | None:
        """For a command: numbers handed out that this catalog does not know (its newest
        commits were lost). Recorded (numbering goes on above them; gc sweeps nothing until
        `rewind gc --forget-lost`) and returned; None when there are none."""
        known = self.lost(project_id)
        root = self.project_root(project_id)
        mark = read_mark(self.home, root)
        next_number = self.db.execute("SELECT next_number FROM projects WHERE id=?", (project_id,)).fetchone()[0]
        if mark is not None and next_number <= mark:
            with self.transaction():
                self._lost(project_id, next_number, mark)
                self.db.execute("UPDATE projects SET next_number=? WHERE id=?", (mark + 1, project_id))
            return self.lost(project_id)
        return known

    def _lost(self, project_id: int, first: int, last: int) -> None:
        from rewind.clock import now_ns
        self.set_meta(f"lost:{project_id}", json.dumps({"first": first, "last": last, "found_ns": now_ns()}))

    def lost(self, project_id: int) -> dict | None:
        raw = self.meta(f"lost:{project_id}")
        return _json_or_none(raw)

    def any_lost(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT key FROM meta WHERE key LIKE 'lost:%'")]

    def forget_lost(self) -> int:
        with self.transaction():
            return self.db.execute("DELETE FROM meta WHERE key LIKE 'lost:%'").rowcount

    def _commit_marks(self) -> None:
        marks, self._pending_marks = self._pending_marks, {}
        for root, n in marks.items():
            write_mark(self.home, root, n)

    def insert_checkpoint(self, cp: Checkpoint) -> None:
        values = [getattr(cp, c) for c in _CP_COLS]
        values[-1] = json.dumps(cp.stats, sort_keys=True)
        self.db.execute(f"INSERT INTO checkpoints({','.join(_CP_COLS)}) VALUES "
                        f"({','.join('?' * len(_CP_COLS))})", values)

    def set_stats(self, project_id: int, number: int, stats: dict) -> None:
        self.db.execute("UPDATE checkpoints SET stats=? WHERE project_id=? AND number=?",
                        (json.dumps(stats, sort_keys=True), project_id, number))

    # A hidden checkpoint (retention.py: past the retention, or dropped by a shortened
    # setting) has left the listings but not the store yet: the readers below skip it
    # unless asked; gc's roots, next_after and the retention itself see it.
    def checkpoint(self, project_id: int, number: int, hidden: bool = False) -> Checkpoint | None:
        row = self.db.execute(f"SELECT {','.join(_CP_COLS)} FROM checkpoints "
                              "WHERE project_id=? AND number=?" + ("" if hidden else " AND hidden_ns IS NULL"),
                              (project_id, number)).fetchone()
        return _row_to_checkpoint(row) if row else None

    def checkpoints(self, project_id: int, limit: int | None = None, hidden: bool = False) -> list[Checkpoint]:
        """Newest first."""
        sql = (f"SELECT {','.join(_CP_COLS)} FROM checkpoints WHERE project_id=?"
               + ("" if hidden else " AND hidden_ns IS NULL") + " ORDER BY number DESC")
        args: tuple = (project_id,)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        return [_row_to_checkpoint(r) for r in self.db.execute(sql, args)]

    def count(self, project_id: int) -> int:
        return self.db.execute("SELECT count(*) FROM checkpoints WHERE project_id=? AND hidden_ns IS NULL",
                               (project_id,)).fetchone()[0]

    def latest(self, project_id: int, hidden: bool = False) -> Checkpoint | None:
        got = self.checkpoints(project_id, limit=1, hidden=hidden)
        return got[0] if got else None

    def hidden(self, project_id: int) -> list[tuple[int, int, str]]:
        """(number, hidden since, why) of the project's hidden checkpoints, newest first."""
        return self.db.execute("SELECT number, hidden_ns, hidden_why FROM checkpoints WHERE project_id=? "
                               "AND hidden_ns IS NOT NULL ORDER BY number DESC", (project_id,)).fetchall()

    def set_hidden(self, project_id: int, hide: dict[int, tuple[int, str]], show: list[int]) -> None:
        """Inside a transaction: hide (number -> (since, why), the first time only) or show."""
        self.db.executemany("UPDATE checkpoints SET hidden_ns=coalesce(hidden_ns, ?), hidden_why=? "
                            "WHERE project_id=? AND number=?",
                            [(since, why, project_id, n) for n, (since, why) in hide.items()])
        self.db.executemany("UPDATE checkpoints SET hidden_ns=NULL, hidden_why=NULL WHERE project_id=? "
                            "AND number=?", [(project_id, n) for n in show])

    def next_after(self, project_id: int, number: int) -> Checkpoint | None:
        row = self.db.execute(f"SELECT {','.join(_CP_COLS)} FROM checkpoints WHERE project_id=? "
                              "AND number>? ORDER BY number LIMIT 1", (project_id, number)).fetchone()
        return _row_to_checkpoint(row) if row else None

    # -- changes -----------------------------------------------------------------------
    def insert_changes(self, project_id: int, number: int, changes: list[ChangeRow]) -> None:
        rows = []
        for c in changes:
            values = [getattr(c, col) for col in _CH_COLS]
            values[0] = os.fsencode(c.path)
            values[-2] = ",".join(c.flags)
            values[-1] = json.dumps(c.restored, sort_keys=True) if c.restored else None
            rows.append((project_id, number, *values))
        self.db.executemany(f"INSERT OR REPLACE INTO changes(project_id, number, {','.join(_CH_COLS)}) "
                            f"VALUES (?, ?, {','.join('?' * len(_CH_COLS))})", rows)

    def changes(self, project_id: int, number: int) -> list[ChangeRow] | None:
        """Stored changes under a checkpoint, or None when they are not final yet."""
        rows = self.db.execute(f"SELECT {','.join(_CH_COLS)} FROM changes WHERE project_id=? AND "
                               "number=? ORDER BY path", (project_id, number)).fetchall()
        out = []
        for r in rows:
            values = dict(zip(_CH_COLS, r))
            values["path"] = os.fsdecode(values["path"])
            values["flags"] = [f for f in values["flags"].split(",") if f]
            values["restored"] = _json_or_none(values["restored"])
            out.append(ChangeRow(**values))
        return out

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

    def latest_change(self, project_id: int, path: str, before: int) -> ChangeRow | None:
        """The newest stored change of `path` under a checkpoint numbered below `before`: what
        wrote the content `path` has in checkpoint `before`."""
        r = self.db.execute(f"SELECT {','.join(_CH_COLS)} FROM changes WHERE project_id=? AND path=? "
                            "AND number<? ORDER BY number DESC LIMIT 1",
                            (project_id, os.fsencode(path), before)).fetchone()
        if r is None:
            return None
        values = dict(zip(_CH_COLS, r))
        values["path"] = path
        values["flags"] = [f for f in values["flags"].split(",") if f]
        values["restored"] = _json_or_none(values["restored"])
        return ChangeRow(**values)

    # -- restores ----------------------------------------------------------------------
    def insert_restore(self, project_id: int, target: int, safety: int, is_undo: bool,
                       paths: list[str] | None, created_at: str) -> int:
        cur = self.db.execute("INSERT INTO restores(project_id, target, safety, is_undo, paths, created_at)"
                              " VALUES (?, ?, ?, ?, ?, ?)",
                              (project_id, target, safety, int(is_undo),
                               json.dumps(paths) if paths is not None else None, created_at))
        return cur.lastrowid

    def newest_undoable(self, project_id: int):
        return self.db.execute("SELECT id, target, safety FROM restores WHERE project_id=? AND "
                               "is_undo=0 AND undone=0 ORDER BY id DESC LIMIT 1",
                               (project_id,)).fetchone()

    def mark_undone(self, restore_id: int) -> None:
        self.db.execute("UPDATE restores SET undone=1 WHERE id=?", (restore_id,))

    def restore_made(self, project_id: int, safety: int):
        """The restore whose safety checkpoint is `safety`: (target, paths) or None."""
        row = self.db.execute("SELECT target, paths FROM restores WHERE project_id=? AND safety=?",
                              (project_id, safety)).fetchone()
        if not row:
            return None
        return row[0], (json.loads(row[1]) if row[1] else None)

    # -- stat cache --------------------------------------------------------------------
    def load_statcache(self, project_id: int) -> dict[str, tuple]:
        enc = sys.getfilesystemencoding()      # os.fsdecode, without a Python call per row
        return {r[0].decode(enc, "surrogateescape"): r[1:] for r in self.db.execute(
            "SELECT path, kind, size, mtime_ns, ctime_ns, ino, mode, oid FROM statcache "
            "WHERE project_id=?", (project_id,))}

    def statcache_lookup(self, project_id: int) -> "_LazyCache":
        return _LazyCache(self.db, project_id)

    def update_statcache(self, project_id: int, upserts: dict[str, tuple], removed: set[str],
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


    # -- hook state ----------------------------------------------------------------------
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

    def scan_state(self, project_id: int) -> dict:
        cols = ("last_tree", "last_scan_ns", "scan_start_ns", "consumed_seq", "last_stats", "full_scans",
                "quick_scans", "fallbacks", "fallback", "fallback_ns")
        row = self.db.execute(f"SELECT {','.join(cols)} FROM project_state WHERE project_id=?",
                              (project_id,)).fetchone()
        return dict(zip(cols, row)) if row else {c: None for c in cols} | {
            "last_scan_ns": 0, "scan_start_ns": 0, "consumed_seq": 0, "full_scans": 0, "quick_scans": 0,
            "fallbacks": 0}

    # -- the watcher ------------------------------------------------------------------------
    _W_COLS = ("project_id", "pid", "started_ns", "ready_ns", "heartbeat_ns", "dirs", "events",
               "overflow_ns", "limit_hit", "background", "stopped_ns", "stop_reason")

    def watcher(self, project_id: int) -> dict | None:
        row = self.db.execute(f"SELECT {','.join(self._W_COLS)} FROM watchers WHERE project_id=?",
                              (project_id,)).fetchone()
        return dict(zip(self._W_COLS, row)) if row else None

    def events(self, project_id: int, after: int, upto: int | None) -> list[tuple[str, str, int, str | None]]:
        """(path, kind, ts, writer) of the watcher's events in (after, upto], oldest first."""
        sql = "SELECT path, kind, ts, writer FROM watch_events WHERE project_id=? AND seq>?"
        args: tuple = (project_id, after)
        if upto is not None:
            sql += " AND seq<=?"
            args += (upto,)
        return [(os.fsdecode(p), k, ts, w) for p, k, ts, w in self.db.execute(sql + " ORDER BY seq", args)]

    def last_event_seq(self, project_id: int) -> int:
        row = self.db.execute("SELECT max(seq) FROM watch_events WHERE project_id=?", (project_id,)).fetchone()
        return row[0] or 0

    def has_sessions(self, project_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM sessions WHERE project_id=? LIMIT 1",
                               (project_id,)).fetchone() is not None

    def session_project(self, agent: str, session_id: str) -> tuple[int, str | None] | None:
        return self.db.execute("SELECT project_id, first_cwd FROM sessions WHERE agent=? AND session_id=?",
                               (agent, session_id)).fetchone()

    def open_windows(self, project_id: int) -> list[dict]:
        """The windows that may explain what the next scan finds: open ones, and those closed
        after the last scan *began* (a long scan, the watcher's first one above all, may
        have listed a directory before a tool wrote there, and ended after it closed)."""
        cols = ("id", "agent", "session_id", "agent_id", "tool_use_id", "tool", "kind", "command",
                "target", "opened_ns", "closed_ns", "post_oid", "failed")
        rows = self.db.execute(f"SELECT {','.join(cols)} FROM windows WHERE project_id=? AND "
                               "(closed_ns IS NULL OR closed_ns >= (SELECT coalesce(max(CASE WHEN scan_start_ns > 0 "
                               "THEN min(scan_start_ns, last_scan_ns) ELSE last_scan_ns END), 0) "
                               "FROM project_state WHERE project_id=?))", (project_id, project_id))
        out = []
        for r in rows:
            w = dict(zip(cols, r))
            w["target"] = os.fsdecode(w["target"]) if w["target"] is not None else None
            out.append(w)
        return out

    def insert_observations(self, project_id: int, base: int | None, rows: list[ChangeRow], ts: int) -> None:
        self.db.executemany(
            "INSERT INTO observations(project_id, base, path, source, tool, command, session_id, flags, ts)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            [(project_id, base, os.fsencode(r.path), r.source, r.tool, r.command, r.session_id,
              ",".join(r.flags), ts) for r in rows])

    def observations(self, project_id: int, base: int | None) -> dict[str, tuple]:
        """Latest observation per path under checkpoint `base`: path -> (source, tool, command,
        session_id, flags)."""
        out: dict[str, tuple] = {}
        cond = "base IS NULL" if base is None else "base=?"
        args = (project_id,) if base is None else (project_id, base)
        for path, *rest in self.db.execute(
                f"SELECT path, source, tool, command, session_id, flags FROM observations "
                f"WHERE project_id=? AND {cond} ORDER BY seq", args):
            out[os.fsdecode(path)] = tuple(rest)
        return out

    # -- retention -----------------------------------------------------------------------
    def retention_rows(self, project_id: int) -> list[tuple]:
        """(number, created_ns, kind, restore_target, hidden_ns, hidden_why) of every
        checkpoint, hidden ones too, newest first."""
        return self.db.execute("SELECT number, created_ns, kind, restore_target, hidden_ns, hidden_why "
                               "FROM checkpoints WHERE project_id=? ORDER BY number DESC", (project_id,)).fetchall()

    def drop_checkpoints(self, project_id: int, numbers: list[int]) -> None:
        """Inside a transaction: the checkpoints and everything recorded under them."""
        if not numbers:
            return
        args = [(project_id, n) for n in numbers]
        self.db.executemany("DELETE FROM checkpoints WHERE project_id=? AND number=?", args)
        self.db.executemany("DELETE FROM changes WHERE project_id=? AND number=?", args)
        self.db.executemany("DELETE FROM observations WHERE project_id=? AND base=?", args)
        self.db.executemany("DELETE FROM preimages WHERE project_id=? AND base=?", args)
        self.db.executemany("DELETE FROM restores WHERE project_id=? AND safety=?", args)

    def prune_history(self, project_id: int, before_ns: int) -> int:
        """Inside a transaction: rows no kept checkpoint needs any more that are older than
        `before_ns`: closed tool windows the last scan already accounted for, pre-images
        and observations taken before any checkpoint. Returns rows removed."""
        db = self.db
        last_scan = self.state(project_id)[1]
        n = db.execute("DELETE FROM windows WHERE project_id=? AND closed_ns IS NOT NULL AND "
                       "closed_ns < ? AND closed_ns < ?", (project_id, last_scan, before_ns)).rowcount
        n += db.execute("DELETE FROM preimages WHERE project_id=? AND ts < ?",
                        (project_id, before_ns)).rowcount
        n += db.execute("DELETE FROM observations WHERE project_id=? AND base IS NULL AND ts < ?",
                        (project_id, before_ns)).rowcount
        return n

    def forget_state(self, project_id: int) -> None:
        """Inside a transaction: the caches that describe the tree as last scanned."""
        self.db.execute("DELETE FROM project_state WHERE project_id=?", (project_id,))
        self.db.execute("DELETE FROM statcache WHERE project_id=?", (project_id,))

    def forget_project(self, project_id: int) -> int:
        """Inside a transaction: every row of a project except its number counter (numbers
        are never reused, also after a forget). Returns the checkpoints removed."""
        n = self.count(project_id)
        for table in ("checkpoints", "changes", "observations", "preimages", "restores", "windows",
                      "sessions", "project_state", "statcache", "watch_events", "watch_cookies"):
            self.db.execute(f"DELETE FROM {table} WHERE project_id=?", (project_id,))
        return n

    def roots(self, project_ids: list[int] | None = None) -> dict[str, list]:
        """What keeps objects alive: checkpoint trees, the last scanned trees, pre-images and
        the stat cache's ids. One read transaction, so the lists agree with each other."""
        where, args = "", ()
        if project_ids is not None:
            where = f" WHERE project_id IN ({','.join('?' * len(project_ids)) or 'NULL'})"
            args = tuple(project_ids)
        self.db.execute("BEGIN")
        try:
            out = {
                "checkpoints": self.db.execute(
                    f"SELECT project_id, number, tree FROM checkpoints{where}", args).fetchall(),
                "last_trees": [r[0] for r in self.db.execute(
                    f"SELECT last_tree FROM project_state{where}", args) if r[0]],
                "preimages": [r[0] for r in self.db.execute(f"SELECT oid FROM preimages{where}", args)],
                "cached": self.db.execute(f"SELECT kind, oid FROM statcache{where}", args).fetchall(),
            }
        finally:
            self.db.execute("COMMIT")
        return out

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


class _LazyCache:
    """The stat cache, one row at a time (an incremental scan looks at a few paths)."""

    def __init__(self, db, project_id: int):
        self.db, self.project_id, self.memo = db, project_id, {}

    def get(self, key: str):
        if key not in self.memo:
            row = self.db.execute("SELECT kind, size, mtime_ns, ctime_ns, ino, mode, oid FROM statcache "
                                  "WHERE project_id=? AND path=?", (self.project_id, os.fsencode(key))).fetchone()
            self.memo[key] = tuple(row) if row else None
        return self.memo[key]

    def __iter__(self):
        return iter(())


class _Txn:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on error."""

    def __init__(self, db, catalog=None):
        self.db = db
        self.catalog = catalog

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.db.execute("COMMIT")
            if self.catalog is not None and self.catalog._pending_marks:
                self.catalog._commit_marks()
        else:
            self.db.execute("ROLLBACK")
            if self.catalog is not None:
                self.catalog._pending_marks = {}
        return False


MARKS_DIR = "marks"


def _mark_path(home: str, root: str) -> str:
    import hashlib
    return os.path.join(home, MARKS_DIR, hashlib.sha256(os.fsencode(root)).hexdigest()[:32])


def read_mark(home: str, root: str) -> int | None:
    try:
        with open(_mark_path(home, root), "rb") as f:
            return int(f.read(32).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def write_mark(home: str, root: str, n: int) -> None:
    """The highest checkpoint number handed out in a project (never lowered). Best effort,
    no fsync: it guards against a lost WAL, which a power cut would take with it anyway."""
    try:
        path = _mark_path(home, root)
        current = read_mark(home, root)
        if current is not None and current >= n:
            return
        ensure_private_dir(os.path.dirname(path))
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{n}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        pass


def _create(home: str, final: str) -> None:
    """Build the schema in a temp file and link it into place; losing the race is fine."""
    ensure_private_dir(home)
    tmp = os.path.join(home, f".{CATALOG_NAME}.{os.getpid()}.new")
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript("BEGIN;" + _SCHEMA + "".join(_MIGRATIONS) + "COMMIT;")
            db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        finally:
            db.close()
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
