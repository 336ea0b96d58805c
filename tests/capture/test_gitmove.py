"""Git state is shown as git state: a checkpoint's move of HEAD or branch is its `git` (the
branch and commit before and after, and who moved them), never a changed path of the tree,
counted apart from the tree's changes; the command that moved it is named; the last
prompt's move shows at once; read-only git is no effect; `export` builds on the
checkpoint's own commit.

Sessions are replayed through real `rewind hook claude` processes from the payloads Claude
Code sent (rewind/data), each tool's effect carried out for real in a real git repository,
with the watcher off and on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import git, replayed_session, run_rewind, write

WATCH = pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])


def _repo(root: Path) -> str:
    write(root, "src/a.py", "a = 1\n")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init", cwd=root)
    return git("rev-parse", "HEAD", cwd=root).strip()


def _show(root, n, watch) -> dict:
    return json.loads(run_rewind("show", str(n), "--json", cwd=root, env={"REWIND_WATCH": watch}, check=0).stdout)


GIT_ENV = "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t"


@WATCH
def test_the_agents_branch_switch_is_git_state_named_by_its_command_and_counted_apart(tmp_path, watch):
    root = tmp_path / "proj"
    head = _repo(root)
    replayed_session(root, tmp_path, watch, [
        [("bash", "git checkout -q -b feature"), ("write", str(root / "src/a.py"), "a = 2\n")],
        [("bash", "echo b > b.txt")],
    ])
    one = _show(root, 1, watch)
    assert all(not c["path"].startswith(".git") for c in one["changes"]), one["changes"]
    assert [c["path"] for c in one["changes"]] == ["src/a.py"]
    g = one["git"]
    assert g["before"] == {"head": head, "branch": "main"} and g["after"] == {"head": head, "branch": "feature"}
    assert (g["source"], g["command"]) == ("bash", "git checkout -q -b feature"), g
    assert g["text"] == f"branch main -> feature (HEAD {head[:8]})"
    listed = {c["id"]: c for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)}
    assert listed[1]["summary"]["changes"] == 1 and listed[1]["summary"]["sources"] == {"tool": 1}
    assert listed[1]["summary"]["flags"] == {"git": 1}
    assert listed[1]["git"]["after"]["branch"] == "feature"
    assert listed[2]["git"] is None and "git" not in listed[2]["summary"]["flags"]
    text = run_rewind("show", "1", cwd=root, check=0).stdout
    assert f"git moved: branch main -> feature (HEAD {head[:8]}), by bash: git checkout -q -b feature" in text
    assert ".git/HEAD" not in text and "external" not in text, text
    row = next(line for line in run_rewind("list", cwd=root, check=0).stdout.splitlines()
               if line.startswith("1 "))
    assert "1 tool" in row and "external" not in row and "[git moved]" in row, row
    # the plan names the move once, with its command, and no `git checkout` command line besides
    plan = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    section = [line for line in plan.split("It will not undo (outside the tree):\n")[1].splitlines()
               if line.startswith("  ")]
    assert section == [f"  checkpoint 1: git branch main -> feature (HEAD {head[:8]}), by `git checkout -q -b "
                       "feature`: HEAD and branches stay where they are"], plan
    effects = json.loads(run_rewind("to", "1", "--dry-run", "--json", cwd=root, check=0).stdout)["will_not_undo"]
    assert [(e["kind"], e["source"], e["command"]) for e in effects] == [("git", "bash", "git checkout -q -b feature")]
    assert "It will not undo" not in run_rewind("to", "2", "--dry-run", cwd=root, check=0).stdout


@WATCH
def test_a_move_made_outside_every_command_is_someone_elses(tmp_path, watch):
    root = tmp_path / "proj"
    head = _repo(root)
    replayed_session(root, tmp_path, watch, [[("bash", "echo one > one.txt")], [("bash", "echo two > two.txt")]],
             between=lambda i: git("checkout", "-q", "-b", "mine", cwd=root) if i == 1 else None)
    g = _show(root, 1, watch)["git"]
    assert (g["before"]["branch"], g["after"]["branch"], g["source"], g["command"]) == \
        ("main", "mine", "external", None), g
    assert g["after"]["head"] == head
    text = run_rewind("show", "1", cwd=root, check=0).stdout
    assert "git moved: branch main -> mine" in text and "by someone other than the agent" in text


@WATCH
def test_the_last_prompts_commit_shows_at_once_and_a_read_only_git_command_is_no_effect(tmp_path, watch):
    root = tmp_path / "proj"
    head = _repo(root)
    replayed_session(root, tmp_path, watch, [
        [("bash", "echo one > one.txt")],
        [("bash", "git branch --show-current > branch.txt"),
         ("bash", f"git add -A && {GIT_ENV} git commit -qm two")],
    ])
    new = git("rev-parse", "HEAD", cwd=root).strip()
    assert new != head
    two = _show(root, 2, watch)                       # the newest checkpoint: live, no later one needed
    g = two["git"]
    assert g is not None, two
    assert (g["before"], g["after"]) == ({"head": head, "branch": "main"}, {"head": new, "branch": "main"})
    assert g["source"] == "bash" and g["command"].endswith("git commit -qm two"), g
    assert g["text"] == f"HEAD {head[:8]} -> {new[:8]} (on main)"
    assert (root / "branch.txt").read_text() == "main\n"
    effects = json.loads(run_rewind("to", "2", "--dry-run", "--json", cwd=root, check=0).stdout)["will_not_undo"]
    assert [(e["kind"], e["checkpoint"]) for e in effects] == [("git", 2)], effects
    assert "branch --show-current" not in json.dumps(effects)
    out = run_rewind("to", "2", "--dry-run", cwd=root, check=0).stdout
    section = out.split("It will not undo (outside the tree):\n")[1].splitlines()
    assert section[0] == (f"  checkpoint 2: git HEAD {head[:8]} -> {new[:8]} (on main), by `git add -A && "
                          f"{GIT_ENV} git commit -qm two`: HEAD and branches stay where they are"), out
    assert not any(re.search(r"git (commit|branch)\b.*\(git:", line) for line in section), out
    # a later checkpoint stores it as it was shown
    replayed_session(root, tmp_path, watch, [[("bash", "echo three > three.txt")]])
    assert _show(root, 2, watch)["git"] == g


def test_export_builds_on_the_checkpoints_own_commit_not_todays_head(tmp_path):
    root = tmp_path / "proj"
    head = _repo(root)
    replayed_session(root, tmp_path, "0", [[("write", str(root / "src/a.py"), "a = 2\n")],
                                   [("bash", f"git add -A && {GIT_ENV} git commit -qm later")]])
    later = git("rev-parse", "HEAD", cwd=root).strip()
    assert later != head
    got = json.loads(run_rewind("export", "1", "--json", cwd=root, check=0).stdout)
    assert got["parent"] == head and got["parent_note"] is None
    assert git("rev-parse", f"{got['ref']}^", cwd=root).strip() == head
    assert git("diff", "--name-only", f"{got['ref']}^", got["ref"], cwd=root).split() == []   # a.py = 1 at 1
    got2 = json.loads(run_rewind("export", "2", "--json", cwd=root, check=0).stdout)
    assert got2["parent"] == head                                 # checkpoint 2 was taken on `init` too
    assert git("diff", "--name-only", f"{got2['ref']}^", got2["ref"], cwd=root).split() == ["src/a.py"]
