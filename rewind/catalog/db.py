"""The catalog: SQLite (WAL) beside the objects, and the only code that speaks SQL.

Projects, checkpoints (numbered per project, never reused), the changes under each
checkpoint, the restores (for undo), the per-project stat cache, the hooks' sessions and
tool windows, and the watcher's events. Writes are short transactions with a busy timeout,
because concurrent hook processes are normal. The schema is built in a temporary file and
linked into place (schema.py), so racing first calls can never see half a schema.

`Catalog` is one class assembled from one mixin per group of tables, each in its own
module: checkpoints.py (checkpoints, changes, restores, retention), numbers.py (checkpoint
numbers), statcache.py (stat cache, scan state, damaged objects), sessions.py (sessions,
tool windows, pre-images, observations), watch.py (the watcher's rows). This module holds
the connection, transactions, projects and meta. A method documented "inside a
transaction" runs in the caller's `with catalog.transaction():`.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager

from rewind.catalog.checkpoints import CheckpointsMixin
from rewind.catalog.numbers import NumbersMixin
from rewind.catalog.pending import PendingMixin
from rewind.catalog.sessions import SessionsMixin
from rewind.catalog.statcache import StatCacheMixin
from rewind.catalog.trash import TrashMixin
from rewind.catalog.watch import WatchMixin
from rewind.constants import CATALOG_NAME, SCHEMA_VERSION, STALL_S
from rewind.errors import SchemaTooNew
from rewind.model import CheckpointTree

BUSY_TIMEOUT_S = 30


class Catalog(CheckpointsMixin, NumbersMixin, StatCacheMixin, SessionsMixin, WatchMixin, PendingMixin, TrashMixin):
    def __init__(self, home: str, shared: bool = False):
        """`shared`: used from more than one thread, one at a time (the watcher's serving
        connection: watch/serve.py)."""
        self.home = home
        self.path = os.path.join(home, CATALOG_NAME)
        if not os.path.exists(self.path):
            from rewind.catalog.schema import create
            create(home, self.path)
        self._numbers_to_write: dict[str, int] = {}
        # a dict: committed highest numbers wait here for write_numbers_later() (a served call
        # writes them after its answer: the rename is 0.4 ms on ext4); None: written at commit
        self.numbers_later: dict[str, int] | None = None
        self._riders: list[tuple[str, tuple]] = []   # statements for the next transaction
        self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                  check_same_thread=not shared)
        self.db.execute("PRAGMA synchronous=NORMAL")
        version = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if version is None or int(version[0]) > SCHEMA_VERSION:
            raise SchemaTooNew(f"the catalog at {self.path} has schema {version and version[0]}, "
                               f"newer than this rewind understands ({SCHEMA_VERSION})",
                               hint="upgrade rewind")
        if int(version[0]) < SCHEMA_VERSION:
            from rewind.catalog.schema import migrate
            migrate(self.db, int(version[0]))

    def close(self) -> None:
        self.db.close()

    def clean(self) -> bool:
        """No transaction open, nothing queued for the next one: fit to serve another call."""
        return not self.db.in_transaction and not self._riders and not self._numbers_to_write

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

    def quick_check(self) -> str:
        """SQLite's own check of the catalog file: "ok", or the first problem it found."""
        return self.db.execute("PRAGMA quick_check").fetchone()[0]

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

    def forget_project(self, project_id: int) -> int:
        """Inside a transaction: every row of a project except its number counter (numbers
        are never reused, also after a forget). Returns the checkpoints removed."""
        n = self.count(project_id)
        for table in ("checkpoints", "changes", "observations", "preimages", "restores", "windows",
                      "sessions", "project_state", "statcache", "watch_events", "watch_cookies",
                      "hook_counts", "pending_checkpoints", "pending_edits"):
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
                "checkpoints": list(map(CheckpointTree._make, self.db.execute(
                    f"SELECT project_id, number, tree FROM checkpoints{where}", args))),
                "last_trees": [r[0] for r in self.db.execute(
                    f"SELECT last_tree FROM project_state{where}", args) if r[0]],
                "preimages": [r[0] for r in self.db.execute(f"SELECT oid FROM preimages{where}", args)]
                + [r[0] for r in self.db.execute(f"SELECT oid FROM pending_edits{where}", args) if r[0]],
                "cached": self.db.execute(f"SELECT kind, oid FROM statcache{where}", args).fetchall(),
                # the trash's checkpoints keep their content until it is emptied (trash.py)
                "trashed": [r[0] for r in self.db.execute(f"SELECT tree FROM trash{where}", args)],
            }
        finally:
            self.db.execute("COMMIT")
        return out

    # -- meta ------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


class _Txn:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on error."""

    def __init__(self, db, catalog=None):
        self.db = db
        self.catalog = catalog

    def __enter__(self):
        if self.catalog is None:
            self.db.execute("BEGIN IMMEDIATE")
        else:
            self._begin()
        if self.catalog is not None and self.catalog._riders:
            riders, self.catalog._riders = self.catalog._riders, []
            for sql, args in riders:
                self.db.execute(sql, args)
        return self.db

    def _begin(self) -> None:
        """BEGIN IMMEDIATE, waiting STALL_S at first: a write lock held that long may be a
        watcher stopped in a transaction (SIGSTOP, a debugger), which is killed
        (rewind/stalled.py verifies it: its watcher lock, its command line, stopped twice);
        any other holder, a gc or a long commit, is waited for up to BUSY_TIMEOUT_S in all.
        The busy timeout is a connection setting: two pragmas, a few microseconds."""
        self.db.execute(f"PRAGMA busy_timeout={int(STALL_S * 1000)}")
        try:
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if "locked" not in str(e):
                    raise
                from rewind.stalled import free_catalog
                free_catalog(self.catalog.home)
                self.db.execute(f"PRAGMA busy_timeout={int((BUSY_TIMEOUT_S - STALL_S) * 1000)}")
                self.db.execute("BEGIN IMMEDIATE")
        finally:
            self.db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.db.execute("COMMIT")
            if self.catalog is not None and self.catalog._numbers_to_write:
                self.catalog._commit_numbers()
        else:
            self.db.execute("ROLLBACK")
            if self.catalog is not None:
                self.catalog._numbers_to_write = {}
        return False
