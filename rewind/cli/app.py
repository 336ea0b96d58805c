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


# Each command's module, so a run of one imports and builds that one alone (about half the
# start of `rewind list`: benchmarks/cli_start.py); `rewind --help`, no command, a word that is
# no command, and the shell's completion build them all. The order is `rewind --help`'s.
MODULES = {"list": "cmd_list", "show": "cmd_show", "diff": "cmd_diff", "to": "cmd_restore", "undo": "cmd_restore",
           "revert": "cmd_revert", "bisect": "cmd_bisect", "save": "cmd_save", "verify": "cmd_verify",
           "status": "cmd_status", "gc": "cmd_gc", "forget": "cmd_gc", "trash": "cmd_trash", "watch": "cmd_watch",
           "export": "cmd_export", "doctor": "cmd_doctor", "pick": "cmd_pick", "hooks": "cmd_hooks",
           "hook": "cmd_hooks", "demo": "cmd_demo"}


def _command_word(args: list[str]) -> str | None:
    """The command a line names (`rewind --color never list -n 5` names `list`), None when
    it names none before an option that stops the search (`--help`, `--version`)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--color":
            i += 2
            continue
        if a.startswith("-"):
            if a.startswith("--color="):
                i += 1
                continue
            return None
        return a
    return None


def build(args: list[str] | None = None):
    """The click command for `args`: with only the module of the command they name when
    they name one (MODULES), else with every command."""
    import importlib
    word = _command_word(args) if args is not None and not os.environ.get("_REWIND_COMPLETE") else None
    names = [MODULES[word]] if word in MODULES else list(dict.fromkeys(MODULES.values()))
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

    for name in names:
        importlib.import_module(f"rewind.cli.{name}").register(app)
    command = typer.main.get_command(app)
    _tidy_params(command)
    _tidy_help(command)
    return command


# What a value is, in the help: names a reader understands, not types (`<str>`, `<IdSpec>`).
METAVARS = {"project": "DIR", "message": "TEXT", "branch": "NAME", "scope": "SCOPE", "color": "WHEN",
            "n": "N", "idle_minutes": "MINUTES"}
ARGUMENTS = {"checkpoint": "ID", "checkpoint2": "[ID2]", "agent": "AGENT", "paths": "[PATH]..."}
# Commands that take paths after `--` (read before click parses: see rewind.cli.argv)
TAKES_PATHS = {"diff"}     # `to` names its paths as words after the ID
EXAMPLES = {
    "list": ["rewind list", "rewind list --every        the rewinds' safety checkpoints on rows of their own",
             "rewind list -n 5 --json"],
    "show": ["rewind show 3", "rewind show last --json"],
    "diff": ["rewind diff 3              what happened after checkpoint 3",
             "rewind diff 2 5 -- src/    between two checkpoints, under src/ only"],
    "to": ["rewind to 3 --dry-run      what it would change", "rewind to last~1 README.md src/"],
    "undo": ["rewind undo"],
    "save": ['rewind save -m "before the refactor"'],
    "verify": ["rewind verify", "rewind verify --drop-damaged"],
    "status": ["rewind status", "rewind status --all --json"],
    "gc": ["rewind gc --dry-run"],
    "forget": ["rewind forget --project ~/old-project"],
    "watch": ["rewind watch --status", "rewind watch --stop"],
    "export": ["rewind export 3 --branch before-agent"],
    "doctor": ["rewind doctor"],
    "pick": ["rewind pick"],
    "hook": ["rewind hook claude < payload.json   (the agent runs this, with its hook payload)"],
    "demo": ["rewind demo"],
    "install": ["rewind hooks install claude", "rewind hooks install gemini --scope user"],
    "uninstall": ["rewind hooks uninstall claude"],
    "status@hooks": ["rewind hooks status claude --json"],
}


def _tidy_help(group, parent: str = "") -> None:
    """Clean metavars (`ID`, `DIR`, `PATH`), `-- PATH...` in the usage of the commands that
    take it, and one or two examples under each command's help. Typer renders an argument
    as `{ID}` and `ID <IdSpec>`, an option as `--project <str>` and a range as `[x>=1]`."""
    import types
    for name, cmd in getattr(group, "commands", {}).items():
        _tidy_help(cmd, name)
        _tidy_params(cmd)
        if name in TAKES_PATHS:
            original = cmd.collect_usage_pieces
            cmd.collect_usage_pieces = types.MethodType(
                lambda self, ctx, original=original: original(ctx) + ["[-- PATH...]"], cmd)
        if cmd.help and not cmd.short_help:
            cmd.short_help = _first_sentence(cmd.help)
        examples = EXAMPLES.get(f"{name}@{parent}") or EXAMPLES.get(name)
        if examples and not getattr(cmd, "commands", None):
            cmd.epilog = "Examples:\n\n\b\n" + "\n".join(f"  {e}" for e in examples)
        if name == "list" and not parent:        # the listing shows it once per terminal session
            from rewind.cli.list_view import LEGEND
            cmd.epilog = (cmd.epilog or "") + "\n\nWho changed it:\n\n\b\n" + "\n".join(
                f"  {entry}" for entry in LEGEND.split(" · "))


def _first_sentence(text: str) -> str:
    """A command's summary in `rewind --help`: its help's first sentence whole (the help
    formatter wraps it), where click would cut it at 45 characters or the terminal's width
    with "..."."""
    import re
    para = " ".join(text.strip().split("\n\n")[0].split())
    m = re.search(r"(?<=[.!?])\s", para)
    return para[:m.start()] if m else para


def _tidy_params(cmd) -> None:
    import types
    for param in cmd.params:
        if param.param_type_name == "argument":
            shown = ARGUMENTS.get(param.name, param.name.upper())
            param.metavar = shown
            param.get_usage_pieces = types.MethodType(lambda self, ctx, shown=shown: [shown], param)
            param.display_type_rich = types.MethodType(lambda self, ctx: None, param)
            param._rich_display_name = types.MethodType(lambda self, shown=shown: shown, param)
        elif param.name in METAVARS and not getattr(param, "is_flag", False):
            param.metavar = METAVARS[param.name]
            if hasattr(param, "_get_number_range_help_str"):            # typer >= 0.29
                param._get_number_range_help_str = types.MethodType(lambda self: None, param)
            if hasattr(getattr(param, "type", None), "_describe_range"):  # typer < 0.29, click
                param.type._describe_range = types.MethodType(lambda self: "", param.type)
