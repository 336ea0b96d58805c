"""`hooks install` keeps the settings file it writes (this machine's paths) out of git through
.git/info/exclude, `hooks uninstall` lets it back in, and the file stays recorded and
restored by rewind; `export` leaves it out of its commit (issue 32, item 16)."""

from __future__ import annotations

import json
import subprocess

from helpers import git, run_rewind, write

from rewind.capture.ignore import EXCLUDE_BEGIN, EXCLUDE_END

SHARED = '{"permissions": {"allow": ["Bash(make)"]}}\n'


def _repo(tmp_path):
    root = tmp_path / "proj"
    write(root, "README.md", "hello\n")
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    return root


def _untracked(root) -> list[str]:
    out = git("status", "--porcelain", "--untracked-files=all", cwd=root)
    return sorted(line[3:] for line in out.splitlines() if line.startswith("??"))


def _exclude(root) -> bytes:
    p = root / ".git" / "info" / "exclude"
    return p.read_bytes() if p.exists() else b""


def test_the_local_settings_file_is_kept_out_of_git_and_let_back_in_by_uninstall(tmp_path):
    root = _repo(tmp_path)
    before = _exclude(root)
    assert _untracked(root) == []
    r = run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert (root / ".claude" / "settings.local.json").exists()
    assert "kept out of git: .git/info/exclude now names .claude/settings.local.json" in r.stdout
    assert _untracked(root) == []                         # git does not see it
    data = _exclude(root)
    assert data.startswith(before.rstrip(b"\n")) and EXCLUDE_BEGIN in data and EXCLUDE_END in data
    assert b"\n/.claude/settings.local.json\n" in data
    # installing again adds nothing
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert _exclude(root) == data
    # another agent's project file goes into the same block
    run_rewind("hooks", "install", "gemini", cwd=root, check=0)
    assert _untracked(root) == []
    assert _exclude(root).count(EXCLUDE_BEGIN) == 1 and b"\n/.gemini/settings.json\n" in _exclude(root)
    run_rewind("hooks", "uninstall", "gemini", cwd=root, check=0)
    assert _exclude(root) == data
    r = run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert "no longer names it" in r.stdout
    assert _exclude(root).rstrip(b"\n") == before.rstrip(b"\n")
    assert EXCLUDE_BEGIN not in _exclude(root)


def test_a_shared_settings_file_the_person_made_stays_visible_to_git(tmp_path):
    """.claude/settings.json with the person's own settings (untracked, about to be committed,
    say): rewind does not hide it from `git status`."""
    root = _repo(tmp_path)
    write(root, ".claude/settings.json", SHARED)
    r = run_rewind("hooks", "install", "claude", "--scope", "project", cwd=root, check=0)
    assert "names .claude/settings.json.rewind-backup (rewind's copy of the original)" in r.stdout
    assert _untracked(root) == [".claude/settings.json"]       # install's backup is not the person's
    assert (root / ".claude/settings.json.rewind-backup").exists()
    run_rewind("hooks", "uninstall", "claude", "--scope", "project", cwd=root, check=0)
    assert (root / ".claude/settings.json").read_text() == SHARED
    assert EXCLUDE_BEGIN not in _exclude(root) and _untracked(root) == [".claude/settings.json"]


def test_a_tracked_settings_file_is_left_to_git(tmp_path):
    root = _repo(tmp_path)
    write(root, ".claude/settings.local.json", SHARED)
    git("add", "-f", ".claude/settings.local.json", cwd=root)
    git("commit", "-qm", "settings", cwd=root)
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert b"\n/.claude/settings.local.json\n" not in _exclude(root)     # git tracks it: git's call
    assert git("status", "--porcelain", cwd=root).split() == ["M", ".claude/settings.local.json"]


def test_the_excluded_file_is_still_recorded_and_restored(tmp_path):
    """Git ignores the block; rewind's own rules do not: the settings file is in every
    checkpoint and comes back with `to` (keeping rewind's entries, as a restore does)."""
    root = _repo(tmp_path)
    write(root, ".git/info/exclude", "# git's own\n*.log\n")
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    write(root, "debug.log", "ignored by the person's own exclude line\n")
    run_rewind("save", "-m", "one", cwd=root, check=0)
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    settings = root / ".claude" / "settings.local.json"
    original = settings.read_bytes()
    data = json.loads(original)
    data["permissions"] = {"allow": ["Bash(ls)"]}
    settings.write_text(json.dumps(data))
    write(root, "debug.log", "changed, and still ignored\n")
    diff = run_rewind("diff", str(cps[0]["id"]), "--name-only", cwd=root, check=0).stdout.split()
    assert diff == [".claude/settings.local.json"]              # recorded: its change is seen
    run_rewind("to", str(cps[0]["id"]), "--yes", cwd=root, check=0)
    assert settings.read_bytes() == original


def test_export_leaves_the_machines_settings_out_of_the_commit(tmp_path):
    root = _repo(tmp_path)
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    write(root, "src/app.py", "print('hi')\n")
    run_rewind("save", "-m", "work", cwd=root, check=0)
    n = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["id"]
    r = run_rewind("export", str(n), "--json", cwd=root, check=0)
    got = json.loads(r.stdout)
    assert got["kept_out"] == [".claude/settings.local.json"]
    files = git("ls-tree", "-r", "--name-only", got["ref"], cwd=root).split()
    assert files == ["README.md", "src/app.py"]
    r = run_rewind("export", str(n), cwd=root, check=0)
    assert "left out" in r.stderr and ".claude/settings.local.json" in r.stderr
    # a person who committed the file gets it exported as the checkpoint has it
    git("add", "-f", ".claude/settings.local.json", cwd=root)
    git("commit", "-qm", "settings", cwd=root)
    run_rewind("save", "-m", "after the commit", cwd=root, check=0)
    n = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["id"]
    got = json.loads(run_rewind("export", str(n), "--json", cwd=root, check=0).stdout)
    assert got["kept_out"] == []
    assert ".claude/settings.local.json" in git("ls-tree", "-r", "--name-only", got["ref"], cwd=root).split()


def test_uninstall_gives_back_the_persons_exclude_file_as_it_was(tmp_path):
    root = _repo(tmp_path)
    write(root, ".git/info/exclude", "*.tmp\n")
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert _exclude(root) == b"*.tmp\n"
    assert subprocess.run(["git", "check-ignore", "-q", "x.tmp"], cwd=root).returncode == 0
