"""A SessionStart returns before its work (hooks/client.py): a detached child has the
watcher serve it, or, with no watcher, registers the session and starts the watcher. Real console script, real
catalog, real watcher; the catalog's write lock, held by the test, shows the order."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from helpers import REWIND, state, wait_ready, write
from rewind.catalog.db import Catalog
from rewind.constants import CATALOG_NAME
from test_watcher import payload

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")


def _hook(p: dict, root: Path, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p).encode(), capture_output=True,
                          cwd=root, timeout=60,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1", **env})
    assert proc.returncode == 0 and proc.stdout == b"", proc
    return proc


def _session(session_id: str):
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        return cat.db.execute("SELECT source, started_ns, project_id FROM sessions WHERE session_id=?",
                              (session_id,)).fetchone()
    finally:
        cat.close()


def _until(what, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def test_session_start_returns_before_its_work_which_a_child_then_does(project_dir):
    root = project_dir.resolve()
    write(root, "a.txt", "a\n")
    Catalog(os.environ["REWIND_HOME"]).close()               # the catalog exists, with its schema
    held = sqlite3.connect(os.path.join(os.environ["REWIND_HOME"], CATALOG_NAME), isolation_level=None)
    held.execute("BEGIN IMMEDIATE")                           # no one else can write now
    try:
        # a hook doing its work before returning would wait here for the busy timeout
        # (30 s), then fail to register anything
        _hook(payload("SessionStart", root, session="s-detached"), root)
        time.sleep(0.5)
        assert _session("s-detached") is None                 # its work waits for the lock
    finally:
        held.rollback()
        held.close()
    row = _until(lambda: _session("s-detached"))
    assert row[0] == "startup"
    wait_ready(root)                                          # and the child started the watcher
    watcher, _ = state(root)
    assert watcher is not None and watcher["stopped_ns"] is None
    # a served prompt then finds the session and takes its checkpoint
    _hook(payload("UserPromptSubmit", root, session="s-detached"), root)
    out = subprocess.run([*REWIND, "list", "--json"], cwd=root, capture_output=True, text=True, check=True)
    assert len(json.loads(out.stdout)) == 1


def test_a_served_session_start_returns_before_its_work_too(project_dir):
    """With a watcher serving the project, the SessionStart of the next session (resume
    mode: a session per prompt) is handed to it by the child: the hook is back while the
    watcher still waits for the catalog, and the session is then registered, served."""
    from test_served import counts, serving
    root = project_dir.resolve()
    write(root, "a.txt", "a\n")
    _hook(payload("SessionStart", root, session="s-first"), root)
    wait_ready(root)
    serving(root)
    _until(lambda: _session("s-first"))
    served_before, alone_before = counts(root)
    held = sqlite3.connect(os.path.join(os.environ["REWIND_HOME"], CATALOG_NAME), isolation_level=None)
    held.execute("BEGIN IMMEDIATE")
    try:
        began = time.monotonic()
        _hook(payload("SessionStart", root, session="s-next"), root)
        assert time.monotonic() - began < 10          # (served in its time, it waits for the lock)
        time.sleep(0.5)
        assert _session("s-next") is None
    finally:
        held.rollback()
        held.close()
    assert _until(lambda: _session("s-next"))[0] == "startup"
    assert counts(root, served=served_before + 1) == (served_before + 1, alone_before)


def test_a_session_start_after_its_first_prompt_still_gives_the_session_its_source(project_dir):
    """The detached work may come after the session's first prompt registered it: the
    session's source and earlier start are taken then (no watcher here: both hooks run on
    their own, in order)."""
    root = project_dir.resolve()
    write(root, "a.txt", "a\n")
    _hook(payload("UserPromptSubmit", root, session="s-late"), root, REWIND_WATCH="0")
    first = _session("s-late")
    assert first is not None and first[0] is None
    start = payload("SessionStart", root, session="s-late")
    _hook(start, root, REWIND_WATCH="0")
    source, started_ns, project_id = _session("s-late")
    assert source == start["source"] == "startup" and started_ns == first[1] and project_id == first[2]
