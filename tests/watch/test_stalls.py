"""The watcher never stalls the hooks: one stopped (SIGSTOP: a debugger, a suspended job) in
the middle of a served call, or while it holds the project lock, is killed after the bound
and the hook goes on alone (rewind/stalled.py); one merely slow is waited for and never
killed; one left on a replaced root goes; a foreground one never blocks on a stderr
nobody reads. The real console script, the real watcher, real signals."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import REWIND, run_rewind, state, wait_ready, write
from test_served import counts, hook, listing, payload, serving, start, view
from test_watcher import alive, wait_gone
from rewind.constants import LOCKS_DIR
from rewind.stalled import holders, proc_state

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")

CATALOG_BOUND_S = 20       # under SQLite's 30 s busy timeout, ten times STALL_S
HOOK_BOUND_S = 60          # generous: the bound is STALL_S; the old waits were 600 s and 60 s


def hook_env(root: Path, **env) -> dict:
    return {**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1", **env}


def start_hook(p: dict, root: Path, **env) -> subprocess.Popen:
    proc = subprocess.Popen([*REWIND, "hook", "claude"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=root, env=hook_env(root, **env))
    proc.stdin.write(json.dumps(p).encode())
    proc.stdin.close()
    proc.stdin = None                                # (communicate() would flush it)
    return proc


def finish(proc: subprocess.Popen, bound: float = HOOK_BOUND_S) -> None:
    out, _ = proc.communicate(timeout=bound)
    assert proc.returncode == 0 and out == b""


def project_id(root: Path) -> int:
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        return cat.project_id(str(root), create=False)
    finally:
        cat.close()


def lock_file(root: Path) -> str:
    return os.path.join(os.environ["REWIND_HOME"], LOCKS_DIR, f"project-{project_id(root)}.lock")


@contextmanager
def holding_project_lock(root: Path):
    fd = os.open(lock_file(root), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def waiting_for_an_answer(pid: int, for_s: float = 1.0, timeout: float = 30) -> None:
    """Until the hook `pid` has sat in poll(2) for `for_s` on end: past the watcher's offer
    (which comes within milliseconds of the request), waiting for the call's answer."""
    deadline = time.monotonic() + timeout
    since = None
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                nr = f.read().split()[0]
        except (OSError, IndexError):
            nr = None
        if nr == "7":                               # poll (x86_64), the socket's timeout wait
            since = since or time.monotonic()
            if time.monotonic() - since >= for_s:
                return
        else:
            since = None
        time.sleep(0.02)
    raise AssertionError("the hook never waited for the watcher's answer")


def until_stopped(pid: int, timeout: float = 30) -> None:
    """SIGSTOP reaches every thread of a process a moment after kill(2) returns."""
    deadline = time.monotonic() + timeout
    while proc_state(pid) not in ("T", "t"):
        assert time.monotonic() < deadline, f"{pid} did not stop"
        time.sleep(0.005)


def log_text() -> str:
    from rewind.log import log_path
    try:
        return Path(log_path()).read_text()
    except OSError:
        return ""


def make(tmp_path: Path, files: int = 5) -> Path:
    root = tmp_path / "p"
    for i in range(files):
        write(root, f"src/d{i % 20}/m{i}.py", f"x = {i}\n")
    return root


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="reads poll(2)'s x86_64 syscall number")
def test_a_watcher_stopped_in_a_served_call_is_killed_and_the_hook_records_the_event(tmp_path):
    root = make(tmp_path)
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    assert counts(root, served=1)[0] == 1
    write(root, "src/d1/m1.py", "changed\n")
    try:
        with holding_project_lock(root):            # the served prompt waits for it, in the watcher
            proc = start_hook(payload("UserPromptSubmit", root), root)
            waiting_for_an_answer(proc.pid)
            os.kill(row["pid"], signal.SIGSTOP)
            until_stopped(row["pid"])
        finish(proc)                                 # not ANSWER_TIMEOUT_S: STALL_S, then on its own
        assert wait_gone(row["pid"]), "the stopped watcher was not killed"
    finally:
        if alive(row["pid"]):
            os.kill(row["pid"], signal.SIGCONT)
    assert "stopped (SIGSTOP or a debugger)" in log_text()
    assert view(root)["last_hook_fallback"]["reason"] == "the watcher was stopped in the call"
    cps = listing(root)
    assert [cp["id"] for cp in cps] == [2, 1]        # the prompt is recorded, by the hook
    changes = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]
    assert [c["path"] for c in changes] == ["src/d1/m1.py"]


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hook-alone", "hook-would-be-served"])
def test_a_stopped_watcher_holding_the_project_lock_is_killed_after_the_bound(tmp_path, watch):
    """Stopped while its served prompt scans (holding the project lock), the agent's timeout
    having killed that hook: the next hook takes the lock over after STALL_S instead of
    waiting out its 60 s and losing its prompt."""
    files = 4000
    root = make(tmp_path, files=files)
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    lock = lock_file(root)
    for attempt in range(10):
        for i in range(files):                       # a quick scan that hashes them all
            write(root, f"src/d{i % 20}/m{i}.py", f"x = {i}, {attempt}\n")
        served = start_hook(payload("UserPromptSubmit", root), root)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and row["pid"] not in holders(lock) and served.poll() is None:
            time.sleep(0.002)
        os.kill(row["pid"], signal.SIGSTOP)
        until_stopped(row["pid"])
        if row["pid"] in holders(lock):
            break
        os.kill(row["pid"], signal.SIGCONT)          # its scan was over already: again
        finish(served)
    else:
        pytest.skip("could not catch the watcher's served scan holding the project lock")
    try:
        served.kill()                                # the agent's hook timeout, say
        served.wait()
        write(root, "late.txt", "after")
        proc = start_hook(payload("UserPromptSubmit", root), root, REWIND_WATCH=watch)
        finish(proc)
        assert wait_gone(row["pid"]), "the stopped watcher was not killed"
    finally:
        if alive(row["pid"]):
            os.kill(row["pid"], signal.SIGCONT)
    assert "stopped (SIGSTOP or a debugger)" in log_text()      # (holding the project lock, or the catalog)
    cps = listing(root)
    assert cps[0]["kind"] == "prompt"
    assert run_rewind("diff", str(cps[0]["id"]), "--name-only", cwd=root, check=0).stdout.strip() == ""


def test_a_slow_watcher_is_waited_for_and_never_killed(tmp_path):
    """A served call held up longer than STALL_S by a busy (not stopped) lock holder: the
    hook waits for the watcher's answer, and the watcher lives on."""
    root = make(tmp_path)
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    assert counts(root, served=1)[0] == 1
    with holding_project_lock(root):                 # a holder that is running: this test
        proc = start_hook(payload("UserPromptSubmit", root), root)
        deadline = time.monotonic() + 2 * 2.0 + 1.0   # past STALL_S twice, on a condition: the hook still waits
        while time.monotonic() < deadline:
            assert proc.poll() is None
            time.sleep(0.1)
    finish(proc)
    assert alive(row["pid"]) and state(root)[0]["pid"] == row["pid"]
    assert counts(root, served=2) == (2, 1)          # served: no fallback, no duplicate
    assert [cp["id"] for cp in listing(root)] == [2, 1]


def test_a_watcher_on_a_replaced_root_goes_and_the_next_prompt_starts_one_on_the_new(tmp_path):
    root = make(tmp_path)
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    os.rename(root, tmp_path / "p.old")
    write(root, "fresh.txt", "new tree")
    assert wait_gone(row["pid"], timeout=30), "the watcher stayed on the old directory"
    assert state(root)[0]["stop_reason"] == "the project directory was replaced"
    hook(payload("UserPromptSubmit", root), root)     # on its own; it starts a watcher on the new one
    deadline = time.monotonic() + 30
    while state(root)[0]["pid"] == row["pid"] and time.monotonic() < deadline:
        time.sleep(0.05)
    new = wait_ready(root)
    assert new["pid"] != row["pid"]
    serving(root)
    write(root, "fresh.txt", "edited in the new tree")
    hook(payload("UserPromptSubmit", root), root)
    cps = listing(root)
    shown = json.loads(run_rewind("show", str(cps[1]["id"]), "--json", cwd=root, check=0).stdout)["changes"]
    assert [c["path"] for c in shown] == ["fresh.txt"]
    assert view(root)["quick_scans"] >= 1


QUEUED = "/proc/sys/fs/inotify/max_queued_events"


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering fs.inotify.max_queued_events needs root")
def test_a_foreground_watcher_says_an_overflow_once_and_never_blocks_on_a_full_stderr(tmp_path):
    """Overflow after overflow, stderr a one-page pipe nobody reads: the watcher goes on
    seeing changes, says a line or two, and the log has the whole story."""
    root = tmp_path / "p"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    r, wfd = os.pipe()
    fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, 4096)
    with open(QUEUED) as f:
        before = f.read().strip()
    try:
        with open(QUEUED, "w") as f:
            f.write("16")                              # for the instance the watcher makes now
        w = subprocess.Popen([*REWIND, "watch", "--project", str(root)], stdout=subprocess.DEVNULL,
                             stderr=wfd, env={**os.environ, "REWIND_WATCH": "1"})
        wait_ready(root)
    finally:
        with open(QUEUED, "w") as f:
            f.write(before)
        os.close(wfd)
    try:
        for burst in range(120):
            os.kill(w.pid, signal.SIGSTOP)
            for i in range(24):
                (root / f"f{i}.txt").write_text(str(burst))
            os.kill(w.pid, signal.SIGCONT)
            time.sleep(0.01)
        from rewind.catalog.db import Catalog
        cat = Catalog(os.environ["REWIND_HOME"])
        try:                                           # (an event right after an overflow may be lost too)
            seen = False
            for k in range(30):
                write(root, f"after{k}.txt", "seen")
                deadline = time.monotonic() + 1.0
                while not seen and time.monotonic() < deadline:
                    seen = cat.db.execute("SELECT 1 FROM watch_events WHERE path=?",
                                          (f"after{k}.txt".encode(),)).fetchone() is not None
                    time.sleep(0.05)
                if seen:
                    break
        finally:
            cat.close()
        assert seen, "the watcher stopped seeing changes after the overflows"
        assert "stopped the watcher" in run_rewind("watch", "--stop", "--project", str(root), check=0).stdout
        assert w.wait(timeout=30) == 0
    finally:
        if w.poll() is None:
            os.kill(w.pid, signal.SIGCONT)
            w.kill()
            w.wait()
    os.set_blocking(r, False)
    try:
        said = os.read(r, 1 << 20).decode()
    except BlockingIOError:
        said = ""
    os.close(r)
    lines = said.splitlines()
    assert 1 <= len(lines) <= 3 and all("the inotify queue overflowed" in line for line in lines), said
    told = log_text()
    assert "the inotify queue overflowed" in told and "watchdog: Inotify queue overflowed" in told


HOLDER = """
import fcntl, os, sqlite3, sys, time
home, pid = sys.argv[1], sys.argv[2]
fd = os.open(os.path.join(home, "locks", f"watch-{pid}.lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)                  # the project's watcher lock, as a watcher holds it
db = sqlite3.connect(os.path.join(home, "catalog.sqlite"), isolation_level=None)
db.execute("BEGIN IMMEDIATE")                   # in the middle of a catalog transaction
print("in", flush=True)
time.sleep(600)
"""


def test_a_stopped_watcher_in_a_catalog_transaction_is_killed_and_the_hook_goes_on(tmp_path):
    """The catalog's write lock (SQLite's, not rewind's) held by a watcher stopped mid-
    transaction: the hook's transaction, locked past its busy timeout, has it killed and
    records its prompt. (A stand-in with a watcher's command line and lock: catching the
    real one inside a transaction is luck.)"""
    root = make(tmp_path)
    run_rewind("save", cwd=root, check=0)
    home = os.environ["REWIND_HOME"]
    w = subprocess.Popen([os.sys.executable, "-c", HOLDER, home, str(project_id(root)), "rewind", "watch"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "in\n"
        os.kill(w.pid, signal.SIGSTOP)
        until_stopped(w.pid)
        write(root, "late.txt", "after")
        proc = start_hook(payload("UserPromptSubmit", root), root, REWIND_WATCH="0")
        # STALL_S, then the kill: SQLite's whole busy timeout (30 s) would exceed this bound
        finish(proc, bound=CATALOG_BOUND_S)
        assert w.wait(timeout=30) == -signal.SIGKILL
    finally:
        if w.poll() is None:
            os.kill(w.pid, signal.SIGCONT)
            w.kill()
            w.wait()
    assert "while it held the catalog" in log_text()
    cps = listing(root)
    assert cps[0]["kind"] == "prompt"
    assert run_rewind("diff", str(cps[0]["id"]), "--name-only", cwd=root, check=0).stdout.strip() == ""
