"""rewind save / verify / status."""

from __future__ import annotations

import os
from typing import Optional

import typer

from .. import render
from ..check import verify
from ..project import open_catalog, open_project
from ..snapshot import capture
from .common import project_for, report_recovery


def _dir_size(path: str) -> tuple[int, int]:
    total = count = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
                count += 1
            except OSError:
                pass
    return total, count


def save_impl(message: Optional[str], project_dir: Optional[str]) -> None:
    project = project_for(project_dir, create=True)
    try:
        cp, result = capture(project, "manual", message=message)
        st = result.stats
        render.out(f"Saved checkpoint {cp.number} of {project.root}: {st.files} files, "
                   f"{st.symlinks} symlinks, {st.dirs} dirs ({st.hashed} read, the rest unchanged).")
        for key, label in (("large", "too large to store"), ("unreadable", "unreadable"),
                           ("special", "special files skipped"), ("changing", "kept changing while read")):
            items = getattr(st, key)
            if items:
                names = [i if isinstance(i, str) else i[0] for i in items]
                render.err(f"warning: {len(items)} {label}: "
                           + ", ".join(render.display_path(n) for n in names[:5])
                           + (" …" if len(names) > 5 else ""))
    finally:
        project.close()


def verify_impl(as_json: bool, project_dir: Optional[str], all_projects: bool) -> int:
    home, catalog = open_catalog()
    from ..objects import Store
    store = Store(home)
    interrupted = None
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
        progress = None
        if not as_json and render.fancy():
            progress = _progress()
        report = verify(catalog, store, pids, progress=progress)
    finally:
        catalog.close()
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
            where = f"checkpoint {p['checkpoint']}: " if "checkpoint" in p else ""
            obj = f"object {p['object'][:12]}: " if "object" in p else ""
            render.out(f"  {where}{obj}{p['problem']}")
    return 0 if report.ok else 1


def _progress():
    import time
    start = time.monotonic()
    state = {}

    def tick(done: int, total: int) -> None:
        if "bar" not in state:
            if time.monotonic() - start < 1.0:
                return
            from rich.progress import Progress
            bar = Progress(console=render.err_console(), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("verifying checkpoints", total=total)
        state["bar"].update(state["task"], completed=done)
        if done >= total:
            state["bar"].stop()
    return tick


def status_impl(project_dir: Optional[str]) -> None:
    home, catalog = open_catalog()
    try:
        project = project_for(project_dir)
        count = project.catalog.count(project.id)
        newest = project.catalog.latest(project.id)
        project.close()
        size, objects = _dir_size(os.path.join(home, "objects"))
        db = sum(os.path.getsize(os.path.join(home, f)) for f in os.listdir(home)
                 if f.startswith("catalog.sqlite"))
        render.out(f"project:     {project.root}")
        render.out(f"checkpoints: {count}" + (f" (newest {newest.number}, {render.age(newest.created_at)})"
                                              if newest else ""))
        render.out(f"store:       {home}")
        render.out(f"             {objects} objects, {render.human_size(size)}; catalog {render.human_size(db)}")
    finally:
        catalog.close()


def register(app: typer.Typer) -> None:
    @app.command("save")
    def save_cmd(message: Optional[str] = typer.Option(None, "-m", "--message", help="A note for this checkpoint."),
                 project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """Take a checkpoint of the project's tree now."""
        save_impl(message, project)

    @app.command("verify")
    def verify_cmd(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                   project: Optional[str] = typer.Option(None, "--project", help="Only this project's checkpoints."),
                   all_projects: bool = typer.Option(False, "--all", help="Every project (the default without --project).")):
        """Check that every object every checkpoint needs exists and is intact."""
        raise typer.Exit(verify_impl(as_json, project, all_projects))

    @app.command("status")
    def status_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """The project, its checkpoints and the store's size."""
        status_impl(project)
