"""`rewind hooks install|uninstall|status claude`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

from helpers import run_rewind, state, wait_ready, write

OTHER = """{
    "permissions": {"allow": ["Bash(ls)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
    }
}
"""


def test_install_then_uninstall_leaves_the_file_byte_identical(tmp_path):
    root = tmp_path / "proj"
    settings = write(root, ".claude/settings.local.json", OTHER)
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    data = json.loads(settings.read_text())
    assert data["permissions"] == {"allow": ["Bash(ls)"]}
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "echo mine"
    ours = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    words = shlex.split(ours)
    assert os.path.isabs(words[0]) and words[1] == "-S" and words[2].endswith("/rewind/hook.py")
    assert words[3] == "claude"
    # and it runs: a prompt through the installed command is a checkpoint
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root),
                          "prompt": "through the installed command"})
    proc = subprocess.run(ours, shell=True, input=payload, capture_output=True, text=True, cwd=root,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)})
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert "through the installed command" in run_rewind("list", cwd=root, check=0).stdout
    # idempotent
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    again = json.loads(settings.read_text())
    assert again == data
    st = json.loads(run_rewind("hooks", "status", "claude", "--json", cwd=root, check=0).stdout)
    local = [s for s in st if s["scope"] == "local"][0]
    assert local["installed"] and local["command_resolves"] and "SessionEnd" in local["events"]
    run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert settings.read_text() == OTHER


def test_uninstall_after_other_edits_keeps_them(tmp_path):
    root = tmp_path / "proj"
    settings = write(root, ".claude/settings.json", OTHER)
    run_rewind("hooks", "install", "claude", "--scope", "project", cwd=root, check=0)
    data = json.loads(settings.read_text())
    data["model"] = "opus"
    settings.write_text(json.dumps(data))
    run_rewind("hooks", "uninstall", "claude", "--scope", "project", cwd=root, check=0)
    after = json.loads(settings.read_text())
    assert after == dict(json.loads(OTHER), model="opus")


def test_invalid_json_is_refused_and_left_alone(tmp_path):
    root = tmp_path / "proj"
    settings = write(root, ".claude/settings.local.json", "{ not json")
    r = run_rewind("hooks", "install", "claude", cwd=root)
    assert r.returncode == 1 and "not valid JSON" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert settings.read_text() == "{ not json"


def test_user_scope_goes_to_the_claude_config_dir(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    cfg = tmp_path / "claude-config"
    run_rewind("hooks", "install", "claude", "--scope", "user", cwd=root, check=0,
               env={"CLAUDE_CONFIG_DIR": str(cfg)})
    assert "UserPromptSubmit" in json.loads((cfg / "settings.json").read_text())["hooks"]


def test_the_installed_command_works_from_a_venv_install(tmp_path):
    """rewindx's installer resolved the venv's python to the base interpreter, where rewind is
    not installed. The command we write must run the venv's rewind."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    cmd = json.loads((root / ".claude/settings.local.json").read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": "hello"}
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/bin:/bin"   # rewind is not on the agent's PATH
    r = subprocess.run(cmd, shell=True, input=json.dumps(payload), env=env, cwd=root,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == ""
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert cps[0]["prompt"] == "hello"


def test_installing_again_leaves_no_backup_and_the_file_as_it_was(tmp_path):
    """An agent wrapper may install before every run: the second install finds only
    rewind's own entries, so there is nothing of the user's to back up (a backup of
    rewind's own file would sit in the project and be recorded as someone's change)."""
    root = tmp_path / "proj"
    root.mkdir()
    settings = root / ".claude" / "settings.local.json"
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    first, st = settings.read_bytes(), settings.stat()
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert settings.read_bytes() == first and settings.stat().st_mtime_ns == st.st_mtime_ns
    assert sorted(os.listdir(root / ".claude")) == ["settings.local.json"]
    run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert not settings.exists()
    # and a file of the user's is backed up once, by the first install only
    write(root, ".claude/settings.local.json", OTHER)
    for _ in range(2):
        run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert (root / ".claude/settings.local.json.rewind-backup").read_text() == OTHER
    run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert settings.read_text() == OTHER and sorted(os.listdir(root / ".claude")) == ["settings.local.json"]


def test_installing_for_a_project_starts_its_first_snapshot_in_the_background(tmp_path):
    """docs/design.md: the first snapshot starts at `rewind hooks install` (or SessionStart): a big
    tree's scan is under way before the agent starts. Not with the watcher off, not for
    hooks installed for every project (the user scope)."""
    off, user, on = tmp_path / "off", tmp_path / "user", tmp_path / "on"
    for root in (off, user, on):
        write(root, "src/a.py", "a = 1\n")
    said = run_rewind("hooks", "install", "claude", "--project", off, check=0).stdout    # REWIND_WATCH=0 here
    assert "background" not in said and state(off)[0] is None
    home = tmp_path / "home"                                                          # (the user scope's file)
    said = run_rewind("hooks", "install", "claude", "--scope", "user", "--project", user, check=0,
                      env={"REWIND_WATCH": "1", "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}).stdout
    assert "background" not in said and state(user)[0] is None
    said = run_rewind("hooks", "install", "claude", "--project", on, check=0, env={"REWIND_WATCH": "1"}).stdout
    assert f"the first snapshot of {on} is being taken in the background" in said, said
    row = wait_ready(on)
    assert row["pid"] and state(on)[1]["last_tree"]
    assert json.loads(run_rewind("list", "--json", cwd=on, check=0).stdout) == []   # a snapshot, not a checkpoint
    said = run_rewind("hooks", "install", "claude", "--project", on, check=0, env={"REWIND_WATCH": "1"}).stdout
    assert "background" not in said and state(on)[0]["pid"] == row["pid"]           # it runs already
    run_rewind("watch", "--stop", cwd=on, check=0)
    # a project with checkpoints: no "first snapshot" to take, the watcher just starts
    run_rewind("save", "-m", "one", cwd=on, check=0)
    run_rewind("hooks", "uninstall", "claude", "--project", on, check=0)
    said = run_rewind("hooks", "install", "claude", "--project", on, check=0, env={"REWIND_WATCH": "1"}).stdout
    assert "first snapshot" not in said and f"the watcher of {on} is starting in the background (1 checkpoint already" in said, said
    wait_ready(on)
    run_rewind("watch", "--stop", cwd=on, check=0)
