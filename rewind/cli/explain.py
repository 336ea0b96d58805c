"""A surprise said in one line: an environment error (a full disk, a read-only store, a
permission) or a damaged catalog, each named with what to do, never as an internal error."""

from __future__ import annotations


def environment_error(e: Exception) -> str | None:
    """A full disk, a read-only store, a permission: said as such, not as an internal error."""
    import errno
    known = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
             errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted"}
    if not isinstance(e, OSError) or e.errno not in known:
        return None
    return known[e.errno] + (f": {e.filename}" if e.filename else "")


def catalog_error(e: Exception) -> str | None:
    """A catalog SQLite cannot read (damaged pages, a file that is not a database, text that
    is not UTF-8): named, with what to do, not an internal error."""
    import sqlite3
    text = str(e)
    if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.IntegrityError) and (
            "malformed" in text or "not a database" in text or "decode" in text or "corrupt" in text
            or "disk I/O" in text):
        pass
    elif isinstance(e, UnicodeDecodeError):
        pass
    else:
        return None
    from rewind import locations
    from rewind.constants import CATALOG_NAME
    path = f"{locations.data_dir()}/{CATALOG_NAME}"
    return (f"the catalog {path} is damaged ({text.splitlines()[0][:120]}); the objects beside it are not "
            "touched (`rewind doctor` checks the rest; a catalog moved aside starts afresh: its "
            "checkpoints' content stays in objects/ and `rewind verify` finds none missing)")
