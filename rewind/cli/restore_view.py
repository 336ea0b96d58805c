"""What `rewind to` and `rewind undo` show: the plan, who last changed what it overwrites,
the question before anything is written, and what the rewind did or left alone."""

from __future__ import annotations

import sys

import typer

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.list_view import restored_text
from rewind.errors import PathsChangedDuringRestore, Refused
from rewind.history.restore_apply import file_mode
from rewind.history.restore_plan import RestorePlan
from rewind.model import ChangeRow
from rewind.store.tree import FILE

AGENT_SOURCES = ("tool", "bash", "rewind")   # rewind: put there by a restore, from a checkpoint


def latest_changes(project, since: int, paths: set[str], current=None) -> dict[str, ChangeRow]:
    """For each path, its newest recorded change after checkpoint `since` (newest first)."""
    found: dict[str, ChangeRow] = {}
    for cp in project.catalog.checkpoints(project.id):
        if cp.number < since:
            break
        for row in changes_under(project, cp, current):
            if row.path in paths and row.path not in found:
                found[row.path] = row
        if len(found) == len(paths):
            break
    return found


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


def print_plan(project, plan: RestorePlan, title: str, current=None) -> list[str]:
    """Print the plan on stdout; returns the paths overwritten that the agent did not write."""
    render.out(title)
    if plan.empty:
        render.out("  nothing to do: the tree already matches.")
    made = {op.path for op in plan.ops if op.action == "mkdir"}
    shown = [op for op in plan.ops if not (op.action == "chmod" and op.path in made)]
    width = max((len(op.action) for op in shown), default=0)
    for op in shown[:500]:
        render.out(f"  {op.action:<{width}}  {render.display_path(op.path)}")
    if len(shown) > 500:
        render.out(f"  … and {len(shown) - 500} more operations")
    for path, why in plan.skipped:
        render.out(f"  skip  {render.display_path(path)}: {why}")
    for path in plan.kept_hooks:
        render.out(f"  keep  {render.display_path(path)}: rewind's own hook entries stay in it, so the "
                   "recording goes on")
    if current is not None:
        linked = [op.path for op in plan.ops if op.action == "write" and op.path in current.hardlinks]
        if linked:
            render.out(f"  {len(linked)} of them are hard links: each gets a new file, which breaks the link "
                       "(other names of the same file keep what they hold now): "
                       + ", ".join(render.display_path(p) for p in linked[:5]) + (" …" if len(linked) > 5 else ""))
    unsafe = [op.path for op in plan.ops if op.action in ("write", "chmod") and op.entry is not None
              and op.entry.kind == FILE and file_mode(op.entry.mode) != op.entry.mode]
    if unsafe:
        render.out(f"  {len(unsafe)} file(s) come back without their setuid/setgid bit (a restore by root "
                   "cannot give back their owner): " + ", ".join(render.display_path(p) for p in unsafe[:5]))
    over = plan.overwrites()
    not_agent = []
    if over:
        latest = latest_changes(project, plan.target.number, {op.path for op in over}, current)
        render.out(f"It overwrites or removes {len(over)} path(s) changed since checkpoint "
                   f"{plan.target.number}:")
        for op in over[:200]:
            row = latest.get(op.path)
            mark = ""
            source, session = author(row) if row is not None else (None, None)
            other_session = (row is not None and source in ("tool", "bash") and plan.target.session_id
                             and session and session != plan.target.session_id)
            if row is None or source not in AGENT_SOURCES or other_session:
                not_agent.append(op.path)
                mark = "   <- another session" if other_session else "   <- not written by the agent"
            render.out(f"  {render.display_path(op.path)}  last changed by: {who(row)}{mark}")
        if len(over) > 200:
            render.out(f"  … and {len(over) - 200} more")
    return not_agent


def confirm(yes: bool, question: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise Refused("not rewinding without confirmation, and there is no terminal to ask on",
                      hint="pass --yes to go ahead, or --dry-run to only see the plan")
    if not typer.confirm(question, default=False):
        raise Refused("nothing changed")


def present(project, plan: RestorePlan, title: str, current) -> list[str]:
    """The plan, who last changed what it overwrites, and the safety net; returns the paths
    the agent did not write."""
    not_agent = print_plan(project, plan, title, current)
    if not_agent:
        render.out(f"{len(not_agent)} of them were last changed by someone other than the agent "
                   "(you, another session or process).")
    render.out("Everything it overwrites is saved first in a safety checkpoint; `rewind undo` puts it back.")
    return not_agent


def say_rewound(target, safety, done: int) -> None:
    render.out(f"Rewound to checkpoint {target.number}: {done} operation(s). "
               f"The tree from before is checkpoint {safety.number}; `rewind undo` goes back.")


def left_alone(plan: RestorePlan, what: str, again: str) -> None:
    """Paths another process changed after the safety scan: not overwritten (what they hold
    now is in no checkpoint), and the command fails so that no script goes on as if the
    tree were the checkpoint's."""
    if not plan.left:
        return
    for path, why in plan.left[:50]:
        render.err(f"  left as it is: {render.display_path(path)} ({why})")
    if len(plan.left) > 50:
        render.err(f"  … and {len(plan.left) - 50} more")
    raise PathsChangedDuringRestore(f"{len(plan.left)} path(s) changed while {what} ran, after its safety checkpoint: "
                                    "left as they are, everything else was done",
                                    hint=f"`{again}` finishes it (their new content is saved first)")
