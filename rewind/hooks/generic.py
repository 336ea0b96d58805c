"""Any agent: rewind's own small hook payload, for agents without a built-in adapter.

One JSON object per call on stdin (fields other than `event` and `session` optional):

    {"event": "session-start" | "prompt" | "tool-start" | "tool-end" | "stop" | "session-end",
     "session": "an id that stays the same for the whole session",
     "cwd": "/abs/dir", "project": "/abs/project/root",
     "prompt": "the prompt text",                      # event prompt
     "tool": "edit" | "shell",                         # tool-start / tool-end
     "id": "call-1",                                   # pairs a tool-start with its tool-end
     "command": "npm test",                            # shell
     "paths": ["src/a.py"],                            # edit: the files it is about to write
     "failed": false}                                  # tool-end

`tool-start` of an `edit` stores the current content of each path (its pre-image);
`tool-start`/`tool-end` of a `shell` bracket the command, so what changed in between is
attributed to it. Without any hook, `rewind save -m "..."` takes a checkpoint by hand.
"""

from __future__ import annotations

from rewind.hooks.base import Event, text

AGENT = "generic"
_KIND = {"session-start": "session_start", "prompt": "prompt", "tool-start": "pre_tool",
         "tool-end": "post_tool", "stop": "stop", "session-end": "session_end"}
SCOPES: tuple[str, ...] = ()     # nothing to install: the agent's own config calls `rewind hook generic`


def parse(payload: dict, env: dict) -> Event | None:
    kind = _KIND.get(payload.get("event")) if isinstance(payload.get("event"), str) else None
    session = text(payload.get("session"), 200)
    if kind is None or not session:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session, cwd=text(payload.get("cwd"), 4096),
               project_dir=text(payload.get("project"), 4096))
    if kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
    elif kind in ("pre_tool", "post_tool"):
        tool = payload.get("tool")
        ev.tool_use_id = text(payload.get("id"), 200)
        ev.failed = payload.get("failed") is True
        if tool == "shell":
            ev.tool, ev.tool_kind = "shell", "shell"
            ev.command = text(payload.get("command"), 10_000)
        elif tool == "edit":
            ev.tool, ev.tool_kind = "edit", "edit"
            paths = payload.get("paths")
            ev.targets = [p for p in (paths if isinstance(paths, list) else []) if isinstance(p, str)][:20]
        else:
            return None
    return ev
