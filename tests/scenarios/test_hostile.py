"""Hostile trees, a damaged store, a full disk, a read-only store, and privacy: each case
saved, changed, restored both ways with the real command, and checked against the bytes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from helpers import REWIND, fingerprint, project, rewritten_in_place, run_rewind, write
from rewind.store.objects import Store, digest_of

ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")


def roundtrip(root: Path, mutate) -> tuple[dict, dict]:
    """save A, mutate, save B; `to 1` gives A, `to 2` gives B; verify stays clean."""
    run_rewind("save", cwd=root, check=0)
    a = fingerprint(root)
    mutate()
    run_rewind("save", cwd=root, check=0)
    b = fingerprint(root)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert fingerprint(root) == a
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert fingerprint(root) == b
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    return a, b


# -- hostile trees ------------------------------------------------------------------------------

def test_symlink_loops_and_links_out_of_the_tree_are_links_never_followed(tmp_path):
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(outside, "secret.txt", "outside the project")
    write(root, "a.txt", "a")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.symlink(".", root / "self")
    os.symlink("..", root / "parent")
    os.symlink("/", root / "slash")
    os.symlink(str(outside), root / "out")

    def mutate():
        os.unlink(root / "out")
        os.symlink(str(outside / "secret.txt"), root / "out")
        (root / "self").unlink()
        os.symlink("a.txt", root / "self")
    roundtrip(root, mutate)
    proj = project(root)
    from rewind.capture.snapshot import TreeLoader
    tree = TreeLoader(proj.store)(proj.catalog.latest(proj.id).tree)
    assert {n for n, e in tree.items() if e.kind == "L"} == {"loop1", "loop2", "self", "parent", "slash", "out"}
    assert "outside the project" not in json.dumps(
        [proj.store.get(e.oid).decode("latin-1") for e in tree.values() if e.kind != "D"])
    assert (outside / "secret.txt").read_text() == "outside the project"
    proj.close()


def test_a_directory_replaced_by_a_link_between_checkpoints(tmp_path):
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(outside, "keep.txt", "must not be touched")
    write(root, "d/inner.txt", "inner")

    def mutate():
        shutil.rmtree(root / "d")
        os.symlink(str(outside), root / "d")
    roundtrip(root, mutate)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "d").is_dir() and not (root / "d").is_symlink()
    assert sorted(os.listdir(outside)) == ["keep.txt"] and (outside / "keep.txt").read_text() == "must not be touched"


def test_fifos_sockets_and_devices_are_skipped_reported_and_never_opened(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    os.mkfifo(root / "fifo")        # opening it for reading would block forever
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(root / "sock"))
    if ROOT:
        os.mknod(root / "null-dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    proc = run_rewind("save", cwd=root, check=0)
    assert "special files skipped" in proc.stderr and "fifo" in proc.stderr
    write(root, "a.txt", "b")
    run_rewind("save", cwd=root, check=0)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert stat.S_ISFIFO(os.lstat(root / "fifo").st_mode) and stat.S_ISSOCK(os.lstat(root / "sock").st_mode)
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    assert {"fifo", "sock"} <= set(shown["skipped"]["special"])
    s.close()


@pytest.mark.skipif(ROOT and not SETPRIV, reason="as root, unreadable files need setpriv to drop CAP_DAC_OVERRIDE")
def test_unreadable_files_and_directories_are_reported_and_never_deleted(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    write(root, "locked.txt", "no read permission")
    write(root, "closed/inside.txt", "cannot list")
    os.chmod(root / "locked.txt", 0)
    os.chmod(root / "closed", 0)
    prefix = [SETPRIV, "--inh-caps=-dac_override,-dac_read_search",
              "--bounding-set=-dac_override,-dac_read_search"] if ROOT else []

    def rw(*args, check=0):
        p = subprocess.run([*prefix, *REWIND, *args], cwd=root, capture_output=True, text=True, timeout=60)
        assert p.returncode == check, p
        return p
    try:
        out = rw("save")
        assert "unreadable" in out.stderr and "locked.txt" in out.stderr and "closed" in out.stderr
        write(root, "a.txt", "changed")
        rw("save")
        rw("to", "1", "--yes")
        assert (root / "a.txt").read_text() == "a"
    finally:
        os.chmod(root / "closed", 0o755)
        os.chmod(root / "locked.txt", 0o644)
    assert (root / "locked.txt").read_text() == "no read permission"
    assert (root / "closed/inside.txt").read_text() == "cannot list"


def test_a_file_that_changes_while_being_read_is_never_stored_torn(tmp_path):
    """A writer rewrites a file in place, in two halves, without pause. The file itself is
    half old, half new at moments (the writer's own doing: "torn on purpose"), and the
    kernel sets its times when a write starts, before it copies the data. A checkpoint holds
    the file as it was at one instant, or reports it as changing: never a mix of pages it
    never held at once (old, new, old again), which one read alongside a write can give.
    On a busy machine the writer can stall in the middle of a write for as long as a whole
    read takes, so an instant when it was half written is a fair result; "A" or "B" alone
    is not a promise any reader can keep."""
    root = tmp_path / "proj"
    a, b = b"A" * 4_000_000, b"B" * 4_000_000
    write(root, "busy.bin", a)
    write(root, "calm.txt", "calm")
    with rewritten_in_place(root / "busy.bin", a, b):   # in place, not atomic: torn on purpose
        results = [run_rewind("save", cwd=root, check=0) for _ in range(4)]
    proj = project(root)
    from rewind.capture.snapshot import TreeLoader
    torn = 0
    for cp in proj.catalog.checkpoints(proj.id):
        e = TreeLoader(proj.store)(cp.tree).get("busy.bin")
        if e is not None:
            data = proj.store.get(e.oid)
            rest = data.lstrip(data[:1])          # one run of a byte, then one run of another
            torn += not (len(data) == len(a) and rest == rest[:1] * len(rest))
        else:
            assert "busy.bin" in cp.stats.get("changing", [])
    assert torn == 0
    assert any("kept changing" in r.stderr for r in results) or proj.catalog.count(proj.id) == 4
    proj.close()


def test_very_long_paths_and_case_only_renames(tmp_path):
    root = tmp_path / "proj"
    deep = "/".join(["d" * 200] * 25)                 # over PATH_MAX (4096) in all
    base = root
    for part in deep.split("/"):
        base = base / part
    fd = os.open(root.parent, os.O_RDONLY)
    os.close(fd)
    cur = str(root)
    os.makedirs(cur)
    dfd = os.open(cur, os.O_RDONLY)
    try:                                              # build it with dir fds: the path is too long
        for part in deep.split("/"):
            os.mkdir(part, dir_fd=dfd)
            nfd = os.open(part, os.O_RDONLY, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        f = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
        os.write(f, b"at the bottom")
        os.close(f)
    finally:
        os.close(dfd)
    write(root, "readme.txt", "lower")

    def mutate():
        os.rename(root / "readme.txt", root / "README.txt")
        (root / "README.txt").write_text("upper")
    run_rewind("save", cwd=root, check=0)
    mutate()
    run_rewind("save", cwd=root, check=0)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert sorted(n for n in os.listdir(root) if n.endswith(".txt")) == ["readme.txt"]
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert sorted(n for n in os.listdir(root) if n.endswith(".txt")) == ["README.txt"]
    proj = project(root)
    from rewind.capture.snapshot import TreeLoader
    load = TreeLoader(proj.store)
    t = load(proj.catalog.latest(proj.id).tree)
    for _ in range(25):
        t = load(t["d" * 200].oid)
    assert proj.store.get(t["deep.txt"].oid) == b"at the bottom"
    proj.close()


def test_hard_links_are_flagged_and_the_restore_says_it_breaks_them(tmp_path):
    root = tmp_path / "proj"
    write(root, "one.txt", "shared")
    os.link(root / "one.txt", root / "two.txt")
    run_rewind("save", cwd=root, check=0)
    (root / "one.txt").write_text("changed through one name")       # both names see it
    run_rewind("save", cwd=root, check=0)
    shown = {c["path"]: c for c in json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["changes"]}
    assert "hardlink" in shown["one.txt"]["flags"] and "hardlink" in shown["two.txt"]["flags"]
    out = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert "hard link" in out
    assert (root / "one.txt").read_text() == (root / "two.txt").read_text() == "shared"


# -- a damaged store ----------------------------------------------------------------------------

def _objects(home):
    return [p for p in (Path(home) / "objects").rglob("*") if p.is_file()]


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "delete", "empty"])
def test_a_damaged_object_is_named_and_to_refuses_before_touching_the_tree(tmp_path, damage):
    root = tmp_path / "proj"
    write(root, "a.txt", "first version of a " * 50)
    write(root, "b.txt", "b")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "second")
    run_rewind("save", cwd=root, check=0)
    obj = Store(os.environ["REWIND_HOME"]).path(digest_of(("first version of a " * 50).encode()))
    raw = Path(obj).read_bytes()
    if damage == "truncate":
        Path(obj).write_bytes(raw[: len(raw) // 2])
    elif damage == "bitflip":
        Path(obj).write_bytes(raw[:-3] + bytes([raw[-3] ^ 0x10]) + raw[-2:])
    elif damage == "empty":
        Path(obj).write_bytes(b"")
    else:
        os.unlink(obj)
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    assert not report["ok"] and any(p.get("object", "").startswith(Path(obj).parent.name) for p in report["problems"])
    before = fingerprint(root)
    proc = run_rewind("to", "1", "--yes", cwd=root, check=1)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert fingerprint(root) == before


def test_crafted_catalog_rows_and_trees_cannot_reach_outside(tmp_path):
    """A catalog row whose tree names `..`, an object id that is a path, a change row with
    an absolute path: verify names them, `to` refuses, nothing outside is read or written."""
    root, outside = tmp_path / "proj", tmp_path / "outside"
    write(outside, "victim.txt", "untouched")
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    proj = project(root)
    store, db = proj.store, proj.catalog.db
    evil_names = b"rewind-tree 1\nF 644 " + digest_of(b"x").encode() + b" 1\t..\0"
    evil_oid = b"rewind-tree 1\nF 644 ../../../../outside/victim.txt 9\tv.txt\0"
    good = digest_of(b"x")
    store.put(b"x", good)
    ids = [store.put(evil_names), store.put(evil_oid)]
    store.flush()
    with proj.catalog.transaction():
        for n, tid in enumerate(ids, start=10):
            db.execute("INSERT INTO checkpoints(project_id, number, kind, created_at, created_ns, tree, stats) "
                       "VALUES (?, ?, 'manual', '2026-01-01T00:00:00Z', ?, ?, '{}')", (proj.id, n, time.time_ns(), tid))
        db.execute("INSERT INTO changes(project_id, number, path, status, source) VALUES (?, 1, ?, 'modified', 'tool')",
                   (proj.id, os.fsencode(str(outside / "victim.txt"))))
        db.execute("INSERT INTO changes(project_id, number, path, status, source) VALUES (?, 1, ?, 'modified', 'tool')",
                   (proj.id, b"../outside/victim.txt"))
    proj.close()
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    text = json.dumps(report["problems"])
    assert "does not parse" in text and "outside the project" in text
    before = fingerprint(root)
    for n in ("10", "11"):
        proc = run_rewind("to", n, "--yes", cwd=root, check=1)
        assert "Traceback" not in proc.stderr
    assert fingerprint(root) == before
    assert sorted(os.listdir(outside)) == ["victim.txt"] and (outside / "victim.txt").read_text() == "untouched"


# -- a full disk, a read-only store ----------------------------------------------------------------

@pytest.mark.skipif(not ROOT, reason="mounting a small tmpfs needs root")
@pytest.mark.parametrize("files", [1, 280], ids=["one-big-file", "many-files-in-a-pack-on-background-writers"])
def test_a_full_disk_gives_a_clear_error_and_nothing_half_written(tmp_path, files):
    home = tmp_path / "small-home"
    home.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(home)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        env = {"REWIND_HOME": str(home)}
        root = tmp_path / "proj"
        write(root, "small.txt", "fits")
        run_rewind("save", cwd=root, env=env, check=0)
        for i in range(files):                             # incompressible: cannot fit
            write(root, f"big/{i}.bin", os.urandom(600_000 // files))
        proc = run_rewind("save", cwd=root, env=env)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error:") and proc.stderr.count("\n") == 1, proc.stderr
        assert "space" in proc.stderr.lower()
        assert not list((home / "tmp").glob("*")) if (home / "tmp").exists() else True
        shutil.rmtree(root / "big")
        report = json.loads(run_rewind("verify", "--json", cwd=root, env=env, check=0).stdout)
        assert report["ok"]
        assert len(json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)) == 1
    finally:
        subprocess.run(["umount", str(home)])


@pytest.mark.skipif(ROOT and not SETPRIV, reason="as root, a read-only store needs setpriv to drop CAP_DAC_OVERRIDE")
def test_a_read_only_store_gives_a_clear_error(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    home = Path(os.environ["REWIND_HOME"])
    modes = {p: p.stat().st_mode for p in [home, *home.rglob("*")]}
    for p in [home, *home.rglob("*")]:
        os.chmod(p, stat.S_IMODE(p.stat().st_mode) & ~0o222)
    prefix = [SETPRIV, "--inh-caps=-dac_override,-dac_read_search",
              "--bounding-set=-dac_override,-dac_read_search"] if ROOT else []
    try:
        write(root, "a.txt", "changed")
        p = subprocess.run([*prefix, *REWIND, "save"], cwd=root, capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "Traceback" not in p.stderr and p.stderr.startswith("error:"), p
        assert p.stderr.count("\n") == 1
    finally:
        for path, mode in modes.items():
            os.chmod(path, stat.S_IMODE(mode))
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 1


# -- privacy -----------------------------------------------------------------------------------

def test_the_store_is_private_even_with_umask_000_and_the_log_holds_no_content(tmp_path):
    root = tmp_path / "proj"
    secret = "s3cr3t-content-" + os.urandom(8).hex()
    write(root, "key.txt", secret)
    env = {**os.environ}
    for cmd in (["save"], ["save", "-m", "x"], ["gc"], ["verify"]):
        subprocess.run([*REWIND, *cmd], cwd=root, env=env, capture_output=True, timeout=60,
                       preexec_fn=lambda: os.umask(0), check=True)
    # a hook that fails (a bad payload) and one that works, both logging
    for payload in (b"{not json " + secret.encode(), json.dumps(
            {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root),
             "prompt": "p"}).encode()):
        subprocess.run([*REWIND, "hook", "claude"], input=payload, cwd=root, capture_output=True, timeout=60,
                       preexec_fn=lambda: os.umask(0), env={**env, "REWIND_HOOK_TRACE": "1"})
    home = Path(os.environ["REWIND_HOME"])
    for p in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        if p.is_dir():
            assert mode == 0o700, (p, oct(mode))
        else:
            assert mode & 0o077 == 0, (p, oct(mode))
    for log in home.rglob("*.log"):
        assert secret not in log.read_text(errors="replace")
