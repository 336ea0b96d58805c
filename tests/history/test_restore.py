"""The core promise, as a property: for random trees and random mutations, `to` gives back
the saved tree byte for byte, and `undo` gives back the mutated tree."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from helpers import fingerprint, project, run_rewind
from rewind.capture.working_copy import capture
from rewind.history.restore import restore, undo

NAMES = ["a", "b.txt", "Ünïcode-é.md", "space name", "new\nline", "tab\tname", "日本語.py",
         "x.py", "bin.dat", "UPPER", "-dash", ".hidden", os.fsdecode(b"bad\xffbyte"), "d"]
FILE_MODES = [0o644, 0o755, 0o600, 0o640, 0o700]
DIR_MODES = [0o755, 0o700, 0o750]


def _content(rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 3000)))
    words = ["def", "x", "=", "1", "\n", "return", "class", "é", "\t"]
    return "".join(rng.choice(words) + " " for _ in range(rng.randint(0, 400))).encode()


def _entries(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if not p.endswith(".log"):
                out.append(p)
    return sorted(out)


def _make(rng, path, outside, depth):
    r = rng.random()
    if r < 0.5 or depth >= 3:
        with open(path, "wb") as f:
            f.write(_content(rng))
        os.chmod(path, rng.choice(FILE_MODES))
    elif r < 0.72:
        os.mkdir(path)
        for _ in range(rng.randint(0, 4)):
            child = os.path.join(path, rng.choice(NAMES))
            if not os.path.lexists(child):
                _make(rng, child, outside, depth + 1)
        os.chmod(path, rng.choice(DIR_MODES))
    else:
        target = rng.choice(["a", "b.txt", "d", "missing-target", outside, os.path.join(outside, "f"),
                             "../" * (depth + 1) + "outside-rel", "/"])
        os.symlink(target, path)


def _build(rng, root, outside):
    for _ in range(rng.randint(1, 8)):
        p = os.path.join(root, rng.choice(NAMES))
        if not os.path.lexists(p):
            _make(rng, p, outside, 0)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _mutate(rng, root, outside):
    for _ in range(rng.randint(1, 7)):
        entries = _entries(root)
        op = rng.choice(["create", "modify", "delete", "chmod", "to_dir", "to_file", "to_link"])
        if op == "create" or not entries:
            parent = rng.choice([root] + [e for e in entries if os.path.isdir(e) and not os.path.islink(e)])
            p = os.path.join(parent, rng.choice(NAMES))
            if not os.path.lexists(p):
                _make(rng, p, outside, 1)
            continue
        p = rng.choice(entries)
        is_file = os.path.isfile(p) and not os.path.islink(p)
        is_dir = os.path.isdir(p) and not os.path.islink(p)
        if op == "modify" and is_file:
            with open(p, "ab" if rng.random() < 0.5 else "wb") as f:
                f.write(_content(rng) or b"!")
        elif op == "delete":
            _remove(p)
        elif op == "chmod" and (is_file or is_dir):
            os.chmod(p, rng.choice(DIR_MODES if is_dir else FILE_MODES))
        elif op == "to_dir":
            _remove(p)
            os.mkdir(p)
            with open(os.path.join(p, "inner.txt"), "wb") as f:
                f.write(b"inner")
        elif op == "to_file":
            _remove(p)
            with open(p, "wb") as f:
                f.write(_content(rng))
        elif op == "to_link":
            _remove(p)
            os.symlink(rng.choice(["a", outside, "nowhere"]), p)


def _fp(root):
    return {k: v for k, v in fingerprint(root).items() if not k.endswith(".log")}


def _random_project(tmp_path, seed):
    """A random tree in tmp_path/proj, with tmp_path/outside for its links to point at."""
    rng = random.Random(seed)
    root, outside = tmp_path / "proj", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "f").write_bytes(b"outside, never touched")
    (root / ".gitignore").write_text("*.log\n")
    (root / "keep.log").write_text("ignored: never stored, never touched")
    _build(rng, str(root), str(outside))
    return rng, root, outside


@pytest.mark.parametrize("seed", range(240))
def test_to_gives_back_the_saved_tree_and_undo_the_mutated_one(tmp_path, seed):
    rng, root, outside = _random_project(tmp_path, seed)
    proj = project(root)
    cp, _ = capture(proj, "manual")
    saved = _fp(root)
    _mutate(rng, str(root), str(outside))
    (root / "keep.log").write_text("ignored, changed after the save")
    mutated = _fp(root)

    restore(proj, cp)
    assert _fp(root) == saved
    assert (root / "keep.log").read_text() == "ignored, changed after the save"

    undo(proj)
    assert _fp(root) == mutated
    assert (outside / "f").read_bytes() == b"outside, never touched"
    assert sorted(os.listdir(outside)) == ["f"]
    proj.close()


@pytest.mark.parametrize("seed", [1000, 1001, 1002, 1003])
def test_roundtrip_through_the_installed_command(tmp_path, seed):
    rng, root, outside = _random_project(tmp_path, seed)
    run_rewind("save", "-m", "before", cwd=root, check=0)
    saved = _fp(root)
    _mutate(rng, str(root), str(outside))
    (root / "surely-new.txt").write_text("new")
    mutated = _fp(root)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert _fp(root) == saved
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert _fp(root) == mutated
    # undo again walks further back: nothing left to undo here
    assert "Nothing to undo" in run_rewind("undo", "--yes", cwd=root, check=0).stdout
