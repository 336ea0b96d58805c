"""Checkpoints and changes as the JSON contract of docs/design.md (fields are only ever added)."""

from __future__ import annotations

from collections import Counter

from rewind.model import ChangeRow, Checkpoint, GitMove
from rewind.store.tree import DIR, FILE, LARGE, LINK

KIND_NAMES = {FILE: "file", DIR: "dir", LINK: "symlink", LARGE: "file"}


def change_json(c: ChangeRow) -> dict:
    return {
        "path": c.path, "status": c.status, "source": c.source, "tool": c.tool,
        "command": c.command, "flags": list(c.flags), "session_id": c.session_id,
        # a restore's change: who wrote the content it put back, from which checkpoint
        "restored_author": c.restored,
        "old": None if c.old_kind is None else {
            "kind": KIND_NAMES[c.old_kind], "mode": f"{c.old_mode:o}", "digest": c.old_oid or None,
            "size": c.old_size},
        "new": None if c.new_kind is None else {
            "kind": KIND_NAMES[c.new_kind], "mode": f"{c.new_mode:o}", "digest": c.new_oid or None,
            "size": c.new_size},
    }


def summary(changes: list[ChangeRow]) -> dict:
    flags = Counter(f for c in changes for f in c.flags)
    if getattr(changes, "git", None) is not None:
        flags["git"] += 1               # git state moved: a flag of the checkpoint, not a change
    return {"changes": len(changes),
            "sources": dict(Counter(c.source for c in changes)),
            "flags": dict(flags)}


def git_json(move: GitMove | None) -> dict | None:
    """A checkpoint's git move: HEAD and branch at it and after it, and who moved them."""
    if move is None:
        return None
    return {"before": {"head": move.before_head, "branch": move.before_branch},
            "after": {"head": move.after_head, "branch": move.after_branch},
            "source": move.source, "tool": move.tool, "command": move.command, "session_id": move.session_id,
            "text": move.text()}


def checkpoint_json(cp: Checkpoint, changes: list[ChangeRow] | None = None,
                    with_summary: bool = False, project: str | None = None) -> dict:
    out = {
        "id": cp.number, "kind": cp.kind, "created_at": cp.created_at, "agent": cp.agent,
        "session_id": cp.session_id, "prompt": cp.message if cp.kind == "prompt" else None,
        "message": cp.message if cp.kind != "prompt" else None,
        "prompt_id": cp.prompt_id,
        # where the prompt came from when not the person: "task-notification" (the agent's
        # notice that a background task ended, folded under the prompt that started it)
        "prompt_source": cp.prompt_source, "git_head": cp.git_head, "git_branch": cp.git_branch,
        "tree": cp.tree, "restore_target": cp.restore_target,
        # a revert's safety checkpoint: the checkpoints whose changes it took back, newest first
        "reverts": cp.reverts,
        "skipped": {k: cp.stats.get(k, []) for k in ("large", "unreadable", "special", "changing")
                    if cp.stats.get(k)},
        # set when a damaged tree keeps what changed after this checkpoint from being known
        "changes_unknown": cp.stats.get("changes_unknown"),
        # still being completed by the watcher's first scan: no tree yet ("" ), no changes
        "pending": bool(cp.stats.get("pending")),
        # completed by that scan after its prompt: by whom, and the paths changed from outside
        # the agent meanwhile, whose content at the prompt is not known (capture/pending.py)
        "first_scan": cp.stats.get("first_scan"),
    }
    if project is not None:
        out["project"] = project
    if changes is not None:
        out["git"] = git_json(getattr(changes, "git", None))
        if with_summary:
            out["summary"] = summary(changes)
        else:
            out["changes"] = [change_json(c) for c in changes]
    return out
