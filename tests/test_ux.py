"""The experience around the core: git export, completions, doctor, the pager."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REWIND, git, run_rewind, write

REPO = Path(__file__).resolve().parents[1]


# -- export --------------------------------------------------------------------------------

def test_export_writes_the_checkpoint_as_a_commit_and_touches_nothing_else(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "committed")
    write(root, "src/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    os.symlink("a.txt", root / "link")
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    write(root, "a.txt", "changed, not committed")
    write(root, "new dir/ünï code.txt", "new")
    git("add", "a.txt", cwd=root)                           # something staged in the index
    run_rewind("save", "-m", "before the agent", cwd=root, check=0)
    head = git("rev-parse", "HEAD", cwd=root)
    index = (root / ".git/index").read_bytes()
    status = git("status", "--porcelain", cwd=root)
    got = json.loads(run_rewind("export", "1", "--branch", "from-rewind", "--json", cwd=root, check=0).stdout)
    assert git("rev-parse", "HEAD", cwd=root) == head and (root / ".git/index").read_bytes() == index
    assert git("status", "--porcelain", cwd=root) == status
    assert git("rev-parse", "refs/rewind/1", cwd=root).strip() == got["commit"]
    assert git("rev-parse", "from-rewind", cwd=root).strip() == got["commit"]
    assert git("rev-parse", f"{got['commit']}^", cwd=root) == head        # HEAD is its parent
    # the commit's tree is the checkpoint: same paths, bytes, exec bits, link
    listing = {}
    for line in git("ls-tree", "-r", "-z", got["commit"], cwd=root).split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            mode, _, sha = meta.split()
            listing[path] = (mode, subprocess.run(["git", "cat-file", "blob", sha], cwd=root,
                                                  capture_output=True).stdout)
    assert listing == {"a.txt": ("100644", b"changed, not committed"),
                       "src/run.sh": ("100755", b"#!/bin/sh\necho hi\n"),
                       "link": ("120000", b"a.txt"),
                       "new dir/ünï code.txt": ("100644", b"new")}
    again = run_rewind("export", "1", "--branch", "from-rewind", cwd=root, check=1)
    assert "exists already" in again.stderr and git("rev-parse", "from-rewind", cwd=root).strip() == got["commit"]


def test_export_outside_a_git_repository_says_so(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    proc = run_rewind("export", "1", cwd=root, check=1)
    assert "not a git repository" in proc.stderr and proc.stderr.count("\n") == 1


# -- completions -----------------------------------------------------------------------------

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_committed_completion_scripts_are_fresh(tmp_path, shell):
    got = subprocess.run([*REWIND], env={**os.environ, "_REWIND_COMPLETE": f"source_{shell}"}, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60).stdout
    committed = (REPO / "completions" / f"rewind.{shell}").read_text()
    assert got == committed, f"completions/rewind.{shell} is stale: regenerate it (README, Completions)"


def test_checkpoint_ids_complete_with_their_prompt(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", "-m", "first save", cwd=root, check=0)
    run_rewind("save", "-m", "second save", cwd=root, check=0)
    env = {**os.environ, "_REWIND_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args",
           "_TYPER_COMPLETE_ARGS": "rewind to "}
    out = subprocess.run(REWIND, env=env, cwd=root, capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines() == ["2\tmanual: second save", "1\tmanual: first save", "last\tthe newest checkpoint"]
    env["_TYPER_COMPLETE_ARGS"] = "rewind diff 1 "
    assert "2\tmanual: second save" in subprocess.run(REWIND, env=env, cwd=root, capture_output=True,
                                                      text=True, timeout=60).stdout


# -- doctor ----------------------------------------------------------------------------------

def test_doctor_on_a_healthy_and_a_broken_setup(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a" * 100)
    run_rewind("hooks", "install", "claude", "--project", root, check=0)
    run_rewind("save", cwd=root, check=0)
    healthy = json.loads(run_rewind("doctor", "--json", cwd=root, check=0).stdout)
    assert healthy["ok"] and all(f["level"] == "ok" for f in healthy["findings"]), healthy
    # break it three ways: the hook's command gone, the watcher killed, an object damaged
    settings = root / ".claude" / "settings.local.json"
    settings.write_text(settings.read_text().replace(REWIND[0], "/nonexistent/rewind"))
    watcher = subprocess.Popen([*REWIND, "watch"], cwd=root, stdout=subprocess.PIPE, text=True)
    assert "watching" in watcher.stdout.readline()
    watcher.kill()
    watcher.wait()
    obj = next(p for p in (Path(os.environ["REWIND_HOME"]) / "objects").rglob("*") if p.is_file())
    obj.write_bytes(obj.read_bytes()[:-1] + b"!")
    proc = run_rewind("doctor", cwd=root, check=1)
    text = proc.stdout
    assert "FAIL  claude hooks (local) run a command that does not exist" in text
    assert "fix: rewind hooks install claude --scope local" in text
    assert "died without stopping" in text
    assert "FAIL  store:" in text and "rewind verify" in text


# -- the pager ---------------------------------------------------------------------------------

def _on_a_terminal(args, cwd, env):
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen([*REWIND, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("cmd", [["show", "1"], ["diff", "1"]])
def test_long_output_goes_through_the_pager_on_a_terminal_unless_no_pager(tmp_path, cmd):
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "two\n")
    paged = tmp_path / "paged.txt"
    env = {**os.environ, "PAGER": f"cat > {paged}"}
    code, screen = _on_a_terminal(cmd, root, env)
    assert code == 0 and paged.exists() and "a.txt" in paged.read_text() and "a.txt" not in screen
    paged.unlink()
    code, screen = _on_a_terminal([*cmd, "--no-pager"], root, env)
    assert code == 0 and not paged.exists() and "a.txt" in screen
    assert "a.txt" in run_rewind(*cmd, cwd=root, env=env, check=0).stdout and not paged.exists()   # piped
