"""The catalog's checkpoints: their rows, the changes stored under each, the restores (for
undo), and what retention reads and drops."""

from __future__ import annotations

import json
import os

from rewind.model import ChangeRow, Checkpoint, CheckpointAge, HiddenCheckpoint, RestoreRow

_CP_COLS = ("project_id", "number", "kind", "created_at", "created_ns", "tree", "message", "agent",
            "session_id", "prompt_id", "prompt_source", "transcript_path", "git_head", "git_branch",
            "restore_target", "folds_under", "reverts", "stats")


def _row_to_checkpoint(row) -> Checkpoint:
    values = dict(zip(_CP_COLS, row))
    values["stats"] = json.loads(values["stats"] or "{}")
    values["reverts"] = json_or_none(values["reverts"])
    return Checkpoint(**values)


_CH_COLS = ("path", "status", "old_kind", "new_kind", "old_mode", "new_mode", "old_oid", "new_oid",
            "old_size", "new_size", "source", "tool", "command", "session_id", "flags", "restored")


def json_or_none(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class CheckpointsMixin:
    # -- checkpoints -------------------------------------------------------------------
    def insert_checkpoint(self, cp: Checkpoint) -> None:
        values = [getattr(cp, c) for c in _CP_COLS]
        values[-1] = json.dumps(cp.stats, sort_keys=True)
        values[-2] = json.dumps(cp.reverts) if cp.reverts else None
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

    def prompt_at(self, project_id: int, session_id: str, ts_ns: int) -> int | None:
        """The number of the session's prompt (recorded or pending) in whose interval `ts_ns`
        falls: its newest prompt checkpoint made by then that is not itself a task's notice."""
        row = self.db.execute(
            "SELECT max(number) FROM (SELECT number FROM checkpoints WHERE project_id=? AND session_id=? AND "
            "kind='prompt' AND created_ns<=? AND folds_under IS NULL UNION ALL SELECT number FROM "
            "pending_checkpoints WHERE project_id=? AND session_id=? AND kind='prompt' AND created_ns<=? "
            "AND folds_under IS NULL)", (project_id, session_id, ts_ns, project_id, session_id, ts_ns)).fetchone()
        return row[0] if row else None

    def hidden(self, project_id: int) -> list[HiddenCheckpoint]:
        """The project's hidden checkpoints, newest first."""
        return list(map(HiddenCheckpoint._make, self.db.execute(
            "SELECT number, hidden_ns, hidden_why FROM checkpoints WHERE project_id=? "
            "AND hidden_ns IS NOT NULL ORDER BY number DESC", (project_id,))))

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
            values["restored"] = json_or_none(values["restored"])
            out.append(ChangeRow(**values))
        return out

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
        values["restored"] = json_or_none(values["restored"])
        return ChangeRow(**values)

    def change_paths(self, project_ids: list[int]):
        """(project_id, number, path, flags) of every stored change of these projects."""
        placeholders = ",".join("?" * len(project_ids)) or "NULL"
        for pid, number, path, flags in self.db.execute(
                f"SELECT project_id, number, path, flags FROM changes WHERE project_id IN ({placeholders})",
                project_ids):
            yield pid, number, os.fsdecode(path), [f for f in (flags or "").split(",") if f]

    # -- restores ----------------------------------------------------------------------
    def insert_restore(self, project_id: int, target: int, safety: int, is_undo: bool,
                       paths: list[str] | None, created_at: str) -> int:
        cur = self.db.execute("INSERT INTO restores(project_id, target, safety, is_undo, paths, created_at)"
                              " VALUES (?, ?, ?, ?, ?, ?)",
                              (project_id, target, safety, int(is_undo),
                               json.dumps(paths) if paths is not None else None, created_at))
        return cur.lastrowid

    def newest_undoable(self, project_id: int) -> RestoreRow | None:
        return self._restore("is_undo=0 AND undone=0 ORDER BY id DESC LIMIT 1", (project_id,))

    def undo_safeties(self, project_id: int) -> set[int]:
        """The safety checkpoints taken by undos (an undo goes back to before a rewind)."""
        return {r[0] for r in self.db.execute("SELECT safety FROM restores WHERE project_id=? AND is_undo=1",
                                              (project_id,))}

    def mark_undone(self, restore_id: int) -> None:
        self.db.execute("UPDATE restores SET undone=1 WHERE id=?", (restore_id,))

    def restore_made(self, project_id: int, safety: int) -> RestoreRow | None:
        """The restore whose safety checkpoint is `safety`."""
        return self._restore("safety=?", (project_id, safety))

    def _restore(self, where: str, args: tuple) -> RestoreRow | None:
        row = self.db.execute(f"SELECT id, target, safety, paths FROM restores WHERE project_id=? AND {where}",
                              args).fetchone()
        return RestoreRow(*row[:3], json.loads(row[3]) if row[3] else None) if row else None

    # -- retention -----------------------------------------------------------------------
    def retention_rows(self, project_id: int) -> list[CheckpointAge]:
        """Every checkpoint, hidden ones too, newest first."""
        return list(map(CheckpointAge._make, self.db.execute(
            "SELECT number, created_ns, kind, restore_target, hidden_ns, "
            "coalesce(json_extract(stats, '$.by_agent'), 0) != 0, hidden_why "
            "FROM checkpoints WHERE project_id=? ORDER BY number DESC", (project_id,))))

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
