"""Bisect: find the first checkpoint at which a command fails (docs/design.md, "Bisect").

The candidates are the project's prompt and manual checkpoints in id order (safety
checkpoints of `to` and `undo` left out), then `now` (the tree as it is, stored by a scan
first). CMD runs in a scratch copy of each checkpoint tested, under rewind's data dir, never
in the project: `Scratch` materializes the first tree from the store once, then moves from
tree to tree by their difference only, and after each run puts back what CMD changed in
the copy (what it wrote, made or removed), so that every step runs on exactly the
checkpoint's tree, at a cost of O(changed files) plus one walk of the copy's metadata.

Exit status as `git bisect run`: 0 good, 125 skip, 1-127 bad, anything else stops (as does
a signal). A step's timeout counts as a skip. Ignored paths are in no checkpoint: `--link`
makes each a symlink in the copy to the project's own path. The objects are pinned against
gc while a bisect runs (it holds gc's lock); the scratch dir goes at the end, whatever
ends it, and one left by a killed bisect goes with the next command (`clean_leftovers`).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections import deque
from typing import Callable, NamedTuple

from rewind.capture.snapshot import TreeLoader
from rewind.errors import RewindError
from rewind.model import Checkpoint
from rewind.project import Project
from rewind.store.tree import DIR, FILE, LARGE, LINK, Entry
from rewind.store.treediff import diff_trees, entry_at

BISECT_DIR = "bisect"
CANDIDATE_KINDS = ("prompt", "manual")
GOOD, BAD, SKIP, STOP = "good", "bad", "skip", "stop"


class Candidate(NamedTuple):
    """A tree bisect may test: a checkpoint, or `now` (checkpoint None)."""
    checkpoint: Checkpoint | None
    tree: str

    @property
    def label(self) -> str:
        return "now" if self.checkpoint is None else f"checkpoint {self.checkpoint.number}"

    @property
    def number(self) -> int | None:
        return None if self.checkpoint is None else self.checkpoint.number


class Step(NamedTuple):
    candidate: Candidate
    verdict: str            # good | bad | skip | stop
    code: int | None        # CMD's exit status (None: timed out; negative: killed by that signal)
    seconds: float          # CMD's own time
    setup_seconds: float    # the copy brought to this tree
    tail: list              # CMD's last lines of output
    why: str = ""


class Result(NamedTuple):
    first_bad: Candidate | None
    last_good: Candidate | None
    steps: list
    candidates: list
    undecided: list         # candidates skipped between the last good and the first bad
    missing: list           # paths too large to have been stored: absent from the copies


def verdict_of(code: int | None) -> str:
    if code is None:
        return SKIP                     # a timeout
    if code == 0:
        return GOOD
    if code == 125:
        return SKIP
    if 1 <= code <= 127:
        return BAD
    return STOP


def candidates(project: Project) -> list[Checkpoint]:
    """Prompt and manual checkpoints, oldest first (pending ones, without a tree yet, left out)."""
    cps = [cp for cp in project.catalog.checkpoints(project.id) if cp.kind in CANDIDATE_KINDS and cp.tree]
    return sorted(cps, key=lambda cp: cp.number)


def clean_leftovers(home: str) -> list[str]:
    """Remove the scratch dirs of bisects that are no longer running (killed): the dir's
    name holds its process id and that process's start time. Returns what it removed."""
    base = os.path.join(home, BISECT_DIR)
    try:
        names = os.listdir(base)
    except OSError:
        return []
    removed = []
    for name in names:
        pid, _, started = name.partition("-")
        if pid.isdigit() and _alive(int(pid), started):
            continue
        _remove(os.path.join(base, name))
        removed.append(name)
    try:
        os.rmdir(base)
    except OSError:
        pass
    return removed


def _started(pid: int) -> str:
    """A process's start time (field 22 of /proc/PID/stat), "" where unknown: with the pid, it
    names the process even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not started or not _started(pid) or _started(pid) == started


def _remove(path: str) -> None:
    """Remove a scratch dir whatever CMD left in it (read-only dirs included)."""
    def again(func, p, exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=again)
    else:
        shutil.rmtree(path, onerror=again)


class Scratch:
    """A copy of one tree at a time, under the data dir, moved between trees by their
    difference. `expect` holds what each path of the copy was left as (kind, mode, size,
    mtime, inode), so that what CMD changed is found by one walk of the copy's metadata and
    put back before the next step."""

    def __init__(self, project: Project, links: list[str], progress=None):
        self.project = project
        self.progress = progress            # (phase, done, total) while the first tree is written
        self.load = TreeLoader(project.store)
        name = f"{os.getpid()}-{_started(os.getpid())}"
        self.base = os.path.join(project.home, BISECT_DIR, name)
        self.root = os.path.join(self.base, os.path.basename(project.root.rstrip("/")) or "project")
        self.links = [p.strip("/") for p in links]
        self.tree: str | None = None
        self.expect: dict[str, tuple] = {}
        self.dirty: set[str] = set()
        self.missing: set[str] = set()
        self.files_written = 0

    def __enter__(self):
        os.makedirs(self.root, mode=0o700)
        return self

    def __exit__(self, *exc):
        _remove(self.base)
        try:
            os.rmdir(os.path.dirname(self.base))      # the last bisect's: nothing left behind
        except OSError:
            pass

    # -- moving between trees ----------------------------------------------------------------
    def checkout(self, tree: str) -> None:
        if self.tree is None:
            self._full(tree)
        else:
            self._update(self.tree, tree)
        self.tree = tree
        self._link()

    def _full(self, tree: str) -> None:
        modes: list[tuple[str, int]] = []
        total = sum(1 for _, e in _all_under(self.load, tree, "") if e.kind != DIR) if self.progress else 0

        def walk(oid: str, rel: str) -> None:
            for name, e in sorted(self.load(oid).items()):
                path = f"{rel}/{name}" if rel else name
                if self._linked(path):
                    continue
                if e.kind == DIR:
                    os.mkdir(self._abs(path), 0o700)
                    walk(e.oid, path)
                    modes.append((path, e.mode))
                else:
                    self._put(path, e)
                    if self.progress is not None and self.files_written % 200 == 0:
                        self.progress("copying the first checkpoint", self.files_written, total)
        walk(tree, "")
        for path, mode in modes:            # deepest first: a read-only dir is filled first
            os.chmod(self._abs(path), mode)
            self._note(path)

    def _update(self, old: str, new: str) -> None:
        pairs = {p: (a, b) for p, a, b in diff_trees(self.load, old, new) if not self._linked(p)}
        for path in self.dirty:
            if path not in pairs:
                pairs[path] = (None, entry_at(self.load, new, path))
        self.dirty = set()
        # what goes, deepest first; then what comes, parents first
        for path in sorted(pairs, key=lambda p: -p.count("/")):
            a, b = pairs[path]
            if b is None or (b.kind != DIR) or (a is not None and a.kind != DIR):
                self._clear(path)
        touched_dirs = set()
        for path in sorted(pairs, key=lambda p: (p.count("/"), p)):
            a, b = pairs[path]
            if b is None:
                continue
            parent = path.rpartition("/")[0]
            if parent:
                self._parents(parent, new, touched_dirs)
            if b.kind == DIR:
                if not os.path.isdir(self._abs(path)) or os.path.islink(self._abs(path)):
                    self._clear(path)
                    os.mkdir(self._abs(path), 0o700)
                    for sub_path, sub in _all_under(self.load, b.oid, path):
                        if sub.kind == DIR:
                            os.makedirs(self._abs(sub_path), 0o700, exist_ok=True)
                            touched_dirs.add(sub_path)
                        else:
                            self._put(sub_path, sub)
                touched_dirs.add(path)
            else:
                self._put(path, b)
        touched_dirs |= {p for p in self.dirty if os.path.isdir(self._abs(p))}    # opened by _clear
        for path in sorted(touched_dirs, key=lambda p: -p.count("/")):
            e = entry_at(self.load, new, path)
            if e is not None and e.kind == DIR:
                os.chmod(self._abs(path), e.mode)
                self._note(path)
                self.dirty.discard(path)

    def _parents(self, parent: str, tree: str, touched: set) -> None:
        parts = parent.split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            full = self._abs(p)
            if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
                self._clear(p)
            if not os.path.isdir(full):
                os.mkdir(full, 0o700)
                touched.add(p)
            elif not os.access(full, os.W_OK | os.X_OK):
                os.chmod(full, 0o700)
                touched.add(p)

    def _put(self, path: str, e: Entry) -> None:
        full = self._abs(path)
        if e.kind == LARGE:
            self.missing.add(path)
            self.expect.pop(path, None)
            return
        if os.path.lexists(full):
            self._clear(path)
        if e.kind == LINK:
            os.symlink(os.fsdecode(self.project.store.get(e.oid)), full)
        elif e.kind == FILE:
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                data = self.project.store.get(e.oid)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, e.mode & 0o7777)
            finally:
                os.close(fd)
            self.files_written += 1
        self._note(path)

    def _clear(self, path: str) -> None:
        full = self._abs(path)
        for p in [p for p in self.expect if p == path or p.startswith(path + "/")]:
            del self.expect[p]
        if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
            try:
                os.unlink(full)
            except PermissionError:         # CMD made its directory read-only: put back later
                parent = os.path.dirname(path)
                os.chmod(os.path.dirname(full), 0o700)
                if parent:
                    self.dirty.add(parent)
                os.unlink(full)
        elif os.path.isdir(full):
            _remove(full)

    def _note(self, path: str) -> None:
        st = os.lstat(self._abs(path))
        self.expect[path] = _sig(st)

    def _abs(self, path: str) -> str:
        return os.path.join(self.root, path)

    def _linked(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.links)

    def _link(self) -> None:
        for p in self.links:
            full = self._abs(p)
            target = os.path.join(self.project.root, p)
            if os.path.islink(full) and os.readlink(full) == target:
                continue
            parent = os.path.dirname(full)
            os.makedirs(parent, 0o700, exist_ok=True)
            if os.path.lexists(full):
                self._clear(p)
            os.symlink(target, full)

    # -- after a run ---------------------------------------------------------------------------
    def reset(self) -> int:
        """Find what CMD changed in the copy: what it made goes now, what it changed or removed
        is rewritten by the next checkout. Returns how many paths it changed."""
        seen = set()
        changed = 0
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                it = os.scandir(self._abs(rel) if rel else self.root)
            except OSError:
                continue
            with it:
                entries = list(it)
            for de in entries:
                path = f"{rel}/{de.name}" if rel else de.name
                if path in self.links:
                    continue
                seen.add(path)
                try:
                    st = de.stat(follow_symlinks=False)
                except OSError:
                    continue
                want = self.expect.get(path)
                if want is None:
                    if any(p.startswith(path + "/") for p in self.links):
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(path)      # on the way to a linked path: made by us
                        continue
                    self._clear(path)           # made by CMD
                    changed += 1
                    continue
                if _sig(st) != want:            # a dir's: its mode (its contents are walked below)
                    self.dirty.add(path)
                    changed += 1
                if stat.S_ISDIR(st.st_mode):
                    if not os.access(de.path, os.R_OK | os.X_OK):
                        os.chmod(de.path, 0o700)
                        self.dirty.add(path)
                    stack.append(path)
        for path in self.expect:
            if path not in seen:
                self.dirty.add(path)
                changed += 1
        return changed


def _sig(st) -> tuple:
    if stat.S_ISDIR(st.st_mode):
        return (stat.S_IFMT(st.st_mode) | stat.S_IMODE(st.st_mode), 0, 0, st.st_ino)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def _all_under(load, oid: str, prefix: str):
    for name, e in sorted(load(oid).items()):
        path = f"{prefix}/{name}" if prefix else name
        yield path, e
        if e.kind == DIR:
            yield from _all_under(load, e.oid, path)


# -- running CMD --------------------------------------------------------------------------------

TAIL_LINES = 20


def run_cmd(cmd: list[str], cwd: str, timeout: float | None, log_path: str) -> tuple[int | None, float, list[str]]:
    """CMD in `cwd`, its own process group, output to `log_path`: (exit status or None for
    a timeout, seconds, its last lines). Its whole process group is killed on a timeout, on
    Ctrl-C and when the bisect ends otherwise."""
    env = dict(os.environ, REWIND_BISECT="1", PWD=cwd)
    with open(log_path, "wb") as log:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
        except OSError as e:
            # as a shell says it: 127 not found, 126 found but not runnable (a bad end, as for git)
            code = 127 if isinstance(e, FileNotFoundError) else 126
            log.write(f"rewind bisect: cannot run {cmd[0]!r}: {e.strerror or e} (it runs in the copy, "
                      f"{cwd}: a path from there, or a command on PATH)\n".encode())
            log.flush()
            return code, time.monotonic() - start, _tail(log_path)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            code = None
        except BaseException:
            _kill(proc)
            raise
        finally:
            _kill_group(proc.pid)
        seconds = time.monotonic() - start
    return code, seconds, _tail(log_path)


def _kill(proc) -> None:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _kill_group(pgid: int, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: str, n: int = TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read()
    except OSError:
        return []
    return list(deque(data.decode("utf-8", "replace").splitlines(), maxlen=n))


# -- the search ---------------------------------------------------------------------------------

def expected_runs(n: int) -> int:
    """The runs of CMD a bisect over `n` candidates takes with no skip: GOOD and BAD
    confirmed, then a binary search between them."""
    return 2 + (math.ceil(math.log2(n - 1)) if n > 2 else 0)


def bisect(project: Project, cands: list[Candidate], good: int, bad: int, cmd: list[str],
           links: list[str], timeout: float | None, on_step: Callable[[Step, int, int], None] | None = None,
           progress=None) -> Result:
    """Search `cands[good..bad]` (indices) for the first that fails; GOOD must pass and BAD fail."""
    steps: list[Step] = []
    verdicts: dict[int, str] = {}
    with Scratch(project, links, progress) as scratch:
        log_path = os.path.join(scratch.base, "output.log")

        def test(i: int) -> Step:
            c = cands[i]
            t0 = time.monotonic()
            scratch.checkout(c.tree)
            setup = time.monotonic() - t0
            code, seconds, tail = run_cmd(cmd, scratch.root, timeout, log_path)
            scratch.reset()
            verdict = verdict_of(code)
            why = ("timed out" if code is None else f"killed by signal {-code}" if code < 0 else f"exit {code}")
            s = Step(c, verdict, code, seconds, setup, tail, why)
            steps.append(s)
            verdicts[i] = verdict
            if on_step is not None:
                on_step(s, len(steps), expected_runs(bad - good + 1))
            return s

        first = test(good)
        if first.verdict != GOOD:
            raise BisectRefused(first, "good")
        last = test(bad)
        if last.verdict != BAD:
            raise BisectRefused(last, "bad")
        lo, hi = good, bad                  # lo passes, hi fails
        while True:
            untested = [i for i in range(lo + 1, hi) if i not in verdicts]
            if not untested:
                break
            mid = (lo + hi) // 2
            order = sorted(untested, key=lambda i: (abs(i - mid), i))
            s = test(order[0])
            if s.verdict == STOP:
                raise BisectStopped(s)
            if s.verdict == GOOD:
                lo = order[0]
            elif s.verdict == BAD:
                hi = order[0]
        undecided = [cands[i] for i in range(lo + 1, hi) if verdicts.get(i) == SKIP]
        return Result(cands[hi] if not undecided else None, cands[lo], steps, cands, undecided,
                      sorted(scratch.missing))


class BisectRefused(RewindError):
    """GOOD does not pass, or BAD does not fail."""

    def __init__(self, step: Step, wanted: str):
        self.step = step
        c = step.candidate
        said = {GOOD: "passes", BAD: "fails", SKIP: "was skipped", STOP: "stopped the bisect"}[step.verdict]
        super().__init__(f"the {wanted} end, {c.label}, {said} ({step.why}): it must "
                         f"{'pass' if wanted == 'good' else 'fail'} for a bisect",
                         hint=("give a GOOD checkpoint where the command passes (`rewind list`)" if wanted == "good"
                               else "give a BAD checkpoint where it fails, or check the command"))


class BisectStopped(RewindError):
    def __init__(self, step: Step):
        self.step = step
        super().__init__(f"the command stopped the bisect at {step.candidate.label} ({step.why}): exit statuses "
                         "above 127 stop it, as for `git bisect run`",
                         hint="exit 125 skips a checkpoint that cannot be tested")
