"""Copilot CLI's conversation (1.0.102): a session is a folder,
`~/.copilot/session-state/<session id>/` (or under COPILOT_HOME), holding `events.jsonl` (one
event a line: `type`, `data`, `id`, `timestamp`, `parentId`; the session's id in the
`session.start` event's data), `workspace.yaml` (`id:`, the folder, the name) and Copilot's
own per-prompt file snapshots. A prompt is a `user.message` event (its `content` is what was
typed), preceded by the hooks it fired.

The fork is a new session folder beside the original: the events before the prompt (its
hooks and the session's resumption that came with it left out), the `session.start` event's
`sessionId` replaced in its bytes, and `workspace.yaml` with the new `id:`. Copilot's own
snapshots are not copied: they belong to the original session's prompts. The original folder
is never written. `copilot --resume=<new id>` continues it.
"""

from __future__ import annotations

import os
import re
import shlex

from rewind.errors import ConversationUnavailable
from rewind.history.forks import jsonl
from rewind.model import Checkpoint
from rewind.text import unbroken

NAME = "Copilot CLI"
_PROMPT_HOOKS = {"sessionStart", "userPromptSubmitted", "userPromptTransformed"}
_ID_LINE = re.compile(rb"^id:[^\n]*$", re.M)


def _cut(entries: list, cp: Checkpoint) -> int | None:
    if cp.message is None:
        return None
    for i, e in enumerate(entries):
        if isinstance(e, dict) and e.get("type") == "user.message":
            data = e.get("data") if isinstance(e.get("data"), dict) else {}
            content = data.get("content")
            if isinstance(content, str) and unbroken(content).strip() == cp.message.strip():
                return i
    return None


def _comes_with_the_prompt(e) -> bool:
    """An event the prompt brought: its hooks, and the resumption of the session it started."""
    if e.get("type") in ("session.resume", "session.permissions_changed"):
        return True
    data = e.get("data") if isinstance(e.get("data"), dict) else {}
    return e.get("type") in ("hook.start", "hook.end") and data.get("hookType") in _PROMPT_HOOKS


def _renamed(kept: list, new_id: str) -> list[bytes]:
    out = []
    for raw, e in kept:
        if isinstance(e, dict) and e.get("type") == "session.start":
            line = jsonl.with_value(raw, b'"sessionId"', new_id, depth_of_key=2)
            if line is None:
                raise ConversationUnavailable("the session's start event names no session id this rewind can "
                                              "rename; the transcript format may be one it does not understand",
                                              hint="the files can still be rewound")
            out.append(line)
        elif raw.strip():
            out.append(raw)
    return out


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    """Write the forked session's folder; returns (new session id, its events.jsonl)."""
    path, kept = jsonl.kept(cp, NAME, _cut, _comes_with_the_prompt, lambda e: e.get("type") == "user.message",
                            missing="has no session folder recorded",
                            hint="it was recorded by a rewind older than its Copilot CLI support")
    folder = os.path.dirname(path)
    try:
        with open(os.path.join(folder, "workspace.yaml"), "rb") as f:
            workspace = f.read()
    except OSError:
        workspace = None
    states = os.path.dirname(folder)

    def place(new_id: str) -> tuple[str, bytes]:
        return os.path.join(states, new_id, "events.jsonl"), b"\n".join(_renamed(kept, new_id)) + b"\n"

    new_id, target, write = jsonl.first_free(cp, [raw for raw, _ in kept], place, folder)
    if write and not dry_run:
        new_folder = os.path.dirname(target)
        try:
            os.mkdir(new_folder, 0o700)
        except FileExistsError:
            pass                   # a fork of this point cut short before its events were written
        if workspace is not None:
            yaml = _ID_LINE.sub(lambda m: b"id: " + new_id.encode(), workspace, count=1)
            ws = os.path.join(new_folder, "workspace.yaml")
            if os.path.lexists(ws):
                os.unlink(ws)
            jsonl.write_new(ws, yaml)
        jsonl.write_new(target, place(new_id)[1])
    return new_id, target


def resume_command(root: str, new_id: str, transcript: str, shown_root: str) -> str:
    """`cd ROOT && copilot --resume=ID`, with the COPILOT_HOME the session lives under
    (<home>/session-state/<id>/events.jsonl) when it is not the default ~/.copilot."""
    home = os.path.dirname(os.path.dirname(os.path.dirname(transcript)))
    env = ""
    if os.path.basename(os.path.dirname(os.path.dirname(transcript))) == "session-state" and \
            os.path.realpath(home) != os.path.realpath(os.path.expanduser("~/.copilot")):
        env = f"COPILOT_HOME={shlex.quote(home)} "
    return f"cd {shown_root} && {env}copilot --resume={new_id}"
