"""Shared test helpers: run the real console script, fingerprint trees, build projects."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import threading
import stat
import subprocess
import sys
import uuid
from pathlib import Path

from rewind.capture.ignore import is_own_tmp
from rewind.cli.replay import bundled_session, fill, replay
from rewind.constants import COOKIE_PREFIX
from rewind.project import open_project, resolve_root

BIN = Path(sys.executable).parent / "rewind"
REWIND = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "rewind"]

REPO = Path(__file__).resolve().parents[1]
AGENTS = REPO / "tests" / "agents"          # the end-to-end harness of each agent CLI
MAKE_TREE = REPO / "benchmarks" / "make_tree.py"
# The agent CLIs the e2e tests drive, each at the version its harness was captured with;
# scripts/install-agents installs them into AGENT_CLIS_HOME.
AGENT_CLIS = {"claude": ("Claude Code", "CLAUDE_BIN"), "gemini": ("Gemini CLI", "GEMINI_BIN"),
              "codex": ("Codex CLI", "CODEX_BIN"), "qwen": ("Qwen Code", "QWEN_BIN"),
              "copilot": ("Copilot CLI", "COPILOT_BIN"), "opencode": ("OpenCode", "OPENCODE_BIN")}
AGENT_CLIS_HOME = Path(os.environ.get("REWIND_AGENTS_DIR") or REPO / ".agents")


def harness(agent: str) -> Path:
    """tests/agents/AGENT: its run_session.py, mock model server, scenarios and payloads."""
    return AGENTS / agent


def agent_cli(agent: str) -> str | None:
    """The agent's CLI: $CLAUDE_BIN (GEMINI_BIN, CODEX_BIN), else the one scripts/install-agents
    installed, else the one on PATH; None when there is none."""
    var = AGENT_CLIS[agent][1]
    installed = AGENT_CLIS_HOME / agent / "node_modules" / ".bin" / agent
    if os.environ.get(var):
        return os.environ[var]
    return str(installed) if os.access(installed, os.X_OK) else shutil.which(agent)


def no_cli(agent: str) -> str:
    """The one-line reason a test that runs this agent's real CLI skips without it."""
    name, var = AGENT_CLIS[agent]
    return f"{name} not installed: run scripts/install-agents (or set {var})"


# Outside the end-to-end tests (conftest.py turns this off for tests/scenarios/), run_rewind
# forks its commands from a warm interpreter (tests/zygote.py); REWIND_TEST_EXEC=1 runs the
# real script for every command instead.
WARM = os.environ.get("REWIND_TEST_EXEC") != "1"


def run_rewind(*args, cwd=None, input=None, env=None, check=None):
    """Run `rewind ARGS` as its own process; returns the CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    argv = [*REWIND, *map(str, args)]
    import zygote_client
    if WARM and zygote_client.may_serve(full_env):
        proc = zygote_client.run_warm(argv, argv[len(REWIND):], cwd=cwd, input=input, env=full_env, timeout=120)
    else:
        proc = subprocess.run(argv, cwd=cwd, input=input, env=full_env, capture_output=True, text=True,
                              timeout=120)
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _in_flight_cookie(name: str) -> bool:
    """A hook's or the watcher's sync cookie: created and deleted by a process that may
    still be running while a test reads the tree (`cp -a` of a project whose watcher is
    taking its first snapshot). Never content. A restore's leftover temp file is not one:
    that would be a defect, so it stays in the fingerprint."""
    return name.startswith(COOKIE_PREFIX) and is_own_tmp(name)


def fingerprint(root, skip=(".git",)) -> dict:
    """Everything a restore must reproduce: kind, permission bits, bytes or link target.
    Symlinks are never followed; in-flight sync cookies are not content."""
    out = {}
    root = os.fspath(root)

    def walk(d, rel):
        for name in sorted(os.listdir(d)):
            if not rel and name in skip or _in_flight_cookie(name):
                continue
            full = os.path.join(d, name)
            key = f"{rel}/{name}" if rel else name
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[key] = ("dir", stat.S_IMODE(st.st_mode))
                walk(full, key)
            else:
                with open(full, "rb") as f:
                    out[key] = ("file", stat.S_IMODE(st.st_mode), f.read())
    walk(root, "")
    return out


def project(root):
    return open_project(resolve_root(os.fspath(root)), create=True)


def write(root, rel, data: bytes | str = b"x", mode=None):
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        os.chmod(p, mode)
    return p


def age_files(root, seconds=3600):
    """Move every mtime into the past, so the racy-timestamp rule does not apply."""
    import time
    past = int((time.time() - seconds) * 1e9)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.utime(p, ns=(past, past))


def rmtree(path):
    def onerror(func, p, exc):
        os.chmod(os.path.dirname(p), 0o700)
        func(p)
    shutil.rmtree(path, onerror=onerror)


def processes_with_home(home: str) -> list[int]:
    """Every process (but this one) whose environment has REWIND_HOME=home."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"REWIND_HOME={home}".encode() in env.split(b"\0"):
            found.append(int(pid))
    return found


def on_a_terminal(args, cwd, env, stderr_only: bool = False) -> tuple[int, str]:
    """Run the installed `rewind` with a pseudo-terminal (for stderr alone, or for all three
    streams); returns its exit code and what it drew on the terminal."""
    import pty
    master, slave = pty.openpty()
    streams = ({"stdout": subprocess.PIPE, "stderr": slave} if stderr_only
               else {"stdin": slave, "stdout": slave, "stderr": slave})
    proc = subprocess.Popen([*REWIND, *map(str, args)], cwd=cwd, env=env, **streams)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@contextlib.contextmanager
def rewritten_in_place(path, a: bytes, b: bytes):
    """While inside: a thread rewrites `path` with `a`, then `b`, again and again, in place and
    in two writes (not atomic: torn on purpose), as an editor or a build can."""
    stop = threading.Event()
    half = len(a) // 2

    def churn():
        while not stop.is_set():
            for data in (a, b):
                with open(path, "r+b") as f:
                    f.write(data[:half])
                    f.flush()
                    f.write(data[half:])
    t = threading.Thread(target=churn)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def state(root) -> tuple[dict | None, dict]:
    """The project's watcher row (None: never ran) and its scan state (the `WatcherRow`'s and
    the `ScanState`'s fields by name)."""
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        pid = cat.project_id(str(root), create=False)
        if not pid:
            return None, {}
        st = cat.scan_state(pid)
        row = cat.watcher(pid)
        return (row._asdict() if row else None), {name: getattr(st, name) for name in st._fields}
    finally:
        cat.close()


def _alive(pid: int) -> bool:
    """`pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def wait_ready(root, timeout: float = 20) -> dict:
    """Until the watcher watches and its first scan is in: the next hook scans quickly."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row, st = state(root)
        if row and row["ready_ns"] and row["stopped_ns"] is None and _alive(row["pid"]) and \
                (st.get("scan_start_ns") or 0) >= row["ready_ns"]:
            return row            # (a killed watcher's row says ready until the next one registers)
        time.sleep(0.05)
    raise AssertionError(f"watcher of {root} not ready: {state(root)}")


RESUME_PROMPT = "What did we do so far?"


def resume_with_mock(claude: str, harness, proj, config_dir, session_id: str, tmp_path) -> list[str]:
    """`claude -p --resume SESSION_ID` against the harness's mock of the model API, which
    answers one prompt: the messages of each request that carried RESUME_PROMPT, as JSON
    text (what the model was shown of the resumed conversation)."""
    import json
    import time
    scenario = tmp_path / "cont.json"
    scenario.write_text(json.dumps({"prompts": [{"prompt": RESUME_PROMPT,
                                                 "turns": [{"text": "We made the app skeleton."}]}]}))
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    mock = subprocess.Popen([sys.executable, str(Path(harness) / "mock_anthropic.py"), "--scenario", str(scenario),
                             "--project-dir", str(proj), "--port", "0", "--port-file", str(port_file),
                             "--log", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
        env.update(CLAUDE_CONFIG_DIR=str(config_dir), IS_SANDBOX="1",
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port_file.read_text().strip()}",
                   ANTHROPIC_API_KEY="sk-ant-mock", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        r = subprocess.run([claude, "-p", "--output-format", "json", "--dangerously-skip-permissions",
                            "--resume", session_id, RESUME_PROMPT], cwd=proj, env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout.strip().splitlines()[-1])["session_id"] == session_id
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    bodies = [json.dumps(s["body"]["messages"]) for s in sent if s.get("method") == "POST" and "body" in s]
    return [b for b in bodies if RESUME_PROMPT in b]


def replayed_session(root: Path, tmp_path: Path, watch: str, prompts: list[list[tuple]], between=None,
                     texts: list[str] | None = None, in_process: bool = False) -> None:
    """A session from the captured payloads' shapes: each prompt a list of ("write", path,
    content) or ("bash", command) tool calls; `between(i)` runs before prompt i (a person's
    work between prompts); the session stays open (no SessionEnd) so the last prompt's
    changes are live. Each payload goes to a `rewind hook claude` process, or, `in_process`
    (watcher off only), to the recorder in this process, as that command hands it on: for
    tests about what is done with a session's checkpoints, not about the hooks."""
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root), REWIND_WATCH=watch)
    in_process = in_process and watch == "0"

    def deliver(payload):
        if in_process:          # the recorder as `rewind hook claude` runs it, minus the process
            return local(payload)
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env, cwd=root,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout == "", (payload["hook_event_name"], r.stdout, r.stderr)
        if payload["hook_event_name"] == "SessionStart" and watch == "1":
            wait_ready(root)

    if in_process:
        from rewind.cli.replay import hook_in_process
        local = hook_in_process(str(root))
    b = [fill(p, str(root), "s-replayed", str(tmp_path / "cfg")) for p in bundled_session()]
    start, submit, write_pre, write_post, bash_pre, bash_post, stop = (b[i] for i in (0, 1, 2, 3, 6, 7, 8))
    payloads = [copy.deepcopy(start)]
    for i, calls in enumerate(prompts):
        p = copy.deepcopy(submit)
        p["prompt"], p["prompt_id"] = (texts[i] if texts else f"prompt {i + 1}"), str(uuid.uuid4())
        payloads.append(p)
        for call in calls:
            tool_use_id = f"toolu_{uuid.uuid4().hex[:16]}"
            pair = (write_pre, write_post) if call[0] == "write" else (bash_pre, bash_post)
            args = {"file_path": call[1], "content": call[2]} if call[0] == "write" else {"command": call[1]}
            for template in pair:
                q = copy.deepcopy(template)
                q["tool_input"], q["tool_use_id"] = args, tool_use_id
                payloads.append(q)
        payloads.append(copy.deepcopy(stop))
    prompt_no = iter(range(len(prompts)))
    replay(payloads, deliver, between=(lambda _p: between(next(prompt_no))) if between else None)


# Spins in 10 ms slices while fewer than cores + 1 other processes are runnable (procs_running
# counts the reader itself), else sleeps 10 ms: with two of them, the block's processes compete
# with at least two others for the cores, whatever else the machine runs
SPIN = """
import os, time
wanted = (os.cpu_count() or 1) + 1
while True:
    with open("/proc/stat", "rb") as f:
        running = int(f.read().split(b"procs_running ", 1)[1].split(None, 1)[0])
    if running - 1 >= wanted:
        time.sleep(0.01)
        continue
    end = time.perf_counter() + 0.01
    while time.perf_counter() < end:
        pass
"""


@contextlib.contextmanager
def spinning():
    """The machine busy for the block: two spinners that top its load up to two processes
    besides the block's own (tests/scenarios/test_e2e_matrix.py says why)."""
    code = SPIN if os.path.exists("/proc/stat") else "while True: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def sigint_default() -> None:
    """`preexec_fn` of a process the test will ^C: a test run in the background (`pytest &`,
    a CI job) starts with SIGINT ignored, and Python keeps an ignored SIGINT ignored; rewind
    must get it as a person's ^C."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
