"""What the benchmarks share: where things are (this checkout, its tree generator, its Claude
Code harness), which rewind runs, generated trees, timing one process, ratios, and a
temporary work directory. Standard library only; nothing outside the checkout is read.

The hooks a benchmark times with the watcher on must run in the environment the watcher it
started runs in: the watcher refuses a call whose REWIND_* (and HOME, XDG_*, the agents'
config dirs: watch/serve.py SAME_ENV) differ from its own, and the hook then runs
standalone, which is a different figure under the same label. `watch_env` gives that one
environment; `served` says how many hooks the watcher did serve.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MAKE_TREE = HERE / "make_tree.py"
HARNESS = REPO / "tests" / "agents" / "claude"      # the Claude Code harness: run_session.py, payloads/
PY = sys.executable


def rewind_cmd(py: str = PY) -> list[str]:
    """The `rewind` console script beside `py` (the venv's), else `py -m rewind`."""
    script = Path(py).parent / "rewind"
    return [str(script)] if script.exists() else [py, "-m", "rewind"]


def import_rewind():
    """This checkout's rewind package (importable from a fresh clone without installing)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import rewind
    return rewind


def byte_compile(package_dir: str | None = None) -> None:
    """An installed rewind runs from byte code (pip compiles it); an editable checkout under
    PYTHONDONTWRITEBYTECODE would compile its modules in every hook and measure that instead."""
    compileall.compile_dir(package_dir or os.path.dirname(import_rewind().__file__), quiet=1)


def timed(cmd, env=None, cwd=None, input: bytes | None = None, check: bool = True) -> float:
    """Wall seconds of one process, its output discarded; a failure stops the benchmark."""
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, input=input, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t
    if check and p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}: {p.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def floor(py: str = PY, bare: bool = False) -> float:
    """One `python -c pass` (`-S` if bare): the interpreter's start, the hooks' floor."""
    return timed([py, *(["-S"] if bare else []), "-c", "pass"])


def gen_tree(path: Path, files: int, seed: int = 1, git: bool = False, env: dict | None = None) -> None:
    """make_tree.py gen: `files` files of pseudo source, a .gitignore and an ignored build dir."""
    cmd = [PY, str(MAKE_TREE), "gen", str(path), "--files", str(files), "--seed", str(seed)]
    subprocess.run(cmd + (["--git"] if git else []), check=True, stdout=subprocess.DEVNULL, env=env)


def prompt_changes(tree: Path, seed: int) -> None:
    """make_tree.py prompt: a prompt's worth of changes (10 modified, 3 added, 2 deleted, 1 symlink)."""
    subprocess.run([PY, str(MAKE_TREE), "prompt", str(tree), "--seed", str(seed)], check=True,
                   stdout=subprocess.DEVNULL)


def shadow_git_env(shadow: Path, tree: Path) -> dict:
    """A shadow repository of `tree` (GIT_DIR outside it), with no user or system config."""
    return {**os.environ, "GIT_DIR": str(shadow), "GIT_WORK_TREE": str(tree),
            "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def bench_env(home: Path, tree: Path) -> dict:
    """This environment with a throw-away REWIND_HOME, the project as Claude Code names it,
    and none of the test suite's switches."""
    env = {**os.environ, "REWIND_HOME": str(home), "CLAUDE_PROJECT_DIR": str(tree)}
    env.pop("REWIND_TESTING", None)
    return env


def watch_env(env: dict) -> dict:
    """The one environment for a watcher and for the hooks it is to serve (see the top)."""
    return {**env, "REWIND_WATCH": "1"}


def start_watcher(tree: Path, env: dict, rewind: list[str] | None = None) -> subprocess.Popen:
    """`rewind watch` in the foreground, once it says it watches (its first line)."""
    p = subprocess.Popen([*(rewind or rewind_cmd()), "watch", "--project", str(tree)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if not p.stdout.readline():
        raise SystemExit(f"the watcher of {tree} exited at once (exit status {p.wait()})")
    return p


def stop_watcher(p: subprocess.Popen | None) -> None:
    if p is not None and p.poll() is None:
        p.terminate()
        p.wait(timeout=30)


def watcher_status(tree: Path, env: dict, rewind: list[str] | None = None) -> dict:
    """`rewind watch --status --json` of the project."""
    r = subprocess.run([*(rewind or rewind_cmd()), "watch", "--status", "--json", "--project", str(tree)],
                       env=env, capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise SystemExit(f"rewind watch --status failed: {r.stderr.strip()[-500:]}") from None


def counted_status(tree: Path, env: dict, before: dict, calls: int, rewind: list[str] | None = None,
                   timeout: float = 15) -> dict:
    """The watcher's status once it counts `calls` more served hooks than `before` (it writes
    the count at its heartbeat), or after `timeout` seconds as it is."""
    deadline = time.monotonic() + timeout
    while True:
        after = watcher_status(tree, env, rewind)
        if after["hooks_served"] - before["hooks_served"] >= calls or time.monotonic() > deadline:
            return after
        time.sleep(0.2)


def served(before: dict, after: dict, calls: int) -> str:
    """How many of the `calls` hooks timed with the watcher on it served, and why not the
    others: printed next to the watcher-on figures."""
    s = after["hooks_served"] - before["hooks_served"]
    line = f"hooks timed with the watcher: {s} of {calls} served"
    if s < calls:
        last = after.get("last_hook_fallback") or {}
        line += f" (last fallback: {last.get('reason', '?')}): NOT all the watcher's figures"
    return line


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def fmt_ms(xs: list[float]) -> str:
    """median [min-max] in ms."""
    return f"{median(xs) * 1000:9.1f} ms  [{min(xs) * 1000:.0f}-{max(xs) * 1000:.0f}]"


def ratio(x: float, ref: float | None) -> str:
    return f"{x / ref:.2f}x" if ref else "-"


@contextlib.contextmanager
def workdir(prefix: str, keep: bool = False):
    """A temporary directory, removed at the end unless `keep` (then its path is printed)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        if keep:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def find_claude(arg: str | None) -> str:
    """The claude executable: --claude, else $CLAUDE_BIN, else PATH; or a one-line stop."""
    cand = arg or os.environ.get("CLAUDE_BIN") or shutil.which("claude")
    if not cand or (os.path.sep in cand and not os.access(cand, os.X_OK)):
        raise SystemExit("this benchmark drives the real Claude Code CLI: pass --claude PATH or set CLAUDE_BIN"
                         + (f" ({cand} is not an executable)" if cand else ""))
    return os.path.abspath(cand) if os.path.sep in cand else cand


def harness(path: str | Path = HARNESS):
    """The Claude Code harness's run_session module (its mock of the model API, payloads/)."""
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    import run_session
    return run_session
