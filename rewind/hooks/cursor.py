"""Cursor (hooks.json version 1), from its documentation: Cursor's CLI cannot run here, so
the payloads are the documented ones (shared/reference/peers-and-agent-hooks.md, section 6).

Events: beforeSubmitPrompt (a checkpoint), beforeShellExecution / afterShellExecution (a
shell window), afterFileEdit (the agent's edit tool wrote `file_path`: Cursor has no hook
before an edit, so its pre-image is the last scan's), stop, sessionStart / sessionEnd. The
session is `conversation_id`; the project is the first of `workspace_roots`. Cursor reads
JSON answers on stdout for some events; rewind prints nothing, so Cursor goes on as if no
hook were there.
"""

from __future__ import annotations

import os

from rewind.hooks.base import Event, text

AGENT = "cursor"
_KIND = {"sessionStart": "session_start", "beforeSubmitPrompt": "prompt",
         "beforeShellExecution": "pre_tool", "afterShellExecution": "post_tool",
         "afterFileEdit": "file_edited", "stop": "stop", "sessionEnd": "session_end"}
SCOPES = ("project", "user")
HOOK_EVENTS = [(name, None, None) for name in _KIND]
FLAT = True                     # hooks.json v1: event -> [handler], no matcher groups
TOP = {"version": 1}


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session = text(payload.get("conversation_id"), 200)
    if kind is None or not session:
        return None
    roots = payload.get("workspace_roots")
    root = text(roots[0], 4096) if isinstance(roots, list) and roots else None
    ev = Event(agent=AGENT, kind=kind, session_id=session, cwd=text(payload.get("cwd"), 4096) or root,
               project_dir=root, transcript_path=text(payload.get("transcript_path"), 4096),
               prompt_id=text(payload.get("generation_id"), 200))
    if kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
    elif kind in ("pre_tool", "post_tool"):
        ev.tool, ev.tool_kind = "shell", "shell"
        ev.command = text(payload.get("command"), 10_000)
        ev.tool_use_id = text(payload.get("generation_id"), 200)
    elif kind == "file_edited":
        ev.tool, ev.tool_kind = "edit", "edit"
        target = text(payload.get("file_path"), 4096)
        if not target:
            return None
        ev.targets = [target]
    return ev


def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".cursor", "hooks.json")
    return os.path.join(os.path.expanduser("~"), ".cursor", "hooks.json")
