"""rewind list: the story of a project, a checkpoint at a time, newest first."""

from __future__ import annotations

import os
from typing import Optional

import typer

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.common import note_hidden, project_for, warn_hook_failures
from rewind.cli.json_shapes import checkpoint_json
from rewind.cli.list_view import LEGEND, badges, counts_text, describe
from rewind.cli.options import JsonOpt
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


def list_checkpoints(project_dir: Optional[str], all_projects: bool, as_json: bool, n: int) -> None:
    if all_projects:
        _, catalog = open_catalog()
        roots = [root for _, root in catalog.projects()]
        catalog.close()
    else:
        try:
            roots = [project_for(project_dir).root]
        except NotInProject:
            roots = []
    rows = []
    for root in roots:
        project = open_project(root, create=False)
        try:
            for cp in project.catalog.checkpoints(project.id, limit=n):
                rows.append((root, cp, changes_under(project, cp)))
            warn_hook_failures(project)         # on stderr: --json stays clean
            note_hidden(project)
        finally:
            project.close()
    if all_projects:
        rows.sort(key=lambda r: r[1].created_ns, reverse=True)
        rows = rows[:n] if n else rows
    if as_json:
        render.emit_json([checkpoint_json(cp, ch, with_summary=True,
                                          project=root if all_projects else None)
                          for root, cp, ch in rows])
        return
    if not rows:
        render.out("no checkpoints yet. `rewind save` takes one; `rewind hooks install claude` "
                   "takes one at every prompt.")
        if not all_projects:
            moved_hint(roots[0] if roots else os.path.realpath(project_dir or os.getcwd()))
        return
    if render.fancy():
        from rich.table import Table
        from rich.text import Text
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in (["project"] if all_projects else []) + ["id", "age", "kind", "changes after", "", "prompt / message"]:
            table.add_column(col, no_wrap=col in ("id", "age", "kind"))
        for root, cp, ch in rows:
            badge_text = Text()
            for label, style in badges(ch):
                badge_text.append(f" {label} ", style=f"bold {style} reverse")
                badge_text.append(" ")
            cells = ([root] if all_projects else []) + [
                Text(str(cp.number), style="bold"), render.age(cp.created_at), cp.kind,
                counts_text(ch), badge_text, render.short(describe(cp), 70)]
            table.add_row(*cells)
        render.console().print(table)
        render.console().print(Text(LEGEND, style="dim"))
    else:
        for root, cp, ch in rows:
            marks = " ".join(f"[{label}]" for label, _ in badges(ch))
            prefix = f"{root}  " if all_projects else ""
            render.out(f"{prefix}{cp.number:>4}  {render.age(cp.created_at):>8}  {cp.kind:<7} "
                       f"{counts_text(ch):<24} {marks + '  ' if marks else ''}{render.short(describe(cp), 70)}")
        render.out(LEGEND)


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory (default: the one containing the current directory)."),
                 all_projects: bool = typer.Option(False, "--all", help="Every project's checkpoints."),
                 as_json: JsonOpt = False,
                 n: int = typer.Option(20, "-n", min=1, help="How many, newest first.")):
        """List checkpoints, newest first, with what happened after each."""
        list_checkpoints(project, all_projects, as_json, n)
