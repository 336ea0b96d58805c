"""Pending checkpoints on the command line. A prompt that comes while the watcher's
first scan of a big tree runs is recorded at once, without its tree, and completed when that
scan is in (capture/pending.py). `list`, `show` and the picker show it as pending; a command
that needs its tree (`to`, `diff`, `export`) waits for it, with a status line on a terminal,
for a bounded time, and says why when it cannot have it. A checkpoint completed that way
tells which paths changed from outside the agent during the scan: their content is from
after the prompt (`stats["first_scan"]`), and `list` flags it, `show` names them."""

from __future__ import annotations

import os
import sys
import time

from rewind.cli import render
from rewind.errors import RewindError
from rewind.model import Checkpoint

# How long a command waits for a pending checkpoint: a restore is worth waiting for (a first
# scan of a big tree takes minutes); a look at it is not. REWIND_SETTLE_TIMEOUT overrides both.
TO_WAIT_S = 600.0
LOOK_WAIT_S = 60.0

PENDING = ("pending", "yellow")          # the badge of a checkpoint still being completed
NOT_EXACT = ("not exact", "magenta")     # of one whose scan saw changes from outside the agent
PENDING_COUNTS = "first scan running"    # in place of its change counts (they are not known yet)
SHOW_PATHS = 20                          # changed_outside paths `show` lists


class WaitInterrupted(RewindError):
    exit_code = 130


def is_pending(cp: Checkpoint) -> bool:
    return bool(cp.stats.get("pending"))


def with_pending(project, cps: list[Checkpoint]) -> list[Checkpoint]:
    """`cps` (newest first) with the project's pending checkpoints among them, by number."""
    pending = project.catalog.pending(project.id)
    return sorted(cps + pending, key=lambda cp: cp.number, reverse=True) if pending else cps


def outside_count(cp: Checkpoint) -> int:
    first = cp.stats.get("first_scan") or {}
    return int(first.get("changed_outside_count") or len(first.get("changed_outside") or []))


def marks(cp: Checkpoint) -> list[tuple[str, str]]:
    """The checkpoint's own badges (before those of the changes after it)."""
    if is_pending(cp):
        return [PENDING]
    return [NOT_EXACT] if outside_count(cp) else []


def pending_lines(project, cp: Checkpoint) -> list[str]:
    """What `show` says of a pending checkpoint: who completes it, since when, what waits."""
    from rewind.capture.pending import first_scan_running
    from rewind.clock import iso
    running = first_scan_running(project)
    # when the scan began, if the catalog's watcher row tells; else when the prompt came
    row = project.catalog.watcher(project.id)
    began = row.baseline_ns if row else None
    since = f"{'running' if began else 'pending'} since {render.local_time(iso(began or cp.created_ns))}, " \
            f"{render.age_ns(began or cp.created_ns)}"
    then = "          its tree and the changes after it show once it is complete"
    if running:
        return [f"pending:  being completed by the watcher's first scan of the tree ({since})",
                f"{then}; `rewind to {cp.number}` waits for it"]
    return ["pending:  the watcher's first scan of the tree stopped before completing it; the next hook, or "
            f"`rewind to {cp.number}`, completes it", then]


def first_scan_lines(cp: Checkpoint) -> list[str]:
    """What `show` says of a checkpoint completed after its prompt by the first scan."""
    first = cp.stats.get("first_scan")
    if not first:
        return []
    by = ("the watcher's first scan of the tree" if first.get("by") == "watcher"
          else "a later hook (the watcher's first scan did not finish it)")
    done = first.get("completed_ns")
    after = f", {_duration((done - first.get('pending_ns', done)) / 1e9)} after the prompt" if done else ""
    lines = [f"first scan: the prompt came during the watcher's first scan; completed by {by}{after}"]
    count, paths = outside_count(cp), first.get("changed_outside") or []
    if count:
        lines.append(f"  {count} path(s) changed from outside the agent during that scan: what they held at the "
                     "prompt is not known, so the checkpoint holds their later content")
        lines += [f"    {render.display_path(p)}" for p in paths[:SHOW_PATHS]]
        if count > min(len(paths), SHOW_PATHS):
            lines.append(f"    … and {count - min(len(paths), SHOW_PATHS)} more (`rewind show {cp.number} "
                         "--json` lists up to 100)")
    if first.get("events_lost"):
        lines.append("  the watcher lost events during that scan: other paths may hold later content too")
    if first.get("note"):
        lines.append(f"  note: {render.safe(first['note'])}")
    return lines


def wait_limit(default_s: float) -> float:
    given = os.environ.get("REWIND_SETTLE_TIMEOUT")
    if not given:
        return default_s
    try:
        return max(0.0, float(given))
    except ValueError:
        raise RewindError(f"REWIND_SETTLE_TIMEOUT={given!r} is not a number of seconds") from None


def settled(project, cp: Checkpoint, default_s: float) -> Checkpoint:
    """Pending checkpoint `cp`, once complete: waited for (a spinner on a terminal, a line on
    stderr otherwise). Ctrl-C or the time limit: an error, and nothing was changed."""
    from rewind.capture.pending import settle
    limit = wait_limit(default_s)
    doing = f"checkpoint {cp.number} is being completed by the watcher's first scan of the tree"
    status = None
    if sys.stderr.isatty():
        status = render.err_console().status(f"{doing}…")
        status.start()
    else:
        render.err(f"rewind: {doing}; waiting for it (up to {_duration(limit)})")
    start = time.monotonic()

    def tick() -> None:
        if status is not None:
            status.update(f"{doing}… {_duration(time.monotonic() - start)}")
    try:
        done = settle(project, cp.number, limit, tick=tick)
    except KeyboardInterrupt:
        raise WaitInterrupted(f"interrupted while waiting for checkpoint {cp.number}: nothing was changed") from None
    finally:
        if status is not None:
            status.stop()
    if done is not None:
        return done
    done = project.catalog.checkpoint(project.id, cp.number)       # complete right at the limit
    if done is not None:
        return done
    if project.catalog.pending_one(project.id, cp.number) is not None:
        from rewind.capture.pending import first_scan_running
        why = ("is still being completed by the watcher's first scan of the tree"
               if first_scan_running(project) else
               "is still pending: the watcher's first scan stopped, and completing it here did not finish")
        raise RewindError(f"checkpoint {cp.number} {why} (waited {_duration(limit)}); nothing was changed",
                          hint="`rewind list` shows when it is complete; REWIND_SETTLE_TIMEOUT=SECONDS waits longer")
    raise RewindError(f"checkpoint {cp.number} is no longer pending and was not completed; nothing was changed",
                      hint="`rewind list` shows the checkpoints there are")


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
