"""Values every layer shares: a checkpoint as the catalog holds it, one change under it, who
made it (`Source`), the tree as last scanned (`ScanState`), and the other rows the catalog
returns and the stages above read by name (`WatcherRow`, `WatchEvent`, ...).

Plain records (`rewind.structs`, cheap enough for the hook path); the catalog reads and
writes them, capture and history build and consume them, the CLI renders them.
"""

from __future__ import annotations

from rewind.structs import dataclass, field, record
from rewind.structs import named_field as _named


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
    folds_under: int | None = None      # a task notification's: the prompt that started the task
    reverts: list | None = None         # a revert's safety checkpoint: the checkpoints it took back
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


@dataclass
class GitMove:
    """HEAD or its branch elsewhere after a checkpoint than at it (at the next checkpoint, or
    now for the newest): git state, never a changed path of the tree. `before_*` is the
    checkpoint's, `after_*` the next one's; who moved it as a change's source is given
    (`bash` with the commands, `external`, `unknown`)."""
    before_head: str | None
    before_branch: str | None
    after_head: str | None
    after_branch: str | None
    source: str = "unknown"
    tool: str | None = None
    command: str | None = None
    session_id: str | None = None

    def text(self) -> str:
        """The move in a few words: `branch main -> feature (HEAD 2c8cd3ac)`, `HEAD 2c8cd3ac ->
        9f1e0b7a (on main)`, or both when both moved."""
        def short(h):
            return (h or "none")[:8]
        branch_moved = self.before_branch != self.after_branch
        head_moved = self.before_head != self.after_head
        if branch_moved and not head_moved:
            return f"branch {self.before_branch or '(detached)'} -> {self.after_branch or '(detached)'} " \
                   f"(HEAD {short(self.after_head)})"
        if head_moved and not branch_moved:
            on = f"on {self.after_branch}" if self.after_branch else "detached"
            return f"HEAD {short(self.before_head)} -> {short(self.after_head)} ({on})"
        return (f"branch {self.before_branch or '(detached)'} -> {self.after_branch or '(detached)'}, "
                f"HEAD {short(self.before_head)} -> {short(self.after_head)}")


class Changes(list):
    """The changes under a checkpoint (`ChangeRow`s, newest tree's paths), and its git move
    (`git`: a `GitMove`, None when HEAD and branch stayed), which is not one of them."""

    def __init__(self, rows=(), git: GitMove | None = None):
        super().__init__(rows)
        self.git = git


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
    task: str | None = None          # a shell command gone on in the background: the agent's task id
    bg_ns: int | None = None         # since when (its Post event)
    bg_pids: str | None = None       # the processes it left running (capture/bgtree.py)
    bg_sig: str | None = None        # their activity signature at the last scan


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


# Rows the catalog returns and the others read by name: `record` types (structs.py), which
# cost a hook a tenth of what collections.namedtuple's do, and the catalog builds with
# `_make` straight from the cursor (one per watcher event: thousands at a prompt).

WatcherRow = record("WatcherRow", "project_id pid started_ns ready_ns heartbeat_ns dirs events overflow_ns "
                                  "limit_hit background stopped_ns stop_reason baseline_ns", """\
The project's watcher (catalog/watch.py): its pid, when it started, was ready (its watches
in and its first scan begun: None while it starts) and last beat; how many directories it
watches and events it wrote; when its queue last overflowed; whether it hit the inotify
watch limit; whether it runs in the background; when and why it stopped (None: it has not
said); when its first scan began (`baseline_ns`, None once it is in).""")

ShellWindow = record("ShellWindow", "id agent_pid pid_mark hook_pids bg_pids", """\
A shell window as the watcher's pid account takes it (capture/procs.py): its id, the
agent's pid, the highest pid when the command started, the opening hook's pids ("PID,PID"),
and once its command went on in the background, the processes it left running
("PID@START,...", "" when none could be named; None while it runs in the foreground).""",
                     defaults=(None,))

CheckpointAge = record("CheckpointAge", "number created_ns kind restore_target hidden_ns by_agent hidden_why", """\
A checkpoint as retention weighs it (retention.py; the catalog's are newest first): hidden
ones too (`hidden_ns`, `hidden_why`: since when, and why); `by_agent`: a save run from an
agent's tool (cli/cmd_save.py).""", defaults=(None, False, None))

RestoreRow = record("RestoreRow", "id target safety paths", """\
A rewind as the catalog records it: the checkpoint it restored (`target`), its safety
checkpoint, the paths its plan touched (None: not recorded).""")

WatchEvent = record("WatchEvent", "path kind ts writer", """\
One of the watcher's events: a path changed ("m"), created or moved in ("c"), or an anchor
(capture/dirty.py), at `ts` (wall ns); `writer`: the shell windows that could have made it
("w:ID,ID"), None for none.""")

SeqEvent = record("SeqEvent", "seq path kind ts writer", """\
A `WatchEvent` with its place in the watcher's stream (`seq`).""")

PathEvent = record("PathEvent", "kind ts writer", """\
A path's event as a scan's attribution reads it (path -> PathEvent): "c" once any of its
events was, and the time and writer of the latest.""")

BackgroundWindow = record("BackgroundWindow", "id agent session_id tool_use_id tool command task bg_ns bg_pids bg_sig", """\
An open shell window whose command went on in the background (hooks/tools.py): the agent's
task id, since when, the processes it left running ("PID@START,...") and their activity
signature at the last scan (capture/bgtree.py `tree_signature`).""")

ShellGit = record("ShellGit", "id git_pre tool command session_id", """\
A shell window's git state when it opened (`git_pre`, project.git_mark), with its command:
what its close compares to find a move of HEAD or branch (hooks/tools.py).""")

GitMoveRow = record("GitMoveRow", "ts before after source tool command session_id", """\
A move of HEAD or branch as the catalog holds it: when it was found, the git states before
and after (project.git_mark), and who made it (a shell command's window).""")

SessionProject = record("SessionProject", "project_id first_cwd", """\
The project an agent's session belongs to, known from its first event, and the cwd of that
event.""")

HiddenCheckpoint = record("HiddenCheckpoint", "number hidden_ns hidden_why", """\
A checkpoint retention took out of the listings but not yet out of the store: since when,
and why.""")

CheckpointTree = record("CheckpointTree", "project_id number tree", """\
A checkpoint's tree, as what keeps objects alive (catalog `roots`, history/gc.py).""")

PendingEdit = record("PendingEdit", "path kind mode oid size tool session_id ts", """\
What an edit tool found at its target before it wrote, while a checkpoint was pending
(capture/pending.py): the entry's kind ("-": no file, "?": not known; "!": a shell command
ran, `tool` its command), mode, object id and size, by whom, when.""")


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
