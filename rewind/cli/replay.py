"""Replay captured agent hook payloads against a real directory, doing what each tool did.

Used by `rewind demo` and by the tests: the payloads are Claude Code 2.1.197's own
(captured by shared/realclient), with placeholders for the machine-specific parts. Between
a PreToolUse and its PostToolUse the tool's effect is really carried out: Write and Edit
change the file, Bash runs the command in a shell in the payload's cwd.
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import resources
from collections.abc import Callable, Iterable

Deliver = Callable[[dict], None]


def bundled_session() -> list[dict]:
    text = resources.files("rewind").joinpath("data/claude-2.1.197-session.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def fill(value, project_dir: str, session_id: str, config_dir: str):
    """Replace the capture's placeholders, recursively."""
    if isinstance(value, str):
        value = value.replace("<PROJECT_DIR>", project_dir).replace("<SESSION_ID>", session_id)
        value = value.replace("<CLAUDE_CONFIG_DIR>", config_dir).replace("<PROJECT_KEY>", "proj")
        for n in range(1, 10):
            value = value.replace(f"<PROMPT_ID_{n}>", f"00000000-0000-4000-8000-00000000000{n}")
        return value
    if isinstance(value, list):
        return [fill(v, project_dir, session_id, config_dir) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, project_dir, session_id, config_dir) for k, v in value.items()}
    return value


def perform(payload: dict) -> None:
    """Carry out a tool call's effect on disk."""
    tool, args = payload.get("tool_name"), payload.get("tool_input") or {}
    if tool == "Write":
        os.makedirs(os.path.dirname(args["file_path"]), exist_ok=True)
        with open(args["file_path"], "w") as f:
            f.write(args["content"])
    elif tool == "Edit":
        with open(args["file_path"]) as f:
            text = f.read()
        count = -1 if args.get("replace_all") else 1
        with open(args["file_path"], "w") as f:
            f.write(text.replace(args["old_string"], args["new_string"], count))
    elif tool == "Bash":
        subprocess.run(args["command"], shell=True, cwd=payload.get("cwd"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def replay(payloads: Iterable[dict], deliver: Deliver,
           between: Callable[[dict], None] | None = None) -> None:
    """Deliver each payload; run each tool between its Pre and Post event; call `between`
    before each UserPromptSubmit (a person editing between prompts)."""
    pre: dict[str, dict] = {}
    for p in payloads:
        event = p.get("hook_event_name")
        if event == "UserPromptSubmit" and between is not None:
            between(p)
        if event == "PreToolUse":
            pre[p.get("tool_use_id")] = p
        if event in ("PostToolUse", "PostToolUseFailure"):
            perform(pre.get(p.get("tool_use_id"), p))   # the tool ran in the Pre event's cwd
        deliver(p)


def hook_in_process(project_dir: str) -> Deliver:
    """Deliver a payload the way `rewind hook claude` would, without a new process."""
    from rewind.hooks import claude
    from rewind.hooks.recorder import handle

    env = {"CLAUDE_PROJECT_DIR": project_dir}

    def deliver(payload: dict) -> None:
        event = claude.parse(payload, env)
        if event is not None:
            handle(event)
    return deliver
