"""The inotify watch limit, reached for real (root: `fs.inotify.max_user_watches` lowered to
what the machine's watches use now plus a few, always put back): a directory that gets no
watch makes the watcher distrusted from that event on, for the very next hook, served or
not. These tests run alone (the limit counts per user across the machine): keep the window
short, and never run them in parallel with other watchers."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import project, run_rewind, write
from test_served import hook, payload, start
from rewind.store import tree as treemod

LIMIT = "/proc/sys/fs/inotify/max_user_watches"

pytestmark = [
    pytest.mark.skipif(not os.path.isfile(LIMIT), reason="needs Linux inotify"),
    pytest.mark.skipif(os.geteuid() != 0, reason="lowering fs.inotify.max_user_watches needs root"),
    pytest.mark.serial,
]


def watches_in_use() -> int:
    """Every inotify watch of every process (root sees them all): the fdinfo lines."""
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    n += f.read().count("inotify wd:")
            except OSError:
                continue
    return n


@contextmanager
def watch_limit(extra: int):
    """max_user_watches = the watches in use + `extra`, for the block only."""
    with open(LIMIT) as f:
        before = f.read().strip()
    try:
        with open(LIMIT, "w") as f:
            f.write(str(watches_in_use() + extra))
        yield
    finally:
        with open(LIMIT, "w") as f:
            f.write(before)


def checkpoint_file(root: Path, number: int, rel: str) -> bytes | None:
    proj = project(root)
    try:
        cp = proj.catalog.checkpoint(proj.id, number)
        entries = treemod.parse(proj.store.get(cp.tree))
        *dirs, name = rel.split("/")
        for d in dirs:
            e = entries.get(d)
            if e is None:
                return None
            entries = treemod.parse(proj.store.get(e.oid))
        e = entries.get(name)
        return proj.store.get(e.oid) if e is not None else None
    finally:
        proj.close()


def newest(root: Path) -> int:
    proj = project(root)
    try:
        return proj.catalog.checkpoints(proj.id)[0].number
    finally:
        proj.close()


DIRS = 12


@pytest.mark.parametrize("served", [True, False], ids=["served", "standalone"])
def test_a_lost_watch_makes_the_very_next_hooks_read_what_it_cannot_see(tmp_path, served):
    """New directories past the limit get no watch; the prompts right after (well within
    the watcher's one-second heartbeat) each hold the edits made in them."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    env = {} if served else {"REWIND_TEST_STANDALONE": "1"}   # a REWIND_* of its own: not served
    start(root)
    hook(payload("UserPromptSubmit", root), root, **env)
    with watch_limit(2):
        for i in range(DIRS):
            write(root, f"d{i}/f.txt", "v0")
        hook(payload("UserPromptSubmit", root), root, **env)   # the watcher has read the mkdirs by now
    for rnd in range(1, 4):
        for i in range(DIRS):
            write(root, f"d{i}/f.txt", f"v{rnd}")
        hook(payload("UserPromptSubmit", root), root, **env)
        n = newest(root)
        held = {i: checkpoint_file(root, n, f"d{i}/f.txt") for i in range(DIRS)}
        assert held == {i: f"v{rnd}".encode() for i in range(DIRS)}, f"round {rnd}, checkpoint {n}"
    status = json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)
    assert status["problem"] == "the inotify watch limit was reached"
