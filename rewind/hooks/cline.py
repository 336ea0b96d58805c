"""Cline (CLI 3.0.65 and the extension): payload -> Event, and the hook executables that
call `rewind hook cline EVENT`.

Shapes from shared/agents/payloads/cline-cli (one prompt of the real CLI; it cannot resume a
session without a terminal, so no multi-prompt session runs here) and from Cline's hook
reference. Cline runs one executable per event, named after it, from `.clinerules/hooks/`
(project) or `~/Documents/Cline/Hooks/` (user), with the payload on stdin, and reads a JSON
answer on stdout (`{"cancel": false}` lets it go on). rewind's executable runs the thin hook
client, then answers; a hook the person had under that name is kept beside it
(`EVENT.rewind-chained`), gets the same payload, and gives the answer.

Payload: `taskId` (the session), `workspaceRoots`, and one object named after the event:
`preToolUse` / `postToolUse` (`toolName`, `parameters`; the CLI's `tool_call` / `tool_result`
carry the call's `id` and its input unflattened), `userPromptSubmit` (`prompt`). A task's
start is its first prompt.
"""

from __future__ import annotations

import json
import os

from rewind.hooks.base import Event, obj as _dict, text

AGENT = "cline"
_KIND = {"TaskStart": "prompt", "TaskResume": "prompt", "UserPromptSubmit": "prompt",
         "PreToolUse": "pre_tool", "PostToolUse": "post_tool", "TaskComplete": "stop",
         "TaskCancel": "stop"}
EDIT = {"editor": "path", "write_to_file": "path", "replace_in_file": "path", "apply_patch": None}
SHELL = {"run_commands": "commands", "execute_command": "command"}
SCOPES = ("project", "user")
EVENTS = tuple(_KIND)
CHAINED = ".rewind-chained"
MARK = "# rewind's Cline hook"


def _args(payload: dict, key: str, call: str) -> dict:
    """The tool's input: the CLI's unflattened `tool_call.input`, else the documented
    `parameters` (whose values may be JSON text)."""
    inp = _dict(_dict(payload.get(call)).get("input"))
    if inp:
        return inp
    out = {}
    for k, v in _dict(_dict(payload.get(key)).get("parameters")).items():
        if isinstance(v, str) and v[:1] in "[{":
            try:
                v = json.loads(v)
            except ValueError:
                pass
        out[k] = v
    return out


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session = text(payload.get("taskId"), 200)
    if kind is None or not session:
        return None
    roots = payload.get("workspaceRoots")
    root = text(roots[0], 4096) if isinstance(roots, list) and roots else None
    ev = Event(agent=AGENT, kind=kind, session_id=session, cwd=root, project_dir=root)
    if kind == "prompt":
        if name == "UserPromptSubmit":
            ev.prompt = text(_dict(payload.get("userPromptSubmit")).get("prompt"))
        else:
            meta = _dict(_dict(payload.get("taskStart") or payload.get("taskResume")).get("taskMetadata"))
            ev.prompt = text(meta.get("initialTask") or meta.get("task"))
            ev.prompt_source = "task-start" if name == "TaskStart" else "task-resume"
    elif kind in ("pre_tool", "post_tool"):
        key, call = ("preToolUse", "tool_call") if kind == "pre_tool" else ("postToolUse", "tool_result")
        tool = text(_dict(payload.get(key)).get("toolName") or _dict(payload.get(call)).get("name"), 200)
        args = _args(payload, key, call)
        ev.tool_use_id = text(_dict(payload.get(call)).get("id"), 200)
        result = _dict(payload.get(call)).get("output")
        results = result if isinstance(result, list) else [result]
        ev.failed = _dict(payload.get(key)).get("success") is False or \
            any(isinstance(r, dict) and r.get("success") is False for r in results)
        if tool in SHELL:
            cmd = args.get(SHELL[tool])
            cmd = " ; ".join(c for c in cmd if isinstance(c, str)) if isinstance(cmd, list) else cmd
            ev.tool, ev.tool_kind, ev.command = tool, "shell", text(cmd, 10_000)
        elif tool in EDIT:
            target = text(args.get(EDIT[tool])) if EDIT[tool] else None
            if not target:
                return None
            ev.tool, ev.tool_kind, ev.targets = tool, "edit", [target]
        else:
            return None
    return ev


# -- installing: one executable per event, chaining the person's -----------------------------

def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".clinerules", "hooks")
    return os.path.join(os.path.expanduser("~"), "Documents", "Cline", "Hooks")


def own_files(path: str) -> list[str]:
    """The files install writes (one executable per event), for `.git/info/exclude`."""
    return [os.path.join(path, event) for event in EVENTS]


def script(command: str, event: str, chained: bool) -> bytes:
    run = f"{command} {event}"
    if chained:
        body = (f'payload=$(cat)\nprintf "%s" "$payload" | {run} >/dev/null 2>&1\n'
                f'printf "%s" "$payload" | exec "$(dirname "$0")/{event}{CHAINED}"\n')
    else:
        body = f'{run} >/dev/null 2>&1\nprintf \'{{"cancel": false}}\\n\'\n'
    return (f"#!/bin/sh\n{MARK} (rewind hooks install cline; `rewind hooks uninstall cline` takes it out"
            f"{' and puts back the one it runs after' if chained else ''})\n{body}").encode()


def _ours(data: bytes | None) -> bool:
    return data is not None and MARK.encode() in data[:200]


def install(path: str) -> str:
    from rewind.hooks.install import hook_command, read_bytes, write_if_changed
    command = hook_command(AGENT)
    for event in EVENTS:
        target = os.path.join(path, event)
        current = read_bytes(target)
        if current is not None and not _ours(current) and not os.path.lexists(target + CHAINED):
            os.rename(target, target + CHAINED)          # the person's hook runs after ours
        write_if_changed(target, script(command, event, os.path.lexists(target + CHAINED)), 0o755)
    from rewind.bytecode import ensure_compiled
    ensure_compiled()
    return command


def uninstall(path: str) -> bool:
    from rewind.hooks.install import read_bytes
    removed = False
    for event in EVENTS:
        target = os.path.join(path, event)
        if _ours(read_bytes(target)):
            os.unlink(target)
            removed = True
            if os.path.lexists(target + CHAINED):
                os.rename(target + CHAINED, target)
    return removed


def status(path: str) -> dict:
    import shlex
    from rewind.hooks.install import _resolves, read_bytes
    events, commands = [], set()
    for event in EVENTS:
        data = read_bytes(os.path.join(path, event))
        if _ours(data):
            events.append(event)
            line = next((ln for ln in data.decode("utf-8", "replace").splitlines() if "hook.py" in ln), "")
            words = shlex.split(line.split(">")[0].split("|")[-1]) if line else []
            commands.add(" ".join(map(shlex.quote, words[:-1])))
    return {"path": path, "installed": bool(events), "events": events, "commands": sorted(commands),
            "command_resolves": all(_resolves(c) for c in commands) if commands else None}
