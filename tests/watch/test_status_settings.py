"""`rewind status` says when the running watcher's settings differ from the ones it runs
with: a hook run with those is refused by the watcher (watch/serve.py compares REWIND_* and
the few other entries that change what a hook does) and runs standalone, the slow path."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from helpers import REWIND, wait_ready
from test_served import counts, hook, make, payload, serving, start, view

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")

LINE = "settings:    the watcher runs with other settings"


def status(root, **env) -> tuple[dict, str]:
    """`status --json` and `status`, with os.environ changed by env (None: removed)."""
    full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    out = [subprocess.run([*REWIND, "status", *args], cwd=root, env=full, capture_output=True, text=True,
                          timeout=120) for args in (["--json"], [])]
    assert [p.returncode for p in out] == [0, 0], out
    return json.loads(out[0].stdout), out[1].stdout


def test_status_names_a_rewind_setting_the_watcher_runs_without(tmp_path):
    root = make(tmp_path, "p")
    start(root)                                     # its SessionStart hook starts the watcher
    same, text = status(root, REWIND_WATCH="1")
    assert same["watcher"]["running"] and same["watcher"]["settings_differ"] == []
    assert LINE not in text
    other = {"REWIND_WATCH": "1", "REWIND_SETTLE_TIMEOUT": "7"}
    st, text = status(root, **other)
    assert st["watcher"]["settings_differ"] == [{"name": "REWIND_SETTLE_TIMEOUT", "watcher": None, "here": "7"}]
    assert f"{LINE} (REWIND_SETTLE_TIMEOUT=unset there, 7 here): hooks here run standalone" in text, text
    # and so they do
    _, alone = counts(root)
    hook(payload("UserPromptSubmit", root), root, **other)
    v = view(root)
    assert v["hooks_standalone"] == alone + 1
    assert v["last_hook_fallback"]["reason"] == "env REWIND_SETTLE_TIMEOUT"


def test_status_names_rewind_watch_when_the_watcher_was_started_without_it(tmp_path):
    """A watcher started by hand without REWIND_WATCH, hooks run with REWIND_WATCH=1: the
    benchmark's mistake (benchmarks/_common.py watch_env)."""
    root = make(tmp_path, "p")
    env = {k: v for k, v in os.environ.items() if k != "REWIND_WATCH"}
    proc = subprocess.Popen([*REWIND, "watch", "--project", str(root)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline()
        wait_ready(root)
        serving(root)
        st, text = status(root, REWIND_WATCH="1")
        assert st["watcher"]["settings_differ"] == [{"name": "REWIND_WATCH", "watcher": None, "here": "1"}]
        assert f"{LINE} (REWIND_WATCH=unset there, 1 here): hooks here run standalone" in text
        _, alone = counts(root)
        hook(payload("UserPromptSubmit", root), root, REWIND_WATCH="1")
        v = view(root)
        assert v["hooks_standalone"] == alone + 1
        assert v["last_hook_fallback"]["reason"] == "env REWIND_WATCH"
        # with no REWIND_WATCH here either, nothing differs
        st, text = status(root, REWIND_WATCH=None)
        assert st["watcher"]["settings_differ"] == [] and LINE not in text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_streak_of_hooks_that_ran_on_their_own_is_named_with_its_reason_and_fix_until_one_is_served(tmp_path):
    """A watcher started from a shell whose CLAUDE_CONFIG_DIR differs from the agent's: every
    hook of the agent runs on its own (the newcomer's session: 46 of 46). status names the
    streak, its reason and the fix; doctor warns; a served call ends it."""
    root = make(tmp_path, "p")
    row = start(root)
    theirs = {"CLAUDE_CONFIG_DIR": str(tmp_path / "agent-config")}
    # the server of the agent's environment that its hooks start (the test below) cannot
    # start here: its lock is taken
    from rewind.background import env_lock_name
    from rewind.envkey import env_key
    from rewind.lock import try_lock
    agent_env = {**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1", **theirs}
    key = env_key({os.fsencode(k): os.fsencode(v) for k, v in agent_env.items()}).decode()
    held = try_lock(os.environ["REWIND_HOME"], env_lock_name(row["project_id"], key))
    assert held is not None
    before = (view(root)["hooks_standalone_streak"] or {}).get("calls", 0)   # the SessionStart's, perhaps
    for _ in range(6):
        hook(payload("UserPromptSubmit", root), root, **theirs)
    v = view(root)
    streak = v["hooks_standalone_streak"]
    assert streak["calls"] == before + 6 and streak["reason"] == "env CLAUDE_CONFIG_DIR", streak
    assert "rewind watch --stop" in streak["fix"]
    _, text = status(root, REWIND_WATCH="1")
    assert f"the last {before + 6} ran on their own, none served since" in text and "rewind watch --stop" in text
    doctor = subprocess.run([*REWIND, "doctor", "--json"], cwd=root, capture_output=True, text=True, timeout=120)
    found = [f for f in json.loads(doctor.stdout)["findings"] if "ran on their own" in f["what"]]
    assert found and found[0]["level"] == "warn" and "rewind watch --stop" in found[0]["fix"], doctor.stdout
    served, _ = counts(root)
    hook(payload("UserPromptSubmit", root), root)                # the watcher's own environment
    counts(root, served + 1)
    assert view(root)["hooks_standalone_streak"] is None
    _, text = status(root, REWIND_WATCH="1")
    assert "ran on their own, none served" not in text
    os.close(held)


def test_an_agent_started_with_another_environment_gets_a_server_of_its_own_hooks_beside_the_watcher(tmp_path):
    """One watcher per environment that matters (the newcomer's session: a watcher started
    from a shell whose CLAUDE_CONFIG_DIR differs from the agent's, 46 of 46 hooks standalone):
    the agent's SessionStart, refused for its environment, starts a server of its hooks
    beside the watcher; from then on its hooks are served, and the other session's still are
    by the watcher."""
    root = make(tmp_path, "p")
    start(root)                                     # the watcher, with this process's environment
    theirs = {"CLAUDE_CONFIG_DIR": str(tmp_path / "agent-config")}
    hook(payload("SessionStart", root, session="agent-2"), root, **theirs)
    deadline = time.monotonic() + 30
    while not view(root)["env_servers"]:
        assert time.monotonic() < deadline, view(root)
        time.sleep(0.1)
    server = view(root)["env_servers"][0]
    assert server["pid"] != view(root)["pid"]
    _, text = status(root, REWIND_WATCH="1", **theirs)
    assert f"a server of hooks with these runs beside it (pid {server['pid']})" in text, text
    served, alone = counts(root)
    for _ in range(3):                              # the agent's prompts: served by its server
        hook(payload("UserPromptSubmit", root, session="agent-2"), root, **theirs)
    hook(payload("UserPromptSubmit", root), root)   # the other session's: by the watcher
    served2, alone2 = counts(root, served + 4)
    assert (served2, alone2) == (served + 4, alone), (served, alone, served2, alone2)
    assert len(json.loads(subprocess.run([*REWIND, "list", "--json"], cwd=root, capture_output=True,
                                         text=True, timeout=60).stdout)) >= 4
    assert view(root)["hooks_standalone_streak"] is None
    out = subprocess.run([*REWIND, "watch", "--stop"], cwd=root, capture_output=True, text=True, timeout=60)
    assert "and 1 server of other environments' hooks" in out.stdout, out.stdout
    deadline = time.monotonic() + 30
    while view(root)["env_servers"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
