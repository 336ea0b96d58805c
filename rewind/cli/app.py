"""The typer application: global options and the command registry."""

from __future__ import annotations

import os
from typing import Optional

import typer

from rewind import __version__
from rewind.cli import render


def _version(value: bool):
    if value:
        render.out(f"rewind {__version__}")
        raise typer.Exit()


def build():
    app = typer.Typer(
        name="rewind", add_completion=False, no_args_is_help=False, invoke_without_command=True,
        pretty_exceptions_enable=False, rich_markup_mode=None,
        help="An undo point for every prompt of a coding-agent session.",
        context_settings={"help_option_names": ["-h", "--help"]})

    @app.callback()
    def _root(ctx: typer.Context,
              color: str = typer.Option("auto", "--color", help="auto, always or never (NO_COLOR is honoured)."),
              version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                     help="Print the version.")):
        if color not in ("auto", "always", "never"):
            raise typer.BadParameter("must be auto, always or never", param_hint="--color")
        render.COLOR = color
        if ctx.invoked_subcommand is None:
            import sys
            if sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("REWIND_NO_PICKER"):
                from rewind.cli.cmd_pick import pick_impl
                pick_impl(None)
                return
            from rewind.cli.cmd_list import list_checkpoints
            list_checkpoints(None, False, False, 20)

    from rewind.cli import (cmd_demo, cmd_diff, cmd_doctor, cmd_export, cmd_gc, cmd_hooks, cmd_list, cmd_pick,
                            cmd_restore, cmd_save, cmd_show, cmd_status, cmd_verify, cmd_watch)
    # the order of `rewind --help`
    for module in (cmd_list, cmd_show, cmd_diff, cmd_restore, cmd_save, cmd_verify, cmd_status, cmd_gc, cmd_watch,
                   cmd_export, cmd_doctor, cmd_pick, cmd_hooks, cmd_demo):
        module.register(app)
    return typer.main.get_command(app)
