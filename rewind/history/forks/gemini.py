"""Gemini CLI's conversation (0.61.0): its session is JSON lines in
`~/.gemini/tmp/<project>/chats/session-<start>-<first 8 of the id>.jsonl` (under
GEMINI_CLI_HOME when set): a header line (`sessionId`, `projectHash`, `startTime`, `kind`)
at every start of the CLI, `{"$set": {...}}` updates (the history as the start found it,
`lastUpdated`, the `sessionId`), and one line per message record (`id`, `type` user or
gemini, `content`; a record written again as it grows). A prompt is a `user` record whose
content is text, not a function response; the file carries no prompt id, so the cut is
found by the prompt's text. The fork is a new `session-<start>-<first 8 of the new
id>.jsonl` beside it (Gemini CLI finds a session by the id in its header, and tells its own
file by those 8 characters), every kept line as it was but for the session id in the
header and `$set` lines; `gemini --resume <new id>` continues it.
"""

from __future__ import annotations

import json
import os
import re
import shlex

from rewind.history.forks import jsonl
from rewind.model import Checkpoint
from rewind.text import unbroken

NAME = "Gemini CLI"
_FILE = re.compile(r"^session-(.+)-[0-9A-Za-z]{8}\.jsonl$")


def _text(entry: dict) -> str | None:
    if entry.get("type") != "user" or not isinstance(entry.get("content"), list):
        return None
    parts = entry["content"]
    if any(isinstance(p, dict) and ("functionResponse" in p or "functionCall" in p) for p in parts):
        return None
    return "".join(p.get("text") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _find_cut(entries: list, cp: Checkpoint) -> int | None:
    if cp.message is None:
        return None
    for i, e in enumerate(entries):
        text = _text(e) if isinstance(e, dict) else None
        if text is not None and unbroken(text).strip() == cp.message.strip():
            return i
    return None


def _is_turn(entry: dict) -> bool:
    return _text(entry) is not None or entry.get("type") == "gemini"


def _renamed(kept: list, new_id: str) -> list[bytes]:
    out = []
    for raw, e in kept:
        if not raw.strip():
            continue
        if isinstance(e, dict) and "sessionId" in e:                       # a header
            line = jsonl.with_value(raw, b'"sessionId"', new_id)
            out.append(line if line is not None else
                       json.dumps(dict(e, sessionId=new_id), separators=(",", ":")).encode("ascii"))
        elif isinstance(e, dict) and isinstance(e.get("$set"), dict) and "sessionId" in e["$set"]:
            line = jsonl.with_value(raw, b'"sessionId"', new_id, depth_of_key=2)
            out.append(line if line is not None else json.dumps(
                {**e, "$set": {**e["$set"], "sessionId": new_id}}, separators=(",", ":")).encode("ascii"))
        else:
            out.append(raw)
    return out


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    """Write the forked session file beside the original; returns (new session id, its path)."""
    path, kept = jsonl.kept(cp, NAME, _find_cut, lambda e: False, _is_turn)
    m = _FILE.match(os.path.basename(path))
    start = m.group(1) if m else "fork"

    def place(new_id: str) -> tuple[str, bytes]:
        return (os.path.join(os.path.dirname(path), f"session-{start}-{new_id[:8]}.jsonl"),
                b"\n".join(_renamed(kept, new_id)) + b"\n")
    new_id, target, write = jsonl.first_free(cp, [raw for raw, _ in kept], place, path)
    if write and not dry_run:
        jsonl.write_new(target, place(new_id)[1])
    return new_id, target


def _home(transcript: str) -> str:
    """The GEMINI_CLI_HOME of <home>/.gemini/tmp/<project>/chats/<file>."""
    home = transcript
    for _ in range(5):
        home = os.path.dirname(home)
    return home


def _retention_off(path: str) -> bool | None:
    """What the settings file at `path` says of `general.sessionRetention.enabled` turned
    off: True, False (on, or a file rewind cannot read as JSON), None (it says nothing)."""
    try:
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return False
    general = settings.get("general") if isinstance(settings, dict) else None
    retention = general.get("sessionRetention") if isinstance(general, dict) else None
    enabled = retention.get("enabled") if isinstance(retention, dict) else None
    return None if enabled is None else enabled is False


def caveat(root: str, transcript: str) -> str | None:
    """Gemini CLI 0.61 itself deletes a session resumed in a later minute than it began: the
    resume opens a second file (`session-<now>-<id8>.jsonl`, a header alone), and the next
    start's sweep of unreadable sessions deletes every file of those 8 characters
    (google-gemini/gemini-cli#27368). Its session retention turned off stops the sweep;
    the workspace's settings override the user's."""
    for path in (os.path.join(root, ".gemini", "settings.json"),
                 os.path.join(_home(transcript), ".gemini", "settings.json")):
        off = _retention_off(path)
        if off is not None:
            break
    if off:
        return None
    return ("Gemini CLI 0.61 deletes a session resumed in a later minute than it began, at its next start "
            "(google-gemini/gemini-cli#27368); \"general\": {\"sessionRetention\": {\"enabled\": false}} "
            "in its settings.json stops that")


def resume_command(root: str, new_id: str, transcript: str, shown_root: str) -> str:
    """`cd ROOT && gemini --resume ID`, with the GEMINI_CLI_HOME the session lives under
    (<home>/.gemini/tmp/<project>/chats/<file>) when it is not the home directory."""
    home = _home(transcript)
    env = ""
    if os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(transcript)))) == "tmp" and \
            os.path.realpath(home) != os.path.realpath(os.path.expanduser("~")):
        env = f"GEMINI_CLI_HOME={shlex.quote(home)} "
    return f"cd {shown_root} && {env}gemini --resume {new_id}"
