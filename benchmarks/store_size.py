#!/usr/bin/env python3
"""Store size after N prompts that each change K files of a generated project, next to
the project itself and a shadow git repository holding the same states (`git gc`-packed),
measured in one run.

    python benchmarks/store_size.py [--files 10000] [--prompts 100] [--changes 5]

The tree comes from make_tree.py beside this script (or --make-tree PATH). Each prompt
rewrites a few lines in K text files chosen by a seeded generator; rewind takes a
`prompt` checkpoint (the same capture a hook runs, in-process) and the shadow repository
commits the same state (GIT_DIR outside the tree, `git add -A`, `git commit`). Then
the first snapshot's raw packs are recompressed (as its background job does once the
store is idle), `rewind gc` runs and `git gc` packs the shadow. Sizes are apparent bytes (sum of file
sizes) and allocated bytes (`du`, what the disk really gives up).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402


def sizes(path: Path, skip: tuple[str, ...] = ()) -> tuple[int, int, int]:
    """(files, apparent bytes, allocated bytes) under path."""
    files = apparent = allocated = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return files, apparent, allocated


def text_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("build", ".git", "__pycache__"))
        for name in sorted(filenames):
            if name.endswith((".py", ".ts", ".js", ".md", ".c", ".h", ".rs", ".go", ".txt")):
                out.append(Path(dirpath) / name)
    return out


def edit(path: Path, rng: random.Random, prompt: int) -> None:
    """An agent-sized edit: a few lines replaced, one added."""
    lines = path.read_bytes().split(b"\n")
    for _ in range(3):
        i = rng.randrange(len(lines))
        lines[i] = b"    value = compute(%d, %d)  # prompt %d" % (rng.randrange(10**6), i, prompt)
    lines.insert(rng.randrange(len(lines) + 1), b"# changed by prompt %d" % prompt)
    path.write_bytes(b"\n".join(lines))


def human(n: int) -> str:
    return f"{n / 2**20:8.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--changes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--make-tree", default=str(c.MAKE_TREE), help="the tree generator (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rewind-store-size-"))
    tree, home, shadow = work / "tree", work / "home", work / "shadow.git"
    os.environ["REWIND_HOME"] = str(home)
    c.MAKE_TREE = Path(args.make_tree)
    c.import_rewind()
    from rewind.capture.working_copy import capture
    from rewind.catalog.db import Catalog
    from rewind.history.gc import run as gc_run
    from rewind.project import open_project

    try:
        c.gen_tree(tree, args.files, seed=args.seed)
        genv = c.shadow_git_env(shadow, tree)
        git = lambda *a: subprocess.run(["git", *a], env=genv, check=True,  # noqa: E731
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        git("init", "-q")
        git("config", "gc.auto", "0")

        project = open_project(str(tree), create=True)
        t = time.monotonic()
        capture(project, "manual", message="first")
        first_s = time.monotonic() - t
        git("add", "-A")
        git("commit", "-qm", "first", "--allow-empty")
        rng = random.Random(args.seed)
        candidates = text_files(tree)
        rewind_s = git_s = 0.0
        for p in range(1, args.prompts + 1):
            for path in rng.sample(candidates, args.changes):
                edit(path, rng, p)
            t = time.monotonic()
            capture(project, "prompt", message=f"prompt {p}")
            rewind_s += time.monotonic() - t
            t = time.monotonic()
            git("add", "-A")
            git("commit", "-qm", f"prompt {p}")
            git_s += time.monotonic() - t
        kept = project.catalog.count(project.id)
        project.close()
        from rewind.store.repack import recompress
        t = time.monotonic()
        # the first snapshot's raw packs, recompressed: by its background job once the store
        # is idle, or here, whichever takes the lock first
        while list((home / "objects" / "pack").glob("*-raw.pack")) and time.monotonic() - t < 300:
            if not recompress(str(home)):
                time.sleep(0.2)
        recompress_s = time.monotonic() - t
        catalog = Catalog(str(home))
        t = time.monotonic()
        report = gc_run(str(home), catalog)
        gc_s = time.monotonic() - t
        catalog.close()
        t = time.monotonic()
        git("gc", "-q")
        gc_git_s = time.monotonic() - t

        proj = sizes(tree)
        store = sizes(home / "objects")                 # loose files and packs (objects/pack)
        cat = sizes(home, skip=("objects",))
        sh = sizes(shadow)
        print(f"{args.files} files generated, {args.prompts} prompts x {args.changes} changed files; "
              f"rewind keeps {kept} checkpoints (gc freed {report.objects_swept} objects)")
        print(f"{'':34}{'files':>8} {'apparent':>12} {'allocated':>12} {'ratio':>7}")
        print(f"{'project tree':34}{proj[0]:8d} {human(proj[1])} {human(proj[2])}")
        print(f"{'shadow git, git gc (reference)':34}{sh[0]:8d} {human(sh[1])} {human(sh[2])} {1:7.2f}")
        for label, s in (("rewind objects (loose, packs)", store), ("rewind catalog + rest", cat)):
            print(f"{label:34}{s[0]:8d} {human(s[1])} {human(s[2])} {s[2] / sh[2]:7.2f}")
        total = store[2] + cat[2]
        print(f"{'rewind total':34}{store[0] + cat[0]:8d} {human(store[1] + cat[1])} {human(total)} "
              f"{total / sh[2]:7.2f}")
        print("(ratio: allocated bytes / the packed shadow repository's)")
        print(f"time: rewind first checkpoint {first_s:.2f} s, {args.prompts} incremental {rewind_s:.2f} s; "
              f"shadow git {args.prompts} add+commit {git_s:.2f} s, git gc {gc_git_s:.2f} s; rewind's recompression "
              f"{recompress_s:.2f} s, gc {gc_s:.2f} s")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
