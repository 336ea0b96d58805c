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


def make_tree(root: Path, files: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    words = ["def", "class", "return", "import", "self", "value", "x", "=", "(", ")"]
    dirs = [root]
    for i in range(max(1, files // 30)):
        depth = rng.randint(2, 5)
        d = root.joinpath(*[f"d{rng.randint(0, 9)}" for _ in range(depth)], f"m{i}")
        dirs.append(d)
    for i in range(files):
        d = rng.choice(dirs)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(" ".join(rng.choice(words) for _ in range(rng.randint(100, 2000))))
    (root / ".gitignore").write_text("build/\n*.pyc\n")


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
    import compileall
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "rewind"), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="rewind-bench-"))
    root = base / "proj"
    root.mkdir()
    make_tree(root, args.files)
    env = dict(os.environ, REWIND_HOME=str(base / "home"), CLAUDE_PROJECT_DIR=str(root))
    rewind = [str(Path(sys.executable).parent / "rewind"), "hook", "claude"]
    target = next(root.rglob("*.py"))

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
