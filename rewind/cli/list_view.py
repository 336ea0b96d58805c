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
# a badge in words, where the fold line has no column to explain it
FOLD_WORDS = {"symlink": "a symlink", "not restorable": "a file too large to restore",
              "outside": "a path outside the project", "ignored": "an ignored path",
              "unrecorded": "a path no longer recorded", "hardlink": "a hard link", "git moved": "git's HEAD"}
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


def fold_targets(cps: list[Checkpoint], undos: set[int] = frozenset()) -> dict[int, int]:
    """Where each rewind's safety checkpoint folds in the human list, so that the prompts
    stay in front however many restores there were: under the checkpoint whose tree the
    rewind restored. A rewind to a prompt (or a saved checkpoint) folds under it; an undo
    (`undos`: the safety checkpoints of undos) goes back to before the rewind it undoes and
    folds where that one folds; a rewind to another rewind's safety checkpoint restored the
    tree as it was then, the work after the checkpoint before it, and folds under that
    checkpoint. One whose target has left the listings is not folded: it stays a row."""
    by_number = {cp.number: cp for cp in cps}
    plain = sorted(cp.number for cp in cps if cp.kind != "rewind")

    def before(number: int) -> Checkpoint | None:
        older = [n for n in plain if n < number]
        return by_number[older[-1]] if older else None

    def target_of(cp: Checkpoint, depth: int = 0) -> Checkpoint | None:
        # a target is always older; a row that says otherwise (a damaged catalog) is not followed
        if cp.restore_target is None or cp.restore_target >= cp.number or depth > 100:
            return None
        target = by_number.get(cp.restore_target)
        if target is None or target.kind != "rewind":
            return target
        if cp.number in undos:
            return target_of(target, depth + 1)
        return before(target.number)

    def task_prompt(cp: Checkpoint) -> Checkpoint | None:
        # a task's notice folds under the prompt that started the task
        target = by_number.get(cp.folds_under)
        return target if target is not None and target.number < cp.number and target.folds_under is None else None

    under = {}
    for cp in cps:
        target = target_of(cp) if cp.kind == "rewind" else task_prompt(cp) if cp.folds_under else None
        if target is not None:
            under[cp.number] = target.number
    return under


def fold_line(number: int, folded: list[tuple[Checkpoint, list[ChangeRow]]], undo_set: set[int] = frozenset()) -> str:
    """The lines under checkpoint `number` that stand for the checkpoints folded under it:
    one for its rewinds (`rewind_line`), one for each background task's notice."""
    rewinds = [f for f in folded if f[0].kind == "rewind"]
    lines = [rewind_line(rewinds, undo_set)] if rewinds else []
    for cp, under in sorted((f for f in folded if f[0].kind != "rewind"), key=lambda f: f[0].number):
        lines.append(task_line(cp, under))
    return "\n".join(lines)


def task_line(cp: Checkpoint, under: list[ChangeRow]) -> str:
    """A background task's notice, folded under the prompt that started the task: its id,
    what ended, and what the agent did after it."""
    notes = [render.safe(cp.message or "a background task ended")]
    changes = [c for c in under if "unrecorded" not in c.flags]
    if changes:
        notes.append(f"then {counts_text(changes)}")
    return f"↳ task done: {cp.number} ({'; '.join(notes)}, {render.age(cp.created_at)})"


def rewind_line(folded: list[tuple[Checkpoint, list[ChangeRow]]], undo_set: set[int] = frozenset()) -> str:
    """The line that stands for the rewinds folded under a checkpoint: their ids first (a
    narrow screen cuts the tail, not the ids), which of them were undos (back to before one
    of them: `undo_set`), what else happened after them, and what a reader must notice."""
    folded = sorted(folded, key=lambda f: f[0].number)
    ids = [str(cp.number) for cp, _ in folded]
    undos = [str(cp.number) for cp, _ in folded if cp.number in undo_set]
    notes = [f"{', '.join(undos)} {'an undo' if len(undos) == 1 else 'undos'}"] if undos else []
    notes.append(f"newest {render.age(folded[-1][0].created_at)}")
    changes = Changes([c for _, under in folded for c in under],
                      next((u.git for _, u in folded if getattr(u, "git", None) is not None), None))
    others = [c for c in changes if c.source != "rewind"]
    if others:
        notes.append(f"then {counts_text(others)}")
    marks = badges(changes, sources=False)
    if marks:
        notes.append("changing " + ", ".join(FOLD_WORDS.get(label, label) for label, _ in marks))
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
        return f"put back from checkpoint {r.get('checkpoint')} (who wrote it is not known: before rewind recorded it)"
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
