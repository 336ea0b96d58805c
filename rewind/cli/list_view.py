"""How a checkpoint reads in a listing: its prompt or message, its change counts, its badges,
who wrote what a restore put back, and where a rewind's safety checkpoint folds. Shared by
list, show, to and the picker."""

from __future__ import annotations

from collections import Counter

from rewind.cli import render
from rewind.model import ChangeRow, Changes, Checkpoint, GitMove

# what a reader must notice, in the order badges are shown
BADGES = (("bash", "bash", "yellow"), ("external", "external", "magenta"),
          ("symlink", "symlink", "cyan"), ("large", "not restorable", "red"),
          ("outside", "outside", "red"), ("ignored", "ignored", "red"),
          ("unrecorded", "unrecorded", "red"),
          ("hardlink", "hardlink", "blue"), ("git", "git moved", "blue"))
LEGEND = ("tool = the agent's edit tools · bash = its shell commands · external = someone else "
          "(editor, other process) · rewind = a restore · unknown = no hook saw it")


def counts_text(changes: list[ChangeRow]) -> str:
    # a path that dropped out of recording was not changed by anyone: its badge says it
    changes = [c for c in changes if "unrecorded" not in c.flags]
    if not changes:
        return "no changes"
    by = Counter(c.source for c in changes)
    return ", ".join(f"{n} {src}" for src, n in sorted(by.items(), key=lambda kv: -kv[1]))


def badges(changes: list[ChangeRow], sources: bool = True) -> list[tuple[str, str]]:
    """(label, style) of what a reader must notice. `sources=False` leaves out the bash and
    external badges, for a view that prints counts_text beside them (`3 bash` already says it)."""
    seen = {c.source for c in changes} if sources else set()
    flags = {f for c in changes for f in c.flags}
    if getattr(changes, "git", None) is not None:
        flags.add("git")
    return [(label, style) for key, label, style in BADGES if key in seen or key in flags]


def describe(cp: Checkpoint) -> str:
    """The checkpoint's prompt or message, one line safe for a terminal."""
    if cp.kind == "prompt":
        return render.safe(cp.message)
    if cp.kind == "rewind":
        return render.safe(cp.message) or f"before rewind to {cp.restore_target}"
    return render.safe(cp.message) or "(saved by hand)"


def fold_targets(cps: list[Checkpoint]) -> dict[int, int]:
    """Where each rewind's safety checkpoint folds in the human list, so that the prompts
    stay in front however many restores there were: under the checkpoint the rewind went
    back to, followed through undos (an undo goes back to a safety checkpoint, which folds
    under its own target) to a prompt or a saved checkpoint. One whose target has left the
    listings is not folded: it stays a row of its own."""
    by_number = {cp.number: cp for cp in cps}
    under = {}
    for cp in cps:
        target: Checkpoint | None = cp
        # a target is always older; a row that says otherwise (a damaged catalog) is not followed
        while target is not None and target.kind == "rewind" and (target.restore_target or 0) < target.number:
            target = by_number.get(target.restore_target)
        if cp.kind == "rewind" and target is not None and target.kind != "rewind":
            under[cp.number] = target.number
    return under


def fold_line(number: int, folded: list[tuple[Checkpoint, list[ChangeRow]]]) -> str:
    """The line under checkpoint `number` that stands for the rewinds folded under it: their
    ids first (a narrow screen cuts the tail, not the ids), which of them were undos (back
    to before one of them), what else happened after them, and what a reader must notice."""
    folded = sorted(folded, key=lambda f: f[0].number)
    ids = [str(cp.number) for cp, _ in folded]
    undos = [str(cp.number) for cp, _ in folded if cp.restore_target != number]
    notes = [f"{', '.join(undos)} {'an undo' if len(undos) == 1 else 'undos'}"] if undos else []
    notes.append(f"newest {render.age(folded[-1][0].created_at)}")
    changes = Changes([c for _, under in folded for c in under],
                      next((u.git for _, u in folded if getattr(u, "git", None) is not None), None))
    others = [c for c in changes if c.source != "rewind"]
    if others:
        notes.append(f"then {counts_text(others)}")
    marks = badges(changes, sources=False)
    if marks:
        notes.append(" ".join(f"[{label}]" for label, _ in marks))
    return f"↳ {'rewinds' if len(ids) > 1 else 'rewind'} here: {', '.join(ids)} ({'; '.join(notes)})"


def restored_text(r: dict) -> str:
    """Who wrote the content a restore put back, in a few words."""
    by = r.get("source")
    if by == "tool" and r.get("tool"):
        by = f"the agent's {render.safe(r['tool'])}"
    elif by == "bash":
        by = f"the agent's bash ({render.short(r.get('command') or '', 30)})" if r.get("command") else "the agent's bash"
    elif by in ("external", "unknown"):
        by = "someone other than the agent" if by == "external" else "unknown"
    elif by is None:
        return f"put back from checkpoint {r.get('checkpoint')}, written before its history"
    return f"put back from checkpoint {r.get('checkpoint')}, written by {by}"


def git_line(move: GitMove) -> str:
    """A git move and who made it, one line: `branch main -> feature (HEAD 2c8cd3ac), by bash:
    git checkout -b feature`."""
    if move.source == "bash" and move.command:
        by = f"bash: {render.short(move.command, 60)}"
    elif move.source == "external":
        by = "someone other than the agent"
    else:
        by = move.source
    return f"{render.safe(move.text())}, by {by}"
