"""A restore and another filesystem mounted inside the project ("never lose a byte", item 10):
the plan names the path on the other mount and leaves it (exit 1: the tree is not the
checkpoint's), unless `--cross-mounts` asks; a mount point is never removed. Needs root
(a real tmpfs mounted in tmp_path, always unmounted)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import fingerprint, run_rewind, write
from rewind.history.mounts import listed_mounts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def tmpfs_at(tmp_path):
    mounted = []

    def mount(path):
        os.makedirs(path, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        mounted.append(path)
    try:
        yield mount
    finally:
        for path in reversed(mounted):
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
def test_a_restore_does_not_cross_into_another_mount_unless_asked(tmp_path, tmpfs_at, watch):
    env = {"REWIND_WATCH": watch}
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    write(root, "vol/seed.txt", "on the project's own filesystem\n")
    run_rewind("save", "-m", "one", cwd=root, env=env, check=0)
    before = fingerprint(root)
    tmpfs_at(root / "vol")                          # hides vol/seed.txt; its own files follow
    write(root, "vol/theirs.txt", "the volume's own file\n")
    write(root, "a.txt", "changed\n")
    assert listed_mounts(str(root)) == {"vol"}

    dry = run_rewind("to", "1", "--dry-run", cwd=root, env=env, check=0).stdout
    assert "skip  vol: on another mounted filesystem" in dry and "--cross-mounts" in dry, dry
    assert "theirs.txt" not in dry.split("skip")[0], dry
    plan = json.loads(run_rewind("to", "1", "--dry-run", "--json", cwd=root, env=env, check=0).stdout)
    assert [u["path"] for u in plan["unmet"]] == ["vol"]

    r = run_rewind("to", "1", "--yes", cwd=root, env=env)
    assert r.returncode == 1 and "not restored: vol" in r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert (root / "a.txt").read_text() == "alpha\n"                 # the rest was done
    assert (root / "vol" / "theirs.txt").read_text() == "the volume's own file\n"

    r = run_rewind("to", "1", "--yes", "--cross-mounts", cwd=root, env=env, check=0)
    assert fingerprint(root) == before                               # into the tmpfs, asked
    assert os.path.ismount(root / "vol")                             # the mount point stays
    run_rewind("undo", "--yes", "--cross-mounts", cwd=root, env=env, check=0)   # undo has what it removed
    assert (root / "vol" / "theirs.txt").read_text() == "the volume's own file\n"


def test_a_mount_point_is_never_removed_even_when_crossing(tmp_path, tmpfs_at):
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    run_rewind("save", "-m", "no vol yet", cwd=root, check=0)
    tmpfs_at(root / "vol")
    write(root, "vol/theirs.txt", "x\n")
    dry = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    assert "vol" in dry and "on another mounted filesystem" in dry and "delete  vol/theirs.txt" not in dry, dry
    r = run_rewind("to", "1", "--yes", cwd=root)
    # the checkpoint does not hold vol: left alone, named, and nothing it holds differs
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (root / "vol" / "theirs.txt").exists()
    r = run_rewind("to", "1", "--yes", "--cross-mounts", cwd=root)
    assert not (root / "vol" / "theirs.txt").exists() and os.path.ismount(root / "vol"), (r.stdout, r.stderr)
