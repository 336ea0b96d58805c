"""The ring, the retention and gc: a pure policy checked with a fixed clock, then the real
store: what gc keeps is exactly what the kept checkpoints reference, and every kept
checkpoint still restores byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers import REWIND, fingerprint, on_a_terminal, processes_with_home, project, run_rewind, write
from rewind.capture.working_copy import capture
from rewind.cli.replay import bundled_session, fill, hook_in_process
from rewind import background
from rewind.history import gc as gcmod
from rewind.history.restore import restore
from rewind.retention import CheckpointAge, decide
from rewind.store import tree as treemod
from rewind.store.objects import Store
from rewind.store.tree import DIR, LARGE

DAY = 86400 * 10**9
T0 = datetime(2026, 10, 1, tzinfo=timezone.utc)


def at(days: float) -> str:
    return (T0 + timedelta(days=days)).isoformat().replace("+00:00", "Z")


# -- the pure policy ---------------------------------------------------------------------

def ages(n, kind="prompt", spacing_days=0.0):
    return [CheckpointAge(i, int(i * spacing_days * DAY), kind, None) for i in range(1, n + 1)]


def test_the_ring_keeps_the_newest_n_of_every_kind():
    cps = ages(60, "prompt") + [CheckpointAge(60 + i, 0, k, None) for i, k in
                                enumerate(["manual", "rewind"] * 25, start=1)]
    verdicts = decide(cps, now_ns=0, ring_size=100, retention_ns=30 * DAY)
    kept = [v.number for v in verdicts if v.keep]
    assert kept == list(range(110, 10, -1))
    dropped = [v for v in verdicts if not v.keep]
    assert [v.number for v in dropped] == list(range(10, 0, -1))
    assert {v.reason for v in dropped} == {"beyond the newest 100"}


def test_retention_drops_by_age_even_below_the_ring():
    cps = ages(40, spacing_days=1.0)          # checkpoint i taken on day i
    verdicts = {v.number: v for v in decide(cps, now_ns=45 * DAY, ring_size=100, retention_ns=30 * DAY)}
    assert [n for n, v in verdicts.items() if v.keep] == list(range(40, 14, -1))
    assert verdicts[14].reason == "older than 30 days"
    # everything older than the retention goes, the newest too: the promise is about content
    assert not any(v.keep for v in decide(cps, now_ns=100 * DAY, ring_size=100, retention_ns=30 * DAY))


def test_a_rewind_never_evicts_its_target():
    cps = ages(100) + [CheckpointAge(101, 0, "rewind", 1)]
    verdicts = {v.number: v for v in decide(cps, now_ns=0, ring_size=100, retention_ns=30 * DAY)}
    assert verdicts[1].keep and verdicts[1].reason == "restored by the newest rewind"
    assert sum(v.keep for v in verdicts.values()) == 101     # the ring is one over
    # the next checkpoint ends the exception
    cps.append(CheckpointAge(102, 0, "prompt", None))
    verdicts = {v.number: v for v in decide(cps, now_ns=0, ring_size=100, retention_ns=30 * DAY)}
    assert not verdicts[1].keep and not verdicts[2].keep
    assert sum(v.keep for v in verdicts.values()) == 100


# -- the store ---------------------------------------------------------------------------

def reachable(store_home: str, trees: list[str]) -> set[str]:
    """Walk the trees independently of gc: every object they reference."""
    from rewind.store.objects import Store
    store, seen, stack = Store(store_home), set(), list(trees)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        for e in treemod.parse(store.get(oid)).values():
            if e.kind == DIR:
                stack.append(e.oid)
            elif e.kind != LARGE:
                seen.add(e.oid)
    return seen


def objects_on_disk(home: str) -> dict[str, int]:
    """Every object id the store holds, loose or packed."""
    out = {}
    base = Path(home) / "objects"
    for shard in base.iterdir():
        if shard.name == "pack":
            continue
        for f in shard.iterdir():
            out[shard.name + f.name] = f.stat().st_size
    for pack in Store(home).packs().values():
        for oid, _, n in pack.entries():
            out.setdefault(oid, n)
    return out


def copies_on_disk(home: str) -> tuple[int, int]:
    """(copies of objects, bytes on disk): loose files, and the entries and files of packs."""
    copies = size = 0
    for shard in (Path(home) / "objects").iterdir():
        if shard.name == "pack":
            continue
        for f in shard.iterdir():
            copies += 1
            size += f.stat().st_size
    for pack in Store(home).packs().values():
        copies += pack.count
        size += os.path.getsize(pack.path)
    return copies, size


def prompt_payloads(root: Path, n: int) -> list[dict]:
    template = next(p for p in bundled_session() if p["hook_event_name"] == "UserPromptSubmit")
    start = next(p for p in bundled_session() if p["hook_event_name"] == "SessionStart")
    out = [fill(start, str(root), "sess-ring", str(root / ".claude"))]
    for i in range(n):
        p = fill(template, str(root), "sess-ring", str(root / ".claude"))
        p["prompt"] = f"prompt {i}"
        out.append(p)
    return out


def test_105_prompts_keep_exactly_the_newest_100_and_gc_leaves_only_what_they_need(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    for i in range(30):
        write(root, f"src/m{i}.py", f"module {i}\n" * 20)
    deliver = hook_in_process(str(root))
    payloads = prompt_payloads(root, 105)
    deliver(payloads[0])
    states = {}
    for i, p in enumerate(payloads[1:], start=1):
        monkeypatch.setenv("REWIND_NOW", at(i / 1000))
        for k in range(3):   # a prompt's worth of edits, some content never seen again
            write(root, f"src/m{(i * 3 + k) % 30}.py", f"edit {i}.{k} " + os.urandom(8).hex())
        deliver(p)
        states[i] = fingerprint(root)
    proj = project(root)
    cps = proj.catalog.checkpoints(proj.id)
    assert [c.number for c in cps] == list(range(105, 5, -1))
    assert [c.message for c in cps][-1] == "prompt 5"

    copies_before, bytes_before = copies_on_disk(os.environ["REWIND_HOME"])
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    after = objects_on_disk(os.environ["REWIND_HOME"])
    copies_after, bytes_after = copies_on_disk(os.environ["REWIND_HOME"])
    need = reachable(os.environ["REWIND_HOME"], [c.tree for c in cps])
    assert set(after) == need
    assert copies_after == len(after)                 # no object twice
    assert gc["objects_swept"] == copies_before - copies_after > 0
    assert gc["bytes_swept"] == bytes_before - bytes_after
    assert gc["bytes_kept"] == bytes_after
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]

    run_rewind("to", "6", "--yes", cwd=root, check=0)            # the oldest kept
    assert fingerprint(root) == states[6]
    proj.close()


def test_old_checkpoints_disappear_with_their_content(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    write(root, "keep.txt", "always here\n")
    proj = project(root)
    secret = b"content only the old checkpoints hold " + os.urandom(16)
    write(root, "old.txt", secret)
    for day in (0, 1, 2):
        monkeypatch.setenv("REWIND_NOW", at(day))
        capture(proj, "manual", message=f"day {day}")
    (root / "old.txt").unlink()
    for day in (20, 29, 35):
        monkeypatch.setenv("REWIND_NOW", at(day))
        capture(proj, "manual", message=f"day {day}")
    # day 35: the checkpoints of days 0-2 are older than 30 days, out of the listings at once
    assert [c.message for c in proj.catalog.checkpoints(proj.id)] == ["day 35", "day 29", "day 20"]
    from rewind.store.objects import digest_of
    oid = digest_of(secret)
    assert oid in objects_on_disk(os.environ["REWIND_HOME"])
    # their content goes at a gc at least a day after rewind first saw them expired
    run_rewind("gc", cwd=root, check=0, env={"REWIND_NOW": at(35)})
    assert oid in objects_on_disk(os.environ["REWIND_HOME"])
    run_rewind("gc", cwd=root, check=0, env={"REWIND_NOW": at(36)})
    assert oid not in objects_on_disk(os.environ["REWIND_HOME"])
    # a command, not only a hook, drops what expires: on day 51 day 20's goes, on day 66 all
    out = run_rewind("list", "--json", cwd=root, check=0, env={"REWIND_NOW": at(51)}).stdout
    assert [c["id"] for c in json.loads(out)] == [6, 5]
    out = run_rewind("list", "--json", cwd=root, check=0, env={"REWIND_NOW": at(66)}).stdout
    assert json.loads(out) == []
    err = run_rewind("show", "5", cwd=root, check=1, env={"REWIND_NOW": at(66)}).stderr
    assert "no longer exists" in err and "Traceback" not in err
    proj.close()


def test_a_wrong_clock_never_destroys_history(tmp_path, monkeypatch):
    """31 days ahead for one command: everything leaves the listings, nothing is deleted (not
    even by a gc under that clock), and it all comes back with the right time. Saved 40 days
    behind: nothing expires while the clock is earlier than the newest checkpoint."""
    root = tmp_path / "proj"
    write(root, "a.txt", "precious")
    proj = project(root)
    for day in (0, 1, 2):
        monkeypatch.setenv("REWIND_NOW", at(day))
        write(root, "n.txt", str(day))
        capture(proj, "manual", message=f"day {day}")
    proj.close()
    ahead = {"REWIND_NOW": at(2 + 31)}
    assert json.loads(run_rewind("list", "--json", cwd=root, check=0, env=ahead).stdout) == []
    assert "hidden" in run_rewind("list", cwd=root, check=0, env=ahead).stderr
    gc = json.loads(run_rewind("gc", "--json", cwd=root, check=0, env=ahead).stdout)
    assert gc["dropped"] == [] and gc["objects_swept"] == 0
    back = {"REWIND_NOW": at(3)}
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0, env=back).stdout)] == [3, 2, 1]
    run_rewind("to", "1", "--yes", cwd=root, check=0, env=back)
    assert (root / "n.txt").read_text() == "0"
    # a clock far behind (earlier than the newest checkpoint): nothing expires at all
    behind = {"REWIND_NOW": at(-40)}
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0, env=behind).stdout)) == 4
    run_rewind("gc", cwd=root, check=0, env=behind)
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0, env=back).stdout)) == 4


def test_gc_is_due_again_after_its_stamp_was_made_under_a_clock_far_ahead(tmp_path):
    home = os.environ["REWIND_HOME"]
    os.makedirs(home, exist_ok=True)
    background.touch_stamp(home)
    future = time.time() + 40 * 86400
    os.utime(os.path.join(home, "gc.stamp"), (future, future))
    assert background.due(home, 24)


def test_a_shortened_setting_hides_and_deletes_nothing_until_the_users_gc(tmp_path):
    """An agent can write .rewind.toml: a shorter ring or retention hides what it would drop,
    even from an automatic gc, and only `rewind gc` run by the user deletes it."""
    root = tmp_path / "proj"
    for i in range(5):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
    write(root, ".rewind.toml", "ring_size = 2\nretention_days = 0.00001\n")
    listed = run_rewind("list", "--json", cwd=root, check=0)
    assert len(json.loads(listed.stdout)) <= 2 and "hidden" in listed.stderr
    run_rewind("gc", "--auto", cwd=root, check=0)
    (root / ".rewind.toml").unlink()                     # the person notices and takes it back
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)] == [5, 4, 3, 2, 1]
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (root / "a.txt").read_text() == "v0"
    # the user's own gc applies a shortened ring
    write(root, ".rewind.toml", "ring_size = 2\n")
    run_rewind("gc", cwd=root, check=0)
    (root / ".rewind.toml").unlink()
    # the newest two, and the rewind's target (the ring is one over while it is the newest)
    assert [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)] == [6, 5, 1]


def test_ring_size_from_rewind_toml_is_obeyed(tmp_path):
    root = tmp_path / "proj"
    write(root, ".rewind.toml", "ring_size = 7\nretention_days = 2.5\n")
    for i in range(12):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
    out = json.loads(run_rewind("list", "--json", "-n", "50", cwd=root, check=0).stdout)
    assert [c["id"] for c in out] == list(range(12, 5, -1))
    status = json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)
    assert (status["ring_size"], status["retention_days"]) == (7, 2.5)


def test_the_user_config_applies_and_the_project_file_wins(tmp_path):
    root = tmp_path / "proj"
    cfg = Path(os.environ["REWIND_HOME"]) / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("ring_size = 3\n")
    for i in range(5):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 3
    write(root, ".rewind.toml", "ring_size = 4\n")
    for i in range(3):
        write(root, "a.txt", f"w{i}")
        run_rewind("save", cwd=root, check=0)
    assert len(json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)) == 4


@pytest.mark.parametrize("text", ["ring_size = 0\n", "ring_size = 'ten'\n", "retention_days = -1\n",
                                  "ring_size = [\n"])
def test_a_bad_setting_warns_and_drops_nothing(tmp_path, text):
    root = tmp_path / "proj"
    for i in range(4):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
    write(root, ".rewind.toml", "ring_size = 1\n")
    run_rewind("save", cwd=root, check=0)
    run_rewind("gc", cwd=root, check=0)     # a shortened ring applies at the user's own gc
    write(root, ".rewind.toml", text)
    run_rewind("save", cwd=root, check=0)   # the hook path would log; a command warns
    proc = run_rewind("list", "--json", cwd=root, check=0)
    assert len(json.loads(proc.stdout)) == 2     # a ring of 1, but nothing dropped since it went bad
    assert "warning:" in proc.stderr and ".rewind.toml" in proc.stderr and "\n" == proc.stderr[-1]
    assert proc.stderr.count("\n") == 1


def test_a_rewind_into_a_full_ring_keeps_its_target_and_undo_has_its_point(tmp_path):
    root = tmp_path / "proj"
    write(root, ".rewind.toml", "ring_size = 5\n")
    states = {}
    for i in range(1, 8):
        write(root, "a.txt", f"v{i}")
        run_rewind("save", cwd=root, check=0)
        states[i] = fingerprint(root)
    ids = lambda: [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]  # noqa: E731
    assert ids() == [7, 6, 5, 4, 3]
    for attempt in range(3):      # ClaudePoint's retries evicted one target after another
        run_rewind("to", "3", "--yes", cwd=root, check=0)
        assert fingerprint(root) == states[3]
        assert 3 in ids() and len(ids()) == 6
        run_rewind("gc", cwd=root, check=0)
        assert 3 in ids()
    # the first rewind's tree equalled checkpoint 7: its safety checkpoint was taken all the
    # same (rewind-ai deduplicated it away), so undo has a point to return to
    run_rewind("undo", "--yes", cwd=root, check=0)
    assert fingerprint(root) == states[7]
    assert 3 not in ids() and len(ids()) == 5    # the exception ends with the next checkpoint


def test_gc_dry_run_prints_the_plan_gc_then_carries_out(tmp_path):
    root = tmp_path / "proj"
    for i in range(6):
        write(root, "a.txt", os.urandom(32).hex())
        run_rewind("save", cwd=root, check=0)
    write(root, ".rewind.toml", "ring_size = 2\n")
    before = objects_on_disk(os.environ["REWIND_HOME"])
    plan = json.loads(run_rewind("gc", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert objects_on_disk(os.environ["REWIND_HOME"]) == before           # nothing deleted
    done = json.loads(run_rewind("gc", "--json", cwd=root, check=0).stdout)
    for key in ("objects_swept", "bytes_swept", "objects_kept", "bytes_kept"):
        assert plan[key] == done[key], key
    text = run_rewind("gc", "--dry-run", cwd=root, check=0).stdout
    assert "would free 0 objects" in text


def test_status_all_and_forget(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "x.txt", "only in a " + os.urandom(8).hex())
    write(b, "y.txt", "only in b " + os.urandom(8).hex())
    for p in (a, b):
        run_rewind("save", cwd=p, check=0)
        run_rewind("save", cwd=p, check=0)
    st = json.loads(run_rewind("status", "--all", "--json", cwd=tmp_path, check=0).stdout)
    rows = {r["project"]: r for r in st["projects"]}
    assert rows[str(a)]["checkpoints"] == rows[str(b)]["checkpoints"] == 2
    assert rows[str(a)]["bytes"] > 0 and st["store"]["objects"] == len(objects_on_disk(os.environ["REWIND_HOME"]))
    text = run_rewind("status", "--all", cwd=tmp_path, check=0).stdout
    assert str(a) in text and str(b) in text

    proc = run_rewind("forget", "--project", str(a), cwd=tmp_path, input="")
    assert proc.returncode == 1 and "--yes" in proc.stderr          # no terminal, no --yes
    assert len(json.loads(run_rewind("list", "--json", cwd=a, check=0).stdout)) == 2
    before = set(objects_on_disk(os.environ["REWIND_HOME"]))
    import shutil
    shutil.rmtree(a)                                    # forget works on a project that is gone
    # --now: past the trash (tests/history/test_trash.py has the day in it)
    out = json.loads(run_rewind("forget", "--project", str(a), "--yes", "--now", "--json", cwd=tmp_path,
                                check=0).stdout)
    assert out["checkpoints_removed"] == 2 and out["gc"]["objects_swept"] > 0
    after = set(objects_on_disk(os.environ["REWIND_HOME"]))
    proj_b = project(b)
    assert after == reachable(os.environ["REWIND_HOME"], [c.tree for c in proj_b.catalog.checkpoints(proj_b.id)])
    assert before > after
    st = json.loads(run_rewind("status", "--all", "--json", cwd=tmp_path, check=0).stdout)
    assert [r["project"] for r in st["projects"]] == [str(b)]
    # numbers are never reused, also after a forget
    a.mkdir()
    write(a, "x.txt", "again")
    assert "checkpoint 3 " in run_rewind("save", cwd=a, check=0).stdout
    proj_b.close()


WORKER = r"""
import os, sys, random, time
sys.path.insert(0, {src!r})
from rewind.capture.working_copy import capture
from rewind.project import open_project
root, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(k)
proj = open_project(root, create=True)
for i in range(n):
    # a small pool of versions: content that became garbage is written again (the reuse race)
    v = rng.randrange(4)
    for f in range(3):
        path = os.path.join(root, f"w{{k}}", f"f{{f}}.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(f"worker {{k}} file {{f}} version {{v}}\n" * 50)
    capture(proj, "manual", message=f"{{k}}:{{v}}")
    time.sleep(0.02)   # checkpoints at a hook's pace, so that several gc runs overlap them
proj.close()
"""


def test_gc_while_four_processes_take_checkpoints_sweeps_nothing_they_need(tmp_path):
    root = tmp_path / "proj"
    cfg = Path(os.environ["REWIND_HOME"]) / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("ring_size = 12\n")
    for i in range(40):
        write(root, f"base/{i}.txt", f"base {i}\n" * 30)
    run_rewind("save", cwd=root, check=0)
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(src=str(Path(__file__).resolve().parents[2])))
    workers = [subprocess.Popen([sys.executable, str(script), str(root), str(k), "40"],
                                stderr=subprocess.PIPE, text=True) for k in range(4)]
    gcs = swept = 0
    from rewind.catalog.db import Catalog
    while any(w.poll() is None for w in workers):
        catalog = Catalog(os.environ["REWIND_HOME"])
        swept += gcmod.run(os.environ["REWIND_HOME"], catalog).objects_swept
        catalog.close()
        gcs += 1
    for w in workers:
        assert w.wait() == 0, w.stderr.read()
    assert gcs >= 3 and swept > 0
    run_rewind("gc", cwd=root, check=0)
    proj = project(root)
    kept = proj.catalog.checkpoints(proj.id)
    assert len(kept) == 12
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    cfg.write_text("ring_size = 100\n")    # the restores' safety checkpoints must not evict them
    for cp in kept:
        restore(proj, cp)
        k, v = cp.message.split(":")
        for f in range(3):
            assert (root / f"w{k}" / f"f{f}.txt").read_text() == f"worker {k} file {f} version {v}\n" * 50
        assert all((root / f"base/{i}.txt").read_text() == f"base {i}\n" * 30 for i in range(40))
    proj.close()


LATE_WRITER = r"""
import os, sys, time
sys.path.insert(0, {src!r})
import rewind.store.objects as objects
from rewind.capture.working_copy import capture
from rewind.project import open_project
root, home, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for f in range(n):
    with open(os.path.join(root, "late", f"{{f}}.txt"), "w") as fh:
        fh.write(f"written while gc sweeps {{f}}\n" * 20)
began = time.time() - 1
real_flush = objects.Store.flush

def flush(self):       # the clock went back an hour just before these writes
    real_flush(self)
    back = time.time() - 3600
    for d, _, names in os.walk(os.path.join(home, "objects")):
        for name in names:
            path = os.path.join(d, name)
            if os.stat(path).st_mtime >= began:
                os.utime(path, (back, back))
objects.Store.flush = flush
proj = open_project(root, create=True)
cp, _ = capture(proj, "manual", message="late")
print(cp.number, flush=True)
"""


@pytest.mark.parametrize("files", [1, 20], ids=["loose", "packed"])
def test_a_checkpoint_committed_while_gc_marks_survives_its_sweep_whatever_the_clock(tmp_path, files):
    """gc marks beside the hooks, then sweeps under the exclusive store lock: a writer that
    would commit between the two waits for the sweep. Its objects carry an mtime from before
    gc's start (a clock stepped back), so only the lock keeps them: with the mark and the
    sweep apart, they were swept and its checkpoint lost its content."""
    root = tmp_path / "proj"
    home = os.environ["REWIND_HOME"]
    write(root, "a.txt", "a\n")
    (root / "late").mkdir()
    run_rewind("save", cwd=root, check=0)
    script = tmp_path / "late.py"
    script.write_text(LATE_WRITER.format(src=str(Path(__file__).resolve().parents[2])))
    real_sweep = gcmod._sweep
    writer = []

    def sweep_after_a_late_commit(*args):
        p = subprocess.Popen([sys.executable, str(script), str(root), home, str(files)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        writer.append(p)
        try:
            p.wait(timeout=3)          # commits here, unless gc holds the store
        except subprocess.TimeoutExpired:
            pass
        return real_sweep(*args)
    gcmod._sweep = sweep_after_a_late_commit
    from rewind.catalog.db import Catalog
    catalog = Catalog(home)
    try:
        report = gcmod.run(home, catalog)
    finally:
        gcmod._sweep = real_sweep
        catalog.close()
    out, err = writer[0].communicate(timeout=60)
    assert writer[0].returncode == 0, err
    assert report.seconds_exclusive > 0
    assert json.loads(run_rewind("verify", "--json", cwd=root, check=0).stdout)["ok"]
    proj = project(root)
    late = proj.catalog.checkpoint(proj.id, int(out))
    (root / "late" / "0.txt").write_text("changed afterwards\n")
    restore(proj, late)
    for f in range(files):
        assert (root / "late" / f"{f}.txt").read_text() == f"written while gc sweeps {f}\n" * 20
    proj.close()


def test_a_damaged_tree_seen_first_under_a_cache_root_still_stops_gc_once_a_checkpoint_needs_it(tmp_path):
    """gc's first pass may only keep a tree it cannot read when a cache names it; if a
    checkpoint committed before the sweep names the same tree above it, the second pass must
    read it again and stop gc before anything is deleted."""
    from rewind.capture.working_copy import Scan, locked
    from rewind.catalog.db import Catalog
    from rewind.errors import RewindError
    home = os.environ["REWIND_HOME"]
    root = tmp_path / "proj"
    write(root, "d/a.txt", "a\n")
    proj = project(root)
    with locked(proj) as wc:                   # a scan, no checkpoint: the caches name d/'s tree
        wc.commit(wc.scan(Scan.auto()))
    sub = treemod.parse(Store(home).get(proj.catalog.state(proj.id)[0]))["d"].oid
    path = Store(home).path(sub)
    os.chmod(path, 0o600)
    with open(path, "wb") as f:
        f.write(b"\x01damaged")
    real_mark = gcmod.mark
    calls = []

    def mark_then_commit(*args, **kw):
        got = real_mark(*args, **kw)
        if not calls:
            calls.append(capture(proj, "manual")[0])     # reuses d/'s tree from the cache
        return got
    gcmod.mark = mark_then_commit
    catalog = Catalog(home)
    try:
        with pytest.raises(RewindError, match="gc stopped before deleting anything"):
            gcmod.run(home, catalog)
    finally:
        gcmod.mark = real_mark
        catalog.close()
    assert calls and calls[0].tree == proj.catalog.state(proj.id)[0]
    proj.close()


def test_gc_puts_back_an_object_a_writer_reuses_while_it_sweeps(tmp_path):
    """The sweep's second look: an unreferenced object whose mtime is refreshed between the
    listing and the move is put back, not deleted."""
    from rewind.catalog.db import Catalog
    from rewind.store.objects import Store
    home = os.environ["REWIND_HOME"]
    store = Store(home)
    oid = store.put(b"garbage that a writer is about to reuse")
    store.flush()
    old = time.time() - 3600
    os.utime(store.path(oid), (old, old))
    catalog = Catalog(home)
    report = gcmod.GcReport(dry_run=False)
    start = store.fs_now()
    real_rename = os.rename
    calls = []

    def rename_after_reuse(src, dst):
        if not calls:
            calls.append(src)
            Store(home).put(b"garbage that a writer is about to reuse")   # the writer reuses it
        return real_rename(src, dst)
    os.rename = rename_after_reuse
    try:
        gcmod._sweep(home, set(), start, report, False, None)
    finally:
        os.rename = real_rename
    assert calls and os.path.exists(store.path(oid)) and report.objects_spared == 1
    assert Store(home).get(oid) == b"garbage that a writer is about to reuse"
    catalog.close()


def test_gc_never_sweeps_an_object_newer_than_its_start(tmp_path):
    """A writer's object that no committed checkpoint names yet is spared, however
    unreferenced it looks; the same object made old is swept."""
    from rewind.catalog.db import Catalog
    from rewind.store.objects import Store
    home = os.environ["REWIND_HOME"]
    store = Store(home)
    oid = store.put(b"staged by a writer that has not committed yet")
    store.flush()
    later = time.time() + 60       # as if written after gc read its clock
    os.utime(store.path(oid), (later, later))
    catalog = Catalog(home)
    report = gcmod.run(home, catalog)
    assert report.objects_spared == 1 and os.path.exists(store.path(oid))
    old = time.time() - 60
    os.utime(store.path(oid), (old, old))
    report = gcmod.run(home, catalog)
    assert report.objects_swept == 1 and not os.path.exists(store.path(oid))
    catalog.close()


def test_gc_runs_by_itself_once_a_day_detached(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "x")
    run_rewind("save", cwd=root, check=0)
    home = os.environ["REWIND_HOME"]
    from rewind.store.objects import Store
    store = Store(home)
    orphan = store.put(b"nothing references this " + os.urandom(8))
    store.flush()
    old = time.time() - 2 * 86400
    os.utime(store.path(orphan), (old, old))
    stamp = Path(home) / background.STAMP
    assert stamp.exists()                    # the first command started the clock
    os.utime(stamp, (old, old))
    payload = fill(next(p for p in bundled_session() if p["hook_event_name"] == "UserPromptSubmit"),
                   str(root), "s-auto", str(tmp_path / "cc"))
    proc = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), capture_output=True,
                          text=True, cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)})
    assert proc.returncode == 0 and proc.stdout == ""
    deadline = time.monotonic() + 30
    while os.path.exists(store.path(orphan)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(store.path(orphan))
    assert stamp.stat().st_mtime > old + 86400
    # it finished and left no process behind
    while time.monotonic() < deadline and processes_with_home(home):
        time.sleep(0.1)
    assert processes_with_home(home) == []
    status = json.loads(run_rewind("status", "--json", cwd=root, check=0).stdout)
    assert status["last_gc"]["objects_swept"] >= 1


def test_verify_gc_save_and_to_show_a_progress_bar_on_a_terminal(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "x")
    run_rewind("save", cwd=root, check=0)
    write(root, "b.txt", "y" * 5000)
    for cmd, label in ((["verify"], "verify"), (["gc"], "gc"), (["save"], "save"), (["to", "1", "--yes"], "rewind")):
        code, screen = on_a_terminal(cmd, root, {**os.environ, "REWIND_PROGRESS_AFTER": "0", "COLUMNS": "100"},
                                     stderr_only=True)
        assert code == 0
        assert f"{label}:" in screen
        # and without a terminal there is none
        if cmd[0] in ("verify", "gc"):
            assert run_rewind(*cmd, cwd=root, check=0).stderr == ""
