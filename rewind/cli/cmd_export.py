"""rewind export."""

from __future__ import annotations

from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.common import project_for, resolve_checkpoint
from rewind.cli.options import CheckpointArg, JsonOpt, ProjectOpt
from rewind.cli.pending_view import LOOK_WAIT_S


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_cmd(checkpoint: CheckpointArg,
                   branch: Optional[str] = typer.Option(None, "--branch", help="Also create this new branch on it."),
                   project: ProjectOpt = None,
                   as_json: JsonOpt = False):
        """Write checkpoint ID as a git commit under refs/rewind/ID (HEAD, index and branches untouched)."""
        from rewind.history.export import export
        proj = project_for(project)
        try:
            cp = resolve_checkpoint(proj, checkpoint, LOOK_WAIT_S)
            got = export(proj, cp, branch)
        finally:
            proj.close()
        if as_json:
            render.emit_json(got)
            return
        render.out(f"Checkpoint {cp.number} is commit {got['commit'][:12]} at {got['ref']}"
                   + (f" and branch {got['branch']}" if got["branch"] else "") + ".")
        render.out(f"  git show --stat {got['ref']}    git diff HEAD {got['ref']}    git checkout {got['ref']} -- PATH")
        if got["parent_note"]:
            render.err(f"note: {got['parent_note']}: its parent is HEAD's commit instead")
        if got["left_out"]:
            render.err(f"note: {len(got['left_out'])} file(s) too large to be stored are not in it: "
                       + ", ".join(got["left_out"][:5]))
        if got["kept_out"]:
            render.err("note: left out, as `rewind hooks install` keeps them out of git (rewind's hooks"
                       " with this machine's paths): " + ", ".join(got["kept_out"]))
