"""Pending checkpoints: a prompt that comes while the watcher's first scan of the tree runs
is recorded at once, without its tree, and completed when that scan is in
(capture/pending.py says how); what the agent's edit tools found at their targets
before they wrote meanwhile (`pending_edits`) is what the completion puts back."""

from __future__ import annotations

import os

from rewind.clock import wall_ns
from rewind.constants import HEARTBEAT_STALE_S
from rewind.model import Checkpoint, PendingEdit, SeqEvent

_P_COLS = ("project_id", "number", "kind", "created_at", "created_ns", "message", "agent", "session_id",
           "prompt_id", "prompt_source", "transcript_path", "git_head", "git_branch", "folds_under")


class PendingMixin:
    def pending(self, project_id: int) -> list[Checkpoint]:
        """The project's pending checkpoints, oldest first (tree "", stats {"pending": True})."""
        rows = self.db.execute(f"SELECT {','.join(_P_COLS)} FROM pending_checkpoints WHERE project_id=? "
                               "ORDER BY number", (project_id,)).fetchall()
        return [Checkpoint(tree="", stats={"pending": True}, **dict(zip(_P_COLS, r))) for r in rows]

    def pending_one(self, project_id: int, number: int) -> Checkpoint | None:
        for cp in self.pending(project_id):
            if cp.number == number:
                return cp
        return None

    def has_pending(self, project_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM pending_checkpoints WHERE project_id=? LIMIT 1",
                               (project_id,)).fetchone() is not None

    def baseline_running(self, project_id: int, now_ns: int) -> bool:
        """The watcher says its first scan runs, and its heartbeat is fresh."""
        row = self.db.execute("SELECT baseline_ns, heartbeat_ns, stopped_ns FROM watchers WHERE project_id=?",
                              (project_id,)).fetchone()
        return bool(row and row[0] is not None and row[2] is None and now_ns - row[1] <= HEARTBEAT_STALE_S * 1e9)

    def begin_pending(self, cp: Checkpoint) -> int | None:
        """Record `cp` as pending if the watcher's first scan is running (checked in the same
        transaction the scan's end clears it in, so either the scan completes it or this
        returns None and the caller scans itself). Returns its number."""
        with self.transaction():
            if not self.baseline_running(cp.project_id, wall_ns()):
                return None
            cp.number = self.allocate_number(cp.project_id)
            self.db.execute(f"INSERT INTO pending_checkpoints({','.join(_P_COLS)}) VALUES "
                            f"({','.join('?' * len(_P_COLS))})", [getattr(cp, c) for c in _P_COLS])
        return cp.number

    def set_baseline(self, project_id: int, pid: int, started_ns: int | None) -> None:
        """The watcher `pid`'s first scan runs since `started_ns` (None: it is in)."""
        with self.transaction():
            self.db.execute("UPDATE watchers SET baseline_ns=? WHERE project_id=? AND pid=?",
                            (started_ns, project_id, pid))

    def baseline_since(self, project_id: int) -> int | None:
        """When the watcher's first scan began, while it says it runs (its heartbeat aside)."""
        row = self.db.execute("SELECT baseline_ns FROM watchers WHERE project_id=?", (project_id,)).fetchone()
        return row[0] if row else None

    def clear_baseline(self, project_id: int) -> None:
        """A watcher that stopped or died in its first scan no longer says it runs."""
        with self.transaction():
            self.db.execute("UPDATE watchers SET baseline_ns=NULL WHERE project_id=?", (project_id,))

    def drop_pending(self, project_id: int, number: int) -> None:
        """Inside a transaction: a pending checkpoint is complete (its row is in `checkpoints`)."""
        self.db.execute("DELETE FROM pending_checkpoints WHERE project_id=? AND number=?", (project_id, number))

    def add_pending_edit(self, project_id: int, path: str, kind: str, mode: int | None, oid: str | None,
                         size: int | None, tool: str | None, session_id: str | None, ts: int) -> None:
        """Inside a transaction: an edit tool's target as it was before the tool wrote it
        (kind F, L, "-" absent, "?" not known: a directory, too large, unreadable)."""
        self.db.execute("INSERT INTO pending_edits(project_id, path, kind, mode, oid, size, tool, session_id, ts)"
                        " VALUES (?,?,?,?,?,?,?,?,?)",
                        (project_id, os.fsencode(path), kind, mode, oid, size, tool, session_id, ts))

    def pending_edits(self, project_id: int) -> list[PendingEdit]:
        """Oldest first."""
        return [PendingEdit(os.fsdecode(r[0]), *r[1:]) for r in self.db.execute(
            f"SELECT {','.join(PendingEdit._fields)} FROM pending_edits WHERE project_id=? "
            "ORDER BY ts, rowid", (project_id,))]

    def clear_pending_edits(self, project_id: int) -> None:
        """Inside a transaction: the edits noted for pending checkpoints, once none is left
        (one recorded meanwhile keeps them: they are what its completion puts back)."""
        self.db.execute("DELETE FROM pending_edits WHERE project_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM pending_checkpoints WHERE project_id=?)", (project_id, project_id))

    def events_seq(self, project_id: int, after: int) -> list[SeqEvent]:
        """The watcher's events after `after`, oldest first."""
        make, decode = SeqEvent._make, os.fsdecode
        return [make((seq, decode(p), k, ts, w)) for seq, p, k, ts, w in self.db.execute(
            "SELECT seq, path, kind, ts, writer FROM watch_events WHERE project_id=? AND seq>? ORDER BY seq",
            (project_id, after))]
