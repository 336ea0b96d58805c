"""A checkpoint's git move: HEAD or its branch elsewhere after the checkpoint than at it,
and who moved it.

Git state is not a path of the tree (`.git` is never recorded), so a move is shown as git
state, apart from the tree's changes. Who made it comes from the shell windows: each
compares the git state when it opened with the state when it closed (hooks/tools.py), and
a difference is a move, that command's (`git_moves`). A move no window saw is someone
else's (`external`), or a command's still running (live, for the newest checkpoint).

Stored, a checkpoint's move is a change row of `.git/HEAD` flagged `git` (the heads in its
object ids), as rewind has always stored it; `changes.py` takes it out of the rows.
"""

from __future__ import annotations

from rewind.model import ChangeRow, Checkpoint, GitMove, Source
from rewind.project import Project, git_state

GIT_PATH = ".git/HEAD"          # the stored row's path: never a path of the tree


def moved(before: tuple, after: tuple) -> bool:
    """Whether (HEAD, branch) moved; two states without a commit are no move (a `git init`
    shows no history to move)."""
    return before != after and not (before[0] is None and after[0] is None)


def _mark(head: str | None, branch: str | None) -> str:
    return "" if head is None and branch is None else f"{head or ''} {branch or ''}"


def mover(project: Project, since_ns: int, until_ns: int | None, after: tuple) -> Source:
    """Who moved HEAD or branch to `after` between `since_ns` and `until_ns` (None: now):
    the commands whose recorded moves lead there, else a command still running that found
    another state, else outside every window."""
    from rewind.capture.attribution import outside
    want = _mark(*after)
    moves = project.catalog.git_moves(project.id, since_ns, until_ns)
    if moves and moves[-1].after == want:
        chain = [moves[-1]]             # back through the moves that led there, one after another
        for m in reversed(moves[:-1]):
            if m.after != chain[-1].before:
                break
            chain.append(m)
        chain.reverse()
        commands = []
        for m in chain:
            if m.command and m.command not in commands:
                commands.append(m.command)
        sessions = {m.session_id for m in chain}
        last = chain[-1]
        return Source("bash", last.tool, "; ".join(commands) or None,
                      last.session_id if len(sessions) == 1 else None)
    if until_ns is None:
        running = [w for w in project.catalog.open_shell_git(project.id) if w.git_pre != want]
        if running:
            w = running[-1]
            return Source("bash", w.tool, w.command, w.session_id)
    return outside(project)


def git_row(prev: Checkpoint, cp: Checkpoint, source: Source) -> ChangeRow:
    """The stored form of a move between two checkpoints."""
    return ChangeRow.placeholder(GIT_PATH, old_oid=prev.git_head, new_oid=cp.git_head, source=source.source,
                                 tool=source.tool, command=source.command, session_id=source.session_id,
                                 flags=["git"])


def is_git_row(row: ChangeRow) -> bool:
    return row.path == GIT_PATH and "git" in row.flags


def stored(cp: Checkpoint, nxt: Checkpoint, row: ChangeRow | None) -> GitMove | None:
    """The move between `cp` and the next checkpoint, from its stored row."""
    if not moved((cp.git_head, cp.git_branch), (nxt.git_head, nxt.git_branch)):
        return None
    src = row if row is not None else ChangeRow.placeholder(GIT_PATH)
    return GitMove(cp.git_head, cp.git_branch, nxt.git_head, nxt.git_branch, src.source, src.tool, src.command,
                   src.session_id)


def live(project: Project, cp: Checkpoint) -> GitMove | None:
    """The move since the newest checkpoint, now (the last prompt's `git commit` shows at once)."""
    after = git_state(project.root)
    if not moved((cp.git_head, cp.git_branch), after):
        return None
    s = mover(project, cp.created_ns, None, after)
    return GitMove(cp.git_head, cp.git_branch, after[0], after[1], s.source, s.tool, s.command, s.session_id)
