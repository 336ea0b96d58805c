"""The agent-neutral event every adapter produces, and the contract an adapter keeps.

An adapter is one module in `rewind/hooks/`, registered by name in `hooks/__init__.py`
(`ADAPTERS`), with:
- `AGENT`: its name (`rewind hook AGENT`);
- `parse(payload: dict, env: dict) -> Event | None`: the agent's hook payload (and the
  environment the hook ran in) as an Event, or None for an event rewind does not act on.
  It never raises on a bad payload: a hook never breaks the agent;
- for `rewind hooks install`: `SCOPES`, `HOOK_EVENTS` [(event, matcher, timeout)],
  `settings_path(scope, project_root)`, and optionally `FLAT`/`TOP` (the settings file's
  shape) and `after_install(path, scope)` / `after_uninstall(path, scope)`.
Adding an agent is one module, one registry line and one test file.
"""

from __future__ import annotations

from rewind.structs import dataclass, field


@dataclass
class Event:
    agent: str
    kind: str                       # session_start | prompt | pre_tool | post_tool | file_edited | stop | session_end
    session_id: str
    cwd: str | None = None
    project_dir: str | None = None  # the agent's own idea of the project root, if it says
    prompt: str | None = None
    prompt_id: str | None = None
    prompt_source: str | None = None
    transcript_path: str | None = None
    tool: str | None = None
    tool_kind: str | None = None    # "edit" or "shell": what the recorder does with the tool
    tool_use_id: str | None = None
    command: str | None = None      # shell command
    targets: list[str] = field(default_factory=list)   # edit-tool target paths as given
    failed: bool = False
    source: str | None = None       # session start source / end reason
    agent_id: str | None = None     # a subagent's id
    stop_scope: str = "session"     # stop: the whole turn, or one subagent ("agent")
    # the agent runs one tool call at a time (Codex): a tool call's Pre means the one before
    # it is over, reported or not (a command its policy refused sends no Post event)
    sequential: bool = False
    # a shell command that goes on in the background (its Post event came once it started):
    # the agent's task id; its window stays open until the task ends (hooks/tools.py)
    background: str | None = None
    # a turn's end: the ids of the background tasks still running (None: the agent did not say)
    running_tasks: list[str] | None = None
    # a prompt that is the agent's notice that a background task ended (prompt_source
    # "task-notification"): its task id, tool call id, status and summary
    task: dict | None = None


def obj(value) -> dict:
    """A payload's object field, or {} for anything else."""
    return value if isinstance(value, dict) else {}


def text(value, limit: int | None = None) -> str | None:
    """A payload's string field as rewind stores it: None unless it is a string, NUL bytes
    dropped (SQLite and paths refuse them), cut at `limit`."""
    if not isinstance(value, str):
        return None
    value = value.replace("\0", "")
    return value[:limit] if limit else value
