"""The catalog's schema: the tables as a new catalog gets them, and the steps that bring an
older catalog up to SCHEMA_VERSION.

A new catalog is built in a temporary file and linked into place, so racing first calls
can never see half a schema. Loaded only when a catalog is created or migrated (the hooks
open an existing, current one).
"""

from __future__ import annotations

import os
import sqlite3

from rewind.constants import CATALOG_NAME, SCHEMA_VERSION
from rewind.fsutil import ensure_private_dir

SCHEMA = """
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


# Schema changes, in order: MIGRATIONS[v] takes a catalog from version v+1 to v+2.
MIGRATIONS = [
    # 2: the watcher
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
    # 3: attribution that holds in real sessions: a shell window's pid account
    # (procs.py), and who wrote the content a restore put back
    """
    ALTER TABLE windows ADD COLUMN pid_mark INTEGER;
    ALTER TABLE windows ADD COLUMN hook_pids TEXT;
    ALTER TABLE changes ADD COLUMN restored TEXT;
    CREATE TABLE damaged (oid TEXT PRIMARY KEY, problem TEXT NOT NULL, found_ns INTEGER NOT NULL);
    ALTER TABLE checkpoints ADD COLUMN hidden_ns INTEGER;
    ALTER TABLE checkpoints ADD COLUMN hidden_why TEXT;
    """,
    # 4: hooks the warm watcher serves: how many hook calls it served, how many
    # ran on their own, and why the last of those did
    """
    CREATE TABLE hook_counts (
        project_id INTEGER PRIMARY KEY,
        served INTEGER NOT NULL DEFAULT 0,
        standalone INTEGER NOT NULL DEFAULT 0,
        fallback TEXT,
        fallback_ns INTEGER
    );
    """,
    # 5: the first prompt does not wait for the first snapshot: a prompt that
    # comes while the watcher's first scan runs is recorded at once as pending and
    # completed by that scan; what the agent's edit tools found before they wrote meanwhile
    """
    ALTER TABLE watchers ADD COLUMN baseline_ns INTEGER;
    CREATE TABLE pending_checkpoints (
        project_id INTEGER NOT NULL,
        number INTEGER NOT NULL,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        message TEXT,
        agent TEXT,
        session_id TEXT,
        prompt_id TEXT,
        prompt_source TEXT,
        transcript_path TEXT,
        git_head TEXT,
        git_branch TEXT,
        PRIMARY KEY (project_id, number)
    ) WITHOUT ROWID;
    CREATE TABLE pending_edits (
        project_id INTEGER NOT NULL,
        path BLOB NOT NULL,
        kind TEXT NOT NULL,
        mode INTEGER,
        oid TEXT,
        size INTEGER,
        tool TEXT,
        session_id TEXT,
        ts INTEGER NOT NULL
    );
    """,
    # 6: objects may be zstd (codec 2, store/objects.py). No table changes: the version
    # itself is the point. A rewind that knows only zlib would take every zstd object for
    # damaged (and `verify --drop-damaged` would forget good checkpoints); at schema 6 it
    # says "upgrade rewind" instead.
    """
    INSERT OR REPLACE INTO meta(key, value) VALUES ('object_codecs', 'raw zlib zstd');
    """,
    # 7: history belongs to the person: what the
    # commands that delete history took, kept a day (history/gc.py TRASH_NS), and the checkpoint
    # numbers a purge rewrote
    """
    CREATE TABLE trash (
        id INTEGER PRIMARY KEY,
        batch INTEGER NOT NULL,
        project_id INTEGER NOT NULL,
        number INTEGER NOT NULL,
        tree TEXT NOT NULL,
        trashed_ns INTEGER NOT NULL,
        why TEXT NOT NULL,
        checkpoint TEXT NOT NULL,
        changes TEXT NOT NULL
    );
    CREATE INDEX trash_batch ON trash(batch);
    """,
    # 8: git state as git state: the git state a shell command found when it began
    # (`git_pre`, "HEAD BRANCH"), and each move of HEAD or branch a command made, found
    # when its window closed; a checkpoint's git move is read from them (capture/changes.py)
    """
    ALTER TABLE windows ADD COLUMN git_pre TEXT;
    CREATE TABLE git_moves (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        before TEXT NOT NULL,
        after TEXT NOT NULL,
        source TEXT NOT NULL,
        tool TEXT,
        command TEXT,
        session_id TEXT
    );
    CREATE INDEX git_moves_ts ON git_moves(project_id, ts);
    """,
    # 9: background shell commands and the agent's notices of their end. A shell window whose
    # command went on in the background (`task`: the agent's task id) stays open from its
    # Post event (`bg_ns`) until the task ends, with the processes it left running
    # (`bg_pids`, "PID@START,...") and the activity signature of their tree at the last
    # scan (`bg_sig`, capture/bgtree.py); a checkpoint made by such a notice folds under the
    # prompt that started the task (`folds_under`); and the hooks that ran on their own in a row,
    # none served since the first of them (`streak`, `streak_ns`): status and doctor name it
    """
    ALTER TABLE windows ADD COLUMN task TEXT;
    ALTER TABLE windows ADD COLUMN bg_ns INTEGER;
    ALTER TABLE windows ADD COLUMN bg_pids TEXT;
    ALTER TABLE windows ADD COLUMN bg_sig TEXT;
    ALTER TABLE checkpoints ADD COLUMN folds_under INTEGER;
    ALTER TABLE pending_checkpoints ADD COLUMN folds_under INTEGER;
    ALTER TABLE hook_counts ADD COLUMN streak INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE hook_counts ADD COLUMN streak_ns INTEGER;
    """,
    # 10: a revert's safety checkpoint names the checkpoints whose changes it took back
    # (`reverts`: a JSON list of numbers, newest first); list, show and --json say so
    """
    ALTER TABLE checkpoints ADD COLUMN reverts TEXT;
    """,
    # 11: store format 2, objects stored against a base (store/delta.py: codecs 3-5), made by
    # the background rewrites. No table changes: as at 6, the version is the point; a rewind
    # that knows only whole objects would take every delta for damaged, so it says "upgrade"
    """
    INSERT OR REPLACE INTO meta(key, value) VALUES ('object_codecs', 'raw zlib zstd zstd-delta zlib-delta zstd-dict');
    """,
]


def migrate(db, version: int) -> None:
    """Bring a catalog at `version` up to SCHEMA_VERSION, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        current = int(db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        for step in range(current - 1, SCHEMA_VERSION - 1):
            for stmt in MIGRATIONS[step].split(";"):
                if stmt.strip():
                    db.execute(stmt)
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def create(home: str, final: str) -> None:
    """Build the schema in a temp file and link it into place; losing the race is fine."""
    ensure_private_dir(home)
    tmp = os.path.join(home, f".{CATALOG_NAME}.{os.getpid()}.new")
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript("BEGIN;" + SCHEMA + "".join(MIGRATIONS) + "COMMIT;")
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
