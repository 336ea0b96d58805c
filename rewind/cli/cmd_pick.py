"""rewind pick (and `rewind` alone on a terminal)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from rewind.cli.common import project_for
from rewind.cli.options import ProjectOpt
from rewind.errors import RewindError


def pick_impl(project_dir: Optional[str]) -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise RewindError("the picker needs a terminal", hint="`rewind list` prints the checkpoints")
    from rewind.cli.picker import pick
    project = project_for(project_dir)
    try:
        pick(project)
    finally:
        project.close()


def register(app: typer.Typer) -> None:
    @app.command("pick")
    def pick_cmd(project: ProjectOpt = None):
        """Choose a checkpoint with the arrow keys: its changes, their diff; restore it, one file, or its conversation."""
        pick_impl(project)
