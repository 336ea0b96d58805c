"""Hook calls that could not record: kept beside the catalog (which may be what failed), so
that `list`, `status` and `doctor` say so until the project's next checkpoint. A hook
never breaks the agent, so this ledger is the only way a person learns that recording
stopped. A prompt that could not be recorded is said longer, LOST_DAYS, whatever came
after it: a gap in the history. When the ledger itself cannot be written (a full data
disk), the failure goes to the reserve (reserve.py), which needs no free block, and moves
here once there is room. Standard library only (the hook path)."""

from __future__ import annotations

import json
import os

from rewind import clock, locations

NAME = "hook-failures.jsonl"
KEEP = 200          # lines kept: the newest
LOST_DAYS = 7       # a prompt no hook could record is said this long, later checkpoints or not
FIRST_WORDS = 8     # of a lost prompt, kept to tell which it was (its text lives in the catalog)
WORDS_CHARS = 60


def note(agent: str, event: str | None, where: str | None, error: BaseException, extra: dict | None = None) -> None:
    """Keep one failure (best effort: never raises): appended to the ledger, or, when that
    cannot be written (a full disk), put in the reserve's pre-allocated slots (reserve.py).
    `extra`: the call's session, event kind and prompt words."""
    try:
        home = locations.data_dir()
        extra = dict(extra or {})
        extra["prompt"] = first_words(extra.get("prompt"))
        item = {"ns": clock.wall_ns(), "agent": agent, "event": event, "project": where,
                "error": describe(error, home)[:300], **extra}
        if not append(home, [item]):
            from rewind.hooks import reserve
            reserve.write(home, item)
    except Exception:
        pass


def first_words(text) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    words = " ".join(text.split()[:FIRST_WORDS])
    return words[:WORDS_CHARS] + ("…" if len(words) > WORDS_CHARS or len(text.split()) > FIRST_WORDS else "")


def describe(error: BaseException, home: str | None = None) -> str:
    """The error as the ledger keeps it; a full disk said so, whichever layer raised it."""
    text = f"{type(error).__name__}: {error}"
    return f"disk full ({text})" if disk_full(error, home) else text


ROOM = 1 << 20      # less free than this where the data dir is: full, for SQLite's I/O errors


def disk_full(error: BaseException, home: str | None = None) -> bool:
    """ENOSPC or EDQUOT from the OS, SQLITE_FULL from SQLite; or SQLite's I/O error (it says
    SQLITE_IOERR_SHMSIZE when it cannot size its -shm file) or cannot-open while `home`'s
    file system has less than ROOM free. No sqlite3 import: its codes are numbers."""
    import errno
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    code = (getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == 13:                      # SQLITE_FULL
        return True
    if code in (10, 14) and home:       # SQLITE_IOERR, SQLITE_CANTOPEN
        try:
            st = os.statvfs(home)
            return st.f_bavail * st.f_frsize < ROOM
        except OSError:
            return False
    return False


def append(home: str, items: list[dict]) -> bool:
    """Append items to the ledger; False when it could not be written (never raises)."""
    try:
        from rewind.fsutil import ensure_private_dir
        ensure_private_dir(home)
        path = os.path.join(home, NAME)
        data = "".join(json.dumps(i) + "\n" for i in items).encode("utf-8", "backslashreplace")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            done = os.write(fd, data)
            if done != len(data):       # a short write: the disk filled; the rest is cut off
                os.ftruncate(fd, os.fstat(fd).st_size - done)
                return False
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > KEEP * 1024:
            _trim(path)
        return True
    except Exception:
        return False


def _trim(path: str) -> None:
    from rewind.fsutil import atomic_write
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    atomic_write(path, b"".join(lines[-KEEP:]))


def since(home: str, root: str, after_ns: int) -> list[dict]:
    """Failures of hooks for `root` (or for no known project) after `after_ns`, oldest
    first: the ledger's and those still in the reserve (the disk was, or is, full)."""
    from rewind.hooks import reserve
    try:
        with open(os.path.join(home, NAME), "rb") as f:
            raw = f.read(4 << 20)
    except OSError:
        raw = b""
    items = []
    for line in raw.splitlines():
        try:
            items.append(json.loads(line))
        except ValueError:
            continue
    out, seen = [], set()
    root = root.rstrip("/")
    for item in sorted((i for i in items + reserve.read(home) if isinstance(i, dict) and isinstance(i.get("ns"), int)),
                       key=lambda i: i["ns"]):
        key = (item["ns"], item.get("agent"), item.get("event"))
        if item["ns"] <= after_ns or key in seen:
            continue                    # (a reserve drained by a process killed mid-way: twice)
        seen.add(key)
        where = item.get("project")
        if where is None or where == root or (isinstance(where, str) and where.startswith(root + "/")):
            out.append(item)
    return out


def lost_prompts(home: str, root: str, now_ns: int) -> list[dict]:
    """Prompts of `root` whose hook could not record them, in the last LOST_DAYS: a gap in
    the history, said even after later checkpoints (the disk filled, then space came back)."""
    return [i for i in since(home, root, now_ns - LOST_DAYS * 86400 * 10**9) if i.get("kind") == "prompt"]


def settle(home: str, now_ns: int) -> None:
    """What a command does before it reports: move what waits in the reserve into the
    ledger (once there is room), and drop the prompt words of entries past LOST_DAYS (the
    ledger keeps times and errors, not prompt text, for longer). Never raises."""
    from rewind.hooks import reserve
    try:
        waiting = reserve.waiting(home)
        if waiting is None:
            reserve.ensure(home)        # a data dir from before the reserve: made once
        elif waiting:
            reserve.drain(home, lambda items: _keep(home, items))
        scrub(home, now_ns)
    except Exception:
        pass


def _keep(home: str, items: list[dict]) -> None:
    if not append(home, [{**i, "moved": True} for i in items]):
        raise OSError("the failure ledger cannot be written yet")


def scrub(home: str, now_ns: int) -> None:
    """Rewrite the ledger without the prompt words older than LOST_DAYS (only when some are)."""
    path = os.path.join(home, NAME)
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines(keepends=True)
    except OSError:
        return
    cutoff, changed, out = now_ns - LOST_DAYS * 86400 * 10**9, False, []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(item, dict) and item.get("prompt") and isinstance(item.get("ns"), int) and item["ns"] < cutoff:
            item["prompt"], changed = None, True
            line = (json.dumps(item) + "\n").encode("utf-8", "backslashreplace")
        out.append(line)
    if changed:
        from rewind.fsutil import atomic_write
        atomic_write(path, b"".join(out))
