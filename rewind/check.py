"""verify: every object reachable from every checkpoint exists and hashes right, and the
catalog's rows are sane (paths stay under the root)."""

from __future__ import annotations

import os
from .record import dataclass, field
from collections.abc import Callable

from . import tree as treemod
from .catalog import Catalog
from .errors import CorruptObject
from .objects import Store
from .tree import DIR, LARGE


@dataclass
class Report:
    objects: int = 0
    problems: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _bad_path(path: str) -> bool:
    return (not path or path.startswith("/") or "\0" in path
            or any(part in ("", ".", "..") for part in path.split("/")))


def verify(catalog: Catalog, store: Store, project_ids: list[int] | None = None,
           progress: Callable[[str, int, int], None] | None = None) -> Report:
    report = Report()
    checked: dict[str, str | None] = {}   # id -> problem (None = fine)

    def check(oid: str, what: str) -> bytes | None:
        if oid in checked:
            return None
        try:
            data = store.get(oid)
        except CorruptObject as e:
            checked[oid] = e.problem
            report.problems.append({"object": oid, "problem": f"{what} {e.problem}"})
            return None
        checked[oid] = None
        report.objects += 1
        return data

    def walk(oid: str, path: str) -> None:
        data = check(oid, "tree" + (f" {path!r}" if path else ""))
        if data is None:
            return
        try:
            tree = treemod.parse(data)
        except ValueError as e:
            report.problems.append({"object": oid, "problem": f"tree does not parse: {e}"})
            return
        for name, e in tree.items():
            sub = f"{path}/{name}" if path else name
            if e.kind == DIR:
                walk(e.oid, sub)
            elif e.kind != LARGE:
                check(e.oid, f"blob {sub!r}")

    pids = project_ids if project_ids is not None else [pid for pid, _ in catalog.projects()]
    cps = [cp for pid in pids for cp in catalog.checkpoints(pid)]
    for i, cp in enumerate(cps):
        before = len(report.problems)
        walk(cp.tree, "")
        for p in report.problems[before:]:
            p.setdefault("checkpoint", cp.number)
        if progress:
            progress("checkpoints", i + 1, len(cps))
    placeholders = ",".join("?" * len(pids)) or "NULL"
    for pid, number, path in catalog.db.execute(
            f"SELECT project_id, number, path FROM changes WHERE project_id IN ({placeholders})", pids):
        p = os.fsdecode(path)
        if _bad_path(p):
            report.problems.append({"checkpoint": number,
                                    "problem": f"change row with a path outside the project: {p!r}"})
    return report
