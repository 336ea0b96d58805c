"""rewind to / undo: put a checkpoint back, after showing exactly what that overwrites."""

from __future__ import annotations

from typing import Optional

import typer

from rewind.capture.snapshot import working_scan
from rewind.cli import render
from rewind.cli.argv import paths_after_dashes
from rewind.cli.common import project_for, project_paths, resolve_checkpoint
from rewind.cli.list_view import describe
from rewind.cli.options import CheckpointArg, ProjectOpt, YesOpt
from rewind.cli.options import JsonOpt
from rewind.cli.restore_view import (changed, confirm, forked_text, left_alone, paths_phrase, plan_json, present,
                                     print_plan, resume_command, rewind_scope, say_rewound, view_of)
from rewind.errors import RewindError, UndoUnavailable
from rewind.history.restore import restore, undo
from rewind.history.restore_plan import RestorePlan, held_by, plan_for_display, unmatched


def _fork(target, dry_run: bool, root: str) -> None:
    from rewind.history.conversation import fork
    new_id, path = fork(target, dry_run=dry_run, root=root)
    if dry_run:
        render.out(f"Would write a conversation that ends before checkpoint {target.number}'s prompt: {path}")
        render.out(f"  to continue with:  {resume_command(target, root, new_id, path)}")
        return
    render.out(forked_text(target, new_id, root, path))


def _again(command: str, given: list[str] | None) -> str:
    """The command line that does what a dry run showed."""
    import shlex
    return command + (" -- " + " ".join(shlex.quote(p) for p in given) if given else "")


def _check_paths(project, target, current, paths, given) -> None:
    """`-- PATH` that names nothing in the checkpoint nor in the tree is a mistake, said as one."""
    missing = set(unmatched(project, target, current, paths))
    if missing:
        shown = ", ".join(render.display_path(g) for g, p in zip(given or [], paths or []) if p in missing)
        raise RewindError(f"no such path in checkpoint {target.number} or in the tree: {shown}")


def _to_now(project, target, paths, given, title: str, conversation: str, cross_mounts: bool = False) -> None:
    """`to --yes`: one scan of the tree, the plan shown from it, then applied (the plan is
    not made twice, nor the tree read twice)."""
    def show(plan, current) -> None:
        _check_paths(project, target, current, paths, given)
        if not (plan.empty and not plan.skipped):
            present(project, plan, title, current, view_of(project, plan, current, only=paths))
    result = _restore_with_progress(project, target, paths, before_apply=show, skip_if_empty=True,
                                    cross_mounts=cross_mounts)
    if result.safety is None:
        if result.plan.unmet:      # nothing it could do, and the tree is not the checkpoint's
            left_alone(result.plan, "the rewind", f"rewind to {target.number}")
        render.out(f"Nothing to do: the tree already matches checkpoint {target.number}.")
    else:
        say_rewound(target, result.safety, result.plan)
        left_alone(result.plan, "the rewind", f"rewind to {target.number}")
    if conversation:
        _fork(target, False, project.root)


def _restore_with_progress(project, target, paths, **kw):
    tick = render.progress("rewind")
    try:
        return restore(project, target, paths, progress=tick, **kw)
    finally:
        if tick is not None:
            tick.close()


def to_impl(spec, yes: bool, dry_run: bool, project_dir: Optional[str], conversation: str = "",
            as_json: bool = False, words: list[str] | None = None, cross_mounts: bool = False) -> None:
    project = project_for(project_dir)
    try:
        target = resolve_checkpoint(project, spec)
        if conversation == "only":
            _fork(target, dry_run, project.root)
            return
        if conversation:
            from rewind.history.conversation import fork
            fork(target, dry_run=True, root=project.root)    # refuse before touching the tree if it cannot fork
        given = (words or []) + (paths_after_dashes() or []) or None
        paths = project_paths(project, given)
        scope = f" (only {', '.join(p or '.' for p in paths)})" if paths else ""
        title = (f"Rewind {project.root} to checkpoint {target.number}{scope}: {target.kind}, "
                 f"{render.age(target.created_at)}: {render.short(describe(target), 60)}")
        if yes and not dry_run:
            _to_now(project, target, paths, given, title, conversation, cross_mounts)
            return
        current = working_scan(project, held_by(project, target, paths))
        _check_paths(project, target, current, paths, given)
        plan = plan_for_display(project, target, paths, current, cross_mounts)
        view = view_of(project, plan, current, only=paths)
        if dry_run:
            if as_json:
                render.emit_json(plan_json(project, plan, view, "to", {"only": paths}))
                return
            print_plan(project, plan, title, current, view)
            if conversation:
                _fork(target, True, project.root)
            render.out(f"Dry run: nothing changed; `{_again(f'rewind to {target.number}', given)}` does it.")
            return
        if plan.empty and not plan.skipped:
            render.out(f"Nothing to do: the tree already matches checkpoint {target.number}.")
            if conversation:
                _fork(target, False, project.root)
            return
        not_agent = present(project, plan, title, current, view)
        count = paths_phrase(plan.count)
        question = (f"Rewind {count} to checkpoint {target.number}, overwriting {len(not_agent)} not written "
                    "by the agent?" if not_agent else f"Rewind {count} to checkpoint {target.number}?")
        if plan.empty and plan.unmet:      # only what it must leave: nothing to ask about
            left_alone(plan, "the rewind", f"rewind to {target.number}")
        confirm(yes, question)
        result = _restore_with_progress(project, target, paths, cross_mounts=cross_mounts)
        applied = result.plan
        say_rewound(target, result.safety, applied)
        left_alone(applied, "the rewind", f"rewind to {target.number}")
        if applied.count != plan.count or len(applied.ops) != len(plan.ops):
            render.err("note: the tree changed while you were deciding; the restore followed the "
                       "tree as it was when it started (saved in the safety checkpoint).")
        if conversation:
            _fork(target, False, project.root)
    finally:
        project.close()


def undo_impl(yes: bool, project_dir: Optional[str], dry_run: bool = False, as_json: bool = False,
              cross_mounts: bool = False) -> None:
    project = project_for(project_dir)
    try:
        row = project.catalog.newest_undoable(project.id)
        if row is None:
            if as_json:
                render.emit_json({"dry_run": True, "action": "undo", "project": project.root, "target": None,
                                  "undoes": None, "count": 0, "paths": [], "skipped": [], "kept_hooks": [],
                                  "will_not_undo": []})
                return
            render.out("Nothing to undo: no rewind in this project that is not undone already.")
            return
        target_number, safety_number = row.target, row.safety
        safety = project.catalog.checkpoint(project.id, safety_number)
        if safety is not None:
            touched = project.catalog.restore_made(project.id, safety_number).paths or []
            if touched or dry_run:
                current = working_scan(project, held_by(project, safety, touched or None))
                plan = (plan_for_display(project, safety, touched or None, current, cross_mounts) if touched
                        else RestorePlan(safety))
                view = view_of(project, plan, current, undo=True, rewound_to=_rewound_to(project, safety, target_number))
                if dry_run and as_json:
                    render.emit_json(plan_json(project, plan, view, "undo",
                                               {"undoes": {"rewind_to": target_number, "safety": safety_number}}))
                    return
                title = (f"Undo the {_what(safety, target_number)}: put back what "
                         f"checkpoint {safety_number} holds")
                if dry_run:
                    print_plan(project, plan, title, current, view)
                    render.out("Dry run: nothing changed; `rewind undo` does it.")
                    return
                changed_since = print_plan(project, plan, title, current, view)
                count = paths_phrase(plan.count)
                that = "that revert" if safety.reverts else "that rewind"
                confirm(yes, f"Undo {that} ({count}), overwriting {len(changed_since)} changed since it?"
                        if changed_since else f"Undo {that} ({count})?")
        elif dry_run:
            raise UndoUnavailable(f"the safety checkpoint {safety_number} of that rewind is gone",
                                  hint="it was dropped by retention; `rewind list` shows what is left")
        undone = undo(project, cross_mounts=cross_mounts)
        what = _what(safety, undone.rewound_to) if safety is not None else f"rewind to checkpoint {undone.rewound_to}"
        if undone.safety is None:
            render.out(f"The {what} changed nothing; marked undone.")
        else:
            render.out(render.fit(f"Undid the {what}: "
                                  f"{paths_phrase(changed(undone.plan))} changed. The tree from before the undo "
                                  f"is checkpoint {undone.safety.number}."))
            left_alone(undone.plan, "the undo", f"rewind to {undone.plan.target.number}")
    finally:
        project.close()


def _what(safety, target_number: int) -> str:
    """What an undo takes back, in words: `revert of 3..5`, `rewind of a.py to checkpoint 2`."""
    if safety.reverts:
        from rewind.cli.cmd_revert import reverts_text
        return reverts_text(safety)
    return f"rewind {rewind_scope(safety)}to checkpoint {target_number}"


def _rewound_to(project, safety, target_number: int):
    """The tree the rewind made, for the undo's "changed since" marks: the checkpoint it went
    to, or for a revert the tree it made (kept in the store beside its safety checkpoint;
    None once gc took it)."""
    if not safety.reverts:
        return project.catalog.checkpoint(project.id, target_number)
    import copy
    tree = safety.stats.get("revert_tree")
    if not tree:
        return None
    try:
        project.store.get(tree)
    except RewindError:
        return None
    made = copy.copy(safety)
    made.tree = tree
    return made


def register(app: typer.Typer) -> None:
    @app.command("to")
    def to_cmd(checkpoint: CheckpointArg,
               paths: Optional[list[str]] = typer.Argument(None, metavar="[PATH]...", show_default=False,
                                                           help="Only these paths (after the ID, every word is a path)."),
               yes: YesOpt = False,
               dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and change nothing."),
               project: ProjectOpt = None,
               conversation: bool = typer.Option(False, "--conversation", help="Also fork the agent's conversation (Claude Code, Gemini CLI, Qwen Code, Copilot CLI, OpenCode) to just before this checkpoint's prompt."),
               conversation_only: bool = typer.Option(False, "--conversation-only", help="Only fork the conversation; leave the files."),
               cross_mounts: bool = typer.Option(False, "--cross-mounts", help="Also restore paths on other filesystems mounted inside the project (left alone by default)."),
               as_json: JsonOpt = False):
        """Make the tree equal to checkpoint ID again (only the PATHs given, if any).
        A safety checkpoint of the current tree is taken first. A checkpoint still being
        completed by the watcher's first scan is waited for (REWIND_SETTLE_TIMEOUT seconds, 600)."""
        if conversation and conversation_only:
            from rewind.errors import UsageError
            raise UsageError("--conversation and --conversation-only go alone")
        if as_json and not dry_run:
            from rewind.errors import UsageError
            raise UsageError("--json goes with --dry-run (the plan as JSON)")
        to_impl(checkpoint, yes, dry_run, project, "only" if conversation_only else ("yes" if conversation else ""),
                as_json, paths, cross_mounts)

    @app.command("undo")
    def undo_cmd(yes: YesOpt = False, project: ProjectOpt = None,
                 dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and change nothing."),
                 cross_mounts: bool = typer.Option(False, "--cross-mounts", help="Also put back paths on other filesystems mounted inside the project."),
                 as_json: JsonOpt = False):
        """Revert the newest rewind not yet undone; again walks further back."""
        if as_json and not dry_run:
            from rewind.errors import UsageError
            raise UsageError("--json goes with --dry-run (the plan as JSON)")
        undo_impl(yes, project, dry_run, as_json, cross_mounts)
