"""Gemini CLI, Codex, Cursor and generic adapters: the captured payloads parse into the right
events, hostile ones never break the agent, install/uninstall give back the settings byte for
byte, and Cursor's (documented) and the generic payloads drive a whole recorded session."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import REWIND, harness, run_rewind, write
from rewind.hooks import codex, gemini



def captured(agent: str, name: str) -> dict:
    return json.loads((harness(agent) / "payloads" / name).read_text())


def hook(agent: str, payload, cwd, env=None) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    return subprocess.run([*REWIND, "hook", agent], input=data if isinstance(data, bytes) else data.encode(),
                          capture_output=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=60)


# -- parsing the captured payloads ---------------------------------------------------------

def test_gemini_payloads_map_onto_the_recorder_events():
    env = {"GEMINI_PROJECT_DIR": "/p"}
    assert gemini.parse(captured("gemini", "SessionStart.json"), env).kind == "session_start"
    ev = gemini.parse(captured("gemini", "BeforeAgent.json"), env)
    assert ev.kind == "prompt" and ev.prompt.startswith("Create the app skeleton") and ev.project_dir == "/p"
    ev = gemini.parse(captured("gemini", "BeforeTool.write_file.json"), env)
    assert (ev.kind, ev.tool_kind, ev.tool) == ("pre_tool", "edit", "write_file") and len(ev.targets) == 1
    ev = gemini.parse(captured("gemini", "AfterTool.replace.json"), env)
    assert (ev.kind, ev.tool_kind) == ("post_tool", "edit")
    ev = gemini.parse(captured("gemini", "BeforeTool.run_shell_command.json"), env)
    assert ev.tool_kind == "shell" and ev.command
    assert gemini.parse(captured("gemini", "BeforeTool.read_file.json"), env) is None
    failed = gemini.parse(json.loads((harness("gemini") / "payloads/edge/AfterTool.run_shell_command.json")
                                     .read_text()), env)
    assert failed.failed
    assert gemini.parse(captured("gemini", "AfterAgent.json"), env).kind == "stop"
    assert gemini.parse(captured("gemini", "SessionEnd.json"), env).kind == "session_end"


def test_codex_payloads_map_onto_the_recorder_events():
    assert codex.parse(captured("codex", "SessionStart.json"), {}).kind == "session_start"
    ev = codex.parse(captured("codex", "UserPromptSubmit.json"), {})
    assert ev.kind == "prompt" and ev.prompt_id and ev.prompt.startswith("Create the app skeleton")
    ev = codex.parse(captured("codex", "PreToolUse.apply_patch.json"), {})
    assert ev.tool_kind == "edit" and ev.targets == ["src/app.py", "notes.md"] and ev.tool_use_id
    ev = codex.parse(captured("codex", "PreToolUse.Bash.json"), {})
    assert ev.tool_kind == "shell" and ev.command == "echo x > made_by_shell.txt"
    assert codex.parse(captured("codex", "Stop.json"), {}).kind == "stop"


def test_codex_patch_targets_cover_add_update_delete_and_move():
    patch = ("*** Begin Patch\n*** Update File: docs/index.md\n*** Move to: docs/README.md\n@@\n-a\n+b\n"
             "*** Delete File: notes.md\n*** Add File: new dir/x.py\n+print(1)\n*** End Patch\n")
    assert codex.patch_targets(patch) == ["docs/index.md", "docs/README.md", "notes.md", "new dir/x.py"]
    assert codex.patch_targets("no patch here") == []


def test_codex_trust_hash_is_the_one_codex_computes():
    # known answer from the harness's own implementation for Codex 0.171.0
    handler = {"type": "command", "command": "rewind hook PreToolUse", "timeout": 60}
    assert codex.trusted_hash("PreToolUse", "*", handler) == \
        "sha256:55ddc48d99e9b85ae397cf9ccc9167517349646d96aa0b107ae892c9d6777902"
    assert codex.trusted_hash("SessionEnd", None, {"command": "rewind hook SessionEnd", "timeout": 3}) == \
        "sha256:6952688d8caf09d73b6b23aadbbf601a46db1f28361a88938dc0529da84b57bb"


# -- never breaking the agent -------------------------------------------------------------------

BAD = [b"", b"not json", b"[]", b"null", b'{"hook_event_name": 5}', b'{"hook_event_name": "BeforeAgent"}',
       b'{"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "write_file", "tool_input": "x"}',
       b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "apply_patch", "tool_input": {"command": 7}}',
       b'{"hook_event_name": "afterFileEdit", "conversation_id": "c", "workspace_roots": "/"}',
       b'{"event": "tool-start", "session": "s", "tool": "edit", "paths": "/etc/passwd"}',
       json.dumps({"hook_event_name": "BeforeAgent", "session_id": "s\u0000x", "cwd": "/nonexistent",
                   "prompt": "\udcff" * 3}).encode()]


@pytest.mark.parametrize("agent", ["gemini", "codex", "cursor", "generic"])
@pytest.mark.parametrize("payload", BAD, ids=range(len(BAD)))
def test_bad_payloads_exit_0_and_print_nothing(tmp_path, agent, payload):
    proc = hook(agent, payload, tmp_path)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""


# -- installing ----------------------------------------------------------------------------------

def _roundtrip(tmp_path, agent, settings_rel, original: bytes, scope, extra_files=()):
    root = tmp_path / "proj"
    root.mkdir(exist_ok=True)
    path = root / settings_rel if not settings_rel.startswith("/") else Path(settings_rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(original)
    before_extra = {p: (p.read_bytes() if p.exists() else None) for p in extra_files}
    run_rewind("hooks", "install", agent, "--scope", scope, "--project", root, check=0)
    run_rewind("hooks", "install", agent, "--scope", scope, "--project", root, check=0)   # idempotent
    installed = json.loads(path.read_text())
    st = json.loads(run_rewind("hooks", "status", agent, "--project", root, "--json", check=0).stdout)
    assert any(r["installed"] and r["command_resolves"] for r in st)
    run_rewind("hooks", "uninstall", agent, "--scope", scope, "--project", root, check=0)
    assert path.read_bytes() == original
    for p, data in before_extra.items():
        assert (p.read_bytes() if p.exists() else None) == data, p
    return installed


def test_gemini_install_uninstall_keeps_other_hooks_byte_identical(tmp_path):
    original = b'{\n  "theme": "x",\n  "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh", "timeout": 5000}]}]}\n}\n'
    got = _roundtrip(tmp_path, "gemini", ".gemini/settings.json", original, "project")
    assert got["hooks"]["BeforeTool"][0]["hooks"][0]["command"] == "lint.sh"
    assert got["hooks"]["BeforeTool"][1]["matcher"] == gemini.TOOL_MATCHER
    assert got["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3000      # milliseconds


def test_codex_install_writes_trust_and_uninstall_gives_back_both_files(tmp_path, monkeypatch):
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    config = home / "config.toml"
    config.write_bytes(b'model = "gpt-5.5"\n\n[features]\nhooks = true\n')
    original = b'{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-me", "timeout": 10}]}]}}'
    root = tmp_path / "proj"
    root.mkdir()
    (home / "hooks.json").write_bytes(original)
    run_rewind("hooks", "install", "codex", "--project", root, check=0)
    got = json.loads((home / "hooks.json").read_text())
    text = config.read_text()
    assert text.startswith('model = "gpt-5.5"\n\n[features]\nhooks = true\n')
    real = os.path.realpath(home / "hooks.json")
    # the Stop group of ours is the second one (index 1), handler 0
    stop_hash = codex.trusted_hash("Stop", None, got["hooks"]["Stop"][1]["hooks"][0])
    assert f'[hooks.state."{real}:stop:1:0"]\nenabled = true\ntrusted_hash = "{stop_hash}"' in text
    assert f"{real}:pre_tool_use:0:0" in text and ":stop:0:0" not in text    # not the other hook's
    import tomllib
    tomllib.loads(text)                                                       # still valid TOML
    run_rewind("hooks", "install", "codex", "--project", root, check=0)
    assert config.read_text() == text                                         # idempotent
    run_rewind("hooks", "uninstall", "codex", "--project", root, check=0)
    assert (home / "hooks.json").read_bytes() == original
    assert config.read_bytes() == b'model = "gpt-5.5"\n\n[features]\nhooks = true\n'


def test_codex_install_into_a_fresh_home_and_out_again_leaves_nothing(tmp_path, monkeypatch):
    home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(home))
    root = tmp_path / "proj"
    root.mkdir()
    run_rewind("hooks", "install", "codex", "--project", root, check=0)
    assert (home / "hooks.json").exists() and "[hooks.state." in (home / "config.toml").read_text()
    run_rewind("hooks", "uninstall", "codex", "--project", root, check=0)
    assert not (home / "config.toml").exists()


def test_cursor_install_uses_its_flat_format_and_uninstall_is_byte_identical(tmp_path):
    original = b'{"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}}\n'
    got = _roundtrip(tmp_path, "cursor", ".cursor/hooks.json", original, "project")
    assert got["version"] == 1
    assert got["hooks"]["afterFileEdit"][0] == {"command": "./format.sh"}
    assert got["hooks"]["afterFileEdit"][1]["command"].endswith("hook.py cursor")
    assert set(got["hooks"]) >= {"beforeSubmitPrompt", "beforeShellExecution", "afterShellExecution", "stop"}


def test_generic_has_nothing_to_install(tmp_path):
    proc = run_rewind("hooks", "install", "generic", "--project", tmp_path)
    assert proc.returncode == 2 and "rewind hook generic" in proc.stderr


# -- whole sessions from documented payloads -------------------------------------------------------

def test_a_cursor_session_from_its_documented_payloads(tmp_path):
    root = tmp_path / "proj"
    write(root, "app.py", "print('v1')\n")
    base = {"conversation_id": "conv-1", "generation_id": "gen-1", "workspace_roots": [str(root)],
            "cursor_version": "1.7.0"}

    def send(event, **fields):
        proc = hook("cursor", {**base, "hook_event_name": event, **fields}, root)
        assert proc.returncode == 0 and proc.stdout == b""

    send("beforeSubmitPrompt", prompt="Fix the greeting and build")
    (root / "app.py").write_text("print('v2')\n")                       # the agent's edit
    send("afterFileEdit", file_path=str(root / "app.py"),
         edits=[{"old_string": "v1", "new_string": "v2"}])
    send("beforeShellExecution", command="make build", cwd=str(root))
    write(root, "build.log", "built")                                   # the command's output
    send("afterShellExecution", command="make build", cwd=str(root), output="ok", duration=12)
    write(root, "mine.txt", "the person's own edit")
    send("stop", status="completed")
    send("beforeSubmitPrompt", prompt="Next", generation_id="gen-2")
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["prompt"] for c in cps] == ["Next", "Fix the greeting and build"]
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert shown["app.py"]["source"] == "tool"
    assert shown["build.log"]["source"] == "bash" and shown["build.log"]["command"] == "make build"
    assert shown["mine.txt"]["source"] == "external"
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "app.py").read_text() == "print('v1')\n" and not (root / "build.log").exists()


def test_a_generic_agent_session(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")

    def send(**payload):
        proc = hook("generic", {"session": "g-1", "cwd": str(root), **payload}, root)
        assert proc.returncode == 0 and proc.stdout == b""

    send(event="session-start")
    send(event="prompt", prompt="edit a, then test")
    send(event="tool-start", tool="edit", id="e1", paths=["a.txt"])
    (root / "a.txt").write_text("two\n")
    send(event="tool-end", tool="edit", id="e1", paths=["a.txt"])
    send(event="tool-start", tool="shell", id="s1", command="pytest > out.txt")
    write(root, "out.txt", "passed")
    send(event="tool-end", tool="shell", id="s1", command="pytest > out.txt")
    send(event="prompt", prompt="again")
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert shown["a.txt"]["source"] == "tool" and shown["out.txt"]["source"] == "bash"
    assert json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["agent"] == "generic"
