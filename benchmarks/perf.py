#!/usr/bin/env python3
"""rewind against git and the interpreter floor, on generated trees, in one run.

    python benchmarks/perf.py [--sizes 10000,100000] [--reps 5] [--no-store-size] [--only first]

For each tree size (make_tree.py: nested 3-6 deep, mostly 1-20 KB text, some large binary
files, a .gitignore with an ignored build dir), with a prompt's worth of changes (10
modified, 3 added, 2 deleted, 1 symlink: make_tree.py prompt) before each checkpoint, it
prints median and spread over interleaved repetitions, each against its reference:
  - hooks as Claude Code runs them (a new process, payload on stdin): UserPromptSubmit and
    PreToolUse(Bash) with the watcher and without, PreToolUse(Write) -- against `python -c
    pass` with the hook's interpreter (the floor), and the no-watcher checkpoint hooks against
    the shadow-git incremental checkpoint (GIT_DIR outside the tree, `git add -A`, `git commit`);
  - the first checkpoint against the shadow-git first snapshot, with the peak memory of the
    process that took it;
  - `rewind to` of 1,000 changed files against `git checkout <commit> -- .`;
  - `rewind gc` against `git gc` and `rewind verify` against `git fsck` on the shadow repository;
  - the store after 100 prompts x 5 edits (10,000 files) against the `git gc`-packed shadow.
`--only first` measures the first checkpoint alone, `--reps` times, each into a fresh store
and a fresh shadow repository (in alternating order). Before each timed first snapshot the
dirty pages are synced, so the just-written tree's write-back does not slow whichever runs
first. An editable checkout is byte-compiled first: an installed rewind runs from byte code.
"""

from __future__ import annotations

import argparse
import compileall
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
BIN = Path(PY).parent / "rewind"
REWIND = [str(BIN)] if BIN.exists() else [PY, "-m", "rewind"]
# ../shared beside the checkout, taken lexically: from a worktree it is the worktree's own
# ../shared (a link), which the resolved path's parent need not have
MAKE_TREE = Path(os.path.abspath(__file__)).parent.parent / ".." / "shared" / "bench" / "make_tree.py"
if not MAKE_TREE.exists():
    MAKE_TREE = REPO.parent / "shared" / "bench" / "make_tree.py"
sys.path.insert(0, str(REPO))
from rewind.hooks.install import hook_command  # noqa: E402

HOOK = __import__("shlex").split(hook_command("claude"))


def run(cmd, env=None, cwd=None, input=None, check=True) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, input=input, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}: {p.stderr.decode()[-500:]}")
    return time.perf_counter() - t


def peak(cmd, env=None, cwd=None, input=None) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    if input:
        p.stdin.write(input)
    p.stdin.close()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, usage.ru_maxrss * 1024


def fmt(xs: list[float]) -> str:
    med = statistics.median(xs)
    return f"{med * 1000:9.1f} ms  [{min(xs) * 1000:.0f}-{max(xs) * 1000:.0f}]"


class Bench:
    def __init__(self, n: int, work: Path, reps: int):
        self.n, self.reps = n, reps
        self.tree, self.home, self.shadow = work / "tree", work / "home", work / "shadow.git"
        self.env = {**os.environ, "REWIND_HOME": str(self.home), "CLAUDE_PROJECT_DIR": str(self.tree)}
        self.env.pop("REWIND_TESTING", None)
        self.genv = {**os.environ, "GIT_DIR": str(self.shadow), "GIT_WORK_TREE": str(self.tree),
                     "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
                     "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        self.seed = 100
        self.rows: list[tuple[str, list[float], str, float | None]] = []

    def prompt_changes(self) -> None:
        self.seed += 1
        subprocess.run([PY, str(MAKE_TREE), "prompt", str(self.tree), "--seed", str(self.seed)], check=True,
                       stdout=subprocess.DEVNULL)

    def payload(self, event: str, **extra) -> bytes:
        base = {"hook_event_name": event, "session_id": "bench", "cwd": str(self.tree),
                "transcript_path": str(self.tree.parent / "t.jsonl")}
        return json.dumps({**base, **extra}).encode()

    def hook(self, payload: bytes, watch: str) -> float:
        """As the agent runs it: the command `rewind hooks install` writes."""
        return run(HOOK, env={**self.env, "REWIND_WATCH": watch}, input=payload)

    def git(self, *args) -> float:
        return run(["git", *args], env=self.genv)

    def setup(self) -> None:
        t = time.perf_counter()
        # the tree's own repository (git status's reference) must not start an automatic gc in
        # the background: at 100,000 files it repacked during the first checkpoints measured
        no_auto_gc = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0"}
        subprocess.run([PY, str(MAKE_TREE), "gen", str(self.tree), "--files", str(self.n), "--git"], check=True,
                       stdout=subprocess.DEVNULL, env=no_auto_gc)
        print(f"\n== {self.n:,} files (generated in {time.perf_counter() - t:.0f} s) ==", flush=True)
        run(["git", "status", "--porcelain"], cwd=self.tree)      # warm the tree's own index

    def first(self, reps: int) -> None:
        """First snapshots, each into an empty store and an empty shadow repository: rewind's
        prompt hook (no watcher) and `git add -A && git commit`."""
        ours, theirs, rss = [], [], []
        for rep in range(reps):
            shutil.rmtree(self.home, ignore_errors=True)
            shutil.rmtree(self.shadow, ignore_errors=True)
            self.git("init", "-q")
            self.git("config", "gc.auto", "0")
            self.git("config", "core.excludesFile", str(self.tree / ".gitignore"))   # the same rules
            run(HOOK, env={**self.env, "REWIND_WATCH": "0"}, input=self.payload("SessionStart", source="startup"))
            for who in (("ours", "theirs") if rep % 2 == 0 else ("theirs", "ours")):
                os.sync()
                if who == "ours":
                    t, mem = peak(HOOK, env={**self.env, "REWIND_WATCH": "0"},
                                  input=self.payload("UserPromptSubmit", prompt="first"))
                    ours.append(t)
                    rss.append(mem)
                    if not any((self.home / "objects" / "pack").glob("*.pack")):
                        raise SystemExit("the first checkpoint wrote no pack: see the hook log in " + str(self.home))
                else:
                    theirs.append(self.git("add", "-A") + self.git("commit", "-qm", "first"))
            print(f"first checkpoint {ours[-1]:.2f} s (peak memory {rss[-1] / 2**20:.0f} MB); "
                  f"shadow git {theirs[-1]:.2f} s", flush=True)
        self.rows.append(("first checkpoint", ours, "shadow git first snapshot", statistics.median(theirs)))
        self.rows.append(("shadow git first snapshot", theirs, "", None))
        self.rss = max(rss)

    def hooks(self) -> None:
        floor, git_status, shadow_inc = [], [], []
        ups_off, bash_off, ups_on, bash_on, write_pre, write_on = [], [], [], [], [], []
        texts = [p for p in self.tree.rglob("*.py") if "build" not in p.parts][:200]
        for rep in range(self.reps):
            order = ["floor", "status", "shadow", "ups_off", "bash_off", "write"]
            random.Random(rep).shuffle(order)
            for what in order:
                if what == "floor":
                    floor.append(run([PY, "-c", "pass"]))
                elif what == "status":
                    git_status.append(run(["git", "status", "--porcelain"], cwd=self.tree))
                elif what == "shadow":
                    self.prompt_changes()
                    shadow_inc.append(self.git("add", "-A") + self.git("commit", "-qm", f"p{rep}"))
                elif what == "ups_off":
                    self.prompt_changes()
                    ups_off.append(self.hook(self.payload("UserPromptSubmit", prompt=f"p{rep}"), "0"))
                elif what == "bash_off":
                    self.prompt_changes()
                    bash_off.append(self.hook(self.payload("PreToolUse", tool_name="Bash", tool_use_id=f"b{rep}",
                                                           tool_input={"command": "make"}), "0"))
                    self.hook(self.payload("PostToolUse", tool_name="Bash", tool_use_id=f"b{rep}",
                                           tool_input={"command": "make"}), "0")
                else:
                    target = str(random.Random(rep).choice(texts))
                    write_pre.append(self.hook(self.payload("PreToolUse", tool_name="Write", tool_use_id=f"w{rep}",
                                                            tool_input={"file_path": target, "content": "x"}), "0"))
                    self.hook(self.payload("PostToolUse", tool_name="Write", tool_use_id=f"w{rep}",
                                           tool_input={"file_path": target, "content": "x"}), "0")
        # with the watcher: started once, then the same hooks
        watcher = subprocess.Popen([*REWIND, "watch", "--project", str(self.tree)], env=self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        watcher.stdout.readline()
        try:
            for rep in range(self.reps):
                self.prompt_changes()
                time.sleep(0.1)
                ups_on.append(self.hook(self.payload("UserPromptSubmit", prompt=f"w{rep}"), "1"))
                self.prompt_changes()
                time.sleep(0.1)
                bash_on.append(self.hook(self.payload("PreToolUse", tool_name="Bash", tool_use_id=f"wb{rep}",
                                                      tool_input={"command": "make"}), "1"))
                self.hook(self.payload("PostToolUse", tool_name="Bash", tool_use_id=f"wb{rep}",
                                       tool_input={"command": "make"}), "1")
                target = str(random.Random(rep + 99).choice(texts))
                write_on.append(self.hook(self.payload("PreToolUse", tool_name="Write", tool_use_id=f"ww{rep}",
                                                       tool_input={"file_path": target, "content": "x"}), "1"))
                floor.append(run([PY, "-c", "pass"]))
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
        st = json.loads(subprocess.run([*REWIND, "status", "--json", "--project", str(self.tree)], env=self.env,
                                       capture_output=True, text=True).stdout)["watcher"]
        f, s = statistics.median(floor), statistics.median(shadow_inc)
        self.rows += [("python -c pass (floor)", floor, "", None),
                      ("git status", git_status, "floor", f),
                      ("shadow git incremental", shadow_inc, "floor", f),
                      ("PreToolUse Write hook", write_pre, "floor (target <= 3)", f),
                      ("PreToolUse Write, watcher on", write_on, "floor (target <= 3)", f),
                      ("UserPromptSubmit, watcher on", ups_on, "floor (target <= 3)", f),
                      ("PreToolUse Bash, watcher on", bash_on, "floor (target <= 3)", f),
                      ("UserPromptSubmit, no watcher", ups_off, "shadow git inc (target <= 1)", s),
                      ("PreToolUse Bash, no watcher", bash_off, "shadow git inc (target <= 1)", s)]
        print(f"watcher: {st['quick_scans']} quick scans, {st['fallbacks']} fallbacks", flush=True)

    def restore(self) -> None:
        texts = [p for p in self.tree.rglob("*") if p.is_file() and not p.is_symlink() and "build" not in p.parts
                 and ".git" not in p.parts and p.suffix in (".py", ".md", ".txt", ".ts", ".js")][:1000]
        run([*REWIND, "save", "-m", "base"], env=self.env, cwd=self.tree)
        cps = json.loads(subprocess.run([*REWIND, "list", "--json", "-n", "1"], env=self.env, cwd=self.tree,
                                        capture_output=True, text=True).stdout)
        target = cps[0]["id"]
        self.git("add", "-A")
        self.git("commit", "-qm", "restore base")
        commit = subprocess.run(["git", "rev-parse", "HEAD"], env=self.genv, capture_output=True,
                                text=True).stdout.strip()
        ours, theirs = [], []
        for rep in range(max(2, self.reps // 2)):
            for who in (("ours", "theirs") if rep % 2 == 0 else ("theirs", "ours")):
                for p in texts:
                    with open(p, "a") as f:
                        f.write(f"# restore rep {rep} {who}\n")
                if who == "ours":
                    ours.append(run([*REWIND, "to", str(target), "--yes"], env=self.env, cwd=self.tree))
                else:
                    theirs.append(self.git("checkout", commit, "--", "."))
        self.rows.append(("rewind to, 1,000 changed files", ours, "git checkout -- . (target <= 1)",
                          statistics.median(theirs)))

    def maintenance(self) -> None:
        gc = run([*REWIND, "gc"], env=self.env, cwd=self.tree)
        last = subprocess.run([*REWIND, "status", "--json"], env=self.env, cwd=self.tree,
                              capture_output=True, text=True).stdout
        try:
            held = json.loads(last)["last_gc"]["seconds_exclusive"]
        except (ValueError, KeyError, TypeError):
            held = None
        git_gc = self.git("gc", "-q")
        verify = run([*REWIND, "verify"], env=self.env, cwd=self.tree)
        fsck = self.git("fsck", "--no-progress")
        self.rows.append(("rewind gc", [gc], "git gc", git_gc))
        if held is not None:
            self.rows.append(("  of which hooks wait (sweep)", [held], "", None))
        self.rows.append(("rewind verify", [verify], "git fsck", fsck))

    def report(self) -> None:
        print(f"\n{self.n:,} files: median [min-max]; ratio = median / reference median")
        for name, xs, ref_name, ref in self.rows:
            ratio = f"{statistics.median(xs) / ref:6.2f}x {ref_name}" if ref else ""
            print(f"  {name:34}{fmt(xs)}   {ratio}")
        print(f"  {'peak memory, first checkpoint':34}{self.rss / 2**20:9.0f} MB   (target <= 200 MB)")


def store_size(work: Path) -> float | None:
    """Runs store_size.py; returns the store's ratio to the packed shadow repository."""
    print("\n== store after 100 prompts x 5 edits, 10,000 files ==", flush=True)
    out = subprocess.run([PY, str(HERE / "store_size.py"), "--files", "10000", "--prompts", "100", "--changes",
                          "5", "--make-tree", str(MAKE_TREE)], check=True, capture_output=True, text=True).stdout
    print(out, end="")
    for line in out.splitlines():
        if line.startswith("rewind total"):
            return float(line.split()[-1])
    return None


# (row, limit, what bounds it, from the profiles in the issue notes; printed when not met)
TARGETS = [
    ("first checkpoint", 0.7, "per file, in Python: open, read, an fstat before and after (a file "
     "changing under the read is read again), SHA-256, zlib on two threads, one pack synced; git add does "
     "the same in C (profile at 10k: reads 1.0 s, zlib 0.35 s, DirEntry.stat 0.34 s, SHA-256 0.24 s, "
     "open/fstat/close 0.62 s)"),
    ("PreToolUse Write hook", 3, ""),
    ("PreToolUse Write, watcher on", 3, ""),
    ("UserPromptSubmit, watcher on", 3, "interpreter and imports (~13 ms), the trees along the dirty paths "
     "read and parsed (~60 at 100k), new trees and blobs compressed and synced, the old blobs' heads for "
     "the binary flag, pack pages read cold from disk"),
    ("PreToolUse Bash, watcher on", 3, "as UserPromptSubmit, without the checkpoint's diff"),
    ("UserPromptSubmit, no watcher", 1, "a full stat walk in Python against git's C index: at 100k the "
     "stat cache load (~0.4 s), DirEntry.stat (~0.3 s), ignore matching (~0.25 s), every directory's tree "
     "serialized and hashed (~0.3 s); the watcher is the answer"),
    ("PreToolUse Bash, no watcher", 1, "as UserPromptSubmit, no watcher"),
    ("rewind to, 1,000 changed files", 1, "the safety checkpoint first: a full scan storing the 1,000 "
     "changed files (~1x git checkout by itself), then atomic writes (temp file + rename, ~140 us each)"),
]


def summary(benches: list, store_ratio: float | None) -> None:
    print("\n== targets ==")
    for b in benches:
        rows = {name: (statistics.median(xs) / ref if ref else None) for name, xs, _, ref in b.rows}
        for name, limit, bound in TARGETS:
            ratio = rows.get(name)
            if ratio is None:
                continue
            verdict = "met" if ratio <= limit else f"NOT met; bound: {bound}"
            print(f"  {b.n:>7,} {name:32} {ratio:5.2f}x (<= {limit}): {verdict}")
        mem = b.rss / 2**20
        print(f"  {b.n:>7,} {'peak memory, first checkpoint':32} {mem:5.0f} MB (<= 200): "
              f"{'met' if mem <= 200 else 'NOT met'}")
    if store_ratio is not None:
        verdict = "met" if store_ratio <= 1 else (
            "NOT met; bound: one zlib stream per object and no deltas, where git deltas similar files and "
            "versions (zlib-6 or lzma over 1 MB blocks of these blobs still exceeds git's whole pack)")
        print(f"  {10000:>7,} {'store, 100 prompts x 5 edits':32} {store_ratio:5.2f}x (<= 1): {verdict}")


def main() -> int:
    global MAKE_TREE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-store-size", action="store_true")
    ap.add_argument("--make-tree", default=str(MAKE_TREE), help="shared/bench/make_tree.py")
    ap.add_argument("--only", choices=["first"], help="first: only the first checkpoint, --reps times")
    args = ap.parse_args()
    MAKE_TREE = Path(args.make_tree)
    import rewind
    compileall.compile_dir(os.path.dirname(rewind.__file__), quiet=1)
    started = time.monotonic()
    benches = []
    for n in map(int, args.sizes.split(",")):
        work = Path(tempfile.mkdtemp(prefix=f"rewind-perf-{n}-"))
        try:
            b = Bench(n, work, args.reps)
            b.setup()
            b.first(args.reps if args.only == "first" else 1)
            if args.only != "first":
                b.hooks()
                b.restore()
                b.maintenance()
            b.report()
            benches.append(b)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    store_ratio = None
    if not args.no_store_size and not args.only:
        store_ratio = store_size(Path(tempfile.gettempdir()))
    summary(benches, store_ratio)
    print(f"\n(whole run {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
