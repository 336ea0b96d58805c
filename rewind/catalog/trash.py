"""The trash: checkpoints a command that deletes history took (forget, verify
--drop-damaged, a gc that applies a shortened setting), their rows kept here a day, their
trees kept alive by gc (`roots`), brought back whole by `rewind trash --restore`
(history/gc.py `TRASH_NS` says how long; cli/cmd_trash.py lists and restores)."""

from __future__ import annotations

import json

from rewind.model import ChangeRow, Checkpoint


def _changes_json(rows: list[ChangeRow]) -> str:
    return json.dumps([dict(r.__dict__) for r in rows], sort_keys=True)


class TrashMixin:
    def trash_checkpoints(self, project_id: int, numbers: list[int], why: str, now_ns: int,
                          drop: bool = True) -> int | None:
        """Inside a transaction: move these checkpoints (hidden ones too) and the changes
        stored under them into the trash, as one batch; their other rows are dropped as
        `drop_checkpoints` drops them (`drop=False`: the caller drops them itself, as the
        retention does). Returns the batch, None when none of them exists."""
        rows = []
        for n in numbers:
            cp = self.checkpoint(project_id, n, hidden=True)
            if cp is None:
                continue
            rows.append((cp, self.changes(project_id, n) or []))
        if not rows:
            return None
        batch = self.db.execute("SELECT coalesce(max(batch), 0) + 1 FROM trash").fetchone()[0]
        self.db.executemany(
            "INSERT INTO trash(batch, project_id, number, tree, trashed_ns, why, checkpoint, changes) "
            "VALUES (?,?,?,?,?,?,?,?)",
            [(batch, project_id, cp.number, cp.tree, now_ns, why, json.dumps(dict(cp.__dict__), sort_keys=True),
              _changes_json(ch)) for cp, ch in rows])
        if drop:
            self.drop_checkpoints(project_id, [cp.number for cp, _ in rows])
        return batch

    def trash_batches(self) -> list[dict]:
        """The trash, newest batch first: {batch, project, project_id, numbers, trashed_ns, why}."""
        out: dict[int, dict] = {}
        for batch, pid, number, trashed_ns, why, root in self.db.execute(
                "SELECT t.batch, t.project_id, t.number, t.trashed_ns, t.why, p.root FROM trash t "
                "LEFT JOIN projects p ON p.id=t.project_id ORDER BY t.batch DESC, t.number"):
            entry = out.setdefault(batch, {"batch": batch, "project": root, "project_id": pid, "numbers": [],
                                           "trashed_ns": trashed_ns, "why": why})
            entry["numbers"].append(number)
        return list(out.values())

    def untrash(self, batch: int) -> tuple[int, list[int]] | None:
        """Inside a transaction: the batch's checkpoints back in the catalog, as they were
        (numbers are never reused, so none is taken). None when there is no such batch."""
        got = self.db.execute("SELECT project_id, number, checkpoint, changes FROM trash WHERE batch=?",
                              (batch,)).fetchall()
        if not got:
            return None
        numbers = []
        for pid, number, cp_json, ch_json in got:
            if self.checkpoint(pid, number, hidden=True) is None:
                self.insert_checkpoint(Checkpoint(**json.loads(cp_json)))
                self.insert_changes(pid, number, [ChangeRow(**c) for c in json.loads(ch_json)])
            numbers.append(number)
        self.db.execute("DELETE FROM trash WHERE batch=?", (batch,))
        return got[0][0], sorted(numbers)

    def empty_trash(self, before_ns: int | None = None) -> int:
        """Inside a transaction: drop the batches trashed before `before_ns` (all: None).
        Returns the checkpoints dropped; gc then sweeps what only they held."""
        if before_ns is None:
            return self.db.execute("DELETE FROM trash").rowcount
        return self.db.execute("DELETE FROM trash WHERE trashed_ns < ?", (before_ns,)).rowcount

    def trash_kept(self, since_ns: int) -> tuple[list[str], int]:
        """For a gc's plan: the trees of the batches trashed at `since_ns` or later (a gc
        keeps them), and how many trashed checkpoints are older (it empties those)."""
        kept = [r[0] for r in self.db.execute("SELECT tree FROM trash WHERE trashed_ns >= ?", (since_ns,))]
        old = self.db.execute("SELECT count(*) FROM trash WHERE trashed_ns < ?", (since_ns,)).fetchone()[0]
        return kept, old

    def trash_rows(self) -> list[tuple[int, int, int, str]]:
        """(id, project_id, number, tree) of every trashed checkpoint (a purge rewrites them)."""
        return self.db.execute("SELECT id, project_id, number, tree FROM trash").fetchall()

    def set_trash_tree(self, trash_id: int, tree: str) -> None:
        row = self.db.execute("SELECT checkpoint FROM trash WHERE id=?", (trash_id,)).fetchone()
        cp = json.loads(row[0])
        cp["tree"] = tree
        self.db.execute("UPDATE trash SET tree=?, checkpoint=? WHERE id=?",
                        (tree, json.dumps(cp, sort_keys=True), trash_id))

    # -- a purge (history/purge.py): every tree that may hold the content, then the rows --
    def purge_roots(self) -> dict[str, list]:
        """The trees a purge rewrites: every checkpoint's (hidden ones too), the trash's and
        the last scanned trees, store-wide."""
        return {"checkpoints": self.db.execute("SELECT project_id, number, tree FROM checkpoints").fetchall(),
                "trash": self.db.execute("SELECT id, project_id, tree FROM trash").fetchall(),
                "last_trees": self.db.execute("SELECT project_id, last_tree FROM project_state "
                                              "WHERE last_tree IS NOT NULL").fetchall()}

    def purge_apply(self, checkpoints: dict, trash: dict, last_trees: dict, oids: set[str]) -> None:
        """Inside a transaction: the rewritten trees in place ((project, number) -> tree,
        trash id -> tree, project -> tree), and no row left that names one of `oids`: the
        stat cache's entries for them and its directory entries (their trees may hold them:
        the next scan builds them afresh), pre-images, and the ids in change rows."""
        db = self.db
        db.executemany("UPDATE checkpoints SET tree=? WHERE project_id=? AND number=?",
                       [(t, pid, n) for (pid, n), t in checkpoints.items()])
        for tid, tree in trash.items():
            self.set_trash_tree(tid, tree)
        db.executemany("UPDATE project_state SET last_tree=? WHERE project_id=?",
                       [(t, pid) for pid, t in last_trees.items()])
        ids = [(o,) for o in oids]
        db.executemany("DELETE FROM statcache WHERE oid=?", ids)
        db.execute("DELETE FROM statcache WHERE kind='D'")
        db.executemany("DELETE FROM preimages WHERE oid=?", ids)
        db.executemany("DELETE FROM pending_edits WHERE oid=?", ids)
        db.executemany("UPDATE changes SET old_oid=NULL WHERE old_oid=?", ids)
        db.executemany("UPDATE changes SET new_oid=NULL WHERE new_oid=?", ids)
