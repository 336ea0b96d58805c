"""rewind list: the story of a project, a checkpoint at a time, newest first."""

from __future__ import annotations

import os
from typing import Optional

import typer

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.common import no_checkpoints_yet, note_hidden, project_for, warn_hook_failures
from rewind.cli.json_shapes import checkpoint_json
from rewind.cli.list_table import Row, legend_due, plain_lines, print_legend, print_table
from rewind.cli.list_view import fold_line, fold_targets
from rewind.cli.options import JsonOpt
from rewind.cli.pending_view import is_pending, with_pending
from rewind.errors import NotInProject
from rewind.project import open_catalog, open_project


def moved_hint(root: str) -> None:
    """A project moved elsewhere keeps its history under its old path: say where."""
    _, catalog = open_catalog()
    try:
        gone = [(r, catalog.count(pid)) for pid, r in catalog.projects()
                if r != root and not os.path.isdir(r) and catalog.count(pid)]
    finally:
        catalog.close()
    same = [g for g in gone if os.path.basename(g[0]) == os.path.basename(root)] or gone[:3]
    for old, n in same:
        render.out(f"note: {n} checkpoint(s) of {render.display_path(old)}, a directory that is gone: if this "
                   f"project was moved from there, `rewind list --project {render.display_path(old)}` shows them")


def _rows(project, n: int, every: bool, as_json: bool) -> tuple[list[Row], list[int]]:
    """The project's rows, newest first: the `n` newest checkpoints (JSON and --every), or
    the `n` newest that are not folded, each with the line naming the rewinds folded under
    it. Also the ids of folded rewinds whose checkpoint is not among the rows."""
    cps = project.catalog.checkpoints(project.id)
    undos = project.catalog.undo_safeties(project.id)
    under = fold_targets(cps, undos)
    cps = with_pending(project, cps)       # a pending one is a row like any (its changes not known yet)
    if as_json or every:
        return [Row(cp, _changes(project, cp), project.root, folded_under=under.get(cp.number))
                for cp in cps[:n]], []
    shown = [cp for cp in cps if cp.number not in under][:n]
    folded: dict[int, list] = {cp.number: [] for cp in shown}
    elsewhere = []
    for cp in cps:
        if cp.number in under:
            if under[cp.number] in folded:
                folded[under[cp.number]].append((cp, changes_under(project, cp)))
            else:
                elsewhere.append(cp.number)
    return [Row(cp, _changes(project, cp), project.root,
                fold=fold_line(cp.number, folded[cp.number], undos) if folded[cp.number] else None)
            for cp in shown], elsewhere


def _changes(project, cp) -> list:
    return [] if is_pending(cp) else changes_under(project, cp)


def list_checkpoints(project_dir: Optional[str], all_projects: bool, as_json: bool, n: int,
                     every: bool = False) -> None:
    if all_projects:
        _, catalog = open_catalog()
        roots = [root for _, root in catalog.projects()]
        catalog.close()
    else:
        try:
            roots = [project_for(project_dir).root]
        except NotInProject:
            roots = []
    rows: list[Row] = []
    elsewhere: list[int] = []
    for root in roots:
        project = open_project(root, create=False)
        try:
            found, away = _rows(project, n, every, as_json)
            rows += found
            elsewhere += away
            warn_hook_failures(project)         # on stderr: --json stays clean
            note_hidden(project)
        finally:
            project.close()
    if all_projects:
        rows.sort(key=lambda r: r.cp.created_ns, reverse=True)
        rows = rows[:n] if n else rows
    if as_json:
        render.emit_json([{**checkpoint_json(r.cp, r.changes, with_summary=True,
                                             project=r.project if all_projects else None),
                           "folded_under": r.folded_under} for r in rows])
        return
    if not rows:
        if all_projects:
            render.out("no checkpoints yet. `rewind save` takes one; `rewind hooks install claude` "
                       "takes one at every prompt.")
            return
        root = roots[0] if roots else os.path.realpath(project_dir or os.getcwd())
        render.out(no_checkpoints_yet(root))
        moved_hint(root)
        return
    if render.fancy():
        print_table(rows, all_projects)
    else:
        for line in plain_lines(rows, all_projects):
            render.out(line)
    if elsewhere and not all_projects:
        render.out(f"and {len(elsewhere)} rewind(s) to older checkpoints: "
                   f"{', '.join(map(str, sorted(elsewhere)))} (`rewind list --every` lists each)")
    if legend_due():
        print_legend()


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory (default: the one containing the current directory)."),
                 all_projects: bool = typer.Option(False, "--all", help="Every project's checkpoints."),
                 as_json: JsonOpt = False,
                 n: int = typer.Option(20, "-n", min=1, help="How many, newest first (rewinds folded under a checkpoint do not count)."),
                 every: bool = typer.Option(False, "--every", help="Every checkpoint as a row of its own, the rewinds' safety checkpoints too (folded under the checkpoint they went back to otherwise).")):
        """List checkpoints, newest first, with what happened after each. The safety
        checkpoint a rewind (`to`, `undo`) takes is folded under the checkpoint it went back
        to, so the prompts stay in front; `--every` shows each on its own row."""
        list_checkpoints(project, all_projects, as_json, n, every)
