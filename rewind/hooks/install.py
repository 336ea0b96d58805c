"""Merge rewind's hook entries into an agent's JSON settings file, and take them out again.

Idempotent, keeps every other key and hook, refuses a file that is not valid JSON, writes a
backup of the original first, and on uninstall gives back the original bytes when nothing
else changed in between.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys

from rewind.errors import RewindError, SettingsFileInvalid
from rewind.fsutil import atomic_write

MARK = " hook "


def hook_command(agent: str) -> str:
    """The command the agent runs: this interpreter (the venv's, never resolved to the base
    one, which would not have rewind's dependencies), with `-S` to skip `site` (measured:
    about as much time as the hook's own work), on rewind/hook.py by absolute path, so it
    works without rewind on PATH."""
    import rewind
    runner = os.path.join(os.path.dirname(os.path.abspath(rewind.__file__)), "hook.py")
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(runner)} {agent}"


def command_of(entry) -> str | None:
    """A handler's command: under "command", or "bash" (Copilot CLI's hooks files)."""
    if not isinstance(entry, dict):
        return None
    cmd = entry.get("command", entry.get("bash"))
    return cmd if isinstance(cmd, str) else None


def _is_ours(entry: dict, agent: str) -> bool:
    cmd = command_of(entry)
    # `hook.py AGENT`, or `hook.py AGENT EVENT` where the payload does not name its event
    return cmd is not None and "rewind" in cmd and \
        bool(re.search(rf"hook(\.py)? {re.escape(agent)}( [A-Za-z]+)?\s*$", cmd))


def through_link(path: str) -> str:
    """A settings file kept as a symlink (a dotfiles repository) is changed where it lives:
    the link stays a link."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _load(path: str) -> tuple[dict, bytes | None]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}, None
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as e:
        raise SettingsFileInvalid(f"{path} is not valid JSON ({e}); not touching it",
                                  hint="fix the file, then run the command again") from None
    if not isinstance(data, dict):
        raise SettingsFileInvalid(f"{path} does not hold a JSON object; not touching it")
    return data, raw


def strip_ours(settings: dict, agent: str) -> dict:
    """A copy of a settings dict without rewind's entries for `agent`."""
    return _strip(json.loads(json.dumps(settings)), agent)


def _strip(settings: dict, agent: str) -> dict:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not _is_ours(h, agent)]
                if not inner and group["hooks"]:
                    continue
                group = dict(group, hooks=inner)
            elif _is_ours(group, agent):     # a flat list of handlers (Cursor's hooks.json)
                continue
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    return settings


def read_bytes(path: str) -> bytes | None:
    """A file's bytes; None when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError):
        return None


def write_if_changed(path: str, data: bytes, mode: int) -> None:
    """A file rewind owns (OpenCode's plugin, Cline's hooks), written only when it differs."""
    if read_bytes(path) != data:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, data, mode=mode)


BACKUP = ".rewind-backup"


def keep_original(path: str, raw: bytes | None) -> None:
    """Before rewind first changes a file: a copy of its bytes, for uninstall to give back."""
    if raw is not None and not os.path.exists(path + BACKUP):
        atomic_write(path + BACKUP, raw, mode=0o600)


def give_back(path: str, remaining: bytes, unchanged, empty: bool, mode: int) -> None:
    """After rewind's entries are taken out: the original bytes when `unchanged(original)`
    says nothing else changed since; no file at all when there was none before and nothing
    is left (`empty`); else `remaining`."""
    try:
        with open(path + BACKUP, "rb") as f:
            original = f.read()
    except FileNotFoundError:
        original = None
    if original is not None:
        try:
            same = unchanged(original)
        except ValueError:          # not JSON, not UTF-8: certainly changed
            same = False
        if same:
            atomic_write(path, original, mode=mode)
            os.unlink(path + BACKUP)
            return
    elif empty:
        os.unlink(path)
        return
    atomic_write(path, remaining, mode=mode)


def install(path: str, agent: str, events: list[tuple[str, str | None, int | None]], flat: bool = False,
            top: dict | None = None, make_handler=None, new_top: dict | None = None) -> str:
    """Merge our entries in: `event -> [{matcher, hooks: [handler]}]` (Claude Code, Gemini,
    Codex, Qwen Code), or with `flat`, `event -> [handler]` (Cursor, Copilot CLI). `top`:
    keys the file needs (a "version"), set only when absent; `new_top`: keys a file rewind
    creates starts with (Qwen Code's settings version, which it would otherwise write into
    the file at its next start: a change in the tree nobody made); `make_handler(event,
    command, timeout)`: the agent's own handler shape (Copilot CLI's)."""
    path = through_link(path)
    settings, raw = _load(path)
    if raw is None or not raw.strip():
        settings = dict(new_top or {})
    before = json.loads(json.dumps(settings))
    stripped = strip_ours(settings, agent)
    if stripped == settings:
        keep_original(path, raw)    # the original is a file rewind has not changed yet
    settings = stripped
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileInvalid(f"{path}: \"hooks\" is not an object; not touching it")
    command = hook_command(agent)
    for key, value in (top or {}).items():
        settings.setdefault(key, value)
    for event, matcher, timeout in events:
        if make_handler is not None:
            handler: dict = make_handler(event, command, timeout)
        else:
            handler = {"command": command} if flat else {"type": "command", "command": command}
            if timeout is not None:
                handler["timeout"] = timeout
        group: dict = handler
        if not flat:
            group = {"matcher": matcher} if matcher is not None else {}
            group["hooks"] = [handler]
        existing = hooks.get(event)
        hooks[event] = (existing if isinstance(existing, list) else []) + [group]
    new = (json.dumps(settings, indent=2) + "\n").encode()
    if new != raw and (raw is None or settings != before):  # installed already: the file is left as it is
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, new, mode=0o644)
    from rewind.bytecode import ensure_compiled
    ensure_compiled()               # the hook runs a fresh interpreter per call: no compiling there
    return command


def uninstall(path: str, agent: str, top: dict | None = None) -> bool:
    """Take our entries out; a file rewind made, left with nothing but the `top` keys
    install set, goes."""
    path = through_link(path)
    settings, raw = _load(path)
    if raw is None:
        return False
    stripped = strip_ours(settings, agent)
    if stripped == settings:
        return False
    top = top or {}
    rest = {k: v for k, v in stripped.items() if k not in top or top[k] != v}
    give_back(path, (json.dumps(stripped, indent=2) + "\n").encode(),
              lambda original: json.loads(original) == stripped, not rest, 0o644)
    return True


def _resolves(command: str) -> bool:
    """The command's program exists and is executable, and so does the script it runs."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words or not os.access(words[0], os.X_OK):
        return False
    scripts = [w for w in words[1:] if w.endswith(".py")]
    return all(os.path.isfile(w) for w in scripts)


def status(path: str, agent: str) -> dict:
    try:
        settings, raw = _load(path)
    except RewindError as e:
        return {"path": path, "installed": False, "error": e.message}
    events, commands = [], set()
    hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            handlers = (group.get("hooks") or []) if isinstance(group, dict) and "hooks" in group else [group]
            for h in handlers:
                if _is_ours(h, agent):
                    events.append(event)
                    commands.add(command_of(h))
    resolves = all(_resolves(c) for c in commands) if commands else None
    return {"path": path, "installed": bool(events), "events": sorted(set(events)),
            "commands": sorted(commands), "command_resolves": resolves}


def status_of(mod, path: str, agent: str) -> dict:
    """`status`, or the adapter's own for an agent whose hooks are not a JSON file (OpenCode's plugin)."""
    return mod.status(path) if hasattr(mod, "status") else status(path, agent)


def installed_for(root: str) -> list[str]:
    """Where rewind's hooks are installed for the project at `root`: "agent (scope)" each,
    read from every agent's settings files (a file that is not valid JSON counts as none)."""
    import importlib
    from rewind.hooks import ADAPTERS
    found = []
    for agent, module in sorted(ADAPTERS.items()):
        mod = importlib.import_module(module)
        for scope in getattr(mod, "SCOPES", ()):
            if status_of(mod, mod.settings_path(scope, root), agent).get("installed"):
                found.append(f"{agent} ({scope})")
    return found


PLUGIN_MARK = "// rewind's OpenCode plugin"     # the first line of the plugin rewind writes (hooks/opencode.py)
CLINE_MARK = "# rewind's Cline hook"            # the second line of each hook rewind writes (hooks/cline.py)
CLINE_EVENTS = ("TaskStart", "TaskResume", "UserPromptSubmit", "PreToolUse", "PostToolUse", "TaskComplete",
                "TaskCancel")                   # hooks/cline.EVENTS (a test keeps them equal)

# agents' settings files inside a project, and whose entries they hold
PROJECT_SETTINGS = {".claude/settings.json": "claude", ".claude/settings.local.json": "claude",
                    ".gemini/settings.json": "gemini", ".codex/hooks.json": "codex",
                    ".cursor/hooks.json": "cursor", ".qwen/settings.json": "qwen",
                    ".github/hooks/rewind.json": "copilot", ".opencode/plugins/rewind.js": "opencode",
                    **{f".clinerules/hooks/{event}": "cline" for event in CLINE_EVENTS}}


def rewind_entries(settings: dict, agent: str) -> dict[str, list]:
    """rewind's own entries in a settings dict: event -> groups (or flat handlers)."""
    found: dict[str, list] = {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                mine = [h for h in group["hooks"] if _is_ours(h, agent)]
                if mine:
                    found.setdefault(event, []).append(dict(group, hooks=mine))
            elif _is_ours(group, agent):
                found.setdefault(event, []).append(group)
    return found


def whole_file_ours(agent: str, data: bytes) -> bool | None:
    """For an agent whose hook is a whole file rewind writes (OpenCode's plugin, Cline's
    executables): whether `data` is rewind's; None for the agents whose hooks are entries in a
    JSON settings file."""
    if agent == "opencode":
        return data.startswith(PLUGIN_MARK.encode())
    if agent == "cline":
        return CLINE_MARK.encode() in data[:200]
    return None


def keep_ours(rel_path: str, current: bytes | None, target: bytes | None) -> bytes | None:
    """What a restore writes at an agent's settings file so that recording goes on: the
    target's content with rewind's own hook entries, as the current file has them, kept.
    None when the current file holds none (or either side is not a JSON object): restored
    as it is."""
    agent = PROJECT_SETTINGS.get(rel_path)
    if agent is None or current is None:
        return None
    whole = whole_file_ours(agent, current)
    if whole is not None:           # rewind's own plugin or hook file: kept as it is now
        return current if whole else None
    try:
        now = json.loads(current)
        then = json.loads(target) if target is not None and target.strip() else {}
    except ValueError:
        return None
    if not isinstance(now, dict) or not isinstance(then, dict):
        return None
    ours = rewind_entries(now, agent)
    if not ours:
        return None
    merged = _strip(then, agent)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        return None
    for event, groups in ours.items():
        existing = hooks.get(event)
        hooks[event] = (existing if isinstance(existing, list) else []) + groups
    return (json.dumps(merged, indent=2) + "\n").encode()
