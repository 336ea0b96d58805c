"""The `rewind` command. main() owns the only error handler.

`rewind hook AGENT` is dispatched before typer and rich are imported: every tool call of
the agent waits for it.
"""

from __future__ import annotations

import sys

def main(argv: list[str] | None = None) -> int:
    from rewind.cli import argv as given
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"] and args[1:2] not in (["--help"], ["-h"]):
        from rewind.hooks.client import main as hook
        return hook(args[1:])
    given.PATHS = None
    if "--" in args:
        i = args.index("--")
        args, given.PATHS = args[:i], args[i + 1:]
    args = _color_first(args)
    code = _run(args)
    if code == 0 and args[:1] not in (["gc"], ["forget"], ["demo"]):
        _gc_if_due()
    if argv is None:
        sys.exit(code)
    return code


def _color_first(args: list[str]) -> list[str]:
    """`--color WHEN` is a global option; it is taken anywhere on the line (`rewind list
    --color never`), and handed to the top level where click looks for it."""
    out, front = [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--color" and i + 1 < len(args):
            front += args[i:i + 2]
            i += 2
            continue
        if a.startswith("--color="):
            front.append(a)
        else:
            out.append(a)
        i += 1
    return front + out


def _gc_if_due() -> None:
    try:
        from rewind.hooks.entry import gc_if_due
        gc_if_due()
    except Exception as e:  # housekeeping never fails a command
        from rewind.log import log
        log("could not start gc", e)


def _run(args: list[str]) -> int:
    import typer
    try:  # typer >= 0.2x carries its own copy of click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer on top of click
        from click import exceptions as click

    from rewind.cli import render
    from rewind.errors import RewindError
    from rewind.log import log
    try:
        import os
        if os.environ.get("_REWIND_COMPLETE"):     # the shell asks for completions
            from typer.completion import completion_init
            completion_init()
        from rewind.cli.app import build
        command = build(args)
        rv = command.main(args=args, prog_name="rewind", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except RewindError as e:
        render.err(f"error: {e.message}" + (f" ({e.hint})" if e.hint else ""))
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        render.err("aborted")
        return 130
    except click.UsageError as e:
        msg = e.format_message().replace("\n", " ")
        render.err(f"error: {msg} (see `rewind --help`)")
        return 2
    except click.ClickException as e:
        render.err(f"error: {e.format_message()}")
        return e.exit_code
    except KeyboardInterrupt:
        render.err("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # the one place a surprise is caught: one line, details in the log
        from rewind.cli.explain import catalog_error, environment_error
        damaged = catalog_error(e)
        if damaged:
            log(f"rewind {' '.join(args)}: {damaged}", e)
            render.err(f"error: {damaged}")
            return 1
        plain = environment_error(e)
        if plain:
            render.err(f"error: {plain}; nothing was half-written (the store keeps only complete objects)")
            return 1
        where = log(f"internal error running rewind {' '.join(args)}", e)
        render.err(f"error: internal error: {type(e).__name__}: {e}"
                   + (f" (details in {where})" if where else ""))
        return 3
