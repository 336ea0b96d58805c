"""`rewind revert`: one prompt's changes taken back on the tree as it is now, the rest kept.

Sessions are replayed through real `rewind hook claude` processes (the payloads Claude Code
sent), each tool call run for real between its Pre and Post events, the person's edits made
for real between prompts; checkpoint k is prompt k's (its interval is what prompt k did).
Every revert runs the real console script.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from helpers import fingerprint, replayed_session, run_rewind, write

WATCH = pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
TEN = "".join(f"line {i}\n" for i in range(1, 11))


def _session(tmp_path, prompts, files=None, between=None, watch="0", links=None, in_process=True):
    """A project with `files` (and `links`: name -> target), then the session's prompts
    (`{root}` in a path stands for the project). The hooks run in this process (as `rewind
    hook claude` hands them on) unless `in_process` is off; the reverts run the real CLI."""
    root = tmp_path / "proj"
    for rel, data in (files or {"src/a.py": TEN}).items():
        write(root, rel, data)
    for name, target in (links or {}).items():
        os.symlink(target, root / name)
    prompts = [[tuple(str(x).format(root=root) if i == 1 else x for i, x in enumerate(call)) for call in calls]
               for calls in prompts]
    replayed_session(root, tmp_path, watch, prompts, between=between, in_process=in_process)
    return root


def _revert(root, *args, check=None, watch="0"):
    return run_rewind("revert", *args, cwd=root, env={"REWIND_WATCH": watch}, check=check)


def _plan(root, *args, watch="0"):
    args = list(args)
    at = args.index("--") if "--" in args else len(args)
    proc = _revert(root, *args[:at], "--dry-run", "--json", *args[at:], watch=watch, check=0)
    return json.loads(proc.stdout)


def _outcomes(plan) -> dict:
    return {p["path"]: p["outcome"] for p in plan["paths"]}


@WATCH
def test_a_middle_prompt_is_taken_back_and_later_work_kept(tmp_path, watch):
    """Prompt 2 breaks line 2 of a.py and adds c.py; prompt 3 edits line 9 of the same file
    and adds d.py. Reverting 2 merges a.py (line 2 back, line 9 kept), removes c.py, keeps
    d.py; `undo` gives back the tree byte for byte."""
    root = _session(tmp_path, [
        [("write", "{root}/src/b.py", "b = 1\n")],
        [("bash", "sed -i 's/^line 2$/line 2 bad/' src/a.py && mkdir -p gen/sub && echo c > gen/sub/c.py")],
        [("bash", "sed -i 's/^line 9$/line 9 good/' src/a.py && echo d > d.py")],
    ], watch=watch, in_process=False)
    before = fingerprint(root)
    plan = _plan(root, "2", watch=watch)
    assert _outcomes(plan) == {"src/a.py": "merge", "gen/sub/c.py": "revert"}, plan
    assert plan["reverts"] == [2] and plan["clean"] and plan["conflicts"] == []
    done = _revert(root, "2", "--yes", watch=watch, check=0).stdout
    assert "Reverted checkpoint 2: 2 paths changed (1 merged with what came since)" in done, done
    assert (root / "src/a.py").read_text() == TEN.replace("line 9\n", "line 9 good\n")
    assert not (root / "gen").exists()          # made by prompt 2, emptied by the revert: gone
    assert (root / "d.py").read_text() == "d\n" and (root / "src/b.py").read_text() == "b = 1\n"
    listed = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert listed[0]["kind"] == "rewind" and listed[0]["reverts"] == [2]
    assert listed[0]["message"] == "before revert of 2"
    assert "before revert of 2" in run_rewind("list", cwd=root, check=0).stdout
    undone = run_rewind("undo", "--yes", cwd=root, env={"REWIND_WATCH": watch}, check=0).stdout
    assert "Undid the revert of 2" in undone, undone
    assert fingerprint(root) == before


def test_overlapping_edits_are_a_conflict_not_written_unless_markers_are_asked_for(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "sed -i 's/^line 2$/line 2 bad/' src/a.py && echo y > y.py")],
        [("bash", "sed -i 's/^line 2 bad$/line 2 worse/' src/a.py")],
    ])
    before = (root / "src/a.py").read_bytes()
    plan = _plan(root, "2")
    assert _outcomes(plan) == {"src/a.py": "conflict", "y.py": "revert"}
    conflict = plan["conflicts"][0]
    assert conflict["path"] == "src/a.py" and conflict["show"] == "rewind diff 2 -- src/a.py"
    proc = _revert(root, "2", "--yes", check=1)       # a conflict remains: exit 1
    assert "src/a.py: later changes overlap the ones taken back; `rewind diff 2 -- src/a.py`" in proc.stdout
    assert (root / "src/a.py").read_bytes() == before          # not written
    assert not (root / "y.py").exists()                        # the rest was taken back
    run_rewind("undo", "--yes", cwd=root, check=0)
    proc = _revert(root, "2", "--yes", "--conflicts", "markers", check=1)
    text = (root / "src/a.py").read_text()
    assert "<<<<<<< now\nline 2 worse\n||||||| what it was taken back from\nline 2 bad\n=======\nline 2\n" \
           ">>>>>>> checkpoint 2\n" in text, text
    assert text.startswith("line 1\n") and text.endswith("line 10\n")
    assert "1 conflict written with markers: src/a.py" in proc.stdout


def test_a_deleted_file_comes_back_and_a_recreated_one_is_a_conflict(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "rm keep.txt gone.txt && rm -r olddir")],
        [("bash", "echo mine > gone.txt")],
    ], files={"keep.txt": "keep\n", "gone.txt": "gone\n", "olddir/f.txt": "f\n"})
    plan = _plan(root, "2")
    assert _outcomes(plan) == {"keep.txt": "revert", "gone.txt": "conflict", "olddir/f.txt": "revert"}
    assert next(p for p in plan["paths"] if p["path"] == "gone.txt")["why"] == \
        "deleted then, and made again since"
    _revert(root, "2", "--yes", check=1)
    assert (root / "keep.txt").read_text() == "keep\n" and (root / "olddir/f.txt").read_text() == "f\n"
    assert (root / "gone.txt").read_text() == "mine\n"


def test_a_symlink_and_an_exec_bit_are_taken_back_and_a_moved_link_is_a_conflict(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "chmod +x run.sh && ln -s run.sh newlink && ln -sfn b.txt link && ln -sfn b.txt link2")],
        [("bash", "ln -sfn c.txt link2 && sed -i 's/echo/printf/' run.sh")],
    ], files={"run.sh": "echo hi\n", "a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"},
        links={"link": "a.txt", "link2": "a.txt"})
    assert stat.S_IMODE(os.lstat(root / "run.sh").st_mode) & 0o111
    plan = _plan(root, "2")
    assert _outcomes(plan) == {"run.sh": "revert", "newlink": "revert", "link": "revert", "link2": "conflict"}, plan
    assert next(p for p in plan["paths"] if p["path"] == "link2")["why"] == \
        "a symlink that changed then and again since"
    assert next(p for p in plan["paths"] if p["path"] == "run.sh")["why"] == "its mode put back"
    _revert(root, "2", "--yes", check=1)
    assert not stat.S_IMODE(os.lstat(root / "run.sh").st_mode) & 0o111       # the mode put back
    assert (root / "run.sh").read_text() == "printf hi\n"                   # the later edit kept
    assert not os.path.lexists(root / "newlink")
    assert os.readlink(root / "link") == "a.txt" and os.readlink(root / "link2") == "c.txt"


def test_an_mv_is_taken_back_as_a_rename_with_the_later_edits(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "mv old.py new.py")],
        [("bash", "echo more >> new.py")],
    ], files={"old.py": "old\n"})
    plan = _plan(root, "2")
    rename = next(p for p in plan["paths"] if p["outcome"] == "rename")
    assert (rename["path"], rename["renamed_from"]) == ("old.py", "new.py")
    out = _revert(root, "2", "--yes", check=0).stdout
    assert "rename    old.py <- new.py  moved back from new.py" in out, out
    assert (root / "old.py").read_text() == "old\nmore\n" and not (root / "new.py").exists()


def test_the_persons_edit_in_the_interval_is_kept_unless_all(tmp_path):
    def person(i):
        if i == 2:                 # after prompt 2's work, before prompt 3: in checkpoint 2's interval
            (tmp_path / "proj/notes.md").write_text("mine\n")
            with open(tmp_path / "proj/src/a.py", "a") as f:
                f.write("the person's line\n")
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "echo agent > agent.txt && sed -i 's/^line 5$/line 5 agent/' src/a.py")],
        [("bash", "echo later > later.txt")],
    ], between=person)
    plan = _plan(root, "2")
    out = _outcomes(plan)
    # a.py: the agent and the person both changed it in the interval, no version between them
    assert out == {"agent.txt": "revert", "notes.md": "kept", "src/a.py": "conflict"}, plan
    assert "someone outside the agent" in next(p for p in plan["paths"] if p["path"] == "notes.md")["why"]
    _revert(root, "2", "--yes", check=1)
    assert (root / "notes.md").read_text() == "mine\n" and not (root / "agent.txt").exists()
    run_rewind("undo", "--yes", cwd=root, check=0)
    plan = _plan(root, "2", "--all")
    assert _outcomes(plan) == {"agent.txt": "revert", "notes.md": "revert", "src/a.py": "revert"}
    _revert(root, "2", "--all", "--yes", check=0)
    assert not (root / "notes.md").exists() and (root / "src/a.py").read_text() == TEN
    assert (root / "later.txt").exists()
    # --source picks: the person's change alone
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert _outcomes(_plan(root, "2", "--source", "external")) == {
        "agent.txt": "kept", "notes.md": "revert", "src/a.py": "conflict"}


def test_a_range_newest_first_and_only_some_paths(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "sed -i 's/^line 2$/line 2 two/' src/a.py && echo two > two.txt")],
        [("bash", "sed -i 's/^line 2 two$/line 2 three/' src/a.py && echo three > three.txt")],
        [("bash", "echo four > four.txt")],
    ])
    # one at a time, 2 alone conflicts (3 changed the same line again); as a range it does not
    assert _outcomes(_plan(root, "2"))["src/a.py"] == "conflict"
    plan = _plan(root, "2..3")
    assert plan["reverts"] == [3, 2]
    assert _outcomes(plan) == {"src/a.py": "revert", "two.txt": "revert", "three.txt": "revert"}
    assert [p["checkpoint"] for p in plan["paths"] if p["path"] == "src/a.py"] == [3, 2]
    only = _plan(root, "2..3", "--", "two.txt")
    assert _outcomes(only) == {"two.txt": "revert"} and only["only"] == ["two.txt"]
    _revert(root, "2..3", "--yes", "--", "two.txt", check=0)
    assert not (root / "two.txt").exists() and (root / "three.txt").exists()
    done = _revert(root, "2..3", "--yes", check=0).stdout
    assert "Reverted checkpoints 2..3: 2 paths changed" in done, done
    assert (root / "src/a.py").read_text() == TEN and (root / "four.txt").exists()
    listed = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert listed[0]["reverts"] == [3, 2] and listed[0]["message"] == "before revert of 2..3"


def test_the_dry_run_json_is_what_the_real_run_does(tmp_path):
    root = _session(tmp_path, [
        [("write", "{root}/x.py", "x\n")],
        [("bash", "sed -i 's/^line 2$/line 2 bad/' src/a.py && mv old.py new.py && echo c > c.py")],
        [("bash", "sed -i 's/^line 9$/line 9 good/' src/a.py && echo d > d.py")],
    ], files={"src/a.py": TEN, "old.py": "old\n"})
    dry = _plan(root, "2")
    real = json.loads(_revert(root, "2", "--yes", "--json", check=0).stdout)
    assert real["dry_run"] is False and isinstance(real["safety"], int) and dry["safety"] is None
    for key in ("dry_run", "safety"):
        dry.pop(key), real.pop(key)
    assert dry == real
    # and nothing left: a second revert finds nothing to take back (exit 0, said so)
    again = _revert(root, "2", "--yes", check=0).stdout
    assert "Nothing to take back" in again


def test_bad_input_is_one_line_and_changes_nothing(tmp_path):
    root = _session(tmp_path, [[("write", "{root}/x.py", "x\n")]])
    before = fingerprint(root)
    for args, code, words in ((["9"], 1, "no checkpoint 9"), (["1..x"], 2, "not a checkpoint id or range"),
                              (["1", "--source", "me"], 2, "unknown source 'me'"),
                              (["1", "--all", "--source", "tool"], 2, "--all and --source go alone"),
                              (["1", "--conflicts", "theirs"], 2, "--conflicts is skip or markers"),
                              (["1", "--", "nosuch.py"], 1, "no such path in the tree nor among the changes")):
        at = args.index("--") if "--" in args else len(args)
        proc = _revert(root, *args[:at], "--yes", *args[at:])
        assert proc.returncode == code and words in proc.stderr and "Traceback" not in proc.stderr, \
            (args, proc.returncode, proc.stderr)
    proc = _revert(root, "1")          # no terminal to ask on: refused
    assert proc.returncode == 1 and "--yes" in proc.stderr
    assert fingerprint(root) == before


def test_the_plan_says_what_it_will_not_undo_outside_the_tree(tmp_path):
    from helpers import git
    root = tmp_path / "proj"
    write(root, "src/a.py", TEN)
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init", cwd=root)
    replayed_session(root, tmp_path, "0", [
        [("bash", "git checkout -q -b early")],
        [("bash", "git checkout -q -b feature && echo f > f.txt")],
        [("bash", "echo later > later.txt")],
    ])
    out = _revert(root, "2", "--dry-run", check=0).stdout
    assert "It will not undo (outside the tree):" in out, out
    effects = [line for line in out.splitlines() if line.startswith("  checkpoint ")]
    assert effects and all(line.startswith("  checkpoint 2:") for line in effects), effects
    plan = _plan(root, "2")
    assert plan["will_not_undo"] and {e["checkpoint"] for e in plan["will_not_undo"]} == {2}
    assert _outcomes(plan) == {"f.txt": "revert"}
