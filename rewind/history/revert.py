"""Revert, planning: take back the changes recorded after some checkpoints, keep the rest.

A checkpoint's interval runs from it to the next checkpoint (or to the tree now, for the
newest): what `rewind show` lists. Reverting it works path by path on the tree as it is
now, with before = the content at the checkpoint, after = at the end of its interval, now
= the tree today (docs/design.md, "Revert"):

- now is after: the path is written as before (or removed, or made again);
- now is before: nothing to do;
- otherwise, text files are merged three ways (base after, one side now, the other
  before: `merge3`); a clean merge is written, a conflict is not (or is written with
  diff3 markers on request). Binary files, symlinks, kinds and modes that moved on both
  sides are conflicts, never guessed;
- a delete and an add of the same content in one interval (the agent's `mv`) is taken
  back as a rename: what the new name holds now goes back to the old name.

Only the changes of the chosen sources are taken back (the agent's, `tool` and `bash`,
by default); a path another source also changed within the interval has no stored
version between the two, so it is a conflict. A range is taken back newest interval
first, each on the result of the one before, in one plan.

The outcome is a tree that exists only in memory (`RevertPlan.root`, its trees and the
merged contents): `restore` (history/restore.py) makes the working tree that tree, for
the paths the revert changes only, with the safety checkpoint, the journal and the
atomic writes of every restore.
"""

from __future__ import annotations

import copy
import difflib
import functools
import os
from typing import NamedTuple

from rewind.capture.changes import changes_under
from rewind.capture.gitmove import is_git_row
from rewind.capture.scan import ScanResult
from rewind.capture.snapshot import TreeLoader, blob_binary
from rewind.errors import RewindError
from rewind.model import Checkpoint
from rewind.project import Project
from rewind.store.objects import digest_of
from rewind.store.tree import DIR, FILE, LINK, Entry, Tree, tree_id
from rewind.store.treediff import diff_trees, entry_at, path_selector
from rewind.structs import dataclass, field

SOURCES = ("tool", "bash", "external", "unknown", "rewind")
AGENT_SOURCES = ("tool", "bash")
WRITES = ("revert", "merge", "markers", "rename")       # outcomes that change the tree

# a merge larger than this (bytes, any side) is not tried: it is listed as a conflict
MERGE_LIMIT = 8 * 1024 * 1024


class Outcome(NamedTuple):
    """What a revert does to one path of one interval: `outcome` is revert (written as it
    was before), merge (merged cleanly), markers (written with conflict markers), rename
    (moved back), nothing (already as before), conflict (left, with `why`), kept (a source
    not chosen made it: left). `entry` is what the path becomes (None: removed)."""
    path: str
    checkpoint: int
    outcome: str
    source: str
    why: str
    entry: Entry | None = None
    renamed_from: str | None = None     # a rename taken back: the name it has now
    change: object = None               # the change row (model.ChangeRow) it takes back, if one


@dataclass
class RevertPlan:
    first: Checkpoint                   # the oldest checkpoint taken back
    numbers: list                       # every checkpoint taken back, newest first
    sources: tuple
    outcomes: list = field(default_factory=list)
    root: str = ""                      # the tree after the revert (in memory)
    trees: dict = field(default_factory=dict)     # its trees that are in no scan nor the store
    blobs: dict = field(default_factory=dict)     # merged contents: oid -> bytes

    @property
    def paths(self) -> list[str]:
        """Every path the revert may change (what its restore is limited to)."""
        out = set()
        for o in self.outcomes:
            if o.outcome in WRITES:
                out.add(o.path)
                if o.renamed_from:
                    out.add(o.renamed_from)
        out.update(self.pruned)
        return sorted(out)

    pruned: list = field(default_factory=list)    # directories the revert empties and removes

    @property
    def conflicts(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outcome in ("conflict", "markers")]

    def target(self) -> Checkpoint:
        """The checkpoint `restore` makes the tree: the first one taken back, its tree the
        revert's."""
        t = copy.copy(self.first)
        t.tree = self.root
        return t


def intervals(project: Project, first: Checkpoint, last: Checkpoint | None = None) -> list[Checkpoint]:
    """The checkpoints whose intervals a revert of `first[..last]` takes back, newest first:
    every checkpoint numbered from first to last (inclusive), and the task notices that fold
    under a prompt among them (their changes are that prompt's too)."""
    last = last or first
    lo, hi = min(first.number, last.number), max(first.number, last.number)
    cps = project.catalog.checkpoints(project.id)
    chosen = [cp for cp in cps if lo <= cp.number <= hi]
    numbers = {cp.number for cp in chosen}
    chosen += [cp for cp in cps if cp.number > hi and cp.folds_under in numbers]
    return sorted(chosen, key=lambda cp: cp.number, reverse=True)


class _Now:
    """The tree as the revert goes: the scanned tree, with what the intervals already
    taken back changed over it (`over`: path -> entry, None for removed)."""

    def __init__(self, load, root: str):
        self.load, self.root = load, root
        self.over: dict[str, Entry | None] = {}

    def get(self, path: str) -> Entry | None:
        if path in self.over:
            return self.over[path]
        parts = path.split("/")
        for i in range(1, len(parts)):          # a parent removed or replaced by the revert
            anc = "/".join(parts[:i])
            if anc in self.over and (self.over[anc] is None or self.over[anc].kind != DIR):
                return None
        return entry_at(self.load, self.root, path)

    def apply(self, sets: list[tuple[str, Entry | None]], before_tree: str) -> None:
        """One interval's outcomes: removals first, then what is written, parents first. A
        path removed or made a file takes what was below it along; one written below a
        path that is no directory now makes it one again, with its mode at the checkpoint."""
        for path, entry in sorted(sets, key=lambda s: (s[1] is not None, s[0].count("/"), s[0])):
            if entry is None or entry.kind != DIR:
                for p in [p for p in self.over if p.startswith(path + "/")]:
                    del self.over[p]
            if entry is not None:
                parts = path.split("/")
                for i in range(1, len(parts)):
                    anc = "/".join(parts[:i])
                    have = self.get(anc)
                    if have is None or have.kind != DIR:
                        was = entry_at(self.load, before_tree, anc)
                        self.over[anc] = Entry(DIR, was.mode if was is not None and was.kind == DIR
                                               else 0o755, "", 0)
            self.over[path] = entry


def plan_revert(project: Project, cps: list[Checkpoint], current: ScanResult,
                sources: tuple = AGENT_SOURCES, paths: list[str] | None = None,
                conflicts: str = "skip") -> RevertPlan:
    """The revert of `cps` (newest first, `intervals`) on `current` (the scan just made)."""
    load = TreeLoader(project.store, current.trees)
    select = path_selector(paths)
    now = _Now(load, current.root)
    plan = RevertPlan(cps[-1], [cp.number for cp in cps], tuple(sources))
    contents = _Contents(project, current)
    prune: set[str] = set()
    for cp in cps:
        nxt = project.catalog.next_after(project.id, cp.number)
        after_tree = nxt.tree if nxt is not None else current.root
        if not after_tree:
            raise RewindError(f"checkpoint {nxt.number} is still being completed by the watcher's first scan",
                              hint="wait for it (`rewind list` shows it done), then revert again")
        rows = {r.path: r for r in changes_under(project, cp, current if nxt is None else None)
                if not is_git_row(r)}
        mixed = project.catalog.observed_sources(project.id, cp.number)
        pairs = [(p, b, a) for p, b, a in diff_trees(load, cp.tree, after_tree) if select(p) not in (None, "anc")]
        renames = _renames(pairs, rows, sources)
        sets: list[tuple[str, Entry | None]] = []
        for path, before, after in pairs:
            row = rows.get(path)
            source = row.source if row is not None else "unknown"
            if path in renames.values():
                continue                        # the old name of a rename: taken with its new one
            if path in renames:
                o = _rename_back(cp, path, renames[path], after, now, load, rows)
                plan.outcomes.append(o._replace(change=row))
                if o.outcome == "rename":
                    sets += [(o.renamed_from, None), (o.path, o.entry)]
                    _mark_prune(prune, o.renamed_from, cp.tree, load)
                continue
            others = set(mixed.get(path, ())) | {source}
            chosen = others & set(sources)
            if not chosen:
                plan.outcomes.append(Outcome(path, cp.number, "kept", source, change=row, why=
                                             f"changed by {_who(source)}, not taken back"
                                             + (" (--all takes it back)" if source in ("external", "unknown")
                                                else f" (--source {source} takes it back)")))
                continue
            if chosen != others:
                plan.outcomes.append(Outcome(path, cp.number, "conflict", source, change=row, why="changed by "
                                             + " and ".join(_who(s) for s in sorted(others)) + " in that interval; "
                                             "no version between them is stored"))
                continue
            o = _decide(cp, path, before, after, now.get(path), source, contents, conflicts, plan.blobs)
            plan.outcomes.append(o._replace(change=row))
            if o.outcome in WRITES:
                sets.append((path, o.entry))
                if o.entry is None:
                    _mark_prune(prune, path, cp.tree, load)
        now.apply(sets, cp.tree)
    for p in paths or []:
        p = p.strip("/")
        if p and not any(o.path == p or o.path.startswith(p + "/") for o in plan.outcomes) and \
                entry_at(load, current.root, p) is None:
            raise RewindError(f"no such path in the tree nor among the changes after checkpoint "
                              f"{plan.numbers[-1]}: {p}", hint="paths are relative to the current directory")
    plan.root, plan.trees, plan.pruned = _apply(load, current.root, now.over, prune)
    return plan


def _who(source: str) -> str:
    return {"tool": "the agent's edit tools", "bash": "the agent's shell commands", "external": "someone outside "
            "the agent", "unknown": "an unknown writer", "rewind": "a rewind"}.get(source, source)


def _mark_prune(prune: set[str], path: str, before_tree: str, load) -> None:
    """The directories above a path the revert removes that the checkpoint did not have:
    removed too once the revert leaves them empty."""
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        anc = "/".join(parts[:i])
        if entry_at(load, before_tree, anc) is not None:
            break
        prune.add(anc)


def _renames(pairs, rows, sources) -> dict[str, str]:
    """new path -> old path: a file deleted and one added with the same content and mode in
    the interval, both by a chosen source (an `mv`)."""
    gone: dict[tuple, list[str]] = {}
    for path, before, after in pairs:
        if before is not None and after is None and before.kind in (FILE, LINK):
            row = rows.get(path)
            if row is not None and row.source in sources:
                gone.setdefault((before.kind, before.oid), []).append(path)
    out = {}
    for path, before, after in pairs:
        if before is None and after is not None and after.kind in (FILE, LINK):
            row = rows.get(path)
            olds = gone.get((after.kind, after.oid))
            if olds and row is not None and row.source in sources:
                out[path] = olds.pop(0)
    return out


def _rename_back(cp, new, old, after, now, load, rows) -> Outcome:
    """`old` was moved to `new` in the interval: move back what `new` holds now (edits made
    there since included), unless the old name is taken again or `new` is gone."""
    src = rows[new].source
    old_entry = entry_at(load, cp.tree, old)
    n_new, n_old = now.get(new), now.get(old)
    if n_new is None and n_old is not None:
        return Outcome(new, cp.number, "nothing", src, f"moved back to {old} already")
    if n_new is None:
        return Outcome(new, cp.number, "conflict", src, f"moved from {old} in that interval, and removed since")
    if n_old is not None:
        return Outcome(new, cp.number, "conflict", src, f"moved from {old} in that interval, and {old} "
                                                         "was made again since")
    if n_new.kind != old_entry.kind:
        return Outcome(new, cp.number, "conflict", src, f"moved from {old} in that interval, and made a "
                                                         "different kind of file since")
    entry = n_new._replace(mode=_three(after.mode, n_new.mode, old_entry.mode) or n_new.mode)
    return Outcome(old, cp.number, "rename", src, f"moved back from {new}", entry, renamed_from=new)


def _three(base, ours, theirs):
    """A three-way pick of one value (`ours` now, `theirs` before, `base` after): None when
    both moved away from base, differently."""
    if ours == base:
        return theirs
    if theirs == base or ours == theirs:
        return ours
    return None


def _same(a: Entry | None, b: Entry | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.kind == DIR or b.kind == DIR:
        return a.kind == b.kind and a.mode == b.mode
    return (a.kind, a.oid, a.mode) == (b.kind, b.oid, b.mode)


def _decide(cp, path, before, after, now, source, contents, conflicts, blobs) -> Outcome:
    """One path of one interval, as the module's docstring says."""
    def out(outcome, why, entry=None):
        return Outcome(path, cp.number, outcome, source, why, entry)

    if after is not None and after.kind == DIR and now is not None and now.kind == DIR and \
            before is None and after.oid != now.oid:
        return out("nothing", "a directory made then, that holds files made since: kept")
    if _same(now, after):
        if before is None:
            return out("revert", "added then: removed")
        if after is None:
            return out("revert", "deleted then: made again", before)
        return out("revert", "changed then: put back", before)
    if _same(now, before):
        return out("nothing", "already as it was")
    if now is None:
        return out("conflict", "changed then, and removed since")
    if after is None:
        return out("conflict", "deleted then, and made again since")
    if before is None:
        return out("conflict", "added then, and changed since")
    if not (before.kind == after.kind == now.kind):
        return out("conflict", "its kind (file, directory, link) changed since")
    if now.kind == DIR:
        mode = _three(after.mode, now.mode, before.mode)
        if mode is None:
            return out("conflict", "its mode changed then and again since")
        return out("revert", "its mode put back", now._replace(mode=mode))
    mode = _three(after.mode, now.mode, before.mode)
    if mode is None:
        return out("conflict", f"its mode changed then ({after.mode:o}) and again since ({now.mode:o})")
    oid = _three(after.oid, now.oid, before.oid)
    if oid is not None:
        entry = before if oid == before.oid else now
        return out("revert", "put back" if oid == before.oid else "its mode put back",
                   entry._replace(mode=mode))
    if now.kind == LINK:
        return out("conflict", "a symlink that changed then and again since")
    if now.kind != FILE:
        return out("conflict", "too large to have been stored")
    texts = contents.texts(path, after, now, before)
    if texts is None:
        return out("conflict", "a binary file that changed then and again since")
    merged, clean = merge_text(*texts, name_b=f"checkpoint {cp.number}")
    if clean and merged == texts[1]:
        return out("nothing", "none of the changes taken back are in it now")
    if not clean and conflicts != "markers":
        return out("conflict", "later changes overlap the ones taken back")
    oid = digest_of(merged)
    blobs[oid] = merged
    entry = Entry(FILE, mode, oid, len(merged))
    if not clean:
        return out("markers", "written with conflict markers", entry)
    return out("merge", "merged with the changes made since", entry)


_MATCHER = functools.partial(difflib.SequenceMatcher, autojunk=False)


def merge_text(base: bytes, ours: bytes, theirs: bytes, name_b: str = "before") -> tuple[bytes, bool]:
    """The three-way merge of `ours` (now) and `theirs` (before) from `base` (after), line
    by line: the merged bytes and whether no region conflicted; a conflict is written in
    diff3 style (now, then the base, then before)."""
    import merge3
    m = merge3.Merge3(base.splitlines(True), ours.splitlines(True), theirs.splitlines(True),
                      sequence_matcher=_MATCHER)
    clean = not any(r[0] == "conflict" for r in m.merge_regions())
    lines = m.merge_lines(name_a=b"now", name_b=name_b.encode(), name_base=b"what it was taken back from",
                          base_marker=b"|||||||")
    return b"".join(_ended(lines)), clean


def _ended(lines):
    """A marker must start a line: a side whose last line has no newline gets one before it."""
    prev = b"\n"
    for line in lines:
        if line[:7] in (b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>") and not prev.endswith((b"\n", b"\r")):
            yield b"\n"
        yield line
        prev = line


class _Contents:
    """The bytes of a path's three versions; None when one is binary or too large."""

    def __init__(self, project: Project, current: ScanResult):
        self.project, self.current = project, current

    def texts(self, path: str, after: Entry, now: Entry, before: Entry):
        if max(after.size, now.size, before.size) > MERGE_LIMIT:
            return None
        store = self.project.store
        if any(blob_binary(store, e.oid) for e in (after, before)):
            return None
        out = [store.get(after.oid), self._now(path, now), store.get(before.oid)]
        if any(b"\0" in data[:8192] for data in out):
            return None
        return out

    def _now(self, path: str, now: Entry) -> bytes:
        """What the path holds now: from the store, else read (a dry run's scan stores
        nothing) and checked against the scan's id."""
        store = self.project.store
        try:
            return store.get(now.oid)
        except RewindError:
            pass
        with open(os.path.join(self.project.root, path), "rb") as f:
            data = f.read()
        if digest_of(data) != now.oid:
            raise RewindError(f"{path} changed while the revert was being planned", hint="run it again")
        return data


def _apply(load, root: str, over: dict[str, Entry | None], prune: set[str]) -> tuple[str, dict, list[str]]:
    """The tree `root` with `over` (path -> entry, None removes) applied, and the
    directories in `prune` removed where that leaves them empty: its id, the trees made
    (id -> entries), and the directories removed."""
    made: dict[str, Tree] = {}
    pruned: list[str] = []
    nested: dict = {}
    for path, entry in over.items():
        node = nested
        parts = path.split("/")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[("=", parts[-1])] = entry

    def build(tree_oid: str | None, node: dict, prefix: str) -> str | None:
        tree = dict(load(tree_oid)) if tree_oid else {}
        for key, sub in node.items():
            if isinstance(key, tuple):
                name = key[1]
                if sub is None:
                    tree.pop(name, None)
                elif sub.kind == DIR and name in tree and tree[name].kind == DIR:
                    tree[name] = tree[name]._replace(mode=sub.mode)
                elif sub.kind == DIR:
                    tree[name] = sub._replace(oid=_empty(made))
                else:
                    tree[name] = sub
        for key, sub in node.items():
            if isinstance(key, tuple):
                continue
            path = f"{prefix}/{key}" if prefix else key
            have = tree.get(key)
            inner = build(have.oid if have is not None and have.kind == DIR else None, sub, path)
            if inner is None:
                tree.pop(key, None)
                pruned.append(path)
            else:
                mode = have.mode if have is not None and have.kind == DIR else 0o755
                tree[key] = Entry(DIR, mode, inner, 0)
        if prefix and not tree and prefix in prune:
            return None
        oid, _ = tree_id(tree)
        made[oid] = tree
        return oid

    new_root = build(root, nested, "")
    return new_root, made, pruned


def _empty(made: dict) -> str:
    oid, _ = tree_id({})
    made[oid] = {}
    return oid
