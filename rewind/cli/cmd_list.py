"""rewind list / show: the story of a project, a checkpoint at a time."""

from __future__ import annotations

import os

from collections import Counter
from typing import Optional

import typer

from rewind.cli import render
from rewind.model import ChangeRow
from rewind.model import Checkpoint
from rewind.errors import NotInProject
from rewind.project import open_catalog, open_project
from rewind.capture.snapshot import changes_under
from rewind.cli.json_shapes import checkpoint_json
from rewind.cli.common import IdSpec, complete_id, parse_id, project_for, resolve_checkpoint, note_hidden, warn_hook_failures

# what a reader must notice, in the order badges are shown
BADGES = (("bash", "bash", "yellow"), ("external", "external", "magenta"),
          ("symlink", "symlink", "cyan"), ("large", "not restorable", "red"),
          ("outside", "outside", "red"), ("ignored", "ignored", "red"),
          ("hardlink", "hardlink", "blue"), ("git", "git moved", "blue"))
LEGEND = ("tool = the agent's edit tools · bash = its shell commands · external = someone else "
          "(editor, other process) · rewind = a restore · unknown = no hook saw it")


def counts_text(changes: list[ChangeRow]) -> str:
    if not changes:
        return "no changes"
    by = Counter(c.source for c in changes)
    return ", ".join(f"{n} {src}" for src, n in sorted(by.items(), key=lambda kv: -kv[1]))


def badges(changes: list[ChangeRow]) -> list[tuple[str, str]]:
    sources = {c.source for c in changes}
    flags = {f for c in changes for f in c.flags}
    return [(label, style) for key, label, style in BADGES if key in sources or key in flags]


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


def describe(cp: Checkpoint) -> str:
    """The checkpoint's prompt or message, one line safe for a terminal."""
    if cp.kind == "prompt":
        return render.safe(cp.message)
    if cp.kind == "rewind":
        return render.safe(cp.message) or f"before rewind to {cp.restore_target}"
    return render.safe(cp.message) or "(saved by hand)"


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


STATUS_MARK = {"added": "A", "modified": "M", "deleted": "D"}


def restored_text(r: dict) -> str:
    """Who wrote the content a restore put back, in a few words."""
    by = r.get("source")
    if by == "tool" and r.get("tool"):
        by = f"the agent's {render.safe(r['tool'])}"
    elif by == "bash":
        by = f"the agent's bash ({render.short(r.get('command') or '', 30)})" if r.get("command") else "the agent's bash"
    elif by in ("external", "unknown"):
        by = "someone other than the agent" if by == "external" else "unknown"
    elif by is None:
        return f"put back from checkpoint {r.get('checkpoint')}, written before its history"
    return f"put back from checkpoint {r.get('checkpoint')}, written by {by}"


def change_line(c: ChangeRow) -> tuple[str, str, str, str]:
    who = c.source
    if c.source == "tool" and c.tool:
        who = f"tool: {render.safe(c.tool)}"
    elif c.source == "bash" and c.command:
        who = f"bash: {render.short(c.command, 50)}"
    elif c.source == "rewind" and c.restored:
        who = f"rewind: {restored_text(c.restored)}"
    return STATUS_MARK[c.status], render.display_path(c.path), who, " ".join(c.flags)


def show(spec, project_dir: Optional[str], as_json: bool) -> None:
    project = project_for(project_dir)
    try:
        cp = resolve_checkpoint(project, spec)
        changes = changes_under(project, cp)
        nxt = project.catalog.next_after(project.id, cp.number)
    finally:
        project.close()
    if as_json:
        render.emit_json(checkpoint_json(cp, changes))
        return
    render.out(f"checkpoint {cp.number}  {cp.kind}  {cp.created_at}  ({render.age(cp.created_at)})")
    if cp.kind == "prompt":
        render.out(f"prompt:   {render.short(cp.message, 200)}")
        render.out(f"agent:    {render.safe(cp.agent) or '-'}  session {render.safe(cp.session_id) or '-'}")
    else:
        render.out(f"message:  {describe(cp)}")
    if cp.git_head or cp.git_branch:
        render.out(f"git:      {render.safe(cp.git_branch) or '(detached)'} {render.safe(cp.git_head)[:12]}")
    for key, label in (("large", "too large, not stored"), ("unreadable", "unreadable, not stored"),
                       ("special", "special files, skipped"), ("changing", "changing while read, not stored")):
        if cp.stats.get(key):
            render.out(f"skipped:  {len(cp.stats[key])} {label}: "
                       + ", ".join(render.display_path(p) for p in cp.stats[key][:5]))
    until = f"checkpoint {nxt.number}" if nxt else "now (the working tree)"
    if cp.stats.get("changes_unknown"):
        render.out(f"changes after it, until {until}: unknown, {cp.stats['changes_unknown']} "
                   "(`rewind verify` says more)")
    else:
        render.out(f"changes after it, until {until}: {len(changes)}")
    if render.fancy() and changes:
        from rich.table import Table
        table = Table(box=None, show_header=False, pad_edge=False)
        styles = {"A": "green", "M": "yellow", "D": "red"}
        for mark, path, who, flags in map(change_line, changes):
            table.add_row(mark, path, who, flags, style=styles[mark])
        render.console().print(table)
    else:
        for mark, path, who, flags in map(change_line, changes):
            render.out(f"  {mark} {path}  [{who}]{'  ' + flags if flags else ''}")


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory (default: the one containing the current directory)."),
                 all_projects: bool = typer.Option(False, "--all", help="Every project's checkpoints."),
                 as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                 n: int = typer.Option(20, "-n", min=1, help="How many, newest first.")):
        """List checkpoints, newest first, with what happened after each."""
        list_checkpoints(project, all_projects, as_json, n)

    @app.command("show")
    def show_cmd(checkpoint: IdSpec = typer.Argument(..., parser=parse_id, autocompletion=complete_id, metavar="ID",
                                                  help="N, last or last~N."),
                 project: Optional[str] = typer.Option(None, "--project", help="The project's directory."),
                 as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                 no_pager: bool = typer.Option(False, "--no-pager", help="Print directly, not through $PAGER.")):
        """One checkpoint: its prompt and every change after it, with source and flags."""
        with render.paged(no_pager or as_json):
            show(checkpoint, project, as_json)
