"""Wall time of one `rewind hook claude` process per event on a generated project, against
`python -c pass` with the same interpreter, interleaved in the same run.

    python benchmarks/hook_timing.py [--files 10000] [--rounds 21]

Prints the median and spread of each, and the ratio to the interpreter floor. Uses a
throw-away REWIND_HOME; touches nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402


def make_tree(root: Path, files: int, seed: int = 1) -> None:
    """make_tree.py's tree (the one every benchmark generates)."""
    c.gen_tree(root, files, seed=seed)


def timed(cmd, stdin: bytes, env) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    # an installed rewind runs from byte code (pip compiles it); an editable checkout under
    # PYTHONDONTWRITEBYTECODE would compile its modules on every hook and measure that instead
    c.byte_compile()
    base = Path(tempfile.mkdtemp(prefix="rewind-bench-"))
    root = base / "proj"
    make_tree(root, args.files)
    env = dict(os.environ, REWIND_HOME=str(base / "home"), CLAUDE_PROJECT_DIR=str(root))
    rewind = [str(Path(sys.executable).parent / "rewind"), "hook", "claude"]
    target = next(p for p in root.rglob("*.py") if "build" not in p.parts)

    def payload(event, **extra):
        return json.dumps({"hook_event_name": event, "session_id": "bench", "cwd": str(root), **extra}).encode()
    # first prompt: the first full snapshot
    t = timed(rewind, payload("UserPromptSubmit", prompt="first"), env)
    print(f"tree: {args.files} files in {root}; first checkpoint (full snapshot) {t * 1000:.0f} ms")
    cases = {
        "python -c pass": ([sys.executable, "-c", "pass"], b""),
        "PreToolUse Write": (rewind, payload("PreToolUse", tool_name="Write", tool_use_id="w",
                                             tool_input={"file_path": str(target), "content": "x"})),
        "PostToolUse Write": (rewind, payload("PostToolUse", tool_name="Write", tool_use_id="w",
                                              tool_input={"file_path": str(target), "content": "x"})),
        "PreToolUse Bash": (rewind, payload("PreToolUse", tool_name="Bash", tool_use_id="b",
                                            tool_input={"command": "true"})),
        "PostToolUse Bash": (rewind, payload("PostToolUse", tool_name="Bash", tool_use_id="b",
                                             tool_input={"command": "true"})),
        "UserPromptSubmit": (rewind, payload("UserPromptSubmit", prompt="again")),
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        order = list(cases)
        random.shuffle(order)
        for name in order:
            cmd, stdin = cases[name]
            samples[name].append(timed(cmd, stdin, env))
    floor = statistics.median(samples["python -c pass"])
    print(f"{'event':<20} {'median':>9} {'min':>9} {'max':>9} {'x floor':>8}")
    for name, xs in samples.items():
        med = statistics.median(xs)
        print(f"{name:<20} {med * 1000:>7.1f}ms {min(xs) * 1000:>7.1f}ms {max(xs) * 1000:>7.1f}ms {med / floor:>8.2f}")


if __name__ == "__main__":
    main()
