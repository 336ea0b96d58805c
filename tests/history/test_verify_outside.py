"""verify and the change rows of an edit tool's writes outside the project: listed (flag
`outside`), never stored, and no damage. A row that claims to be inside and is not still is."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest

from helpers import REWIND, run_rewind, wait_ready, write
from rewind.cli.replay import bundled_session, fill, perform
from rewind.constants import CATALOG_NAME

SESSION = bundled_session()


def _payload(event: str, root, tool: str | None = None, **tool_input) -> dict:
    p = next(x for x in SESSION if x["hook_event_name"] == event and (tool is None or x.get("tool_name") == tool))
    p = fill(p, str(root), "s-outside", str(root.parent / "cfg"))
    if tool_input:
        p["tool_input"] = {**p["tool_input"], **tool_input}
        p["tool_use_id"] = f"toolu_{tool_input['file_path'][-12:]}"
    return p


def _hook(p: dict, root, watch: str) -> None:
    r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, CLAUDE_PROJECT_DIR=str(root), REWIND_WATCH=watch), timeout=60)
    assert r.returncode == 0 and r.stdout == "", r


def _write_tool(root, target: str, watch: str) -> None:
    """A Write tool call as Claude Code 2.1.197 makes it, its effect really carried out."""
    pre = _payload("PreToolUse", root, "Write", file_path=target, content="written by the agent\n")
    post = dict(_payload("PostToolUse", root, "Write"), tool_input=pre["tool_input"], tool_use_id=pre["tool_use_id"])
    _hook(pre, root, watch)
    perform(pre)
    _hook(post, root, watch)


@pytest.fixture(params=["0", "1"], ids=["hooks-only", "with-watcher"])
def session_with_outside_writes(tmp_path, request):
    watch = request.param
    root, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    write(root, "a.txt", "alpha\n")
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "out_link")            # a link in the tree that leads outside
    _hook(_payload("SessionStart", root), root, watch)
    if watch == "1":
        wait_ready(root)
    _hook(_payload("UserPromptSubmit", root), root, watch)
    _write_tool(root, str(elsewhere / "plain.txt"), watch)          # outside by its path
    _write_tool(root, str(root / "out_link" / "linked.txt"), watch)  # outside through the link
    _write_tool(root, str(root / "a.txt"), watch)                   # and one inside
    _hook(_payload("Stop", root), root, watch)
    _hook(_payload("UserPromptSubmit", root), root, watch)        # the next prompt closes the turn
    assert (elsewhere / "plain.txt").exists() and (elsewhere / "linked.txt").exists()
    return root, elsewhere


def _outside_rows(root) -> list[dict]:
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    rows = []
    for c in cps:
        shown = json.loads(run_rewind("show", str(c["id"]), "--json", cwd=root, check=0).stdout)
        rows += [dict(ch, checkpoint=c["id"]) for ch in shown["changes"] if "outside" in ch["flags"]]
    return rows


def test_verify_accepts_an_edit_tools_writes_outside_the_project(session_with_outside_writes):
    root, elsewhere = session_with_outside_writes
    rows = _outside_rows(root)
    assert {r["path"] for r in rows} == {str(elsewhere / "plain.txt"), str(root / "out_link" / "linked.txt")}, rows
    r = run_rewind("verify", cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("ok:"), (r.stdout, r.stderr)
    r = run_rewind("verify", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout
    assert json.loads(r.stdout)["problems"] == []


@pytest.mark.parametrize("path, flags, says", [
    ("../x", "", "with a path outside the project"),                     # claims to be inside
    ("/etc/passwd", "", "with a path outside the project"),              # absolute, not flagged
    ("../x", "outside", "flagged outside whose path is not a clean absolute one"),
    ("/tmp/../etc/x", "outside", "flagged outside whose path is not a clean absolute one")],
    ids=["dotdot", "absolute-unflagged", "flagged-relative", "flagged-dotdot"])
def test_a_hand_damaged_change_row_still_fails_verify(session_with_outside_writes, path, flags, says):
    root, _ = session_with_outside_writes
    db = sqlite3.connect(os.path.join(os.environ["REWIND_HOME"], CATALOG_NAME), isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout = 30000")
        cur = db.execute("UPDATE changes SET path = ?, flags = ? WHERE path = ?",
                         (os.fsencode(path), flags, os.fsencode("a.txt")))
        assert cur.rowcount == 1
    finally:
        db.close()
    r = run_rewind("verify", "--json", cwd=root)
    assert r.returncode == 1, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert out["ok"] is False
    assert [p["problem"] for p in out["problems"]] == [f"change row {says}: {path!r}"]
    r = run_rewind("verify", cwd=root)
    assert r.returncode == 1 and says in r.stdout and "Traceback" not in r.stderr, (r.stdout, r.stderr)
