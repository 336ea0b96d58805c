"""Holes an outside review found (issue "Never lose a byte, whatever the world does"), one
test each: the terminal, the log, symlinked settings, setuid files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time

import pytest

from helpers import REWIND, run_rewind, write

@pytest.fixture
def coarse(tmp_path):
    """A directory on a filesystem whose file times count whole seconds: ext4 made with
    128-byte inodes, loop-mounted (needs root and mkfs.ext4; skipped elsewhere)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root and mkfs.ext4 for a loop mount")
    img, mnt = tmp_path / "coarse.img", tmp_path / "coarse"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-I", "128", str(img)], check=True, capture_output=True)
    if subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("loop mounts are not available here")
    try:
        probe = mnt / "probe"
        probe.write_text("x")
        assert probe.stat().st_mtime_ns % 10**9 == 0, "not a whole-second filesystem"
        probe.unlink()
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def start_of_a_second() -> None:
    """Wait for the first tenth of a second: what follows shares one second of file time."""
    while time.time() % 1 > 0.1:
        time.sleep(0.005)


ESC_PROMPT = "clear\x1b[2J\x1b[Hthe screen, \x1b]0;a title\x07 and \u202ereversed\u202c, \ud800 a broken emoji"


def hook(payload: dict, root, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), capture_output=True, text=True,
                          cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), **(env or {})}, timeout=60)


def test_prompts_and_commands_reach_the_terminal_escaped(tmp_path):
    """Escape sequences in a prompt or a command could clear the screen or redraw a
    restore plan above its question: every view shows them escaped."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    base = {"session_id": "s", "cwd": str(root)}
    assert hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": ESC_PROMPT}, root).returncode == 0
    cmd = "echo x > b.txt \x1b[1A\x1b[2K# hidden"
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t1",
           "tool_input": {"command": cmd}}
    hook(pre, root)
    write(root, "b.txt", "x")
    hook({**pre, "hook_event_name": "PostToolUse"}, root)
    hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "second"}, root)
    outs = [run_rewind(*args, cwd=root, check=0).stdout
            for args in (["list"], ["show", "1"], ["to", "1", "--dry-run"], ["diff", "1", "--stat"])]
    for out in outs:
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, repr(out)
    assert "\\x1b[2J" in outs[0] and "\\u202e" in outs[1] and "\\ud800" in outs[1]
    assert "\\x1b[1A" in outs[1]
    # the JSON keeps the text as it was, escaped by JSON itself
    shown = json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)
    assert shown["prompt"] == "second"


def test_the_log_is_private_whatever_the_umask_and_never_written_through_a_link(tmp_path):
    home = tmp_path / "a" / "b" / "home"
    env = {**os.environ, "REWIND_HOME": str(home)}
    proc = subprocess.run(["sh", "-c", f"umask 000; exec {' '.join(REWIND)} hook no-such-agent"], input="{}",
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout == ""
    log = home / "rewind.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for d in (home, home.parent, home.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    # a link planted at the log's name is not followed
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("untouched")
    log.unlink()
    log.symlink_to(secret)
    subprocess.run([*REWIND, "hook", "no-such-agent"], input="{}", capture_output=True, text=True, env=env,
                   timeout=60)
    assert secret.read_text() == "untouched" and log.is_symlink()


def test_hooks_install_and_uninstall_write_through_a_symlinked_settings_file(tmp_path):
    """Settings kept in a dotfiles repository and linked into place stay a link."""
    root = tmp_path / "proj"
    root.mkdir()
    dotfiles = tmp_path / "dotfiles" / "claude.json"
    original = '{\n  "permissions": {"allow": ["Bash(ls)"]}\n}\n'
    write(dotfiles.parent, dotfiles.name, original)
    link = root / ".claude" / "settings.local.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    assert link.is_symlink() and os.readlink(link) == str(dotfiles)
    assert "UserPromptSubmit" in json.loads(dotfiles.read_text())["hooks"]
    run_rewind("hooks", "uninstall", "claude", cwd=root, check=0)
    assert link.is_symlink() and dotfiles.read_text() == original
    assert not (root / ".claude" / "settings.local.json.rewind-backup").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only root can write another user's setuid file")
def test_root_restores_a_setuid_file_without_its_setuid_bit(tmp_path):
    root = tmp_path / "proj"
    f = write(root, "tool", "#!/bin/sh\n", mode=0o4755)
    g = write(root, "shared", "x", mode=0o2750)
    run_rewind("save", cwd=root, check=0)
    f.unlink()
    g.chmod(0o640)
    plan = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    assert "without their setuid/setgid bit" in plan and "tool" in plan
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert f.read_text() == "#!/bin/sh\n" and stat.S_IMODE(f.stat().st_mode) == 0o755
    assert stat.S_IMODE(g.stat().st_mode) == 0o750


def test_a_lone_surrogate_anywhere_never_loses_the_checkpoint(tmp_path):
    """Half an emoji (a lone UTF-16 surrogate) in a prompt, a command, a path or a session
    id, and undecodable bytes in `save -m`: kept escaped, the checkpoint taken."""
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    base = {"session_id": "s\ud83d", "cwd": str(root)}
    hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix the \ud83d bug"}, root)
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t\udfff",
           "tool_input": {"command": "echo \ud800 > b.txt"}}
    hook(pre, root)
    write(root, "b.txt", "x")
    hook({**pre, "hook_event_name": "PostToolUse"}, root)
    edit = {**base, "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "w1",
            "tool_input": {"file_path": str(root / "c\udc00.txt"), "content": "c"}}
    hook(edit, root)
    hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "second"}, root)
    cps = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
    assert [c["prompt"] for c in cps] == ["second", "fix the \\ud83d bug"]
    assert cps[1]["session_id"] == "s\\ud83d"
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    b = [c for c in shown["changes"] if c["path"] == "b.txt"][0]
    assert b["source"] == "bash" and b["command"] == "echo \\ud800 > b.txt"
    assert not (os.path.exists(os.environ["REWIND_HOME"] + "/rewind.log")), open(
        os.environ["REWIND_HOME"] + "/rewind.log").read()
    proc = subprocess.run([*REWIND, "save", "-m", b"note \xff\xfe".decode("utf-8", "surrogateescape")],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["message"] == "note \\xff\\xfe"


@pytest.mark.parametrize("where", ["home-in-project", "home-is-a-project-subdir-of-a-git-repo"])
def test_the_store_inside_the_project_is_never_captured_nor_touched(tmp_path, where):
    """`cd ~` with the default data dir under ~/.local/share, or REWIND_HOME inside the
    project: the data dir is left out like .git/, and a restore never touches it."""
    root = tmp_path / "proj"
    write(root, "a.txt", "mine v1")
    if where.endswith("git-repo"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    home = root / ".local" / "share" / "rewind"
    env = {**os.environ, "REWIND_HOME": str(home)}
    run_rewind("save", cwd=root, env=env, check=0)
    write(root, "a.txt", "mine v2, my own edit")
    run_rewind("save", cwd=root, env=env, check=0)
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, env=env, check=0).stdout)
    assert [c["path"] for c in shown["changes"]] == ["a.txt"]
    out = run_rewind("to", "1", "--yes", cwd=root, env=env, check=0)
    assert (root / "a.txt").read_text() == "mine v1"
    assert json.loads(run_rewind("verify", "--json", cwd=root, env=env, check=0).stdout)["ok"], out
    cps = json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)
    assert [c["id"] for c in cps] == [3, 2, 1]
    run_rewind("undo", "--yes", cwd=root, env=env, check=0)
    assert (root / "a.txt").read_text() == "mine v2, my own edit"
    assert json.loads(run_rewind("verify", "--json", cwd=root, env=env, check=0).stdout)["ok"]
    # and the data dir itself is no project
    lone = tmp_path / "lone-home"
    run_rewind("save", cwd=root, env={"REWIND_HOME": str(lone)}, check=0)
    inside = run_rewind("save", "--project", lone / "objects", cwd=tmp_path, env={"REWIND_HOME": str(lone)})
    assert inside.returncode == 1 and "rewind's own data directory" in inside.stderr, inside
    assert "Traceback" not in inside.stderr


def test_a_persons_file_named_like_rewinds_temporary_files_is_kept(tmp_path):
    root = tmp_path / "proj"
    write(root, ".rewind-tmp-notes", "mine")
    write(root, "sub/.rewind-tmp-1.2.bak", "mine too")
    run_rewind("save", cwd=root, check=0)
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    (root / ".rewind-tmp-notes").unlink()
    (root / "sub/.rewind-tmp-1.2.bak").write_text("changed")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / ".rewind-tmp-notes").read_text() == "mine"
    assert (root / "sub/.rewind-tmp-1.2.bak").read_text() == "mine too"
    assert shown["id"] == 1


def test_a_write_during_a_restore_is_never_overwritten(tmp_path):
    """Another process writes after the restore's safety scan, before the restore reaches
    the path: what it wrote is in no checkpoint, so the restore leaves it and says so."""
    from helpers import project
    from rewind.history.restore import restore
    root = tmp_path / "proj"
    write(root, "edited.txt", "v1")
    write(root, "gone.txt", "v1")
    write(root, "olddir/keep.txt", "v1")
    run_rewind("save", cwd=root, check=0)                       # checkpoint 1
    write(root, "edited.txt", "v2")
    (root / "gone.txt").unlink()
    write(root, "newdir/n.txt", "new")
    write(root, "untouched.txt", "v2")
    run_rewind("save", cwd=root, check=0)                       # checkpoint 2

    def meanwhile(phase, done, total):
        if phase == "writing" and done == 0:                    # after the safety checkpoint
            write(root, "edited.txt", "v3")                     # same size, same second
            write(root, "gone.txt", "created meanwhile")
            write(root, "newdir/late.txt", "written meanwhile")
    proj = project(root)
    try:
        target = proj.catalog.checkpoint(proj.id, 1)
        safety, plan, done = restore(proj, target, progress=meanwhile)
    finally:
        proj.close()
    left = dict(plan.left)
    assert set(left) >= {"edited.txt", "gone.txt", "newdir"}, plan.left
    assert (root / "edited.txt").read_text() == "v3"
    assert (root / "gone.txt").read_text() == "created meanwhile"
    assert (root / "newdir/late.txt").read_text() == "written meanwhile"
    assert not (root / "untouched.txt").exists()               # the rest was done
    # the next rewind stores what was written meanwhile first, and finishes
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "edited.txt").read_text() == "v1" and not (root / "newdir").exists()
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "edited.txt").read_text() == "v3"
    assert (root / "newdir/late.txt").read_text() == "written meanwhile"


def test_a_same_size_edit_in_the_scans_own_second_is_captured_on_a_whole_second_filesystem(coarse):
    """The store on a fine-grained filesystem, the project on a whole-second one: an edit of
    the same size in the same second as a scan has the same stat as the scan saw. Git's
    racy rule must compare with the project filesystem's clock, not the store's."""
    from helpers import project
    from rewind.capture.snapshot import TreeLoader
    from rewind.capture.working_copy import capture
    root = coarse / "proj"
    write(root, "f.txt", "aaaa")
    for _ in range(5):
        proj = project(root)
        try:
            start_of_a_second()
            second = int(time.time())
            (root / "f.txt").write_text("aaaa")            # the scan reads it in this second
            capture(proj, "manual", full=True)
            with open(root / "f.txt", "r+") as f:          # same inode, same size, same second
                f.write("bbbb")
            if int(time.time()) != second:
                continue                                   # the second rolled over: try again
            cp, _ = capture(proj, "manual")
            entry = TreeLoader(proj.store)(cp.tree)["f.txt"]
            assert proj.store.get(entry.oid) == (root / "f.txt").read_bytes()
            break
        finally:
            proj.close()
    else:
        pytest.skip("no run fitted in one second (a very busy machine)")
    diff = run_rewind("diff", "last~1", "last", "--name-only", cwd=root, check=0).stdout
    assert diff.split() == ["f.txt"]


def test_a_write_during_a_restore_is_never_overwritten_on_a_whole_second_filesystem(coarse):
    """Item 2's check where the stat cannot tell: the same size, the same second."""
    from helpers import project
    from rewind.history.restore import restore
    root = coarse / "proj"
    write(root, "f.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    write(root, "f.txt", "v2")
    run_rewind("save", cwd=root, check=0)

    def meanwhile(phase, done, total):
        if phase == "writing" and done == 0:
            with open(root / "f.txt", "r+") as f:          # same inode, same size, same second
                f.write("v3")
    for _ in range(5):
        proj = project(root)
        try:
            start_of_a_second()
            second = int(time.time())
            _, plan, _ = restore(proj, proj.catalog.checkpoint(proj.id, 1), progress=meanwhile)
        finally:
            proj.close()
        if int(time.time()) == second:
            break
        write(root, "f.txt", "v2")
    assert dict(plan.left).get("f.txt") == "changed since the scan", plan.left
    assert (root / "f.txt").read_text() == "v3"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_hostile_rewind_toml_neither_hangs_nor_fills_the_memory(tmp_path, kind):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    toml = root / ".rewind.toml"
    if kind == "fifo":
        os.mkfifo(toml)
    elif kind == "dev-zero":
        toml.symlink_to("/dev/zero")
    else:
        toml.write_text("ring_size = 5\n" + "#" * (1 << 20))
    proc = subprocess.run([*REWIND, "save"], cwd=root, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert ".rewind.toml" in proc.stderr and "Traceback" not in proc.stderr
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": "p"}
    started = time.monotonic()
    assert hook(payload, root).returncode == 0
    assert time.monotonic() - started < 20
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 2


@pytest.mark.parametrize("head", ["ref: ../../../../../../etc/passwd", "fifo", "ref: refs/heads/../../../../x"])
def test_a_hostile_git_head_is_never_followed_out_nor_blocks(tmp_path, head):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    (root / ".git").mkdir()
    if head == "fifo":
        os.mkfifo(root / ".git" / "HEAD")
    else:
        (root / ".git" / "HEAD").write_text(head + "\n")
    proc = subprocess.run([*REWIND, "save"], cwd=root, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)
    assert shown["git_head"] is None and "root:" not in json.dumps(shown)


def _corrupt(home, data: bytes) -> str:
    import hashlib
    oid = hashlib.sha256(data).hexdigest()
    path = os.path.join(home, "objects", oid[:2], oid[2:])
    os.chmod(path, 0o600)
    raw = bytearray(open(path, "rb").read())
    raw[-1] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    return oid


def test_a_refused_restore_leaves_the_ring_as_it_was(tmp_path):
    """A rewind refused for a damaged object used to add its safety checkpoint all the same,
    pushing an intact old checkpoint out of a full ring."""
    root = tmp_path / "proj"
    write(root, ".rewind.toml", "ring_size = 3\n")
    for i in range(3):
        write(root, "a.txt", f"version {i}\n")
        write(root, f"only{i}.txt", f"only in checkpoint {i + 1}\n")
        run_rewind("save", cwd=root, check=0)
    _corrupt(os.environ["REWIND_HOME"], b"version 1\n")     # checkpoint 2's a.txt
    before = [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]
    for _ in range(3):
        r = run_rewind("to", "2", "--yes", cwd=root)
        assert r.returncode == 1 and "Traceback" not in r.stderr
    after = [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]
    assert after == before == [3, 2, 1]
    run_rewind("to", "1", "--yes", cwd=root, check=0)         # intact: still there, restorable
    assert (root / "a.txt").read_text() == "version 0\n"


def test_a_damaged_object_under_what_a_restore_overwrites_is_mended_from_the_file_first(tmp_path):
    """The safety checkpoint must be whole before anything is written: a file whose stored
    copy is damaged is stored again from its own bytes, then overwritten; undo gives it back."""
    root = tmp_path / "proj"
    write(root, "a.txt", "first\n")
    run_rewind("save", cwd=root, check=0)
    write(root, "a.txt", "mine, precious\n")
    run_rewind("save", cwd=root, check=0)
    _corrupt(os.environ["REWIND_HOME"], b"mine, precious\n")
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "first\n"
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "mine, precious\n"


def test_a_full_disk_during_a_restore_says_what_state_the_tree_is_in(coarse):
    """The project's filesystem fills half-way through a restore: the message says how
    far it got and what brings the tree back; a restore that could write nothing takes
    its safety checkpoint back and says the tree is as it was."""
    root = coarse / "proj"
    env = {"REWIND_HOME": os.environ["REWIND_HOME"]}       # the store elsewhere, with room
    big = os.urandom(3 << 20)
    for name in ("a.bin", "b.bin", "c.bin"):
        write(root, name, big + name.encode())
    run_rewind("save", cwd=root, env=env, check=0)
    for name in ("a.bin", "b.bin", "c.bin"):
        (root / name).unlink()
    run_rewind("save", cwd=root, env=env, check=0)
    filler = root.parent / "filler"
    free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
    with open(filler, "wb") as f:                            # room for one file, not three
        f.write(b"\0" * max(0, free - (4 << 20)))
    r = run_rewind("to", "1", "--yes", cwd=root, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "stopped after 1 of 3 steps" in r.stderr and "rewind to 3" in r.stderr, r.stderr
    assert not [n for n in os.listdir(root) if n.startswith(".rewind-tmp-")]
    run_rewind("to", "3", "--yes", cwd=root, env=env, check=0)   # back as it was before
    assert sorted(os.listdir(root)) == []
    filler.unlink()
    with open(filler, "wb") as f:                            # now not even one fits
        f.write(b"\0" * max(0, os.statvfs(root).f_bavail * os.statvfs(root).f_frsize - (1 << 20)))
    before = [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)]
    r = run_rewind("to", "1", "--yes", cwd=root, env=env)
    assert r.returncode == 1 and "before changing anything" in r.stderr and "as it was" in r.stderr, r.stderr
    after = [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, env=env, check=0).stdout)]
    assert after == before


def _damage_file(path: str) -> None:
    os.chmod(path, 0o600)
    raw = bytearray(open(path, "rb").read())
    raw[-1] ^= 0xFF
    open(path, "wb").write(bytes(raw))


def test_one_damaged_tree_stays_local(tmp_path):
    """A damaged tree of the newest checkpoint used to make list, save, every `to` and the
    prompt hooks fail. Now: everything else works, the damage is named, the tree is stored
    afresh from the disk, and `verify --drop-damaged` forgets what cannot be given back."""
    from helpers import project
    from rewind.capture.snapshot import TreeLoader
    root = tmp_path / "proj"
    write(root, "keep.txt", "one")
    run_rewind("save", cwd=root, check=0)                     # 1: intact
    write(root, "sub/a.txt", "a")
    write(root, "sub/b.txt", "b")
    run_rewind("save", cwd=root, check=0)                     # 2: its sub/ tree gets damaged
    proj = project(root)
    sub = TreeLoader(proj.store)(proj.catalog.checkpoint(proj.id, 2).tree)["sub"].oid
    proj.close()
    _damage_file(os.path.join(os.environ["REWIND_HOME"], "objects", sub[:2], sub[2:]))
    write(root, "sub/b.txt", "b, edited: the diff must read the damaged tree")
    r = run_rewind("list", cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "unknown" in run_rewind("show", "2", cwd=root, check=0).stdout
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": "go on"}
    assert hook(payload, root).returncode == 0               # 3: a prompt still gets its checkpoint
    write(root, "new.txt", "new")
    run_rewind("save", cwd=root, check=0)                     # 4
    ids = [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]
    assert ids == [4, 3, 2, 1]
    run_rewind("to", "1", "--yes", cwd=root, check=0)         # an intact checkpoint restores
    assert sorted(os.listdir(root)) == ["keep.txt"]
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert (root / "sub/b.txt").read_text() == "b, edited: the diff must read the damaged tree"
    # the damage stayed with checkpoint 2 (sub/ changed since, so no file holds that tree now)
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    assert [p["checkpoints"] for p in report["problems"]] == [[2]], report
    run_rewind("verify", "--drop-damaged", "--yes", cwd=root, check=0)
    assert 2 not in [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    run_rewind("gc", cwd=root, check=0)


def test_drop_damaged_forgets_only_what_cannot_be_given_back(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "lost forever")
    run_rewind("save", cwd=root, check=0)                     # 1
    write(root, "a.txt", "kept")
    run_rewind("save", cwd=root, check=0)                     # 2
    import hashlib
    oid = hashlib.sha256(b"lost forever").hexdigest()
    _damage_file(os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:]))
    r = run_rewind("verify", cwd=root)
    assert r.returncode == 1 and "--drop-damaged" in r.stdout
    refused = run_rewind("verify", "--drop-damaged", cwd=root)   # no terminal, no --yes
    assert refused.returncode == 1
    run_rewind("verify", "--drop-damaged", "--yes", cwd=root, check=0)
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)] == [2]
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    run_rewind("gc", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "kept"


def test_a_damaged_blob_is_stored_afresh_once_known(tmp_path):
    """Known damaged, the content is read from the file again instead of trusted from the
    stat cache: deleting the file afterwards loses nothing."""
    root = tmp_path / "proj"
    write(root, "precious.txt", "only copy on disk")
    run_rewind("save", cwd=root, check=0)
    import hashlib
    oid = hashlib.sha256(b"only copy on disk").hexdigest()
    _damage_file(os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:]))
    assert run_rewind("verify", cwd=root).returncode == 1       # now known
    run_rewind("save", cwd=root, check=0)
    (root / "precious.txt").unlink()
    run_rewind("save", cwd=root, check=0)
    run_rewind("to", "2", "--yes", cwd=root, check=0)
    assert (root / "precious.txt").read_text() == "only copy on disk"
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]


def test_verify_names_every_checkpoint_that_needs_a_damaged_object_and_a_damaged_pack(tmp_path):
    root = tmp_path / "proj"
    write(root, "shared.txt", "in every checkpoint")
    for i in range(3):
        write(root, "n.txt", str(i))
        run_rewind("save", cwd=root, check=0)
    import hashlib
    oid = hashlib.sha256(b"in every checkpoint").hexdigest()
    _damage_file(os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:]))
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    (p,) = [p for p in report["problems"] if p.get("object") == oid]
    assert sorted(p["checkpoints"]) == [1, 2, 3]
    # a pack cut short: named as a pack, not only as missing objects
    for i in range(20):
        write(root, f"many/f{i}.txt", f"file {i} " * 300)
    run_rewind("save", cwd=root, check=0)
    packs = os.path.join(os.environ["REWIND_HOME"], "objects", "pack")
    name = sorted(os.listdir(packs))[-1]
    with open(os.path.join(packs, name), "r+b") as f:
        f.truncate(100)
    report = json.loads(run_rewind("verify", "--json", cwd=root, check=1).stdout)
    assert any(p.get("pack") == name for p in report["problems"]), report["problems"]


def test_a_restore_keeps_rewinds_own_hooks_in_the_agents_settings(tmp_path):
    """`rewind to` a checkpoint from before `hooks install` used to delete the settings file,
    and with it the recording, without a word."""
    import shlex
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)                               # 1: no settings file
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    settings = root / ".claude" / "settings.local.json"
    data = json.loads(settings.read_text())
    data["permissions"] = {"allow": ["Bash(npm test)"]}
    settings.write_text(json.dumps(data))
    run_rewind("save", cwd=root, check=0)                               # 2
    plan = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    assert "keep  .claude/settings.local.json" in plan, plan
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    after = json.loads(settings.read_text())
    assert "permissions" not in after                                   # the file is checkpoint 1's...
    ours = after["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]  # ...with rewind's hooks kept
    assert shlex.split(ours)[-1] == "claude"
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root),
                          "prompt": "still recorded"})
    subprocess.run(ours, shell=True, input=payload, text=True, cwd=root, check=True,
                   env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)})
    assert json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["prompt"] == "still recorded"
    run_rewind("undo", "--yes", cwd=root, check=0)                      # and undo gives the rest back
    assert json.loads(settings.read_text())["permissions"] == {"allow": ["Bash(npm test)"]}


def test_a_hook_that_could_not_record_shows_until_the_next_checkpoint(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    base = {"session_id": "s", "cwd": str(root)}
    assert hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "one"}, root).returncode == 0
    objects = os.path.join(os.environ["REWIND_HOME"], "objects")
    os.rename(objects, objects + ".away")
    with open(objects, "w") as f:                              # objects/ is a file: no write succeeds
        f.write("not a directory")
    try:
        write(root, "b.txt", "b")
        r = hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "two"}, root)
        assert r.returncode == 0 and r.stdout == ""            # the agent goes on
    finally:
        os.unlink(objects)
        os.rename(objects + ".away", objects)
    listed = run_rewind("list", cwd=root, check=0)
    assert "1 hook call(s) could not record" in listed.stderr, listed.stderr
    assert run_rewind("list", "--json", cwd=root, check=0).stdout.startswith("[")
    status = json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)
    assert len(status["hook_failures"]) == 1 and status["hook_failures"][0]["event"] == "UserPromptSubmit"
    doctor = run_rewind("doctor", cwd=root)
    assert doctor.returncode == 1 and "could not record" in doctor.stdout
    assert hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "three"}, root).returncode == 0
    assert "could not record" not in run_rewind("list", cwd=root, check=0).stderr
    assert json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)["hook_failures"] == []


def test_system_directories_and_the_home_directory_are_no_projects_unless_allowed(tmp_path):
    base = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "p"}
    for cwd in ("/etc", "/usr/lib", "/"):
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps({**base, "cwd": cwd}), text=True,
                           capture_output=True, cwd="/", timeout=60, env={**os.environ, "CLAUDE_PROJECT_DIR": cwd})
        assert r.returncode == 0 and r.stdout == ""
    projects = json.loads(run_rewind("status", "--all", "--json", cwd=tmp_path, check=0).stdout)["projects"]
    assert projects == []
    home = os.path.realpath(os.environ["HOME"])
    write(home, "notes.txt", "x")
    r = run_rewind("save", cwd=home)
    assert r.returncode == 1 and "home directory itself" in r.stderr and "allow_roots" in r.stderr
    cfg = os.path.join(os.environ["REWIND_HOME"], "config", "config.toml")
    os.makedirs(os.path.dirname(cfg), exist_ok=True)
    with open(cfg, "w") as f:
        f.write(f'allow_roots = ["{home}"]\n')
    run_rewind("save", cwd=home, check=0)
    # a project's own .rewind.toml cannot allow anything
    write(tmp_path / "p", ".rewind.toml", 'allow_roots = ["/etc"]\n')
    assert "user's config.toml only" in run_rewind("save", cwd=tmp_path / "p", check=0).stderr


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_catalog_is_named_and_doctor_still_runs(tmp_path, damage):
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)
    cat = os.path.join(os.environ["REWIND_HOME"], "catalog.sqlite")
    for extra in ("-wal", "-shm"):
        if os.path.exists(cat + extra):
            os.unlink(cat + extra)
    if damage == "garbage":
        with open(cat, "wb") as f:
            f.write(b"this is not a database at all" * 200)
    else:
        with open(cat, "r+b") as f:
            f.seek(100)
            f.write(os.urandom(4096))
    for args in (["list"], ["save"], ["to", "1", "--yes"], ["status"]):
        r = run_rewind(*args, cwd=root)
        assert r.returncode in (1, 2) and "Traceback" not in r.stderr and "internal error" not in r.stderr, (args, r)
        assert "catalog" in r.stderr, (args, r.stderr)
    d = run_rewind("doctor", cwd=root)
    assert d.returncode == 1 and "damaged" in d.stdout and "Traceback" not in d.stderr, d
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(root), "prompt": "p"}
    assert hook(payload, root).returncode == 0
    assert (root / "a.txt").read_text() == "a"


def test_a_moved_project_points_to_its_history_and_a_path_below_a_new_symlink_restores(tmp_path):
    root = tmp_path / "proj"
    write(root, "dir/file.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    # a directory that became a symlink since: a path below it is still the project's
    os.rename(root / "dir", root / "elsewhere")
    os.symlink("elsewhere", root / "dir")
    run_rewind("to", "1", "--yes", "--", "dir/file.txt", cwd=root, check=0)
    assert not (root / "dir").is_symlink() and (root / "dir/file.txt").read_text() == "v1"
    assert (root / "elsewhere/file.txt").read_text() == "v1"          # never written through
    # moved: the new place has no history, and says where it is
    moved = tmp_path / "new-home" / "proj"
    moved.parent.mkdir()
    os.rename(root, moved)
    out = run_rewind("list", cwd=moved, check=0).stdout
    assert "no checkpoints yet" in out and str(root) in out and "--project" in out
    listed = json.loads(run_rewind("list", "--project", root, "--json", cwd=moved, check=0).stdout)
    assert [c["id"] for c in listed][-1] == 1


def test_a_deleted_wal_is_detected_and_no_number_is_reused_nor_content_swept(tmp_path):
    import shutil as sh
    import sqlite3
    from rewind.store.objects import digest_of
    root = tmp_path / "proj"
    write(root, "a.txt", "a")
    run_rewind("save", cwd=root, check=0)                      # 1, in the catalog file itself
    cat = os.path.join(os.environ["REWIND_HOME"], "catalog.sqlite")
    hold = sqlite3.connect(cat)                                # keeps 2 and 3 in the WAL
    hold.execute("SELECT count(*) FROM meta").fetchall()
    secret = b"only checkpoint 2 holds this " + os.urandom(8)
    write(root, "b.txt", secret)
    run_rewind("save", cwd=root, check=0)                      # 2
    (root / "b.txt").unlink()
    run_rewind("save", cwd=root, check=0)                      # 3
    sh.copy(cat, str(tmp_path / "without-wal"))
    hold.close()
    sh.copy(str(tmp_path / "without-wal"), cat)                # as if catalog.sqlite-wal was deleted
    for extra in ("-wal", "-shm"):
        if os.path.exists(cat + extra):
            os.unlink(cat + extra)
    listed = run_rewind("list", "--json", cwd=root, check=0)
    assert [c["id"] for c in json.loads(listed.stdout)] == [1]
    assert "checkpoints 2–3 of" in listed.stderr and "missing" in listed.stderr, listed.stderr
    run_rewind("save", cwd=root, check=0)
    assert json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["id"] == 4   # never 2 again
    assert run_rewind("doctor", cwd=root).returncode == 1
    oid = digest_of(secret)
    path = os.path.join(os.environ["REWIND_HOME"], "objects", oid[:2], oid[2:])
    gc = run_rewind("gc", cwd=root, check=0)
    assert os.path.exists(path) and "forget-lost" in gc.stderr
    run_rewind("gc", "--forget-lost", cwd=root, check=0)
    assert not os.path.exists(path)
    assert "missing" not in run_rewind("list", cwd=root, check=0).stderr


def _immutable(path, on: bool) -> bool:
    """chattr +i: a directory nobody may write in, root included (as a read-only directory is
    for a user who is not root)."""
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chattr"), reason="needs root and chattr")
def test_a_directory_it_may_not_write_stops_a_restore_with_the_state_said(tmp_path):
    """A restore that can never finish (a directory it may not write, as a read-only one is
    for a user who is not root): the message says how far it got and what brings the tree
    back, and that does."""
    root = tmp_path / "proj"
    write(root, "a/one.txt", "v1")
    write(root, "b/two.txt", "v1")
    run_rewind("save", cwd=root, check=0)
    write(root, "a/one.txt", "v2")
    write(root, "b/two.txt", "v2")
    run_rewind("save", cwd=root, check=0)
    if not _immutable(root / "b", True):
        pytest.skip("this filesystem has no immutable attribute")
    try:
        r = run_rewind("to", "1", "--yes", cwd=root)
    finally:
        _immutable(root / "b", False)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "stopped after 1 of 2 steps" in r.stderr and "rewind to 3" in r.stderr, r.stderr
    assert (root / "a/one.txt").read_text() == "v1" and (root / "b/two.txt").read_text() == "v2"
    assert not [n for n in os.listdir(root / "b") if n.startswith(".rewind-tmp-")]
    run_rewind("to", "3", "--yes", cwd=root, check=0)           # back as it was
    assert (root / "a/one.txt").read_text() == "v2"
