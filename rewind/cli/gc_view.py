"""What gc did, or would do (`--dry-run` renders the plan with the same lines)."""

from __future__ import annotations

from rewind.cli import render
from rewind.history import gc as gcmod


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def print_report(report: gcmod.GcReport) -> None:
    would = "would " if report.dry_run else ""
    for problem in report.config_problems:
        render.err(f"warning: {problem}")
    by_project: dict[str, list[dict]] = {}
    for d in report.dropped:
        by_project.setdefault(d["project"], []).append(d)
    for root, drops in by_project.items():
        reasons: dict[str, list[int]] = {}
        for d in drops:
            reasons.setdefault(d["reason"], []).append(d["number"])
        for reason, numbers in reasons.items():
            numbers.sort()
            shown = ", ".join(map(str, numbers[:12])) + (" …" if len(numbers) > 12 else "")
            render.out(f"{would}drop {plural(len(numbers), 'checkpoint')} of {root} ({reason}): {shown}")
    if report.held:
        render.err(f"note: {report.held}")
    if not report.dropped:
        render.out("no checkpoint is due to be dropped" if report.dry_run else "no checkpoint dropped")
    for h in report.hidden:
        render.out(f"{'would hide' if report.dry_run else 'hid'} checkpoint {h['number']} of {h['project']} "
                   f"({h['reason']})")
    render.out(f"{'would free' if report.dry_run else 'freed'} {plural(report.objects_swept, 'object')} "
               f"({render.human_size(report.bytes_swept)}); the store "
               f"{'holds now' if report.dry_run else 'now holds'} {plural(report.store_objects, 'object')} "
               f"({render.human_size(report.store_bytes)})")
    if report.objects_spared:
        render.out(f"  {report.objects_spared:,} unreferenced object(s) newer than this gc's start are kept "
                   "(a writer's, in flight)")
    if report.packs_merged:
        render.out(f"  {'would merge' if report.dry_run else 'merged'} {report.packs_merged} small packs into one")
    if report.packed_dead:
        render.out(f"  {report.packed_dead:,} unreferenced object(s) ({render.human_size(report.packed_dead_bytes)}) "
                   "stay in packs that hold referenced ones")
    if report.temp_files_removed:
        render.out(f"{would}remove {plural(report.temp_files_removed, 'temporary file')} left by killed writers")
    if not report.dry_run:
        render.out(f"took {report.seconds:.2f} s; hooks waited at most {report.seconds_exclusive:.2f} s of it "
                   "(the sweep)")
