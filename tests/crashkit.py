"""Crash trials: run a rewind command, SIGKILL it at a random moment, then check the promises.

Used by tests/test_crash.py (a few seeded trials per command in the normal run) and by
benchmarks/soak.py (as many as you like). A trial returns what it saw; it raises
AssertionError when a promise is broken:
- `verify` is clean afterwards (no damaged or missing object, no bad catalog row);
- the tree is as before, as after, or, for a restore killed half-way, the next command
  reports it and the safety checkpoint gives the tree from before back exactly;
- no temporary file of rewind's is left in the project after that next command.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent / "rewind"
REWIND = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "rewind"]
OPS = ("save", "hook", "to", "undo", "gc")


def _fingerprint(root: Path) -> dict:
    sys.path.insert(0, str(HERE))
    from helpers import fingerprint
    return fingerprint(root)


def _run(args, cwd, env, input=None, check=True):
    p = subprocess.run([*REWIND, *args], cwd=cwd, env=env, input=input, capture_output=True, text=True,
                       timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"rewind {' '.join(args)} failed: {p.stderr}")
    return p


def _state(rng: random.Random, root: Path, tag: str, n: int) -> None:
    for i in range(n):
        d = root / f"d{i % 12}"
        d.mkdir(parents=True, exist_ok=True)
        if rng.random() < 0.15 and tag != "A":
            (d / f"f{i}.txt").unlink(missing_ok=True)
            continue
        (d / f"f{i}.txt").write_bytes(f"{tag} {i} ".encode() * rng.randint(50, 400))
    if tag != "A":
        link = root / f"link-{tag}"
        if not link.exists():
            os.symlink("d0", link)


def _prompt(root: Path, text: str) -> str:
    return json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "crash-session",
                       "cwd": str(root), "prompt": text,
                       "transcript_path": str(root.parent / "t.jsonl")})


def trial(op: str, seed: int, work: Path, files: int = 400) -> dict:
    """One trial in a fresh `work` directory (its own REWIND_HOME)."""
    rng = random.Random(f"{op}-{seed}")
    if work.exists():
        shutil.rmtree(work)
    root, home = work / "proj", work / "home"
    root.mkdir(parents=True)
    env = {**os.environ, "REWIND_HOME": str(home), "REWIND_WATCH": "0", "CLAUDE_PROJECT_DIR": str(root)}
    env.pop("REWIND_TESTING", None)
    _state(rng, root, "A", files)
    _run(["save", "-m", "A"], root, env)
    a = _fingerprint(root)
    _state(rng, root, "B", files)
    _run(["save", "-m", "B"], root, env)
    b = _fingerprint(root)
    if op == "undo":                       # tree A now, the rewind's safety checkpoint holds B
        _run(["to", "1", "--yes"], root, env)
        before, after = a, b
        args, stdin = ["undo", "--yes"], None
    elif op == "to":
        before, after = b, a
        args, stdin = ["to", "1", "--yes"], None
    elif op == "hook":
        before = after = b
        args, stdin = ["hook", "claude"], _prompt(root, f"prompt {seed}")
    elif op == "gc":
        (home / "config").mkdir(exist_ok=True)
        (home / "config" / "config.toml").write_text("ring_size = 1\n")   # gc has checkpoints to drop
        before = after = b
        args, stdin = ["gc"], None
    else:
        _state(rng, root, "C", files)
        before = after = _fingerprint(root)
        args, stdin = ["save", "-m", "C"], None
    # kill somewhere inside the command's own run time (startup ~0.1 s, then its work)
    delay = rng.uniform(*{"hook": (0.03, 0.3), "gc": (0.03, 0.45), "save": (0.05, 0.6)}.get(op, (0.05, 0.9)))
    proc = subprocess.Popen([*REWIND, *args], cwd=root, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if stdin:
        try:
            proc.stdin.write(stdin.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    # the next command reports what was interrupted and cleans up after it
    v = _run(["verify", "--json"], root, env, check=False)
    report = json.loads(v.stdout)
    if not report["ok"]:
        raise AssertionError(f"{op} seed {seed}: verify after the kill: {report['problems'][:5]}")
    now = _fingerprint(root)
    leftovers = [p for p in root.rglob(".rewind-tmp-*")]
    if leftovers:
        raise AssertionError(f"{op} seed {seed}: temporary files left: {leftovers[:3]}")
    outcome = "before" if now == before else "after" if now == after else "partial"
    if outcome == "partial":
        interrupted = report.get("interrupted")
        if op not in ("to", "undo") or not interrupted:
            raise AssertionError(f"{op} seed {seed}: the tree is neither as before nor as after, "
                                 f"and no interrupted restore was reported")
        # the way back the report gives: the safety checkpoint holds the tree from before
        _run(["to", str(interrupted["safety"]), "--yes"], root, env)
        if _fingerprint(root) != before:
            raise AssertionError(f"{op} seed {seed}: the safety checkpoint does not give the tree back")
    # and the store keeps working: a new checkpoint of what is there now
    _run(["save", "-m", "after the crash"], root, env)
    if not json.loads(_run(["verify", "--json"], root, env).stdout)["ok"]:
        raise AssertionError(f"{op} seed {seed}: verify after a new checkpoint")
    return {"op": op, "seed": seed, "killed": killed, "delay": round(delay, 3), "outcome": outcome}
