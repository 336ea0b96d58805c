"""Checkpoint numbers, never handed out twice in a project (allocate_number says how), the
highest number handed out kept outside the catalog (`marks/`) that makes it so, and the
numbers found lost."""

from __future__ import annotations

import json
import os

from rewind.catalog.checkpoints import json_or_none
from rewind.fsutil import ensure_private_dir


class NumbersMixin:
    def allocate_number(self, project_id: int) -> int:
        """Inside a transaction: the next checkpoint number, never handed out twice, also when
        the catalog lost its newest commits (a deleted `catalog.sqlite-wal`): the highest
        number ever handed out is also kept outside it (`marks/`), written once the
        transaction commits, and a number at or below it is not handed out again."""
        row = self.db.execute("UPDATE projects SET next_number = next_number + 1 WHERE id=? "
                              "RETURNING next_number - 1", (project_id,)).fetchone()
        n = row[0]
        root = self.project_root(project_id)
        highest = read_highest_number(self.home, root)
        if highest is not None and n <= highest:
            self._lost(project_id, n, highest)
            n = highest + 1
            self.db.execute("UPDATE projects SET next_number=? WHERE id=?", (n + 1, project_id))
        self._numbers_to_write[root] = n
        return n

    def check_lost(self, project_id: int) -> dict | None:
        """For a command: numbers handed out that this catalog does not know (its newest
        commits were lost). Recorded (numbering goes on above them; gc sweeps nothing until
        `rewind gc --forget-lost`) and returned; None when there are none."""
        known = self.lost(project_id)
        root = self.project_root(project_id)
        highest = read_highest_number(self.home, root)
        next_number = self.db.execute("SELECT next_number FROM projects WHERE id=?", (project_id,)).fetchone()[0]
        if highest is not None and next_number <= highest:
            with self.transaction():
                self._lost(project_id, next_number, highest)
                self.db.execute("UPDATE projects SET next_number=? WHERE id=?", (highest + 1, project_id))
            return self.lost(project_id)
        return known

    def _lost(self, project_id: int, first: int, last: int) -> None:
        from rewind.clock import now_ns
        self.set_meta(f"lost:{project_id}", json.dumps({"first": first, "last": last, "found_ns": now_ns()}))

    def lost(self, project_id: int) -> dict | None:
        raw = self.meta(f"lost:{project_id}")
        return json_or_none(raw)

    def any_lost(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT key FROM meta WHERE key LIKE 'lost:%'")]

    def forget_lost(self) -> int:
        with self.transaction():
            return self.db.execute("DELETE FROM meta WHERE key LIKE 'lost:%'").rowcount

    def _commit_numbers(self) -> None:
        numbers, self._numbers_to_write = self._numbers_to_write, {}
        if self.numbers_later is not None:
            for root, n in numbers.items():
                self.numbers_later[root] = max(n, self.numbers_later.get(root, n))
            return
        for root, n in numbers.items():
            write_highest_number(self.home, root, n)

    def write_numbers_later(self) -> None:
        """The highest numbers committed since the last call (see `numbers_later`)."""
        if self.numbers_later:
            numbers, self.numbers_later = self.numbers_later, {}
            for root, n in numbers.items():
                write_highest_number(self.home, root, n)

    def next_number(self, project_id: int) -> int:
        """The number the project's next checkpoint would get (1 for an unknown project)."""
        row = self.db.execute("SELECT next_number FROM projects WHERE id=?", (project_id,)).fetchone()
        return row[0] if row else 1


NUMBERS_DIR = "marks"      # the directory's name on disk


def _number_path(home: str, root: str) -> str:
    import hashlib
    return os.path.join(home, NUMBERS_DIR, hashlib.sha256(os.fsencode(root)).hexdigest()[:32])


def read_highest_number(home: str, root: str) -> int | None:
    try:
        with open(_number_path(home, root), "rb") as f:
            return int(f.read(32).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def write_highest_number(home: str, root: str, n: int) -> None:
    """The highest checkpoint number handed out in a project (never lowered). Best effort,
    no fsync: it guards against a lost WAL, which a power cut would take with it anyway."""
    try:
        path = _number_path(home, root)
        current = read_highest_number(home, root)
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
