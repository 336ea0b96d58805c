"""Hook cost of two checkouts side by side, interleaved in one run: the installed hook
command (`python -S CHECKOUT/rewind/hook.py claude`) of each, on the same generated tree,
each with its own throw-away REWIND_HOME, against `python -S -c pass` of the same
interpreter.

    python benchmarks/hook_compare.py OLD_CHECKOUT [NEW_CHECKOUT] [--files 10000] [--rounds 15] [--watch]

NEW_CHECKOUT defaults to this one. With --watch, each checkout's watcher runs (started by
its SessionStart hook) and the hooks take quick scans; without it, REWIND_WATCH=0. Prints
the median of each hook for each checkout, the ratio new/old and each one's ratio to the
interpreter floor. Touches nothing but a temporary directory.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hook_timing import make_tree  # noqa: E402


def timed(cmd, stdin: bytes, env) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def wait_watcher(home: Path, timeout: float = 120) -> None:
    import sqlite3
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            db = sqlite3.connect(home / "catalog.sqlite")
            row = db.execute("SELECT w.ready_ns, s.scan_start_ns FROM watchers w JOIN project_state s "
                             "ON s.project_id = w.project_id").fetchone()
            db.close()
            if row and row[0] and row[1] >= row[0]:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the watcher of {home} did not get ready")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--watch", action="store_true")
    args = ap.parse_args()
    import compileall
    checkouts = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    for path in checkouts.values():
        compileall.compile_dir(str(path / "rewind"), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="rewind-compare-"))
    root = base / "proj"
    make_tree(root, args.files)
    target = next(p for p in root.rglob("*.py") if "build" not in p.parts)
    # PYTHONPATH: the watcher a SessionStart hook starts (`python -m rewind watch`) is the
    # checkout's own, not whichever rewind the interpreter has installed
    envs = {k: dict(os.environ, REWIND_HOME=str(base / f"home-{k}"), CLAUDE_PROJECT_DIR=str(root),
                    REWIND_WATCH="1" if args.watch else "0", PYTHONPATH=str(checkouts[k]))
            for k in checkouts}

    def payload(event, **extra):
        return json.dumps({"hook_event_name": event, "session_id": "bench", "cwd": str(root), **extra}).encode()

    def hook(k):
        return [sys.executable, "-S", str(checkouts[k] / "rewind" / "hook.py"), "claude"]
    for k in checkouts:
        timed(hook(k), payload("SessionStart", source="startup"), envs[k])
        if args.watch:
            wait_watcher(base / f"home-{k}")
        t = timed(hook(k), payload("UserPromptSubmit", prompt="first"), envs[k])
        print(f"{k}: {checkouts[k]}; first prompt {t * 1000:.0f} ms")
    events = {
        "PreToolUse Write": payload("PreToolUse", tool_name="Write", tool_use_id="w",
                                    tool_input={"file_path": str(target), "content": "x"}),
        "PostToolUse Write": payload("PostToolUse", tool_name="Write", tool_use_id="w",
                                     tool_input={"file_path": str(target), "content": "x"}),
        "PreToolUse Bash": payload("PreToolUse", tool_name="Bash", tool_use_id="b", tool_input={"command": "true"}),
        "PostToolUse Bash": payload("PostToolUse", tool_name="Bash", tool_use_id="b", tool_input={"command": "true"}),
        "UserPromptSubmit": payload("UserPromptSubmit", prompt="again"),
    }
    samples: dict[tuple[str, str], list[float]] = {}
    floor: list[float] = []
    for _ in range(args.rounds):
        # one round: a prompt, then a tool pair of each kind, as a session makes them; old
        # and new alternate call by call, in a random order each round
        for name, data in events.items():
            order = list(checkouts)
            random.shuffle(order)
            for k in order:
                samples.setdefault((name, k), []).append(timed(hook(k), data, envs[k]))
            floor.append(timed([sys.executable, "-S", "-c", "pass"], b"", envs["old"]))
    for k in checkouts:
        timed(hook(k), payload("SessionEnd", reason="other"), envs[k])
    f = statistics.median(floor)
    mode = "watcher on" if args.watch else "no watcher"
    print(f"{args.files} files, {mode}, {args.rounds} rounds; python -S -c pass {f * 1000:.1f} ms (floor)")
    print(f"{'hook':<20} {'old':>9} {'new':>9} {'new/old':>8} {'old/floor':>10} {'new/floor':>10}")
    for name in events:
        old, new = statistics.median(samples[(name, "old")]), statistics.median(samples[(name, "new")])
        print(f"{name:<20} {old * 1000:>7.1f}ms {new * 1000:>7.1f}ms {new / old:>8.2f} {old / f:>10.2f} {new / f:>10.2f}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
