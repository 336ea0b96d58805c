"""GitHub Copilot CLI (1.0.102): payload -> Event, and the hooks file that calls
`rewind hook copilot EVENT`.

Shapes from shared/agents/payloads/copilot-cli (captured from the real CLI). Its hooks live
in `<project>/.github/hooks/*.json` (`{"version": 1, "hooks": {EVENT: [{"type": "command",
"bash": CMD, "timeoutSec": N}]}}`); rewind writes its own file there, `rewind.json`. The
payload does not name its event, so the command does (`hook.py copilot preToolUse`: the
client hands it on as `copilot:preToolUse`, entry.py puts it in `hook_event_name`). There
is no tool-call id, and two edit tools may run at once (both preToolUse first): a Post pairs
with the open window of its target, a shell's with the session's oldest open one.
`userPromptTransformed` is the same prompt again, as the model gets it: no checkpoint.
It sets CLAUDE_PROJECT_DIR in its hooks' environment: the project here is the payload's cwd.
"""

from __future__ import annotations

import os

from rewind.hooks.base import Event, text

AGENT = "copilot"
_KIND = {"sessionStart": "session_start", "userPromptSubmitted": "prompt", "preToolUse": "pre_tool",
         "postToolUse": "post_tool", "postToolUseFailure": "post_tool", "agentStop": "stop",
         "subagentStop": "stop", "sessionEnd": "session_end"}
EDIT = {"create", "edit"}
SHELL = {"bash"}
SCOPES = ("project",)
FLAT = True                     # event -> [handler], no matcher groups
TOP = {"version": 1}
COMMAND_KEY = "bash"            # the handler's command is under "bash" (or "powershell")
# (event, matcher (none: every tool calls it, the adapter picks), timeout in seconds)
HOOK_EVENTS = [
    ("sessionStart", None, 30),
    ("userPromptSubmitted", None, 120),
    ("preToolUse", None, 120),
    ("postToolUse", None, 120),
    ("postToolUseFailure", None, 120),
    ("agentStop", None, 60),
    ("subagentStop", None, 60),
    ("sessionEnd", None, 10),
]


def _events_file(session_id: str, env: dict) -> str | None:
    """Where Copilot keeps the session (its payloads name it at agentStop only): the
    COPILOT_HOME of its hooks' environment, or ~/.copilot; None for an id that is no name."""
    if session_id in (".", "..") or "/" in session_id or "\0" in session_id:
        return None
    home = env.get("COPILOT_HOME") or (os.path.join(env["HOME"], ".copilot") if env.get("HOME") else None)
    return os.path.join(home, "session-state", session_id, "events.jsonl") if home and os.path.isabs(home) else None


def handler(event: str, command: str, timeout: int | None) -> dict:
    """One entry of the hooks file: the command names its event (the payload does not)."""
    entry = {"type": "command", "bash": f"{command} {event}"}
    if timeout is not None:
        entry["timeoutSec"] = timeout
    return entry


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session_id = text(payload.get("sessionId"), 200)
    if kind is None or not session_id:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session_id, cwd=text(payload.get("cwd"), 4096),
               transcript_path=text(payload.get("transcriptPath"), 4096) or _events_file(session_id, env))
    if kind == "session_start":
        ev.source = text(payload.get("source"), 50)
    elif kind == "session_end":
        ev.source = text(payload.get("reason"), 50)
    elif kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
        if not (ev.prompt or "").strip():
            return None
    elif kind in ("pre_tool", "post_tool"):
        tool = text(payload.get("toolName"), 200)
        args = payload.get("toolArgs") if isinstance(payload.get("toolArgs"), dict) else {}
        ev.failed = name == "postToolUseFailure"
        result = payload.get("toolResult")
        if isinstance(result, dict) and result.get("resultType") not in (None, "success"):
            ev.failed = True
        if tool in SHELL:
            ev.tool, ev.tool_kind = tool, "shell"
            ev.command = text(args.get("command"), 10_000)
        elif tool in EDIT:
            target = text(args.get("path"), 4096)
            if not target:
                return None
            ev.tool, ev.tool_kind, ev.targets = tool, "edit", [target]
        else:
            return None          # view, grep, a tool that does not exist...
    elif kind == "stop":
        ev.stop_scope = "agent" if name == "subagentStop" else "session"
    return ev


def settings_path(scope: str, project_root: str) -> str:
    return os.path.join(project_root, ".github", "hooks", "rewind.json")
