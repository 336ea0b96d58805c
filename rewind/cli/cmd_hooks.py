"""rewind hooks install|uninstall|status AGENT, and the hidden `hook` (run by the agent)."""

from __future__ import annotations

import importlib
from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.options import JsonOpt, ProjectOpt
from rewind.errors import UsageError
from rewind.hooks import ADAPTERS, install as installer


def _adapter(agent: str):
    if agent not in ADAPTERS:
        raise UsageError(f"unknown agent {agent!r}; known: {', '.join(sorted(ADAPTERS))}")
    return importlib.import_module(ADAPTERS[agent])


def _root(project_dir: Optional[str]) -> str:
    import os
    from rewind.project import resolve_root
    return resolve_root(project_dir or os.getcwd())


def _scope(mod, scope: Optional[str]) -> str:
    scopes = getattr(mod, "SCOPES", ())
    if not scopes:
        raise UsageError(f"nothing to install for {mod.AGENT}: its own configuration runs `rewind hook {mod.AGENT}`")
    scope = scope or scopes[0]
    if scope not in scopes:
        raise UsageError(f"--scope for {mod.AGENT} is one of {', '.join(scopes)}")
    return scope


AGENTS_HELP = "claude, gemini, codex, cursor (generic: see the README)"


def register(app: typer.Typer) -> None:
    hooks_app = typer.Typer(help="Install rewind's hooks into an agent's settings.", no_args_is_help=True)

    @hooks_app.command("install")
    def install_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                    scope: Optional[str] = typer.Option(None, "--scope", help="claude: local (default), project or user; gemini, cursor: project (default) or user; codex: user (default) or project."),
                    project: ProjectOpt = None):
        """Merge rewind's hook entries into the agent's settings (idempotent; a backup is kept)."""
        mod = _adapter(agent)
        scope = _scope(mod, scope)
        path = mod.settings_path(scope, _root(project))
        command = installer.install(path, agent, mod.HOOK_EVENTS, flat=getattr(mod, "FLAT", False),
                                    top=getattr(mod, "TOP", None))
        notes = mod.after_install(path, scope) if hasattr(mod, "after_install") else []
        render.out(f"Installed rewind's {agent} hooks in {path}")
        render.out(f"  command: {command}")
        for note in notes:
            render.out(f"  {note}")
        render.out("  every prompt now takes a checkpoint; `rewind list` shows them.")

    @hooks_app.command("uninstall")
    def uninstall_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                      scope: Optional[str] = typer.Option(None, "--scope", help="As for install."),
                      project: ProjectOpt = None):
        """Take rewind's entries out of the agent's settings, leaving everything else."""
        mod = _adapter(agent)
        scope = _scope(mod, scope)
        path = mod.settings_path(scope, _root(project))
        removed = installer.uninstall(path, agent)
        if hasattr(mod, "after_uninstall"):
            mod.after_uninstall(path, scope)
        render.out(f"Removed rewind's {agent} hooks from {path}" if removed else f"No rewind hooks in {path}")

    @hooks_app.command("status")
    def status_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                   project: ProjectOpt = None,
                   as_json: JsonOpt = False):
        """Where rewind's hooks are installed for AGENT, and whether their command resolves."""
        mod = _adapter(agent)
        rows = []
        for scope in getattr(mod, "SCOPES", ()):
            st = installer.status(mod.settings_path(scope, _root(project)), agent)
            st["scope"] = scope
            rows.append(st)
        if as_json:
            render.emit_json(rows)
            return
        if not rows:
            render.out(f"{agent}: nothing to install; the agent's own configuration runs `rewind hook {agent}`")
        for st in rows:
            state = "installed" if st["installed"] else ("error: " + st["error"] if st.get("error") else "not installed")
            render.out(f"{st['scope']:<8} {state:<14} {st['path']}")
            if st["installed"]:
                ok = "resolves" if st["command_resolves"] else "DOES NOT RESOLVE (reinstall)"
                render.out(f"         events: {', '.join(st['events'])}; command {ok}")

    app.add_typer(hooks_app, name="hooks")

    @app.command("hook", hidden=False)
    def hook_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP + ", generic")):
        """Run by the agent with its hook payload on stdin. Always exits 0, prints nothing."""
        from rewind.hooks.entry import run_hook
        raise typer.Exit(run_hook([agent]))
