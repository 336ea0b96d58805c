"""Output: one rich Console with markup off; plain text when piped or with NO_COLOR."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone

from rewind.clock import now_ns

_console = None
_err = None
COLOR: str = "auto"   # auto | always | never (set by --color)


def fancy() -> bool:
    """Rich tables and colours: a terminal, no NO_COLOR, or --color always."""
    if COLOR == "always":
        return True
    if COLOR == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def console():
    global _console
    if _console is None:
        from rich.console import Console
        _console = Console(markup=False, emoji=False, highlight=False,
                           force_terminal=True if COLOR == "always" else None,
                           no_color=not fancy())
    return _console


def err_console():
    global _err
    if _err is None:
        from rich.console import Console
        _err = Console(stderr=True, markup=False, emoji=False, highlight=False)
    return _err


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def emit_json(value) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def age(iso_time: str) -> str:
    try:
        t = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    except ValueError:
        return iso_time
    secs = max(0, now_ns() / 1e9 - t.replace(tzinfo=t.tzinfo or timezone.utc).timestamp())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit} ago"
    return f"{int(secs)}s ago"


def age_ns(ns: int) -> str:
    return age(datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat())


def local_time(iso_time: str) -> str:
    """An ISO time from the catalog as a person reads it: local, to the second."""
    try:
        t = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    except ValueError:
        return iso_time
    return t.replace(tzinfo=t.tzinfo or timezone.utc).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def width() -> int:
    """The columns plain output fits in: COLUMNS when set (as rich reads it), else the
    terminal's, else 80 (a pipe or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def cells(text: str) -> int:
    """How many columns `text` takes on a terminal (a CJK character or an emoji takes two)."""
    from rich.cells import cell_len
    return cell_len(text)


def fit(text: str, indent: str = "  ") -> str:
    """`text` wrapped at the terminal's width, at spaces, its later lines indented: on a
    terminal only, which would break a long line anywhere, mid-word; a pipe or a file gets
    each line whole, for whatever reads it."""
    if not sys.stdout.isatty():
        return text
    import textwrap
    room = width()
    return "\n".join(line if cells(line) <= room else
                     "\n".join(textwrap.wrap(line, width=room, subsequent_indent=indent,
                                             break_long_words=False, break_on_hyphens=False))
                     for line in text.split("\n"))


def clip(text: str, room: int) -> str:
    """`text` cut to `room` columns, with an ellipsis when something was cut."""
    if cells(text) <= room:
        return text
    from rich.cells import set_cell_size
    return set_cell_size(text, max(0, room - 1)) + "…" if room > 0 else ""


def safe(text: str | None) -> str:
    """Someone else's text (a prompt, a command, a tool name) as one line a terminal only
    displays: runs of whitespace become one space, and control characters (an escape
    sequence could clear the screen or redraw a restore plan above its question), lone
    surrogates and other unprintable characters are shown escaped (\\x1b, \\u202e)."""
    if not text:
        return ""
    one = " ".join(text.split())
    if one.isprintable():
        return one
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in one)


def short(text: str | None, width: int = 60) -> str:
    one = safe(text)
    return one if len(one) <= width else one[: width - 1] + "…"


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
              '"': '\\"', "\\": "\\\\"}


def display_path(path: str, prefix: str = "") -> str:
    """`prefix + path` as a person should see it, quoted as git quotes a path (with
    core.quotePath off): as it is when every character is printable and none is `"` or
    `\\`; else in double quotes with C escapes (\\n, \\t, \\", \\\\) and the bytes of any
    other unprintable character, or of bytes that are not UTF-8, in octal (\\033, \\377).
    So no two paths print alike (a newline shows as "a\\nb", a backslash and an n as
    "a\\\\nb"), a control character never reaches the terminal, and git's C unquoting reads
    either back to the exact name."""
    text = prefix + path
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    out = []
    for ch in text:
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            try:
                raw = ch.encode("utf-8", "surrogateescape")        # a byte that was not UTF-8
            except UnicodeEncodeError:
                raw = ch.encode("utf-8", "surrogatepass")
            out.extend(f"\\{b:03o}" for b in raw)
    return '"' + "".join(out) + '"'


def progress(label: str):
    """A progress callback `(phase, done, total)` that shows a bar on stderr once the work
    has taken more than a second (REWIND_PROGRESS_AFTER seconds), on a terminal only;
    returns None when there is no terminal to draw on."""
    import time
    if not sys.stderr.isatty() and COLOR != "always":
        return None
    after = float(os.environ.get("REWIND_PROGRESS_AFTER", "1.0"))
    start = time.monotonic()
    state: dict = {}

    def tick(phase: str, done: int, total: int) -> None:
        if "bar" not in state:
            if time.monotonic() - start < after:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), console=err_console(), transient=True)
            bar.start()
            state["bar"], state["tasks"] = bar, {}
        bar, tasks = state["bar"], state["tasks"]
        if phase not in tasks:
            tasks[phase] = bar.add_task(f"{label}: {phase}", total=total or None)
        bar.update(tasks[phase], completed=done, total=total or None)

    def close() -> None:
        if "bar" in state:
            state["bar"].stop()
    tick.close = close  # type: ignore[attr-defined]
    return tick


class paged:
    """On a terminal, what the command prints goes through $PAGER (default `less -FRX`:
    quits by itself when it fits one screen, keeps the colours). `disabled` (--no-pager), a
    pipe, or an empty PAGER print directly."""

    def __init__(self, disabled: bool = False):
        self.disabled = disabled
        self.buf = None

    def __enter__(self):
        global COLOR, _console
        pager = os.environ.get("PAGER", "less -FRX")
        if self.disabled or not sys.stdout.isatty() or not pager.strip():
            return self
        import io
        self.pager, self.old, self.old_color = pager, sys.stdout, COLOR
        try:
            self.columns = os.get_terminal_size(sys.stdout.fileno()).columns
        except OSError:
            self.columns = 100
        if fancy():
            COLOR = "always"
        _console = None
        self.buf = io.StringIO()
        sys.stdout = self.buf
        return self

    def __exit__(self, exc_type, exc, tb):
        global COLOR, _console
        if self.buf is None:
            return False
        sys.stdout = self.old
        COLOR, _console = self.old_color, None
        text = self.buf.getvalue()
        if text:
            import subprocess
            env = {**os.environ, "LESS": os.environ.get("LESS", "FRX"), "COLUMNS": str(self.columns)}
            try:
                subprocess.run(self.pager, shell=True, input=text, text=True, env=env)
            except (OSError, KeyboardInterrupt):
                sys.stdout.write(text)
        return False
