"""rewind watch."""

from __future__ import annotations

import time
from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.common import project_for
from rewind.cli.options import ProjectOpt


def watcher_view(project) -> dict:
    """The watcher's state and the scans the hooks made, for `watch --status` and `status`."""
    from rewind.capture.dirty import healthy, running
    row = project.catalog.watcher(project.id)
    live = running(project.home, project.catalog, project.id)
    st = project.catalog.scan_state(project.id)
    out = {"running": live is not None, "pid": live.pid if live else None,
           "since": _iso(live.started_ns) if live else None,
           "directories": live.dirs if live else 0, "events": live.events if live else 0,
           "background": bool(live.background) if live else None,
           "problem": healthy(live) if live else None,
           "stopped": ({"at": _iso(row.stopped_ns), "reason": row.stop_reason}
                       if row and row.stopped_ns else None),
           "died": bool(row and not row.stopped_ns and live is None),
           "quick_scans": st.quick_scans or 0, "full_scans": st.full_scans or 0,
           "fallbacks": st.fallbacks or 0,
           "last_fallback": ({"reason": st.fallback, "at": _iso(st.fallback_ns)}
                             if st.fallback else None)}
    from rewind.capture.pending import first_scan_running
    since = project.catalog.baseline_since(project.id)
    out["first_scan_since"] = _iso(since) if since and first_scan_running(project) else None
    out["pending"] = [cp.number for cp in project.catalog.pending(project.id)]
    hooks = project.catalog.hook_counts(project.id)
    out["hooks_served"], out["hooks_standalone"] = hooks["served"], hooks["standalone"]
    from rewind.watch.envserver import servers
    # servers of other environments' hooks (envserver.py): their environment's key and pid
    out["env_servers"] = servers(project.home, project.id)
    out["last_hook_fallback"] = ({"reason": hooks["fallback"], "at": _iso(hooks["fallback_ns"])}
                                 if hooks["fallback"] else None)
    # the hooks that ran on their own in a row, none served since the first: why, and the fix
    out["hooks_standalone_streak"] = ({"calls": hooks["streak"], "since": _iso(hooks["streak_ns"]),
                                       "reason": hooks["fallback"], "fix": streak_fix(hooks["fallback"])}
                                      if hooks["streak"] else None)
    return out


def streak_fix(reason: str | None) -> str | None:
    """What ends a streak of hooks that ran on their own, by the last one's reason (None: it
    is as it should be)."""
    if not reason or reason in ("watcher off", "first-scan"):
        return None     # turned off on purpose; a shell command waiting for the first scan in its own process
    if reason.startswith("env "):
        name = reason[4:]
        return (f"the watcher was started with another {name} than the agent's hooks run with: "
                "`rewind watch --stop`, and the agent's next session starts one with its own")
    if reason in ("no watcher", "no answer"):
        return "no watcher answers: `rewind watch` starts one (the agent's next session does too)"
    if reason == "stopping":
        return "the watcher was on its way out: the next session starts another"
    return "see `rewind doctor`"


def _iso(ns: int | None) -> str | None:
    from rewind.clock import iso
    return iso(ns) if ns else None


def print_watcher(view: dict) -> None:
    if view["running"]:
        state = f"running (pid {view['pid']}, since {render.age(view['since'])}, " \
                f"{view['directories']:,} directories watched, {view['events']:,} events)"
        if view["problem"]:
            state += f"; not trusted: {view['problem']}"
    elif view["died"]:
        state = "not running: it died without stopping (the next prompt starts it again)"
    elif view["stopped"]:
        reason = view["stopped"]["reason"]
        state = f"not running (stopped {render.age(view['stopped']['at'])}" + \
            (")" if reason == "stopped" else f": {reason})")
    else:
        state = "not running (`rewind watch` starts it; agent sessions start it by themselves)"
    render.out(f"watcher:     {state}")
    if view["first_scan_since"] or view["pending"]:
        first = f"running since {render.age(view['first_scan_since'])}" if view["first_scan_since"] \
            else "not running (the next hook or `rewind to` completes what is pending)"
        if view["pending"]:
            n = len(view["pending"])
            first += f"; {n} checkpoint{'s' if n != 1 else ''} pending until it is in ({', '.join(map(str, view['pending']))})"
        render.out(f"first scan:  {first}")
    scans = f"{view['quick_scans']:,} quick, {view['full_scans']:,} full"
    if view["fallbacks"]:
        last = view["last_fallback"]
        scans += f"; {view['fallbacks']:,} fell back to a full scan (last {render.age(last['at'])}: {last['reason']})"
    render.out(f"scans:       {scans}")
    render.out("             (quick: only the directories the watcher saw change; full: the whole tree)")
    if view["hooks_served"] or view["hooks_standalone"]:
        hooks = f"{view['hooks_served']:,} served by the watcher, {view['hooks_standalone']:,} ran on their own"
        last = view["last_hook_fallback"]
        if last and view["hooks_standalone"]:
            hooks += f" (last {render.age(last['at'])}: {last['reason']})"
        render.out(f"hooks:       {hooks}")
        if view.get("env_servers"):
            n = len(view["env_servers"])
            render.out(f"             {n} server{'s' if n != 1 else ''} of hooks from another environment than "
                       f"the watcher's (pid {', '.join(str(s['pid']) for s in view['env_servers'])})")
        streak = view.get("hooks_standalone_streak")
        if streak and streak["fix"]:
            render.out(f"             the last {streak['calls']:,} ran on their own, none served since "
                       f"{render.age(streak['since'])} ({streak['reason']}): {streak['fix']}")


def watch_impl(project_dir: Optional[str], stop: bool, status: bool, as_json: bool, background: bool,
               idle_minutes: Optional[float], serve_env: bool = False) -> int:
    from rewind import config
    from rewind.watch import control, process
    project = project_for(project_dir, create=not (stop or status or serve_env))
    try:
        if status:
            view = watcher_view(project)
            if as_json:
                render.emit_json({"project": project.root, **view})
            else:
                render.out(f"project:     {project.root}")
                print_watcher(view)
            return 0
        if stop:
            from rewind.watch.envserver import stop_all
            was = control.stop(project.home, project.catalog, project.id, wait_s=5.0)
            others = stop_all(project.home, project.id)
            also = f" and {others} server{'s' if others != 1 else ''} of other environments' hooks" if others else ""
            render.out(f"stopped the watcher of {project.root}{also}" if was
                       else f"stopped {also[5:]} of {project.root}" if others
                       else f"no watcher runs for {project.root}")
            return 0
        root, pid = project.root, project.id
    finally:
        project.close()
    idle_s = idle_minutes * 60 if idle_minutes is not None else None
    if serve_env:                       # a hook refused for its environment started it (envserver.py)
        from rewind.watch.envserver import serve
        serve(root, pid, idle_s if idle_s is not None else 30 * 60.0)
        return 0
    if background and idle_s is None:
        settings = config.load_quietly(root)
        idle_s = (settings.watch_idle_minutes if settings else 30.0) * 60

    def ready(dirs: int) -> None:
        if not background:
            render.out(f"watching {root} ({dirs:,} directories); Ctrl-C stops")

    started = time.monotonic()
    code = process.run_watcher(root, pid, background, idle_s, on_ready=ready)
    if code == 1:
        if not background:
            render.err(f"a watcher already runs for {root} (`rewind watch --status` shows it)")
        return 0 if background else 1
    if not background:
        render.out(f"stopped after {time.monotonic() - started:.0f} s")
    return 0


def register(app: typer.Typer) -> None:
    @app.command("watch")
    def watch_cmd(project: ProjectOpt = None,
                  stop: bool = typer.Option(False, "--stop", help="Stop the project's watcher."),
                  status: bool = typer.Option(False, "--status", help="Whether it runs, and the scans it saved."),
                  as_json: bool = typer.Option(False, "--json", help="With --status: JSON on stdout."),
                  background: bool = typer.Option(False, "--background", hidden=True),
                  serve_env: bool = typer.Option(False, "--serve-env", hidden=True),
                  idle_minutes: Optional[float] = typer.Option(None, "--idle-minutes", min=0.001,
                                                               help="Exit after this long without a hook.")):
        """Watch the project's files: exact attribution, and hooks that only look at what changed."""
        if stop and status:
            from rewind.errors import UsageError
            raise UsageError("--stop and --status go alone")
        raise typer.Exit(watch_impl(project, stop, status, as_json, background, idle_minutes, serve_env))
