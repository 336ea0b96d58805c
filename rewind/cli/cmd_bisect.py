"""rewind bisect: find the first checkpoint at which a command fails, and the prompt that
broke it (history/bisect.py does the search in a scratch copy; the project is only read)."""

from __future__ import annotations

import os
import shlex
import signal
import time
from typing import Optional

import typer

from rewind.capture.changes import changes_under
from rewind.cli import render
from rewind.cli.argv import paths_after_dashes
from rewind.cli.common import project_for, project_paths, resolve_checkpoint
from rewind.cli.ids import complete_id, parse_id
from rewind.cli.list_view import describe
from rewind.cli.options import JsonOpt, ProjectOpt
from rewind.errors import RewindError, UsageError
from rewind.history.bisect import BAD, GOOD, SKIP, BisectRefused, Candidate, bisect, candidates, clean_leftovers
from rewind.lock import try_lock
from rewind.store.sweep import GC_LOCK
from rewind.store.treediff import entry_at

GC_WAIT_S = 120.0


def _end(value: str | None):
    if value is None or value.strip() == "now":
        return None if value is None else "now"
    try:
        return parse_id(value)
    except typer.BadParameter:
        raise UsageError(f"{value!r} is not a checkpoint id (N, last, last~N) nor `now`") from None


def _now_tree(project) -> str:
    """The tree as it is, stored (the scan every command makes; the project is only read)."""
    from rewind.capture.pending import locked_completing
    from rewind.capture.working_copy import Scan
    tick = render.progress("bisect")
    try:
        with locked_completing(project) as wc:
            scanned = wc.scan(Scan.full(tick))
            wc.commit(scanned)
            return scanned.result.root
    finally:
        if tick is not None:
            tick.close()


def _pin(home: str) -> int:
    """gc's lock, held for the whole bisect: nothing it reads can be swept meanwhile."""
    deadline = time.monotonic() + GC_WAIT_S
    while True:
        fd = try_lock(home, GC_LOCK)
        if fd is not None:
            return fd
        if time.monotonic() > deadline:
            raise RewindError("a gc has been running for two minutes; the bisect needs the store as it is",
                              hint="run the bisect again once it is done (`rewind status` says)")
        time.sleep(0.2)


def _label(c: Candidate) -> str:
    if c.checkpoint is None:
        return "now"
    cp = c.checkpoint
    return f"checkpoint {cp.number} ({cp.kind}: {render.short(describe(cp), 40)})"


def bisect_impl(good_s: Optional[str], bad_s: Optional[str], links: list[str], timeout: Optional[float],
                project_dir: Optional[str], as_json: bool) -> None:
    cmd = paths_after_dashes()
    if not cmd:
        raise UsageError("give the command to run after `--` (rewind bisect -- pytest -q)")
    if timeout is not None and timeout <= 0:
        raise UsageError("--timeout is a number of seconds above 0")
    good_spec, bad_spec = _end(good_s), _end(bad_s)
    if good_spec == "now":
        raise UsageError("GOOD is a checkpoint (`now` is only ever the bad end)")
    project = project_for(project_dir)
    try:
        clean_leftovers(project.home)
        cps = candidates(project)
        if not cps:
            raise RewindError("no prompt or manual checkpoint to bisect in this project",
                              hint="`rewind list` shows what there is; `rewind save` takes one")
        good = resolve_checkpoint(project, good_spec) if good_spec is not None else cps[0]
        bad = None if bad_spec in (None, "now") else resolve_checkpoint(project, bad_spec)
        for end, name in ((good, "GOOD"), (bad, "BAD")):
            if end is not None and end.kind not in ("prompt", "manual"):
                raise UsageError(f"{name} is checkpoint {end.number}, a safety checkpoint of a rewind: bisect "
                                 "tests prompt and manual checkpoints")
        if bad is not None and bad.number <= good.number:
            raise UsageError(f"BAD ({bad.number}) must come after GOOD ({good.number})")
        link_paths = [p for p in (project_paths(project, links) or [])]
        for given, p in zip(links, link_paths):
            if not p or not os.path.lexists(os.path.join(project.root, p)):
                raise RewindError(f"--link {given}: no such path in the project")
        chosen = [Candidate(cp, cp.tree) for cp in cps if good.number <= cp.number
                  and (bad is None or cp.number <= bad.number)]
        if bad is None:
            now = _now_tree(project)
            if now != chosen[-1].tree or len(chosen) == 1:
                chosen.append(Candidate(None, now))
        _check_links(project, link_paths, links, [chosen[0], chosen[-1]])
        pin = _pin(project.home)
        previous = signal.signal(signal.SIGTERM, _interrupt)
        tick = render.progress("bisect")
        try:
            result = bisect(project, chosen, 0, len(chosen) - 1, list(cmd), link_paths, timeout,
                            on_step=_closing(tick, None if as_json else _say_step), progress=tick)
        except KeyboardInterrupt:
            render.err("interrupted: the command's processes are stopped and its scratch copy removed; "
                       "the project was not changed")
            raise typer.Exit(130) from None
        except BisectRefused as e:
            if as_json:
                render.emit_json(_refused_json(project, e))
                raise typer.Exit(1)
            _say_tail(e.step)
            raise
        finally:
            if tick is not None:
                tick.close()
            signal.signal(signal.SIGTERM, previous)
            os.close(pin)
        _report(project, result, cmd, as_json)
    finally:
        project.close()


def _closing(tick, then):
    """The first step's bar goes once that step is done: the step lines follow."""
    def on_step(step, n, expected):
        if tick is not None and n == 1:
            tick.close()
        if then is not None:
            then(step, n, expected)
    return on_step


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _check_links(project, paths, given, ends) -> None:
    """A linked path must be one no checkpoint holds (an ignored one): a copy holds its own."""
    from rewind.capture.snapshot import TreeLoader
    load = TreeLoader(project.store)
    for g, p in zip(given, paths):
        for c in ends:
            if entry_at(load, c.tree, p) is not None:
                raise RewindError(f"--link {g}: {c.label} holds it, so every copy has its own; --link is for "
                                  "ignored paths (a .venv, node_modules, a build cache)")


def _say_step(step, n: int, expected: int) -> None:
    mark = {GOOD: "good", BAD: "bad", SKIP: "skip"}.get(step.verdict, "stop")
    render.out(f"step {n}/~{expected}: {_label(step.candidate)}: {mark} ({step.why}, {step.seconds:.1f} s)")


def output_line(line: str) -> str:
    """A line of CMD's output as a terminal only displays it, its indentation kept."""
    line = line.expandtabs(4).rstrip()
    indent = len(line) - len(line.lstrip(" "))
    return " " * indent + render.safe(line)


def _say_tail(step) -> None:
    if step.tail:
        render.err(f"its last lines of output at {step.candidate.label}:")
        for line in step.tail[-10:]:
            render.err(f"  | {output_line(line)}")


def _culprits(project, result) -> list[int]:
    """The checkpoints whose intervals lie between the last good and the first bad: what
    they changed made it fail (a rewind's safety checkpoint in between included)."""
    lo = result.last_good.number
    hi = result.first_bad.number
    return [cp.number for cp in sorted(project.catalog.checkpoints(project.id), key=lambda cp: cp.number)
            if cp.number >= lo and (hi is None or cp.number < hi)]


def _span(numbers: list[int]) -> str:
    return f"{numbers[0]}..{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])


def _report(project, result, cmd, as_json: bool) -> None:
    runs = len(result.steps)
    if result.first_bad is None:
        skipped = ", ".join(c.label for c in result.undecided)
        if as_json:
            render.emit_json({"first_bad": None, "last_good": result.last_good.number,
                              "undecided": [c.number for c in result.undecided], "runs": runs,
                              "steps": [_step_json(s) for s in result.steps], "missing": result.missing})
            raise typer.Exit(1)
        render.out(f"The first bad one is among: {skipped}, {result.last_good.label} passed, every one between "
                   "was skipped (exit 125 or timed out).")
        render.out("first bad: unknown")
        raise typer.Exit(1)
    culprits = _culprits(project, result)
    by_number = {cp.number: cp for cp in project.catalog.checkpoints(project.id)}
    changes = []
    for n in culprits:
        cp = by_number.get(n)
        if cp is not None:
            changes += [(n, c) for c in changes_under(project, cp)]
    fb = result.first_bad
    bad_step = next(s for s in reversed(result.steps) if s.candidate == fb)
    revert = f"rewind revert {_span(culprits)}"
    to = f"rewind to {culprits[0]}"
    if as_json:
        from rewind.cli.json_shapes import change_json
        render.emit_json({"first_bad": fb.number if fb.number is not None else "now",
                          "last_good": result.last_good.number, "culprits": culprits,
                          "prompt": by_number[culprits[0]].message if culprits[0] in by_number else None,
                          "changes": [dict(change_json(c), checkpoint=n) for n, c in changes],
                          "tail": bad_step.tail, "runs": runs, "steps": [_step_json(s) for s in result.steps],
                          "missing": result.missing, "revert": revert, "to": to,
                          "command": list(cmd)})
        return
    from rewind.cli.cmd_show import change_line
    first = by_number.get(culprits[0])
    render.out("")
    render.out(render.fit(f"{fb.label} fails; {result.last_good.label} passes: "
                          + (f"prompt {culprits[0]} broke it" if first is not None and first.kind == "prompt"
                             else f"what came after checkpoint {culprits[0]} broke it")
                          + (f" ({render.short(describe(first), 60)})" if first is not None else "") + "."))
    render.out(f"Its changes ({len(changes)}" + (f", checkpoints {_span(culprits)}" if len(culprits) > 1 else "")
               + "):")
    lines = [change_line(c) for _, c in changes[:50]]
    width = min(48, max((len(path) for _, path, _, _ in lines), default=0))
    for mark, path, who, flags in lines:
        render.out(f"  {mark} {path.ljust(width)}  [{who}]" + (f" {flags}" if flags else ""))
    if len(changes) > 50:
        render.out(f"  … and {len(changes) - 50} more (`rewind show {culprits[0]}`)")
    if bad_step.tail:
        render.out(f"The command's last lines at {fb.label}:")
        for line in bad_step.tail[-10:]:
            render.out(f"  | {output_line(line)}")
    if result.missing:
        render.out(f"Not in the copies (too large to have been stored): {', '.join(result.missing[:5])}")
    render.out(f"`{revert}` takes those changes back and keeps the rest; `{to}` goes back to the last good tree.")
    render.out(f"Found in {runs} runs of `{render.short(' '.join(shlex.quote(w) for w in cmd), 60)}`.")
    render.out(f"first bad: {fb.label}")


def _step_json(s) -> dict:
    return {"checkpoint": s.candidate.number, "result": s.verdict, "exit_code": s.code, "seconds": round(s.seconds, 3),
            "setup_seconds": round(s.setup_seconds, 3)}


def _refused_json(project, e: BisectRefused) -> dict:
    return {"first_bad": None, "error": e.message, "runs": 1, "steps": [_step_json(e.step)], "tail": e.step.tail}


def register(app: typer.Typer) -> None:
    @app.command("bisect")
    def bisect_cmd(good: Optional[str] = typer.Argument(None, metavar="[GOOD]", autocompletion=complete_id,
                                                        help="A checkpoint where the command passes (default: "
                                                             "the oldest)."),
                   bad: Optional[str] = typer.Argument(None, metavar="[BAD]", autocompletion=complete_id,
                                                       help="A checkpoint where it fails, or `now` (default)."),
                   link: Optional[list[str]] = typer.Option(None, "--link", metavar="PATH",
                                                            help="Link this ignored path of the project (a .venv, "
                                                                 "node_modules) into every copy (repeatable)."),
                   timeout: Optional[float] = typer.Option(None, "--timeout", metavar="S",
                                                           help="Seconds a run may take; a longer one is a skip."),
                   project: ProjectOpt = None,
                   as_json: JsonOpt = False):
        """Find the first checkpoint at which the command after `--` fails, and the prompt that broke it.
        CMD runs in a scratch copy of each checkpoint (never in the project): exit 0 good,
        125 skip, 1-127 bad, anything else stops."""
        bisect_impl(good, bad, link or [], timeout, project, as_json)
