"""Why the catalog could not be used: a full disk, a read-only file system, or damage.

They must not be confused: the fix for damage (move catalog.sqlite aside) throws away the
index of every checkpoint of every project, while a catalog that failed for lack of space
is whole again once there is room. SQLite's own codes decide where they can (SQLITE_FULL,
SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_NOTADB); an I/O error or a failed open is looked
at from the file system (free space, the read-only flag), and when that says nothing, a
read-only probe decides: the catalog opened with `mode=ro` (and, when even that needs a
-shm file it cannot make, `immutable=1`, which reads the main file alone) and SQLite's
`PRAGMA quick_check`.
"""

from __future__ import annotations

import errno
import os
import sqlite3

from rewind.constants import CATALOG_NAME

FULL, READ_ONLY, DAMAGED, INTACT = "full", "read-only", "damaged", "intact"
ROOM = 1 << 20          # less free than this where the catalog is: too full for SQLite to work
PROBE_TIMEOUT_S = 5     # the read-only probe's SQLite busy timeout
_CORRUPT, _NOTADB, _FULL, _READONLY, _IOERR, _CANTOPEN = 11, 26, 13, 8, 10, 14


def diagnose(home: str, e: BaseException) -> str | None:
    """FULL, READ_ONLY, DAMAGED, or INTACT (an error that is none of these, on a catalog the
    probe finds whole); None: not a catalog or file-system error at all."""
    if isinstance(e, OSError):
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return FULL
        if e.errno == errno.EROFS:
            return READ_ONLY
        return None
    if isinstance(e, UnicodeDecodeError):
        return DAMAGED
    if not isinstance(e, sqlite3.DatabaseError) or isinstance(e, sqlite3.IntegrityError):
        return None
    code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == _FULL:
        return FULL
    if code in (_CORRUPT, _NOTADB):
        return DAMAGED
    fs = file_system(home)
    if fs is not None:
        return fs
    if code in (_READONLY, _IOERR, _CANTOPEN) or "disk I/O" in str(e):
        return INTACT if probe(home) == "ok" else DAMAGED
    text = str(e)
    if "malformed" in text or "not a database" in text or "corrupt" in text or "decode" in text:
        return DAMAGED
    return None


def file_system(home: str) -> str | None:
    """FULL or READ_ONLY when the data dir's file system is so; else None."""
    try:
        st = os.statvfs(home)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return READ_ONLY
    if st.f_bavail * st.f_frsize < ROOM:
        return FULL
    return None


def probe(home: str) -> str:
    """The catalog read without writing a byte: "ok", or SQLite's first problem."""
    path = os.path.join(home, CATALOG_NAME)
    if not os.path.exists(path):
        return "no catalog"
    last = "unreadable"
    for query in ("mode=ro", "mode=ro&immutable=1"):
        try:
            db = sqlite3.connect(f"file:{_quote(path)}?{query}", uri=True, timeout=PROBE_TIMEOUT_S)
        except sqlite3.Error as e:
            last = str(e)
            continue
        try:
            return db.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as e:
            last = str(e)
            if (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF in (_CORRUPT, _NOTADB):
                return last
        finally:
            db.close()
    return last


def _quote(path: str) -> str:
    from urllib.parse import quote
    return quote(path)
