"""A restore and ignore rules that changed since its checkpoint ("never lose a byte", items 1
and 4): every path the checkpoint holds comes back whatever today's rules say (what it
overwrites stored first), what it cannot make equal is named with exit 1, paths that drop
out of recording are flagged `unrecorded` (list, show, JSON), and "already matches" is said
only when it is true. End to end through the real console script and the real hooks, with
the watcher off and on (the checkpoints' flags come from its quick scans then)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import REWIND, fingerprint, run_rewind, wait_ready, write
from rewind.capture.ignore import IgnoreRules
from rewind.cli.replay import bundled_session, fill

SESSION = bundled_session()
WATCH = pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])


def _hook(event: str, root, watch: str) -> None:
    p = next(x for x in SESSION if x["hook_event_name"] == event)
    p = fill(p, str(root), "s-ignored", str(root.parent / "cfg"))
    r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(p), capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, CLAUDE_PROJECT_DIR=str(root), REWIND_WATCH=watch), timeout=60)
    assert r.returncode == 0 and r.stdout == "", r


def _session(root, watch: str) -> None:
    """A session whose first prompt is checkpoint 1 of the tree as it is now."""
    _hook("SessionStart", root, watch)
    if watch == "1":
        wait_ready(root)
    _hook("UserPromptSubmit", root, watch)


def _env(watch: str) -> dict:
    return {"REWIND_WATCH": watch}


def _flags(root, number: int, watch: str) -> dict[str, list[str]]:
    shown = json.loads(run_rewind("show", str(number), "--json", cwd=root, env=_env(watch), check=0).stdout)
    return {c["path"]: c["flags"] for c in shown["changes"]}


@WATCH
def test_a_directory_ignored_since_the_checkpoint_comes_back_in_one_restore(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, ".gitignore", "*.log\n")
    write(root, "a.txt", "alpha\n")
    write(root, "data/file.csv", "x,y\n1,2\n")
    write(root, "data/keep.csv", "k\n")
    _session(root, watch)
    before = fingerprint(root)
    write(root, ".gitignore", "*.log\ndata/\n")
    os.unlink(root / "data" / "file.csv")
    write(root, "data/keep.csv", "changed while ignored\n")
    write(root, "data/new.log", "not the checkpoint's: stays")
    _hook("UserPromptSubmit", root, watch)          # checkpoint 2: data/ no longer recorded
    flags = _flags(root, 1, watch)
    assert "unrecorded" in flags["data/keep.csv"], flags

    plan = run_rewind("to", "1", "--dry-run", cwd=root, env=_env(watch), check=0).stdout
    assert "write  data/file.csv" in plan and "write  data/keep.csv" in plan, plan
    r = run_rewind("to", "1", "--yes", cwd=root, env=_env(watch), check=0)
    assert "Rewound to checkpoint 1" in r.stdout
    after = fingerprint(root)
    assert after.pop("data/new.log") == ("file", 0o644, b"not the checkpoint's: stays")
    assert after == before
    again = run_rewind("to", "1", "--yes", cwd=root, env=_env(watch), check=0)
    assert "Nothing to do: the tree already matches checkpoint 1" in again.stdout, again.stdout
    # what it overwrote while ignored is in the safety checkpoint: undo gives it back
    run_rewind("undo", "--yes", cwd=root, env=_env(watch), check=0)
    assert (root / "data" / "keep.csv").read_text() == "changed while ignored\n"
    assert not (root / "data" / "file.csv").exists()


@WATCH
def test_one_ignored_path_restored_alone_is_stored_first_and_stays_unrecorded(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    write(root, "data/file.csv", "v1\n")
    _session(root, watch)
    write(root, ".gitignore", "data/\n")
    write(root, "data/file.csv", "v2, written while ignored\n")
    r = run_rewind("to", "1", "--yes", "--", "data/file.csv", cwd=root, env=_env(watch), check=0)
    assert "1 path changed" in r.stdout, r.stdout
    assert (root / "data" / "file.csv").read_text() == "v1\n"
    assert (root / ".gitignore").exists()           # not asked for: still there, still ignoring data/
    safety = json.loads(run_rewind("list", "--json", cwd=root, env=_env(watch), check=0).stdout)[0]
    assert safety["kind"] == "rewind"
    # the safety checkpoint holds what the restore overwrote, though today's rules ignore it
    run_rewind("to", str(safety["id"]), "--yes", "--", "data/file.csv", cwd=root, env=_env(watch), check=0)
    assert (root / "data" / "file.csv").read_text() == "v2, written while ignored\n"
    # and the next checkpoint does not hold it: it dropped out of recording, it was not deleted
    _hook("UserPromptSubmit", root, watch)
    newest = json.loads(run_rewind("list", "--json", cwd=root, env=_env(watch), check=0).stdout)
    after_safety = next(c for c in newest if c["id"] == safety["id"] + 1)
    assert "unrecorded" in _flags(root, after_safety["id"], watch).get("data/file.csv", []), \
        _flags(root, after_safety["id"], watch)


@WATCH
def test_what_a_restore_cannot_put_back_under_new_rules_is_named_and_fails(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    write(root, "data/file.csv", "v1\n")
    _session(root, watch)
    write(root, ".gitignore", "data/\n")
    os.unlink(root / "data" / "file.csv")
    os.mkfifo(root / "data" / "file.csv")           # ignored, and nothing rewind can store
    write(root, "a.txt", "changed\n")
    r = run_rewind("to", "1", "--yes", cwd=root, env=_env(watch))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "not restored: data/file.csv" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (root / "a.txt").read_text() == "alpha\n"     # everything else was done
    assert not (root / ".gitignore").exists()
    assert os.path.exists(root / "data" / "file.csv") and not os.path.isfile(root / "data" / "file.csv")
    dry = run_rewind("to", "1", "--dry-run", "--json", cwd=root, env=_env(watch), check=0)
    assert [u["path"] for u in json.loads(dry.stdout)["unmet"]] == ["data/file.csv"]
    again = run_rewind("to", "1", "--yes", cwd=root, env=_env(watch))
    assert again.returncode == 1 and "already matches" not in again.stdout, (again.stdout, again.stderr)


@WATCH
def test_an_agents_rewindignore_of_everything_is_flagged_and_does_not_fool_a_restore(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    write(root, "src/b.py", "b = 1\n")
    write(root, "src/c.py", "c = 1\n")
    _session(root, watch)
    before = fingerprint(root)
    write(root, ".rewindignore", "*\n")
    write(root, "a.txt", "overwritten\n")
    os.unlink(root / "src" / "b.py")
    _hook("UserPromptSubmit", root, watch)          # checkpoint 2 records only the rule file
    listed = json.loads(run_rewind("list", "--json", cwd=root, env=_env(watch), check=0).stdout)
    one = next(c for c in listed if c["id"] == 1)
    assert one["summary"]["flags"].get("unrecorded", 0) >= 1, one["summary"]
    human = run_rewind("list", cwd=root, env=_env(watch), check=0).stdout
    assert "[unrecorded]" in human, human
    flags = _flags(root, 1, watch)
    assert "unrecorded" in flags["src/c.py"] and ".rewindignore" in flags, flags
    show = run_rewind("show", "1", cwd=root, env=_env(watch), check=0).stdout
    assert "U src/c.py" in show and "unrecorded" in show, show

    dry = run_rewind("to", "1", "--dry-run", cwd=root, env=_env(watch), check=0).stdout
    assert "already matches" not in dry and "write   a.txt" in dry and "write   src/b.py" in dry, dry
    assert "delete  .rewindignore" in dry, dry
    run_rewind("to", "1", "--yes", cwd=root, env=_env(watch), check=0)
    assert fingerprint(root) == before
    again = run_rewind("to", "1", "--yes", cwd=root, env=_env(watch), check=0)
    assert "already matches" in again.stdout, again.stdout


def test_the_rule_files_are_recorded_whatever_they_say(tmp_path):
    root = tmp_path / "proj"
    write(root, ".gitignore", "*\n")
    write(root, ".rewindignore", ".rewindignore\n.rewind.toml\n")
    write(root, ".rewind.toml", "ring_size = 100\n")
    write(root, "sub/.gitignore", "*\n")
    rules = IgnoreRules.for_root(str(root))
    assert not rules.is_ignored(".gitignore", False)
    assert not rules.is_ignored(".rewindignore", False)
    assert not rules.is_ignored(".rewind.toml", False)
    assert rules.is_ignored("other.txt", False) and rules.is_ignored("sub", True)
    assert rules.is_ignored("sub/.rewind.toml", False)   # settings count at the root only
    saved = run_rewind("save", cwd=root, check=0)
    assert "3 files" in saved.stdout, saved.stdout
