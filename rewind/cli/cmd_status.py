"""rewind status: the project, its checkpoints, the store's size and the last gc."""

from __future__ import annotations

import os
from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.cmd_watch import print_watcher, watcher_view
from rewind.cli.common import (hook_failures, lost_prompts, no_checkpoints_yet, project_for, project_settings,
                               say_lost)
from rewind.cli.options import JsonOpt, ProjectOpt
from rewind.errors import NotInProject
from rewind.project import open_catalog


def _catalog_size(home: str) -> int:
    from rewind.constants import CATALOG_NAME
    return sum(os.path.getsize(os.path.join(home, f)) for f in os.listdir(home)
               if f.startswith(CATALOG_NAME))


def _project_row(catalog, pid: int, root: str, usage: dict) -> dict:
    newest = catalog.latest(pid)
    cps = catalog.retention_rows(pid)
    objects, size = usage.get(pid, (0, 0))
    return {"project": root, "checkpoints": len(cps),
            "newest": newest.number if newest else None,
            "newest_at": newest.created_at if newest else None,
            "oldest": cps[-1].number if cps else None,
            "objects": objects, "bytes": size}


def settings_differ(view: dict) -> list[dict] | None:
    """The settings in which the running watcher's environment and this one differ, compared
    as the watcher compares a hook's (watch/serve.py: SAME_ENV and every REWIND_*): a hook
    run with this environment is refused and runs standalone. None: no watcher runs, or its
    environment cannot be read (/proc/PID/environ is its environment at exec, and the
    watcher never changes its own)."""
    if not view.get("running") or not view.get("pid"):
        return None
    from rewind.watch.serve import env_differences
    try:
        with open(f"/proc/{view['pid']}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    theirs = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep:
            theirs[os.fsdecode(key)] = os.fsdecode(value)
    return [{"name": k, "watcher": theirs.get(k), "here": os.environ.get(k)}
            for k in env_differences(theirs, os.environ)]


def _setting(value: str | None) -> str:
    return "unset" if value is None else render.safe(value) or '""'


def _print_settings_differ(differ: list[dict] | None, mine: dict | None = None) -> None:
    if not differ:
        return
    apart = "; ".join(f"{d['name']}={_setting(d['watcher'])} there, {_setting(d['here'])} here" for d in differ)
    then = f"a server of hooks with these runs beside it (pid {mine['pid']})" if mine else \
        "hooks here run standalone (an agent's session started with them starts a server of its hooks)"
    render.out(f"settings:    the watcher runs with other settings ({apart}): {then}")


def env_server_here(view: dict) -> dict | None:
    """The server of hooks with this process's environment (watch/envserver.py), if one runs."""
    from rewind.envkey import env_key
    key = env_key(os.environb).decode()
    return next((s for s in view.get("env_servers") or [] if s["key"] == key), None)


def status_impl(project_dir: Optional[str], all_projects: bool, as_json: bool) -> None:
    from rewind.history import gc as gcmod
    home, catalog = open_catalog()
    try:
        sizes = gcmod.object_sizes(home)
        objects, on_disk = gcmod.totals(home)          # counted as gc's report counts them
        store = {"path": home, "objects": objects, "bytes": on_disk, "catalog_bytes": _catalog_size(home)}
        last = gcmod.last_report(catalog)
        if all_projects:
            known = catalog.projects()
            with_cps = [(pid, root) for pid, root in known if catalog.count(pid)]
            usage = gcmod.usage(home, catalog, [pid for pid, _ in with_cps], sizes)
            rows = [_project_row(catalog, pid, root, usage) for pid, root in with_cps]
            if as_json:
                render.emit_json({"store": store, "projects": rows, "last_gc": last})
                return
            _print_all(rows, store, last, len(known) - len(with_cps))
            return
        try:
            project = project_for(project_dir)
        except NotInProject:
            _not_yet(project_dir, store, last, as_json)
            return
        settings = project_settings(project)
        usage = gcmod.usage(home, catalog, [project.id], sizes)
        row = _project_row(catalog, project.id, project.root, usage)
        watch = watcher_view(project)
        watch["settings_differ"] = settings_differ(watch)
        failures = hook_failures(project)
        lost = lost_prompts(project)
        project.close()
        row["hook_failures"] = failures
        row["lost_prompts"] = lost
        if settings is not None:
            row["ring_size"], row["retention_days"] = settings.ring_size, settings.retention_days
            row["settings_from"] = list(settings.sources)
        if as_json:
            render.emit_json({**row, "store": store, "last_gc": last, "watcher": watch})
            return
        newest = (f" (newest {row['newest']}, {render.age(row['newest_at'])}; oldest {row['oldest']})"
                  if row["newest"] is not None else "")
        render.out(f"project:     {project.root}")
        render.out(f"checkpoints: {row['checkpoints']}{newest}")
        if failures:
            render.out(f"recording:   {len(failures)} hook call(s) could not record since the newest checkpoint "
                       f"(last: {render.safe(failures[-1].get('error'))}); `rewind doctor` says more")
        if lost:
            render.out(f"lost:        {say_lost(lost)}")
        if settings is not None:
            src = ", ".join(settings.sources) or "defaults"
            render.out(f"keeps:       the newest {settings.ring_size}, none older than "
                       f"{settings.retention_days:g} days ({src})")
        render.out(f"content:     {row['objects']:,} objects, {render.human_size(row['bytes'])} for this project")
        print_watcher(watch)
        _print_settings_differ(watch["settings_differ"], env_server_here(watch))
        _print_store(store, last)
    finally:
        catalog.close()


def _not_yet(project_dir: str | None, store: dict, last: dict | None, as_json: bool) -> None:
    """A project no checkpoint was taken of yet (hooks just installed, say): that, not an error."""
    from rewind.hooks.install import installed_for
    from rewind.project import resolve_root
    root = resolve_root(project_dir or os.getcwd())
    if as_json:
        render.emit_json({"project": root, "checkpoints": 0, "newest": None, "newest_at": None, "oldest": None,
                          "objects": 0, "bytes": 0, "hook_failures": [], "lost_prompts": [], "hooks": installed_for(root),
                          "store": store, "last_gc": last, "watcher": None})
        return
    render.out(f"project:     {root}")
    render.out(f"checkpoints: {no_checkpoints_yet(root)}")
    _print_store(store, last)


def _print_store(store: dict, last: dict | None) -> None:
    render.out(f"store:       {store['path']}")
    render.out(f"             {store['objects']:,} objects, {render.human_size(store['bytes'])} in all; "
               f"catalog {render.human_size(store['catalog_bytes'])}")
    if last:
        render.out(f"last gc:     {render.age(last.get('started_at', ''))}: dropped "
                   f"{len(last.get('dropped', []))} checkpoint(s), freed {last.get('objects_swept', 0):,} "
                   f"objects ({render.human_size(last.get('bytes_swept', 0))})")
    else:
        render.out("last gc:     never (it runs by itself once a day; `rewind gc` runs it now)")


def _print_all(rows: list[dict], store: dict, last: dict | None, without: int) -> None:
    if render.fancy():
        from rich.table import Table
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for col, justify in (("project", "left"), ("checkpoints", "right"), ("newest", "right"),
                             ("content", "right")):
            table.add_column(col, justify=justify)
        for r in rows:
            table.add_row(r["project"], str(r["checkpoints"]),
                          render.age(r["newest_at"]) if r["newest_at"] else "",
                          render.human_size(r["bytes"]))
        render.console().print(table)
    else:
        for r in rows:
            render.out(f"{r['project']}\t{r['checkpoints']} checkpoints\t"
                       f"{render.age(r['newest_at']) if r['newest_at'] else '-'}\t{render.human_size(r['bytes'])}")
    if not rows:
        render.out("no project has checkpoints")
    if without:
        render.out(f"({without} other known project(s) have no checkpoints)")
    render.out("content counts what each project's checkpoints reach; projects share identical files")
    _print_store(store, last)


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status_cmd(project: ProjectOpt = None,
                   all_projects: bool = typer.Option(False, "--all", help="Every project, with its size."),
                   as_json: JsonOpt = False):
        """The project, its checkpoints, the store's size and the last gc."""
        status_impl(project, all_projects, as_json)
