"""Read-only looks into another program's SQLite database, where asking its CLI costs a
start of it: whether OpenCode holds a session, and its messages (history/forks/opencode.py,
before it imports a fork). Opened read only, never written: a running OpenCode may write
the database meanwhile, which SQLite allows. The layout is OpenCode 1.18's; any other
raises `Unreadable` and the caller asks OpenCode itself."""

from __future__ import annotations

import os
import sqlite3


class Unreadable(Exception):
    """The database is not there or not laid out as expected."""


def opencode_messages(db: str, session: str) -> list[str] | None:
    """The ids of `session`'s messages in order, None when it has no such session."""
    if not os.path.isfile(db):
        raise Unreadable(db)
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            if con.execute("SELECT 1 FROM session WHERE id = ?", (session,)).fetchone() is None:
                return None
            return [r[0] for r in con.execute("SELECT id FROM message WHERE session_id = ? ORDER BY id", (session,))]
        finally:
            con.close()
    except sqlite3.Error as e:
        raise Unreadable(str(e)) from None
