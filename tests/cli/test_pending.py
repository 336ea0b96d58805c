"""Pending checkpoints on the command line: a prompt that comes while the watcher's
first scan of the tree runs is recorded at once and completed by that scan. `list`, `show` and
the picker say so; `to`, `diff` and `export` wait for it (a spinner on a terminal), give up
after REWIND_SETTLE_TIMEOUT seconds with one line and nothing changed, and Ctrl-C changes
nothing either. A checkpoint completed by the scan names the paths changed from outside the
agent meanwhile.

The watcher's first scan is played by this test process: a watcher row in its pid, its lock
held, the scan marked running, a heartbeat kept fresh by a thread; the prompt is recorded through the real
`capture.pending.begin`, on a real catalog and store, and the installed `rewind` runs on it.
Where the watcher would complete the checkpoint, `complete_as_the_watcher_does` writes the
row its completion writes (the tree at the prompt, with `stats["first_scan"]`) and drops the
pending one, in one transaction.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import threading
import time

from helpers import REWIND, fingerprint, project, run_rewind, write
from rewind import clock
from rewind.capture import pending

PLAIN = {"NO_COLOR": "1", "COLUMNS": "100"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WAITING = "checkpoint 2 is being completed by the watcher's first scan of the tree"


class FirstScan:
    """The watcher's first scan of `root`, running while inside (the watcher played by this
    process: its pid, a fresh heartbeat every 0.2 s from a thread with its own catalog)."""

    def __init__(self, root):
        self.root = root

    def __enter__(self):
        from rewind.catalog.db import Catalog
        proj = project(self.root)
        self.home, self.pid = proj.home, proj.id
        from rewind.capture.dirty import lock_name
        from rewind.lock import try_lock
        self.lock = try_lock(proj.home, lock_name(proj.id))     # a live watcher holds its lock
        proj.catalog.register_watcher(self.pid, os.getpid(), clock.wall_ns(), False)
        proj.catalog.set_baseline(self.pid, os.getpid(), clock.wall_ns())
        proj.close()
        self.stop = threading.Event()

        def beat():
            catalog = Catalog(self.home)
            try:
                while not self.stop.wait(0.2):
                    with catalog.transaction():
                        catalog.heartbeat(self.pid, os.getpid(), clock.wall_ns(), 0, 0, None, False)
            finally:
                catalog.close()
        self.thread = threading.Thread(target=beat, daemon=True)
        self.thread.start()
        return self

    def prompt(self, text: str) -> int:
        """A prompt's checkpoint, recorded as pending (as the prompt hook does meanwhile)."""
        proj = project(self.root)
        try:
            number = pending.begin(proj, "prompt", text, {"agent": "claude", "session_id": "s-pending"})
        finally:
            proj.close()
        assert number is not None, "the first scan should be running"
        return number

    def saw(self, path: str, kind: str) -> None:
        """An event of the watcher's stream, as its observer writes it."""
        from rewind.catalog.db import Catalog
        catalog = Catalog(self.home)
        try:
            catalog.add_watch_events(self.pid, {path: (kind, clock.wall_ns(), None)})
        finally:
            catalog.close()

    def over(self) -> None:
        """The scan is in (its completion not written: whoever takes the lock next does it)."""
        proj = project(self.root)
        try:
            proj.catalog.set_baseline(self.pid, os.getpid(), None)
        finally:
            proj.close()

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        os.close(self.lock)


def complete_as_the_watcher_does(root, number: int, tree: str, first_scan: dict | None = None) -> None:
    proj = project(root)
    try:
        cp = proj.catalog.pending_one(proj.id, number)
        cp.tree, cp.stats = tree, {"first_scan": first_scan or _first_scan(cp)}
        with proj.catalog.transaction():
            proj.catalog.insert_checkpoint(cp)
            proj.catalog.drop_pending(proj.id, number)
    finally:
        proj.close()


def _first_scan(cp, outside=(), by="watcher", note=None) -> dict:
    return {"pending_ns": cp.created_ns, "completed_ns": clock.wall_ns(), "by": by,
            "changed_outside": list(outside)[:100], "changed_outside_count": len(outside),
            "events_lost": False, "note": note}


def _saved(tmp_path):
    """A project with checkpoint 1 (saved by hand): its root and checkpoint 1's tree."""
    root = tmp_path / "proj"
    write(root, "a.txt", "alpha\n")
    write(root, "src/b.txt", "beta\n")
    run_rewind("save", "-m", "first", cwd=root, check=0)
    tree = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["tree"]
    return root, tree


def test_list_shows_a_pending_checkpoint_among_the_others_plain_rich_and_json(tmp_path):
    root, _ = _saved(tmp_path)
    with FirstScan(root) as scan:
        assert scan.prompt("refactor the parser") == 2
        lines = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout.splitlines()
        assert re.match(r"^2 +\d+s ago +prompt +first scan running +\[pending\] +refactor the parser$", lines[0]), lines
        assert re.match(r"^1 +\d+s ago +manual +no changes +first$", lines[1]), lines

        out = run_rewind("list", "--color", "always", cwd=root, env={"COLUMNS": "100"}, check=0).stdout
        assert "\x1b[1;7;33m pending \x1b[0m" in out, out        # a reversed yellow badge
        rows = [ANSI.sub("", line) for line in out.splitlines()]
        assert rows[0].split()[:4] == ["id", "age", "kind", "changes"], rows
        assert rows[1].split()[0] == "2" and "first scan running" in rows[1] and "refactor the parser" in rows[1]

        listed = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
        assert [(c["id"], c["pending"]) for c in listed] == [(2, True), (1, False)]
        two = listed[0]
        assert (two["kind"], two["prompt"], two["agent"], two["session_id"]) == (
            "prompt", "refactor the parser", "claude", "s-pending")
        assert two["tree"] == "" and two["summary"] == {"changes": 0, "sources": {}, "flags": {}}
        assert two["first_scan"] is None and set(listed[1]) <= set(two)       # every field, the same ones

        # -n counts it as a row; --every and --all show it too
        assert [c["id"] for c in json.loads(run_rewind("list", "-n", "1", "--json", cwd=root, check=0).stdout)] == [2]
        one = run_rewind("list", "-n", "1", cwd=root, env=PLAIN, check=0).stdout.splitlines()
        assert one[0].startswith("2 ") and not any(line.startswith("1 ") for line in one), one
        assert "[pending]" in run_rewind("list", "--every", cwd=root, env=PLAIN, check=0).stdout
        everywhere = json.loads(run_rewind("list", "--all", "--json", cwd=root, check=0).stdout)
        assert [(c["id"], c["pending"]) for c in everywhere] == [(2, True), (1, False)]


def test_show_says_who_completes_a_pending_checkpoint_and_json_marks_it(tmp_path):
    root, _ = _saved(tmp_path)
    with FirstScan(root) as scan:
        scan.prompt("refactor the parser")
        for spec in ("2", "last"):
            out = run_rewind("show", spec, cwd=root, env=PLAIN, check=0).stdout
            assert out.startswith("checkpoint 2  prompt  "), out
            assert "prompt:   refactor the parser" in out and "agent:    claude  session s-pending" in out
            assert re.search(r"pending:  being completed by the watcher's first scan of the tree "
                             r"\((?:running|pending) since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, \d+s ago\)", out), out
            assert "`rewind to 2` waits for it" in out
        shown = json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)
        assert shown["pending"] is True and shown["changes"] == [] and shown["tree"] == ""
        assert json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["pending"] is False
        # the checkpoint before it: its changes run live to now, across the pending prompt
        before = run_rewind("show", "1", cwd=root, env=PLAIN, check=0).stdout
        assert "until now (the working tree), across checkpoint 2 (still being completed)" in before, before
        # the ids complete to it too
        proc = run_rewind(env={"_REWIND_COMPLETE": "complete_bash", "COMP_WORDS": "rewind show ", "COMP_CWORD": "2"},
                          cwd=root)
        assert "2" in proc.stdout.split(), proc.stdout


def test_show_and_list_name_what_changed_from_outside_during_the_first_scan(tmp_path):
    root, _ = _saved(tmp_path)
    outside = [f"gen/file{i:03}.txt" for i in range(130)]
    with FirstScan(root) as scan:
        scan.prompt("add the cache")
        proj = project(root)
        cp = proj.catalog.pending_one(proj.id, 2)
        proj.close()
        first = _first_scan(cp, outside, by="hook", note="the watcher stopped during its first scan")
        first["events_lost"] = True
        tree = json.loads(run_rewind("show", "1", "--json", cwd=root, check=0).stdout)["tree"]
        complete_as_the_watcher_does(root, 2, tree, first)
    out = run_rewind("show", "2", cwd=root, env=PLAIN, check=0).stdout
    assert "pending:" not in out
    assert ("first scan: the prompt came during the watcher's first scan; completed by a later hook "
            "(the watcher's first scan did not finish it)") in out, out
    assert ("130 path(s) changed from outside the agent during that scan: what they held at the prompt is not "
            "known, so the checkpoint holds their later content") in out, out
    assert "    gen/file000.txt\n" in out and "gen/file019.txt" in out and "gen/file020.txt" not in out
    assert "… and 110 more (`rewind show 2 --json` lists up to 100)" in out
    assert "the watcher lost events during that scan" in out
    assert "note: the watcher stopped during its first scan" in out
    shown = json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)
    assert shown["pending"] is False and shown["first_scan"]["changed_outside"] == outside[:100]
    assert shown["first_scan"]["changed_outside_count"] == 130
    rows = run_rewind("list", cwd=root, env=PLAIN, check=0).stdout.splitlines()
    assert "[not exact]" in rows[0] and rows[0].startswith("2 ") and "[not exact]" not in rows[1], rows

    # one completed by the watcher with nothing from outside: a short section, no badge
    write(root, "c.txt", "gamma\n")
    with FirstScan(root) as scan:
        scan.prompt("and the docs")
        complete_as_the_watcher_does(root, 3, tree)
    out = run_rewind("show", "3", cwd=root, env=PLAIN, check=0).stdout
    assert "completed by the watcher's first scan of the tree, 0 s after the prompt" in out \
        or re.search(r"completed by the watcher's first scan of the tree, \d+(\.\d)? s after the prompt", out), out
    assert "from outside" not in out and "[not exact]" not in run_rewind("list", "-n", "1", cwd=root, env=PLAIN).stdout


def test_to_waits_for_a_pending_checkpoint_and_restores_it_once_complete(tmp_path):
    root, tree = _saved(tmp_path)
    with FirstScan(root) as scan:
        scan.prompt("write the cache")
        write(root, "cache.py", "# the agent's, after the prompt\n")       # the agent at work
        proc = subprocess.Popen([*REWIND, "to", "2", "--yes"], cwd=root, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            said = proc.stderr.readline()
            assert said.startswith(f"rewind: {WAITING}; waiting for it (up to 10 min)"), said
            assert os.path.exists(root / "cache.py")        # nothing is touched while it waits
            complete_as_the_watcher_does(root, 2, tree)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, (out, err)
    assert "checkpoint 2" in out and not os.path.exists(root / "cache.py"), out
    assert "Traceback" not in err


def test_to_diff_and_export_give_up_after_the_settle_timeout_and_change_nothing(tmp_path):
    root, _ = _saved(tmp_path)
    with FirstScan(root) as scan:
        scan.prompt("write the cache")
        write(root, "cache.py", "# the agent's\n")
        before = fingerprint(root)
        for args in (["to", "2", "--yes"], ["to", "last"], ["diff", "2"], ["diff", "1", "2"], ["export", "2"]):
            proc = run_rewind(*args, cwd=root, env={"REWIND_SETTLE_TIMEOUT": "0.5"})
            assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
            lines = proc.stderr.splitlines()
            assert lines == [f"rewind: {WAITING}; waiting for it (up to 0.5 s)",
                             f"error: {WAITING.replace('is being', 'is still being')} (waited 0.5 s); nothing was "
                             "changed (`rewind list` shows when it is complete; REWIND_SETTLE_TIMEOUT=SECONDS waits "
                             "longer)"], (args, proc.stderr)
            assert proc.stdout == "", (args, proc.stdout)
        assert fingerprint(root) == before
        assert not os.path.exists(root / ".git")                   # export wrote no commit either
        proc = run_rewind("to", "2", cwd=root, env={"REWIND_SETTLE_TIMEOUT": "soon"})
        assert (proc.returncode, proc.stderr) == (1, "error: REWIND_SETTLE_TIMEOUT='soon' is not a number of seconds\n")
        listed = json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)
        assert listed[0]["pending"] is True                          # still there, still pending


def _sigint_default() -> None:
    """In the child before exec: a suite started in the background (`pytest &`, `setsid`, an
    xdist worker) runs with SIGINT ignored, and Python keeps an ignored SIGINT ignored; rewind
    must get it as a person's ^C (it hung here until the test's bound, twice)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _on_a_terminal_until(args, cwd, text: str):
    """Start the installed `rewind` on a pseudo-terminal; returns it once it drew `text`,
    with the master end and what it drew."""
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen([*REWIND, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, COLUMNS="200"), preexec_fn=_sigint_default)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while text.encode() not in ANSI.sub("", seen.decode(errors="replace")).encode():
        assert time.monotonic() < deadline and proc.poll() is None, seen
        if select.select([master], [], [], 1)[0]:
            seen += os.read(master, 65536)
    return proc, master, seen


def _drain(master) -> bytes:
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            return out
        if not data:
            return out
        out += data


def _wait_reading(proc, master, timeout: float = 120) -> tuple[int, bytes]:
    """Wait for `proc` to exit while reading what it draws, as a terminal does: a pty nobody
    reads fills after a few KiB, and a process writing its last lines to it would block."""
    out = b""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, out
        if select.select([master], [], [], 0.2)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    return proc.wait(timeout=timeout), out + _drain(master)


def test_ctrl_c_while_waiting_on_a_terminal_changes_nothing_and_exits_130(tmp_path):
    root, _ = _saved(tmp_path)
    with FirstScan(root) as scan:
        scan.prompt("write the cache")
        write(root, "cache.py", "# the agent's\n")
        before = fingerprint(root)
        proc, master, seen = _on_a_terminal_until(["to", "2", "--yes"], root, f"{WAITING}…")
        try:
            os.kill(proc.pid, signal.SIGINT)
            code, drawn_after = _wait_reading(proc, master)
            seen += drawn_after
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        drawn = ANSI.sub("", seen.decode(errors="replace"))
        assert code == 130, drawn
        assert "error: interrupted while waiting for checkpoint 2: nothing was changed" in drawn, drawn
        assert "Traceback" not in drawn
        assert fingerprint(root) == before
        assert json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)[0]["pending"] is True


def test_to_completes_a_pending_checkpoint_itself_when_the_first_scan_is_over(tmp_path):
    root, _ = _saved(tmp_path)
    with FirstScan(root) as scan:
        scan.prompt("write the cache")
        write(root, "cache.py", "# the agent's, after the prompt\n")
        scan.saw("cache.py", "c")    # the watcher's event for it (this process plays the watcher)
        proc = subprocess.Popen([*REWIND, "to", "2", "--yes"], cwd=root, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr.readline().startswith(f"rewind: {WAITING}; waiting for it")
            scan.over()              # the scan is in, its completion not written: `to` does it, under the lock
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, (out, err)
    assert not os.path.exists(root / "cache.py"), out
    shown = json.loads(run_rewind("show", "2", "--json", cwd=root, check=0).stdout)
    assert shown["pending"] is False and shown["first_scan"]["by"] in ("watcher", "hook")


def test_the_picker_shows_a_pending_row_and_restores_it_once_complete(tmp_path):
    from rewind.cli.picker import run_picker
    from test_picker import flat, screen_text
    root, tree = _saved(tmp_path)
    seen: dict = {}
    with FirstScan(root) as scan:
        scan.prompt("write the cache")
        write(root, "cache.py", "# the agent's\n")
        proj = project(root)
        app = run_picker(proj)

        async def run():
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause()
                seen["first"] = flat(screen_text(app))
                await pilot.press("r")                      # the pending one is at hand: not yet
                await pilot.pause()
                seen["refused"] = [n.message for n in app._notifications]
                complete_as_the_watcher_does(root, 2, tree)
                await pilot.press("r")                      # complete now: the restore dialog
                await pilot.pause()
                seen["dialog"] = flat(screen_text(app))
                await pilot.press("n")
                await pilot.pause()
                seen["after"] = flat(screen_text(app))
        try:
            asyncio.run(run())
        finally:
            proj.close()
    assert "pending write the cache" in seen["first"] and "first scan running" in seen["first"], seen["first"]
    assert ("checkpoint 2 is being completed by the watcher's first scan of the tree: its changes show once it "
            "is complete (`rewind to 2` waits for it)") in seen["first"]
    assert ("checkpoint 2 is still being completed by the watcher's first scan of the tree; it can be restored "
            "once complete (`rewind to 2` waits for it)") in seen["refused"], seen["refused"]
    assert "Rewind 1 path to checkpoint 2" in seen["dialog"] and "Restore code" in seen["dialog"], seen["dialog"]
    assert "pending" not in seen["after"] and "cache.py" in seen["after"], seen["after"]
    assert os.path.exists(root / "cache.py")                  # cancelled: nothing restored
