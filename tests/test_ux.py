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
