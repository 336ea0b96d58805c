"""rewind save / verify / status."""

from __future__ import annotations

import os
from typing import Optional

import typer

from rewind.cli import render
from rewind.history.verify import damaged_checkpoints
from rewind.history.verify import verify
from rewind.errors import RewindError
from rewind.project import open_catalog, open_project
from rewind.capture.working_copy import capture
from rewind.cli.cmd_watch import print_watcher, watcher_view
from rewind.cli.common import project_for, project_settings, report_recovery


def save_impl(message: Optional[str], project_dir: Optional[str]) -> None:
    project = project_for(project_dir, create=True)
    try:
        tick = render.progress("save")
        try:
            from rewind.text import unbroken
            cp, result = capture(project, "manual", message=unbroken(message) if message else message,
                                 full=True, progress=tick)
        finally:
            if tick is not None:
                tick.close()
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
    from rewind.cli.cmd_restore import confirm
    render.out(f"Checkpoints that cannot be given back whole: {', '.join(map(str, numbers))}.")
    confirm(yes, f"Forget these {len(numbers)} checkpoint(s)?")
    project = project_for(project_dir)
    try:
        from rewind.lock import project_lock
        with project_lock(project.home, project.id, timeout=30):
            with project.catalog.transaction():
                project.catalog.drop_checkpoints(project.id, numbers)
    finally:
        project.close()
    render.out(f"Forgot checkpoint(s) {', '.join(map(str, numbers))}; the next gc frees what only they held.")
    return 0


def _catalog_size(home: str) -> int:
    return sum(os.path.getsize(os.path.join(home, f)) for f in os.listdir(home)
               if f.startswith("catalog.sqlite"))


def _project_row(catalog, pid: int, root: str, usage: dict) -> dict:
    newest = catalog.latest(pid)
    cps = catalog.retention_rows(pid)
    objects, size = usage.get(pid, (0, 0))
    return {"project": root, "checkpoints": len(cps),
            "newest": newest.number if newest else None,
            "newest_at": newest.created_at if newest else None,
            "oldest": cps[-1][0] if cps else None,
            "objects": objects, "bytes": size}


def status_impl(project_dir: Optional[str], all_projects: bool, as_json: bool) -> None:
    from rewind.history import gc as gcmod
    home, catalog = open_catalog()
    try:
        sizes = gcmod.object_sizes(home)
        store = {"path": home, "objects": len(sizes), "bytes": sum(sizes.values()),
                 "catalog_bytes": _catalog_size(home)}
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
        project = project_for(project_dir)
        settings = project_settings(project)
        usage = gcmod.usage(home, catalog, [project.id], sizes)
        row = _project_row(catalog, project.id, project.root, usage)
        watch = watcher_view(project)
        from rewind.cli.common import hook_failures
        failures = hook_failures(project)
        project.close()
        row["hook_failures"] = failures
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
        if settings is not None:
            src = ", ".join(settings.sources) or "defaults"
            render.out(f"keeps:       the newest {settings.ring_size}, none older than "
                       f"{settings.retention_days:g} days ({src})")
        render.out(f"content:     {row['objects']:,} objects, {render.human_size(row['bytes'])} for this project")
        print_watcher(watch)
        _print_store(store, last)
    finally:
        catalog.close()


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
    @app.command("save")
    def save_cmd(message: Optional[str] = typer.Option(None, "-m", "--message", help="A note for this checkpoint."),
                 project: Optional[str] = typer.Option(None, "--project", help="The project's directory.")):
        """Take a checkpoint of the project's tree now."""
        save_impl(message, project)

    @app.command("verify")
    def verify_cmd(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                   project: Optional[str] = typer.Option(None, "--project", help="Only this project's checkpoints."),
                   all_projects: bool = typer.Option(False, "--all", help="Every project (the default without --project)."),
                   drop_damaged: bool = typer.Option(False, "--drop-damaged",
                                                     help="Then forget the project's checkpoints that cannot be "
                                                          "given back whole (asks first)."),
                   yes: bool = typer.Option(False, "--yes", "-y", help="With --drop-damaged: do not ask.")):
        """Check that every object every checkpoint needs exists and is intact."""
        raise typer.Exit(verify_impl(as_json, project, all_projects, drop_damaged, yes))

    @app.command("status")
    def status_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory."),
                   all_projects: bool = typer.Option(False, "--all", help="Every project, with its size."),
                   as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")):
        """The project, its checkpoints, the store's size and the last gc."""
        status_impl(project, all_projects, as_json)
