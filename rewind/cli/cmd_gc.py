"""rewind gc / forget."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.gc_view import plural, print_report
from rewind.errors import Refused, RewindError, UsageError
from rewind.history import gc as gcmod
from rewind.history import guard
from rewind.project import open_catalog


def gc_impl(dry_run: bool, as_json: bool, auto: bool) -> int:
    home, catalog = open_catalog()
    tick = None if (as_json or auto) else render.progress("gc")
    try:
        try:
            with gcmod.locked(home):
                plan = gcmod.plan_gc(home, catalog, dry_run=dry_run, progress=tick, auto=auto)
                if plan.shortened and not dry_run:
                    # what only a shortened setting drops: the person's to decide (an agent
                    # can write .rewind.toml, and config.toml too)
                    guard.refuse_from_agent(catalog, "this gc applies a shortened ring_size or "
                                            "retention_days, which", "rewind gc")
                # --dry-run shows the plan (in the report's shape); otherwise it is carried out
                report = plan.report() if dry_run else gcmod.apply(plan, home, catalog, progress=tick)
        finally:
            if tick is not None:
                tick.close()
    except gcmod.GcBusy:
        if auto:
            return 0
        raise
    finally:
        catalog.close()
    if auto:
        from rewind.log import log
        log(f"gc (auto): dropped {len(report.dropped)} checkpoints, freed {report.objects_swept} objects "
            f"({report.bytes_swept} bytes) in {report.seconds} s")
        return 0
    if as_json:
        render.emit_json(report.to_json())
    else:
        print_report(report)
    return 0


def _known_root(catalog, project_dir: str) -> tuple[int, str]:
    """The catalog's project for DIR: the directory may be gone already."""
    candidates = [os.path.realpath(project_dir), os.path.abspath(project_dir)]
    for root in candidates:
        pid = catalog.project_id(root, create=False)
        if pid is not None:
            return pid, root
    if os.path.isdir(project_dir):
        from rewind.project import find_project
        root = find_project(project_dir, catalog)
        pid = catalog.project_id(root, create=False)
        if pid is not None:
            return pid, root
    raise RewindError(f"rewind has no checkpoints for {project_dir}",
                      hint="`rewind status --all` lists the projects it knows")


def forget_impl(project_dir: Optional[str], yes: bool, as_json: bool, now: bool = False,
                paths: Optional[list[str]] = None) -> int:
    home, catalog = open_catalog()
    try:
        pid, root = _known_root(catalog, project_dir if project_dir is not None else os.getcwd())
        command = "rewind forget" + (f" --project {project_dir}" if project_dir else "") + (" --now" if now else "")
        if paths:
            guard.refuse_from_agent(catalog, "`rewind forget -- PATH`", command + " -- PATH")
            from rewind.cli.cmd_purge import purge_impl
            return purge_impl(home, catalog, pid, root, paths, yes, as_json)
        guard.refuse_from_agent(catalog, "`rewind forget`", command)
        count = len(catalog.retention_rows(pid))
        gone = ("Their content is deleted from the store and cannot be restored" if now else
                "They stay in `rewind trash` for a day, then their content is deleted")
        if not yes:
            if not sys.stdin.isatty():
                raise Refused(f"forgetting {root} deletes its {count} checkpoint(s)",
                              hint="run it on a terminal to confirm, or pass --yes")
            if not typer.confirm(f"Forget all {count} checkpoints of {root}? {gone}", default=False):
                raise typer.Abort()
        from rewind.clock import now_ns
        from rewind.lock import project_lock
        from rewind.watch.control import stop as stop_watcher
        stop_watcher(home, catalog, pid, wait_s=5.0)
        batch = None
        with project_lock(home, pid, what=f"the project {root}"):
            with catalog.transaction():
                if not now:
                    batch = catalog.trash_checkpoints(pid, [r.number for r in catalog.retention_rows(pid)],
                                                      "rewind forget", now_ns())
                catalog.forget_project(pid)
                removed = count
        try:
            report = gcmod.run(home, catalog, only=[])
        except gcmod.GcBusy:
            report = None
    finally:
        catalog.close()
    if as_json:
        render.emit_json({"project": root, "checkpoints_removed": removed, "trash_batch": batch,
                          "gc": report.to_json() if report else None})
        return 0
    render.out(f"forgot {plural(removed, 'checkpoint')} of {root}")
    if batch is not None:
        render.out(f"they stay in the trash for a day: `rewind trash --restore {batch}` brings them back")
    if report is not None:
        render.out(f"freed {plural(report.objects_swept, 'object')} ({render.human_size(report.bytes_swept)})")
    else:
        render.out("another gc is running; it frees the content")
    return 0


def register(app: typer.Typer) -> None:
    @app.command("gc")
    def gc_cmd(dry_run: bool = typer.Option(False, "--dry-run", help="Print what would go; delete nothing."),
               as_json: bool = typer.Option(False, "--json", help="The report as JSON on stdout."),
               auto: bool = typer.Option(False, "--auto", hidden=True),
               forget_lost: bool = typer.Option(False, "--forget-lost",
                                                help="Checkpoints the catalog lost (a deleted catalog.sqlite-wal) "
                                                     "are given up: their content may be swept.")):
        """Drop checkpoints past the ring and the retention, then delete content nothing needs."""
        if forget_lost:
            from rewind.project import open_catalog
            _, catalog = open_catalog()
            try:
                if catalog.any_lost():
                    guard.refuse_from_agent(catalog, "`rewind gc --forget-lost`", "rewind gc --forget-lost")
                n = catalog.forget_lost()
            finally:
                catalog.close()
            render.err(f"gave up the lost checkpoints of {n} project(s)" if n else "no lost checkpoints to give up")
        raise typer.Exit(gc_impl(dry_run, as_json, auto))

    @app.command("forget")
    def forget_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory (it may be gone)."),
                   yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
                   now: bool = typer.Option(False, "--now", help="Delete at once: skip the day in `rewind trash`."),
                   as_json: bool = typer.Option(False, "--json", help="The result as JSON on stdout.")):
        """Delete every checkpoint of one project (kept a day in `rewind trash`); with `-- PATH...`, purge
        those paths' content from all history instead."""
        from rewind.cli.argv import paths_after_dashes
        paths = paths_after_dashes()
        if paths is not None and not paths:
            raise UsageError("name the paths to purge after --, or leave out -- to forget the whole project")
        raise typer.Exit(forget_impl(project, yes, as_json, now, paths))
