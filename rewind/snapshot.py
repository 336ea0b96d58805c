"""capture(): lock, scan, make the objects durable, then commit the checkpoint row.

Write order is objects first, catalog row last: a checkpoint exists once its row commits,
and every object it names is on disk by then. The changes under the previous checkpoint
(what happened between it and this one) are computed and stored in the same transaction.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Callable

from . import tree as treemod
from .catalog import ChangeRow, Checkpoint
from .clock import iso, now_ns
from .diff import change_rows, diff_trees
from .lock import project_lock
from .objects import Store
from .project import Project, git_state
from .scan import ScanResult, scan
from .tree import FILE, Entry, Tree

Attribute = Callable[[Checkpoint, list[ChangeRow]], None]


class TreeLoader:
    """Trees by id: from a scan held in memory first, then from the store (verified)."""

    def __init__(self, store: Store, *extra: dict[str, Tree]):
        self.store = store
        self.cache: dict[str, Tree] = {treemod.EMPTY_TREE_ID: {}}
        for trees in extra:
            self.cache.update(trees)

    def __call__(self, oid: str) -> Tree:
        t = self.cache.get(oid)
        if t is None:
            t = treemod.parse(self.store.get(oid))
            self.cache[oid] = t
        return t


def fs_timestamp(store: Store) -> int:
    """The filesystem's idea of now (file times lag and are coarser than time.time())."""
    os.makedirs(store.tmp, mode=0o700, exist_ok=True)
    path = os.path.join(store.tmp, f"now.{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        os.unlink(path)


def working_scan(project: Project) -> ScanResult:
    """A read-only scan of the working tree: hashes what the stat cache cannot vouch for,
    writes nothing."""
    cache = project.catalog.load_statcache(project.id)
    return scan(project.root, None, cache)


def capture(project: Project, kind: str, *, message: str | None = None, meta: dict | None = None,
            attribute: Attribute | None = None, lock_timeout: float = 30.0,
            restore_target: int | None = None, locked: bool = False) -> tuple[Checkpoint, ScanResult]:
    """Take a checkpoint of the project's tree. `locked`: the caller holds the project lock."""
    meta = meta or {}
    guard = nullcontext() if locked else project_lock(project.home, project.id, timeout=lock_timeout)
    with guard:
        store = project.store
        cache = project.catalog.load_statcache(project.id)
        fs_now = fs_timestamp(store)
        try:
            result = scan(project.root, store, cache, fs_now)
            store.flush()
        except BaseException:
            store.discard()
            raise
        head, branch = git_state(project.root)
        created = now_ns()
        cp = Checkpoint(project_id=project.id, number=0, kind=kind, created_at=iso(created),
                        created_ns=created, tree=result.root, message=message,
                        git_head=head, git_branch=branch, restore_target=restore_target,
                        stats=result.stats.to_json(), **meta)
        prev = project.catalog.latest(project.id)
        rows: list[ChangeRow] = []
        if prev is not None:
            load = TreeLoader(store, result.trees)
            pairs = list(diff_trees(load, prev.tree, result.root))
            rows = change_rows(pairs, _binary_in(store, pairs), result.hardlinks)
            attribute_changes(project, prev, rows)
            if attribute is not None:
                attribute(prev, rows)
        with project.catalog.transaction():
            cp.number = project.catalog.allocate_number(project.id)
            project.catalog.insert_checkpoint(cp)
            if prev is not None:
                project.catalog.insert_changes(project.id, prev.number, rows)
            project.catalog.update_statcache(project.id, result.cache_upserts, result.cache_removed)
        return cp, result


def _binary_in(store: Store, pairs, limit: int = 2000):
    """A binary check that reads at most `limit` blobs (large change sets stay cheap)."""
    budget = [limit]

    def guarded(e: Entry) -> bool:
        if e.kind != FILE or budget[0] <= 0:
            return False
        budget[0] -= 1
        return _blob_binary(store, e.oid)
    return guarded


def attribute_changes(project: Project, cp: Checkpoint, rows: list[ChangeRow]) -> None:
    """The sources the core can tell by itself: what a rewind wrote is `rewind`."""
    if cp.kind != "rewind":
        return
    made = project.catalog.restore_made(project.id, cp.number)
    if made is None:
        return
    _, paths = made
    restored = set(paths or [])
    for row in rows:
        if row.path in restored or any(row.path.startswith(p + "/") for p in restored):
            row.source = "rewind"


def live_changes(project: Project, cp: Checkpoint) -> tuple[list[ChangeRow], ScanResult]:
    """Changes under the newest checkpoint: from it to the working tree, now."""
    result = working_scan(project)
    load = TreeLoader(project.store, result.trees)
    pairs = list(diff_trees(load, cp.tree, result.root))
    root = project.root
    rows = change_rows(pairs, None, result.hardlinks)
    for row, (path, old, new) in zip(rows, pairs):
        if (old is not None and old.kind == FILE and _blob_binary(project.store, old.oid)) or \
                (new is not None and new.kind == FILE and _file_binary(os.path.join(root, path))):
            row.flags.append("binary")
    attribute_changes(project, cp, rows)
    return rows, result


def _blob_binary(store: Store, oid: str) -> bool:
    try:
        return b"\0" in store.get(oid)[:8192]
    except Exception:
        return False


def _file_binary(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(8192)
    except OSError:
        return False


def changes_under(project: Project, cp: Checkpoint) -> list[ChangeRow]:
    """Changes under `cp`: stored when a later checkpoint exists, else live."""
    if project.catalog.next_after(project.id, cp.number) is not None:
        return project.catalog.changes(project.id, cp.number) or []
    return live_changes(project, cp)[0]
