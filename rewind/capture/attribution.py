"""Attribution: who made each change of a segment (the changes between two scans).

Attribution at hook granularity: every scan closes a *segment* (from the previous scan to
now). The tool windows open across a segment say who made its changes: one shell window
-> `bash` with its command; several -> `bash`, flagged `ambiguous`; an edit tool's target
whose content is what the tool wrote -> `tool`; no window -> `external` (or `unknown` in a
project no agent hook has ever reported on). Segments are stored as observations; when
the next checkpoint is taken, each changed path takes its latest observation.

With the watcher, each change is placed in its event stream against the shell windows'
markers (`writer`), and a change inside an open shell window is the command's unless the
pid account shows the command could not have made it (procs.py).

A shell command gone on in the background keeps its window open until its task ends; while
it runs, a change is its command's only when its processes did something around it
(bgtree.py); any other change it could still have made
is flagged `ambiguous` and names it.

A change's source is a `Source` (model.py); the windows are the catalog's `ToolWindow`s.
"""

from __future__ import annotations

from rewind.model import ChangeRow, Checkpoint, PathEvent, Source, ToolWindow
from rewind.project import Project


def shell_source(shells: list[ToolWindow]) -> Source | None:
    """The source for a change these open shell windows explain: the one command, or all of
    them flagged `ambiguous`; None without a window."""
    if len(shells) == 1:
        w = shells[0]
        return Source("bash", w.tool, w.command, w.session_id)
    if shells:
        return Source("bash", shells[0].tool, " | ".join(w.command or "" for w in shells), None, ("ambiguous",))
    return None


def outside(project: Project) -> Source:
    """A change outside every window: `external`, or `unknown` in a project no agent hook
    has ever reported on."""
    return Source("external" if project.catalog.has_sessions(project.id) else "unknown")


def untied(anyone: Source, background: list[ToolWindow]) -> Source:
    """A change no window explains while commands ran in the background that could still
    have made it, though their processes did nothing around it: who it would be otherwise,
    flagged `ambiguous`, naming them."""
    return Source(anyone.source, None, " | ".join(w.command or "" for w in background) or None,
                  None, ("ambiguous",))


def default_source(project: Project, windows: list[ToolWindow], since_ns: int,
                   since_start: int | None = None, sigs: dict | None = None) -> Source:
    """The source of a change the watcher did not place in time: the shell windows open
    across the segment (opened by its start, not closed before the scan that began it
    started: that scan may have read a directory before the command wrote there, and a
    window is closed right before the scan that ends its segment), else outside every window.
    A window in the background for the whole segment counts only when its processes did
    something since the last scan (their tree's signature now, put into `sigs`, against the
    one the last scan kept); a change only such windows explain is flagged `ambiguous` (the
    segment may be long: someone else may have made it meanwhile)."""
    from rewind.capture.bgtree import tree_signature
    closed_after = since_ns if since_start is None else min(since_ns, since_start)
    across = [w for w in windows if w.kind == "bash" and w.opened_ns <= since_ns
              and (w.closed_ns is None or w.closed_ns > closed_after)]
    shells = [w for w in across if w.bg_ns is None or w.bg_ns > closed_after]
    idle = []
    for w in across:
        if w.bg_ns is not None and w.bg_ns <= closed_after:
            sig = tree_signature(w.bg_pids)
            if sigs is not None:
                sigs[w.id] = sig
            (shells if sig is None or sig != w.bg_sig else idle).append(w)
    shell = shell_source(shells)
    if shell is not None and all(w.bg_ns is not None and w.bg_ns <= closed_after for w in shells):
        # only background commands, active at some point of the segment, which may be long:
        # the change in a window is the command's, but not placed in time, so say so
        shell = Source(shell.source, shell.tool, shell.command, shell.session_id,
                       tuple(dict.fromkeys(shell.flags + ("ambiguous",))))
    if shell is not None:
        return shell
    return untied(outside(project), idle) if idle else outside(project)


def event_of(events: dict[str, PathEvent], path: str) -> PathEvent | None:
    """When the watcher saw `path` change (and which shell windows could explain it): its
    own latest event, else the nearest ancestor's created or moved in (a directory moved as
    a whole reports no event for its contents)."""
    own = events.get(path)
    if own is not None:
        return own
    while path:
        path = path.rpartition("/")[0]
        e = events.get(path)
        if e is not None and e.kind == "c":
            return e
    return None


def source_at(windows: list[ToolWindow], row: ChangeRow, ts: int, writer: str | None,
              anyone: Source) -> Source:
    """The source of a change the watcher read at `ts`:
    - the edit tool whose target it is, if its window was open by then and is still open,
      or the file holds what the tool wrote (the tool's own write may be read late);
    - else the shell windows the watcher named for it (`writer` "w:ID,..."): those open at
      the change's place in its event stream whose command could have made it (procs.py);
      a window closed before this segment began is a stale name (its close marker was lost);
    - else outside every window (`anyone`).
    `writer` "cmd"/"none" come from a watcher of an earlier version (timestamps); a "/b"
    after the ids: commands ran in the background whose processes did nothing around it."""
    for w in reversed(windows):
        if w.kind == "tool" and w.target == row.path and w.opened_ns <= ts and (
                w.closed_ns is None or ts <= w.closed_ns or w.post_oid == (row.new_oid or "")):
            return Source("tool", w.tool, None, w.session_id)
    if writer is not None and writer.startswith("w:"):
        named, _, background = writer[2:].partition("/")
        ids = {int(x) for x in named.split(",") if x.isdigit()}
        shell = shell_source([w for w in windows if w.kind == "bash" and w.id in ids])
        if shell is not None:
            return shell
        idle = [w for w in windows if w.kind == "bash" and w.bg_ns is not None and w.bg_ns <= ts] \
            if background == "b" else []
        return untied(anyone, idle) if idle else anyone
    if writer != "cmd":
        return anyone
    shell = shell_source([w for w in windows if w.kind == "bash" and w.opened_ns <= ts
                          and (w.closed_ns is None or ts <= w.closed_ns)])
    return shell if shell is not None else anyone


def attribute_segment(project: Project, rows: list[ChangeRow], since_ns: int,
                      forced: Source | None = None,
                      events: dict[str, PathEvent] | None = None, since_start: int | None = None) -> dict:
    """Give each change of one segment its source (see the module docstring): `forced`, the
    one source of every change (a restore's), else from the tool windows; with the
    watcher's `events`, each change is placed in time against them. Returns the signatures
    of the background commands' trees it looked at (window id -> signature), for the scan
    to keep (working_copy.py)."""
    sigs: dict = {}
    if forced is not None:
        for r in rows:
            forced.put_on(r)
        return sigs
    windows = project.catalog.open_windows(project.id)
    default = default_source(project, windows, since_ns, since_start, sigs)
    anyone = outside(project) if events is not None else None
    edits: dict[str, list[ToolWindow]] = {}
    for w in windows:
        if w.kind == "tool" and w.target is not None:
            edits.setdefault(w.target, []).append(w)
    for r in rows:
        source = default
        seen = event_of(events, r.path) if events is not None else None
        if seen is not None:
            source = source_at(windows, r, seen.ts, seen.writer, anyone)
        else:
            for w in reversed(edits.get(r.path, [])):
                if w.closed_ns is None or w.post_oid == (r.new_oid or ""):
                    source = Source("tool", w.tool, None, w.session_id)
                    break
        source.put_on(r)
    return sigs


def apply_observations(rows: list[ChangeRow], obs: dict[str, Source]) -> list[ChangeRow]:
    """Sources from the latest observation of each path; observations of paths no tree
    holds (an edit outside the project, an ignored path) become rows of their own."""
    seen = set()
    for r in rows:
        o = obs.get(r.path)
        seen.add(r.path)
        if o is not None:
            o.put_on(r)
    extra = []
    for path, o in obs.items():
        if path not in seen and ("outside" in o.flags or "ignored" in o.flags):
            row = ChangeRow.placeholder(path)
            o.put_on(row)
            extra.append(row)
    return rows + extra


def fallback_rewind(project: Project, cp: Checkpoint, rows: list[ChangeRow]) -> None:
    """Without an observation, what a rewind's plan touched is `rewind`."""
    if cp.kind != "rewind":
        return
    made = project.catalog.restore_made(project.id, cp.number)
    if made is None:
        return
    restored = set(made.paths or [])
    for row in rows:
        if row.source == "unknown" and (row.path in restored
                                        or any(row.path.startswith(p + "/") for p in restored)):
            row.source = "rewind"


def restored_authors(project: Project, cp: Checkpoint, rows: list[ChangeRow]) -> None:
    """A rewind's changes stay `rewind`; each also names who wrote the content it put back:
    the author of that path's content in the checkpoint restored (its newest change before
    it, itself followed back through earlier restores), so that after `to` and `undo` a
    person's edit put back is still the person's."""
    if cp.kind != "rewind" or cp.restore_target is None:
        return
    target = cp.restore_target
    for row in rows:
        if row.source != "rewind" or row.status == "deleted" or row.restored:
            continue
        before = project.catalog.latest_change(project.id, row.path, target)
        if before is not None and before.source == "rewind":
            row.restored = dict(before.restored or {"source": None, "tool": None, "command": None,
                                                    "session_id": None}, checkpoint=target)
        else:
            row.restored = {"checkpoint": target,
                            "source": before.source if before is not None else None,
                            "tool": before.tool if before is not None else None,
                            "command": before.command if before is not None else None,
                            "session_id": before.session_id if before is not None else None}


def flag_unrecorded(root: str, rows: list[ChangeRow]) -> None:
    """A path the new tree lacks that is still on disk was not deleted: it dropped out of
    recording (an ignore rule added since, an agent's `.rewindignore` of `*`, a file made
    unreadable). It stays a `deleted` row, flagged `unrecorded`, so that list, show and the
    plan say so. One lstat per deleted path, none below a directory found gone."""
    import os
    gone: list[str] = []
    for row in rows:
        if row.status != "deleted" or "unrecorded" in row.flags:
            continue
        if any(row.path.startswith(g + "/") for g in gone[-8:]):
            continue
        try:
            os.lstat(os.path.join(root, row.path))
        except OSError:
            gone.append(row.path)
            continue
        row.flags.append("unrecorded")
