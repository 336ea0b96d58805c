#!/usr/bin/env python3
"""Crash soak: many SIGKILL trials per command (the normal test run does a few).

    python benchmarks/soak.py [--trials 50] [--ops save,hook,to,undo,gc] [--files 400]

Prints, per command, the trials run, how many were killed mid-way (the rest had finished),
and how the tree was found: as before, as after, or half-restored and given back from the
safety checkpoint. Any broken promise stops it with the seed that broke it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from crashkit import OPS, trial  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--files", type=int, default=400)
    ap.add_argument("--first-seed", type=int, default=1000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rewind-soak-"))
    for op in args.ops.split(","):
        counts = collections.Counter()
        for seed in range(args.first_seed, args.first_seed + args.trials):
            r = trial(op, seed, work / "w", files=args.files)
            counts["killed" if r["killed"] else "finished"] += 1
            counts[r["outcome"]] += 1
        print(f"{op:6} {args.trials} trials: {counts['killed']} killed mid-way, {counts['finished']} finished; "
              f"tree as before {counts['before']}, as after {counts['after']}, "
              f"half-restored and given back {counts['partial']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
