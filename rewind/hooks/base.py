"""The agent-neutral event every adapter produces."""

from __future__ import annotations

from rewind.structs import dataclass
from rewind.structs import field


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
