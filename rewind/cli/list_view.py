"""How a checkpoint reads in a listing: its prompt or message, its change counts, its badges,
and who wrote what a restore put back. Shared by list, show, to and the picker."""

from __future__ import annotations

from collections import Counter

from rewind.cli import render
from rewind.model import ChangeRow, Checkpoint

# what a reader must notice, in the order badges are shown
BADGES = (("bash", "bash", "yellow"), ("external", "external", "magenta"),
          ("symlink", "symlink", "cyan"), ("large", "not restorable", "red"),
          ("outside", "outside", "red"), ("ignored", "ignored", "red"),
          ("hardlink", "hardlink", "blue"), ("git", "git moved", "blue"))
LEGEND = ("tool = the agent's edit tools · bash = its shell commands · external = someone else "
          "(editor, other process) · rewind = a restore · unknown = no hook saw it")


def counts_text(changes: list[ChangeRow]) -> str:
    if not changes:
        return "no changes"
    by = Counter(c.source for c in changes)
    return ", ".join(f"{n} {src}" for src, n in sorted(by.items(), key=lambda kv: -kv[1]))


def badges(changes: list[ChangeRow]) -> list[tuple[str, str]]:
    sources = {c.source for c in changes}
    flags = {f for c in changes for f in c.flags}
    return [(label, style) for key, label, style in BADGES if key in sources or key in flags]


def describe(cp: Checkpoint) -> str:
    """The checkpoint's prompt or message, one line safe for a terminal."""
    if cp.kind == "prompt":
        return render.safe(cp.message)
    if cp.kind == "rewind":
        return render.safe(cp.message) or f"before rewind to {cp.restore_target}"
    return render.safe(cp.message) or "(saved by hand)"


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
