"""The command-line contract: JSON shapes, ids, exit codes, one-line errors."""

from __future__ import annotations

import json
import os

import pytest

import subprocess

from helpers import REWIND, processes_with_home, run_rewind, write


@pytest.fixture
def three(tmp_path):
    """A project with checkpoints 1..3 and changes between them."""
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    write(root, "a.txt", "one\ntwo\n")
    os.symlink("a.txt", root / "link")
    run_rewind("save", "-m", "second", cwd=root, check=0)
    write(root, "bin.dat", b"\x00\x01\x02")
    os.unlink(root / "link")
    run_rewind("save", "-m", "third", cwd=root, check=0)
    return root


def test_list_json_is_newest_first_with_summaries(three):
    cps = json.loads(run_rewind("list", "--json", cwd=three, check=0).stdout)
    assert [c["id"] for c in cps] == [3, 2, 1]
    assert [c["message"] for c in cps] == ["third", "second", "first"]
    for c in cps:
        assert {"id", "kind", "created_at", "agent", "session_id", "prompt", "git_head"} <= c.keys()
        assert c["kind"] == "manual" and c["created_at"].endswith("Z")
    assert cps[2]["summary"]["changes"] == 2
    assert cps[2]["summary"]["flags"] == {"symlink": 1}
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", "-n", "2", cwd=three, check=0).stdout)] == [3, 2]


def test_show_json_has_the_contract_fields(three):
    shown = json.loads(run_rewind("show", "2", "--json", cwd=three, check=0).stdout)
    assert shown["id"] == 2 and shown["kind"] == "manual" and shown["prompt"] is None
    changes = {c["path"]: c for c in shown["changes"]}
    assert set(changes) == {"bin.dat", "link"}
    assert changes["bin.dat"]["status"] == "added" and "binary" in changes["bin.dat"]["flags"]
    assert changes["link"]["status"] == "deleted" and changes["link"]["flags"] == ["symlink"]
    for c in shown["changes"]:
        assert {"path", "status", "source", "tool", "command", "flags"} <= c.keys()
    assert json.loads(run_rewind("show", "last", "--json", cwd=three, check=0).stdout)["id"] == 3
    assert json.loads(run_rewind("show", "last~2", "--json", cwd=three, check=0).stdout)["id"] == 1


def test_the_newest_checkpoint_shows_changes_up_to_the_working_tree(three):
    write(three, "a.txt", "edited after the last save\n")
    shown = json.loads(run_rewind("show", "last", "--json", cwd=three, check=0).stdout)
    assert [(c["path"], c["status"]) for c in shown["changes"]] == [("a.txt", "modified")]


def test_diff_stat_aligns_its_columns_and_counts_in_words_that_agree(tmp_path):
    root = tmp_path / "proj"
    write(root, "short.txt", "a\n")
    write(root, "a/much/longer/path.txt", "".join(f"{i}\n" for i in range(3)))
    write(root, "ünïcödé.txt", "x\n")
    run_rewind("save", "-m", "one", cwd=root, check=0)
    write(root, "short.txt", "b\n")
    write(root, "a/much/longer/path.txt", "".join(f"{i}\n" for i in range(3, 15)))
    write(root, "ünïcödé.txt", "x\ny\n")
    run_rewind("save", "-m", "two", cwd=root, check=0)
    lines = run_rewind("diff", "1", "--stat", cwd=root, env={"NO_COLOR": "1"}, check=0).stdout.splitlines()
    rows, total = lines[:-1], lines[-1]
    assert len(rows) == 3 and len({line.index("|") for line in rows}) == 1, lines          # the bars line up
    assert len({line.index(" -") for line in rows}) == 1, lines                             # and the minus column
    assert {line.split("|")[1].split()[0] for line in rows} == {"+1", "+12"}
    assert total == " 3 paths changed, 14 insertions(+), 4 deletions(-)", total
    write(root, "short.txt", "c\n")
    one = run_rewind("diff", "2", "--stat", "--", "short.txt", cwd=root, check=0).stdout.splitlines()[-1]
    assert one == " 1 path changed, 1 insertion(+), 1 deletion(-)", one


def test_diff_forms(three):
    out = run_rewind("diff", "1", cwd=three, check=0).stdout
    assert "+two" in out and "symlink -> a.txt" in out
    assert run_rewind("diff", "1", "--name-only", cwd=three, check=0).stdout.split() == ["a.txt", "link"]
    stat = run_rewind("diff", "1", "--stat", cwd=three, check=0).stdout
    assert "a.txt" in stat and "+1 -0" in stat and ("paths changed, " in stat or " 1 path changed, " in stat), stat
    both = json.loads(run_rewind("diff", "1", "3", "--json", cwd=three, check=0).stdout)
    assert both["from"] == 1 and both["to"] == 3
    assert sorted(c["path"] for c in both["changes"]) == ["a.txt", "bin.dat"]
    limited = run_rewind("diff", "1", "3", "--name-only", "--", "bin.dat", cwd=three, check=0).stdout
    assert limited.split() == ["bin.dat"]
    write(three, "a.txt", "now\n")
    live = json.loads(run_rewind("diff", "last", "--json", cwd=three, check=0).stdout)
    assert live["to"] is None and live["changes"][0]["path"] == "a.txt"


@pytest.mark.parametrize("args, code", [
    (["show", "99"], 1), (["diff", "42"], 1), (["to", "7", "--yes"], 1), (["show", "last~9"], 1),
    (["show", "abc"], 2), (["show", "last~x"], 2), (["show", "-1"], 2), (["to"], 2),
    (["nosuchcommand"], 2), (["list", "--nosuchoption"], 2), (["list", "-n", "zero"], 2),
    (["diff", "1", "--stat", "--name-only"], 1),
])
def test_bad_ids_and_arguments_get_one_clear_line(three, args, code):
    r = run_rewind(*args, cwd=three)
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr


def test_a_directory_without_checkpoints(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    assert json.loads(run_rewind("list", "--json", cwd=empty, check=0).stdout) == []
    r = run_rewind("show", "last", cwd=empty)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1


def test_project_option_and_git_toplevel(tmp_path):
    import subprocess
    root = tmp_path / "repo"
    write(root, "src/deep/a.py", "a")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    run_rewind("save", cwd=root / "src" / "deep", check=0)   # the git top-level is the project
    listed = json.loads(run_rewind("list", "--json", "--project", str(root), cwd=tmp_path, check=0).stdout)
    assert len(listed) == 1 and listed[0]["git_branch"] in ("master", "main")
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert json.loads(run_rewind("list", "--json", "--all", cwd=other, check=0).stdout)[0]["project"] == str(root)


def test_output_is_plain_when_piped_and_with_no_color(three):
    for env in ({}, {"NO_COLOR": "1"}):
        out = run_rewind("list", cwd=three, env=env, check=0).stdout
        assert "\x1b[" not in out and "first" in out
    coloured = run_rewind("--color", "always", "list", cwd=three, check=0).stdout
    assert "\x1b[" in coloured


def test_status_and_verify(three):
    st = run_rewind("status", cwd=three, check=0).stdout
    assert "checkpoints: 3" in st and "objects" in st
    assert run_rewind("verify", cwd=three, check=0).stdout.startswith("ok:")


def test_the_store_is_private(three):
    home = os.environ["REWIND_HOME"]
    for dirpath, dirnames, filenames in os.walk(os.path.join(home, "objects")):
        assert os.stat(dirpath).st_mode & 0o777 == 0o700
        for name in filenames:
            assert os.stat(os.path.join(dirpath, name)).st_mode & 0o777 == 0o600
    assert os.stat(os.path.join(home, "catalog.sqlite")).st_mode & 0o077 == 0


def test_python_dash_m_works(three):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "rewind", "list", "--json"], cwd=three,
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == 3


def test_the_demo_plays_a_session_and_leaves_no_process_behind(tmp_path):
    import time
    env = {k: v for k, v in os.environ.items() if k != "REWIND_WATCH"}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run([*REWIND, "demo"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for step in ("rewind list", "rewind show", "rewind to", "rewind undo --yes"):
        assert f"$ {step}" in proc.stdout
    home = proc.stdout.split("REWIND_HOME=")[1].split()[0]
    assert home.startswith(str(tmp_path))
    time.sleep(0.5)
    assert processes_with_home(home) == [], "a process outlived the demo"


def test_the_binary_flag_follows_either_side_of_a_change_in_every_path_that_sets_it(tmp_path):
    """`binary` when the old or the new content has a NUL in its first 8 KB: for the stored
    changes of a checkpoint (old side read back from the store by a later process, new side
    remembered from the scan), for the live changes under the newest checkpoint, and for
    the rows of a rewind's own checkpoints."""
    root = tmp_path / "proj"
    write(root, "to_text.dat", b"\x00\x01binary first\n")
    write(root, "to_binary.txt", "text first\n")
    write(root, "text.txt", "text\n")
    write(root, "late_nul.txt", "x" * 9000 + "\x00")      # a NUL past 8 KB: text, as git says
    run_rewind("save", "-m", "first", cwd=root, check=0)
    write(root, "to_text.dat", "now text\n")
    write(root, "to_binary.txt", b"now\x00binary\n")
    write(root, "text.txt", "still text\n")
    write(root, "late_nul.txt", "y" * 9000 + "\x00")

    def flags(*args):
        shown = json.loads(run_rewind("show", *args, "--json", cwd=root, check=0).stdout)
        return {c["path"]: "binary" in c["flags"] for c in shown["changes"]}
    expected = {"to_text.dat": True, "to_binary.txt": True, "text.txt": False, "late_nul.txt": False}
    assert flags("last") == expected                    # live: the working tree against the store
    run_rewind("save", "-m", "second", cwd=root, check=0)
    assert flags("1") == expected                       # stored with the second checkpoint
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "to_text.dat").read_bytes() == b"\x00\x01binary first\n"
    newest = json.loads(run_rewind("list", "--json", "-n", "1", cwd=root, check=0).stdout)[0]
    assert newest["kind"] == "rewind"                   # its safety checkpoint, then what it wrote:
    assert flags("last") == expected                    # every change back, each side swapped


def test_a_new_empty_directory_diffs_as_a_directory_never_as_rewinds_tree_object(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    (root / ".pytest_cache").mkdir()
    (root / "gone").mkdir()
    run_rewind("save", "-m", "second", cwd=root, check=0)
    (root / "gone").rmdir()
    for args in (["1", "2"], ["2"]):               # stored trees, then the working tree
        out = run_rewind("diff", *args, cwd=root, check=0).stdout
        assert "rewind-tree" not in out, out
        assert ("diff .pytest_cache\n(new directory)\n" in out) == (args == ["1", "2"]), out
        stat = run_rewind("diff", *args, "--stat", cwd=root, check=0).stdout
        assert "rewind-tree" not in stat and "insertions" in stat and " 0 insertions(+), 0 deletions(-)" in stat, stat
        got = json.loads(run_rewind("diff", *args, "--json", cwd=root, check=0).stdout)["changes"]
        assert all(c["additions"] == 0 == c["deletions"] and "rewind-tree" not in c["diff"] for c in got), got
    out = run_rewind("diff", "2", "--", "gone", cwd=root, check=0).stdout
    assert out == "diff gone\n(directory removed)\n", out
