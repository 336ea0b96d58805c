"""The incremental scan builds the very tree a full scan builds, from the paths a watcher
reports: seeded random trees and random changes (edits, creations, deletions, renames of
files and directories, symlinks, mode changes, kind changes, ignored paths)."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from rewind.capture.scan import scan, scan_dirty
from rewind.capture.snapshot import TreeLoader
from rewind.store.objects import Store


def _rel(root, p):
    return os.path.relpath(p, root)


def mutate(root: str, rng: random.Random) -> dict[str, str]:
    """A few random changes; returns the dirty set a watcher would report."""
    dirty: dict[str, str] = {}

    def files():
        out = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = [x for x in dirs if x != ".git"]
            out += [os.path.join(d, f) for f in fs]
        return sorted(out)

    def dirs():
        out = []
        for d, ds, _ in os.walk(root):
            ds[:] = [x for x in ds if x != ".git" and not os.path.islink(os.path.join(d, x))]
            out += [os.path.join(d, x) for x in ds]
        return sorted(out)

    for _ in range(rng.randint(1, 6)):
        op = rng.choice(["edit", "edit", "create", "delete", "mkdir", "rmdir", "rename_file",
                         "rename_dir", "symlink", "chmod", "kind", "ignored", "touch", "replace_dir"])
        fs, ds = files(), dirs()
        if op == "edit" and fs:
            p = rng.choice(fs)
            if os.path.islink(p):
                continue
            with open(p, "ab") as f:
                f.write(os.urandom(rng.randint(1, 50)))
            dirty[_rel(root, p)] = "m"
        elif op == "touch" and fs:      # an event with no change at all
            dirty[_rel(root, rng.choice(fs))] = "m"
        elif op == "create":
            d = rng.choice([root] + ds)
            p = os.path.join(d, f"new{rng.randrange(10**6)}.txt")
            with open(p, "wb") as f:
                f.write(os.urandom(20))
            dirty[_rel(root, p)] = "c"
        elif op == "delete" and fs:
            p = rng.choice(fs)
            os.unlink(p)
            dirty[_rel(root, p)] = "m"
        elif op == "mkdir":
            d = rng.choice([root] + ds)
            p = os.path.join(d, f"dir{rng.randrange(10**6)}", "deep")
            os.makedirs(p)
            with open(os.path.join(p, "f.txt"), "w") as f:
                f.write("x")
            top = os.path.dirname(p)
            dirty[_rel(root, top)] = "c"
            dirty[_rel(root, p)] = "c"
            dirty[_rel(root, os.path.join(p, "f.txt"))] = "c"
        elif op == "rmdir" and ds:
            p = rng.choice(ds)
            for sub_d, _, sub_fs in os.walk(p):
                for f in sub_fs:
                    dirty[_rel(root, os.path.join(sub_d, f))] = "m"
            shutil.rmtree(p)
            dirty[_rel(root, p)] = "m"
        elif op == "rename_file" and fs:
            p = rng.choice(fs)
            q = os.path.join(rng.choice([root] + [d for d in ds if not d.startswith(p)]), f"moved{rng.randrange(10**6)}")
            os.rename(p, q)
            dirty[_rel(root, p)] = "m"
            dirty[_rel(root, q)] = "c"
        elif op == "rename_dir" and ds:
            p = rng.choice(ds)
            parent = rng.choice([root] + [d for d in ds if not (d + "/").startswith(p + "/")])
            q = os.path.join(parent, f"mdir{rng.randrange(10**6)}")
            os.rename(p, q)
            dirty[_rel(root, p)] = "m"     # watchdog: one DirMovedEvent, no events for the contents
            dirty[_rel(root, q)] = "c"
        elif op == "replace_dir" and len(ds) >= 2:
            # a directory moved out of the tree, another moved into its place: inotify reports
            # the two moves and nothing about the contents
            p, q = rng.sample(ds, 2)
            if (q + "/").startswith(p + "/") or (p + "/").startswith(q + "/"):
                continue
            os.rename(p, os.path.join(os.path.dirname(root), f"away{rng.randrange(10**9)}"))
            os.rename(q, p)
            dirty[_rel(root, q)] = "m"
            dirty[_rel(root, p)] = "c"
        elif op == "symlink":
            d = rng.choice([root] + ds)
            p = os.path.join(d, f"link{rng.randrange(10**6)}")
            os.symlink(rng.choice(["../x", "/etc", "nowhere"]), p)
            dirty[_rel(root, p)] = "c"
        elif op == "chmod" and fs:
            p = rng.choice(fs)
            if not os.path.islink(p):
                os.chmod(p, rng.choice([0o644, 0o755, 0o600]))
                dirty[_rel(root, p)] = "m"
        elif op == "kind" and fs:       # a file becomes a directory
            p = rng.choice(fs)
            os.unlink(p)
            os.makedirs(p)
            with open(os.path.join(p, "inner"), "w") as f:
                f.write("inner")
            dirty[_rel(root, p)] = "c"
            dirty[_rel(root, os.path.join(p, "inner"))] = "c"
        elif op == "ignored":
            p = os.path.join(root, "build", f"out{rng.randrange(10**6)}.o")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write("ignored")
            dirty[_rel(root, p)] = "c"
    return {("" if k == "." else k): v for k, v in dirty.items()}


def make_tree(root: str, rng: random.Random) -> None:
    os.makedirs(root)
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("build/\n*.o\n")
    for i in range(rng.randint(5, 40)):
        depth = rng.randint(0, 4)
        d = os.path.join(root, *[f"d{rng.randrange(4)}" for _ in range(depth)])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "wb") as f:
            f.write(os.urandom(rng.randint(0, 100)))


@pytest.mark.parametrize("seed", range(60))
def test_incremental_scan_equals_a_full_scan(tmp_path, seed):
    rng = random.Random(seed)
    root = str(tmp_path / "t")
    make_tree(root, rng)
    store = Store(str(tmp_path / "home"))
    cache: dict[str, tuple] = {}
    first = scan(root, store, cache, 0)
    cache.update(first.cache_upserts)
    prev = first.root
    for step in range(4):
        dirty = mutate(root, rng)
        load = TreeLoader(store)
        inc = scan_dirty(root, store, cache, 0, prev, load, dirty)
        store.flush()
        full = scan(root, store, {}, 0)
        store.flush()
        assert inc.root == full.root, (seed, step, dirty)
        # the cache follows: nothing stale survives, and what is left still describes the tree
        for key in inc.cache_removed:
            cache.pop(key, None)
        for prefix in inc.removed_prefixes:
            for key in [k for k in cache if k.startswith(prefix)]:
                del cache[key]
        cache.update(inc.cache_upserts)
        stale = [k for k in cache if not os.path.lexists(os.path.join(root, k.rstrip("/")))]
        assert stale == [], (seed, step, stale)
        prev = inc.root


def test_no_dirty_path_reuses_the_previous_tree_without_reading(tmp_path):
    root = str(tmp_path / "t")
    make_tree(root, random.Random(1))
    store = Store(str(tmp_path / "home"))
    first = scan(root, store, {}, 0)
    store.flush()
    inc = scan_dirty(root, store, {}, 0, first.root, TreeLoader(store), {})
    assert inc.root == first.root and inc.listed == []
