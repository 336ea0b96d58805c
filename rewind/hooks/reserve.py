"""The reserve: where a hook notes what it could not record when the data disk is full.

The failure ledger (failures.py) and the log append, so on a full disk they fail with the
catalog they should report on, and the lost prompts went unsaid once space came back. The
reserve is a fixed file of SIZE bytes in the data dir, written out with real zeros and
fsynced when it is made (never a sparse or fallocated file: those blocks would still have
to be found at the moment of need), and only ever overwritten in place: a pwrite into
blocks a file already owns needs no free block (checked on a full tmpfs and ext4, where it
succeeds while appending one byte fails with ENOSPC). flock, which needs no space either,
keeps two failing hooks off the same slot.

A ring of SLOTS slots of SLOT bytes: MAGIC, a 2-byte length, one JSON object (the time,
agent, event and its kind, session, project, why, and for a prompt its first words), zero
padding. When every slot is taken, the oldest goes. Once a hook records again, or a command
reports, drain() moves the slots into the failure ledger and zeroes them.

The file's mtime says whether anything waits: it is set to CLEAN_NS whenever the reserve is
empty, and every pwrite moves it, so the normal path pays one stat, no read.

What a slot holds, and why: no file content, ever. A prompt's first words
(failures.first_words) so that the person can tell which prompt to give again;
the prompt's whole text lives in the catalog, beside this file in the same private data
dir (0600), and those words move into the failure ledger there, which shows them for
failures.LOST_DAYS and then drops them (failures.scrub). Standard library only (the hook path).
"""

from __future__ import annotations

import json
import os

NAME = "hook-failures.reserve"
SLOT = 512
SLOTS = 128
SIZE = SLOT * SLOTS             # 64 KiB: 128 lost calls, the newest kept
MAGIC = b"RWR1"
CLEAN_NS = 0                    # the mtime of a reserve that holds nothing


def path_in(home: str) -> str:
    return os.path.join(home, NAME)


def ensure(home: str) -> bool:
    """Make the reserve if it is missing (a temp file of real zeros, fsynced, renamed in).
    Best effort; True when it exists."""
    path = path_in(home)
    if os.path.exists(path):
        return True
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view, done = memoryview(bytes(SIZE)), 0
            while done < SIZE:
                done += os.write(fd, view[done:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.utime(tmp, ns=(CLEAN_NS, CLEAN_NS))
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def waiting(home: str) -> bool | None:
    """Does the reserve hold something to move? None: there is no reserve (yet). One stat."""
    try:
        return os.stat(path_in(home)).st_mtime_ns != CLEAN_NS
    except OSError:
        return None


def _encode(item: dict) -> bytes:
    """The slot's bytes; what does not fit is shortened (the words first, then the error
    and session, then the project, which then reads as "no known project": shown for every
    project)."""
    item = dict(item)
    for key, cut in (("", 0), ("prompt", 0), ("error", 40), ("session", 40), ("project", 0), ("error", 0)):
        if key and isinstance(item.get(key), str):
            item[key] = item[key][:cut] or None
        body = json.dumps(item, ensure_ascii=False).encode("utf-8", "backslashreplace")
        if len(body) <= SLOT - 6:
            break
    else:
        body = json.dumps({k: item.get(k) for k in ("ns", "agent", "kind")})[:SLOT - 6].encode()
    return (MAGIC + len(body).to_bytes(2, "big") + body).ljust(SLOT, b"\0")


def _decode(raw: bytes) -> dict | None:
    if raw[:4] != MAGIC:
        return None
    n = int.from_bytes(raw[4:6], "big")
    try:
        item = json.loads(raw[6:6 + n])
    except ValueError:
        return None
    return item if isinstance(item, dict) and isinstance(item.get("ns"), int) else None


def write(home: str, item: dict) -> bool:
    """Put `item` in a free slot (else over the oldest). Never raises; True when written."""
    try:
        import fcntl
        fd = os.open(path_in(home), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ImportError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, SIZE, 0)
        if len(raw) < SIZE:
            return False                    # not a reserve this rewind made: never grown
        slots = [_decode(raw[i * SLOT:(i + 1) * SLOT]) for i in range(SLOTS)]
        free = [i for i, s in enumerate(slots) if s is None]
        at = free[0] if free else min(range(SLOTS), key=lambda i: slots[i]["ns"])
        os.pwrite(fd, _encode(item), at * SLOT)
        os.fdatasync(fd)
        return True
    except Exception:
        return False
    finally:
        os.close(fd)


def read(home: str) -> list[dict]:
    """What the reserve holds, oldest first (no lock: a reader may see a slot being written,
    which then fails to decode and is skipped)."""
    try:
        with open(path_in(home), "rb") as f:
            raw = f.read(SIZE)
    except OSError:
        return []
    items = [_decode(raw[i:i + SLOT]) for i in range(0, len(raw) - SLOT + 1, SLOT)]
    return sorted((i for i in items if i is not None), key=lambda i: i["ns"])


def drain(home: str, move) -> int:
    """Hand every slot to `move(items)` (which raises when it cannot keep them: the disk is
    still full), then zero the slots. Returns how many moved; never raises."""
    try:
        import fcntl
        fd = os.open(path_in(home), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ImportError):
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, SIZE, 0)
        items = [_decode(raw[i:i + SLOT]) for i in range(0, len(raw) - SLOT + 1, SLOT)]
        found = sorted((i for i in items if i is not None), key=lambda i: i["ns"])
        if found:
            move(found)                     # first kept there, then zeroed here: a crash between
            os.pwrite(fd, bytes(SIZE), 0)   # leaves a duplicate (failures.since drops it), never a loss
            os.fdatasync(fd)
        os.utime(fd, ns=(CLEAN_NS, CLEAN_NS))
        return len(found)
    except Exception:
        return 0
    finally:
        os.close(fd)
