"""The ring and the retention: which checkpoints a project keeps, and why.

`decide()` is pure (the clock is an argument). `enforce()` applies it to the catalog,
catalog rows only, so a hook can afford it at every checkpoint; the objects that only
dropped checkpoints referenced are swept later by gc.

Rules, newest first:
- the newest `ring_size` checkpoints are kept, every kind counted;
- a checkpoint older than `retention_days` is dropped, however few there are: the
  retention is a promise that older content is gone;
- while the newest checkpoint is a rewind's safety checkpoint, the checkpoint that rewind
  restored is kept, ring or age: a rewind into a full ring never evicts its own target
  (the ring is one over until the next checkpoint).
"""

from __future__ import annotations

from collections import namedtuple

from .config import Settings
from .record import dataclass

CheckpointAge = namedtuple("CheckpointAge", "number created_ns kind restore_target")


@dataclass(frozen=True)
class Verdict:
    number: int
    keep: bool
    reason: str


def decide(checkpoints: list[CheckpointAge], now_ns: int, ring_size: int,
           retention_ns: int) -> list[Verdict]:
    """A verdict for each checkpoint, newest first."""
    ordered = sorted(checkpoints, key=lambda c: c.number, reverse=True)
    pinned = None
    if ordered and ordered[0].kind == "rewind" and ordered[0].restore_target is not None:
        pinned = ordered[0].restore_target
    days = retention_ns / 86400e9
    out = []
    for rank, cp in enumerate(ordered):
        if cp.number == pinned:
            out.append(Verdict(cp.number, True, "restored by the newest rewind"))
        elif cp.created_ns < now_ns - retention_ns:
            out.append(Verdict(cp.number, False, f"older than {days:g} days"))
        elif rank >= ring_size:
            out.append(Verdict(cp.number, False, f"beyond the newest {ring_size}"))
        else:
            out.append(Verdict(cp.number, True, f"among the newest {ring_size}"))
    return out


def enforce(catalog, project_id: int, settings: Settings, now_ns: int,
            dry_run: bool = False) -> list[Verdict]:
    """Drop what the policy drops (inside the caller's transaction, or its own). Returns
    the dropped verdicts. Cheap when nothing is due: one indexed query."""
    rows = [CheckpointAge(*r) for r in catalog.retention_rows(project_id)]
    dropped = [v for v in decide(rows, now_ns, settings.ring_size, settings.retention_ns) if not v.keep]
    if dropped and not dry_run:
        catalog.drop_checkpoints(project_id, [v.number for v in dropped])
    return dropped
