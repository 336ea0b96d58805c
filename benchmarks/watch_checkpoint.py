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
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REWIND = [str(Path(sys.executable).parent / "rewind")]
if not Path(REWIND[0]).exists():
    REWIND = [sys.executable, "-m", "rewind"]


def timed(cmd, env=None, input=None, cwd=None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, input=input, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--make-tree", default=str(REPO.parent / "shared" / "bench" / "make_tree.py"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="rewind-watch-bench-"))
    tree, home = work / "tree", work / "home"
    env = {**os.environ, "REWIND_HOME": str(home), "CLAUDE_PROJECT_DIR": str(tree)}
    env.pop("REWIND_TESTING", None)
    watcher = None
    # an installed rewind runs from byte code (pip compiles it); an editable checkout under
    # PYTHONDONTWRITEBYTECODE would compile its modules on every hook
    import compileall
    import rewind
    compileall.compile_dir(os.path.dirname(rewind.__file__), quiet=1)
    try:
        t = time.perf_counter()
        subprocess.run([sys.executable, args.make_tree, "gen", str(tree), "--files", str(args.files), "--git"],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"generated {args.files} files in {time.perf_counter() - t:.0f} s", flush=True)
        sys.path.insert(0, str(REPO))
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
        watcher = subprocess.Popen([*REWIND, "watch", "--project", str(tree)], env=env,
                                   stdout=subprocess.PIPE, text=True)
        line = watcher.stdout.readline()
        print(f"watcher ready in {time.perf_counter() - t:.1f} s: {line.strip()}", flush=True)

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
                    results[what].append(timed(hook, env={**env, "REWIND_WATCH": "1"}, input=json.dumps(ups).encode()))
                elif what == "watcher off":
                    results[what].append(timed(hook, env={**env, "REWIND_WATCH": "0"}, input=json.dumps(ups).encode()))
                elif what == "git status":
                    for p in rng.sample(texts, args.changed):
                        with open(p, "a") as f:
                            f.write(f"# rep {rep} git\n")
                    results[what].append(timed(["git", "status", "--porcelain"], cwd=tree))
                else:
                    results[what].append(timed([sys.executable, "-c", "pass"]))
        status = json.loads(subprocess.run([*REWIND, "watch", "--status", "--json", "--project", str(tree)],
                                           env=env, capture_output=True, text=True).stdout)
        ref = statistics.median(results["git status"])
        floor = statistics.median(results["floor"])
        print(f"\n{args.files} files, {args.changed} changed per checkpoint, {args.reps} repetitions, interleaved")
        print(f"{'':28}{'median':>10}{'min':>10}{'max':>10}{'/ git status':>14}{'/ floor':>10}")
        for what, xs in results.items():
            med = statistics.median(xs)
            print(f"{what:28}{med * 1000:8.1f}ms{min(xs) * 1000:8.1f}ms{max(xs) * 1000:8.1f}ms"
                  f"{med / ref:14.2f}{med / floor:10.2f}")
        print(f"\nwatcher: {status['directories']} directories watched; scans: {status['quick_scans']} quick, "
              f"{status['full_scans']} full, {status['fallbacks']} fallbacks")
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(timeout=30)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
