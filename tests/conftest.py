"""Hermetic tests: every test gets its own REWIND_HOME and HOME, and git never reads the
user's configuration."""

from __future__ import annotations

import os
import signal
import time

import pytest

from helpers import AGENT_CLIS, agent_cli


def pytest_configure(config):
    """The agent CLIs scripts/install-agents installed are exported as CLAUDE_BIN (GEMINI_BIN,
    CODEX_BIN), so the tests and the benchmarks they run find them without a shell's export.
    REWIND_AGENTS_DIR goes: every REWIND_* variable is compared between a hook and its
    watcher, and this one is the tests' business alone."""
    missing = []
    for agent, (name, var) in AGENT_CLIS.items():
        found = agent_cli(agent)
        if found:
            os.environ[var] = found
        else:
            missing.append(name)
    # .ci/run sets it: there, a CLI that could not be installed fails the run (its tests
    # would skip, and a skipped end-to-end test proves nothing); Cline and Cursor are
    # docs-only (README), not in AGENT_CLIS
    if os.environ.pop("REWIND_REQUIRE_AGENTS", "") == "1" and missing:
        raise pytest.UsageError(f"CI needs every agent CLI, and {', '.join(missing)} could not be installed "
                                "(see scripts/install-agents' output above)")
    from helpers import AGENT_CLIS_HOME
    cache = AGENT_CLIS_HOME / "copilot" / "cache"
    if cache.is_dir() and not os.environ.get("COPILOT_CACHE_HOME"):
        os.environ["COPILOT_CACHE_HOME"] = str(cache)      # its unpacked self (scripts/install-agents)
    os.environ.pop("REWIND_AGENTS_DIR", None)

# the same list as rewind/history/guard.py MARKERS (tests/history/test_protection.py checks it)
AGENT_MARKERS = {"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "GEMINI_CLI", "COPILOT_CLI", "CODEX_SANDBOX",
                 "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_THREAD_ID", "CODEX_CI",
                 "CODEX_MANAGED_BY_NPM", "QWEN_CODE", "CURSOR_AGENT", "OPENCODE", "CLINE_ACTIVE"}

def pytest_collection_modifyitems(config, items):
    """Longest first: the real agent sessions take 10-60 s each (the busy machine's the most),
    so they start first and, as pytest-xdist hands each worker its next test when it frees up
    (`--maxschedchunk 1` in pyproject.toml), the short tests fill the gaps instead of waiting
    at the end."""
    slow = ("tests/scenarios/", "tests/watch/", "test_pending.py", "test_exit_codes.py", "test_fuzz_payloads.py")

    def rank(item):
        if item.get_closest_marker("e2e"):
            return 0 if "[busy-" in item.nodeid else 1
        return 2 if any(part in item.nodeid for part in slow) else 3
    items.sort(key=rank)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """REWIND_TEST_CPU=FILE appends each test's CPU seconds (this worker's and its waited-for
    children's; a detached watcher's are not counted) and wall seconds to FILE: on a busy
    machine the suite's time follows its CPU, not its wall time (`sort -k2 -n FILE`)."""
    out = os.environ.get("REWIND_TEST_CPU")
    if not out:
        return (yield)
    before, wall = os.times(), time.monotonic()
    try:
        return (yield)
    finally:
        after = os.times()
        cpu = sum(after[:4]) - sum(before[:4])
        with open(out, "a") as f:
            f.write(f"{item.nodeid} {cpu:.2f} {time.monotonic() - wall:.2f}\n")


@pytest.fixture(autouse=True)
def _serial(request, tmp_path_factory):
    """Under pytest-xdist the workers run tests side by side; a test marked `serial` changes a
    machine-wide setting (fs.inotify.max_user_watches) and runs alone: it takes the lock
    exclusively, every other test takes it shared. The turnstile keeps a waiting serial test
    from being starved by a stream of shared holders (flock prefers no one)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl
    shared = tmp_path_factory.getbasetemp().parent       # one directory for all the workers
    serial = request.node.get_closest_marker("serial") is not None
    with open(shared / "serial.turnstile", "a") as turnstile, open(shared / "serial.lock", "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        finally:
            if not serial:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield                                            # both released when the files close


@pytest.fixture(autouse=True)
def _real_script_end_to_end(request, monkeypatch):
    """End-to-end tests run the installed console script for every command; the others may
    fork theirs from a warm interpreter (tests/zygote.py)."""
    if "tests/scenarios/" in request.node.nodeid or request.node.get_closest_marker("e2e"):
        import helpers
        monkeypatch.setattr(helpers, "WARM", False)


@pytest.fixture(autouse=True)
def _isolate(tmp_path_factory, monkeypatch, _serial):
    base = tmp_path_factory.mktemp("env")
    home = base / "home"
    home.mkdir()
    rewind_home = str(base / "rewind-home")
    monkeypatch.setenv("REWIND_HOME", rewind_home)
    monkeypatch.setenv("REWIND_TESTING", "1")
    monkeypatch.setenv("REWIND_WATCH", "0")      # tests that want the watcher turn it on
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "NO_COLOR", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(var, raising=False)
    # The agents' own markers: a suite run from inside an agent's shell must not look like
    # one to rewind's history protection (tests that want them set them).
    for var in list(os.environ):
        if var in AGENT_MARKERS or (var.startswith(("CODEX_", "QWEN_", "GEMINI_CLI", "COPILOT_"))
                                    and not var.endswith("_BIN")):
            monkeypatch.delenv(var, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
    yield
    _stop_watchers(rewind_home)


def _stop_watchers(rewind_home: str) -> None:
    """A watcher outlives the session that started it (until 30 idle minutes): the ones this
    test started stop with it, so they do not pile up on the machine during the suite. So
    does a SessionStart's detached child (hooks/client.py), which could start one after."""
    if not os.path.isdir(rewind_home) or not os.path.isdir("/proc/self"):
        return
    _stop(_ours(rewind_home, b"hook"))
    _stop(_ours(rewind_home, b"watch"))


def _ours(rewind_home: str, word: bytes) -> list[int]:
    mark = f"\0REWIND_HOME={rewind_home}\0".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            if word not in cmd:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark in b"\0" + f.read() + b"\0":
                    pids.append(int(name))
        except OSError:
            continue
    return pids


def _stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.02)
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def project_dir(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root
