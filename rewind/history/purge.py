"""Purge one path from all history (`rewind forget -- PATH`): a secret the agent wrote and the
person deleted must not stay restorable for the retention's 30 days.

How: rewrite, not mark. Every content the path ever had in the project's checkpoints (the
blob ids found at that path, or below it for a directory) is taken out of every tree of
the store that holds it, under any path, in any project: new tree objects without those
entries, every checkpoint's (hidden ones and the trash's too) and the last scan's tree
pointed at its rewritten tree, the rows that name the ids cleared; then the objects
themselves are deleted, loose files unlinked and packs rewritten without them. A mark
and filter would leave the bytes on disk, which is the one thing a purge must not do.
A checkpoint keeps its number, prompt and changes; its tree simply no longer holds the
path, so `rewind to N` leaves it out and diffs do not show its content.

Under gc's lock and the store lock held exclusive (history/gc.py step 4): no writer is in
flight, so none can come to rely on an id while it goes. Out of reach, and said so: the
prompt texts and shell commands recorded in the catalog (which may quote the secret),
git refs exported from a checkpoint (`rewind export`), copies outside rewind's store.
"""

from __future__ import annotations

import os

from rewind.errors import CorruptObject, RewindError
from rewind.store import tree as treemod
from rewind.store.objects import Store, loose_path
from rewind.store.tree import DIR, FILE, LINK
from rewind.structs import dataclass, field

UNREACHABLE = ("prompt texts and shell commands recorded in the catalog", "git refs made by `rewind export`",
               "copies outside rewind's store (backups, the agent's own transcript)")


@dataclass
class PurgeReport:
    paths: list[str]
    contents: int = 0                  # distinct contents (blob ids) the paths held
    checkpoints: int = 0               # checkpoints whose tree changed
    other_paths: list[str] = field(default_factory=list)   # other paths that held the same content
    objects_removed: int = 0
    bytes_removed: int = 0
    still_on_disk: list[str] = field(default_factory=list)  # the next checkpoint stores these again

    def to_json(self) -> dict:
        return dict(self.__dict__, unreachable=list(UNREACHABLE))


def relative(root: str, path: str) -> str:
    """PATH as given (relative to the current directory, or absolute) -> relative to root."""
    full = os.path.normpath(os.path.join(os.getcwd(), path))
    top = root.rstrip("/") + "/"
    if not full.startswith(top):            # through a symlinked parent, as cli/common.py does
        parent, base = os.path.split(full)
        full = os.path.join(os.path.realpath(parent), base)
    if not full.startswith(top) or full == root:
        raise RewindError(f"{path}: not a path inside the project {root}",
                          hint="`rewind forget -- PATH` purges one file or directory of the project")
    return full[len(top):]


def _lookup(store: Store, tree_id: str, parts: list[str]):
    """The entry at `parts` below tree `tree_id`, or None."""
    tid = tree_id
    for i, name in enumerate(parts):
        entries = treemod.parse(store.get(tid))
        e = entries.get(name)
        if e is None:
            return None
        if i == len(parts) - 1:
            return e
        if e.kind != DIR:
            return None
        tid = e.oid
    return None


def _contents(store: Store, entry, out: set[str]) -> None:
    """Every blob id at or below an entry."""
    if entry.kind in (FILE, LINK) and entry.oid:
        out.add(entry.oid)
    elif entry.kind == DIR:
        for e in treemod.parse(store.get(entry.oid)).values():
            _contents(store, e, out)


def find_contents(store: Store, trees: list[str], rels: list[str]) -> set[str]:
    oids: set[str] = set()
    for tid in set(trees):
        for rel in rels:
            try:
                e = _lookup(store, tid, rel.split("/"))
                if e is not None:
                    _contents(store, e, oids)
            except (CorruptObject, ValueError):
                continue          # a damaged tree: verify names it; its content cannot be read anyway
    return oids


class _Rewriter:
    """Trees without the entries that hold `oids`, memoized; the paths that held them."""

    def __init__(self, store: Store, oids: set[str]):
        self.store, self.oids = store, oids
        self.done: dict[str, str] = {}
        self.held: set[str] = set()

    def tree(self, tid: str, path: str = "") -> str:
        if tid in self.done:
            return self.done[tid]
        try:
            entries = treemod.parse(self.store.get(tid))
        except (CorruptObject, ValueError):
            self.done[tid] = tid          # cannot be read: nothing of it can be given back anyway
            return tid
        out, changed = {}, False
        for name, e in entries.items():
            sub = f"{path}/{name}" if path else name
            if e.kind in (FILE, LINK) and e.oid in self.oids:
                self.held.add(sub)
                changed = True
                continue
            if e.kind == DIR:
                new = self.tree(e.oid, sub)
                if new != e.oid:
                    e = e._replace(oid=new)
                    changed = True
            out[name] = e
        if changed:
            new_id, data = treemod.tree_id(out)
            self.store.put(data, new_id)
            self.done[tid] = new_id
        else:
            self.done[tid] = tid
        return self.done[tid]


def purge(home: str, catalog, project_id: int, root: str, rels: list[str]) -> PurgeReport:
    """Take every content `rels` held in the project's history out of the whole store."""
    from rewind.history.gc import BARRIER_TIMEOUT_S, locked
    from rewind.lock import store_lock
    report = PurgeReport(paths=rels)
    store = Store(home)
    with locked(home), store_lock(home, exclusive=True, timeout=BARRIER_TIMEOUT_S,
                                  what="the store (a purge waits for hooks in flight)"):
        roots = catalog.purge_roots()
        mine = [t for pid, _, t in roots["checkpoints"] if pid == project_id]
        mine += [t for _, pid, t in roots["trash"] if pid == project_id]
        mine += [t for pid, t in roots["last_trees"] if pid == project_id]
        oids = find_contents(store, mine, rels)
        report.contents = len(oids)
        report.still_on_disk = [r for r in rels if os.path.lexists(os.path.join(root, r))]
        if not oids:
            return report
        rw = _Rewriter(store, oids)
        cps = {(pid, n): new for pid, n, t in roots["checkpoints"] if (new := rw.tree(t)) != t}
        trash = {i: new for i, _, t in roots["trash"] if (new := rw.tree(t)) != t}
        last = {pid: new for pid, t in roots["last_trees"] if (new := rw.tree(t)) != t}
        store.flush()                      # the new trees are on disk before any row names them
        with catalog.transaction():
            catalog.purge_apply(cps, trash, last, oids)
        report.checkpoints = len(cps) + len(trash)
        report.other_paths = sorted(rw.held - set(rels))
        # this project's other paths with the same content, if still there, are stored again too
        report.still_on_disk += [p for p in report.other_paths if os.path.lexists(os.path.join(root, p))]
        report.objects_removed, report.bytes_removed = _delete(home, oids)
    return report


def _delete(home: str, oids: set[str]) -> tuple[int, int]:
    """The objects themselves: loose copies unlinked, packs that hold one rewritten without it.
    First, what is stored against them (store/delta.py) is stored whole again, so nothing
    kept needs a base that goes; and a dictionary trained in a pack that held one of them
    (it may hold pieces of it) goes too, the objects that used it stored whole."""
    from rewind.store.objects import ZSTD_DICT
    from rewind.store.delta import whole
    from rewind.store.pack import Pack
    from rewind.store.repack import write_merged
    from rewind.store.sweep import remove_pack
    from rewind.constants import OBJECTS_DIR
    from rewind.store.objects import PACKS_DIR
    removed, size = set(), 0
    objects = os.path.join(home, OBJECTS_DIR)
    pdir = os.path.join(home, PACKS_DIR)
    try:
        names = sorted(n for n in os.listdir(pdir) if n.endswith(".pack"))
    except FileNotFoundError:
        names = []
    packs = {}
    for name in names:
        try:
            packs[name] = Pack(os.path.join(pdir, name))
        except (OSError, ValueError):
            continue
    going = set(oids)
    for pack in packs.values():
        if any(oid in oids for oid, _, _ in pack.entries()):
            going.update(base for _, base, codec in pack.based() if codec == ZSTD_DICT)
    store = Store(home)
    rewhole: dict[str, bytes] = {}       # id -> its body stored whole, for what needs a base that goes
    for pack in packs.values():
        for oid, base, _ in pack.based():
            if base in going and oid not in going:
                try:
                    rewhole[oid] = whole(store.get(oid))
                except CorruptObject:
                    pass                 # damaged already: it stays as it is, for `verify`
    for oid in going:
        p = loose_path(objects, oid)
        try:
            n = os.lstat(p).st_size
            os.unlink(p)
        except FileNotFoundError:
            continue
        if oid in oids:                  # (a dictionary that goes is not one of the contents)
            size += n
            removed.add(oid)
    for pack in packs.values():
        held = [(oid, n) for oid, _, n in pack.entries() if oid in going]
        redo = any(oid in rewhole for oid, _, _ in pack.based())
        if not held and not redo:
            pack.mm.close()
            continue
        if len(held) == pack.count:
            pack.mm.close()
            remove_pack(home, pack.path)
        else:
            write_merged(home, [pack], lambda o: o not in going, replace=rewhole)
            pack.mm.close()
        for oid, n in held:
            if oid in oids:
                removed.add(oid)
                size += n
    return len(removed), size
