"""Restore, planning: what a restore would do, as a list of operations, before anything is done.

The plan is a list of operations per path (delete, rmdir, mkdir, write, symlink, chmod)
in an order that is valid when run one after the other. Paths a scan did not store
(ignored, unreadable, special, large, still changing) are never deleted or overwritten,
and neither are the directories holding them; the plan lists them as skipped. A path the
target holds is compared whatever today's ignore rules say: the restore's scan reads it
(`held_by`), so a rule added since hides nothing from the plan. What the plan leaves that
the target holds (unreadable now, on another mount, a directory it cannot empty) is
`unmet`: named, and the restore fails. Another filesystem mounted inside the project is
not entered unless `cross_mounts` (mounts.py).
`rewind to --dry-run` prints the same plan that `restore` applies.
"""

from __future__ import annotations

from typing import NamedTuple

from rewind.capture.ignore import IGNORE_FILES, IgnoreRules
from rewind.capture.scan import ScanResult
from rewind.capture.snapshot import TreeLoader, working_scan
from rewind.history.mounts import Mounts
from rewind.model import Checkpoint
from rewind.project import Project
from rewind.store.objects import digest_of
from rewind.store.tree import DIR, FILE, LARGE, LINK, Entry
from rewind.store.treediff import entry_at, path_selector
from rewind.structs import dataclass, field


@dataclass
class Op:
    action: str                 # delete | rmdir | mkdir | write | symlink | chmod
    path: str
    entry: Entry | None = None  # what the path becomes (mkdir, write, symlink, chmod)
    old: Entry | None = None    # what is there now


class LeftAlone(NamedTuple):
    """A path a plan or a restore leaves as it is, and why (one line, for people)."""
    path: str
    why: str


class PlanRow(NamedTuple):
    """One path a plan changes (`RestorePlan.rows`): what it does there, and the operation
    that says what the path becomes."""
    path: str
    action: str                 # an Op's action, or `replace`: removed, then made again
    op: Op


@dataclass
class RestorePlan:
    target: Checkpoint
    ops: list[Op] = field(default_factory=list)
    skipped: list[LeftAlone] = field(default_factory=list)
    unmet: list[LeftAlone] = field(default_factory=list)     # skipped, and the target holds it
    left: list[LeftAlone] = field(default_factory=list)      # changed since the scan
    applied: int = 0                                                # operations carried out so far
    kept_hooks: list[str] = field(default_factory=list)   # agents' settings files keeping rewind's hooks
    extra: dict[str, bytes] = field(default_factory=dict)  # contents made by the plan (not in the store)
    revert: object = None       # the revert (history/revert.py) this plan carries out, if one

    @property
    def empty(self) -> bool:
        return not self.ops

    @property
    def matches(self) -> bool:
        """The tree already is the target's: nothing to do and nothing it holds left aside."""
        return not self.ops and not self.unmet

    def overwrites(self) -> list[Op]:
        """Operations that replace or remove content that exists now."""
        return [op for op in self.ops if op.old is not None and op.action in ("delete", "write", "symlink")]

    def touched(self) -> list[str]:
        return sorted({op.path for op in self.ops})

    def rows(self) -> list[PlanRow]:
        """One row per path that changes, in plan order: the count of what a
        restore changes (its plan, its question and its result say the same number). A path
        removed then created again is one `replace`; a directory's mode set after its
        `mkdir`, or a file's after its `write`, is part of it."""
        by_path: dict[str, list[Op]] = {}
        for op in self.ops:
            by_path.setdefault(op.path, []).append(op)
        out = []
        for path, ops in by_path.items():
            actions = [op.action for op in ops]
            made = [op for op in ops if op.action in ("mkdir", "write", "symlink")]
            if made and any(a in ("delete", "rmdir") for a in actions):
                out.append(PlanRow(path, "replace", made[-1]))
            elif made:
                out.append(PlanRow(path, made[-1].action, made[-1]))
            else:
                out.append(PlanRow(path, ops[0].action, ops[0]))
        return out

    @property
    def count(self) -> int:
        """How many paths change (see `rows`)."""
        return len({op.path for op in self.ops})


def held_by(project: Project, target: Checkpoint, paths: list[str] | None = None):
    """`held(path)`: the target holds `path` (and it is selected): the restore's scan reads
    it even when today's ignore rules skip it. Asked only of ignored paths."""
    load = TreeLoader(project.store)
    select = path_selector(paths)

    def held(path: str) -> bool:
        return select(path) is not None and entry_at(load, target.tree, path) is not None
    return held


def plan_restore(project: Project, target: Checkpoint, current: ScanResult,
                 paths: list[str] | None = None, cross_mounts: bool = False,
                 trees: dict | None = None) -> RestorePlan:
    """The operations that make `current` (the scan just made) the target's tree, in an order
    valid one after the other: the walk of both trees top-down, then the directories' modes
    (deepest first, after every write inside them), then the agents' settings files keeping
    rewind's hooks. `trees`: trees of the target that are in no scan nor the store (a
    revert's, made in memory)."""
    planner = _Planner(project, target, current, paths, cross_mounts, trees)
    planner.walk(current.root, target.tree, "", planner.root_rules())
    plan = planner.plan
    plan.ops.extend(reversed(planner.dir_modes))
    _keep_hooks(project, plan)
    return plan


class _Planner:
    """One plan in the making: the current tree walked against the target's, path by path.
    `blocked` holds the directories a restore must not remove: they hold paths it keeps
    (not stored, ignored at the checkpoint, another mount)."""

    def __init__(self, project: Project, target: Checkpoint, current: ScanResult,
                 paths: list[str] | None, cross_mounts: bool, trees: dict | None = None):
        self.project = project
        self.load = TreeLoader(project.store, current.trees, trees or {})
        self.plan = RestorePlan(target)
        self.protected = current.protected
        self.cross_mounts = cross_mounts
        self.mounts = Mounts(project.root)
        self.select = path_selector(paths)
        self.dir_modes: list[Op] = []   # chmod of each directory, appended after the walk
        self.blocked: set[str] = set()
        for p in self.protected:
            self.blocked.update(_ancestors(p))
        for p in self.mounts.points:    # a mount point is never removed, crossing or not
            self.blocked.update(_ancestors(p) + ([p] if cross_mounts else []))

    def root_rules(self) -> IgnoreRules:
        """The checkpoint's own ignore rules at its root."""
        root_tree = self.load(self.plan.target.tree)
        return IgnoreRules.for_root_contents(self.project.root, self._rule_files(root_tree))

    def rules_in(self, tree, rel_dir: str, parent: IgnoreRules) -> IgnoreRules:
        """The checkpoint's own ignore rules inside one of its directories."""
        contents = self._rule_files(tree)
        return parent.with_contents(rel_dir, contents) if contents else parent

    def _rule_files(self, tree) -> list[bytes]:
        return [self.project.store.get(tree[n].oid) for n in IGNORE_FILES
                if n in tree and tree[n].kind == FILE]

    def leave(self, path: str, why: str, held: bool = True) -> None:
        """A path left as it is; one the target holds is `unmet`: named, and the restore fails."""
        self.plan.skipped.append(LeftAlone(path, why))
        if held:
            self.plan.unmet.append(LeftAlone(path, why))

    def other_mount(self, path: str, c: Entry | None) -> bool:
        """`path` is another filesystem's mount point, not to be entered (unless asked)."""
        if c is None or c.kind != DIR or not self.mounts.is_mount(path):
            return False
        if self.cross_mounts:
            self.blocked.add(path)
            return False
        self.blocked.update(_ancestors(path))
        return True

    def walk(self, cur_oid: str | None, tgt_oid: str | None, prefix: str, trules: IgnoreRules) -> None:
        """One directory of each tree (either may be missing), name by name: a name on the
        way to a selected path is `toward`, a selected one is `compare`d."""
        cur = self.load(cur_oid) if cur_oid else {}
        tgt = self.load(tgt_oid) if tgt_oid else {}
        for name in sorted(cur.keys() | tgt.keys()):
            path = f"{prefix}/{name}" if prefix else name
            where = self.select(path)
            if where == "anc":
                self.toward(path, cur.get(name), tgt.get(name), trules)
            elif where is not None:
                self.compare(path, cur.get(name), tgt.get(name), trules)

    def toward(self, path: str, c: Entry | None, t: Entry | None, trules: IgnoreRules) -> None:
        """A directory on the way to a selected path: made a directory on both sides, then
        walked into."""
        if path in self.protected:
            self.leave(path, "not stored by rewind (ignored, unreadable or special): left alone", t is not None)
            return
        if self.other_mount(path, c):
            self.leave(path, _MOUNT_WHY, t is not None)
            return
        if t is not None and t.kind != DIR:
            t = None  # the selected path does not exist in the checkpoint
        if c is not None and c.kind != DIR:
            if t is None:
                return  # nothing selected exists on either side below here
            self.plan.ops.append(Op("delete", path, None, c))
            c = None
        if c is None and t is not None:
            self.plan.ops.append(Op("mkdir", path, t))
            self.dir_modes.append(Op("chmod", path, t))
        sub_rules = self.rules_in(self.load(t.oid), path, trules) if t is not None else trules
        self.walk(c.oid if c else None, t.oid if t else None, path, sub_rules)

    def compare(self, path: str, c: Entry | None, t: Entry | None, trules: IgnoreRules) -> None:
        """A selected path, now `c` and in the target `t` (either may be None): the
        operations that make it the target's, or why it is left."""
        if c == t:
            return
        if path in self.protected:
            if t is not None and not (t.kind == LARGE and c is not None and c.kind == LARGE):
                why = "not stored by rewind (ignored, unreadable, special or too large): left alone"
                self.leave(path, why, t.kind != LARGE)
            return
        if self.other_mount(path, c):
            self.leave(path, _MOUNT_WHY, t is not None)
            return
        if c is not None and t is not None and c.kind == DIR and t.kind == DIR:
            if c.oid != t.oid:
                self.walk(c.oid, t.oid, path, self.rules_in(self.load(t.oid), path, trules))
            if c.mode != t.mode:
                self.dir_modes.append(Op("chmod", path, t, c))
            return
        if t is not None and t.kind == LARGE:
            self.plan.skipped.append(LeftAlone(path, _LARGE_WHY))
            return
        if c is not None and t is not None and c.kind == t.kind == FILE and c.oid == t.oid:
            self.plan.ops.append(Op("chmod", path, t, c))
            return
        if c is not None and (c.kind == DIR or t is None or t.kind == DIR):
            if not self.remove(path, c, trules, check_self=t is None):
                if t is not None:
                    self.leave(path, "cannot replace a directory that holds files rewind does not "
                                     "store (or another mount)")
                return
            c = None
        if t is None:
            return
        if c is not None:  # file <-> link or new content: replaced by rename
            self.plan.ops.append(Op("write" if t.kind == FILE else "symlink", path, t, c))
        else:
            self.create(path, t)

    def remove(self, path: str, c: Entry, trules: IgnoreRules, check_self: bool = True) -> bool:
        """Ops removing `c` at `path`; False when something there must be kept. A path
        the checkpoint's own rules ignore is kept: the checkpoint says nothing about it."""
        if check_self and trules.is_ignored(path, c.kind == DIR):
            self.plan.skipped.append(LeftAlone(path, "ignored at the checkpoint: left alone"))
            self.blocked.update(_ancestors(path))
            return False
        if self.other_mount(path, c):
            self.plan.skipped.append(LeftAlone(path, _MOUNT_WHY))
            return False
        if c.kind != DIR:
            self.plan.ops.append(Op("delete", path, None, c))
            return True
        sub = self.load(c.oid)
        for name in sorted(sub):
            self.remove(f"{path}/{name}", sub[name], trules)
        if path in self.blocked:
            self.plan.skipped.append(LeftAlone(path, "directory kept: it holds files rewind does not remove"))
            return False
        self.plan.ops.append(Op("rmdir", path, None, c))
        return True

    def create(self, path: str, t: Entry) -> None:
        """Ops making `t` at `path`, where nothing is now (a directory with all it holds)."""
        if t.kind == DIR:
            self.plan.ops.append(Op("mkdir", path, t))
            self.dir_modes.append(Op("chmod", path, t))
            sub = self.load(t.oid)
            for name in sorted(sub):
                self.create(f"{path}/{name}", sub[name])
        elif t.kind == FILE:
            self.plan.ops.append(Op("write", path, t))
        elif t.kind == LINK:
            self.plan.ops.append(Op("symlink", path, t))
        else:
            self.plan.skipped.append(LeftAlone(path, _LARGE_WHY))


def _keep_hooks(project: Project, plan: RestorePlan) -> None:
    """An agent's settings file is restored like any file, but keeps rewind's own hook
    entries: a restore never stops the recording (docs/design.md, "Scope")."""
    from rewind.hooks.install import PROJECT_SETTINGS, keep_ours
    for i, op in enumerate(plan.ops):
        if op.path not in PROJECT_SETTINGS or op.action not in ("write", "delete") or \
                op.old is None or op.old.kind != FILE:
            continue
        target_bytes = project.store.get(op.entry.oid) if op.action == "write" else None
        merged = keep_ours(op.path, project.store.get(op.old.oid), target_bytes)
        if merged is None or merged == target_bytes:
            continue
        oid = digest_of(merged)
        if oid == op.old.oid:
            plan.ops[i] = None          # already what it would become
        else:
            mode = op.entry.mode if op.entry is not None else op.old.mode
            plan.ops[i] = Op("write", op.path, Entry(FILE, mode, oid, len(merged)), op.old)
            plan.extra[oid] = merged
        plan.kept_hooks.append(op.path)
    keep_dirs = {a for path in plan.kept_hooks for a in _ancestors(path)}
    plan.ops = [op for op in plan.ops if op is not None
                and not (op.action == "rmdir" and op.path in keep_dirs)]


_MOUNT_WHY = "on another mounted filesystem: left alone (`rewind to --cross-mounts` goes in)"
_LARGE_WHY = "too large to have been stored: cannot be restored"


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def unmatched(project: Project, target: Checkpoint, current: ScanResult, paths: list[str] | None) -> list[str]:
    """The paths asked for (`to ID -- PATH`) that name nothing in the checkpoint nor in the
    working tree as scanned: a typo, not a tree that already matches."""
    load = TreeLoader(project.store, current.trees)

    def has(tree_oid: str, path: str) -> bool:
        return entry_at(load, tree_oid, path) is not None
    return [p for p in paths or [] if p.strip("/") and p.strip("/") not in current.protected
            and not has(target.tree, p.strip("/"))
            and not has(current.root, p.strip("/"))]


def plan_for_display(project: Project, target: Checkpoint, paths: list[str] | None,
                     current: ScanResult | None = None, cross_mounts: bool = False) -> RestorePlan:
    """`current`: a read-only scan made with `held_by(project, target, paths)`."""
    current = current or working_scan(project, held_by(project, target, paths))
    return plan_restore(project, target, current, paths, cross_mounts)

