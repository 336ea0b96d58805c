"""Changes under a checkpoint: stored once a later checkpoint exists, else live (from the
checkpoint to the working tree, now), each with its source and flags."""

from __future__ import annotations

import os

from rewind.capture import gitmove
from rewind.capture.attribution import (apply_observations, attribute_segment, fallback_rewind, flag_unrecorded,
                                        restored_authors)
from rewind.capture.scan import ScanResult
from rewind.capture.snapshot import TreeLoader, blob_binary, working_scan
from rewind.errors import CorruptObject
from rewind.model import ChangeRow, Changes, Checkpoint
from rewind.project import Project
from rewind.store.objects import Store
from rewind.store.tree import FILE
from rewind.store.treediff import change_rows, diff_trees


def live_changes(project: Project, cp: Checkpoint,
                 result: ScanResult | None = None) -> tuple[list[ChangeRow], ScanResult]:
    """Changes under the newest checkpoint: from it to the working tree, now (`result`: a
    read-only scan of the working tree the caller already made)."""
    result = result or working_scan(project)
    load = TreeLoader(project.store, result.trees)
    pairs = list(diff_trees(load, cp.tree, result.root))
    rows = change_rows(pairs, None, result.hardlinks)
    for row, (path, old, new) in zip(rows, pairs):
        if (old is not None and old.kind == FILE and blob_binary(project.store, old.oid)) or \
                (new is not None and new.kind == FILE and _file_binary(project.store, new.oid,
                                                                       os.path.join(project.root, path))):
            row.flags.append("binary")
    # what changed since the last scan has no observation yet: attribute it as a segment would
    last_tree, last_ns = project.catalog.state(project.id)
    if last_tree is not None and last_tree != result.root:
        recent = {path for path, _, _ in diff_trees(load, last_tree, result.root)}
        pending = [r for r in rows if r.path in recent]
        attribute_segment(project, pending, last_ns,
                          since_start=project.catalog.scan_state(project.id).scan_start_ns or None)
    else:
        recent = set()
    obs = project.catalog.observations(project.id, cp.number)
    rows = apply_observations([r for r in rows if r.path not in recent], obs) + \
        [r for r in rows if r.path in recent]
    rows.sort(key=lambda r: r.path)
    fallback_rewind(project, cp, rows)
    restored_authors(project, cp, rows)
    flag_unrecorded(project.root, rows)
    return rows, result


def _file_binary(store: Store, oid: str, path: str) -> bool:
    """The working file's binary flag: remembered when this process read it, else read."""
    known = store.known_binary(oid)
    if known is not None:
        return known
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(8192)
    except OSError:
        return False


def changes_under(project: Project, cp: Checkpoint, current: ScanResult | None = None) -> Changes:
    """Changes under `cp`: stored when a later checkpoint exists, else live; with its git
    move apart (`.git`), never one of the rows. A damaged tree keeps its damage to itself:
    its live changes are unknown (empty, and the store remembers the damage), and every
    other command goes on."""
    nxt = project.catalog.next_after(project.id, cp.number)
    if nxt is not None:
        rows = project.catalog.changes(project.id, cp.number) or []
        git = [r for r in rows if gitmove.is_git_row(r)]
        return Changes([r for r in rows if not gitmove.is_git_row(r)],
                       gitmove.stored(cp, nxt, git[0] if git else None))
    if not os.path.isdir(project.root):
        cp.stats = dict(cp.stats, changes_unknown="the project's directory is gone (moved?)")
        return Changes()
    git = gitmove.live(project, cp)
    try:
        return Changes(live_changes(project, cp, current)[0], git)
    except CorruptObject as e:
        cp.stats = dict(cp.stats, changes_unknown=f"its tree is damaged ({e.digest[:12]}): "
                                                   "what changed after it is unknown")
        return Changes((), git)
