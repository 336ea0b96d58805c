"""Hook calls that could not record: kept beside the catalog (which may be what failed), so
that `list`, `status` and `doctor` say so until the project's next checkpoint. A hook
never breaks the agent, so this ledger is the only way a person learns that recording
stopped. Standard library only (the hook path)."""

from __future__ import annotations

import json
import os

from rewind import clock, locations

NAME = "hook-failures.jsonl"
KEEP = 200          # lines kept: the newest


def note(agent: str, event: str | None, where: str | None, error: BaseException) -> None:
    """Append one failure (best effort: never raises)."""
    try:
        home = locations.data_dir()
        from rewind.fsutil import ensure_private_dir
        ensure_private_dir(home)
        path = os.path.join(home, NAME)
        line = json.dumps({"ns": clock.wall_ns(), "agent": agent, "event": event, "project": where,
                           "error": f"{type(error).__name__}: {error}"[:300]}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "backslashreplace"))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > KEEP * 1024:
            _trim(path)
    except Exception:
        pass


def _trim(path: str) -> None:
    from rewind.fsutil import atomic_write
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    atomic_write(path, b"".join(lines[-KEEP:]))


def since(home: str, root: str, after_ns: int) -> list[dict]:
    """Failures of hooks for `root` (or for no known project) after `after_ns`, oldest first."""
    try:
        with open(os.path.join(home, NAME), "rb") as f:
            raw = f.read(4 << 20)
    except OSError:
        return []
    out = []
    root = root.rstrip("/")
    for line in raw.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict) or not isinstance(item.get("ns"), int) or item["ns"] <= after_ns:
            continue
        where = item.get("project")
        if where is None or where == root or (isinstance(where, str) and where.startswith(root + "/")):
            out.append(item)
    return out
