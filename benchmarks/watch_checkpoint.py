#!/usr/bin/env python3
"""The cost of a prompt's checkpoint on a big tree with a few changed files, with the
watcher and without, against `git status` on the same tree, interleaved in one run.

    python benchmarks/watch_checkpoint.py [--files 100000] [--changed 10] [--reps 7]

Each repetition changes `--changed` text files, then times, in alternating order: the
UserPromptSubmit hook as Claude Code runs it (`rewind hook claude`, a new process, payload
on stdin) with the watcher running; the same hook with REWIND_WATCH=0 (no watcher: a full
stat scan of the tree); `git status --porcelain` on the same tree; and `python -c pass`
with the hook's interpreter (the floor). Prints medians, spreads and ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402

REWIND = c.rewind_cmd()
timed = c.timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--make-tree", default=str(c.MAKE_TREE), help="the tree generator (default: %(default)s)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    c.MAKE_TREE = Path(args.make_tree)
    work = Path(tempfile.mkdtemp(prefix="rewind-watch-bench-"))
    tree, home = work / "tree", work / "home"
    env = c.bench_env(home, tree)
    wenv = c.watch_env(env)           # the watcher's and the watcher-on hooks' (or none is served)
    watcher = None
    c.byte_compile()
    try:
        t = time.perf_counter()
        c.gen_tree(tree, args.files, git=True)
        print(f"generated {args.files} files in {time.perf_counter() - t:.0f} s", flush=True)
        from rewind.cli.replay import bundled_session, fill
        session = bundled_session()
        ups = fill(next(p for p in session if p["hook_event_name"] == "UserPromptSubmit"), str(tree), "bench",
                   str(work / "cc"))
        start = fill(next(p for p in session if p["hook_event_name"] == "SessionStart"), str(tree), "bench",
                     str(work / "cc"))
        from rewind.hooks.install import hook_command
        hook = __import__("shlex").split(hook_command("claude"))   # as installed
        subprocess.run(hook, input=json.dumps(start).encode(), env={**env, "REWIND_WATCH": "0"}, check=True)
        t = timed(hook, env={**env, "REWIND_WATCH": "0"}, input=json.dumps(ups).encode())
        print(f"first checkpoint (full snapshot, hook process) {t:.1f} s", flush=True)
        subprocess.run(["git", "status", "--porcelain"], cwd=tree, stdout=subprocess.DEVNULL)  # warm the index

        t = time.perf_counter()
        watcher = c.start_watcher(tree, wenv, REWIND)
        print(f"watcher ready in {time.perf_counter() - t:.1f} s", flush=True)
        before = c.watcher_status(tree, wenv, REWIND)

        texts = [p for p in tree.rglob("*.py") if "build" not in p.parts][:2000]
        rng = random.Random(1)
        results: dict[str, list[float]] = {"watcher on": [], "watcher off": [], "git status": [], "floor": []}
        for rep in range(args.reps):
            order = list(results) if rep % 2 == 0 else list(reversed(list(results)))
            for what in order:
                if what.startswith("watcher"):
                    for p in rng.sample(texts, args.changed):
                        with open(p, "a") as f:
                            f.write(f"# rep {rep} {what}\n")
                    time.sleep(0.2)
                if what == "watcher on":
                    results[what].append(timed(hook, env=wenv, input=json.dumps(ups).encode()))
                elif what == "watcher off":
                    results[what].append(timed(hook, env={**env, "REWIND_WATCH": "0"}, input=json.dumps(ups).encode()))
                elif what == "git status":
                    for p in rng.sample(texts, args.changed):
                        with open(p, "a") as f:
                            f.write(f"# rep {rep} git\n")
                    results[what].append(timed(["git", "status", "--porcelain"], cwd=tree))
                else:
                    results[what].append(timed([sys.executable, "-c", "pass"]))
        status = c.counted_status(tree, wenv, before, args.reps, REWIND)
        ref = statistics.median(results["git status"])
        floor = statistics.median(results["floor"])
        print(f"\n{args.files} files, {args.changed} changed per checkpoint, {args.reps} repetitions, interleaved")
        print(f"{'':28}{'median':>10}{'min':>10}{'max':>10}{'/ git status':>14}{'/ floor':>10}")
        for what, xs in results.items():
            med = statistics.median(xs)
            print(f"{what:28}{med * 1000:8.1f}ms{min(xs) * 1000:8.1f}ms{max(xs) * 1000:8.1f}ms"
                  f"{med / ref:14.2f}{med / floor:10.2f}")
        print(f"\nwatcher: {status['directories']} directories watched; scans: {status['quick_scans']} quick, "
              f"{status['full_scans']} full, {status['fallbacks']} fallbacks; {c.served(before, status, args.reps)}")
    finally:
        if watcher is not None:
            c.stop_watcher(watcher)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
