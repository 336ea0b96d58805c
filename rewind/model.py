"""Values every layer shares: a checkpoint as the catalog holds it, one change under it, who
made it (`Source`), and the tree as last scanned (`ScanState`).

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

    @classmethod
    def placeholder(cls, path: str, status: str = "modified", **fields) -> ChangeRow:
        """A change no tree entry stands behind (a write outside the trees or to an ignored path,
        a git move, who wrote the content a restore put back): kinds, modes, object ids and
        sizes are None unless given in `fields`."""
        sides = dict.fromkeys(("old_kind", "new_kind", "old_mode", "new_mode", "old_oid", "new_oid",
                               "old_size", "new_size"))
        return cls(path=path, status=status, **{**sides, **fields})


@dataclass(frozen=True)
class ToolWindow:
    """A tool call's window as the catalog holds it: opened by its Pre event, closed by its
    Post event (or the next prompt). `kind` "bash" is a shell command (`command`), "tool" an
    edit tool on one `target` (project-relative) whose Post event stored the hash of what it
    wrote (`post_oid`, "" for no file)."""
    id: int
    agent: str
    session_id: str
    agent_id: str | None
    tool_use_id: str | None
    tool: str | None
    kind: str
    command: str | None
    target: str | None
    opened_ns: int
    closed_ns: int | None
    post_oid: str | None
    failed: int | None


@dataclass(frozen=True)
class Source:
    """Who made a change (attribution.py): `source` is tool | bash | external | unknown |
    rewind, with the tool, the shell command and the session when known, and the flags it
    adds to the change (`ambiguous`: several shell windows could have made it)."""
    source: str
    tool: str | None = None
    command: str | None = None
    session_id: str | None = None
    flags: tuple = ()

    @classmethod
    def rewind(cls) -> "Source":
        """Every change a restore wrote."""
        return cls("rewind")

    def put_on(self, row: "ChangeRow") -> None:
        """Make this the source of `row`, adding the flags it lacks."""
        row.source, row.tool, row.command, row.session_id = self.source, self.tool, self.command, self.session_id
        row.flags = row.flags + [f for f in self.flags if f not in row.flags]


@dataclass(frozen=True)
class ScanState:
    """The tree as last scanned, as the catalog keeps it per project: its tree and when the
    scan ended (`last_scan_ns`) and began (`scan_start_ns`: the base the watcher's events
    build on), how far into the watcher's events it read (`consumed_seq`), its figures
    (`last_stats`, JSON text), and the counts `watch --status` shows."""
    last_tree: str | None = None
    last_scan_ns: int = 0
    scan_start_ns: int = 0
    consumed_seq: int = 0
    last_stats: str | None = None
    full_scans: int = 0
    quick_scans: int = 0
    fallbacks: int = 0
    fallback: str | None = None
    fallback_ns: int | None = None

    def stats(self) -> dict | None:
        """`last_stats` read, None when there are none (or they do not parse)."""
        import json
        try:
            return json.loads(self.last_stats) if self.last_stats else None
        except ValueError:
            return None


try:
    from _collections import _tuplegetter as _named    # namedtuple's own field getter, in C
except ImportError:                                     # pragma: no cover - another Python
    from operator import itemgetter as _itemgetter

    def _named(index: int, doc: str):
        return property(_itemgetter(index), doc=doc)


class StatEntry(tuple):
    """A stat-cache row: a path as the last scan saw it, `StatEntry((kind, size, mtime_ns,
    ctime_ns, ino, mode, oid))`. The scan trusts it only when every field matches the path's
    lstat; size -1 marks one that git's racy rule leaves suspect (read again next time).

    A tuple subclass built from one tuple, read by name: a full scan loads 100,000 of them
    from SQLite, and a dataclass, or a NamedTuple's Python `__new__`, costs a Python call
    per row where this costs a copy."""
    __slots__ = ()
    kind = _named(0, "FILE, LINK or DIR (rewind.store.tree)")
    size = _named(1, "bytes (a link: its target's); -1: suspect, read again")
    mtime_ns = _named(2, "st_mtime_ns (0 for links and directories)")
    ctime_ns = _named(3, "st_ctime_ns (0 for links and directories)")
    ino = _named(4, "st_ino (0 for links and directories)")
    mode = _named(5, "permission bits")
    oid = _named(6, "the object id of its content (a directory: its tree)")

    def __repr__(self) -> str:
        return "StatEntry(kind={!r}, size={!r}, mtime_ns={!r}, ctime_ns={!r}, ino={!r}, mode={!r}, oid={!r})".format(*self)
