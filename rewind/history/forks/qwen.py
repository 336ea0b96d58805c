"""Qwen Code's conversation (0.24.4): its transcript is JSON lines as Claude Code's is
(`~/.qwen/projects/<project>/chats/<session id>.jsonl`, or under QWEN_RUNTIME_DIR or
QWEN_HOME), one entry a line with `uuid`, `parentUuid`, `sessionId`, `type` (user,
assistant, tool_result, system) and the message in Gemini's shape (`{"role": "user", "parts": [{"text": ...}]}`). A prompt is a
`user` entry whose provenance is the person's; the transcript carries no prompt id, so the
cut is found by the prompt's text. The fork is `<new id>.jsonl` beside it, every kept line
with the new `sessionId` in its bytes, and `qwen --resume <new id>` continues it.
"""

from __future__ import annotations

import os
import shlex

from rewind.history.forks import jsonl
from rewind.history.forks.claude import fork_beside, is_turn
from rewind.model import Checkpoint
from rewind.text import unbroken

NAME = "Qwen Code"


def _text(entry: dict) -> str | None:
    msg = entry.get("message")
    parts = msg.get("parts") if isinstance(msg, dict) else None
    if not isinstance(parts, list):
        return None
    if any(isinstance(p, dict) and ("functionResponse" in p or "functionCall" in p) for p in parts):
        return None
    return "".join(p.get("text") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _find_cut(entries: list, cp: Checkpoint) -> int | None:
    if cp.message is None:
        return None
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or e.get("type") != "user" or e.get("provenance") not in (None, "real_user"):
            continue
        text = _text(e)
        if text is not None and unbroken(text).strip() == cp.message.strip():
            return i
    return None


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    path, kept = jsonl.kept(cp, NAME, _find_cut, lambda e: False, is_turn)
    return fork_beside(cp, path, kept, dry_run)


def resume_command(root: str, new_id: str, transcript: str, shown_root: str) -> str:
    """`cd ROOT && qwen --resume ID`, with the QWEN_RUNTIME_DIR the transcript lives under
    (<dir>/projects/<project>/chats/<id>.jsonl; Qwen's conversations go there, by default
    into QWEN_HOME, by default ~/.qwen) when it is not ~/.qwen."""
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(transcript))))
    env = ""
    if os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(transcript)))) == "projects" and \
            os.path.realpath(home) != os.path.realpath(os.path.expanduser("~/.qwen")):
        env = f"QWEN_RUNTIME_DIR={shlex.quote(home)} "
    return f"cd {shown_root} && {env}qwen --resume {new_id}"
