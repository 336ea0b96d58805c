"""rewind show: one checkpoint, its prompt and every change after it."""

from __future__ import annotations

from typing import Optional

import typer

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.common import project_for, resolve_checkpoint
from rewind.cli.json_shapes import checkpoint_json
from rewind.cli.list_view import describe, git_line, restored_text
from rewind.cli.options import CheckpointArg, JsonOpt, NoPagerOpt, ProjectOpt
from rewind.cli.pending_view import first_scan_lines, is_pending, pending_lines
from rewind.model import ChangeRow

STATUS_MARK = {"added": "A", "modified": "M", "deleted": "D"}


def author(c: ChangeRow, command_width: int = 50) -> str:
    """Who made a change, as `show` and the picker say it: `tool: Edit`, `bash: sed -i …`,
    `external, while npm run dev ran`, `rewind: …` (commands cut to `command_width`)."""
    if c.source == "tool" and c.tool:
        return f"tool: {render.safe(c.tool)}"
    if c.source == "bash" and c.command:
        return f"bash: {render.short(c.command, command_width)}"
    if c.source in ("external", "unknown") and c.command:
        # a command ran in the background then, and could have made it (attribution.py)
        return f"{c.source}, while {render.short(c.command, command_width - 10)} ran"
    if c.source == "rewind" and c.restored:
        return f"rewind: {restored_text(c.restored)}"
    return c.source


def change_line(c: ChangeRow) -> tuple[str, str, str, str]:
    who = author(c)
    # a path that dropped out of recording is still on disk: not a D
    mark = "U" if "unrecorded" in c.flags else STATUS_MARK[c.status]
    return mark, render.display_path(c.path), who, " ".join(c.flags)


def show(spec, project_dir: Optional[str], as_json: bool) -> None:
    project = project_for(project_dir)
    try:
        cp = resolve_checkpoint(project, spec, wait_s=None)
        pending = pending_lines(project, cp) if is_pending(cp) else None
        changes = [] if pending else changes_under(project, cp)
        nxt = project.catalog.next_after(project.id, cp.number)
        still = [p.number for p in project.catalog.pending(project.id) if p.number > cp.number]
    finally:
        project.close()
    if as_json:
        render.emit_json(checkpoint_json(cp, changes))
        return
    _head(cp)
    if pending:
        for line in pending:
            render.out(line)
        return
    for line in first_scan_lines(cp):
        render.out(line)
    until = f"checkpoint {nxt.number}" if nxt else "now (the working tree)"
    if still and (nxt is None or still[0] < nxt.number):
        # its changes run live to now, across a prompt whose checkpoint is not complete yet
        until = f"{until}, across checkpoint {still[0]} (still being completed)"
    if cp.stats.get("changes_unknown"):
        render.out(f"changes after it, until {until}: unknown, {cp.stats['changes_unknown']} "
                   "(`rewind verify` says more)")
    else:
        render.out(f"changes after it, until {until}: {len(changes)}")
    if getattr(changes, "git", None) is not None:
        render.out(f"git moved: {git_line(changes.git)}")
    unrecorded = [c.path for c in changes if "unrecorded" in c.flags]
    if unrecorded:
        render.out(f"unrecorded: {len(unrecorded)} of them still on disk, no longer recorded (the ignore "
                   "rules changed?); `rewind to` compares them all the same")
    _changes(changes)


def _head(cp) -> None:
    render.out(f"checkpoint {cp.number}  {cp.kind}  {render.local_time(cp.created_at)}  ({render.age(cp.created_at)})")
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


def _changes(changes) -> None:
    if render.fancy() and changes:
        from rich.table import Table
        table = Table(box=None, show_header=False, pad_edge=False)
        styles = {"A": "green", "M": "yellow", "D": "red", "U": "magenta"}
        for mark, path, who, flags in map(change_line, changes):
            table.add_row(mark, path, who, flags, style=styles[mark])
        render.console().print(table)
    else:
        lines = [change_line(c) for c in changes]
        width = min(48, max((len(path) for _, path, _, _ in lines), default=0))
        for mark, path, who, flags in lines:
            render.out(f"  {mark} {path.ljust(width)}  [{who}]{'  ' + flags if flags else ''}")


def register(app: typer.Typer) -> None:
    @app.command("show")
    def show_cmd(checkpoint: CheckpointArg, project: ProjectOpt = None, as_json: JsonOpt = False,
                 no_pager: NoPagerOpt = False):
        """One checkpoint: its prompt and every change after it, with source and flags."""
        with render.paged(no_pager or as_json):
            show(checkpoint, project, as_json)
