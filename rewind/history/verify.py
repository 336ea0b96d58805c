"""verify: every object reachable from every checkpoint exists and hashes right, and the
catalog's rows are sane (paths stay under the root)."""

from __future__ import annotations

from rewind.structs import dataclass, field
from collections.abc import Callable

from rewind.catalog.db import Catalog
from rewind.errors import CorruptObject
from rewind.store import tree as treemod
from rewind.store.objects import Store
from rewind.store.tree import DIR, LARGE


@dataclass
class Report:
    objects: int = 0
    problems: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _bad_path(path: str, flags: list[str]) -> bool:
    """A change row's path must be what the recorder writes. An edit tool's write outside
    the project (flag `outside`) is listed under its absolute path, never stored and never
    written back by a restore, so it is expected; it may even lie under the root when a
    symlink there led outside. Any other row claims a place inside the tree: relative, with
    no `..`. A relative path flagged `outside`, or an absolute one not so flagged, is
    damage."""
    if "outside" in flags:
        return not path.startswith("/") or "\0" in path or \
            any(part in ("", ".", "..") for part in path[1:].split("/"))
    return (not path or path.startswith("/") or "\0" in path
            or any(part in ("", ".", "..") for part in path.split("/")))


def verify(catalog: Catalog, store: Store, project_ids: list[int] | None = None,
           progress: Callable[[str, int, int], None] | None = None) -> Report:
    """Each problem names its object, what is wrong, and every checkpoint that needs the
    object (`checkpoints`; `checkpoint` is the first, as before). A pack that cannot be
    opened is a problem of its own, named."""
    report = Report()
    blobs: dict[str, int | None] = {}          # blob id -> its problem's index (None = fine)
    below: dict[str, list[int]] = {}           # tree id -> the problems at or below it

    def problem(oid: str, text: str) -> int:
        report.problems.append({"object": oid, "problem": text})
        return len(report.problems) - 1

    def blob(oid: str, what: str) -> list[int]:
        if oid not in blobs:
            try:
                store.get(oid)
                blobs[oid] = None
                report.objects += 1
            except CorruptObject as e:
                blobs[oid] = problem(oid, f"{what} {e.problem}")
        return [] if blobs[oid] is None else [blobs[oid]]

    def walk(oid: str, path: str) -> list[int]:
        if oid in below:
            return below[oid]
        found: list[int] = []
        try:
            data = store.get(oid)
            report.objects += 1
        except CorruptObject as e:
            found = [problem(oid, f"tree{f' {path!r}' if path else ''} {e.problem}")]
            below[oid] = found
            return found
        try:
            tree = treemod.parse(data)
        except ValueError as e:
            found = [problem(oid, f"tree does not parse: {e}")]
            below[oid] = found
            return found
        for name, e in tree.items():
            sub = f"{path}/{name}" if path else name
            if e.kind == DIR:
                found += walk(e.oid, sub)
            elif e.kind != LARGE:
                found += blob(e.oid, f"blob {sub!r}")
        below[oid] = sorted(set(found))
        return below[oid]

    pids = project_ids if project_ids is not None else [pid for pid, _ in catalog.projects()]
    cps = [cp for pid in pids for cp in catalog.checkpoints(pid)]
    for i, cp in enumerate(cps):
        for index in walk(cp.tree, ""):
            p = report.problems[index]
            p.setdefault("checkpoint", cp.number)
            p.setdefault("checkpoints", [])
            if cp.number not in p["checkpoints"]:
                p["checkpoints"].append(cp.number)
        if progress:
            progress("checkpoints", i + 1, len(cps))
    store.packs()
    for name, why in sorted(store.damaged_packs.items()):
        report.problems.append({"pack": name, "problem": f"cannot be read ({why}): the objects it held "
                                                         "are missing unless stored elsewhere"})
    for pid, number, p, flags in catalog.change_paths(pids):
        if _bad_path(p, flags):
            what = "flagged outside whose path is not a clean absolute one" if "outside" in flags else \
                "with a path outside the project"
            report.problems.append({"checkpoint": number, "problem": f"change row {what}: {p!r}"})
    return report


def damaged_checkpoints(report: Report) -> list[int]:
    """The checkpoints a restore could not give back whole."""
    return sorted({n for p in report.problems if "object" in p for n in p.get("checkpoints", [])})
