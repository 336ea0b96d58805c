"""Read-only looks into another program's SQLite database, where asking its CLI costs a
start of it: whether OpenCode holds a session, its messages, and the session itself in the
shape of `opencode export` as far as a fork's dry run needs it (history/forks/opencode.py). Opened read only, never written: a running OpenCode may write
the database meanwhile, which SQLite allows. The layout is OpenCode 1.18's; any other
raises `Unreadable` and the caller asks OpenCode itself."""

from __future__ import annotations

import json
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


def opencode_session(db: str, session: str) -> list[dict] | None:
    """`session`'s messages as `opencode export` gives them (`{"info": {...}, "parts":
    [...]}`, in order), each info and part with its ids put back beside its data; None when
    there is no such session."""
    if not os.path.isfile(db):
        raise Unreadable(db)
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            if con.execute("SELECT 1 FROM session WHERE id = ?", (session,)).fetchone() is None:
                return None
            messages, by_id = [], {}
            for mid, data in con.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (session,)):
                m = {"info": {**_object(data), "id": mid, "sessionID": session}, "parts": []}
                messages.append(m)
                by_id[mid] = m
            for pid, mid, data in con.execute("SELECT id, message_id, data FROM part WHERE session_id = ? "
                                              "ORDER BY message_id, id", (session,)):
                if mid in by_id:
                    by_id[mid]["parts"].append({**_object(data), "id": pid, "messageID": mid, "sessionID": session})
            return messages
        finally:
            con.close()
    except sqlite3.Error as e:
        raise Unreadable(str(e)) from None


def _object(text) -> dict:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        raise Unreadable("a row whose data is not JSON") from None
    if not isinstance(value, dict):
        raise Unreadable("a row whose data is not a JSON object")
    return value
