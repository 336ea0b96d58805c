#!/usr/bin/env python3
"""rewind bisect's step and rewind revert, against their references, in one run.

    python benchmarks/revert_bisect.py [--files 10000] [--changed 20] [--rounds 7]

On a generated tree (make_tree.py gen), with checkpoints whose trees differ by `--changed`
files, interleaved round by round:
  - a bisect step: the scratch copy moved from one checkpoint's tree to the next by their
    difference, then reset (the walk that finds what the command changed in the copy),
    CMD's own time excluded -- against materializing the whole checkpoint from the store
    (the first step's cost; target: a step <= 0.2x of it), and against `git worktree add`
    of the same tree (a full checkout) and `git checkout` of the next commit in that worktree
    (git's own step), on a shadow repository holding the same states;
  - `rewind revert N --yes` of one prompt's `--changed` files (each merged with nothing, so
    written back) against `rewind to N --yes -- <the same paths>`, each followed by `rewind
    undo --yes` (untimed) so the next round starts from the same tree.
Medians over the rounds, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402


def edit(tree: Path, files: list[Path], tag: str) -> None:
    for f in files:
        with open(f, "a") as fh:
            fh.write(f"# {tag}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--changed", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    with c.workdir("rewind-bench-rb-", args.keep) as work:
        tree, home, shadow = work / "proj", work / "home", work / "shadow.git"
        c.gen_tree(tree, args.files)
        env = c.bench_env(home, tree)
        os.environ.update(REWIND_HOME=str(home))
        os.environ.pop("REWIND_TESTING", None)
        genv = c.shadow_git_env(shadow, tree)
        subprocess.run(["git", "init", "-q"], check=True, env=genv, cwd=tree)
        rewind = c.rewind_cmd()
        texts = sorted(p for p in tree.rglob("*.py") if "build" not in p.parts)
        sets = [texts[i * args.changed:(i + 1) * args.changed] for i in range(3)]

        def checkpoint(msg: str) -> str:
            c.timed([*rewind, "save", "-m", msg], env=env, cwd=tree)
            subprocess.run(["git", "add", "-A"], check=True, env=genv, cwd=tree)
            subprocess.run(["git", "commit", "-qm", msg], check=True, env=genv, cwd=tree)
            return subprocess.run(["git", "rev-parse", "HEAD"], check=True, env=genv, cwd=tree,
                                  capture_output=True, text=True).stdout.strip()

        commits = [checkpoint("base")]
        edit(tree, sets[0], "step 1")
        commits.append(checkpoint("step 1"))
        edit(tree, sets[1], "step 2")
        commits.append(checkpoint("after"))
        print(f"{args.files} files; consecutive checkpoints differ by {args.changed} files; {args.rounds} rounds")

        c.import_rewind()                   # this checkout's package
        from rewind.history.bisect import Scratch
        from rewind.project import open_project
        project = open_project(str(tree.resolve()), create=False)
        trees = [cp.tree for cp in sorted(project.catalog.checkpoints(project.id), key=lambda cp: cp.number)]
        full, step, gwt, gco = [], [], [], []
        revert_t, to_t = [], []
        paths = [str(p.relative_to(tree)) for p in sets[1]]
        try:
            for r in range(args.rounds):
                with Scratch(project, []) as s:
                    os.sync()
                    t = time.perf_counter()
                    s.checkout(trees[0])
                    full.append(time.perf_counter() - t)
                    for i in (1, 0, 1):
                        t = time.perf_counter()
                        s.checkout(trees[i])
                        s.reset()
                        step.append(time.perf_counter() - t)
                wt = work / f"wt{r}"
                os.sync()
                t = time.perf_counter()
                subprocess.run(["git", "--git-dir", str(shadow), "worktree", "add", "-q", "--detach", str(wt),
                                commits[0]], check=True, capture_output=True)
                gwt.append(time.perf_counter() - t)
                for i in (1, 0, 1):
                    t = time.perf_counter()
                    subprocess.run(["git", "checkout", "-q", commits[i]], cwd=wt, check=True, capture_output=True,
                                   env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
                    gco.append(time.perf_counter() - t)
                subprocess.run(["git", "--git-dir", str(shadow), "worktree", "remove", "--force", str(wt)],
                               check=True, capture_output=True)
                shutil.rmtree(wt, ignore_errors=True)
                # revert of checkpoint 1's interval (its 20 files) against `to 1 -- those paths`
                order = [("revert", revert_t), ("to", to_t)] if r % 2 == 0 else [("to", to_t), ("revert", revert_t)]
                for what, out in order:
                    cmd = ([*rewind, "revert", "2", "--yes"] if what == "revert"
                           else [*rewind, "to", "2", "--yes", "--", *paths])
                    out.append(c.timed(cmd, env=env, cwd=tree))
                    c.timed([*rewind, "undo", "--yes"], env=env, cwd=tree)
        finally:
            project.close()
        med = c.median
        print(f"bisect step (move by the difference + reset)  {c.fmt_ms(step)}")
        print(f"  full materialization of a checkpoint        {c.fmt_ms(full)}   step/full {med(step) / med(full):.3f} "
              f"(target <= 0.2: {'met' if med(step) / med(full) <= 0.2 else 'NOT met'})")
        print(f"  git worktree add (full checkout)            {c.fmt_ms(gwt)}   full/git {med(full) / med(gwt):.2f}x")
        print(f"  git checkout of the next commit (git's step) {c.fmt_ms(gco)}   step/git {med(step) / med(gco):.2f}x")
        print(f"rewind revert 2 --yes ({args.changed} files)         {c.fmt_ms(revert_t)}")
        print(f"  rewind to 2 --yes -- the same paths          {c.fmt_ms(to_t)}   revert/to "
              f"{c.median([a / b for a, b in zip(revert_t, to_t)]):.2f}x")


if __name__ == "__main__":
    main()
