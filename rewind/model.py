"""Values every layer shares: a checkpoint as the catalog holds it, and one change under it.

Plain records (`rewind.structs`, cheap enough for the hook path); the catalog reads and
writes them, capture and history build and consume them, the CLI renders them.
"""

from __future__ import annotations

from rewind.structs import dataclass, field


@dataclass
class Checkpoint:
    project_id: int
    number: int
    kind: str
    created_at: str
    created_ns: int
    tree: str
    message: str | None = None
    agent: str | None = None
    session_id: str | None = None
    prompt_id: str | None = None
    prompt_source: str | None = None
    transcript_path: str | None = None
    git_head: str | None = None
    git_branch: str | None = None
    restore_target: int | None = None
    stats: dict = field(default_factory=dict)


@dataclass
class ChangeRow:
    path: str
    status: str
    old_kind: str | None
    new_kind: str | None
    old_mode: int | None
    new_mode: int | None
    old_oid: str | None
    new_oid: str | None
    old_size: int | None
    new_size: int | None
    source: str = "unknown"
    tool: str | None = None
    command: str | None = None
    session_id: str | None = None
    flags: list[str] = field(default_factory=list)
    # a restore's change: who wrote the content it put back, and from which checkpoint
    # ({"checkpoint": N, "source": ..., "tool": ..., "command": ..., "session_id": ...})
    restored: dict | None = None
