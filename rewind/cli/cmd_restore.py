"""rewind to / undo: put a checkpoint back, after showing exactly what that overwrites."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from rewind.cli import render
from rewind.model import ChangeRow
from rewind.errors import Refused, RewindError
from rewind.history.restore import RestorePlan
from rewind.history.restore import plan_for_display
from rewind.history.restore import restore
from rewind.history.restore import undo
from rewind.capture.snapshot import changes_under
from rewind.capture.snapshot import working_scan
from rewind.cli import PATHS_REF
from rewind.cli.cmd_list import describe
from rewind.cli.common import IdSpec, complete_id, parse_id, project_for, project_paths, resolve_checkpoint

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
        from rewind.cli.cmd_list import restored_text
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
    from rewind.history.restore import file_mode
    from rewind.store.tree import FILE
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


def _fork(target, dry_run: bool, root: str) -> None:
    from rewind.history.conversation import fork
    new_id, path = fork(target, dry_run=dry_run)
    if dry_run:
        render.out(f"Would write a conversation that ends before checkpoint {target.number}'s prompt: {path}")
        return
    render.out(f"Conversation: a new session {new_id} that ends before checkpoint {target.number}'s prompt "
               f"(the original transcript is untouched).")
    render.out(f"  continue it with:  cd {render.display_path(root)} && claude --resume {new_id}")


def _to_now(project, target, paths, title: str, conversation: str) -> None:
    """`to --yes`: one scan of the tree, the plan shown from it, then applied (the plan is
    not made twice, nor the tree read twice)."""
    def show(plan, current) -> None:
        if not (plan.empty and not plan.skipped):
            _present(project, plan, title, current)
    safety, applied, done = _restore_with_progress(project, target, paths, before_apply=show, skip_if_empty=True)
    if safety is None:
        render.out(f"Nothing to do: the tree already matches checkpoint {target.number}.")
    else:
        _say_rewound(target, safety, done)
        left_alone(applied, "the rewind", f"rewind to {target.number}")
    if conversation:
        _fork(target, False, project.root)


def _present(project, plan: RestorePlan, title: str, current) -> list[str]:
    """The plan, who last changed what it overwrites, and the safety net; returns the paths
    the agent did not write."""
    not_agent = print_plan(project, plan, title, current)
    if not_agent:
        render.out(f"{len(not_agent)} of them were last changed by someone other than the agent "
                   "(you, another session or process).")
    render.out("Everything it overwrites is saved first in a safety checkpoint; `rewind undo` puts it back.")
    return not_agent


def _restore_with_progress(project, target, paths, **kw):
    tick = render.progress("rewind")
    try:
        return restore(project, target, paths, progress=tick, **kw)
    finally:
        if tick is not None:
            tick.close()


def _say_rewound(target, safety, done: int) -> None:
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
    raise RewindError(f"{len(plan.left)} path(s) changed while {what} ran, after its safety checkpoint: "
                      "left as they are, everything else was done",
                      hint=f"`{again}` finishes it (their new content is saved first)")


def to_impl(spec, yes: bool, dry_run: bool, project_dir: Optional[str], conversation: str = "") -> None:
    project = project_for(project_dir)
    try:
        target = resolve_checkpoint(project, spec)
        if conversation == "only":
            _fork(target, dry_run, project.root)
            return
        if conversation:
            from rewind.history.conversation import fork
            fork(target, dry_run=True)       # refuse before touching the tree if it cannot fork
        paths = project_paths(project, PATHS_REF())
        scope = f" (only {', '.join(p or '.' for p in paths)})" if paths else ""
        title = (f"Rewind {project.root} to checkpoint {target.number}{scope}: {target.kind}, "
                 f"{render.age(target.created_at)}: {render.short(describe(target), 60)}")
        if yes and not dry_run:
            _to_now(project, target, paths, title, conversation)
            return
        current = working_scan(project)
        plan = plan_for_display(project, target, paths, current)
        if dry_run:
            print_plan(project, plan, title, current)
            if conversation:
                _fork(target, True, project.root)
            return
        if plan.empty and not plan.skipped:
            render.out(f"Nothing to do: the tree already matches checkpoint {target.number}.")
            if conversation:
                _fork(target, False, project.root)
            return
        not_agent = _present(project, plan, title, current)
        question = (f"Overwrite {len(not_agent)} path(s) not written by the agent, and rewind?"
                    if not_agent else "Rewind?")
        confirm(yes, question)
        safety, applied, done = _restore_with_progress(project, target, paths)
        _say_rewound(target, safety, done)
        left_alone(applied, "the rewind", f"rewind to {target.number}")
        if len(applied.ops) != len(plan.ops):
            render.err("note: the tree changed while you were deciding; the restore followed the "
                       "tree as it was when it started (saved in the safety checkpoint).")
        if conversation:
            _fork(target, False, project.root)
    finally:
        project.close()


def undo_impl(yes: bool, project_dir: Optional[str]) -> None:
    project = project_for(project_dir)
    try:
        row = project.catalog.newest_undoable(project.id)
        if row is None:
            render.out("Nothing to undo: no rewind in this project that is not undone already.")
            return
        _, target_number, safety_number = row
        safety = project.catalog.checkpoint(project.id, safety_number)
        if safety is not None:
            touched = project.catalog.restore_made(project.id, safety_number)[1] or []
            if touched:
                plan = plan_for_display(project, safety, touched)
                print_plan(project, plan, f"Undo the rewind to checkpoint {target_number}: put back "
                                          f"{len(touched)} path(s) from checkpoint {safety_number}")
                confirm(yes, "Undo that rewind?")
        result = undo(project)
        target_number, new_safety, applied, done = result
        if new_safety is None:
            render.out(f"The rewind to checkpoint {target_number} changed nothing; marked undone.")
        else:
            render.out(f"Undid the rewind to checkpoint {target_number}: {done} operation(s). "
                       f"The tree from before the undo is checkpoint {new_safety.number}.")
            left_alone(applied, "the undo", f"rewind to {applied.target.number}")
    finally:
        project.close()


def register(app: typer.Typer) -> None:
    @app.command("to")
    def to_cmd(checkpoint: IdSpec = typer.Argument(..., parser=parse_id, autocompletion=complete_id, metavar="ID",
                                                help="N, last or last~N."),
               yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
               dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and change nothing."),
               project: Optional[str] = typer.Option(None, "--project", help="The project's directory."),
               conversation: bool = typer.Option(False, "--conversation", help="Also fork the Claude Code conversation to just before this checkpoint's prompt."),
               conversation_only: bool = typer.Option(False, "--conversation-only", help="Only fork the conversation; leave the files.")):
        """Make the tree equal to checkpoint ID again (only some paths with `-- PATH...`).
        A safety checkpoint of the current tree is taken first."""
        if conversation and conversation_only:
            from rewind.errors import UsageError
            raise UsageError("--conversation and --conversation-only go alone")
        to_impl(checkpoint, yes, dry_run, project, "only" if conversation_only else ("yes" if conversation else ""))

    @app.command("undo")
    def undo_cmd(yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
                 project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """Revert the newest rewind not yet undone; again walks further back."""
        undo_impl(yes, project)
