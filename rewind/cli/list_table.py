"""The two layouts of `rewind list`: aligned plain columns (piped, NO_COLOR) and a rich table
(a terminal). Both give a checkpoint one line at any width: the prompt is the column that
gives way, so a long count or a long prompt never wraps a row or pushes the next column, and
the counts are cut only when the prompt would keep less than PROMPT_MIN. A row's badges open
its prompt column: a row without any gives up no room for them."""

from __future__ import annotations

from rewind.cli import pending_view, render
from rewind.cli.list_view import LEGEND, badges, counts_text, describe
from rewind.model import ChangeRow, Checkpoint
from rewind.structs import dataclass

PROMPT_MIN = 20     # the prompt keeps at least this much; the counts column gives way first
COUNTS_MIN = 12
PROJECT_MAX = 24    # with --all, a project's path shows its tail


@dataclass
class Row:
    cp: Checkpoint
    changes: list[ChangeRow]
    project: str | None = None      # set with --all
    fold: str | None = None         # the lines ("\n") naming the checkpoints folded under this one
    folded_under: int | None = None  # for --json: the checkpoint this one folds under


def _cells(row: Row, with_project: bool) -> list[str]:
    """The fixed columns' cells; the badges open the prompt's (a row without any gives up
    no room for them)."""
    project = [_tail(render.display_path(row.project or ""), PROJECT_MAX)] if with_project else []
    return project + [str(row.cp.number), render.age(row.cp.created_at), row.cp.kind, _counts(row)]


def _widths(table: list[list[str]], heads: list[str], width: int) -> list[int]:
    """Each fixed column as wide as its widest cell; the prompt keeps PROMPT_MIN, and when
    that does not fit, the counts give way first (never below COUNTS_MIN)."""
    if not table:
        return [render.cells(h) for h in heads]
    widths = [max([render.cells(h) for h in heads[i:i + 1]] + [render.cells(c[i]) for c in table])
              for i in range(len(table[0]))]
    counts = len(widths) - 1
    over = sum(w + 2 for w in widths) + PROMPT_MIN - width
    if over > 0:
        widths[counts] = max(COUNTS_MIN, widths[counts] - over)
    return widths


def _badges(row: Row) -> list[tuple[str, str]]:
    return pending_view.marks(row.cp) + badges(row.changes, sources=False)


def _counts(row: Row) -> str:
    return pending_view.PENDING_COUNTS if pending_view.is_pending(row.cp) else counts_text(row.changes)


def _tail(text: str, room: int) -> str:
    return text if len(text) <= room else "…" + text[len(text) - room + 1:]


def plain_lines(rows: list[Row], with_project: bool) -> list[str]:
    """One line per checkpoint, columns as wide as their widest cell, the prompt in what is
    left of the width (render.width); a fold line under its checkpoint, from the kind column."""
    width = render.width()
    table = [_cells(row, with_project) for row in rows]
    widths = _widths(table, [], width)
    kind = len(widths) - 2
    right = {0, 1} if not with_project else {1, 2}       # the id and the age, right-aligned
    lines = []
    for row, cells in zip(rows, table):
        parts = []
        for i, (cell, w) in enumerate(zip(cells, widths)):
            cell = render.clip(cell, w)
            pad = " " * (w - render.cells(cell))
            parts.append(pad + cell if i in right else cell + pad)
        marks = "".join(f"[{label}] " for label, _ in _badges(row))
        line = "  ".join(parts) + "  " + marks + describe(row.cp)
        lines.append(render.clip(line.rstrip(), width))
        if row.fold:
            indent = sum(w + 2 for w in widths[:kind])
            lines += [render.clip(" " * indent + fold, width) for fold in row.fold.split("\n")]
    return lines


LEGEND_SEEN = "legend-seen"     # in the data dir: the terminal session that was last shown the legend


def legend_due() -> bool:
    """The legend under `rewind list` once per terminal session (`rewind list --help` has it
    always): a person reads it once, then it is noise under every listing. The session is
    the process session of the shell (getsid), told apart across reboots by the boot id."""
    import os
    from rewind import locations
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    mark = f"{boot}:{os.getsid(0)}"
    path = os.path.join(locations.data_dir(), LEGEND_SEEN)
    try:
        with open(path) as f:
            if f.read() == mark:
                return False
    except OSError:
        pass
    try:
        from rewind.fsutil import atomic_write
        atomic_write(path, mark.encode())
    except OSError:
        pass            # a read-only data dir: the legend each time, as before
    return True


def print_legend() -> None:
    """What the sources mean, under the list: dim on a terminal (rich wraps it), broken
    between its entries to fit the width in plain text."""
    if render.fancy():
        from rich.text import Text
        render.console().print(Text(LEGEND, style="dim"))
        return
    width = render.width()
    lines = [""]
    for entry in LEGEND.split(" · "):
        joined = f"{lines[-1]} · {entry}" if lines[-1] else entry
        if render.cells(joined) <= width or not lines[-1]:
            lines[-1] = joined
        else:
            lines.append(entry)
    for line in lines:
        render.out(render.clip(line, width))


def print_table(rows: list[Row], with_project: bool) -> None:
    """The rich table: every column on one line; the prompt takes the rest of the width and
    ends in an ellipsis when it does not fit; a fold line sits in the prompt column, dim."""
    from rich.table import Table
    from rich.text import Text
    heads = (["project"] if with_project else []) + ["id", "age", "kind", "changes after"]
    cells = [_cells(row, with_project) for row in rows]
    widths = _widths(cells, heads, render.console().width)
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    for col, w in zip(heads, widths):
        table.add_column(col, no_wrap=True, overflow="ellipsis", width=w,
                         justify="right" if col in ("id", "age") else "left")
    table.add_column("prompt / message", no_wrap=True, overflow="ellipsis", ratio=1)
    blank = [""] * (len(table.columns) - 1)
    for row, fixed in zip(rows, cells):
        table.add_row(*fixed[:-4], Text(fixed[-4], style="bold"), *fixed[-3:], _marks(row) + Text(describe(row.cp)))
        for fold in row.fold.split("\n") if row.fold else ():
            table.add_row(*blank, Text(fold, style="dim"))
    render.console().print(table)


def _marks(row: Row):
    """The badges as reversed labels, each followed by a space (Text: a label is never read
    as markup)."""
    from rich.text import Text
    text = Text()
    for label, style in _badges(row):
        text.append(f" {label} ", style=f"bold {style} reverse")
        text.append(" ")
    return text
