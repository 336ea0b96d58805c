"""Names in plain output are quoted as git quotes them: no two names print alike, no control
character reaches the terminal, and the printed form reads back to the exact name. JSON keeps
the names as they are."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from helpers import REWIND, run_rewind, write

NEWLINE, BACKSLASH_N = "a\nb", "a\\nb"           # a real newline; a backslash and an n
NAMES = [NEWLINE, BACKSLASH_N, 'q"uote', "tab\there", "back\\slash", "esc\x1b[2J", "plain é.txt",
         "cr\rx", os.fsdecode(b"bad\xffbyte")]
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_C = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(text: str) -> str:
    """git's C-style unquoting (unquote_c_style): the name a printed path stands for."""
    if not text.startswith('"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
        elif body[i + 1] in _C:
            out.append(_C[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
    return os.fsdecode(bytes(out))


def printed_names(out: str) -> set[str]:
    """Every name a plain listing shows: the quoted ones, read back, and the plain one."""
    names = {unquote(q) for q in QUOTED.findall(out)}
    return names | ({"plain é.txt"} if "plain é.txt" in out else set())


@pytest.fixture(params=["0", "1"], ids=["hooks-only", "with-watcher"])
def two_checkpoints(tmp_path, request, monkeypatch):
    monkeypatch.setenv("REWIND_WATCH", request.param)
    root = tmp_path / "proj"
    write(root, "keep.txt", "k\n")
    run_rewind("save", "-m", "before", cwd=root, check=0)
    for name in NAMES:
        write(root, name, f"content of {name!r}\n")
    run_rewind("save", "-m", "after", cwd=root, check=0)
    return root


def test_plain_output_quotes_names_so_none_print_alike_and_each_reads_back(two_checkpoints):
    root = two_checkpoints
    outs = {" ".join(args): run_rewind(*args, cwd=root, env={"NO_COLOR": "1"}, check=0).stdout
            for args in (["show", "1"], ["diff", "1", "--name-only"], ["diff", "1", "--stat"],
                         ["to", "1", "--dry-run"], ["diff", "1"])}
    for what, out in outs.items():
        assert "\x1b" not in out and "\r" not in out and "\t" not in out, (what, out)
        if what != "diff 1":
            assert printed_names(out) >= set(NAMES), (what, out)
    # the unified diff names each file as git does: +++ "b/NAME" (contents are not names)
    plus = [unquote(line[4:]) for line in outs["diff 1"].splitlines() if line.startswith("+++ ")]
    assert sorted(plus) == sorted("b/" + n for n in NAMES), plus
    # the two look-alikes, as git prints them
    name_only = outs["diff 1 --name-only"].splitlines()
    assert '"a\\nb"' in name_only and '"a\\\\nb"' in name_only, name_only
    assert sorted(map(unquote, name_only)) == sorted(NAMES)            # one line each, read back exactly
    assert '+++ "b/a\\nb"' in outs["diff 1"] and '+++ "b/a\\\\nb"' in outs["diff 1"]
    # JSON keeps the raw names (bytes that are not UTF-8 as they are)
    shown = raw_json(root, "show", "1", "--json")
    assert {c["path"] for c in shown["changes"]} == set(NAMES)
    assert set(raw_json(root, "diff", "1", "--name-only", "--json")) == set(NAMES)


def raw_json(root, *args):
    proc = subprocess.run([*REWIND, *args], cwd=root, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc
    return json.loads(proc.stdout.decode("utf-8", "surrogateescape"))


def test_the_quoting_is_gits_own(two_checkpoints):
    """For names git prints as rewind does (core.quotePath off, names that are UTF-8), the
    lines are the same: git's readers read rewind's."""
    root = two_checkpoints
    utf8 = sorted(n for n in NAMES if "\udcff" not in n)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    listed = subprocess.run(["git", "-c", "core.quotePath=false", "ls-files", "--others", "--", *utf8], cwd=root,
                            check=True, capture_output=True, text=True).stdout.splitlines()
    ours = run_rewind("diff", "1", "--name-only", cwd=root, check=0).stdout.splitlines()
    assert sorted(listed) == sorted(line for line in ours if unquote(line) in utf8)
