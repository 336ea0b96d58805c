"""Claude Code: payload -> Event, and the settings entries that call `rewind hook claude`.

Payload shapes are Claude Code 2.1.197's, as captured in shared/realclient/payloads.
"""

from __future__ import annotations

import os

from rewind.hooks.base import Event, text

AGENT = "claude"
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
SHELL_TOOLS = frozenset({"Bash", "PowerShell"})

_KIND = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "pre_tool",
    "PostToolUse": "post_tool",
    "PostToolUseFailure": "post_tool",
    "Stop": "stop",
    "StopFailure": "stop",
    "SubagentStop": "stop",
    "SessionEnd": "session_end",
}


def parse(payload: dict, env: dict) -> Event | None:
    """An Event, or None for events rewind does not act on."""
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session_id = text(payload.get("session_id"), 200)
    if kind is None or not session_id:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session_id,
               cwd=text(payload.get("cwd"), 4096),
               project_dir=text(env.get("CLAUDE_PROJECT_DIR"), 4096),
               transcript_path=text(payload.get("transcript_path"), 4096),
               prompt_id=text(payload.get("prompt_id"), 200),
               agent_id=text(payload.get("agent_id"), 200))
    if kind == "session_start":
        ev.source = text(payload.get("source"), 50)
    elif kind == "session_end":
        ev.source = text(payload.get("reason"), 50)
    elif kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
        ev.prompt_source = text(payload.get("source"), 50)
        task = task_notification(ev.prompt)
        if task is not None:
            ev.prompt_source, ev.task = "task-notification", task
    elif kind in ("pre_tool", "post_tool"):
        ev.tool = text(payload.get("tool_name"), 200)
        ev.tool_use_id = text(payload.get("tool_use_id"), 200)
        ev.failed = name == "PostToolUseFailure"
        tool_input = payload.get("tool_input")
        if not isinstance(tool_input, dict):
            tool_input = {}
        if ev.tool in SHELL_TOOLS:
            ev.tool_kind = "shell"
            ev.command = text(tool_input.get("command"), 10_000)
            response = payload.get("tool_response")
            if kind == "post_tool" and isinstance(response, dict):
                ev.background = text(response.get("backgroundTaskId"), 200)
        elif ev.tool in EDIT_TOOLS:
            ev.tool_kind = "edit"
            target = text(tool_input.get("file_path")) or text(tool_input.get("notebook_path"))
            if target:
                ev.targets = [target]
        else:
            return None  # Read, Grep, WebFetch...: nothing to record
    elif kind == "stop":
        ev.stop_scope = "agent" if name == "SubagentStop" else "session"
        tasks = payload.get("background_tasks")
        if isinstance(tasks, list) and name == "Stop":
            ev.running_tasks = [t["id"] for t in tasks if isinstance(t, dict) and isinstance(t.get("id"), str)
                                and t.get("status") in ("running", "pending", None)]
    return ev


def task_notification(prompt: str | None) -> dict | None:
    """Claude Code's notice that a background task ended, sent as a prompt of its own:
    `<task-notification><task-id>…</task-id><tool-use-id>…</tool-use-id><status>completed
    </status><summary>Background command "build" completed (exit code 0)</summary>…`.
    Its fields, or None for a person's prompt."""
    if not prompt or not prompt.lstrip().startswith("<task-notification>"):
        return None
    fields = {}
    for tag in ("task-id", "tool-use-id", "status", "summary"):
        start = prompt.find(f"<{tag}>", 0, 20_000)
        end = prompt.find(f"</{tag}>", start)
        if start >= 0 and end > start:
            fields[tag.replace("-", "_")] = prompt[start + len(tag) + 2:end].strip()[:500]
    return fields if fields.get("task_id") or fields.get("tool_use_id") else None


# -- installing -------------------------------------------------------------------------------

TOOL_MATCHER = "Write|Edit|MultiEdit|NotebookEdit|Bash|PowerShell"
# (event, matcher or None, timeout seconds)
HOOK_EVENTS = [
    ("SessionStart", None, 30),
    ("UserPromptSubmit", None, 120),
    ("PreToolUse", TOOL_MATCHER, 120),
    ("PostToolUse", TOOL_MATCHER, 120),
    ("PostToolUseFailure", TOOL_MATCHER, 120),
    ("Stop", None, 60),
    ("StopFailure", None, 60),
    ("SubagentStop", None, 60),
    ("SessionEnd", None, 1),   # Claude Code gives all SessionEnd hooks 1.5 s together
]


SCOPES = ("local", "project", "user")


def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".claude", "settings.json")
    if scope == "local":
        return os.path.join(project_root, ".claude", "settings.local.json")
    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return os.path.join(config, "settings.json")
