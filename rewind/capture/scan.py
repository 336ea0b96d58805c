"""Scanning a project into tree objects: the whole tree (`scan`) or the way to dirty paths (`scan_dirty`).

Both run walker.Walker from the root, hashing only what the stat cache cannot vouch for
(walker.py), reading files on reader threads past walk_reads.PARALLEL_AFTER of them
(walk_reads.py). A full scan with an empty stat cache and at least fanout.FANOUT_FILES
files runs on worker processes instead (fanout.py), each walking its share of the tree.
"""

from __future__ import annotations

import os

from rewind.capture.ignore import IgnoreRules
from rewind.capture.walk_reads import PARALLEL_AFTER
from rewind.capture.walker import DirNode, ScanStats, Walker
from rewind.constants import MAX_FILE_SIZE
from rewind.model import StatEntry
from rewind.store.objects import Store
from rewind.store.tree import Tree
from rewind.structs import dataclass, field

__all__ = ["PARALLEL_AFTER", "ScanResult", "ScanStats", "scan", "scan_dirty"]


@dataclass
class ScanResult:
    root: str                                  # id of the root tree
    trees: dict[str, Tree]                     # every tree of this scan, by id
    stats: ScanStats
    protected: set[str]                        # paths a restore must never touch (not stored)
    hardlinks: set[str]
    cache_upserts: dict[str, StatEntry] = field(default_factory=dict)
    cache_removed: set[str] = field(default_factory=set)
    listed: list[str] | None = None            # incremental: the directories listed (None: all)
    removed_prefixes: set[str] = field(default_factory=set)
    mended: set[str] = field(default_factory=set)  # known damaged ids written whole again
    workers: int = 0                           # worker processes that did the scan (fanout.py)
    raw_packs: list[str] = field(default_factory=list)   # their packs, stored raw: to recompress
    forced: list[str] = field(default_factory=list)     # ignored now, read for a restore's target (held)


def scan_dirty(root: str, store: Store, cache, fs_now_ns: int, old_root: str, load,
               dirty: dict[str, str], max_size: int = MAX_FILE_SIZE) -> ScanResult:
    """An incremental scan: only the directories on the way to a dirty path are listed;
    every other subtree is the previous scan's, unread. `dirty`: path -> "m" (the path or
    its entries changed) or "c" (created or moved in: its whole subtree is read). `cache`
    needs only `.get()`. The result names the directories it listed (`listed`), and the
    cache keys and key prefixes that are gone; the same tree a full scan would build, as
    long as the dirty set is complete (the watcher's job, checked by the caller)."""
    walker = Walker(root, store, cache, fs_now_ns, max_size)
    walker.old = load
    for path, kind in dirty.items():
        parts = path.split("/") if path else []
        for i in range(len(parts)):
            walker.need.add("/".join(parts[:i]))
        walker.need.add(path)
        if kind == "c":
            walker.fresh.add(path)
    if not dirty:
        return ScanResult(old_root, {}, walker.stats, set(), set(), {}, set(), listed=[])
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        oid = walker.walk_dir(rfd, "", IgnoreRules.for_root(root), load(old_root), "" in walker.fresh)
    finally:
        os.close(rfd)
    return ScanResult(oid, walker.trees, walker.stats, walker.protected, walker.hardlinks,
                      walker.upserts, walker.removed, listed=walker.listed,
                      removed_prefixes=walker.removed_prefixes)


def scan(root: str, store: Store | None = None, cache: dict[str, StatEntry] | None = None,
         fs_now_ns: int = 0, max_size: int = MAX_FILE_SIZE, progress=None,
         damaged: set[str] | frozenset[str] = frozenset(),
         parallel_after: int | None = PARALLEL_AFTER, fanout_after: int | None = None,
         held=None) -> ScanResult:
    """Walk `root`. With a store, every blob and tree is staged in it and cache updates are
    returned; without one, nothing is written (a read-only look at the working tree).
    `damaged`: ids whose stored copy is known bad: never trusted from the cache, and
    written afresh (`ScanResult.mended` names those). Files to read past `parallel_after`
    are read on reader threads (None: never). With an empty cache and at least
    `fanout_after` files (None: fanout.FANOUT_FILES), on worker processes (fanout.py).
    `held(path)`: a restore's target holds `path`; read even when today's rules ignore it
    (never on worker processes: they do not know the target)."""
    walker = Walker(root, store, cache or {}, fs_now_ns, max_size, damaged)
    walker.target_holds = held
    walker.progress = progress
    walker.parallel_after = parallel_after
    if progress is not None:
        progress("files read", 0, 0)
    rfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rules = IgnoreRules.for_root(root)
        oid = None
        if store is not None and not walker.cache and parallel_after is not None and held is None:
            from rewind.capture.fanout import scan_on_workers
            oid = scan_on_workers(root, walker, rfd, rules, progress, fanout_after)
        if oid is None:
            oid = walker.walk_dir(rfd, "", rules)
        if walker.pipeline is not None:
            walker.pipeline.drain()
        if isinstance(oid, DirNode):
            oid = oid.oid
    finally:
        if walker.pipeline is not None:
            walker.pipeline.close()          # no reader uses a directory past this point
            for node in walker.held:
                os.close(node.fd)
        os.close(rfd)
    removed = set()
    if store is not None:
        removed = {p for p in walker.cache if p not in walker.seen}
    return ScanResult(oid, walker.trees, walker.stats, walker.protected, walker.hardlinks,
                      walker.upserts, removed, mended=walker.mended, workers=walker.workers,
                      raw_packs=walker.raw_packs, forced=walker.forced)
