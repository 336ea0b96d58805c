"""A command the agent runs in the background, end to end with the real Claude Code CLI
(2.1.197, stream mode: one session, as a person runs it; `claude -p` resume mode kills
background tasks about 5 s after each prompt and sends no notice). Watcher on and off, on a
quiet and on a busy machine.

The session (tests/agents/claude/scenario_background.json): prompt 1 starts a build in the
background (`sleep 1; echo one > stage1.out; sleep 6; echo two > stage2.out`); once its first
stage is out, prompt 2 has the Edit tool fix app.txt and a command commit it, while the build
runs; the person saves person.txt after the commit, while the build sleeps; the build ends
and Claude Code sends its task notification as a prompt of its own (payloads/background/).

Then: both stages are `bash` with the build's command (they came long after its PostToolUse);
the person's file is not the build's (with the watcher: `external`, flagged `ambiguous` and
naming the build that ran meanwhile; without it, the command's when its processes did
anything between the two scans around it, flagged `ambiguous` either way); the notice is a `prompt` checkpoint with prompt_source
`task-notification` whose message says what ended, folded under prompt 1 in `list` and the
picker's order; and the plan of `to 1` does not call the build's files someone else's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from helpers import REWIND, agent_cli, harness, no_cli, run_rewind, spinning

HARNESS = harness("claude")
CLAUDE = agent_cli("claude")
BUILD = "sleep 1; echo one > stage1.out; sleep 6; echo two > stage2.out"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not CLAUDE, reason=no_cli("claude"))]


def _person(proj, stop: threading.Event) -> None:
    """After the build's first stage (while it sleeps) and once no command of the agent's
    runs in the foreground (prompt 2's commit: a change in its window would rightly be the
    commit's), the person saves a file."""
    import sqlite3
    catalog = os.path.join(os.environ["REWIND_HOME"], "catalog.sqlite")

    def foreground_done() -> bool:
        try:
            db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True, timeout=5)
            try:
                rows = db.execute("SELECT command, closed_ns, bg_ns FROM windows WHERE kind='bash'").fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            return False
        return any("commit" in (c or "") and closed for c, closed, _ in rows) and \
            all(closed or bg for _, closed, bg in rows)
    while not stop.is_set() and not ((proj / "stage1.out").exists() and foreground_done()):
        time.sleep(0.05)
    if not stop.wait(0.3):
        (proj / "person.txt").write_text("saved by the person while the build ran\n")


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_background_command_owns_what_it_writes_until_its_task_ends(tmp_path, watch, busy):
    proj = tmp_path / "proj"
    hook = " ".join(REWIND) + " hook claude"
    stop = threading.Event()
    person = threading.Thread(target=_person, args=(proj, stop), daemon=True)
    with spinning() if busy else contextlib.nullcontext():
        person.start()
        try:
            r = subprocess.run([sys.executable, str(HARNESS / "run_session.py"), "--claude", CLAUDE,
                                "--project-dir", str(proj), "--fresh",
                                "--scenario", str(HARNESS / "scenario_background.json"),
                                "--mode", "stream", "--hook-command", hook, "--no-recorder"],
                               capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, IS_SANDBOX="1", REWIND_WATCH=watch))
        finally:
            stop.set()
            person.join()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (proj / "person.txt").exists()

    cps = json.loads(run_rewind("list", "--json", "--every", cwd=proj, check=0).stdout)
    by_id = {c["id"]: c for c in cps}
    assert sorted(by_id) == [1, 2, 3], cps
    assert [by_id[n]["prompt_source"] for n in (1, 2)] == [None, None]
    notice = by_id[3]
    assert notice["kind"] == "prompt" and notice["prompt_source"] == "task-notification", notice
    assert notice["prompt"].startswith('Background command "build" completed') and BUILD in notice["prompt"]
    assert "<task-notification>" not in notice["prompt"]
    assert notice["folded_under"] == 1

    changes = {}
    for n in (1, 2):
        shown = json.loads(run_rewind("show", str(n), "--json", cwd=proj, check=0).stdout)
        changes.update({c["path"]: c for c in shown["changes"]})
    for stage in ("stage1.out", "stage2.out"):
        assert changes[stage]["source"] == "bash" and changes[stage]["command"] == BUILD, changes[stage]
    assert changes["app.txt"]["source"] == "tool" and changes["app.txt"]["tool"] == "Edit"
    # the commit prompt 2 made while the build ran is the commit command's, not the build's
    git = json.loads(run_rewind("show", "2", "--json", cwd=proj, check=0).stdout)["git"]
    assert git and git["source"] == "bash" and git["command"].startswith("git add app.txt"), git
    assert json.loads(run_rewind("show", "1", "--json", cwd=proj, check=0).stdout)["git"] is None
    mine = changes["person.txt"]
    assert "ambiguous" in mine["flags"] and mine["command"] == BUILD, mine
    # without the watcher, placed by scans only: the build's if its processes did anything
    # between the two scans around the edit, else as it would be (both flagged, naming it)
    assert mine["source"] in (("external",) if watch == "1" else ("bash", "external")), mine

    if watch == "1":                # `show` says which command ran meanwhile
        text = "".join(run_rewind("show", str(n), cwd=proj, check=0).stdout for n in (1, 2))
        line = next(line for line in text.splitlines() if "person.txt" in line)
        assert "external, while sleep 1; echo one" in line and "ambiguous" in line, line
    # the human list: the notice folded under the prompt that started the task
    listing = run_rewind("list", cwd=proj, check=0).stdout
    rows = [line for line in listing.splitlines() if line.strip()]
    assert not any(line.split()[0] == "3" for line in rows if line.split()), listing
    assert any("↳ task done: 3" in line for line in rows), listing
    # the plan of going back before the build names the person's file, not the build's
    plan = run_rewind("to", "1", "--dry-run", cwd=proj, check=0).stdout
    for line in plan.splitlines():
        if "stage1.out" in line or "stage2.out" in line:
            assert "not written by the agent" not in line, plan
    if watch == "1":
        assert "person.txt" in plan and "not written by the agent" in plan, plan
    log = os.path.join(os.environ["REWIND_HOME"], "rewind.log")
    assert not os.path.exists(log), open(log).read()
