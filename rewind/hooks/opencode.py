"""OpenCode (1.18.33): the plugin rewind writes into OpenCode's plugins folder, and its
events -> Event.

OpenCode has no command hooks: plugins (JavaScript, loaded from `.opencode/plugins/` or
`~/.config/opencode/plugins/`) get its events in process. rewind's plugin
(rewind/data/opencode-plugin.js) hands the few it records to the same thin hook client a
command hook runs, as `{"hook_event_name": NAME, "directory", "input", "output"}` with
OpenCode's own objects (shapes from shared/agents/payloads/opencode, captured from the real
CLI by a plugin that recorded them):
- `chat.message`: a prompt (the text parts of the user's message);
- `tool.execute.before` / `tool.execute.after` of write, edit, patch (the file is
  `args.filePath`) and bash (`args.command`), paired by `callID`; a tool call that fails
  sends no `after`, only its part's error state (`tool.error`, the plugin's name for it);
- the events `session.created`, `session.idle` (the turn is over) and `session.deleted`.
"""

from __future__ import annotations

import json
import os

from rewind.hooks.base import Event, obj as _dict, text

AGENT = "opencode"
EDIT = {"write", "edit", "patch", "multiedit", "apply_patch"}
SHELL = {"bash"}
_KIND = {"chat.message": "prompt", "tool.execute.before": "pre_tool", "tool.execute.after": "post_tool",
         "tool.error": "post_tool", "session.created": "session_start", "session.idle": "stop",
         "session.deleted": "session_end"}
SCOPES = ("project", "user")
PLUGIN = "rewind.js"
MARK = "// rewind's OpenCode plugin"    # install.PLUGIN_MARK (this module is on the hook path: no import of it)


def _database(env: dict) -> str | None:
    """Where OpenCode keeps its sessions: its XDG_DATA_HOME (or ~/.local/share)."""
    data = env.get("XDG_DATA_HOME") or (os.path.join(env["HOME"], ".local", "share") if env.get("HOME") else None)
    return os.path.join(data, "opencode", "opencode.db") if data and os.path.isabs(data) else None


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    if kind is None:
        return None
    inp, out = _dict(payload.get("input")), _dict(payload.get("output"))
    props = _dict(out.get("properties"))
    message = _dict(out.get("message"))
    session = text(inp.get("sessionID") or props.get("sessionID") or message.get("sessionID")
                   or _dict(props.get("info")).get("id"), 200)
    if not session:
        return None
    where = text(payload.get("directory"), 4096)
    ev = Event(agent=AGENT, kind=kind, session_id=session, cwd=where, project_dir=where,
               transcript_path=_database(env))
    if kind == "prompt":
        if message.get("role") not in (None, "user"):
            return None
        parts = out.get("parts") if isinstance(out.get("parts"), list) else []
        ev.prompt = text("".join(p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"
                                 and isinstance(p.get("text"), str) and not p.get("synthetic")))
        if not (ev.prompt or "").strip():
            return None
        # `opencode run` quotes each word of its message that holds a space when it joins
        # them (1.18.33): a prompt given as one such word is kept as it was typed
        p = ev.prompt
        if len(p) > 2 and p[0] == p[-1] == '"' and '"' not in p[1:-1] and " " in p:
            ev.prompt = p[1:-1]
        ev.prompt_id = text(message.get("id"), 200)
    elif kind in ("pre_tool", "post_tool"):
        tool = text(inp.get("tool"), 200)
        args = _dict(out.get("args")) or _dict(inp.get("args"))
        ev.tool_use_id = text(inp.get("callID"), 200)
        ev.failed = name == "tool.error" or _dict(out.get("metadata")).get("exit") not in (None, 0)
        if tool in SHELL:
            ev.tool, ev.tool_kind = tool, "shell"
            ev.command = text(args.get("command"), 10_000)
        elif tool in EDIT:
            target = text(args.get("filePath") or args.get("file_path") or args.get("path"), 4096)
            ev.tool, ev.tool_kind = tool, "edit"
            if target:
                ev.targets = [target]
            elif name != "tool.error":
                return None      # (a patch names its files in its text: the scan before the next checkpoint sees them)
        else:
            return None
    elif kind == "session_start":
        ev.source = "startup"
    return ev


# -- installing: one plugin file, rewind's own ------------------------------------------------

def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".opencode", "plugins", PLUGIN)
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "opencode", "plugins", PLUGIN)


def plugin_source(command: list[str]) -> bytes:
    from importlib.resources import files
    template = files("rewind").joinpath("data", "opencode-plugin.js").read_text(encoding="utf-8")
    return template.replace("__REWIND_COMMAND__", json.dumps(command)).encode()


def _ours(data: bytes | None) -> bool:
    return data is not None and data.startswith(MARK.encode())


def install(path: str) -> str:
    """Write the plugin (the file is rewind's: one of another name is never touched; one of
    this name that is not rewind's is refused)."""
    import shlex
    from rewind.errors import SettingsFileInvalid
    from rewind.hooks.install import hook_command, read_bytes, write_if_changed
    current = read_bytes(path)
    if current is not None and not _ours(current):
        raise SettingsFileInvalid(f"{path} exists and is not rewind's plugin; not touching it",
                                  hint="rename it, then run the command again")
    write_if_changed(path, plugin_source(shlex.split(hook_command(AGENT))), 0o644)
    from rewind.bytecode import ensure_compiled
    ensure_compiled()
    return hook_command(AGENT)


def uninstall(path: str) -> bool:
    from rewind.hooks.install import read_bytes
    if not _ours(read_bytes(path)):
        return False
    os.unlink(path)
    return True


def status(path: str) -> dict:
    from rewind.hooks.install import _resolves, read_bytes
    data = read_bytes(path)
    if not _ours(data):
        return {"path": path, "installed": False}
    line = next((ln for ln in data.decode("utf-8", "replace").splitlines() if ln.startswith("const COMMAND = ")), "")
    try:
        command = json.loads(line[len("const COMMAND = "):].rstrip(";"))
    except ValueError:
        command = []
    import shlex
    joined = " ".join(map(shlex.quote, command)) if isinstance(command, list) else ""
    return {"path": path, "installed": True, "events": sorted(_KIND), "commands": [joined] if joined else [],
            "command_resolves": bool(joined) and _resolves(joined)}
