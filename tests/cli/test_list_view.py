"""What `rewind list` and `show` show a person: prompts stay in front
however many restores there were (a rewind's safety checkpoint folds under the checkpoint it
went back to, its id named; `--every` lists each; `--json` keeps every checkpoint, with
`folded_under`), aligned plain columns and one line per checkpoint at 80 columns, badges only
where the counts do not say it already, `show` times to the second, and `list` before the
first checkpoint saying whether the hooks are installed.

Every test runs the installed `rewind` on a real project; the prompts are recorded through
real `rewind hook claude` processes from the payloads Claude Code sent (rewind/data), the
tools' effects carried out for real, and a person's edit before each prompt.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from helpers import REWIND, run_rewind, write
from rewind.cli.replay import bundled_session, fill, replay

PLAIN = {"NO_COLOR": "1", "COLUMNS": "80"}
ROW = re.compile(r"^ *(\d+)  +\S+ ago  ")            # a checkpoint's line: its id, then its age
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _recorded(tmp_path: Path) -> Path:
    """The bundled session (5 prompts: Write, Edit, Bash, a symlink, a failing command), with
    an edit of ours before each prompt, so counts run to `2 tool, 1 bash, 1 external`; then
    `to 1`, `undo` and `to 3`: checkpoints 1-5 are prompts, 6-8 the rewinds' safety checkpoints
    (6 before the rewind to 1, 7 the undo of it, 8 before the rewind to 3)."""
    root = tmp_path / "proj"
    for name, text in {"README.md": "# demo\n", "config.ini": "[core]\nlevel = 1\n", "old.log": "log\n",
                       "a.txt": "alpha\n"}.items():
        write(root, name, text)
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))

    def deliver(payload):
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env, cwd=root,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout == "", (payload["hook_event_name"], r.stderr)

    def person_edits(payload):
        with open(root / "mine.txt", "a") as f:
            f.write(f"before: {payload['prompt'][:20]}\n")

    session = [fill(p, str(root), "s-list", str(tmp_path / "cfg")) for p in bundled_session()]
    replay(session, deliver, between=person_edits)
    for args in (["to", "1", "--yes"], ["undo", "--yes"], ["to", "3", "--yes"]):
        run_rewind(*args, cwd=root, check=0)
    return root


def _rows(lines: list[str]) -> list[str]:
    return [line for line in lines if ROW.match(line)]


def _ids(rows: list[str]) -> list[int]:
    return [int(ROW.match(row).group(1)) for row in rows]


def test_prompts_stay_in_front_and_each_rewind_is_named_under_its_target(tmp_path):
    root = _recorded(tmp_path)
    every = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["id"] for c in every] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert [c["kind"] for c in every[:3]] == ["rewind"] * 3

    lines = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout.splitlines()
    rows = _rows(lines)
    assert _ids(rows) == [5, 4, 3, 2, 1], lines                  # the prompts, and only them, are rows
    assert all("  prompt  " in row for row in rows)
    under = {}
    for above, line in zip(lines, lines[1:]):
        if line.lstrip().startswith("↳"):
            under[_ids([above])[0]] = line
    assert set(under) == {1, 3}, lines
    assert re.search(r"rewinds here: 6, 7 \(7 an undo; newest \d+s ago", under[1]), under[1]
    assert re.search(r"rewind here: 8 \(newest", under[3]), under[3]

    # nothing is lost: --every lists each checkpoint on its own row, the safety ones too
    every_rows = _rows(run_rewind("list", "--every", cwd=root, env=PLAIN, check=0).stdout.splitlines())
    assert _ids(every_rows) == [8, 7, 6, 5, 4, 3, 2, 1]
    assert "before rewind to 1" in every_rows[2] and "undo" in every_rows[1]
    assert not any("↳" in row for row in every_rows)


def test_a_rewind_to_a_safety_checkpoint_folds_under_the_work_it_restored_and_is_no_undo(tmp_path):
    """`to 8` (8 the safety checkpoint of the rewind to 3: the tree at the end of prompt 5)
    restored prompt 5's work: it folds under 5, not under 3 or 1, and is not called an undo;
    its undo folds with it and is."""
    root = _recorded(tmp_path)
    assert len((root / "mine.txt").read_text().splitlines()) == 3          # the tree of checkpoint 3
    run_rewind("to", "8", "--yes", cwd=root, check=0)                     # 9: before the rewind to 8
    assert len((root / "mine.txt").read_text().splitlines()) == 5          # the end of prompt 5's work
    run_rewind("to", "2", "--yes", cwd=root, check=0)                     # 10: before the rewind to 2
    run_rewind("undo", "--yes", cwd=root, check=0)                        # 11: the undo of it
    listed = {c["id"]: c["folded_under"] for c in json.loads(run_rewind("list", "--json", cwd=root,
                                                                        check=0).stdout)}
    assert listed == {11: 2, 10: 2, 9: 5, 8: 3, 7: 1, 6: 1, 5: None, 4: None, 3: None, 2: None, 1: None}
    lines = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout.splitlines()
    under = {_ids([above])[0]: line for above, line in zip(lines, lines[1:]) if line.lstrip().startswith("↳")}
    assert re.search(r"rewind here: 9 \(newest", under[5]) and "undo" not in under[5], under[5]
    assert re.search(r"rewind here: 8 \(newest", under[3]) and "undo" not in under[3], under[3]
    assert re.search(r"rewinds here: 10, 11 \(11 an undo;", under[2]), under[2]
    assert re.search(r"rewinds here: 6, 7 \(7 an undo;", under[1]), under[1]


def test_list_json_keeps_every_checkpoint_and_says_where_it_folds(tmp_path):
    root = _recorded(tmp_path)
    listed = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert {c["id"]: c["folded_under"] for c in listed} == {8: 3, 7: 1, 6: 1, 5: None, 4: None, 3: None,
                                                            2: None, 1: None}
    assert listed[0]["restore_target"] == 3 and listed[1]["restore_target"] == 6   # unchanged meaning
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", "-n", "2", cwd=root, check=0).stdout)] == [8, 7]


def test_plain_columns_align_and_a_checkpoint_takes_one_line_at_80_columns(tmp_path):
    root = _recorded(tmp_path)
    for args in (["list"], ["list", "--every"]):
        out = run_rewind(*args, cwd=root, env=PLAIN, check=0).stdout
        lines = out.splitlines()
        assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
        rows = _rows(lines)
        # every line is a checkpoint, a fold under one, or the legend: no row wraps
        assert all(ROW.match(line) or line.lstrip().startswith("↳") or " = " in line for line in lines), lines
        assert len(rows) == (5 if args == ["list"] else 8)
        # the counts reach 25 characters and more, and push nothing: each column starts where
        # it starts on every row
        counts = [re.search(r"  (?:prompt|rewind)  (\S.*?)(?:  |$)", row).group(1) for row in rows]
        assert any(len(c) >= 25 for c in counts), counts
        # ... and are never cut at 80 columns: the badges take room only on the rows that have one
        assert not any(c.endswith("…") for c in counts), counts
        for pattern, edge in ((r"\d+[smhd] ago", "end"), (r"(?:prompt|rewind)  ", "start")):
            assert len({getattr(re.search(pattern, row), edge)() for row in rows}) == 1, (pattern, rows)
        # the prompt column (a row's badges, then its prompt) starts where it starts on every row
        starts = set()
        for row, text in zip(rows, _texts(root, _ids(rows))):
            at = row.index(text[:12])
            starts.add(at - len(re.search(r"((?:\[[a-z ]+\] )*)$", row[:at]).group(1)))
        assert len(starts) == 1, rows


def _texts(root: Path, ids: list[int]) -> list[str]:
    listed = {c["id"]: c for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)}
    return [" ".join((listed[i]["prompt"] or listed[i]["message"]).split()) for i in ids]


def test_badges_say_what_the_counts_do_not(tmp_path):
    root = _recorded(tmp_path)
    rows = _rows(run_rewind("list", cwd=root, env=PLAIN, check=0).stdout.splitlines())
    assert any(" bash" in row for row in rows) and any("external" in row for row in rows)
    assert not any("[bash]" in row or "[external]" in row for row in rows), rows
    symlink = [row for row in rows if "[symlink]" in row]              # the symlink prompt keeps its badge
    assert _ids(symlink) == [2], rows
    text = _texts(root, [2])[0]
    assert f"[symlink] {text[:12]}" in symlink[0], symlink    # opening its prompt


def test_the_rich_table_is_one_line_per_checkpoint_at_80_columns(tmp_path):
    root = _recorded(tmp_path)
    out = run_rewind("list", "--color", "always", cwd=root, env={"COLUMNS": "80"}, check=0).stdout
    assert "\x1b[" in out
    lines = ANSI.sub("", out).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), lines
    assert lines[0].split()[:3] == ["id", "age", "kind"]
    rows = _rows(lines)
    assert _ids(rows) == [5, 4, 3, 2, 1], lines
    assert lines[1 + len(rows) + 2:][0].startswith("tool = "), lines       # 5 rows, 2 folds, the legend
    assert " symlink " in out and " bash \x1b" not in out and " external \x1b" not in out
    # the counts are whole at 80 columns; the symlink badge opens its prompt
    assert not any(re.search(r"\d+ [a-z]*…", row) for row in rows), rows
    assert any(re.search(r"\d+ external", row) for row in rows), rows
    assert re.search(r" symlink  \S", [r for r in rows if ROW.match(r).group(1) == "2"][0]), rows
    # the fold sits in the prompt column, whose width is what the other columns leave (their
    # ages and counts): on a slow machine "6, 7" may be cut, never the fold itself
    assert any(re.search(r"↳ rewinds here: 6", line) for line in lines), lines
    wide = ANSI.sub("", run_rewind("list", "--color", "always", cwd=root, env={"COLUMNS": "160"}, check=0).stdout)
    assert "↳ rewinds here: 6, 7 (7 an undo" in wide, wide


def test_n_counts_the_rows_and_names_rewinds_to_older_checkpoints(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "one\n")
    for n in range(1, 5):
        write(root, "a.txt", f"{n}\n")
        run_rewind("save", "-m", f"save {n}", cwd=root, check=0)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    run_rewind("to", "4", "--yes", cwd=root, check=0)
    lines = run_rewind("list", "-n", "2", cwd=root, env=PLAIN, check=0).stdout.splitlines()
    assert _ids(_rows(lines)) == [4, 3], lines
    assert "↳ rewind here: 6 (newest" in lines[1], lines
    assert any(line.startswith("and 1 rewind(s) to older checkpoints: 5 ") and "--every" in line
               for line in lines), lines


def test_show_says_the_time_to_the_second_and_json_keeps_its_format(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    created = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["created_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", created), created
    head = run_rewind("show", "1", cwd=root, env={"TZ": "UTC", **PLAIN}, check=0).stdout.splitlines()[0]
    assert f"  {created[:10]} {created[11:19]}  (" in head, head
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", head) and "T" not in head.split()[3], head
    write(root, "a.txt", "changed\n")
    write(root, "deeper/and/longer/b.txt", "b\n")
    rows = [line for line in run_rewind("show", "1", cwd=root, env=PLAIN, check=0).stdout.splitlines()
            if line.startswith("  ") and "[" in line]
    assert len(rows) == 2 and len({line.index("[") for line in rows}) == 1, rows   # the authors line up


def test_list_before_the_first_checkpoint_says_whether_the_hooks_are_installed(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    bare = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout
    assert "`rewind hooks install claude` takes one at every prompt" in bare, bare
    run_rewind("hooks", "install", "claude", "--project", root, check=0)
    said = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout
    assert "no checkpoints yet: rewind's hooks are installed for claude (local), so the next prompt takes one" in said
    assert "hooks install" not in said, said


def test_the_legend_comes_once_per_terminal_session_and_always_in_the_help(tmp_path):
    root = _recorded(tmp_path)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100")
    cmd = " ".join(shlex.quote(w) for w in REWIND) + " list"

    def session(script: str) -> str:           # one shell of its own session, as a terminal's
        return subprocess.run(["sh", "-c", script], cwd=root, env=env, capture_output=True, text=True,
                              start_new_session=True, timeout=60).stdout

    first, second = session(f"{cmd}; echo ===; {cmd}").split("===\n")
    assert "tool = the agent's edit tools" in first
    assert "tool = the agent" not in second
    rows = [line.split()[0] for line in first.splitlines() if line[:1].isdigit()]
    assert rows and [line.split()[0] for line in second.splitlines() if line[:1].isdigit()] == rows
    assert "tool = the agent's edit tools" in session(cmd)          # another terminal session
    helped = run_rewind("list", "--help", env={"NO_COLOR": "1"}, check=0).stdout
    assert "Who changed it:" in helped and "external = someone else (editor, other process)" in helped
