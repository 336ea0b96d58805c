"""Qwen Code, Copilot CLI, OpenCode and Cline: their captured payloads (tests/agents/AGENT/
payloads, recorded from the real CLIs, shared/agents) parse into the right events, hostile
ones never break the agent, install and uninstall give back what was there, and a whole
session of captured payloads, sent through the real `rewind hook`, is recorded and rewound."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REWIND, harness, run_rewind, write
from rewind.hooks import copilot, qwen


def real(agent: str, name: str, project: str = "/p") -> tuple[dict, dict]:
    """A captured call: (payload, the environment the agent gave its hook), paths put back."""
    raw = (harness(agent) / "payloads" / name).read_text().replace("<PROJECT_DIR>", project)
    rec = json.loads(raw)
    return rec["payload"], rec.get("env") or {}


def hook(agent: str, payload, cwd, *args, env=None) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    return subprocess.run([*REWIND, "hook", agent, *args], input=data if isinstance(data, bytes) else data.encode(),
                          capture_output=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=60)


# -- parsing ---------------------------------------------------------------------------------------

def test_qwen_payloads_map_onto_the_recorder_events():
    p, env = real("qwen", "UserPromptSubmit.json")
    ev = qwen.parse(p, env)
    assert (ev.kind, ev.prompt, ev.project_dir, ev.agent) == ("prompt", "PROMPT-ONE create files", "/p", "qwen")
    assert ev.prompt_id and ev.transcript_path.endswith(".jsonl")
    assert qwen.parse(*real("qwen", "UserPromptSubmit.continuation.json")) is None    # the turn goes on
    ev = qwen.parse(*real("qwen", "PreToolUse.write_file.json"))
    assert (ev.kind, ev.tool_kind, ev.tool, ev.targets) == ("pre_tool", "edit", "write_file", ["/p/a.txt"])
    assert ev.tool_use_id
    ev = qwen.parse(*real("qwen", "PostToolUse.edit.json"))
    assert (ev.kind, ev.tool_kind, ev.tool, ev.failed) == ("post_tool", "edit", "edit", False)
    ev = qwen.parse(*real("qwen", "PreToolUse.run_shell_command.json"))
    assert ev.tool_kind == "shell" and ev.command.startswith("echo x > made_by_shell.txt")
    ev = qwen.parse(*real("qwen", "PostToolUseFailure.run_shell_command.json"))
    assert (ev.kind, ev.failed, ev.command) == ("post_tool", True, "echo y > fail.txt; exit 3")
    assert qwen.parse(*real("qwen", "PreToolUse.read_file.json")) is None
    assert qwen.parse(*real("qwen", "PostToolBatch.json")) is None
    assert qwen.parse(*real("qwen", "Stop.json")).kind == "stop"
    assert qwen.parse(*real("qwen", "SessionStart.json")).source == "startup"


def test_copilot_payloads_map_onto_the_recorder_events():
    def parsed(name, event):
        p, env = real("copilot", name)
        return copilot.parse(dict(p, hook_event_name=event), env)

    ev = parsed("userPromptSubmitted.json", "userPromptSubmitted")
    assert (ev.kind, ev.prompt, ev.cwd, ev.project_dir) == ("prompt", "PROMPT-ONE create files", "/p", None)
    assert parsed("userPromptTransformed.json", "userPromptTransformed") is None
    ev = parsed("preToolUse.create.json", "preToolUse")
    assert (ev.kind, ev.tool_kind, ev.tool, ev.targets) == ("pre_tool", "edit", "create", ["/p/a.txt"])
    ev = parsed("postToolUse.edit.json", "postToolUse")
    assert (ev.kind, ev.tool_kind, ev.failed) == ("post_tool", "edit", False)
    ev = parsed("preToolUse.bash.json", "preToolUse")
    assert ev.tool_kind == "shell" and ev.command.startswith("echo x > made_by_bash.txt")
    ev = parsed("postToolUseFailure.edit.json", "postToolUseFailure")
    assert ev.failed and ev.targets == ["/p/a.txt"]
    assert parsed("preToolUse.view.json", "preToolUse") is None
    assert parsed("preToolUse.no_such_tool.json", "preToolUse") is None
    assert parsed("permissionRequest.bash.json", "permissionRequest") is None
    ev = parsed("agentStop.json", "agentStop")
    assert ev.kind == "stop" and ev.transcript_path.endswith("events.jsonl")
    assert parsed("sessionStart.resume.json", "sessionStart").source == "resume"
    assert parsed("sessionEnd.json", "sessionEnd").source == "complete"
    # without the event its command names, nothing
    assert copilot.parse(real("copilot", "preToolUse.bash.json")[0], {}) is None


# -- never breaking the agent ------------------------------------------------------------------------

BAD = [b"", b"not json", b"[]", b"null", b'{"hook_event_name": 5}',
       b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "write_file", "tool_input": "x"}',
       b'{"hook_event_name": "UserPromptSubmit", "session_id": ["s"], "prompt": "x"}',
       b'{"sessionId": "s", "toolName": "create", "toolArgs": {"path": 7}}',
       b'{"sessionId": "s", "toolName": "bash", "toolArgs": "rm -rf /"}',
       b'{"hook_event_name": "tool.execute.before", "input": {"tool": "write", "sessionID": 5}, "output": []}',
       b'{"hook_event_name": "chat.message", "input": {"sessionID": "s"}, "output": {"parts": "x"}}',
       json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s\u0000x", "cwd": "/nonexistent",
                   "sessionId": "s\u0000x", "prompt": "\udcff" * 3}).encode()]


@pytest.mark.parametrize("agent,args", [("qwen", ()), ("opencode", ()), ("cline", ("PreToolUse",)),
                                        ("copilot", ("preToolUse",)),
                                        ("copilot", ("userPromptSubmitted",)), ("copilot", ("no such event",))])
@pytest.mark.parametrize("payload", BAD, ids=range(len(BAD)))
def test_bad_payloads_exit_0_and_print_nothing(tmp_path, agent, args, payload):
    proc = hook(agent, payload, tmp_path, *args)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""


# -- installing ----------------------------------------------------------------------------------------

def test_qwen_install_keeps_the_persons_hooks_and_uninstall_is_byte_identical(tmp_path):
    root = tmp_path / "proj"
    path = root / ".qwen" / "settings.json"
    original = b'{\n  "model": {"name": "qwen3"},\n  "hooks": {"PreToolUse": [{"matcher": "edit", "hooks": [{"type": "command", "command": "lint.sh", "timeout": 5000}]}]}\n}\n'
    write(root, ".qwen/settings.json", original.decode())
    run_rewind("hooks", "install", "qwen", "--project", root, check=0)
    run_rewind("hooks", "install", "qwen", "--project", root, check=0)
    got = json.loads(path.read_text())
    assert got["model"] == {"name": "qwen3"}
    assert got["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "lint.sh"
    assert got["hooks"]["PreToolUse"][1]["matcher"] == qwen.TOOL_MATCHER
    assert got["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith("hook.py qwen")
    assert got["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3000          # milliseconds
    st = json.loads(run_rewind("hooks", "status", "qwen", "--project", root, "--json", check=0).stdout)
    assert st[0]["installed"] and st[0]["command_resolves"] and "PostToolUseFailure" in st[0]["events"]
    run_rewind("hooks", "uninstall", "qwen", "--project", root, check=0)
    assert path.read_bytes() == original


def test_qwen_settings_rewind_creates_are_qwens_current_version_and_go_at_uninstall(tmp_path):
    """Qwen Code writes `$version` into a settings file without one at its next start (a
    change in the tree nobody asked for): a file rewind creates has it already."""
    root = tmp_path / "proj"
    root.mkdir()
    run_rewind("hooks", "install", "qwen", "--project", root, check=0)
    path = root / ".qwen" / "settings.json"
    written = path.read_bytes()
    assert list(json.loads(written)) == ["$version", "hooks"] and json.loads(written)["$version"] == 4
    run_rewind("hooks", "install", "qwen", "--project", root, check=0)
    assert path.read_bytes() == written
    run_rewind("hooks", "uninstall", "qwen", "--project", root, check=0)
    assert not path.exists()


def test_copilot_install_writes_its_own_hooks_file_and_uninstall_takes_it_away(tmp_path):
    root = tmp_path / "proj"
    write(root, ".github/hooks/lint.json", '{"version": 1, "hooks": {"preToolUse": []}}')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    run_rewind("hooks", "install", "copilot", "--project", root, check=0)
    got = json.loads((root / ".github/hooks/rewind.json").read_text())
    assert got["version"] == 1
    entry = got["hooks"]["preToolUse"][0]
    assert entry["type"] == "command" and entry["bash"].endswith("hook.py copilot preToolUse")
    assert entry["timeoutSec"] == 120 and "command" not in entry
    assert set(got["hooks"]) == {e for e, _, _ in copilot.HOOK_EVENTS}
    written = (root / ".github/hooks/rewind.json").read_bytes()
    run_rewind("hooks", "install", "copilot", "--project", root, check=0)
    assert (root / ".github/hooks/rewind.json").read_bytes() == written      # not rewritten
    st = json.loads(run_rewind("hooks", "status", "copilot", "--project", root, "--json", check=0).stdout)
    assert st[0]["installed"] and st[0]["command_resolves"]
    # the file holds this machine's paths: kept out of git
    assert "/.github/hooks/rewind.json" in (root / ".git/info/exclude").read_text()
    run_rewind("hooks", "uninstall", "copilot", "--project", root, check=0)
    assert not (root / ".github/hooks/rewind.json").exists()
    assert (root / ".github/hooks/lint.json").read_text() == '{"version": 1, "hooks": {"preToolUse": []}}'
    assert "rewind.json" not in (root / ".git/info/exclude").read_text()


# -- whole sessions of captured payloads ---------------------------------------------------------------------

def test_a_qwen_session_of_captured_payloads(tmp_path):
    """The first two prompts of the captured Qwen Code session, through the real `rewind
    hook qwen`, with what each tool did done by hand between its hooks."""
    root = tmp_path / "proj"
    write(root, "README.md", "# p\n")

    def send(name):
        p, env = real("qwen", name, str(root))
        proc = hook("qwen", p, root, env={k: v.replace("<HOME>", str(tmp_path)) for k, v in env.items()})
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc

    send("SessionStart.json")
    send("UserPromptSubmit.json")
    send("PreToolUse.write_file.json")
    write(root, "a.txt", "alpha\n")
    send("PostToolUse.write_file.json")
    send("UserPromptSubmit.continuation.json")
    send("Stop.json")
    write(root, "mine.txt", "the person's\n")
    p, env = real("qwen", "UserPromptSubmit.json", str(root))
    hook("qwen", dict(p, prompt="PROMPT-TWO edit and shell"), root, env=env)
    send("PreToolUse.run_shell_command.json")
    write(root, "made_by_shell.txt", "x\n")
    send("PostToolUse.run_shell_command.json")
    send("UserPromptSubmit.continuation.json")
    send("Stop.json")
    p, env = real("qwen", "UserPromptSubmit.json", str(root))
    hook("qwen", dict(p, prompt="PROMPT-THREE"), root, env=env)
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["prompt"] for c in cps] == ["PROMPT-THREE", "PROMPT-TWO edit and shell", "PROMPT-ONE create files"]
    assert {c["agent"] for c in cps} == {"qwen"}
    one = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    two = {c["path"]: c for c in json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)["changes"]}
    assert (one["a.txt"]["source"], one["a.txt"]["tool"]) == ("tool", "write_file")
    assert one["mine.txt"]["source"] == "external"
    assert (two["made_by_shell.txt"]["source"], two["made_by_shell.txt"]["command"]) == \
        ("bash", "echo x > made_by_shell.txt && rm -f src/app.py")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert sorted(p.name for p in root.iterdir()) == ["README.md"]


def test_a_copilot_session_of_captured_payloads_with_two_edits_at_once(tmp_path):
    """Copilot CLI runs two creates at once (both preToolUse first) and names no tool call:
    each Post closes its own target's window."""
    root = tmp_path / "proj"
    write(root, "README.md", "# p\n")
    seq = [json.loads(line.replace("<PROJECT_DIR>", str(root)))
           for line in (harness("copilot") / "payloads" / "sequence.jsonl").read_text().splitlines()]

    def send(rec):
        proc = hook("copilot", rec["payload"], root, rec["event"], env=rec.get("env") and {})
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc

    first = seq[:seq.index(next(r for r in seq if r["event"] == "sessionEnd")) + 1]
    for rec in first:
        if rec["event"] == "postToolUse" and rec["payload"]["toolName"] == "create":
            args = rec["payload"]["toolArgs"]
            write(Path(args["path"]).parent, Path(args["path"]).name, args["file_text"])
        send(rec)
    write(root, "mine.txt", "the person's\n")
    p = dict(seq[1]["payload"], prompt="next")
    send({"event": "userPromptSubmitted", "payload": p})
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [(c["prompt"], c["agent"]) for c in cps] == [("next", "copilot"), ("PROMPT-ONE create files", "copilot")]
    one = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert {p: (c["source"], c["tool"]) for p, c in one.items()} == \
        {"a.txt": ("tool", "create"), "src/app.py": ("tool", "create"), "src": ("tool", "create"),
         "mine.txt": ("external", None)} or \
        {p: (c["source"], c["tool"]) for p, c in one.items() if p != "src"} == \
        {"a.txt": ("tool", "create"), "src/app.py": ("tool", "create"), "mine.txt": ("external", None)}
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert sorted(p.name for p in root.iterdir()) == ["README.md"]


# -- OpenCode: its plugin ----------------------------------------------------------------------------------

def opencode_call(name: str, project: str = "/p") -> dict:
    """A captured OpenCode hook call as rewind's plugin hands it on."""
    rec = json.loads((harness("opencode") / "payloads" / name).read_text().replace("<PROJECT_DIR>", project))
    hook_name = rec["hook"] if rec["hook"] != "event" else rec["input"]["type"]
    inp, out = (rec["input"], rec["output"]) if rec["hook"] != "event" else ({}, rec["output"])
    return {"hook_event_name": hook_name, "directory": project, "input": inp, "output": out}


def test_opencode_payloads_map_onto_the_recorder_events():
    from rewind.hooks import opencode
    ev = opencode.parse(opencode_call("chat.message.x.json"), {})
    assert (ev.kind, ev.prompt, ev.project_dir) == ("prompt", "PROMPT-ONE create files", "/p")
    assert ev.session_id.startswith("ses_") and ev.prompt_id.startswith("msg_")
    ev = opencode.parse(opencode_call("tool.execute.before.write.json"), {})
    assert (ev.kind, ev.tool_kind, ev.tool, ev.targets, ev.tool_use_id) == \
        ("pre_tool", "edit", "write", ["/p/a.txt"], "call_mock_p1_t1_0")
    ev = opencode.parse(opencode_call("tool.execute.after.edit.json"), {})
    assert (ev.kind, ev.tool_kind, ev.targets) == ("post_tool", "edit", ["/p/a.txt"])
    ev = opencode.parse(opencode_call("tool.execute.before.bash.json"), {})
    assert ev.tool_kind == "shell" and ev.command.startswith("echo x > made_by_bash.txt")
    assert opencode.parse(opencode_call("tool.execute.before.read.json"), {}) is None
    assert opencode.parse(opencode_call("tool.execute.before.invalid.json"), {}) is None
    assert opencode.parse(opencode_call("event.session.idle.json"), {}).kind == "stop"
    assert opencode.parse(opencode_call("event.session.created.json"), {}).kind == "session_start"
    assert opencode.parse(opencode_call("event.file.edited.json"), {}) is None
    failed = opencode.parse({"hook_event_name": "tool.error", "directory": "/p",
                             "input": {"tool": "bash", "sessionID": "ses_1", "callID": "c1"}, "output": {}}, {})
    assert (failed.kind, failed.failed, failed.tool_use_id) == ("post_tool", True, "c1")


NODE = shutil.which("node")


def _plugin(tmp_path, command) -> Path:
    from rewind.hooks import opencode
    path = tmp_path / "rewind.mjs"
    path.write_bytes(opencode.plugin_source(command))
    return path


@pytest.mark.skipif(NODE is None, reason="node not installed")
def test_the_opencode_plugin_hands_each_event_to_the_hook_and_never_throws(tmp_path):
    """The plugin, run by node as OpenCode would: every event it records reaches the hook
    command with its objects; a hook that is missing, slow to die or fails costs the agent
    nothing (no throw, the call returns)."""
    seen = tmp_path / "seen.jsonl"
    recorder = tmp_path / "rec.sh"
    recorder.write_text(f"#!/bin/sh\ncat >> {seen}\necho >> {seen}\necho noise; exit 3\n")
    recorder.chmod(0o755)
    (tmp_path / "m").mkdir()
    script = tmp_path / "drive.mjs"
    script.write_text(f"""
import {{ Rewind }} from {json.dumps(str(_plugin(tmp_path, [str(recorder)])))};
import {{ Rewind as Missing }} from {json.dumps(str(_plugin(tmp_path / "m", ["/nonexistent/python", "-S"])))};
for (const make of [Rewind, Missing]) {{
  const h = await make({{ directory: {json.dumps(str(tmp_path))} }});
  await h["chat.message"]({{ sessionID: "ses_1" }}, {{ message: {{ role: "user", sessionID: "ses_1" }},
                          parts: [{{ type: "text", text: "hi" }}] }});
  await h["tool.execute.before"]({{ tool: "write", sessionID: "ses_1", callID: "c1" }}, {{ args: {{ filePath: "x" }} }});
  await h["tool.execute.before"]({{ tool: "read", sessionID: "ses_1", callID: "c2" }}, {{ args: {{}} }});
  await h["tool.execute.after"]({{ tool: "write", sessionID: "ses_1", callID: "c1", args: {{ filePath: "x" }} }}, null);
  await h.event({{ event: {{ type: "session.idle", properties: {{ sessionID: "ses_1" }} }} }});
  await h.event({{ event: {{ type: "message.part.updated", properties: {{ part: {{ type: "tool", tool: "bash",
                 sessionID: "ses_1", callID: "c3", state: {{ status: "error" }} }} }} }} }});
  await h.event({{ event: {{ type: "file.edited", properties: {{}} }} }});
  await h.event({{}});
  await h["tool.execute.before"](undefined, undefined);
}}
console.log("done");
""")
    r = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "done\n", "")
    calls = [json.loads(line) for line in seen.read_text().splitlines() if line.strip()]
    assert [c["hook_event_name"] for c in calls] == ["chat.message", "tool.execute.before", "tool.execute.after",
                                                    "session.idle", "tool.error"]
    assert calls[1]["input"]["callID"] == "c1" and calls[1]["output"]["args"] == {"filePath": "x"}
    assert all(c["directory"] == str(tmp_path) for c in calls)


def test_the_plugin_marks_agree():
    from rewind.hooks import cline, install, opencode
    assert install.PLUGIN_MARK == opencode.MARK
    assert install.CLINE_MARK == cline.MARK and install.CLINE_EVENTS == cline.EVENTS
    assert cline.MARK.encode() in cline.script("x", "TaskStart", False)[:200]
    assert opencode.plugin_source(["x"]).startswith(opencode.MARK.encode())


def test_the_event_named_by_the_command_is_joined_alike_by_client_and_entry(tmp_path):
    from rewind.hooks import client
    assert client.called(["copilot", "preToolUse"]) == "copilot:preToolUse"
    assert client.called(["copilot", "pre tool"]) == client.called(["copilot", ""]) == "copilot"
    write(tmp_path, "a.txt", "a\n")
    # standalone (no watcher): the entry joins it itself, and the prompt is recorded
    p = {"sessionId": "s1", "cwd": str(tmp_path), "prompt": "named by the command"}
    assert hook("copilot", p, tmp_path, "userPromptSubmitted").returncode == 0
    assert hook("copilot", p, tmp_path).returncode == 0                  # no event: nothing
    cps = json.loads(run_rewind("list", "--json", cwd=tmp_path, check=0).stdout)
    assert [c["prompt"] for c in cps] == ["named by the command"]


def test_opencode_install_writes_rewinds_plugin_and_uninstall_takes_it_away(tmp_path):
    root = tmp_path / "proj"
    write(root, ".opencode/plugins/theirs.js", "export const X = async () => ({});\n")
    run_rewind("hooks", "install", "opencode", "--project", root, check=0)
    plugin = root / ".opencode/plugins/rewind.js"
    source = plugin.read_text()
    assert source.startswith("// rewind's OpenCode plugin") and "hook.py\", \"opencode\"]" in source
    st = json.loads(run_rewind("hooks", "status", "opencode", "--project", root, "--json", check=0).stdout)
    assert st[0]["installed"] and st[0]["command_resolves"]
    run_rewind("hooks", "install", "opencode", "--project", root, check=0)
    assert plugin.read_text() == source
    run_rewind("hooks", "uninstall", "opencode", "--project", root, check=0)
    assert not plugin.exists() and (root / ".opencode/plugins/theirs.js").exists()
    # a file of that name that is not rewind's is left alone
    write(root, ".opencode/plugins/rewind.js", "// mine\n")
    proc = run_rewind("hooks", "install", "opencode", "--project", root)
    assert proc.returncode != 0 and "not rewind's plugin" in proc.stderr and "Traceback" not in proc.stderr
    assert plugin.read_text() == "// mine\n"


# -- Cline: hook executables, from its docs and one captured prompt ------------------------------------------

def test_cline_payloads_map_onto_the_recorder_events():
    from rewind.hooks import cline

    def parsed(name, event):
        p, env = real("cline", name)
        return cline.parse(dict(p, hook_event_name=event), env)

    ev = parsed("TaskStart.json", "TaskStart")
    assert (ev.kind, ev.cwd, ev.prompt_source) == ("prompt", "/p", "task-start") and ev.session_id
    ev = parsed("PreToolUse.editor.json", "PreToolUse")
    assert (ev.kind, ev.tool_kind, ev.tool, ev.targets, ev.tool_use_id) == \
        ("pre_tool", "edit", "editor", ["/p/a.txt"], "call_mock_p1_t1_0")
    ev = parsed("PostToolUse.run_commands.json", "PostToolUse")
    assert (ev.tool_kind, ev.command, ev.failed) == ("shell", "echo x > made_by_bash.txt && rm -f src/app.py", False)
    assert parsed("PreToolUse.read_files.json", "PreToolUse") is None
    assert parsed("TaskComplete.json", "TaskComplete").kind == "stop"
    # the documented shape (the extension's): parameters only
    ev = cline.parse({"hook_event_name": "PreToolUse", "taskId": "t", "workspaceRoots": ["/p"],
                      "preToolUse": {"toolName": "write_to_file", "parameters": {"path": "src/x.ts"}}}, {})
    assert ev.targets == ["src/x.ts"]
    ev = cline.parse({"hook_event_name": "UserPromptSubmit", "taskId": "t", "workspaceRoots": ["/p"],
                      "userPromptSubmit": {"prompt": "and the tests"}}, {})
    assert (ev.kind, ev.prompt) == ("prompt", "and the tests")


def test_cline_install_chains_the_persons_hook_and_uninstall_puts_it_back(tmp_path):
    root = tmp_path / "proj"
    hooks = root / ".clinerules" / "hooks"
    seen = tmp_path / "seen.json"
    write(hooks, "PreToolUse", f"#!/bin/sh\ncat > {seen}\necho '{{\"cancel\": true, \"errorMessage\": \"no\"}}'\n")
    (hooks / "PreToolUse").chmod(0o755)
    theirs = (hooks / "PreToolUse").read_bytes()
    run_rewind("hooks", "install", "cline", "--project", root, check=0)
    run_rewind("hooks", "install", "cline", "--project", root, check=0)
    from rewind.hooks import cline
    assert sorted(p.name for p in hooks.iterdir()) == sorted([*cline.EVENTS, "PreToolUse.rewind-chained"])
    st = json.loads(run_rewind("hooks", "status", "cline", "--project", root, "--json", check=0).stdout)
    assert st[0]["installed"] and st[0]["command_resolves"] and len(st[0]["events"]) == len(cline.EVENTS)
    payload, _ = real("cline", "PreToolUse.editor.json", str(root))
    r = subprocess.run([str(hooks / "PreToolUse")], input=json.dumps(payload), capture_output=True, text=True,
                       cwd=root, timeout=60)
    assert json.loads(r.stdout) == {"cancel": True, "errorMessage": "no"}      # the person's answer
    assert json.loads(seen.read_text()) == payload                            # with the same payload
    r = subprocess.run([str(hooks / "PostToolUse")], input="not json", capture_output=True, text=True,
                       cwd=root, timeout=60)
    assert (r.returncode, json.loads(r.stdout), r.stderr) == (0, {"cancel": False}, "")
    run_rewind("hooks", "uninstall", "cline", "--project", root, check=0)
    assert [p.name for p in hooks.iterdir()] == ["PreToolUse"] and (hooks / "PreToolUse").read_bytes() == theirs


def test_cline_hooks_stay_out_of_git_and_a_restore_keeps_them(tmp_path):
    """Each hook file rewind writes holds this machine's paths: `.git/info/exclude` names it
    while installed (the person's own, chained, stays as visible as it was), and a rewind to
    a checkpoint from before the install keeps them, as it keeps other agents' hook entries."""
    from rewind.hooks import cline
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    run_rewind("save", "-m", "before the hooks", cwd=root, check=0)
    out = run_rewind("hooks", "install", "cline", "--project", root, check=0).stdout
    assert "kept out of git" in out
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert all(f"/.clinerules/hooks/{event}\n" in exclude for event in cline.EVENTS)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    assert ".clinerules" not in status, status
    hooks = {e: (root / ".clinerules" / "hooks" / e).read_bytes() for e in cline.EVENTS}
    write(root, "a.txt", "two\n")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "one\n"
    assert {e: (root / ".clinerules" / "hooks" / e).read_bytes() for e in cline.EVENTS} == hooks
    assert all(os.access(root / ".clinerules" / "hooks" / e, os.X_OK) for e in cline.EVENTS)
    run_rewind("hooks", "uninstall", "cline", "--project", root, check=0)
    assert ".clinerules" not in (root / ".git" / "info" / "exclude").read_text()
