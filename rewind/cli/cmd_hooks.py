"""rewind hooks install|uninstall|status AGENT, and the hidden `hook` (run by the agent)."""

from __future__ import annotations

import importlib
from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.options import JsonOpt, ProjectOpt
from rewind.errors import UsageError
from rewind.capture.ignore import GIT_EXCLUDE
from rewind.hooks import ADAPTERS, gitexclude, install as installer


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


def _bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


AGENTS_HELP = "claude, gemini, codex, qwen, copilot, opencode, cline, cursor (generic: see the README)"


def _first_snapshot(root: str) -> str | None:
    """Hooks installed for a project start its watcher, and so its first snapshot, now
    (docs/design.md: at `rewind hooks install` or SessionStart): in a big tree the scan is then
    under way, or done, when the person starts the agent, and the first prompt's shell
    command does not wait for it. Not with the watcher off, nor for a tree a hook would
    refuse as a project (the filesystem's root, a system or home directory, one holding
    rewind's store or inside it). What it says, or None."""
    import os
    if os.environ.get("REWIND_WATCH") == "0":
        return None
    from rewind import config
    settings = config.load_quietly(root)
    if settings is None or not settings.watch:
        return None
    from rewind.background import spawn_watcher
    from rewind.capture.dirty import running
    from rewind.hooks.recorder import not_a_project
    from rewind.project import open_catalog
    home, cat = open_catalog()
    try:
        if not_a_project(root, cat):
            return None
        pid = cat.project_id(root, create=False)
        if pid is not None and running(home, cat, pid) is not None:
            return None                    # it watches already (its first snapshot taken or under way)
        held = cat.count(pid) if pid is not None else 0
    finally:
        cat.close()
    spawn_watcher(root, settings.watch_idle_minutes)
    if held:                               # a snapshot exists: the watcher reads what changed since
        return (f"the watcher of {root} is starting in the background ({held} checkpoint"
                f"{'s' if held != 1 else ''} already; `rewind watch --status`)")
    return f"the first snapshot of {root} is being taken in the background (`rewind watch --status`)"


def register(app: typer.Typer) -> None:
    hooks_app = typer.Typer(help="Install rewind's hooks into an agent's settings.", no_args_is_help=True)

    @hooks_app.command("install")
    def install_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                    scope: Optional[str] = typer.Option(None, "--scope", help="claude: local (default), project or user; gemini, cursor: project (default) or user; codex: user (default) or project."),
                    project: ProjectOpt = None):
        """Merge rewind's hook entries into the agent's settings (idempotent; a backup is kept)."""
        mod = _adapter(agent)
        scope = _scope(mod, scope)
        root = _root(project)
        path = mod.settings_path(scope, root)
        own = mod.own_files(path) if hasattr(mod, "own_files") else [path]   # Cline's: one per event
        befores = [(f, _bytes(installer.through_link(f))) for f in own]
        if hasattr(mod, "install"):        # not a JSON settings file (OpenCode's plugin)
            command = mod.install(path)
        else:
            command = installer.install(path, agent, mod.HOOK_EVENTS, flat=getattr(mod, "FLAT", False),
                                        top=getattr(mod, "TOP", None), make_handler=getattr(mod, "handler", None),
                                        new_top=getattr(mod, "NEW_TOP", None))
        notes = mod.after_install(path, scope) if hasattr(mod, "after_install") else []
        kept_out = gitexclude.keep_out_all(root, befores, agent)
        if kept_out:
            notes.append(kept_out)
        from rewind import locations
        from rewind.fsutil import ensure_private_dir
        from rewind.hooks import reserve
        ensure_private_dir(locations.data_dir())
        reserve.ensure(locations.data_dir())    # the hooks' room for a full disk, made off their path
        render.out(f"Installed rewind's {agent} hooks in {path}")
        render.out(f"  command: {command}")
        for note in notes:
            render.out(f"  {note}")
        render.out("  every prompt now takes a checkpoint; `rewind list` shows them.")
        if scope != "user":                # (hooks for every project name none)
            started = _first_snapshot(root)
            if started:
                render.out(f"  {started}")

    @hooks_app.command("uninstall")
    def uninstall_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                      scope: Optional[str] = typer.Option(None, "--scope", help="As for install."),
                      project: ProjectOpt = None):
        """Take rewind's entries out of the agent's settings, leaving everything else."""
        mod = _adapter(agent)
        scope = _scope(mod, scope)
        root = _root(project)
        path = mod.settings_path(scope, root)
        if hasattr(mod, "uninstall"):
            removed = mod.uninstall(path)
        else:
            removed = installer.uninstall(path, agent, top={**(getattr(mod, "NEW_TOP", None) or {}),
                                                            **(getattr(mod, "TOP", None) or {})})
        if hasattr(mod, "after_uninstall"):
            mod.after_uninstall(path, scope)
        render.out(f"Removed rewind's {agent} hooks from {path}" if removed else f"No rewind hooks in {path}")
        if gitexclude.let_in(root, path, tuple(mod.own_files(path)) if hasattr(mod, "own_files") else ()):
            render.out(f"  {GIT_EXCLUDE} no longer names it")

    @hooks_app.command("status")
    def status_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP),
                   project: ProjectOpt = None,
                   as_json: JsonOpt = False):
        """Where rewind's hooks are installed for AGENT, and whether their command resolves."""
        mod = _adapter(agent)
        rows = []
        for scope in getattr(mod, "SCOPES", ()):
            st = installer.status_of(mod, mod.settings_path(scope, _root(project)), agent)
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
    def hook_cmd(agent: str = typer.Argument(..., help=AGENTS_HELP + ", generic"),
                 event: Optional[str] = typer.Argument(None, help="The event, for agents whose payload does not name it (copilot, cline).")):
        """Run by the agent with its hook payload on stdin. Always exits 0, prints nothing."""
        from rewind.hooks.entry import run_hook
        raise typer.Exit(run_hook([agent] + ([event] if event else [])))
