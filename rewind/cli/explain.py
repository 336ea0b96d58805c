"""A surprise said in one line: an environment error (a full disk, a read-only store, a
permission) or a damaged catalog, each named with what to do, never as an internal error."""

from __future__ import annotations

import os

from rewind.structs import record

Trouble = record("Trouble", "kind what fix", """\
Why the catalog failed (`kind`, one of catalog.health's), said (`what`) with its fix.""")


def environment_error(e: Exception) -> str | None:
    """A full disk, a read-only store, a permission: said as such, not as an internal error."""
    import errno
    known = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
             errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted"}
    if not isinstance(e, OSError) or e.errno not in known:
        return None
    said = known[e.errno] + (f": {e.filename}" if e.filename else "")
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        from rewind import locations
        where = os.path.dirname(str(e.filename)) if e.filename else locations.data_dir()
        said += f" ({full_disk_fix(where if os.path.isdir(where) else locations.data_dir())})"
    return said


def room(path: str) -> tuple[str, int]:
    """The mount point `path` lives on, and the bytes free there for an unprivileged writer."""
    path = os.path.realpath(path)
    try:
        dev = os.stat(path).st_dev
        while path != "/" and os.stat(os.path.dirname(path)).st_dev == dev:
            path = os.path.dirname(path)
        st = os.statvfs(path)
        return path, st.f_bavail * st.f_frsize
    except OSError:
        return path, 0


def full_disk_fix(home: str) -> str:
    mount, free = room(home)
    return f"free space on {mount} ({free:,} bytes free); nothing is damaged"


def waiting_prompts(home: str) -> str:
    """What the reserve holds of prompts a full disk kept from the catalog, said in a clause."""
    from rewind.hooks import reserve
    n = sum(1 for i in reserve.read(home) if i.get("kind") == "prompt")
    return (f"; {n} prompt(s) could not be recorded meanwhile (rewind names them once there is room)"
            if n else "")


def catalog_trouble(e: Exception) -> Trouble | None:
    """Why the catalog failed, said with its fix. None: not the catalog's or the file
    system's doing."""
    if isinstance(e, OSError):
        return None                 # a file's write, not the catalog's: environment_error
    from rewind import locations
    from rewind.catalog import health
    home = locations.data_dir()
    kind = health.diagnose(home, e)
    if kind is None:
        return None
    from rewind.constants import CATALOG_NAME
    path = f"{home}/{CATALOG_NAME}"
    first = (str(e).splitlines() or [type(e).__name__])[0][:120]
    if kind == health.FULL:
        return Trouble(kind, f"the disk that holds rewind's data is full: the catalog {path} cannot be used "
                             f"({first})" + waiting_prompts(home), full_disk_fix(home))
    if kind == health.READ_ONLY:
        mount, _ = room(home)
        return Trouble(kind, f"the file system that holds rewind's data is read-only: the catalog {path} cannot be "
                             f"written ({first})", f"remount {mount} read-write; nothing is damaged")
    if kind == health.INTACT:
        return Trouble(kind, f"the catalog {path} could not be used ({first}), yet it reads whole (a read-only check)",
                       "nothing is damaged: look for the disk's own errors (dmesg), then run the command again")
    return Trouble(kind, f"the catalog {path} is damaged ({first}); the objects beside it are not "
                         "touched (`rewind doctor` checks the rest; a catalog moved aside starts afresh: its "
                         "checkpoints' content stays in objects/ and `rewind verify` finds none missing)",
                   "move the catalog aside (`mv catalog.sqlite catalog.sqlite.damaged` in the data directory, with "
                   "its -wal and -shm files): rewind starts a new one; then `rewind save`")


def catalog_error(e: Exception) -> str | None:
    """The catalog's trouble in one line (what, then the fix), or None."""
    trouble = catalog_trouble(e)
    if trouble is None:
        return None
    from rewind.catalog import health
    return trouble.what if trouble.kind == health.DAMAGED else f"{trouble.what}; {trouble.fix}"
