"""Hermetic tests: every test gets its own REWIND_HOME and HOME, and git never reads the
user's configuration."""

from __future__ import annotations

import os
import signal
import time

import pytest

# the same list as rewind/history/guard.py MARKERS (tests/history/test_protection.py checks it)
AGENT_MARKERS = {"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "GEMINI_CLI", "COPILOT_CLI", "CODEX_SANDBOX",
                 "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_THREAD_ID", "CODEX_CI",
                 "CODEX_MANAGED_BY_NPM", "QWEN_CODE", "CURSOR_AGENT", "OPENCODE", "CLINE_ACTIVE"}

@pytest.fixture(autouse=True)
def _isolate(tmp_path_factory, monkeypatch):
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
