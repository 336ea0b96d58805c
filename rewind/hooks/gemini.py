"""Gemini CLI (0.61.0): payload -> Event, and the settings entries that call `rewind hook gemini`.

Shapes from shared/realclient-gemini (captured payloads). Gemini has no prompt or tool-call
id: a prompt is BeforeAgent within its session, and a BeforeTool pairs with the next
AfterTool of the same session and target (Gemini runs edit and shell tools one at a time).
A shell command that fails still arrives as AfterTool (the exit code is only in the text).
Hooks must print nothing (Gemini shows stderr when stdout is empty); timeouts are in ms.
"""

from __future__ import annotations

import os

from rewind.hooks.base import Event, text

AGENT = "gemini"
_KIND = {"SessionStart": "session_start", "BeforeAgent": "prompt", "BeforeTool": "pre_tool",
         "AfterTool": "post_tool", "AfterAgent": "stop", "SessionEnd": "session_end"}
EDIT = {"write_file": "write_file", "replace": "replace"}
SHELL = {"run_shell_command"}
SCOPES = ("project", "user")
TOOL_MATCHER = "write_file|replace|run_shell_command"
# (event, matcher or None, timeout in ms)
HOOK_EVENTS = [
    ("SessionStart", None, 30_000),
    ("BeforeAgent", None, 120_000),
    ("BeforeTool", TOOL_MATCHER, 120_000),
    ("AfterTool", TOOL_MATCHER, 120_000),
    ("AfterAgent", None, 60_000),
    ("SessionEnd", None, 3_000),
]


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session_id = text(payload.get("session_id"), 200)
    if kind is None or not session_id:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session_id, cwd=text(payload.get("cwd"), 4096),
               project_dir=text(env.get("GEMINI_PROJECT_DIR"), 4096),
               transcript_path=text(payload.get("transcript_path"), 4096))
    if kind == "session_start":
        ev.source = text(payload.get("source"), 50)
    elif kind == "session_end":
        ev.source = text(payload.get("reason"), 50)
    elif kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
    elif kind in ("pre_tool", "post_tool"):
        tool = text(payload.get("tool_name"), 200)
        tool_input = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
        if tool in SHELL:
            ev.tool, ev.tool_kind = tool, "shell"
            ev.command = text(tool_input.get("command"), 10_000)
            if kind == "post_tool":
                resp = payload.get("tool_response")
                content = resp.get("llmContent") if isinstance(resp, dict) else None
                ev.failed = isinstance(content, str) and "\nExit Code: " in content
        elif tool in EDIT:
            target = text(tool_input.get("file_path"), 4096)
            if not target:
                return None
            ev.tool, ev.tool_kind, ev.targets = tool, "edit", [target]
        else:
            return None
    return ev


def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".gemini", "settings.json")
    home = os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")
    return os.path.join(home, ".gemini", "settings.json")
