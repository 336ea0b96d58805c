"""Qwen Code (0.24.4): payload -> Event, and the settings entries that call `rewind hook qwen`.

Shapes from shared/agents/payloads/qwen-code (captured from the real CLI). Its hooks are
Claude Code's in shape (a fork of Gemini CLI that took Claude Code's hook protocol):
`session_id`, `transcript_path`, `prompt_id`, `tool_name`, `tool_input`, `tool_use_id`,
timeouts in ms. Three differences matter here:
- after every tool batch it sends a UserPromptSubmit with an empty prompt (the turn goes
  on): no checkpoint;
- it sets CLAUDE_PROJECT_DIR (and GEMINI_PROJECT_DIR) in its hooks' environment, so the
  project is QWEN_PROJECT_DIR's and the agent is never taken for Claude Code by it;
- a failed tool call is PostToolUseFailure.
"""

from __future__ import annotations

import os

from rewind.hooks.base import Event, text

AGENT = "qwen"
_KIND = {"SessionStart": "session_start", "UserPromptSubmit": "prompt", "PreToolUse": "pre_tool",
         "PostToolUse": "post_tool", "PostToolUseFailure": "post_tool", "Stop": "stop",
         "StopFailure": "stop", "SubagentStop": "stop", "SessionEnd": "session_end"}
EDIT = {"write_file": "file_path", "edit": "file_path", "notebook_edit": "notebook_path"}
SHELL = {"run_shell_command"}
SCOPES = ("project", "user")
NEW_TOP = {"$version": 4}       # a settings file rewind creates is Qwen Code 0.24's (it writes this itself)
TOOL_MATCHER = "write_file|edit|notebook_edit|run_shell_command"
# (event, matcher or None, timeout in ms)
HOOK_EVENTS = [
    ("SessionStart", None, 30_000),
    ("UserPromptSubmit", None, 120_000),
    ("PreToolUse", TOOL_MATCHER, 120_000),
    ("PostToolUse", TOOL_MATCHER, 120_000),
    ("PostToolUseFailure", TOOL_MATCHER, 120_000),
    ("Stop", None, 60_000),
    ("SubagentStop", None, 60_000),
    ("SessionEnd", None, 3_000),
]


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session_id = text(payload.get("session_id"), 200)
    if kind is None or not session_id:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session_id, cwd=text(payload.get("cwd"), 4096),
               project_dir=text(env.get("QWEN_PROJECT_DIR"), 4096),
               transcript_path=text(payload.get("transcript_path"), 4096),
               prompt_id=text(payload.get("prompt_id"), 200), agent_id=text(payload.get("agent_id"), 200) or None)
    if kind == "session_start":
        ev.source = text(payload.get("source"), 50)
    elif kind == "session_end":
        ev.source = text(payload.get("reason"), 50)
    elif kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
        if not (ev.prompt or "").strip():
            return None          # the turn's continuation after a tool batch, not a prompt
    elif kind in ("pre_tool", "post_tool"):
        tool = text(payload.get("tool_name"), 200)
        ev.tool_use_id = text(payload.get("tool_use_id"), 200)
        ev.failed = name == "PostToolUseFailure"
        tool_input = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
        if tool in SHELL:
            ev.tool, ev.tool_kind = tool, "shell"
            ev.command = text(tool_input.get("command"), 10_000)
        elif tool in EDIT:
            target = text(tool_input.get(EDIT[tool]), 4096)
            if not target:
                return None
            ev.tool, ev.tool_kind, ev.targets = tool, "edit", [target]
        else:
            return None
    elif kind == "stop":
        ev.stop_scope = "agent" if name == "SubagentStop" else "session"
    return ev


def qwen_home() -> str:
    return os.environ.get("QWEN_HOME") or os.path.join(os.path.expanduser("~"), ".qwen")


def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".qwen", "settings.json")
    return os.path.join(qwen_home(), "settings.json")
