"""rewind revert: take back one prompt's changes (or a range's), keep everything else.

The plan (history/revert.py) says per path what happens: put back, merged with what came
since, moved back (a rename), left as a conflict, or kept (a source not chosen made it).
Then the question, and the restore of the paths it writes (history/restore.py), with its
safety checkpoint; `rewind undo` takes a revert back like any rewind.
"""

from __future__ import annotations

import shlex
from typing import Optional

import typer

from rewind.capture.snapshot import working_scan
from rewind.cli import render
from rewind.cli.argv import paths_after_dashes
from rewind.cli.common import project_for, project_paths, resolve_checkpoint
from rewind.cli.ids import complete_id, parse_id
from rewind.cli.json_shapes import KIND_NAMES
from rewind.cli.list_view import describe
from rewind.cli.options import JsonOpt, ProjectOpt, YesOpt
from rewind.cli.restore_view import confirm, left_alone, not_undone_lines, paths_phrase, view_of
from rewind.errors import UsageError
from rewind.history.restore import restore
from rewind.history.restore_plan import RestorePlan, held_by, plan_restore
from rewind.history.revert import AGENT_SOURCES, SOURCES, WRITES, intervals, plan_revert

_ACTION = {"revert": "put back", "merge": "merge", "markers": "markers", "rename": "rename"}


def parse_range(value: str):
    """`ID` or `ID..ID2` (each N, last or last~N)."""
    first, dots, last = value.partition("..")
    try:
        return parse_id(first), (parse_id(last) if dots else None)
    except typer.BadParameter:
        raise UsageError(f"{value!r} is not a checkpoint id or range (N, last, last~N, or ID..ID2)") from None


def _sources(all_: bool, picked: list[str] | None) -> tuple:
    if all_ and picked:
        raise UsageError("--all and --source go alone (--all is every source)")
    if all_:
        return SOURCES
    if not picked:
        return AGENT_SOURCES
    bad = [s for s in picked if s not in SOURCES]
    if bad:
        raise UsageError(f"unknown source {bad[0]!r}: one of {', '.join(SOURCES)}")
    return tuple(dict.fromkeys(picked))


def _span(numbers: list[int]) -> str:
    return f"{numbers[-1]}..{numbers[0]}" if len(numbers) > 1 else str(numbers[0])


def _checkpoints(numbers: list[int]) -> str:
    return f"checkpoints {_span(numbers)}" if len(numbers) > 1 else f"checkpoint {numbers[0]}"


def _show_command(o) -> str:
    return f"rewind diff {o.checkpoint} -- {shlex.quote(o.path)}"


def revert_json(project, rp, plan: RestorePlan, view, dry_run: bool, only, safety=None) -> dict:
    """The plan (`--dry-run --json`) or what was done (`--json`): the same fields."""
    rows = []
    for o in sorted(rp.outcomes, key=lambda o: (o.path, -o.checkpoint)):
        row = o.change
        rows.append({"path": o.path, "checkpoint": o.checkpoint, "outcome": o.outcome, "source": o.source,
                     "tool": row.tool if row is not None else None,
                     "command": row.command if row is not None else None,
                     "why": o.why, "renamed_from": o.renamed_from,
                     "kind": KIND_NAMES[o.entry.kind] if o.entry is not None else None,
                     "show": _show_command(o) if o.outcome in ("conflict", "markers") else None})
    conflicts = [r for r in rows if r["outcome"] in ("conflict", "markers")]
    return {"dry_run": dry_run, "action": "revert", "project": project.root, "reverts": list(rp.numbers),
            "sources": list(rp.sources), "only": only,
            "count": _writes(rp),
            "written": sorted({r["path"] for r in rows if r["outcome"] in WRITES}),
            "conflicts": conflicts, "paths": rows,
            "skipped": [{"path": p, "why": why} for p, why in plan.skipped],
            "unmet": [{"path": p, "why": why} for p, why in plan.unmet],
            "kept_hooks": list(plan.kept_hooks),
            "will_not_undo": [e.as_json() for e in view.effects] if view is not None else [],
            "safety": safety.number if safety is not None else None,
            "clean": not conflicts}


def _effects(view, numbers) -> None:
    """What the prompts taken back did outside the tree: a revert does not undo it."""
    if view is not None:
        view.effects = [e for e in view.effects if e.checkpoint in set(numbers)]


def _who(outcomes) -> str:
    """Who made what a path's outcomes take back (one per interval), oldest first."""
    from rewind.cli.cmd_show import author
    names = [author(o.change, 40) if o.change is not None else o.source for o in reversed(outcomes)]
    return ", then ".join(dict.fromkeys(names))


def _by_path(outcomes, kinds) -> list[tuple[str, list]]:
    """The outcomes of these kinds, one entry per path (a range has one per interval), by path."""
    grouped: dict[str, list] = {}
    for o in outcomes:
        if o.outcome in kinds:
            grouped.setdefault(o.path, []).append(o)
    return sorted(grouped.items())


def print_revert(rp, plan: RestorePlan, title: str, view, conflicts_mode: str) -> None:
    render.out(render.fit(title))
    for line in revert_lines(rp, plan, view, conflicts_mode):
        render.out(line)


def revert_lines(rp, plan: RestorePlan, view, conflicts_mode: str = "skip") -> list[str]:
    """The plan in words (said by `revert` and by the picker): what it writes and who made
    what it takes back, the conflicts with the command that shows each, what it keeps, what
    it will not undo."""
    lines: list[str] = []
    writes = _by_path(rp.outcomes, WRITES)
    if writes:
        lines.append(f"{paths_phrase(len(writes))} {'changes' if len(writes) == 1 else 'change'}:")
        names = [render.display_path(path) + (f" <- {render.display_path(os_[-1].renamed_from)}"
                                              if os_[-1].renamed_from else "") for path, os_ in writes]
        width = min(48, max(len(n) for n in names))
        for (path, os_), name in zip(writes, names):
            kinds = {o.outcome for o in os_}
            action = next(k for k in ("markers", "merge", "rename", "revert") if k in kinds)
            lines.append(f"  {_ACTION[action]:<8}  {name.ljust(width)}  {os_[-1].why}  [{_who(os_)}]")
    else:
        lines.append("  nothing to take back on the tree as it is now.")
    for path in plan.kept_hooks:
        lines.append(f"  keep      {render.display_path(path)}: rewind's own hook entries stay in it")
    conflicts = [os_[0] for _, os_ in _by_path(rp.outcomes, ("conflict",))]
    if conflicts:
        lines.append(f"{len(conflicts)} not taken back, a conflict (left as it is"
                   + ("" if conflicts_mode == "markers" else "; `--conflicts markers` writes the text ones "
                      "with markers") + "):")
        for o in sorted(conflicts, key=lambda o: o.path):
            lines.append(f"  {render.display_path(o.path)}: {o.why}; `{_show_command(o)}` shows what it "
                       "would take back")
    marked = [os_[0] for _, os_ in _by_path(rp.outcomes, ("markers",))]
    if marked:
        lines.append(f"{len(marked)} written with conflict markers (<<<<<<< now, ||||||| after, ======= before, "
                   ">>>>>>>): " + ", ".join(render.display_path(o.path) for o in marked[:10]))
    kept = [os_[0] for _, os_ in _by_path(rp.outcomes, ("kept",))]
    if kept:
        lines.append(f"{len(kept)} kept, made by a source not taken back:")
        for o in sorted(kept, key=lambda o: o.path)[:50]:
            lines.append(f"  {render.display_path(o.path)}: {o.why}")
    written = {o.path for o in rp.outcomes if o.outcome in WRITES}
    same = [os_[0] for path, os_ in _by_path(rp.outcomes, ("nothing",)) if path not in written]
    if same:
        lines.append(f"{paths_phrase(len(same))} already as {'it was' if len(same) == 1 else 'they were'} "
                   "(or kept for what came since): " + ", ".join(render.display_path(o.path) for o in same[:6])
                   + (" …" if len(same) > 6 else ""))
    for path, why in plan.skipped:
        lines.append(f"  skip  {render.display_path(path)}: {why}")
    if view is not None:
        lines += not_undone_lines(view.effects)
    return lines


def plan_now(project, cps, sources, paths, conflicts):
    current = working_scan(project, held_by(project, cps[-1]))
    rp = plan_revert(project, cps, current, sources, paths, conflicts)
    plan = (plan_restore(project, rp.target(), current, rp.paths, trees=rp.trees) if rp.paths
            else RestorePlan(rp.target()))
    return current, rp, plan


def revert_view(project, plan, current, numbers):
    if plan.empty:
        return None
    view = view_of(project, plan, current)
    _effects(view, numbers)
    return view


def revert_impl(spec: str, yes: bool, dry_run: bool, project_dir: Optional[str], as_json: bool,
                sources: tuple, conflicts: str, words: list[str] | None) -> None:
    first_spec, last_spec = parse_range(spec)
    project = project_for(project_dir)
    try:
        first = resolve_checkpoint(project, first_spec)
        last = resolve_checkpoint(project, last_spec) if last_spec is not None else None
        if last is not None and last.number < first.number:
            first, last = last, first
        cps = intervals(project, first, last)
        given = (words or []) + (paths_after_dashes() or []) or None
        paths = project_paths(project, given)
        numbers = [cp.number for cp in cps]
        what = ("the agent's changes" if sources == AGENT_SOURCES else "every change" if sources == SOURCES
                else "the changes by " + ", ".join(sources))
        scope = f" (only {', '.join(p or '.' for p in paths)})" if paths else ""
        head = (f"checkpoint {first.number}" if last is None or last.number == first.number
                else f"checkpoints {first.number}..{last.number}")
        title = (f"Revert {head}{scope}: take back {what} made after it"
                 + (f" ({render.short(describe(first), 50)})" if last is None else "") + ", on the tree as it is now")
        if yes and not dry_run:
            shown = {}

            def show(plan, current):
                shown["view"] = view = revert_view(project, plan, current, numbers)
                if not as_json:
                    print_revert(plan.revert, plan, title, view, conflicts)
            result = _restore(project, first, paths, lambda cur: plan_revert(project, cps, cur, sources, paths,
                                                                             conflicts),
                              before_apply=show, skip_if_empty=True)
            _done(project, result.plan.revert, result.plan, result.safety, shown.get("view"), as_json, paths)
            return
        current, rp, plan = plan_now(project, cps, sources, paths, conflicts)
        view = revert_view(project, plan, current, numbers)
        if dry_run:
            if as_json:
                render.emit_json(revert_json(project, rp, plan, view, True, paths))
                return
            print_revert(rp, plan, title, view, conflicts)
            again = f"rewind revert {_span(numbers) if last is not None else first.number}" + \
                (" --all" if sources == SOURCES else "".join(f" --source {s}" for s in sources)
                 if sources != AGENT_SOURCES else "") + \
                (" --conflicts markers" if conflicts == "markers" else "") + \
                (" -- " + " ".join(shlex.quote(p) for p in given) if given else "")
            render.out(f"Dry run: nothing changed; `{again}` does it.")
            return
        if as_json:
            raise UsageError("--json goes with --dry-run or --yes (the plan, or what was done, as JSON)")
        print_revert(rp, plan, title, view, conflicts)
        if plan.empty:
            _nothing(rp)
            return
        n_conf = len([o for o in rp.outcomes if o.outcome == "conflict"])
        confirm(yes, f"Take back {paths_phrase(_writes(rp))} of {head}"
                + (f", leaving {n_conf} conflict{'s' if n_conf != 1 else ''} as {'it is' if n_conf == 1 else 'they are'}"
                   if n_conf else "") + "?")
        result = _restore(project, first, paths, lambda cur: plan_revert(project, cps, cur, sources, paths,
                                                                         conflicts))
        if result.plan.count != plan.count or len(result.plan.ops) != len(plan.ops):
            render.err("note: the tree changed while you were deciding; the revert followed the tree as it "
                       "was when it started (saved in the safety checkpoint).")
        _done(project, result.plan.revert, result.plan, result.safety, view, False, paths)
    finally:
        project.close()


def _writes(rp) -> int:
    """How many paths the revert writes (a path in several intervals counts once)."""
    return len({o.path for o in rp.outcomes if o.outcome in WRITES})


def _restore(project, first, paths, revert, **kw):
    tick = render.progress("revert")
    try:
        return restore(project, first, paths, progress=tick, revert=revert, **kw)
    finally:
        if tick is not None:
            tick.close()


def _nothing(rp) -> None:
    if rp.conflicts:
        render.out("Nothing written: every change left to take back is a conflict.")
        raise typer.Exit(1)
    render.out(f"Nothing to take back: the tree holds none of the changes asked for after {_span(rp.numbers)}.")


def _done(project, rp, plan: RestorePlan, safety, view, as_json: bool, paths) -> None:
    if as_json:
        render.emit_json(revert_json(project, rp, plan, view, False, paths, safety))
        if safety is not None:
            left_alone(plan, "the revert", f"rewind revert {_span(rp.numbers)}")
        if rp.conflicts:
            raise typer.Exit(1)
        return
    if safety is None:
        _nothing(rp)
        return
    render.out(render.fit(revert_done_text(rp, safety)))
    left_alone(plan, "the revert", f"rewind revert {_span(rp.numbers)}")
    if rp.conflicts:
        left = [os_[0] for _, os_ in _by_path(rp.conflicts, ("conflict", "markers"))]
        render.out(f"{len(left)} conflict{'s' if len(left) != 1 else ''} "
                   + ("written with markers" if all(o.outcome == "markers" for o in left) else "remain")
                   + ": " + ", ".join(render.display_path(o.path) for o in left[:10]))
        raise typer.Exit(1)


def revert_done_text(rp, safety) -> str:
    """What a revert did, in one line (said by `revert` and by the picker)."""
    if safety is None:
        return f"Nothing to take back after {_checkpoints(rp.numbers)}."
    merged = len({o.path for o in rp.outcomes if o.outcome == "merge"})
    conflicts = len({o.path for o in rp.conflicts})
    return (f"Reverted {_checkpoints(rp.numbers)}: {paths_phrase(_writes(rp))} changed"
            + (f" ({merged} merged with what came since)" if merged else "")
            + (f", {conflicts} left in conflict" if conflicts else "")
            + f". The tree from before is checkpoint {safety.number}; `rewind undo` goes back.")


def reverts_text(cp) -> str | None:
    """`revert of 3` / `revert of 3..5`, from a safety checkpoint's `reverts`."""
    if not cp.reverts:
        return None
    return f"revert of {_span(cp.reverts)}"


def register(app: typer.Typer) -> None:
    @app.command("revert")
    def revert_cmd(checkpoint: str = typer.Argument(..., metavar="ID[..ID2]", autocompletion=complete_id,
                                                    help="The checkpoint whose changes to take back (N, last, "
                                                         "last~N), or a range ID..ID2 (inclusive)."),
                   paths: Optional[list[str]] = typer.Argument(None, metavar="[PATH]...", show_default=False,
                                                               help="Only these paths."),
                   all_: bool = typer.Option(False, "--all", help="Every source: the person's and other "
                                                                  "outside changes too, not only the agent's."),
                   source: Optional[list[str]] = typer.Option(None, "--source", metavar="SOURCE",
                                                              help="Take back the changes of this source only "
                                                                   "(tool, bash, external, unknown, rewind; "
                                                                   "repeatable)."),
                   conflicts: str = typer.Option("skip", "--conflicts", metavar="skip|markers",
                                                 help="skip: leave a conflicting file as it is (default); "
                                                      "markers: write it with diff3 conflict markers."),
                   yes: YesOpt = False,
                   dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and change nothing."),
                   project: ProjectOpt = None,
                   as_json: JsonOpt = False):
        """Take back the changes made after checkpoint ID, keeping everything done since.
        What `rewind show ID` lists, by default the agent's (edit tools and shell commands).
        Later edits to the same files are merged; overlapping ones are left as conflicts.
        A safety checkpoint is taken first; `rewind undo` takes the revert back."""
        if conflicts not in ("skip", "markers"):
            raise UsageError(f"--conflicts is skip or markers, not {conflicts!r}")
        revert_impl(checkpoint, yes, dry_run, project, as_json, _sources(all_, source), conflicts, paths)
