"""Hermetic tests: every test gets its own REWIND_HOME and HOME, and git never reads the
user's configuration."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolate(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.mktemp("env")
    home = base / "home"
    home.mkdir()
    monkeypatch.setenv("REWIND_HOME", str(base / "rewind-home"))
    monkeypatch.setenv("REWIND_TESTING", "1")
    monkeypatch.setenv("REWIND_WATCH", "0")      # tests that want the watcher turn it on
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "NO_COLOR", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(var, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
    yield
    _stop_watchers(str(base / "rewind-home"))


def _stop_watchers(home: str) -> None:
    """A watcher a test started (`rewind watch` or a hook) goes with the test: on a 2-core
    machine lingering watchers pile up. Only when the test's data dir has a watcher lock."""
    locks = os.path.join(home, "locks")
    try:
        if not any(n.startswith("watch-") for n in os.listdir(locks)):
            return
    except OSError:
        return
    import signal
    import time
    from helpers import processes_with_home
    pids = []
    for pid in processes_with_home(home):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"watch" not in f.read():
                    continue
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and \
                not open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z":
            time.sleep(0.02)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def project_dir(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root
