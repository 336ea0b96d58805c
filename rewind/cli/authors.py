"""Who wrote what since a checkpoint: the authors a restore's plan names for each path it
overwrites (the person's edit, then the agent's, ...) and for the content it puts back,
through a restore to whoever wrote that content first. Text for the plan, records for its
JSON; restore_view.py lays them out."""

from __future__ import annotations

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.list_view import restored_text
from rewind.model import ChangeRow

AGENT_SOURCES = ("tool", "bash", "rewind")   # rewind: put there by a restore, from a checkpoint


def changes_since(project, since: int, current=None) -> list:
    """(checkpoint, its changes) for checkpoint `since` and every later one, newest first."""
    out = []
    for cp in project.catalog.checkpoints(project.id):
        if cp.number < since:
            break
        out.append((cp, changes_under(project, cp, current)))
    return out


def latest_changes(project, since: int, paths: set[str], current=None, changes=None) -> dict[str, ChangeRow]:
    """For each path, its newest recorded change after checkpoint `since` (newest first)."""
    found: dict[str, ChangeRow] = {}
    for cp, rows in (changes if changes is not None else changes_since(project, since, current)):
        for row in rows:
            if row.path in paths and row.path not in found:
                found[row.path] = row
        if len(found) == len(paths):
            break
    return found


def authors_since(project, since: int, paths: set[str], current=None, changes=None) -> dict[str, list[ChangeRow]]:
    """For each path, every recorded change after checkpoint `since`, oldest first: whose
    content a restore to `since` overwrites (the person's edit, then the agent's, ...)."""
    found: dict[str, list[ChangeRow]] = {}
    for cp, rows in (changes if changes is not None else changes_since(project, since, current)):
        for row in rows:
            if row.path in paths:
                found.setdefault(row.path, []).append(row)
    for rows in found.values():
        rows.reverse()
    return found


def who_all(rows: list[ChangeRow] | None) -> str:
    """Who changed a path since the target, oldest first (`last changed by: tool (Write)`, or
    `changed by: external, then tool (Edit)`): each author whose content is overwritten."""
    if not rows:
        return "last changed by: unknown"
    names: list[str] = []
    # a restore's content is its author's: only the last one, if a restore came last, says more
    rows = [r for r in rows[:-1] if r.source != "rewind"] + rows[-1:]
    for row in rows:
        name = who(row)
        if not names or names[-1] != name:
            names.append(name)
    return f"last changed by: {names[0]}" if len(names) == 1 else f"changed by: {', then '.join(names)}"


def author(row: ChangeRow) -> tuple[str | None, str | None]:
    """(source, session) of whoever wrote the content now at the path: for a restore's
    change, the author of the content it put back (when known)."""
    if row.source == "rewind" and row.restored and row.restored.get("source"):
        return row.restored["source"], row.restored.get("session_id")
    return row.source, row.session_id


def who(row: ChangeRow | None) -> str:
    if row is None:
        return "unknown"
    if row.source == "rewind" and row.restored:
        return f"rewind ({restored_text(row.restored)})"
    if row.source == "bash" and row.command:
        return f"bash ({render.short(row.command, 40)})"
    if row.source == "tool" and row.tool:
        return f"tool ({render.safe(row.tool)})"
    return row.source


def wrote(row: ChangeRow | None) -> str:
    """Who wrote the content a change left, through a restore to the one who wrote it first."""
    if row is not None and row.source == "rewind" and row.restored and row.restored.get("source"):
        r = row.restored
        return who(ChangeRow.placeholder(row.path, row.status, source=r["source"], tool=r.get("tool"),
                                         command=r.get("command"), session_id=r.get("session_id")))
    return who(row)


def first_author(row: ChangeRow) -> dict:
    """Who wrote the content a change left (through a restore, the one who wrote it first)."""
    if row.source == "rewind" and row.restored and row.restored.get("source"):
        r = row.restored
        return {"source": r["source"], "tool": r.get("tool"), "command": r.get("command"),
                "session_id": r.get("session_id")}
    return {"source": row.source, "tool": row.tool, "command": row.command, "session_id": row.session_id}
