"""Codex CLI (0.171.0): payload -> Event, and `hooks.json` plus the trust entries Codex needs.

Shapes from shared/realclient-codex (captured payloads, hook-schemas). The shell tool is
`Bash` in hooks; `apply_patch` carries the whole patch in `tool_input.command`, one Pre/Post
pair for every file it adds, updates, deletes or moves (a failed patch has no Post: its
window is closed by the next prompt). A failing command arrives as a normal PostToolUse.
Codex skips a hook silently unless config.toml holds a `[hooks.state."<hooks.json>:<event>:
<group>:<handler>"]` table with the hash of its definition: the installer writes them (in a
marked block, taken out again by uninstall). Timeouts are in seconds; SessionEnd is clamped
to 3 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from rewind.hooks.base import Event, text

AGENT = "codex"
_KIND = {"SessionStart": "session_start", "UserPromptSubmit": "prompt", "PreToolUse": "pre_tool",
         "PostToolUse": "post_tool", "Stop": "stop", "SessionEnd": "session_end"}
SCOPES = ("user", "project")
TOOL_MATCHER = "Bash|apply_patch"
HOOK_EVENTS = [
    ("SessionStart", None, 30),
    ("UserPromptSubmit", None, 120),
    ("PreToolUse", TOOL_MATCHER, 120),
    ("PostToolUse", TOOL_MATCHER, 120),
    ("Stop", None, 60),
    ("SessionEnd", None, 3),
]
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$", re.M)


def patch_targets(patch: str) -> list[str]:
    """Every path an apply_patch text adds, updates, deletes or moves to, in order."""
    out: list[str] = []
    for m in _PATCH_PATH.finditer(patch):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def parse(payload: dict, env: dict) -> Event | None:
    name = payload.get("hook_event_name")
    kind = _KIND.get(name) if isinstance(name, str) else None
    session_id = text(payload.get("session_id"), 200)
    if kind is None or not session_id:
        return None
    ev = Event(agent=AGENT, kind=kind, session_id=session_id, cwd=text(payload.get("cwd"), 4096),
               transcript_path=text(payload.get("transcript_path"), 4096),
               prompt_id=text(payload.get("turn_id"), 200), agent_id=text(payload.get("agent_id"), 200),
               sequential=True)
    if kind == "session_start":
        ev.source = text(payload.get("source"), 50)
    elif kind == "session_end":
        ev.source = text(payload.get("reason"), 50)
    elif kind == "prompt":
        ev.prompt = text(payload.get("prompt"))
    elif kind in ("pre_tool", "post_tool"):
        tool = text(payload.get("tool_name"), 200)
        ev.tool_use_id = text(payload.get("tool_use_id"), 200)
        tool_input = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
        command = text(tool_input.get("command"))
        if tool == "Bash":
            ev.tool, ev.tool_kind, ev.command = tool, "shell", (command or "")[:10_000] or None
        elif tool == "apply_patch":
            ev.tool, ev.tool_kind = tool, "edit"
            ev.targets = patch_targets(command or "")[:20]
            if not ev.targets:
                return None
        else:
            return None
    return ev


# -- installing -------------------------------------------------------------------------------

def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def settings_path(scope: str, project_root: str) -> str:
    if scope == "project":
        return os.path.join(project_root, ".codex", "hooks.json")
    return os.path.join(codex_home(), "hooks.json")


def _label(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _timeout(event: str, t) -> int:
    if event in ("SessionEnd", "Interrupt"):
        return min(max(t or 1, 1), 3)
    return max(t or 600, 1)


def trusted_hash(event: str, matcher: str | None, handler: dict) -> str:
    """Codex 0.171's hash of one handler's definition (what its /hooks approval records)."""
    norm = {"type": "command", "command": handler["command"], "timeout": _timeout(event, handler.get("timeout")),
            "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        norm["statusMessage"] = handler["statusMessage"]
    identity: dict = {"event_name": _label(event), "hooks": [norm]}
    if matcher is not None and event not in ("UserPromptSubmit", "Stop"):
        identity["matcher"] = matcher
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


BEGIN = "# >>> rewind: trust for its Codex hooks (rewind hooks install codex) >>>"
END = "# <<< rewind <<<"


def trust_entries(hooks_path: str, is_ours) -> str:
    """The [hooks.state] tables for every handler of ours in the hooks file."""
    with open(hooks_path) as f:
        data = json.load(f)
    real = os.path.realpath(hooks_path)
    lines = []
    for event, groups in (data.get("hooks") or {}).items():
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            for hi, handler in enumerate(group.get("hooks") or [] if isinstance(group, dict) else []):
                if is_ours(handler):
                    key = f"{real}:{_label(event)}:{gi}:{hi}"
                    lines += [f"[hooks.state.{json.dumps(key)}]", "enabled = true",
                              f"trusted_hash = {json.dumps(trusted_hash(event, group.get('matcher'), handler))}"]
    return "\n".join(lines)


def _without_block(text: str) -> str:
    start = text.find(BEGIN)
    if start < 0:
        return text
    end = text.find(END, start)
    end = len(text) if end < 0 else end + len(END)
    before, after = text[:start], text[end:]
    if after.startswith("\n"):
        after = after[1:]
    if before.endswith("\n\n"):
        before = before[:-1]
    return before + after


def write_trust(hooks_path: str, is_ours) -> str:
    """Put our trust block into $CODEX_HOME/config.toml (replacing an earlier one)."""
    from rewind.fsutil import atomic_write
    from rewind.hooks.install import keep_original, through_link
    config = through_link(os.path.join(codex_home(), "config.toml"))
    try:
        with open(config, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raw = None
    old = raw.decode("utf-8") if raw is not None else ""
    text = _without_block(old)
    if text == old:
        keep_original(config, raw)  # a file rewind has not changed yet
    entries = trust_entries(hooks_path, is_ours)
    if entries:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + f"{BEGIN}\n{entries}\n{END}\n"
    if text.encode("utf-8") != raw:
        os.makedirs(os.path.dirname(config), exist_ok=True)
        atomic_write(config, text.encode("utf-8"), mode=0o600)
    return config


def remove_trust() -> bool:
    from rewind.hooks.install import give_back, through_link
    config = through_link(os.path.join(codex_home(), "config.toml"))
    try:
        with open(config, "rb") as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        return False
    stripped = _without_block(text)
    if stripped == text:
        return False
    give_back(config, stripped.encode("utf-8"),
              lambda original: original.decode("utf-8").rstrip("\n") == stripped.rstrip("\n"),
              not stripped.strip(), 0o600)
    return True


def after_install(path: str, scope: str) -> list[str]:
    from rewind.hooks.install import _is_ours
    config = write_trust(path, lambda h: _is_ours(h, AGENT))
    notes = [f"trusted in {config} (Codex runs no hook it has not trusted)"]
    if scope == "project":
        notes.append("project hooks also need the project trusted in Codex "
                     "(`trust_level = \"trusted\"` under its [projects] entry)")
    return notes


def after_uninstall(path: str, scope: str) -> None:
    remove_trust()
