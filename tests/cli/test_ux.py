"""The experience around the core: git export, completions, doctor, the pager."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import REWIND, git, on_a_terminal, run_rewind, write

REPO = Path(__file__).resolve().parents[2]


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
    watching = json.loads(run_rewind("doctor", "--json", cwd=root, check=0, env={"REWIND_WATCH": "1"}).stdout)
    assert "the watcher is not running; an agent session starts it" in [f["what"] for f in watching["findings"]]
    # break it three ways: the hook's command gone, the watcher killed, an object damaged
    settings = root / ".claude" / "settings.local.json"
    settings.write_text(settings.read_text().replace("/rewind/hook.py", "/moved-away/rewind/hook.py"))
    watcher = subprocess.Popen([*REWIND, "watch"], cwd=root, stdout=subprocess.PIPE, text=True)
    assert "watching" in watcher.stdout.readline()
    watcher.kill()
    watcher.wait()
    from rewind.store.objects import Store, digest_of
    obj = Path(Store(os.environ["REWIND_HOME"]).path(digest_of(b"a" * 100)))     # a.txt, in the checkpoint
    obj.write_bytes(obj.read_bytes()[:-1] + b"!")
    proc = run_rewind("doctor", cwd=root, check=1)
    text = proc.stdout
    assert "FAIL  claude hooks (local) run a command that does not exist" in text
    assert "fix: rewind hooks install claude --scope local" in text
    assert "died without stopping" in text
    assert "FAIL  store:" in text and "rewind verify" in text
    run_rewind("hooks", "uninstall", "claude", "--project", root, check=0)
    text = run_rewind("doctor", cwd=root, check=1).stdout
    assert "warn  no agent's hooks are installed" in text and "fix: rewind hooks install claude" in text
    bare = tmp_path / "bare"
    write(bare, "a.txt", "a")
    run_rewind("save", cwd=bare, check=0)
    text = run_rewind("doctor", cwd=bare, check=0, env={"REWIND_WATCH": "1"}).stdout   # no hooks: no session starts it
    assert "the watcher is not running; once hooks are installed (below), an agent session starts it" in text
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    text = run_rewind("doctor", cwd=fresh, check=0).stdout
    assert "no checkpoints yet" in text and "rewind save" in text


# -- the pager ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", [["show", "1"], ["diff", "1"]])
def test_long_output_goes_through_the_pager_on_a_terminal_unless_no_pager(tmp_path, cmd):
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "two\n")
    paged = tmp_path / "paged.txt"
    env = {**os.environ, "PAGER": f"cat > {paged}"}
    code, screen = on_a_terminal(cmd, root, env)
    assert code == 0 and paged.exists() and "a.txt" in paged.read_text() and "a.txt" not in screen
    paged.unlink()
    code, screen = on_a_terminal([*cmd, "--no-pager"], root, env)
    assert code == 0 and not paged.exists() and "a.txt" in screen
    assert "a.txt" in run_rewind(*cmd, cwd=root, env=env, check=0).stdout and not paged.exists()   # piped


# -- the picker ----------------------------------------------------------------------------------

def test_the_picker_selects_a_checkpoint_restores_it_and_quits(tmp_path):
    import asyncio

    from helpers import fingerprint, project
    from rewind.cli.picker import run_picker
    root = tmp_path / "proj"
    write(root, "app.py", "v1\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    first = fingerprint(root)
    write(root, "app.py", "v2\n")
    write(root, "new.txt", "new")
    run_rewind("save", "-m", "second", cwd=root, check=0)
    write(root, "app.py", "v3, by hand\n")
    proj = project(root)
    app = run_picker(proj)

    async def drive():
        async with app.run_test(size=(160, 40)) as pilot:
            table = app.query_one("#checkpoints")
            assert table.row_count == 2 and app.current.number == 2      # the newest at hand
            await pilot.press("down")                                    # checkpoint 1
            assert app.current.number == 1
            assert {r.path for r in app.rows} == {"app.py", "new.txt"}   # what happened after it
            await pilot.press("r")
            await pilot.pause()
            plan = str(app.screen.query_one("#plan Static").render())
            assert "app.py" in plan and "someone other than the agent" in plan
            await pilot.press("c")                                       # Restore code
            await pilot.pause()
    asyncio.run(drive())
    proj.close()
    assert app.return_value and app.return_value.startswith("Rewound to checkpoint 1")
    assert fingerprint(root) == first
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "app.py").read_text() == "v3, by hand\n"


def test_the_picker_restores_one_file_and_quitting_changes_nothing(tmp_path):
    import asyncio

    from helpers import project
    from rewind.cli.picker import run_picker
    root = tmp_path / "proj"
    write(root, "a.txt", "a1")
    write(root, "b.txt", "b1")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "a2")
    write(root, "b.txt", "b2")
    proj = project(root)
    app = run_picker(proj)

    async def drive():
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("tab")                 # to the changes of checkpoint 1
            await pilot.press("down")                # b.txt
            await pilot.press("f")
            await pilot.pause()
            await pilot.press("c")
            await pilot.pause()
    asyncio.run(drive())
    assert (root / "a.txt").read_text() == "a2" and (root / "b.txt").read_text() == "b1"
    app2 = run_picker(proj)

    async def quit_only():
        async with app2.run_test(size=(160, 40)) as pilot:
            await pilot.press("down")
            await pilot.press("q")
    asyncio.run(quit_only())
    proj.close()
    assert (root / "a.txt").read_text() == "a2" and app2.return_value is None


def test_rewind_alone_without_a_terminal_lists(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", "-m", "hello", cwd=root, check=0)
    assert "hello" in run_rewind(cwd=root, check=0).stdout
    assert "needs a terminal" in run_rewind("pick", cwd=root, check=1).stderr
