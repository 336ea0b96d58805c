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


@pytest.fixture
def project_dir(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root
