"""What differs between two trees, compared top-down by id, what a tree holds at a path (pure;
trees come from `load`), and the path selection (`-- PATH`) that restore and diff share."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rewind.model import ChangeRow
from rewind.store.tree import DIR, LARGE, LINK, Entry, Tree

Load = Callable[[str], Tree]


def _under(load: Load, entry: Entry, path: str) -> Iterator[tuple[str, Entry]]:
    """Every non-dir entry below a dir entry, plus the dir itself when it is empty."""
    tree = load(entry.oid)
    if not tree:
        yield path, entry
        return
    for name in sorted(tree):
        e = tree[name]
        sub = f"{path}/{name}"
        if e.kind == DIR:
            yield from _under(load, e, sub)
        else:
            yield sub, e


def diff_trees(load: Load, old: str | None, new: str | None,
               prefix: str = "") -> Iterator[tuple[str, Entry | None, Entry | None]]:
    """(path, old entry, new entry) for every path that differs. Directories appear only
    when empty on the side that has them; a type change dir<->file lists both sides."""
    if old == new:
        return
    a = load(old) if old else {}
    b = load(new) if new else {}
    for name in sorted(a.keys() | b.keys()):
        ea, eb = a.get(name), b.get(name)
        path = f"{prefix}/{name}" if prefix else name
        if ea == eb:
            continue
        if ea is not None and eb is not None and ea.kind == DIR and eb.kind == DIR:
            if ea.oid != eb.oid:
                yield from diff_trees(load, ea.oid, eb.oid, path)
            else:
                yield path, ea, eb  # only the directory's mode changed
            continue
        if ea is not None and ea.kind == DIR:
            for sub, e in _under(load, ea, path):
                yield sub, e, None
            ea = None
        if eb is not None and eb.kind == DIR:
            if ea is not None:
                yield path, ea, None
            for sub, e in _under(load, eb, path):
                yield sub, None, e
            continue
        if ea is not None or eb is not None:
            yield path, ea, eb


def entry_at(load: Load, tree_oid: str | None, path: str) -> Entry | None:
    """What a tree holds at `path` (project-relative), or None (no tree: None)."""
    if not tree_oid:
        return None
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


def status_of(old: Entry | None, new: Entry | None) -> str:
    if old is None:
        return "added"
    if new is None:
        return "deleted"
    return "modified"


def flags_of(old: Entry | None, new: Entry | None) -> list[str]:
    flags = []
    kinds = {e.kind for e in (old, new) if e is not None}
    if LINK in kinds:
        flags.append("symlink")
    if LARGE in kinds:
        flags.append("large")
    if old is not None and new is not None and old.kind == new.kind and old.oid == new.oid \
            and old.mode != new.mode:
        flags.append("mode")
    return flags


def change_rows(pairs, is_binary: Callable[[Entry], bool] | None = None,
                hardlinks: set[str] = frozenset()) -> list[ChangeRow]:
    rows = []
    for path, old, new in pairs:
        flags = flags_of(old, new)
        if is_binary is not None and any(e is not None and e.kind == "F" and is_binary(e)
                                         for e in (old, new)):
            flags.append("binary")
        if path in hardlinks:
            flags.append("hardlink")
        rows.append(ChangeRow(
            path=path, status=status_of(old, new),
            old_kind=old.kind if old else None, new_kind=new.kind if new else None,
            old_mode=old.mode if old else None, new_mode=new.mode if new else None,
            old_oid=old.oid if old else None, new_oid=new.oid if new else None,
            old_size=old.size if old else None, new_size=new.size if new else None,
            flags=flags))
    return rows


def path_selector(paths: list[str] | None) -> Callable[[str], str | None]:
    """'all' under a selected path, 'anc' on the way to one, None elsewhere."""
    if not paths:
        return lambda p: "all"
    norm = [p.strip("/") for p in paths]
    if "" in norm:
        return lambda p: "all"

    def select(p: str):
        for n in norm:
            if p == n or p.startswith(n + "/"):
                return "all"
        for n in norm:
            if n.startswith(p + "/"):
                return "anc"
        return None
    return select


def path_filter(paths: list[str] | None) -> Callable[[str], bool]:
    """Is `p` one of `paths` (project-relative) or below one of them."""
    select = path_selector(paths)
    return lambda p: select(p) == "all"
