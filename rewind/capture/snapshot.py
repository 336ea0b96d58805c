"""Reading the tree: trees by id (`TreeLoader`), the read-only scan of the working tree,
"now" on the project's filesystem (git's racy rule), and the small helpers a working copy's
scan uses (`working_copy.py` runs the scans and commits them)."""

from __future__ import annotations

import os
import time

from rewind.capture.scan import ScanResult, scan
from rewind.constants import COARSE_MTIME_NS, TMP_PREFIX
from rewind.errors import CorruptObject
from rewind.model import StatEntry
from rewind.project import Project
from rewind.store import tree as treemod
from rewind.store.objects import Store
from rewind.store.tree import DIR, FILE, Entry, Tree


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
            try:
                t = treemod.parse(self.store.get(oid))
            except ValueError as e:
                self.store.found_damaged[oid] = "damaged (a tree that does not parse)"
                raise CorruptObject(oid, f"damaged (a tree that does not parse: {e})") from None
            self.cache[oid] = t
        return t


def working_scan(project: Project, held=None) -> ScanResult:
    """A read-only scan of the working tree: hashes what the stat cache cannot vouch for,
    writes nothing. `held`: as scan's (a restore's plan reads what its target holds)."""
    cache = project.catalog.load_statcache(project.id)
    return scan(project.root, None, cache, held=held)


def examined_by(dirty: dict[str, str]):
    """Whether a quick scan of `dirty` looked at a path again (the path itself, or a
    directory created or moved in above it, read whole)."""
    def examined(path: str) -> bool:
        if path in dirty:
            return True
        while "/" in path:
            path = path.rpartition("/")[0]
            if dirty.get(path) == "c":
                return True
        return dirty.get("") == "c"
    return examined


def project_clock(root: str, store: Store) -> int:
    """"Now" on the project's filesystem, read from a file made there: git's racy rule
    compares file times with it, and they are the project filesystem's, which may count
    whole seconds (ext4 with 128-byte inodes, FAT, HFS+, some network mounts) and, over a
    network, run on another machine's clock. The store's filesystem answers when it is the
    same one. A project that cannot be written to gets the store's clock less the coarsest
    granularity: anything touched in the last two seconds is read again next time."""
    try:
        if os.stat(root).st_dev == os.stat(store.home).st_dev:
            return store.fs_now()
    except OSError:
        pass
    path = os.path.join(root, f"{TMP_PREFIX}0.{os.getpid()}{time.monotonic_ns()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return store.fs_now() - COARSE_MTIME_NS
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass


class Hinted:
    """A stat cache with a restore's fresh entries on top."""

    def __init__(self, base, hints: dict[str, StatEntry]):
        self.base, self.hints = base, hints

    def get(self, key: str) -> StatEntry | None:
        hint = self.hints.get(key)
        return hint if hint is not None else self.base.get(key)


def keep_hints(result: ScanResult, load, hints: dict[str, StatEntry]) -> None:
    """The hints the scan used (the file is in the tree with the hinted content and was not
    read again) become the stat cache's rows."""
    def get(oid: str):
        got = result.trees.get(oid)
        return got if got is not None else load(oid)
    for path, hint in hints.items():
        if path in result.cache_upserts:
            continue
        tree, parts = get(result.root), path.split("/")
        for part in parts[:-1]:
            e = tree.get(part)
            tree = get(e.oid) if e is not None and e.kind == DIR else {}
        e = tree.get(parts[-1])
        if e is not None and e.kind == FILE and e.oid == hint.oid:
            result.cache_upserts[path] = hint


def blob_binary(store: Store, oid: str) -> bool:
    try:
        return store.is_binary(oid)
    except Exception:
        return False


def binary_in(store: Store, limit: int = 2000):
    """A binary check that reads at most `limit` blobs (large change sets stay cheap)."""
    budget = [limit]

    def guarded(e: Entry) -> bool:
        if e.kind != FILE or budget[0] <= 0:
            return False
        budget[0] -= 1
        return blob_binary(store, e.oid)
    return guarded
