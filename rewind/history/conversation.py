"""Rewinding the conversation of a Claude Code session: a new transcript that ends just
before a checkpoint's prompt, next to the original (which is never modified), and the
`claude --resume <new id>` that continues from there.

Claude Code's transcript is JSON lines, internal and changing between versions. This reads
it tolerantly: the cut is the first `user` entry that carries the checkpoint's `promptId`
(Claude Code >= 2.1.196) or, failing that, its prompt text; every kept entry gets the new
`sessionId`; lines that do not parse are kept as they are. When the prompt cannot be found
it says so rather than guess.

Kept lines are copied byte for byte, and the one edit a line needs (its top-level
`sessionId` value) is made in its bytes: re-serializing would change what Claude Code
wrote (Node writes a cut emoji as the escape `\\ud83d`, which Python decodes to a lone
surrogate that UTF-8 cannot encode; number and escape spellings differ too), and raw bytes
that are not UTF-8 stay as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid

from rewind.errors import ConversationUnavailable
from rewind.model import Checkpoint
from rewind.text import unbroken

# a JSON string (escapes included) or a bracket: enough to know each key's depth, in C speed
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(_STRING + rb'|[\[\]{}]', re.S)
_COLON = re.compile(rb'\s*:\s*')
_SCALAR = re.compile(_STRING + rb'|[^\s,}\]]+', re.S)


def _text(entry: dict) -> str | None:
    """A user entry's prompt text; None for a tool result."""
    msg = entry.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return None


def _find_cut(entries: list, cp: Checkpoint) -> int | None:
    for by_id in (True, False):
        if by_id and not cp.prompt_id:
            continue
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or e.get("type") != "user" or e.get("isSidechain"):
                continue
            text = _text(e)
            if text is None:
                continue
            if (by_id and e.get("promptId") == cp.prompt_id) or \
                    (not by_id and cp.message is not None and unbroken(text).strip() == cp.message.strip()):
                return i
    return None


def _with_session(raw: bytes, new_id: str) -> bytes | None:
    """The line with its top-level "sessionId" value replaced, every other byte as it was;
    None when the key is not spelled plainly at the top level."""
    depth = 0
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and tok == b'"sessionId"':
            colon = _COLON.match(raw, m.end())
            value = _SCALAR.match(raw, colon.end()) if colon else None
            if value is not None:
                return raw[:value.start()] + json.dumps(new_id).encode() + raw[value.end():]
    return None


def _parse(line: bytes):
    """A line's entry; None when it is not JSON. Bytes that are not UTF-8 parse as
    surrogate escapes (the line itself is never re-encoded)."""
    if not line.strip():
        return None
    try:
        return json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None


def fork(cp: Checkpoint, dry_run: bool = False) -> tuple[str, str]:
    """Write the forked transcript; returns (new session id, its path). With `dry_run`, the
    id and path the real run would write."""
    if cp.agent != "claude":
        raise ConversationUnavailable(f"checkpoint {cp.number} is from {cp.agent or 'no agent session'}: "
                                      "rewinding the conversation works for Claude Code sessions")
    path = cp.transcript_path
    if not path:
        raise ConversationUnavailable(f"checkpoint {cp.number} has no transcript path")
    try:
        with open(path, "rb") as f:
            raw_lines = f.read().split(b"\n")
    except OSError as e:
        raise ConversationUnavailable(f"cannot read the session's transcript {path} ({e.strerror})",
                                      hint="Claude Code may have cleaned it up") from None
    entries = [_parse(line) for line in raw_lines]
    cut = _find_cut(entries, cp)
    if cut is None:
        raise ConversationUnavailable(f"checkpoint {cp.number}'s prompt is not in {path}; the transcript format "
                                      "may be one this rewind does not understand", hint="the files can still be rewound")
    while cut > 0 and isinstance(entries[cut - 1], dict) and entries[cut - 1].get("type") == "queue-operation":
        cut -= 1     # the queueing of the prompt we cut
    if not any(isinstance(e, dict) and e.get("type") in ("user", "assistant") for e in entries[:cut]):
        raise ConversationUnavailable(f"checkpoint {cp.number} comes before the first prompt of its session: "
                                      "there is no earlier conversation to continue", hint="start a new session")
    kept = list(zip(raw_lines[:cut], entries[:cut]))
    seed = hashlib.sha256(b"\n".join(raw for raw, _ in kept)).hexdigest()
    for attempt in range(100):
        # The id comes from what is kept, so the dry run names the file the real run writes,
        # and forking the same point again gives the same session back; a file of that name
        # with other bytes (the fork resumed and continued) gets the next id
        new_id = str(uuid.uuid5(_FORKS, f"{cp.session_id}:{cp.number}:{seed}:{attempt}"))
        data = b"\n".join(_renamed(kept, new_id)) + b"\n"
        target = os.path.join(os.path.dirname(path), new_id + ".jsonl")
        try:
            with open(target, "rb") as f:
                if f.read(len(data) + 1) == data:
                    return new_id, target          # written by an earlier fork of this point
        except FileNotFoundError:
            break
        except OSError:
            pass
    else:
        raise ConversationUnavailable(f"cannot find a free name for the new transcript beside {path}")
    if not dry_run:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return new_id, target


_FORKS = uuid.UUID("5b0c1d0e-7e2a-4c8e-9a51-72657769e46e")   # rewind's namespace for fork ids


def _renamed(kept: list, new_id: str) -> list[bytes]:
    out = []
    for raw, e in kept:
        if isinstance(e, dict) and "sessionId" in e:
            line = _with_session(raw, new_id)
            # a key spelled with escapes (never seen): the entry again, every character that
            # is not ASCII escaped, so a lone surrogate stays the escape it was
            out.append(line if line is not None else
                       json.dumps(dict(e, sessionId=new_id), separators=(",", ":")).encode("ascii"))
        elif raw.strip():
            out.append(raw)
    return out
