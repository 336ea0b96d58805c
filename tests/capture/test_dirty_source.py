"""The scan's `DirtySource` seam: incremental scans and attribution on a fixed dirty set, with
real files, the real store and catalog, real hook processes, and no watcher thread."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from helpers import REWIND, project, write
from rewind.capture.dirty import FULL, Fixed
from rewind.capture.snapshot import TreeLoader
from rewind.capture.working_copy import Commit, Scan, locked
from rewind.cli.replay import bundled_session, fill
from rewind.store import tree as treemod

SESSION = bundled_session()


def payload(event: str, root: Path, tool: str | None = None, **tool_input) -> dict:
    p = next(x for x in SESSION if x["hook_event_name"] == event and (tool is None or x.get("tool_name") == tool))
    p = fill(p, str(root), "s-fixed", str(root.parent / "cc"))
    if tool_input:
        p["tool_input"] = {**p["tool_input"], **tool_input}
        p["tool_use_id"] = f"toolu_{time.monotonic_ns()}"
    return p


def hook(p: dict, root: Path) -> None:
    proc = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), capture_output=True, text=True,
                          cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "0"},
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout == "", proc


def content(proj, tree_id: str, path: str) -> bytes | None:
    load = TreeLoader(proj.store)
    tree = load(tree_id)
    parts = path.split("/")
    for part in parts[:-1]:
        tree = load(tree[part].oid)
    e = tree.get(parts[-1])
    return None if e is None else proj.store.get(e.oid)


def test_a_fixed_dirty_set_reads_exactly_those_paths(tmp_path):
    """A quick scan reads the named paths and lists the directories on their way; files it
    was not told of, and directories off the way, stay as the last scan had them."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a1\n")
    write(root, "sub/b.txt", "b1\n")
    write(root, "other/c.txt", "c1\n")
    proj = project(root)
    try:
        with locked(proj) as wc:
            first = wc.commit(wc.scan(Scan.auto(FULL)), Commit("manual"))
        write(root, "a.txt", "a2 longer\n")
        write(root, "sub/b.txt", "b2 longer\n")
        (root / "other/c.txt").unlink()
        write(root, "sub/new.txt", "new\n")
        with locked(proj) as wc:
            scanned = wc.scan(Scan.auto(Fixed({"a.txt": "m", "sub/new.txt": "c"})))
            second = wc.commit(scanned, Commit("manual"))
        assert scanned.plan.quick
        assert content(proj, second.tree, "a.txt") == b"a2 longer\n"        # named: read
        assert content(proj, second.tree, "sub/new.txt") == b"new\n"
        assert content(proj, second.tree, "sub/b.txt") == b"b1\n"            # not named: kept as it was
        assert content(proj, second.tree, "other/c.txt") == b"c1\n"   # a directory off the way
        with locked(proj) as wc:
            third = wc.commit(wc.scan(Scan.full()), Commit("manual"))     # the whole tree: the truth
        assert content(proj, third.tree, "sub/b.txt") == b"b2 longer\n"
        assert content(proj, third.tree, "other/c.txt") is None
        assert first.tree != second.tree != third.tree
    finally:
        proj.close()


def test_a_fixed_set_without_a_previous_scan_reads_the_whole_tree(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    write(root, "b.txt", "b\n")
    proj = project(root)
    try:
        with locked(proj) as wc:
            scanned = wc.scan(Scan.auto(Fixed({"a.txt": "m"})))
            cp = wc.commit(scanned, Commit("manual"))
        assert not scanned.plan.quick
        assert content(proj, cp.tree, "b.txt") == b"b\n"
        assert treemod.parse(proj.store.get(cp.tree)).keys() >= {"a.txt", "b.txt"}
    finally:
        proj.close()


def test_attribution_places_fixed_events_against_real_shell_windows(tmp_path):
    """Events named by a shell window's id are the command's, with its command line; an
    event no window names is someone else's; a change with no event at all takes the
    segment's default (the open window). Real hooks open the window; the dirty set and
    its events are given, as the watcher would have read them."""
    root = tmp_path / "proj"
    write(root, "keep.txt", "k\n")
    hook(payload("UserPromptSubmit", root), root)                       # checkpoint 1
    pre = payload("PreToolUse", root, "Bash", command="echo hi > by_cmd.txt")
    hook(pre, root)                                                    # window opened after a scan
    write(root, "by_cmd.txt", "hi\n")
    write(root, "by_person.txt", "me\n")
    write(root, "no_event.txt", "?\n")
    proj = project(root)
    try:
        (wid,) = [w.id for w in proj.catalog.open_windows(proj.id) if w.kind == "bash"]
        now = time.time_ns()
        events = {"by_cmd.txt": ("c", now, f"w:{wid}"), "by_person.txt": ("c", now, None)}
        with locked(proj) as wc:
            scanned = wc.scan(Scan.auto(Fixed({p: "c" for p in (*events, "no_event.txt")}, events)))
            wc.commit(scanned)
        got = {r.path: r for r in scanned.segment}
        assert got["by_cmd.txt"].source == "bash" and got["by_cmd.txt"].command == "echo hi > by_cmd.txt"
        assert got["by_person.txt"].source == "external"
        assert got["no_event.txt"].source == "bash"       # no event: the window open across the segment
        assert "keep.txt" not in got
    finally:
        proj.close()
