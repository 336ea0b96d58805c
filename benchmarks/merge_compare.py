#!/usr/bin/env python3
"""revert's three-way text merge (merge3, in process) against `git merge-file` and GNU
`diff3 -m` on the same triples, in one run.

    python benchmarks/merge_compare.py [--cases 200] [--lines 400]

Each case is a pseudo source file (base = what the revert takes back from), `ours` (the
tree now: later edits) and `theirs` (before the prompt): half the cases edit disjoint
regions (a clean merge), half the same lines (a conflict). For each tool: how many results
agree byte for byte with git's (the reference for clean merges), how many conflicts it
reports where git does, and the median time of one merge (a process per merge for the two
commands, as revert would pay them).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402

WORDS = ["def", "return", "self", "value", "if", "else:", "for", "in", "range(", ")", "x", "=", "+", "1", "#"]


def case(rng: random.Random, lines: int, overlap: bool) -> tuple[bytes, bytes, bytes]:
    base = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) + "\n" for _ in range(lines)]
    ours, theirs = list(base), list(base)
    a = rng.randrange(0, lines // 2 - 10)
    b = a + rng.randrange(0, 4) if overlap else rng.randrange(lines // 2, lines - 10)
    for i in range(a, a + 3):
        ours[i] = "ours " + ours[i]
    for i in range(b, b + 3):
        theirs[i] = "theirs " + theirs[i]
    if rng.random() < 0.5:                  # a line added too
        ours.insert(a + 5, "added by ours\n")
    return "".join(base).encode(), "".join(ours).encode(), "".join(theirs).encode()


def git_merge(d: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    for name, data in (("o", ours), ("b", base), ("t", theirs)):
        (d / name).write_bytes(data)
    r = subprocess.run(["git", "merge-file", "-p", "--diff3", str(d / "o"), str(d / "b"), str(d / "t")],
                       capture_output=True)
    return r.stdout, r.returncode == 0


def gnu_diff3(d: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    for name, data in (("o", ours), ("b", base), ("t", theirs)):
        (d / name).write_bytes(data)
    r = subprocess.run(["diff3", "-m", str(d / "o"), str(d / "b"), str(d / "t")], capture_output=True)
    return r.stdout, r.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--lines", type=int, default=400)
    args = ap.parse_args()
    c.import_rewind()
    from rewind.history.revert import merge_text
    rng = random.Random(1)
    cases = [case(rng, args.lines, i % 2 == 1) for i in range(args.cases)]
    tools = {"merge3 (in process)": lambda d, *t: merge_text(*t),
             "git merge-file": git_merge}
    if shutil.which("diff3"):
        tools["GNU diff3 -m"] = gnu_diff3
    results: dict[str, list] = {name: [] for name in tools}
    times: dict[str, list] = {name: [] for name in tools}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for triple in cases:
            for name in sorted(tools, key=lambda _: rng.random()):
                t = time.perf_counter()
                results[name].append(tools[name](d, *triple))
                times[name].append(time.perf_counter() - t)
    ref = results["git merge-file"]
    print(f"{args.cases} merges of {args.lines}-line files, half overlapping")
    for name in tools:
        same_clean = sum(1 for (out, ok), (rout, rok) in zip(results[name], ref) if ok and rok and out == rout)
        clean_ref = sum(1 for _, rok in ref if rok)
        agree = sum(1 for (_, ok), (_, rok) in zip(results[name], ref) if ok == rok)
        print(f"  {name:<22} {c.median(times[name]) * 1000:7.2f} ms a merge   clean results equal to git's: "
              f"{same_clean}/{clean_ref}   conflict verdicts agreeing with git's: {agree}/{len(ref)}")
    if "GNU diff3 -m" not in tools:
        print("  (GNU diff3 not installed: not compared)")


if __name__ == "__main__":
    main()
