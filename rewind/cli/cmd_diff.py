"""rewind diff: what happened after a checkpoint, or between two."""

from __future__ import annotations

import difflib
import os
from typing import Optional

import typer

from rewind.capture.changes import changes_under
from rewind.capture.snapshot import TreeLoader, working_scan
from rewind.cli import render
from rewind.cli.argv import paths_after_dashes
from rewind.cli.common import project_for, project_paths, resolve_checkpoint
from rewind.cli.ids import IdSpec, complete_id, parse_second_id
from rewind.cli.options import CheckpointArg, JsonOpt, NoPagerOpt, ProjectOpt
from rewind.cli.pending_view import LOOK_WAIT_S
from rewind.errors import CorruptObject, RewindError
from rewind.store.tree import DIR, LARGE, LINK, Entry
from rewind.store.treediff import change_rows, diff_trees, path_filter
from rewind.structs import record

FileDiff = record("FileDiff", "row known text added removed", """\
One path of a diff: its change (`row`), who made it if known (`known`), its unified diff
text and the lines it adds and removes.""")


def _content(project, entry: Entry | None, path: str, from_disk: bool) -> bytes | None:
    if entry is None or entry.kind == DIR:
        return b""
    if entry.kind == LARGE:
        return None
    if from_disk:
        full = os.path.join(project.root, path)
        if entry.kind == LINK:
            return os.fsencode(os.readlink(full))
        with open(full, "rb") as f:
            return f.read()
    return project.store.get(entry.oid)


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def unified(project, path: str, old: Entry | None, new: Entry | None, new_on_disk: bool) -> tuple[str, int, int]:
    """(diff text, lines added, lines removed)."""
    label = render.display_path(path)
    a = _content(project, old, path, False)
    b = _content(project, new, path, new_on_disk)
    head = f"diff {label}\n"
    if (old and old.kind == DIR) or (new and new.kind == DIR):
        # a directory's content is its entries, each a path of its own: nothing to show here
        # (its tree object is rewind's, never the person's text)
        def what(e: Entry) -> str:
            return "directory" if e.kind == DIR else "symlink" if e.kind == LINK else "file"
        if old is None:
            return head + f"(new {what(new)})\n", 0, 0
        if new is None:
            return head + f"({what(old)} removed)\n", 0, 0
        return head + f"({what(old)} -> {what(new)})\n", 0, 0
    if (old and old.kind == LINK) or (new and new.kind == LINK):
        lines = []
        if old is not None:
            lines.append(f"-{'symlink -> ' + os.fsdecode(a) if old.kind == LINK else '(file)'}\n")
        if new is not None:
            lines.append(f"+{'symlink -> ' + os.fsdecode(b) if new.kind == LINK else '(file)'}\n")
        return head + "".join(lines), 1 if new else 0, 1 if old else 0
    if a is None or b is None:
        return head + "(too large to store: content not compared)\n", 0, 0
    ta, tb = _text(a), _text(b)
    if ta is None or tb is None:
        return head + f"Binary files differ ({len(a)} -> {len(b)} bytes)\n", 0, 0
    if old and new and old.oid == new.oid and old.mode != new.mode:
        return head + f"mode {old.mode:o} -> {new.mode:o}\n", 0, 0
    body = list(difflib.unified_diff(ta, tb, render.display_path(path, "a/") if old else "/dev/null",
                                     render.display_path(path, "b/") if new else "/dev/null", n=3))
    added = sum(1 for line in body if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in body if line.startswith("-") and not line.startswith("---"))
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body)
    return text, added, removed


def diff_cmd_impl(spec, spec2, stat: bool, name_only: bool, as_json: bool, project_dir: Optional[str]) -> None:
    if stat and name_only:
        raise RewindError("--stat and --name-only do not go together")
    project = project_for(project_dir)
    try:
        paths = project_paths(project, paths_after_dashes())
        keep = path_filter(paths)
        cp = resolve_checkpoint(project, spec, LOOK_WAIT_S)
        sources = {}
        if spec2 is not None:
            cp2 = resolve_checkpoint(project, spec2, LOOK_WAIT_S)
            load = TreeLoader(project.store)
            new_root, on_disk, to_label = cp2.tree, False, cp2.number
        else:
            cp2 = project.catalog.next_after(project.id, cp.number)
            if cp2 is not None:
                load = TreeLoader(project.store)
                new_root, on_disk, to_label = cp2.tree, False, cp2.number
            else:
                current = working_scan(project)
                load = TreeLoader(project.store, current.trees)
                new_root, on_disk, to_label = current.root, True, None
            sources = {c.path: c for c in changes_under(project, cp)}
        pairs = [(path, old, new) for path, old, new in diff_trees(load, cp.tree, new_root) if keep(path)]
        rows = change_rows(pairs)
        if name_only:
            if as_json:
                render.emit_json([r.path for r in rows])
            else:
                for r in rows:
                    render.out(render.display_path(r.path))
            return
        results = []
        for (path, old, new), row in zip(pairs, rows):
            try:
                text, added, removed = unified(project, path, old, new, on_disk)
            except (OSError, CorruptObject) as e:
                text, added, removed = f"diff {render.display_path(path)}\n(cannot read: {e})\n", 0, 0
            known = sources.get(path)
            results.append(FileDiff(row, known, text, added, removed))
        if as_json:
            render.emit_json({"from": cp.number, "to": to_label, "changes": [
                {"path": row.path, "status": row.status, "flags": row.flags,
                 "source": known.source if known else None, "tool": known.tool if known else None,
                 "command": known.command if known else None,
                 "additions": added, "deletions": removed, "diff": text}
                for row, known, text, added, removed in results]})
            return
        if stat:
            # columns aligned as git's --stat aligns them: paths by their width on screen, the
            # counts right-aligned, the source after them
            shown = [render.display_path(r.row.path) for r in results]
            width = max((render.cells(p) for p in shown), default=0)
            plus = max((len(str(r.added)) for r in results), default=1) + 1
            minus = max((len(str(r.removed)) for r in results), default=1) + 1
            for path, (row, known, _, added, removed) in zip(shown, results):
                src = f"  [{known.source}]" if known else ""
                pad = " " * (width - render.cells(path))
                render.out(f" {path}{pad} | {'+' + str(added):>{plus}} {'-' + str(removed):>{minus}}{src}")
            n, ins, dels = len(results), sum(r.added for r in results), sum(r.removed for r in results)
            render.out(f" {n} path{'' if n == 1 else 's'} changed, {ins} insertion{'' if ins == 1 else 's'}(+), "
                       f"{dels} deletion{'' if dels == 1 else 's'}(-)")
            return
        full = "".join(r.text for r in results)
        if not full:
            render.out("no differences")
        elif render.fancy():
            from rich.syntax import Syntax
            render.console().print(Syntax(full, "diff", theme="ansi_dark", background_color="default"))
        else:
            import sys
            sys.stdout.write(full)
    finally:
        project.close()


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_cmd(checkpoint: CheckpointArg,
                 checkpoint2: Optional[IdSpec] = typer.Argument(None, parser=parse_second_id, autocompletion=complete_id, metavar="[ID2]",
                                                             help="Compare with this checkpoint instead."),
                 stat: bool = typer.Option(False, "--stat", help="Lines added and removed per path."),
                 name_only: bool = typer.Option(False, "--name-only", help="Only the paths."),
                 as_json: JsonOpt = False,
                 project: ProjectOpt = None,
                 no_pager: NoPagerOpt = False):
        """What changed after checkpoint ID (to the next one, or to the working tree), or
        between ID and ID2. Limit it to paths with `-- PATH...`."""
        with render.paged(no_pager or as_json):
            diff_cmd_impl(checkpoint, checkpoint2, stat, name_only, as_json, project)
