"""`rewind bisect`: the first checkpoint at which a command fails, found in scratch copies of
the checkpoints (never in the project), with real sessions, real processes and real signals."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from helpers import REWIND, fingerprint, replayed_session, run_rewind, sigint_default, write

WATCH = pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])
CHECK = "import lib, sys\nsys.exit(0 if lib.value() == 1 else 1)\n"


def _scratch(home) -> list[str]:
    base = os.path.join(home, "bisect")
    return os.listdir(base) if os.path.isdir(base) else []


def _until_started(marker, proc, timeout: float = 60) -> None:
    """Until CMD, run by the bisect in `proc`, has touched `marker`."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.returncode
        time.sleep(0.05)


def _session(tmp_path, n: int, breaks_at: int, watch="0", extra=None, in_process=True):
    """n prompts; prompt `breaks_at` makes lib.value() return 2; every prompt adds a file.
    The hooks run in this process (the recorder as `rewind hook claude` hands it on) unless
    `in_process` is off: what bisect does with the checkpoints is the subject here."""
    root = tmp_path / "proj"
    write(root, "lib.py", "def value():\n    return 1\n")
    write(root, "check.py", CHECK)
    prompts = []
    for i in range(1, n + 1):
        calls = [("write", str(root / f"notes/n{i}.txt"), f"note {i}\n")]
        if i == breaks_at:
            calls.append(("bash", "sed -i 's/return 1/return 2/' lib.py"))
        calls += [(kind, path.format(root=root), *rest) for kind, path, *rest in (extra or {}).get(i, [])]
        prompts.append(calls)
    replayed_session(root, tmp_path, watch, prompts, in_process=in_process)
    return root


@WATCH
def test_the_prompt_that_broke_it_is_found_in_log2_n_plus_2_runs_and_the_project_is_not_touched(tmp_path, watch):
    root = _session(tmp_path, 9, breaks_at=6, watch=watch, in_process=False)
    runs = tmp_path / "runs.txt"
    before = fingerprint(root)
    proc = run_rewind("bisect", "--", "sh", "-c", f"echo x >> {runs}; python3 check.py", cwd=root,
                      env={"REWIND_WATCH": watch}, check=0)
    out = proc.stdout.splitlines()
    # checkpoint k is prompt k's: the tree at checkpoint 7 holds prompt 6's work
    assert out[-1] == "first bad: checkpoint 7", proc.stdout
    assert "checkpoint 7 fails; checkpoint 6 passes: prompt 6 broke it (prompt 6)." in proc.stdout
    assert any(line.split() [:2] == ["M", "lib.py"] and line.endswith("[bash: sed -i 's/return 1/return 2/' lib.py]")
               for line in out), proc.stdout
    assert "`rewind revert 6` takes those changes back" in proc.stdout
    n = 10                                                  # 9 checkpoints and now
    assert len(runs.read_text().split()) <= math.ceil(math.log2(n)) + 2
    assert sum(1 for line in out if line.startswith("step ")) == len(runs.read_text().split())
    assert fingerprint(root) == before
    assert _scratch(os.environ["REWIND_HOME"]) == []
    data = json.loads(run_rewind("bisect", "--json", "--", "python3", "check.py", cwd=root,
                                 env={"REWIND_WATCH": watch}, check=0).stdout)
    assert data["first_bad"] == 7 and data["last_good"] == 6 and data["culprits"] == [6]
    assert data["revert"] == "rewind revert 6" and data["to"] == "rewind to 6"
    assert [c["path"] for c in data["changes"]] == ["lib.py", "notes/n6.txt"]
    # and the revert it names makes the command pass again, in the project
    run_rewind("revert", "6", "--yes", cwd=root, env={"REWIND_WATCH": watch}, check=0)
    assert subprocess.run([sys.executable, "check.py"], cwd=root).returncode == 0
    assert (root / "notes/n9.txt").exists()


def test_only_now_failing_is_first_bad_now(tmp_path):
    root = _session(tmp_path, 3, breaks_at=99)
    (root / "lib.py").write_text("def value():\n    return 3\n")      # after the last prompt
    proc = run_rewind("bisect", "--", "python3", "check.py", cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: now", proc.stdout
    assert "`rewind revert 3` takes those changes back" in proc.stdout


def test_a_skip_and_a_timeout_are_stepped_over(tmp_path):
    # prompt 3 adds slow (from checkpoint 4 on), prompt 4 adds skip-me (from checkpoint 5 on):
    # the run at checkpoint 4 sleeps past the timeout, the one at 5 exits 125
    root = _session(tmp_path, 9, breaks_at=6, extra={
        3: [("write", "{root}/slow", "")], 4: [("write", "{root}/skip-me", "")]})
    cmd = ("test -e skip-me && test ! -e notes/n5.txt && exit 125; "
           "test -e slow && test ! -e notes/n4.txt && sleep 120; python3 check.py")
    start = time.monotonic()
    proc = run_rewind("bisect", "--timeout", "5", "--", "sh", "-c", cmd, cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: checkpoint 7", proc.stdout
    assert time.monotonic() - start < 90             # the sleeping run was killed, not waited for
    steps = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert any("checkpoint 5 (prompt: prompt 5): skip (exit 125," in s for s in steps), steps
    assert any("checkpoint 4 (prompt: prompt 4): skip (timed out," in s for s in steps), steps


def test_every_run_skipped_between_says_so_and_exits_1(tmp_path):
    root = _session(tmp_path, 4, breaks_at=3)
    cmd = "test -e notes/n1.txt && test ! -e notes/n3.txt && test -e notes/n2.txt && exit 125; python3 check.py"
    proc = run_rewind("bisect", "--", "sh", "-c", cmd, cwd=root, check=1)
    assert proc.stdout.splitlines()[-1] == "first bad: unknown"
    assert "The first bad one is among: checkpoint 3" in proc.stdout, proc.stdout


def test_what_the_command_changes_in_the_copy_does_not_leak_into_the_next_step(tmp_path):
    root = _session(tmp_path, 8, breaks_at=3)
    # a command that "fixes" lib.py, makes files and removes one, whatever it found
    cmd = ("python3 check.py; r=$?; printf 'def value():\\n    return 1\\n' > lib.py; mkdir -p out; "
           "touch out/junk; rm -f notes/n1.txt; chmod 700 notes; exit $r")
    proc = run_rewind("bisect", "--", "sh", "-c", cmd, cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: checkpoint 4", proc.stdout


def test_a_linked_ignored_venv_is_used_and_without_it_good_is_refused(tmp_path):
    root = _session(tmp_path, 5, breaks_at=4)
    write(root, ".gitignore", ".venv/\n")
    run_rewind("save", "-m", "ignore the venv", cwd=root, check=0)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    cmd = [".venv/bin/python", "check.py"]
    proc = run_rewind("bisect", "--", *cmd, cwd=root)
    assert proc.returncode == 1 and "the good end, checkpoint 1, fails (exit 127)" in proc.stderr, proc.stderr
    assert "rewind bisect: cannot run '.venv/bin/python': No such file or directory" in proc.stderr
    proc = run_rewind("bisect", "--link", ".venv", "--", *cmd, cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: checkpoint 5", proc.stdout
    assert (root / ".venv/bin/python").exists()                   # the person's venv, untouched
    # an editable install of the project in that venv (a .pth naming the project's own
    # directory, as `pip install -e` writes one): `python -m` still runs the copy's code
    site = next((root / ".venv/lib").glob("python3*/site-packages"))
    (site / "_editable_proj.pth").write_text(str(root) + "\n")
    proc = run_rewind("bisect", "--link", ".venv", "--", ".venv/bin/python", "-m", "check", cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: checkpoint 5", proc.stdout
    bad = run_rewind("bisect", "--link", "lib.py", "--", *cmd, cwd=root)
    assert bad.returncode == 1 and "--link lib.py: checkpoint 1 holds it" in bad.stderr


def test_sigint_leaves_nothing_behind(tmp_path):
    root = _session(tmp_path, 4, breaks_at=3)
    before = fingerprint(root)
    marker = tmp_path / "started"
    home = os.environ["REWIND_HOME"]
    proc = subprocess.Popen([*REWIND, "bisect", "--", "sh", "-c",
                             f"python3 check.py || exit 1; touch {marker}; sleep 60"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    _until_started(marker, proc)
    assert _scratch(home)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted: the command's processes are stopped" in err, (out, err)
    assert _scratch(home) == []
    assert fingerprint(root) == before
    sleepers = subprocess.run(["pgrep", "-f", f"touch {marker}; sleep 60"], capture_output=True, text=True)
    assert sleepers.stdout.strip() == "", "the command's processes outlived the bisect"


def test_a_killed_bisects_copy_is_removed_by_the_next_command(tmp_path):
    root = _session(tmp_path, 3, breaks_at=2)
    marker = tmp_path / "started"
    home = os.environ["REWIND_HOME"]
    proc = subprocess.Popen([*REWIND, "bisect", "--", "sh", "-c", f"touch {marker}; sleep 60"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _until_started(marker, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _scratch(home)
    run_rewind("list", cwd=root, check=0)
    assert _scratch(home) == []


def test_bad_input_is_one_line(tmp_path):
    root = _session(tmp_path, 2, breaks_at=2)
    for args, code, words in ((["bisect"], 2, "give the command to run after `--`"),
                              (["bisect", "x", "--", "true"], 2, "'x' is not a checkpoint id"),
                              (["bisect", "now", "--", "true"], 2, "GOOD is a checkpoint"),
                              (["bisect", "2", "1", "--", "true"], 2, "must come after GOOD"),
                              (["bisect", "--timeout", "0", "--", "true"], 2, "--timeout"),
                              (["bisect", "--link", "nope", "--", "true"], 1, "--link nope: no such path"),
                              (["bisect", "--", "false"], 1, "the good end, checkpoint 1, fails (exit 1)"),
                              (["bisect", "--", "true"], 1, "the bad end, now, passes (exit 0)")):
        proc = run_rewind(*args, cwd=root)
        assert proc.returncode == code and words in proc.stderr and "Traceback" not in proc.stderr, \
            (args, proc.returncode, proc.stderr)


def test_the_scratch_copy_is_each_tree_exactly_whatever_the_order(tmp_path):
    """Kinds, modes and links change between checkpoints; the copy, moved from tree to tree
    by their difference (and reset after a command that scribbles on it), is each tree."""
    from helpers import project
    from rewind.capture.working_copy import capture
    from rewind.history.bisect import Scratch
    root = tmp_path / "proj"
    rng = random.Random(7)
    trees, prints = [], []
    write(root, "a/b/c.txt", "c\n")
    write(root, "x", "x\n", mode=0o755)
    os.symlink("x", root / "l")
    states = [
        lambda: None,
        lambda: (os.unlink(root / "x"), os.mkdir(root / "x"), write(root, "x/inner", "i\n")),
        lambda: (os.unlink(root / "l"), os.symlink("a", root / "l"), os.chmod(root / "a/b", 0o700)),
        lambda: (subprocess.run(["rm", "-r", str(root / "a")], check=True), write(root, "a", "a is a file\n")),
        lambda: (os.mkdir(root / "empty"), os.chmod(root / "x/inner", 0o600)),
    ]
    p = project(root)
    try:
        for change in states:
            change()
            cp, _ = capture(p, "manual")
            trees.append(cp.tree)
            prints.append(fingerprint(root))
        with Scratch(p, []) as scratch:
            order = list(range(len(trees))) * 3
            rng.shuffle(order)
            for i in order:
                scratch.checkout(trees[i])
                assert fingerprint(scratch.root) == prints[i], i
                # a command's scribbles, then the reset that finds them
                with open(os.path.join(scratch.root, "junk"), "w") as f:
                    f.write("junk")
                target = os.path.join(scratch.root, sorted(os.listdir(scratch.root))[0])
                if os.path.isfile(target) and not os.path.islink(target):
                    with open(target, "a") as f:
                        f.write("scribble")
                scratch.reset()
            base = scratch.base
        assert not os.path.exists(base)
    finally:
        p.close()


@pytest.mark.parametrize("files", [10_000])
def test_a_project_of_10000_files(tmp_path, files):
    root = tmp_path / "proj"
    for i in range(files):
        write(root, f"d{i % 100:02d}/f{i}.txt", f"file {i}\n")
    write(root, "lib.py", "def value():\n    return 1\n")
    write(root, "check.py", CHECK)
    run_rewind("save", "-m", "one", cwd=root, check=0)
    for i in range(2, 6):
        for j in range(20):
            write(root, f"d{j:02d}/f{j}.txt", f"file {j} at {i}\n")
        if i == 4:
            write(root, "lib.py", "def value():\n    return 2\n")
        run_rewind("save", "-m", f"save {i}", cwd=root, check=0)
    proc = run_rewind("bisect", "--json", "--", "python3", "check.py", cwd=root, check=0)
    data = json.loads(proc.stdout)
    assert data["first_bad"] == 4 and data["last_good"] == 3
    assert _scratch(os.environ["REWIND_HOME"]) == []


def test_gc_waits_while_a_bisect_runs_and_a_large_file_is_named(tmp_path):
    root = _session(tmp_path, 3, breaks_at=2)
    with open(root / "big.bin", "wb") as f:            # sparse, past the size limit: never stored
        f.truncate(51 * 1024 * 1024)
    run_rewind("save", "-m", "with a big file", cwd=root, check=0)
    marker = tmp_path / "started"
    proc = subprocess.Popen([*REWIND, "bisect", "--json", "--", "sh", "-c",
                             f"test -e big.bin && echo big-here; touch {marker}; sleep 1; python3 check.py"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _until_started(marker, proc)
    gc = run_rewind("gc", cwd=root)
    assert gc.returncode != 0 and "a bisect is running" in gc.stderr, (gc.returncode, gc.stderr)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["first_bad"] == 3 and data["missing"] == ["big.bin"], data
    assert "big-here" not in "\n".join(data["tail"])


def test_a_command_that_makes_a_directory_read_only_and_writes_in_it_does_not_break_the_next_step(tmp_path):
    root = _session(tmp_path, 6, breaks_at=4)
    cmd = "touch notes/junk; chmod 500 notes; python3 check.py"
    proc = run_rewind("bisect", "--", "sh", "-c", cmd, cwd=root, check=0)
    assert proc.stdout.splitlines()[-1] == "first bad: checkpoint 5", proc.stdout
    assert _scratch(os.environ["REWIND_HOME"]) == []
