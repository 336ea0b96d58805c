"""What the commands that delete history take stays a day in the trash, whole; a gc after
that day empties it; `--now` skips it. And `rewind forget -- PATH` purges one path's content
from all history (issue "never lose a byte, round two", items 3 and 14)."""

from __future__ import annotations

import json
import os
import time

import pytest

from rewind.errors import CorruptObject
from rewind.store.objects import Store
from helpers import fingerprint, project, run_rewind, wait_ready, write

DAY = 86400


def objects_on_disk(home) -> set[str]:
    out = set()
    for d, _, files in os.walk(os.path.join(home, "objects")):
        out.update(os.path.join(d, f) for f in files)
    return out


def readable(home, oid: str) -> bool:
    try:
        Store(home).get(oid)
        return True
    except CorruptObject:
        return False


def three_checkpoints(root, env=None) -> dict[int, dict]:
    """Checkpoints 1-3 and the tree each holds."""
    states = {}
    for i in range(3):
        write(root, "a.txt", f"a {i} " + os.urandom(4).hex())
        write(root, f"dir/f{i}.bin", os.urandom(64))
        if i == 1:
            os.symlink("a.txt", root / "link")
        run_rewind("save", cwd=root, env=env, check=0)
        states[i + 1] = fingerprint(root)
    return states


def start_watcher(root, watch: str) -> dict:
    """The watcher as an agent's session starts it (watch "1"), or none."""
    if watch != "1":
        return {}
    import subprocess
    from helpers import REWIND
    payload = {"session_id": "s-1", "cwd": str(root), "hook_event_name": "SessionStart", "source": "startup"}
    subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), capture_output=True, text=True, cwd=root,
                   env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1"}, timeout=120, check=True)
    wait_ready(root, timeout=60)
    return {"REWIND_WATCH": "1"}


def at(seconds_from_now: float) -> dict:
    from datetime import datetime, timezone
    return {"REWIND_NOW": datetime.fromtimestamp(time.time() + seconds_from_now, timezone.utc).isoformat()}


@pytest.mark.parametrize("watch", ["0", "1"])
def test_forget_goes_to_the_trash_and_comes_back_whole(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "a.txt", "start")
    env = start_watcher(root, watch)
    states = three_checkpoints(root, env)
    home = os.environ["REWIND_HOME"]
    out = run_rewind("forget", "--yes", cwd=root, env=env, check=0).stdout
    assert "forgot 3 checkpoints" in out and "rewind trash --restore 1" in out
    assert json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout) == []
    trash = json.loads(run_rewind("trash", "--json", cwd=root, env=env, check=0).stdout)
    assert [(t["batch"], t["checkpoints"], t["why"]) for t in trash] == [(1, [1, 2, 3], "rewind forget")]
    assert "3 checkpoints of" in run_rewind("trash", cwd=root, env=env, check=0).stdout
    # a gc now (on the real clock) keeps the trash's content
    run_rewind("gc", cwd=root, env=env, check=0)
    out = run_rewind("trash", "--restore", "1", cwd=root, env=env, check=0).stdout
    assert "brought back 3 checkpoints" in out
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)] == [3, 2, 1]
    for n in (1, 2, 3):
        run_rewind("to", str(n), "--yes", cwd=root, env=env, check=0)
        assert fingerprint(root) == states[n], n
    assert run_rewind("verify", cwd=root, check=0).stdout.startswith("ok:")
    assert json.loads(run_rewind("trash", "--json", cwd=root, check=0).stdout) == []
    bad = run_rewind("trash", "--restore", "1", cwd=root)
    assert bad.returncode == 1 and "no batch 1" in bad.stderr and "Traceback" not in bad.stderr
    assert objects_on_disk(home)


def test_a_gc_after_a_day_empties_the_trash(tmp_path):
    root = tmp_path / "proj"
    three_checkpoints(root)
    home = os.environ["REWIND_HOME"]
    p = project(root)
    try:
        trees = [c.tree for c in p.catalog.checkpoints(p.id)]
    finally:
        p.close()
    run_rewind("forget", "--yes", cwd=root, check=0)
    soon = at(DAY / 2)
    run_rewind("gc", cwd=root, env=soon, check=0)
    assert all(readable(home, t) for t in trees)
    later = at(2 * DAY)
    done = json.loads(run_rewind("gc", "--json", cwd=root, env=later, check=0).stdout)
    assert done["trash_emptied"] == 3 and done["objects_swept"] > 0
    assert json.loads(run_rewind("trash", "--json", cwd=root, env=later, check=0).stdout) == []
    assert not any(readable(home, t) for t in trees)


def test_forget_now_skips_the_trash(tmp_path):
    root = tmp_path / "proj"
    three_checkpoints(root)
    home = os.environ["REWIND_HOME"]
    before = objects_on_disk(home)
    out = json.loads(run_rewind("forget", "--yes", "--now", "--json", cwd=root, check=0).stdout)
    assert out["checkpoints_removed"] == 3 and out["trash_batch"] is None and out["gc"]["objects_swept"] > 0
    assert json.loads(run_rewind("trash", "--json", cwd=root, check=0).stdout) == []
    assert objects_on_disk(home) < before


SECRET = b"AWS_SECRET=" + os.urandom(12).hex().encode() + b"\n"


@pytest.mark.parametrize("watch", ["0", "1"])
def test_forget_path_purges_its_content_from_all_history(tmp_path, watch):
    root, other = tmp_path / "proj", tmp_path / "other"
    write(root, "keep.txt", "keep")
    env = start_watcher(root, watch)
    run_rewind("save", cwd=root, env=env, check=0)                    # 1: no secret yet
    write(root, ".env", SECRET)
    write(root, "backup/env.old", SECRET)                              # the same content, another path
    run_rewind("save", cwd=root, env=env, check=0)                    # 2
    write(root, "keep.txt", "keep 2")
    run_rewind("save", cwd=root, env=env, check=0)                    # 3
    os.unlink(root / ".env")
    os.unlink(root / "backup/env.old")
    run_rewind("save", cwd=root, env=env, check=0)                    # 4: the person deleted it
    write(other, "copy", SECRET)                                       # and another project held it
    run_rewind("save", cwd=other, check=0)
    home = os.environ["REWIND_HOME"]
    from rewind.store.objects import digest_of
    oid = digest_of(SECRET)
    assert readable(home, oid)
    # an agent cannot
    refused = run_rewind("forget", "--yes", "--", ".env", cwd=root, env={**env, "CLAUDECODE": "1"})
    assert refused.returncode == 1 and readable(home, oid)
    # without --yes and without a terminal: refused, nothing done
    assert run_rewind("forget", "--", ".env", cwd=root, env=env, input="").returncode == 1 and readable(home, oid)
    proc = run_rewind("forget", "--yes", "--", ".env", cwd=root, env=env, check=0)
    assert "purged 1 content of .env from 3 checkpoints" in proc.stdout, proc.stdout
    assert "backup/env.old" in proc.stdout and "prompt texts" in proc.stderr
    assert not readable(home, oid)
    assert run_rewind("verify", "--all", cwd=root, check=0).stdout.startswith("ok:")
    # every checkpoint is still there and gives back everything else
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)] == [4, 3, 2, 1]
    run_rewind("to", "3", "--yes", cwd=root, env=env, check=0)
    assert (root / "keep.txt").read_text() == "keep 2"
    assert not (root / ".env").exists() and not (root / "backup/env.old").exists()
    assert run_rewind("diff", "1", "2", cwd=root, check=0).stdout.find(SECRET.decode().strip()) == -1
    # and the other project's copy went too: it is on disk, so its next checkpoint stores it again
    assert not (json.loads(run_rewind("list", "--json", cwd=other, check=0).stdout) == [])
    assert (other / "copy").read_bytes() == SECRET
    # no bytes of the secret anywhere under the store, compressed or not
    import zlib
    for path in objects_on_disk(home):
        raw = open(path, "rb").read()
        assert SECRET not in raw
        try:
            assert SECRET not in zlib.decompress(raw[1:] if raw[:1] in (b"\x01", b"\x02") else raw)
        except zlib.error:
            pass


def test_forget_path_says_what_it_cannot_find_and_refuses_outside(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    out = run_rewind("forget", "--yes", "--", "nope.txt", cwd=root, check=0)
    assert "no checkpoint holds nope.txt" in out.stdout
    bad = run_rewind("forget", "--yes", "--", str(tmp_path / "elsewhere"), cwd=root)
    assert bad.returncode == 1 and "not a path inside the project" in bad.stderr and "Traceback" not in bad.stderr
    empty = run_rewind("forget", "--yes", "--", cwd=root)
    assert empty.returncode == 2
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)] == [1]
