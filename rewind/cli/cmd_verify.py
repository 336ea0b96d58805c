"""rewind verify: every object every checkpoint needs exists and is intact; with
--drop-damaged, forget the checkpoints that cannot be given back whole."""

from __future__ import annotations

from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.common import project_for, report_recovery
from rewind.cli.options import JsonOpt
from rewind.cli.restore_view import confirm
from rewind.errors import RewindError
from rewind.history.verify import damaged_checkpoints, verify
from rewind.project import open_catalog, open_project


def verify_impl(as_json: bool, project_dir: Optional[str], all_projects: bool,
                drop_damaged: bool = False, yes: bool = False) -> int:
    if drop_damaged and all_projects:
        raise RewindError("--drop-damaged works on one project: leave out --all (or pass --project DIR)")
    if drop_damaged and project_dir is None:
        project_dir = project_for(None).root
    home, catalog = open_catalog()
    from rewind.lock import store_lock
    from rewind.store.objects import Store
    store = Store(home)
    interrupted = None
    tick = None
    try:
        pids = None
        if not all_projects and project_dir is not None:
            project = project_for(project_dir)
            interrupted = report_recovery(project)
            pids = [project.id]
        else:
            for pid, root in catalog.projects():
                project = open_project(root, create=False)
                interrupted = report_recovery(project) or interrupted
                project.close()
        tick = None if as_json else render.progress("verify")
        with store_lock(home, what="the store (a gc is sweeping)"):   # no sweep while we look
            report = verify(catalog, store, pids, progress=tick)
        from rewind.clock import now_ns
        catalog.note_damaged(store.found_damaged, now_ns())     # the next scan stores them afresh
    finally:
        if tick is not None:
            tick.close()
        catalog.close()
    if drop_damaged:
        return _drop_damaged(report, project_dir, yes)
    if as_json:
        out = {"ok": report.ok, "objects": report.objects, "problems": report.problems}
        if interrupted:
            out["interrupted"] = interrupted
        render.emit_json(out)
    elif report.ok:
        render.out(f"ok: {report.objects} objects checked, no problems")
    else:
        render.out(f"{len(report.problems)} problem(s) in {report.objects + len(report.problems)} objects:")
        for p in report.problems:
            needed = p.get("checkpoints") or ([p["checkpoint"]] if "checkpoint" in p else [])
            where = (f"checkpoint{'s' if len(needed) > 1 else ''} {', '.join(map(str, needed[:10]))}"
                     f"{' …' if len(needed) > 10 else ''}: ") if needed else ""
            obj = f"object {p['object'][:12]}: " if "object" in p else f"pack {p['pack']}: " if "pack" in p else ""
            render.out(f"  {where}{obj}{p['problem']}")
        if damaged_checkpoints(report):
            render.out("`rewind verify --drop-damaged` forgets just the checkpoints that cannot be given back "
                       "whole; the files on disk are not touched.")
    return 0 if report.ok else 1


def _drop_damaged(report, project_dir: str, yes: bool) -> int:
    """Forget the checkpoints a restore could not give back whole (their content is partly
    lost already); everything else, and the working tree, stays."""
    numbers = damaged_checkpoints(report)
    if not numbers:
        render.out("No damaged checkpoint to drop.")
        return 0 if report.ok else 1
    project = project_for(project_dir)
    try:
        from rewind.history.guard import refuse_from_agent
        refuse_from_agent(project.catalog, "`rewind verify --drop-damaged`",
                          f"rewind verify --drop-damaged --project {project.root}")
        render.out(f"Checkpoints that cannot be given back whole: {', '.join(map(str, numbers))}.")
        confirm(yes, f"Forget these {len(numbers)} checkpoint(s)?")
        from rewind.clock import now_ns
        from rewind.lock import project_lock
        with project_lock(project.home, project.id):
            with project.catalog.transaction():
                batch = project.catalog.trash_checkpoints(project.id, numbers, "rewind verify --drop-damaged",
                                                          now_ns())
    finally:
        project.close()
    render.out(f"Forgot checkpoint(s) {', '.join(map(str, numbers))}; they stay in the trash for a day "
               f"(`rewind trash --restore {batch}`), then gc frees what only they held.")
    return 0


def register(app: typer.Typer) -> None:
    @app.command("verify")
    def verify_cmd(as_json: JsonOpt = False,
                   project: Optional[str] = typer.Option(None, "--project", help="Only this project's checkpoints."),
                   all_projects: bool = typer.Option(False, "--all", help="Every project (the default without --project)."),
                   drop_damaged: bool = typer.Option(False, "--drop-damaged",
                                                     help="Then forget the project's checkpoints that cannot be "
                                                          "given back whole (asks first)."),
                   yes: bool = typer.Option(False, "--yes", "-y", help="With --drop-damaged: do not ask.")):
        """Check that every object every checkpoint needs exists and is intact."""
        raise typer.Exit(verify_impl(as_json, project, all_projects, drop_damaged, yes))
