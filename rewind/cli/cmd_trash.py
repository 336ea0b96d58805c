"""rewind trash: what the commands that delete history took, kept a day; brought back whole.

`forget`, `verify --drop-damaged` and a `gc` that applies a shortened setting move the
checkpoints they drop here (catalog/trash.py): their rows wait in the catalog, their
content in `objects/` (gc marks the trash's trees), until a gc a day later empties the
batch (history/gc.py `TRASH_NS`). `forget --now` and a purge (`forget -- PATH`) skip it.
"""

from __future__ import annotations

from typing import Optional

import typer

from rewind.cli import render
from rewind.cli.gc_view import plural
from rewind.errors import RewindError
from rewind.project import open_catalog


def _numbers(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:12])) + (" …" if len(numbers) > 12 else "")


def trash_impl(restore: Optional[int], empty: bool, as_json: bool) -> int:
    from rewind.clock import iso, now_ns
    from rewind.history.gc import TRASH_NS
    home, catalog = open_catalog()
    try:
        if restore is not None:
            from rewind.lock import project_lock
            batches = {b["batch"]: b for b in catalog.trash_batches()}
            if restore not in batches:
                raise RewindError(f"the trash has no batch {restore}",
                                  hint="`rewind trash` lists what it holds")
            b = batches[restore]
            with project_lock(home, b["project_id"], what=f"the project {b['project']}"):
                with catalog.transaction():
                    pid, numbers = catalog.untrash(restore)
            if as_json:
                render.emit_json({"batch": restore, "project": b["project"], "restored": numbers})
            else:
                render.out(f"brought back {plural(len(numbers), 'checkpoint')} of {b['project']}: "
                           f"{_numbers(numbers)}")
            return 0
        if empty:
            from rewind.history.guard import refuse_from_agent
            refuse_from_agent(catalog, "`rewind trash --empty`", "rewind trash --empty")
            with catalog.transaction():
                n = catalog.empty_trash()
            from rewind.history import gc as gcmod
            try:
                report = gcmod.run(home, catalog, only=[])
                freed = f"; freed {plural(report.objects_swept, 'object')} ({render.human_size(report.bytes_swept)})"
            except gcmod.GcBusy:
                freed = "; another gc is running, it frees the content"
            render.out(f"emptied the trash: {plural(n, 'checkpoint')} given up{freed}")
            return 0
        batches = catalog.trash_batches()
    finally:
        catalog.close()
    if as_json:
        render.emit_json([{"batch": b["batch"], "project": b["project"], "checkpoints": b["numbers"],
                           "why": b["why"], "trashed_at": iso(b["trashed_ns"]),
                           "expires_at": iso(b["trashed_ns"] + TRASH_NS)} for b in batches])
        return 0
    if not batches:
        render.out("the trash is empty")
        return 0
    now = now_ns()
    for b in batches:
        left = max(0, b["trashed_ns"] + TRASH_NS - now) / 3600e9
        render.out(f"{b['batch']}: {plural(len(b['numbers']), 'checkpoint')} of {b['project']} "
                   f"({_numbers(b['numbers'])}), by {b['why']}; {left:.1f} h left")
    render.out("`rewind trash --restore N` brings batch N back; a gc after its day deletes it")
    return 0


def register(app: typer.Typer) -> None:
    @app.command("trash")
    def trash_cmd(restore: Optional[int] = typer.Option(None, "--restore", metavar="N",
                                                        help="Bring back batch N, every checkpoint of it."),
                  empty: bool = typer.Option(False, "--empty", help="Give up everything in the trash now."),
                  as_json: bool = typer.Option(False, "--json", help="The list as JSON on stdout.")):
        """List what forget, verify --drop-damaged and gc took (kept a day), or bring it back."""
        if restore is not None and empty:
            raise RewindError("--restore and --empty do not go together")
        raise typer.Exit(trash_impl(restore, empty, as_json))
