"""A hook's event, dispatched: the session's project found, then docs/design.md's "How a prompt is
recorded" done by the module of its kind, agent-neutral.

Every agent adapter turns its payload into an `Event`; `handle` does the rest: a prompt's
checkpoint in prompt.py, a tool call's shell window or pre-image in tools.py.
"""

from __future__ import annotations

import os

from rewind import clock, config
from rewind.hooks.base import Event
from rewind.project import Project, open_catalog, resolve_root
from rewind.store.objects import Store


def _usable_dir(path: str | None) -> str | None:
    if not path or not os.path.isabs(path) or "\0" in path:
        return None
    return path if os.path.isdir(path) else None


def project_root(ev: Event, catalog) -> tuple[str | None, bool]:
    """(the session's project, whether the session is known already): known from its first
    event, else the agent's project dir, else the cwd (which follows `cd` inside shell
    commands, hence last)."""
    known = catalog.session_project(ev.agent, ev.session_id)
    if known is not None:
        return catalog.project_root(known.project_id), True
    base = _usable_dir(ev.project_dir) or _usable_dir(ev.cwd)
    if base is None:
        return None, False
    root = resolve_root(base)
    return (None if not_a_project(root, catalog) else root), False


def not_a_project(root: str, catalog) -> bool:
    """Whether a hook refuses `root` as a project: the whole filesystem, a tree holding
    rewind's own store (or inside it), a system directory or the home directory itself
    (unless allowed, or already a project)."""
    home = os.path.realpath(catalog.home)
    if root == "/" or root == home or home.startswith(root.rstrip("/") + "/") or root.startswith(home + "/"):
        return True
    from rewind.project import refused_root
    return bool(refused_root(root)) and catalog.project_id(root, create=False) is None


class OtherProject(Exception):
    """A served call's event belongs to another project than the watcher's (watch/serve.py):
    the client records it itself."""


def handle(ev: Event, pid: int | None = None, served_root: str | None = None, fallback: str | None = None,
           catalog=None) -> str:
    """Act on one event. Returns a short note of what was done (for the log and tests).
    `pid`: the hook's process (a served call's client, not this process); `served_root`:
    the project the serving watcher watches (none other is served); a standalone call is
    counted, with `fallback`, why the watcher did not serve it. `catalog`: a connection
    lent by the serving watcher (left open), else one of this call's own."""
    lent = catalog is not None
    if lent:
        home = catalog.home
    else:
        home, catalog = open_catalog()
    project = None
    try:
        root, known = project_root(ev, catalog)
        if served_root is not None and root != served_root:
            raise OtherProject(root)
        if root is None:
            return f"ignored: no usable project directory (cwd={ev.cwd!r})"
        project_id = catalog.project_id(root, create=True)
        project = Project(home, root, project_id, catalog, Store(home))
        if served_root is None:
            catalog.count_standalone_hook(project.id, fallback, clock.wall_ns())
        if not known or (ev.kind == "session_start" and ev.source
                         and catalog.session_lacks_source(ev.agent, ev.session_id)):
            _register(project, ev)      # (a SessionStart may come after its prompt: its source)
        note = _dispatch(project, ev, pid or os.getpid(), served_root is not None, fallback)
        catalog.flush_riders()
        return note
    finally:
        if project is not None:
            project.close(keep_catalog=lent)     # remembers what it found damaged
        elif not lent:
            catalog.close()


def _register(project: Project, ev: Event) -> None:
    with project.catalog.transaction():
        project.catalog.register_session(project.id, ev.agent, ev.session_id, ev.cwd, ev.source, clock.wall_ns())


def _ensure_watcher(project: Project, settings, fallback: str | None = None) -> str:
    """Start the project's watcher in the background unless one runs or it is turned off.
    One runs but refused this call for its environment (`fallback` "env NAME"): a server of
    this environment's hooks is started beside it (watch/envserver.py), so that the next
    hooks of this agent are served too, and the other sessions' stay as they are."""
    if settings is None or not settings.watch:
        return "watcher off"
    from rewind.background import spawn_env_server, spawn_watcher
    from rewind.capture.dirty import running
    if running(project.home, project.catalog, project.id) is not None:
        if fallback and fallback.startswith("env "):
            from rewind.envkey import env_key
            if spawn_env_server(project.home, project.root, project.id, env_key(os.environb).decode(),
                                settings.watch_idle_minutes):
                return f"watcher running; a server of this environment's hooks started ({fallback})"
        return "watcher running"
    spawn_watcher(project.root, settings.watch_idle_minutes)
    return "watcher started"


def _dispatch(project: Project, ev: Event, pid: int, served: bool = False, fallback: str | None = None) -> str:
    if ev.kind == "session_start":
        return "session registered; " + _ensure_watcher(project, config.load_quietly(project.root), fallback)
    from rewind.hooks import tools      # (a SessionStart needs none of it)
    if ev.kind == "session_end":
        tools.close_windows(project, ev, "all")      # its background commands' too
        with project.catalog.transaction():
            project.catalog.end_session(ev.agent, ev.session_id, clock.wall_ns())
        # the watcher stays: `claude -p`, resumed sessions, `codex exec` and Gemini CLI start
        # a session per prompt, and a watcher restarted each time would rescan the whole tree
        # each time. It exits after its idle time (watch_idle_minutes) instead.
        return "session ended"
    if ev.kind == "prompt":
        from rewind.hooks import prompt
        settings = config.load_quietly(project.root)
        started = _ensure_watcher(project, settings, fallback)   # a watcher that died comes back (a full scan)
        return prompt.record(project, ev, settings, watcher_on=started != "watcher off")
    if ev.kind == "stop":
        tools.close_windows(project, ev, ev.stop_scope)
        if tools.first_scan_running(project):
            return "turn closed (the first scan completes it)"
        tools.scan(project)
        return "turn closed"
    if ev.kind == "file_edited":
        return tools.edited(project, ev)
    if ev.kind == "pre_tool" and ev.sequential:
        tools.close_windows(project, ev, "exact")     # the call before this one never reported: over
    if ev.tool_kind == "shell":
        return tools.shell(project, ev, pid, served)
    if ev.tool_kind == "edit":
        return tools.edit(project, ev)
    return "nothing to do"
