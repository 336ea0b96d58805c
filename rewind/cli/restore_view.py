"""What `rewind to` and `rewind undo` show: the plan, who last changed what it overwrites
(authors.py finds them), the question before anything is written, and what the rewind did
or left alone."""

from __future__ import annotations

import sys

import typer

from rewind.capture.snapshot import TreeLoader
from rewind.cli import render
from rewind.cli.authors import (AGENT_SOURCES, author, authors_since, changes_since, first_author, latest_changes,
                                who_all, wrote)
from rewind.cli.json_shapes import KIND_NAMES
from rewind.errors import PathsChangedDuringRestore, Refused, RestoreIncomplete
from rewind.history.effects import not_undone
from rewind.history.restore_apply import file_mode
from rewind.history.restore_plan import RestorePlan
from rewind.model import ChangeRow
from rewind.store.tree import FILE
from rewind.store.treediff import entry_at
from rewind.structs import dataclass, field


def paths_phrase(n: int) -> str:
    return f"{n} path" if n == 1 else f"{n} paths"


@dataclass
class PlanView:
    """What a plan shows beyond its operations, worked out once: the changes after its target
    (newest first), who last changed each path, what the restore will not undo, and (for an
    undo) who wrote the content it puts back."""
    changes: list
    latest: dict
    authors: dict                   # path -> every change since the target, oldest first
    effects: list
    put_back: dict                  # path -> the change that wrote the content put back (undo)
    undo: bool = False
    # path -> what to notice: "not written by the agent", "another session" (what it overwrites),
    # "changed since the rewind" (an undo)
    marks: dict = field(default_factory=dict)


def view_of(project, plan: RestorePlan, current=None, undo: bool = False, rewound_to=None,
            only: list[str] | None = None) -> PlanView:
    """`rewound_to`: for an undo, the checkpoint the rewind it undoes went to (what the
    rewind wrote is that checkpoint's; a path holding something else changed since).
    `only`: a restore of these paths, which leaves everything else as it is, git state and
    what commands did elsewhere included: no "will not undo" section (it would list what
    has nothing to do with the paths)."""
    changes = changes_since(project, plan.target.number, current)
    paths = {path for path, _, _ in plan.rows()}
    latest = latest_changes(project, plan.target.number, paths, current, changes) if paths else {}
    authors = authors_since(project, plan.target.number, paths, current, changes) if paths else {}
    put_back = {}
    for path, action, op in plan.rows():
        if action in ("write", "symlink", "replace", "mkdir", "chmod"):
            row = project.catalog.latest_change(project.id, path, plan.target.number)
            if row is not None:
                put_back[path] = row
    marks = {}
    if not undo:
        for op in plan.overwrites():
            # every author whose content it overwrites counts, not only the last one: the
            # person's line in a file the agent edited again afterwards is still the person's
            rows = authors.get(op.path) or [None]
            who_wrote = [author(row) if row is not None else (None, None) for row in rows]
            if any(source not in AGENT_SOURCES for source, _ in who_wrote):
                marks[op.path] = "not written by the agent"
            elif plan.target.session_id and any(source in ("tool", "bash") and session
                                                and session != plan.target.session_id
                                                for source, session in who_wrote):
                marks[op.path] = "another session"
    elif rewound_to is not None:
        load = TreeLoader(project.store, current.trees if current is not None else {})
        for path, _, op in plan.rows():
            was = entry_at(load, rewound_to.tree, path)
            now = op.old
            if (was is None) != (now is None) or (was is not None and (was.kind, was.oid) != (now.kind, now.oid)):
                marks[path] = "changed since the rewind"
    effects = [] if only else not_undone(project, plan.target, changes)
    return PlanView(changes, latest, authors, effects, put_back, undo, marks)


def print_plan(project, plan: RestorePlan, title: str, current=None, view: PlanView | None = None) -> list[str]:
    """Print the plan on stdout; returns the paths overwritten that the agent did not write
    (for an undo: that someone changed after the rewind it undoes)."""
    view = view or view_of(project, plan, current)
    render.out(render.fit(title))
    rows = plan.rows()
    if plan.matches:
        render.out("  nothing to do: the tree already matches.")
    elif plan.empty:
        render.out(f"  nothing it can change, and {paths_phrase(len(plan.unmet))} the checkpoint holds differ:")
    else:
        dirs = sum(1 for _, action, _ in rows if action in ("mkdir", "rmdir"))
        # the list counts a checkpoint's changed files and links; the plan's directories apart
        of_them = (f" ({dirs} of them {'a directory' if dirs == 1 else 'directories'})"
                   if dirs and len(rows) > 1 else "")
        render.out(f"{paths_phrase(len(rows))} {'changes' if len(rows) == 1 else 'change'}{of_them}:")
    width = max((len(action) for _, action, _ in rows), default=0)
    for path, action, _ in rows[:500]:
        render.out(f"  {action:<{width}}  {render.display_path(path)}")
    if len(rows) > 500:
        render.out(f"  … and {len(rows) - 500} more")
    for path, why in plan.skipped:
        render.out(f"  skip  {render.display_path(path)}: {why}")
    for path in plan.kept_hooks:
        render.out(f"  keep  {render.display_path(path)}: rewind's own hook entries stay in it, so the "
                   "recording goes on")
    if current is not None:
        linked = [op.path for op in plan.ops if op.action == "write" and op.path in current.hardlinks]
        if linked:
            render.out(f"  {len(linked)} of them are hard links: each gets a new file, which breaks the link "
                       "(other names of the same file keep what they hold now): "
                       + ", ".join(render.display_path(p) for p in linked[:5]) + (" …" if len(linked) > 5 else ""))
    unsafe = [op.path for op in plan.ops if op.action in ("write", "chmod") and op.entry is not None
              and op.entry.kind == FILE and file_mode(op.entry.mode) != op.entry.mode]
    if unsafe:
        render.out(f"  {len(unsafe)} file(s) come back without their setuid/setgid bit (a restore by root "
                   "cannot give back their owner): " + ", ".join(render.display_path(p) for p in unsafe[:5]))
    not_agent = _overwritten(plan, view) if not view.undo else _put_back(plan, view)
    _not_undone(view.effects)
    return not_agent


def _overwritten(plan: RestorePlan, view: PlanView) -> list[str]:
    over = plan.overwrites()
    not_agent = [op.path for op in over if op.path in view.marks]
    if not over:
        return not_agent
    render.out(f"It overwrites or removes {len(over)} of them, changed since checkpoint {plan.target.number}:")
    width = _width(op.path for op in over[:200])
    for op in over[:200]:
        mark = view.marks.get(op.path)
        render.out(f"  {render.display_path(op.path).ljust(width)}  {who_all(view.authors.get(op.path))}"
                   + (f"   <- {mark}" if mark else ""))
    if len(over) > 200:
        render.out(f"  … and {len(over) - 200} more")
    _the_others(plan, {op.path for op in over})
    return not_agent


def _the_others(plan: RestorePlan, over: set[str]) -> None:
    """The plan's paths that are not in the overwritten list, said in a line: what the
    restore does to them loses nothing (a directory made or removed once empty, a path
    that is gone put back, a mode set)."""
    rest = [(path, action) for path, action, _ in plan.rows() if path not in over]
    if not rest:
        return
    groups: dict[str, list[str]] = {}
    for path, action in rest:
        what = ("directory made" if action == "mkdir" else "emptied directory removed" if action == "rmdir"
                else "mode set" if action == "chmod" else "path put back that is gone now")
        groups.setdefault(what, []).append(render.display_path(path))
    parts = []
    for what, paths in groups.items():
        n = len(paths)
        noun = (what if n == 1 else what.replace("directory", "directories").replace("path ", "paths ")
                .replace("mode set", "modes set"))
        parts.append(f"{n} {noun} ({', '.join(paths[:4])}{', …' if n > 4 else ''})")
    render.out(render.fit(f"The other {len(rest)} lose nothing: " + "; ".join(parts) + "."))


def _put_back(plan: RestorePlan, view: PlanView) -> list[str]:
    """An undo: who wrote what it puts back; a path someone changed after the rewind is marked."""
    changed_since = [path for path, _, _ in plan.rows() if path in view.marks]
    # a directory it makes again has no author worth a line: its files have theirs
    rows = [(path, action) for path, action, _ in plan.rows() if action != "mkdir"]
    if not rows:
        return changed_since
    render.out(f"It puts back what checkpoint {plan.target.number} holds:")
    width = _width(path for path, _ in rows[:200])
    for path, action in rows[:200]:
        mark = f"   <- {view.marks[path]}" if path in view.marks else ""
        what = ("removed (the rewind put it there)" if action in ("delete", "rmdir")
                else f"written by: {wrote(view.put_back.get(path))}")
        render.out(f"  {render.display_path(path).ljust(width)}  {what}{mark}")
    if len(rows) > 200:
        render.out(f"  … and {len(rows) - 200} more")
    return changed_since


def _width(paths, cap: int = 48) -> int:
    """The path column's width: the longest shown, up to `cap` (a longer one pushes its own line only)."""
    return min(cap, max((len(render.display_path(p)) for p in paths), default=0))


def not_undone_lines(effects: list, most: int = 50) -> list[str]:
    """What a restore will not undo, as the plan says it (the CLI's and the picker's)."""
    if not effects:
        return []
    lines = ["It will not undo (outside the tree):"]
    for e in effects[:most]:
        cmd = f": {render.short(e.command, 60)}" if e.kind == "command" else ""
        lines.append(f"  checkpoint {e.checkpoint}: {render.safe(e.what)}{cmd}")
    if len(effects) > most:
        lines.append(f"  … and {len(effects) - most} more")
    if any(e.kind == "command" for e in effects):
        lines.append("  (named from the commands the agent's shell ran; what a script or program does by "
                     "itself, rewind cannot see)")
    return lines


def _not_undone(effects: list) -> None:
    for line in not_undone_lines(effects):
        render.out(line)


def confirm(yes: bool, question: str) -> None:
    """Ask on the terminal; declining prints a one-line notice and exits 1 (not an error)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise Refused("not rewinding without confirmation, and there is no terminal to ask on",
                      hint="pass --yes to go ahead, or --dry-run to only see the plan")
    if not typer.confirm(question, default=False):
        render.out("Declined: nothing changed.")
        raise typer.Exit(1)


def present(project, plan: RestorePlan, title: str, current, view: PlanView | None = None) -> list[str]:
    """The plan, who last changed what it overwrites, what it will not undo, and the safety
    net; returns the paths the agent did not write."""
    view = view or view_of(project, plan, current)
    not_agent = print_plan(project, plan, title, current, view)
    if not_agent and not view.undo:
        render.out(render.fit(f"{len(not_agent)} of the paths it overwrites {'holds' if len(not_agent) == 1 else 'hold'} "
                              "changes by someone other than the agent (you, another session or process)."))
    render.out(render.fit("Everything it overwrites is saved first in a safety checkpoint; `rewind undo` puts it back."))
    return not_agent


def plan_json(project, plan: RestorePlan, view: PlanView, action: str, extra: dict | None = None) -> dict:
    """A plan as JSON (`to --dry-run --json`, `undo --dry-run --json`)."""
    from rewind.cli.json_shapes import checkpoint_json

    def who_json(row: ChangeRow | None, checkpoint: int | None = None) -> dict | None:
        if row is None:
            return None
        out = {"source": row.source, "tool": row.tool, "command": row.command, "session_id": row.session_id}
        if checkpoint is not None:
            out["checkpoint"] = checkpoint
        return out

    under = {}
    for cp, rows in view.changes:
        for row in rows:
            under.setdefault(row.path, cp.number)
    over = {op.path for op in plan.overwrites()}
    paths = []
    for path, act, op in plan.rows():
        now = view.latest.get(path)
        back = view.put_back.get(path)
        since = [who_json(r) for r in view.authors.get(path, [])] if path in over else []
        paths.append({"path": path, "action": act, "overwrites": path in over, "notice": view.marks.get(path),
                      # every change since the target whose content it overwrites, oldest first
                      "authors": since,
                      "kind": KIND_NAMES[(op.entry or op.old).kind] if (op.entry or op.old) else None,
                      "current_author": who_json(now, under.get(path)),
                      "restored_author": (None if back is None or act in ("delete", "rmdir") else
                                          first_author(back))})
    return {"dry_run": True, "action": action, "project": project.root,
            "target": checkpoint_json(plan.target), **(extra or {}),
            "count": plan.count, "paths": paths,
            "skipped": [{"path": p, "why": why} for p, why in plan.skipped],
            # skipped paths the target holds: the restore leaves them and fails
            "unmet": [{"path": p, "why": why} for p, why in plan.unmet],
            "kept_hooks": list(plan.kept_hooks),
            "will_not_undo": [e.as_json() for e in view.effects]}


def changed(plan: RestorePlan) -> int:
    """How many paths a restore changed: the plan's count, less what it left alone."""
    left = {path for path, _ in plan.left}
    return len({op.path for op in plan.ops} - left)


def rewound_text(target, safety, plan: RestorePlan, only: list[str] | None = None) -> str:
    """What a rewind did, in one line (said by `rewind to` and by the picker)."""
    scope = f"only {', '.join(render.display_path(p) for p in only)} " if only else ""
    return (f"Rewound {scope}to checkpoint {target.number}: {paths_phrase(changed(plan))} changed. "
            f"The tree from before is checkpoint {safety.number}; `rewind undo` goes back.")


def say_rewound(target, safety, plan: RestorePlan) -> None:
    render.out(render.fit(rewound_text(target, safety, plan)))


def forked_text(target, new_id: str, root: str, where: str) -> str:
    """What a conversation fork wrote and the command that continues it (two lines, and a
    note when the agent itself may lose the fork; said by `rewind to --conversation` and by
    the picker)."""
    from rewind.history.conversation import caveat
    note = caveat(target, root, where)
    return (f"Conversation: a new session {new_id} that ends before checkpoint {target.number}'s prompt "
            f"(the original session is untouched).\n"
            f"  continue it with:  {resume_command(target, root, new_id, where)}"
            + (f"\n  note: {note}" if note else ""))


def resume_command(target, root: str, new_id: str, where: str) -> str:
    """The agent's own command that continues the fork, in the project's folder (with the
    config directory its session lives under when that is not the agent's default)."""
    from rewind.history.conversation import resume_command as agents_command
    return agents_command(target, root, new_id, where, render.display_path(root))


def left_alone(plan: RestorePlan, what: str, again: str) -> None:
    """Paths another process changed after the safety scan: not overwritten (what they hold
    now is in no checkpoint), and the command fails so that no script goes on as if the
    tree were the checkpoint's. So do paths the target holds that the plan had to leave
    (`plan.unmet`: unreadable now, on another mount, ...)."""
    for path, why in plan.unmet[:50]:
        render.err(f"  not restored: {render.display_path(path)} ({why})")
    if len(plan.unmet) > 50:
        render.err(f"  … and {len(plan.unmet) - 50} more")
    if not plan.left:
        if plan.unmet:
            raise RestoreIncomplete(f"{paths_phrase(len(plan.unmet))} that checkpoint {plan.target.number} holds "
                                    f"{'was' if len(plan.unmet) == 1 else 'were'} left as "
                                    f"{'it is' if len(plan.unmet) == 1 else 'they are'}; everything else was done",
                                    hint=(f"`{again} --cross-mounts` goes into the other mounts"
                                          if any("mounted" in why for _, why in plan.unmet) else
                                          "each line says why; fix that, then rewind again"))
        return
    for path, why in plan.left[:50]:
        render.err(f"  left as it is: {render.display_path(path)} ({why})")
    if len(plan.left) > 50:
        render.err(f"  … and {len(plan.left) - 50} more")
    raise PathsChangedDuringRestore(f"{len(plan.left)} path(s) changed while {what} ran, after its safety checkpoint: "
                                    "left as they are, everything else was done",
                                    hint=f"`{again}` finishes it (their new content is saved first)")


def rewind_scope(safety) -> str:
    """`of README.md ` when the rewind a safety checkpoint was taken for restored only some
    paths (its message says so, history/restore.py), else ``."""
    import re
    m = re.fullmatch(r"before rewind of (.+) to \d+", safety.message or "")
    return f"of {render.safe(m.group(1))} " if m else ""
