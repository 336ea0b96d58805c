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

from rewind.capture.ignore import IgnoreRules
from rewind.capture.scan import ScanResult
from rewind.capture.snapshot import TreeLoader, working_scan
from rewind.diff import path_selector
from rewind.model import Checkpoint
from rewind.project import Project
from rewind.store.objects import digest_of
from rewind.store.tree import DIR, FILE, LARGE, LINK, Entry
from rewind.structs import dataclass, field


@dataclass
class Op:
    action: str                 # delete | rmdir | mkdir | write | symlink | chmod
    path: str
    entry: Entry | None = None  # what the path becomes (mkdir, write, symlink, chmod)
    old: Entry | None = None    # what is there now


@dataclass
class RestorePlan:
    target: Checkpoint
    ops: list[Op] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (path, why)
    unmet: list[tuple[str, str]] = field(default_factory=list)     # skipped, and the target holds it
    left: list[tuple[str, str]] = field(default_factory=list)      # (path, why): changed since the scan
    applied: int = 0                                                # operations carried out so far
    kept_hooks: list[str] = field(default_factory=list)   # agents' settings files keeping rewind's hooks
    extra: dict[str, bytes] = field(default_factory=dict)  # contents made by the plan (not in the store)

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

    def rows(self) -> list[tuple[str, str, Op]]:
        """One (path, action, op) per path that changes, in plan order: the count of what a
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
                out.append((path, "replace", made[-1]))
            elif made:
                out.append((path, made[-1].action, made[-1]))
            else:
                out.append((path, ops[0].action, ops[0]))
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
                 paths: list[str] | None = None, cross_mounts: bool = False) -> RestorePlan:
    from rewind.history.mounts import Mounts
    load = TreeLoader(project.store, current.trees)
    plan = RestorePlan(target)
    protected = current.protected
    blocked: set[str] = set()  # directories that hold protected paths
    for p in protected:
        blocked.update(_ancestors(p))
    mounts = Mounts(project.root)
    for p in mounts.points:    # a mount point is never removed, crossing or not
        blocked.update(_ancestors(p) + ([p] if cross_mounts else []))
    select = path_selector(paths)
    dir_modes: list[Op] = []

    def leave(path: str, why: str, held: bool = True) -> None:
        """A path left as it is; one the target holds is `unmet`: named, and the restore fails."""
        plan.skipped.append((path, why))
        if held:
            plan.unmet.append((path, why))

    def other_mount(path: str, c: Entry | None) -> bool:
        """`path` is another filesystem's mount point, not to be entered (unless asked)."""
        if c is None or c.kind != DIR or not mounts.is_mount(path):
            return False
        if cross_mounts:
            blocked.add(path)
            return False
        blocked.update(_ancestors(path))
        return True

    def rules_in(tree, rel_dir: str, parent: IgnoreRules) -> IgnoreRules:
        """The checkpoint's own ignore rules inside one of its directories."""
        contents = [project.store.get(tree[n].oid) for n in (".gitignore", ".rewindignore")
                    if n in tree and tree[n].kind == FILE]
        return parent.with_contents(rel_dir, contents) if contents else parent

    def remove(path: str, c: Entry, trules: IgnoreRules, check_self: bool = True) -> bool:
        """Ops removing `c` at `path`; False when something there must be kept. A path
        the checkpoint's own rules ignore is kept: the checkpoint says nothing about it."""
        if check_self and trules.is_ignored(path, c.kind == DIR):
            plan.skipped.append((path, "ignored at the checkpoint: left alone"))
            blocked.update(_ancestors(path))
            return False
        if other_mount(path, c):
            plan.skipped.append((path, _MOUNT_WHY))
            return False
        if c.kind != DIR:
            plan.ops.append(Op("delete", path, None, c))
            return True
        sub = load(c.oid)
        for name in sorted(sub):
            remove(f"{path}/{name}", sub[name], trules)
        if path in blocked:
            plan.skipped.append((path, "directory kept: it holds files rewind does not remove"))
            return False
        plan.ops.append(Op("rmdir", path, None, c))
        return True

    def create(path: str, t: Entry) -> None:
        if t.kind == DIR:
            plan.ops.append(Op("mkdir", path, t))
            dir_modes.append(Op("chmod", path, t))
            sub = load(t.oid)
            for name in sorted(sub):
                create(f"{path}/{name}", sub[name])
        elif t.kind == FILE:
            plan.ops.append(Op("write", path, t))
        elif t.kind == LINK:
            plan.ops.append(Op("symlink", path, t))
        else:
            plan.skipped.append((path, "too large to have been stored: cannot be restored"))

    def walk(cur_oid: str | None, tgt_oid: str | None, prefix: str, trules: IgnoreRules) -> None:
        cur = load(cur_oid) if cur_oid else {}
        tgt = load(tgt_oid) if tgt_oid else {}
        for name in sorted(cur.keys() | tgt.keys()):
            path = f"{prefix}/{name}" if prefix else name
            where = select(path)
            if where is None:
                continue
            c, t = cur.get(name), tgt.get(name)
            if where == "anc":
                if path in protected:
                    why = "not stored by rewind (ignored, unreadable or special): left alone"
                    leave(path, why, t is not None)
                    continue
                if other_mount(path, c):
                    leave(path, _MOUNT_WHY, t is not None)
                    continue
                if t is not None and t.kind != DIR:
                    t = None  # the selected path does not exist in the checkpoint
                if c is not None and c.kind != DIR:
                    if t is None:
                        continue  # nothing selected exists on either side below here
                    plan.ops.append(Op("delete", path, None, c))
                    c = None
                if c is None and t is not None:
                    plan.ops.append(Op("mkdir", path, t))
                    dir_modes.append(Op("chmod", path, t))
                sub_rules = rules_in(load(t.oid), path, trules) if t is not None else trules
                walk(c.oid if c else None, t.oid if t else None, path, sub_rules)
                continue
            if c == t:
                continue
            if path in protected:
                if t is not None and not (t.kind == LARGE and c is not None and c.kind == LARGE):
                    why = "not stored by rewind (ignored, unreadable, special or too large): left alone"
                    leave(path, why, t.kind != LARGE)
                continue
            if other_mount(path, c):
                leave(path, _MOUNT_WHY, t is not None)
                continue
            if c is not None and t is not None and c.kind == DIR and t.kind == DIR:
                if c.oid != t.oid:
                    walk(c.oid, t.oid, path, rules_in(load(t.oid), path, trules))
                if c.mode != t.mode:
                    dir_modes.append(Op("chmod", path, t, c))
                continue
            if t is not None and t.kind == LARGE:
                plan.skipped.append((path, "too large to have been stored: cannot be restored"))
                continue
            if c is not None and t is not None and c.kind == t.kind == FILE and c.oid == t.oid:
                plan.ops.append(Op("chmod", path, t, c))
                continue
            if c is not None and (c.kind == DIR or t is None or t.kind == DIR):
                if not remove(path, c, trules, check_self=t is None):
                    if t is not None:
                        leave(path, "cannot replace a directory that holds files rewind does not "
                                    "store (or another mount)")
                    continue
                c = None
            if t is not None:
                if c is not None:  # file <-> link or new content: replaced by rename
                    action = "write" if t.kind == FILE else "symlink"
                    plan.ops.append(Op(action, path, t, c))
                else:
                    create(path, t)

    def keep_hooks() -> None:
        """An agent's settings file is restored like any file, but keeps rewind's own hook
        entries: a restore never stops the recording (DESIGN)."""
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

    root_tree = load(target.tree)
    walk(current.root, target.tree, "",
         IgnoreRules.for_root_contents(project.root, [project.store.get(root_tree[n].oid)
                                                      for n in (".gitignore", ".rewindignore")
                                                      if n in root_tree and root_tree[n].kind == FILE]))
    plan.ops.extend(reversed(dir_modes))  # deepest first, after every write inside them
    keep_hooks()
    return plan


_MOUNT_WHY = "on another mounted filesystem: left alone (`rewind to --cross-mounts` goes in)"


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def entry_at(load, tree_oid: str, path: str) -> Entry | None:
    """What a tree holds at `path` (project-relative), or None."""
    tree = load(tree_oid)
    parts = path.split("/")
    for i, name in enumerate(parts):
        entry = tree.get(name)
        if entry is None or i == len(parts) - 1:
            return entry
        if entry.kind != DIR:
            return None
        tree = load(entry.oid)
    return None


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

