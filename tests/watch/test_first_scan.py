"""The first prompt does not wait for the first snapshot (capture/pending.py): a prompt that
comes while the watcher's first scan of a big tree runs is recorded at once as pending and
completed by that scan with the tree as it was at the prompt, whatever the agent's edit
tools write meanwhile; a shell command waits for the scan; an outside write meanwhile is
flagged; a watcher that dies mid-scan leaves the work to the next hook. The real console
script, real payloads, the real watcher, a real generated tree big enough that its first
scan takes seconds on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import MAKE_TREE, run_rewind, state, write
from test_served import hook, listing, tool_pair
from test_served import payload
from test_watcher import wait_gone

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")

FILES = 24000


def big_tree(root: Path, files: int = FILES) -> None:
    subprocess.run([sys.executable, str(MAKE_TREE), "gen", str(root), "--files", str(files)], check=True,
                   capture_output=True)


def first_scan_running(root: Path, timeout: float = 30) -> dict:
    """Until the watcher says its first scan runs (the window this file is about)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = state(root)[0]
        if row and row.get("pid") and _baseline(root):
            return row
        time.sleep(0.02)
    raise AssertionError(f"the watcher of {root} never began its first scan: {state(root)}")


def workers_of(pid: int) -> list[int]:
    """The first scan's worker processes (capture/fanout.py) of the watcher `pid`."""
    found = []
    for child in os.listdir("/proc"):
        try:
            with open(f"/proc/{child}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{child}/cmdline", "rb") as f:
                args = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"rewind.capture.fanout" in args:
            found.append(int(child))
    return found


def pause_first_scan(pid: int, timeout: float = 30) -> list[int]:
    """SIGSTOP the first scan's workers, as a machine too busy to run them would: the scan
    stays under way, however fast it would be, until `resume`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = workers_of(pid)
        if workers:
            for w in workers:
                os.kill(w, signal.SIGSTOP)
            return workers
        time.sleep(0.005)
    raise AssertionError("the watcher's first scan started no worker: the tree is too small for a fan-out")


def resume(workers: list[int]) -> None:
    for w in workers:
        try:
            os.kill(w, signal.SIGCONT)
        except ProcessLookupError:
            pass


def _baseline(root: Path) -> bool:
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        pid = cat.project_id(str(root), create=False)
        return bool(pid) and cat.db.execute("SELECT baseline_ns FROM watchers WHERE project_id=?",
                                            (pid,)).fetchone()[0] is not None
    finally:
        cat.close()


def settled(root: Path, timeout: float = 120) -> list[dict]:
    """The listing once nothing in it is pending."""
    deadline = time.monotonic() + timeout
    while True:
        got = listing(root)
        if not pending_numbers(root) and (got or time.monotonic() > deadline):
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.2)


def prompt(root: Path, text: str) -> dict:
    return {**payload("UserPromptSubmit", root), "prompt": text}


def pending_numbers(root: Path) -> list[int]:
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        return [cp.number for cp in cat.pending(cat.project_id(str(root), create=False))]
    finally:
        cat.close()


def checkpoint_stats(root: Path, number: int) -> dict:
    from rewind.catalog.db import Catalog
    cat = Catalog(os.environ["REWIND_HOME"])
    try:
        return cat.checkpoint(cat.project_id(str(root), create=False), number).stats
    finally:
        cat.close()


def recompress_jobs(home: str) -> list[int]:
    """The background jobs rewriting raw packs in `home` (background.spawn_recompress)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if any(b"recompress" in a for a in args) and os.fsencode(home) in args:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("served", [True, False], ids=["served", "standalone"])
def test_a_prompt_during_the_first_scan_is_completed_as_the_tree_was_at_the_prompt(tmp_path, served):
    root = tmp_path / "proj"
    big_tree(root)
    kept = root / "docs" / "kept.txt"
    write(root, "docs/kept.txt", "as it was at the prompt\n")
    write(root, "docs/edited.txt", "before the Edit tool\n")
    write(root, "docs/outside.txt", "before the editor saved\n")
    write(root, "docs/saved.txt", "before the editor's atomic save\n")
    hook(payload("SessionStart", root), root)
    # a REWIND_* entry the watcher does not have: every hook declines to be served
    env = {} if served else {"REWIND_SERVED_TEST": "standalone"}
    paused = pause_first_scan(first_scan_running(root)["pid"])
    hook(prompt(root, "one"), root, **env)                                     # checkpoint 1, pending
    assert _baseline(root), "the first scan ended before the test could act in it: make the tree bigger"
    assert pending_numbers(root) == [1]
    write(root, "docs/outside.txt", "an editor saved this during the first scan\n")
    write(root, "docs/.saved.txt.swp", "an editor saved this by a rename over the file\n")
    os.replace(root / "docs/.saved.txt.swp", root / "docs/saved.txt")     # an event "created": it was there all the same
    # the agent writes a new file and edits one while the scan runs: neither waits
    wpre, wpost = tool_pair(root, "Write", file_path=str(root / "new/made.txt"), content="made\n")
    hook(wpre, root, **env)
    write(root, "new/made.txt", "made by the Write tool\n")
    hook(wpost, root, **env)
    epre, epost = tool_pair(root, "Edit", file_path=str(root / "docs/edited.txt"))
    hook(epre, root, **env)
    write(root, "docs/edited.txt", "after the Edit tool\n")
    hook(epost, root, **env)
    assert _baseline(root), "the first scan ended before the test could act in it: make the tree bigger"
    if served:
        view = json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)
        status = run_rewind("status", cwd=root, check=0).stdout
        if _baseline(root):          # (still running once both returned: running while they ran)
            assert view["first_scan_since"] and view["pending"] == [1], view
            assert "1 checkpoint pending until it is in (1)" in status, status
    # a shell command waits for the scan, then runs in a window of its own
    resume(paused)
    bpre, bpost = tool_pair(root, "Bash", command="echo ran > ran.txt")
    hook(bpre, root, **env)
    assert not _baseline(root) and pending_numbers(root) == []
    subprocess.run("echo ran > ran.txt", shell=True, cwd=root, check=True)
    hook(bpost, root, **env)
    hook(payload("Stop", root), root, **env)
    hook(prompt(root, "two"), root, **env)                                     # checkpoint 2
    cps = settled(root)
    assert [c["id"] for c in cps] == [2, 1]
    one = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    changes = {c["path"]: c for c in one["changes"]}
    first = checkpoint_stats(root, 1)["first_scan"]
    assert first["by"] == "watcher" and not first["events_lost"]
    # what came after the prompt is a change of checkpoint 1, with its author
    assert changes["new/made.txt"]["status"] == "added" and changes["new/made.txt"]["source"] == "tool"
    assert changes["docs/edited.txt"]["status"] == "modified" and changes["docs/edited.txt"]["source"] == "tool"
    assert changes["ran.txt"]["source"] == "bash"
    # the editor's save came during the scan: whether the scan read the file before or
    # after it is not known, and the checkpoint says so
    assert first["changed_outside"] == ["docs/outside.txt", "docs/saved.txt"], first
    # and checkpoint 1 is the tree at the prompt for everything the agent did
    run_rewind("to", "1", "--yes", cwd=root)
    assert not (root / "new/made.txt").exists() and not (root / "new").exists()
    assert (root / "docs/edited.txt").read_text() == "before the Edit tool\n"
    assert kept.read_text() == "as it was at the prompt\n"
    assert not (root / "ran.txt").exists()
    assert (root / "docs/outside.txt").read_text() in ("before the editor saved\n",
                                                        "an editor saved this during the first scan\n")
    assert (root / "docs/saved.txt").read_text() in ("before the editor's atomic save\n",
                                                      "an editor saved this by a rename over the file\n")
    # the watcher's workers stored the first snapshot raw, and a niced job rewrites it
    # compressed; killed here (a reboot, say), gc finishes it, and the store verifies whole
    # (the watcher starts it once no hook came for a while, or when it stops: a job may
    # start between the kill and gc, and hold the raw packs; then once more)
    home = os.environ["REWIND_HOME"]
    for _ in range(3):
        for pid in recompress_jobs(home):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass              # done already
        run_rewind("gc", cwd=root, check=0)
        packs = os.listdir(os.path.join(home, "objects", "pack"))
        if not [n for n in packs if n.endswith("-raw.pack")]:
            break
    assert packs and not [n for n in packs if n.endswith("-raw.pack")], packs
    run_rewind("verify", cwd=root, check=0)


def test_a_watcher_that_dies_in_its_first_scan_leaves_the_prompt_to_the_next_hook(tmp_path):
    root = tmp_path / "proj"
    big_tree(root)
    write(root, "docs/edited.txt", "before the Edit tool\n")
    hook(payload("SessionStart", root), root)
    row = first_scan_running(root)
    paused = pause_first_scan(row["pid"])
    hook(prompt(root, "one"), root)                                            # checkpoint 1, pending
    epre, epost = tool_pair(root, "Edit", file_path=str(root / "docs/edited.txt"))
    hook(epre, root)
    write(root, "docs/edited.txt", "after the Edit tool\n")
    assert _baseline(root) and pending_numbers(root) == [1], "the first scan ended too soon: a bigger tree"
    os.kill(row["pid"], signal.SIGKILL)
    assert wait_gone(row["pid"])
    resume(paused)            # they find their watcher gone and stop: nothing of theirs is kept
    hook(epost, root)
    hook(payload("Stop", root), root)             # the next hook that scans completes it
    assert pending_numbers(root) == []
    first = checkpoint_stats(root, 1)["first_scan"]
    assert first["by"] == "hook" and "the watcher did not complete it" in first["note"]
    hook(prompt(root, "two"), root)
    changes = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert changes["docs/edited.txt"]["source"] == "tool"
    run_rewind("to", "1", "--yes", cwd=root)
    assert (root / "docs/edited.txt").read_text() == "before the Edit tool\n"
    run_rewind("watch", "--stop", cwd=root, check=0)
