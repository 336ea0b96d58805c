"""Claude Code's conversation: a new transcript that ends just before a checkpoint's
prompt, next to the original (which is never modified), and the `claude --resume <new id>`
that continues from there.

Claude Code's transcript is JSON lines, internal and changing between versions. This reads
it tolerantly: the cut is the first `user` entry that carries the checkpoint's `promptId`
(Claude Code >= 2.1.196) or, failing that, its prompt text; every kept entry gets the new
`sessionId` (in its bytes: jsonl.py); lines that do not parse are kept as they are. When the
prompt cannot be found it says so rather than guess.
"""

from __future__ import annotations

import json
import os
import shlex

from rewind.history.forks import jsonl
from rewind.model import Checkpoint
from rewind.text import unbroken

NAME = "Claude Code"


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


def is_turn(entry: dict) -> bool:
    return entry.get("type") in ("user", "assistant")


def fork_beside(cp: Checkpoint, path: str, kept: list, dry_run: bool) -> tuple[str, str]:
    """The kept lines, renamed to the new session, as `<new id>.jsonl` beside the original."""
    raws = [raw for raw, _ in kept]
    new_id, target, write = jsonl.first_free(
        cp, raws, lambda new_id: (os.path.join(os.path.dirname(path), new_id + ".jsonl"),
                                  b"\n".join(_renamed(kept, new_id)) + b"\n"), path)
    if write and not dry_run:
        jsonl.write_new(target, b"\n".join(_renamed(kept, new_id)) + b"\n")
    return new_id, target


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    """Write the forked transcript; returns (new session id, its path). With `dry_run`, the
    id and path the real run would write."""
    path, kept = jsonl.kept(cp, NAME, _find_cut, lambda e: e.get("type") == "queue-operation", is_turn)
    return fork_beside(cp, path, kept, dry_run)     # (the queueing of the prompt is cut with it)


def _renamed(kept: list, new_id: str) -> list[bytes]:
    out = []
    for raw, e in kept:
        if isinstance(e, dict) and "sessionId" in e:
            line = jsonl.with_value(raw, b'"sessionId"', new_id)
            # a key spelled with escapes (never seen): the entry again, every character that
            # is not ASCII escaped, so a lone surrogate stays the escape it was
            out.append(line if line is not None else
                       json.dumps(dict(e, sessionId=new_id), separators=(",", ":")).encode("ascii"))
        elif raw.strip():
            out.append(raw)
    return out


def resume_command(root: str, new_id: str, transcript: str, shown_root: str) -> str:
    """`cd ROOT && claude --resume ID`, with the CLAUDE_CONFIG_DIR the transcript lives under
    (<config dir>/projects/<project>/<id>.jsonl) when it is not the default ~/.claude: Claude
    Code looks for the session there and nowhere else."""
    config = os.path.dirname(os.path.dirname(os.path.dirname(transcript)))
    env = ""
    if os.path.basename(os.path.dirname(os.path.dirname(transcript))) == "projects" and \
            os.path.realpath(config) != os.path.realpath(os.path.expanduser("~/.claude")):
        env = f"CLAUDE_CONFIG_DIR={shlex.quote(config)} "
    return f"cd {shown_root} && {env}claude --resume {new_id}"
