"""Property-based fuzzing of every agent's hook payloads (hypothesis): wrong types, missing and
extra fields, huge strings, NUL bytes, lone surrogates (invalid UTF-8 escapes), absolute,
relative and `..` paths, paths through a symlink that leaves the project. Whatever comes in:
the hook returns 0, prints nothing, writes nothing outside the project and rewind's data dir,
and the store stays sound. (The real process's exit code is covered by the bad-payload
tests of each adapter; this drives the same entry point in-process, thousands of times.)"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import fingerprint, write
from rewind.hooks.entry import run_hook

EVENTS = {
    "claude": ("hook_event_name", ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                                   "PostToolUseFailure", "Stop", "SubagentStop", "SessionEnd"],
               "session_id", ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "Read"]),
    "gemini": ("hook_event_name", ["SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent",
                                   "SessionEnd"], "session_id", ["write_file", "replace", "run_shell_command"]),
    "codex": ("hook_event_name", ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                                  "SessionEnd"], "session_id", ["Bash", "apply_patch"]),
    "cursor": ("hook_event_name", ["beforeSubmitPrompt", "beforeShellExecution", "afterShellExecution",
                                   "afterFileEdit", "stop", "sessionStart", "sessionEnd"], "conversation_id", []),
    "generic": ("event", ["session-start", "prompt", "tool-start", "tool-end", "stop", "session-end"],
                "session", ["edit", "shell"]),
}

WORLD: dict = {}


def hostile_text():
    return st.one_of(
        st.text(max_size=40),
        st.just("\x00nul\x00"), st.just("\ud800lone surrogate"), st.just("x" * 300_000),
        st.sampled_from(["../../outside/victim.txt", "/etc/passwd", "link-out/victim.txt", "a/../../b",
                         "./a.txt", "a.txt", "", ".", "..", "/", "src/../../../outside"]),
        st.builds(lambda: WORLD["outside"] + "/victim.txt"),
        st.builds(lambda: WORLD["root"] + "/link-out/new.txt"),
        st.builds(lambda: WORLD["root"] + "/../outside/victim.txt"),
    )


def anything():
    return st.one_of(hostile_text(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
                     st.lists(hostile_text(), max_size=3), st.dictionaries(st.text(max_size=8), hostile_text(),
                                                                          max_size=3))


def tool_input():
    fields = ["file_path", "notebook_path", "command", "content", "paths", "path", "old_string", "new_string"]
    patch = st.builds(lambda p: f"*** Begin Patch\n*** Add File: {p}\n+x\n*** End Patch\n", hostile_text())
    return st.one_of(anything(), st.dictionaries(st.sampled_from(fields), st.one_of(hostile_text(), patch,
                                                                                       anything()), max_size=4))


@st.composite
def payloads(draw, agent):
    ev_key, events, sid_key, tools = EVENTS[agent]
    p = {}
    if draw(st.integers(0, 9)) > 0:
        p[ev_key] = draw(st.one_of(st.sampled_from(events), anything()))
    if draw(st.integers(0, 9)) > 0:
        p[sid_key] = draw(st.one_of(st.just("fuzz-session"), hostile_text(), anything()))
    for key, strat in (("cwd", st.one_of(st.builds(lambda: WORLD["root"]), hostile_text(), anything())),
                       ("tool_name", st.one_of(st.sampled_from(tools or ["x"]), anything())),
                       ("tool", st.one_of(st.sampled_from(tools or ["x"]), anything())),
                       ("tool_input", tool_input()), ("prompt", hostile_text()),
                       ("file_path", hostile_text()), ("command", hostile_text()),
                       ("paths", st.one_of(st.lists(hostile_text(), max_size=4), anything())),
                       ("workspace_roots", st.one_of(st.lists(st.builds(lambda: WORLD["root"]), max_size=1),
                                                     anything())),
                       ("tool_use_id", anything()), ("transcript_path", hostile_text()),
                       ("extra_" + draw(st.text(max_size=5)), anything())):
        if draw(st.booleans()):
            p[key] = draw(strat)
    return p


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    root, outside = base / "proj", base / "outside"
    write(outside, "victim.txt", "must stay as it is")
    write(root, "a.txt", "a")
    write(root, "src/m.py", "x = 1\n")
    os.symlink(str(outside), root / "link-out")
    WORLD.update(root=str(root), outside=str(outside))
    return root, outside


@pytest.mark.parametrize("agent", sorted(EVENTS))
def test_hostile_payloads_never_break_the_agent_or_reach_outside(world, agent, monkeypatch, capfd):
    root, outside = world
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
    monkeypatch.setenv("GEMINI_PROJECT_DIR", str(root))
    before = fingerprint(outside)
    siblings = sorted(os.listdir(root.parent))
    tried = [0]

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(payloads(agent))
    def run(payload):
        tried[0] += 1
        data = json.dumps(payload).encode()   # lone surrogates become \\ud800 escapes, as an agent could send
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert run_hook([agent]) == 0
        out, _ = capfd.readouterr()
        assert out == ""
        assert fingerprint(outside) == before
        assert sorted(os.listdir(root.parent)) == siblings
    run()
    assert tried[0] >= 100
    from rewind.catalog.db import Catalog
    from rewind.history.verify import verify
    from rewind.store.objects import Store
    home = os.environ["REWIND_HOME"]
    if Path(home, "catalog.sqlite").exists():
        cat = Catalog(home)
        report = verify(cat, Store(home))
        cat.close()
        assert report.ok, report.problems[:5]


@settings(max_examples=30, deadline=None)
@given(data=st.one_of(st.binary(max_size=3000), st.binary(min_size=1, max_size=40).map(lambda b: b * 2000)),
       n=st.integers(min_value=0, max_value=100_000))
def test_an_objects_head_is_the_start_of_its_bytes(tmp_path_factory, data, n):
    """`Store.head` (the binary check's look) inflates only the start of an object: it must
    give exactly data[:n], compressed or stored raw, short or long."""
    from rewind.store.objects import Store
    store = Store(str(tmp_path_factory.mktemp("home")))
    oid = store.put(data)
    assert store.head(oid, n) == data[:n]          # staged
    store.flush()
    assert store.head(oid, n) == data[:n]          # in place
