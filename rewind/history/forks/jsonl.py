"""What the JSON-lines transcripts (Claude Code's, Qwen Code's, Copilot CLI's) have in common
for a fork: reading them tolerantly, renaming a line's session in its bytes, and writing the
new transcript under a name that comes from what it keeps.

Kept lines are copied byte for byte, and the one edit a line needs (its session id) is made
in its bytes: re-serializing would change what the agent wrote (Node writes a cut emoji as
the escape `\\ud83d`, which Python decodes to a lone surrogate that UTF-8 cannot encode;
number and escape spellings differ too), and raw bytes that are not UTF-8 stay as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from typing import Callable, Iterable

from rewind.errors import ConversationUnavailable

# a JSON string (escapes included) or a bracket: enough to know each key's depth, in C speed
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(_STRING + rb'|[\[\]{}]', re.S)
_COLON = re.compile(rb'\s*:\s*')
_SCALAR = re.compile(_STRING + rb'|[^\s,}\]]+', re.S)

FORKS = uuid.UUID("5b0c1d0e-7e2a-4c8e-9a51-72657769e46e")   # rewind's namespace for fork ids


def kept(cp, name: str, find_cut: Callable, brought: Callable, is_turn: Callable,
         missing: str = "has no transcript path", hint: str | None = None) -> tuple[str, list]:
    """The transcript's path and its (raw line, entry) pairs before the checkpoint's prompt:
    `find_cut(entries, cp)` finds the prompt, `brought(entry)` says an entry just before it
    came with it (cut too), `is_turn(entry)` is a turn of the conversation (one must be kept)."""
    path = cp.transcript_path
    if not path:
        raise ConversationUnavailable(f"checkpoint {cp.number} {missing}", hint=hint)
    raw_lines = read_lines(path, name)
    entries = [parse(line) for line in raw_lines]
    cut = find_cut(entries, cp)
    if cut is None:
        raise ConversationUnavailable(f"checkpoint {cp.number}'s prompt is not in {path}; the transcript format "
                                      "may be one this rewind does not understand", hint="the files can still be rewound")
    while cut > 0 and isinstance(entries[cut - 1], dict) and brought(entries[cut - 1]):
        cut -= 1
    if not any(isinstance(e, dict) and is_turn(e) for e in entries[:cut]):
        raise ConversationUnavailable(f"checkpoint {cp.number} comes before the first prompt of its session: "
                                      "there is no earlier conversation to continue", hint="start a new session")
    return path, list(zip(raw_lines[:cut], entries[:cut]))


def read_lines(path: str, agent: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read().split(b"\n")
    except OSError as e:
        raise ConversationUnavailable(f"cannot read the session's transcript {path} ({e.strerror})",
                                      hint=f"{agent} may have cleaned it up") from None


def parse(line: bytes):
    """A line's entry; None when it is not JSON. Bytes that are not UTF-8 parse as
    surrogate escapes (the line itself is never re-encoded)."""
    if not line.strip():
        return None
    try:
        return json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None


def with_value(raw: bytes, key: bytes, value: str, depth_of_key: int = 1) -> bytes | None:
    """The line with the value of `key` (a JSON string such as b'"sessionId"', at object
    depth `depth_of_key`; the first one) replaced, every other byte as it was; None when
    the key is not spelled plainly there."""
    depth = 0
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == depth_of_key and tok == key:
            colon = _COLON.match(raw, m.end())
            found = _SCALAR.match(raw, colon.end()) if colon else None
            if found is not None:
                return raw[:found.start()] + json.dumps(value).encode() + raw[found.end():]
    return None


def fork_id(session_id: str | None, number: int, kept: Iterable[bytes], attempt: int) -> str:
    """The id comes from what is kept, so the dry run names what the real run writes, and
    forking the same point again gives the same session back; `attempt` counts the names
    taken by a fork of this point that was resumed and continued since."""
    seed = hashlib.sha256(b"\n".join(kept)).hexdigest()
    return str(uuid.uuid5(FORKS, f"{session_id}:{number}:{seed}:{attempt}"))


def first_free(cp, kept: list[bytes], place: Callable[[str], tuple[str, bytes]], beside: str) -> tuple[str, str, bool]:
    """(new id, path, whether it is to be written) for the first id whose file is free or
    holds exactly these bytes already (an earlier fork of this point). `place(id)` gives the
    path and the bytes that go there."""
    for attempt in range(100):
        new_id = fork_id(cp.session_id, cp.number, kept, attempt)
        target, data = place(new_id)
        try:
            with open(target, "rb") as f:
                if f.read(len(data) + 1) == data:
                    return new_id, target, False          # written by an earlier fork of this point
        except FileNotFoundError:
            return new_id, target, True
        except OSError:
            pass
    raise ConversationUnavailable(f"cannot find a free name for the new transcript beside {beside}")


def write_new(target: str, data: bytes) -> None:
    """A new file, never over an existing one, never through a symlink."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
