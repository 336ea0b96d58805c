"""The ring and the retention: which checkpoints a project keeps, hides or drops, and why.

`decide()` is pure (the clock is an argument). `enforce()` applies it to the catalog,
catalog rows only, so a hook can afford it at every checkpoint; the objects that only
dropped checkpoints referenced are swept later by gc.

Rules, newest first:
- the newest `ring_size` checkpoints are kept, every kind counted, hidden ones too; older
  ones are dropped at once (the ring does not depend on the clock);
- a checkpoint older than `retention_days` leaves the listings at once (hidden), however
  few there are: the retention is a promise that older content goes. It is deleted only by
  a gc at least a day after rewind first saw it expired, with the clock still saying so: a
  clock that jumps ahead for one command destroys nothing, and one that comes back brings
  the checkpoint back. Nothing expires on a clock earlier than the newest checkpoint;
- a shortened `ring_size` or `retention_days` (an agent can write `.rewind.toml`) hides
  what it would drop and deletes nothing until the user runs `rewind gc`; a setting that
  did not change evicts as usual. What was applied last is remembered per project;
- the saves an agent's tool ran (`rewind save` from its shell) count in a ring of their
  own, of the same size: a loop of them never pushes the person's checkpoints out;
- while the newest checkpoint is a rewind's safety checkpoint, the checkpoint that rewind
  restored is kept, ring or age: a rewind into a full ring never evicts its own target
  (the ring is one over until the next checkpoint).
"""

from __future__ import annotations

import json

from rewind.config import Settings
from rewind.model import CheckpointAge
from rewind.structs import dataclass

CONFIRM_NS = 86400 * 10**9        # an expiry must hold this long before gc deletes


@dataclass(frozen=True)
class Verdict:
    number: int
    keep: bool
    reason: str
    hide: bool = False            # not kept in the listings, but not deleted yet


@dataclass(frozen=True)
class Applied:
    """The ring and retention last applied in full to a project (None: never)."""
    ring_size: int | None = None
    retention_ns: int | None = None


def decide(checkpoints: list[CheckpointAge], now_ns: int, ring_size: int, retention_ns: int,
           applied: Applied = Applied(), confirm: bool = False, apply_shortened: bool = False) -> list[Verdict]:
    """A verdict for each checkpoint, newest first. `confirm`: a gc, which may delete what
    expired at least CONFIRM_NS ago; `apply_shortened`: the user's own gc, which applies a
    shortened setting."""
    ordered = sorted(checkpoints, key=lambda c: c.number, reverse=True)
    pinned = None
    if ordered and ordered[0].kind == "rewind" and ordered[0].restore_target is not None:
        pinned = ordered[0].restore_target
    newest_ns = max((c.created_ns for c in ordered), default=0)
    clock_sane = now_ns >= newest_ns
    ring_short = applied.ring_size is not None and ring_size < applied.ring_size and not apply_shortened
    age_short = (applied.retention_ns is not None and retention_ns < applied.retention_ns
                 and not apply_shortened)
    days = retention_ns / 86400e9
    out = []
    ranks = {False: 0, True: 0}
    for cp in ordered:
        mine = bool(cp.by_agent)
        rank, ranks[mine] = ranks[mine], ranks[mine] + 1
        if cp.number == pinned:
            out.append(Verdict(cp.number, True, "restored by the newest rewind"))
        elif rank >= ring_size:
            if ring_short and rank < applied.ring_size:
                out.append(Verdict(cp.number, False, f"beyond the newest {ring_size} (ring_size was shortened: "
                                                     "kept until you run `rewind gc`)", hide=True))
            else:
                out.append(Verdict(cp.number, False, f"beyond the newest {ring_size}"))
        elif clock_sane and cp.created_ns < now_ns - retention_ns:
            if age_short and cp.created_ns >= now_ns - applied.retention_ns:
                out.append(Verdict(cp.number, False, f"older than {days:g} days (retention_days was shortened: "
                                                     "kept until you run `rewind gc`)", hide=True))
            elif confirm and cp.hidden_ns is not None and now_ns - cp.hidden_ns >= CONFIRM_NS:
                out.append(Verdict(cp.number, False, f"older than {days:g} days"))
            else:
                out.append(Verdict(cp.number, False, f"older than {days:g} days", hide=True))
        else:
            out.append(Verdict(cp.number, True, f"among the newest {ring_size}"))
    return out


def _applied(catalog, project_id: int) -> Applied:
    try:
        got = json.loads(catalog.meta(f"applied-settings:{project_id}") or "{}")
        return Applied(got.get("ring_size"), got.get("retention_ns"))
    except (ValueError, AttributeError):
        return Applied()


def enforce(catalog, project_id: int, settings: Settings, now_ns: int, dry_run: bool = False,
            confirm: bool = False, apply_shortened: bool = False) -> list[Verdict]:
    """Apply the policy (inside the caller's transaction, or its own): drop, hide, or show
    again what the clock no longer expires. Returns what changes: the verdicts that drop,
    newly hide or show again (and one numbered 0 when the applied settings move on)."""
    ages = catalog.retention_rows(project_id)
    was_hidden = {a.number: a.hidden_ns for a in ages if a.hidden_ns is not None}
    applied = _applied(catalog, project_id)
    verdicts = decide(ages, now_ns, settings.ring_size, settings.retention_ns, applied, confirm, apply_shortened)
    dropped = [v for v in verdicts if not v.keep and not v.hide]
    hide = {v.number: (now_ns, v.reason) for v in verdicts if v.hide and v.number not in was_hidden}
    show = [v.number for v in verdicts if v.keep and v.number in was_hidden]
    new_applied = Applied(
        settings.ring_size if applied.ring_size is None or settings.ring_size >= applied.ring_size or apply_shortened
        else applied.ring_size,
        settings.retention_ns if applied.retention_ns is None or settings.retention_ns >= applied.retention_ns
        or apply_shortened else applied.retention_ns)
    if not dry_run and (dropped or hide or show or new_applied != applied):
        catalog.drop_checkpoints(project_id, [v.number for v in dropped])
        catalog.set_hidden(project_id, hide, show)
        if new_applied != applied:
            catalog.set_meta(f"applied-settings:{project_id}",
                             json.dumps({"ring_size": new_applied.ring_size, "retention_ns": new_applied.retention_ns}))
    out = dropped + [v for v in verdicts if v.number in hide or v.number in show]
    if new_applied != applied:
        out.append(Verdict(0, True, "settings applied"))
    return out
