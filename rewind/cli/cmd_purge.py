"""rewind forget -- PATH...: purge paths' content from all history (history/purge.py).

Dispatched by `forget` (cmd_gc.py) once the person is known to be the caller; it skips the
trash, as a secret must go now."""

from __future__ import annotations

import sys

import typer

from rewind.cli import render
from rewind.cli.gc_view import plural
from rewind.errors import Refused
from rewind.history import purge as purgemod


def purge_impl(home: str, catalog, project_id: int, root: str, paths: list[str], yes: bool, as_json: bool) -> int:
    rels = [purgemod.relative(root, p) for p in paths]
    if not yes:
        if not sys.stdin.isatty():
            raise Refused(f"purging {', '.join(rels)} deletes its content from every checkpoint, at once",
                          hint="run it on a terminal to confirm, or pass --yes")
        if not typer.confirm(f"Delete every content {', '.join(rels)} ever had from all history, and the same "
                             "content under any other path? It cannot be brought back", default=False):
            raise typer.Abort()
    report = purgemod.purge(home, catalog, project_id, root, rels)
    if as_json:
        render.emit_json(report.to_json())
        return 0
    shown = ", ".join(render.display_path(r) for r in rels)
    if not report.contents:
        render.out(f"no checkpoint holds {shown}: nothing purged")
    else:
        render.out(f"purged {plural(report.contents, 'content')} of {shown} from "
                   f"{plural(report.checkpoints, 'checkpoint')}: {plural(report.objects_removed, 'object')} "
                   f"({render.human_size(report.bytes_removed)}) deleted from the store")
        if report.other_paths:
            more = ", ".join(render.display_path(p) for p in report.other_paths[:5])
            render.out(f"the same content was also taken from {more}"
                       + (" …" if len(report.other_paths) > 5 else ""))
    for rel in report.still_on_disk:
        render.err(f"warning: {render.display_path(rel)} is still on disk: the next checkpoint stores it again "
                   "(delete it, or add it to .rewindignore, then purge again)")
    render.err("not reached: " + "; ".join(purgemod.UNREACHABLE))
    return 0
