"""rewind hooks install|uninstall|status AGENT, and the hidden `hook` (run by the agent)."""

from __future__ import annotations

import importlib
from typing import Optional

import typer

from .. import render
from ..errors import UsageError
from ..hooks import ADAPTERS
from ..hooks import install as installer


def _adapter(agent: str):
    if agent not in ADAPTERS:
        raise UsageError(f"unknown agent {agent!r}; known: {', '.join(sorted(ADAPTERS))}")
    return importlib.import_module(ADAPTERS[agent])


def _root(project_dir: Optional[str]) -> str:
    import os
    from ..project import resolve_root
    return resolve_root(project_dir or os.getcwd())


def register(app: typer.Typer) -> None:
    hooks_app = typer.Typer(help="Install rewind's hooks into an agent's settings.", no_args_is_help=True)

    @hooks_app.command("install")
    def install_cmd(agent: str = typer.Argument(..., help="claude"),
                    scope: str = typer.Option("local", "--scope", help="project (.claude/settings.json), local (.claude/settings.local.json) or user (~/.claude/settings.json)."),
                    project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """Merge rewind's hook entries into the agent's settings (idempotent; a backup is kept)."""
        mod = _adapter(agent)
        if scope not in ("project", "local", "user"):
            raise UsageError("--scope must be project, local or user")
        path = mod.settings_path(scope, _root(project))
        command = installer.install(path, agent, mod.HOOK_EVENTS)
        render.out(f"Installed rewind's {agent} hooks in {path}")
        render.out(f"  command: {command}")
        render.out("  every prompt now takes a checkpoint; `rewind list` shows them.")

    @hooks_app.command("uninstall")
    def uninstall_cmd(agent: str = typer.Argument(..., help="claude"),
                      scope: str = typer.Option("local", "--scope", help="project, local or user."),
                      project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """Take rewind's entries out of the agent's settings, leaving everything else."""
        mod = _adapter(agent)
        path = mod.settings_path(scope, _root(project))
        if installer.uninstall(path, agent):
            render.out(f"Removed rewind's {agent} hooks from {path}")
        else:
            render.out(f"No rewind hooks in {path}")

    @hooks_app.command("status")
    def status_cmd(agent: str = typer.Argument(..., help="claude"),
                   project: Optional[str] = typer.Option(None, "--project", help="The project's directory."),
                   as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")):
        """Where rewind's hooks are installed for AGENT, and whether their command resolves."""
        mod = _adapter(agent)
        rows = []
        for scope in ("project", "local", "user"):
            st = installer.status(mod.settings_path(scope, _root(project)), agent)
            st["scope"] = scope
            rows.append(st)
        if as_json:
            render.emit_json(rows)
            return
        for st in rows:
            state = "installed" if st["installed"] else ("error: " + st["error"] if st.get("error") else "not installed")
            render.out(f"{st['scope']:<8} {state:<14} {st['path']}")
            if st["installed"]:
                ok = "resolves" if st["command_resolves"] else "DOES NOT RESOLVE (reinstall)"
                render.out(f"         events: {', '.join(st['events'])}; command {ok}")

    app.add_typer(hooks_app, name="hooks")

    @app.command("hook", hidden=False)
    def hook_cmd(agent: str = typer.Argument(..., help="claude")):
        """Run by the agent with its hook payload on stdin. Always exits 0, prints nothing."""
        from ..hooks.entry import run_hook
        raise typer.Exit(run_hook([agent]))
