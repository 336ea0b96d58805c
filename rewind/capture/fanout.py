"""A first snapshot on worker processes.

A full scan with an empty stat cache (a first snapshot, a lost cache) reads, hashes,
compresses and stores every file. On threads in one process (pipeline.py) the walk's
per-file Python work and every GIL hand-off stay on one core: 100,000 files (1.7 GB) took
13-15 s on 2 cores, and the walk's thread alone spent 6-7 s of CPU, its system calls slowed
by the GIL convoy. Past FANOUT_FILES files the scan runs on worker processes instead
(fanout_worker.py, one a core, at most MAX_WORKERS):

- The parent lists the directories first (names and d_type only, no stat: about 0.2 s for
  100,000 files) and cuts the tree into shares of about `files / (workers * SHARES_EACH)`
  files: a share is some entries of one directory (files, links, whole subdirectories
  small enough). Shares go out one at a time to whichever worker is free, so a slow share
  does not leave a core idle.
- A worker walks its shares with the scan's own `walker.Walker` (the same rules for ignored,
  special, unreadable, large, changing and hot files), one file after another and with no
  thread, into its own pack, which it makes durable before it says it is done. It stores
  file contents uncompressed (a "raw" pack, pack.RAW_SUFFIX): zstd was half the scan's
  CPU (100,000 files: 9.1-9.9 s with it, 4.8-5.4 s without, on 2 cores). The caller starts
  a background job, niced, that rewrites those packs compressed (repack.recompress) once the
  scan is in; until then the store holds the tree's bytes as they are.
- The parent puts the directories above the shares together and stores their trees.

The result is the one scan.scan() would give: the same trees, stats and stat cache rows. A
worker that fails, dies or finds a directory changed kind since it was listed makes the
whole scan run again on threads; the objects it stored are then referenced by nothing, for
gc. Workers run while the caller holds the store lock (as every scan does), so no gc can
sweep their packs before the checkpoint refers to them.
"""

from __future__ import annotations

import os
import stat as S

from rewind.capture.fanout_worker import Failed, WorkerProcess
from rewind.capture.ignore import IgnoreRules
from rewind.capture.walker import OPEN_DIR, Walker
from rewind.store.tree import DIR, Entry

FANOUT_FILES = 5_000     # files listed: fewer are scanned on threads (two workers start in ~0.1 s)
MAX_WORKERS = 4
SHARES_EACH = 8          # shares per worker: small enough to balance, big enough to be cheap
MIN_SHARE = 256


def workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return min(MAX_WORKERS, n)


def scan_on_workers(root: str, walker: Walker, rfd: int, rules: IgnoreRules, progress=None,
                    at_least: int | None = None) -> str | None:
    """A first snapshot on worker processes: the root tree's id, with everything the workers
    found in `walker`; None to scan on this process instead: fewer than 2 cores, fewer than
    `at_least` files (None: FANOUT_FILES), or workers that could not finish (logged)."""
    if workers() < 2:
        return None
    try:
        return _fan_out(root, walker, rfd, rules, progress, FANOUT_FILES if at_least is None else at_least)
    except Failed as e:
        from rewind.log import log
        log(f"scan {root}: {e}; scanning on threads instead")
        return None


# -- the parent ----------------------------------------------------------------------------

class _Listed:
    """A directory as the plan listed it: its entries' names in listing order, the
    subdirectories it could open (with their permission bits), and the files below."""
    __slots__ = ("names", "subs", "modes", "total")

    def __init__(self):
        self.names: list[str] = []
        self.subs: dict[str, _Listed] = {}
        self.modes: dict[str, int] = {}
        self.total = 0


def _list(dfd: int, rel: str, root: str, rules: IgnoreRules) -> _Listed:
    """The plan: every directory the scan will walk, listed without a stat of its files.
    What cannot be listed here is left to the share that names it: its worker reports it."""
    node = _Listed()
    with os.scandir(dfd) as it:
        entries = list(it)
    for de in entries:
        name = de.name
        node.names.append(name)      # .git too: its share's worker records it as protected
        try:
            is_dir = de.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if not is_dir:
            node.total += 1
            continue
        rel_path = f"{rel}/{name}" if rel else name
        if rules.is_ignored(rel_path, True):
            continue
        try:
            mode = de.stat(follow_symlinks=False).st_mode
            sub = os.open(name, OPEN_DIR, dir_fd=dfd)
        except OSError:
            continue
        try:
            listed = _list(sub, rel_path, root, rules.for_subdir(rel_path, os.path.join(root, rel_path)))
        except OSError:
            continue
        finally:
            os.close(sub)
        node.subs[name], node.modes[name] = listed, S.S_IMODE(mode)
        node.total += listed.total
    return node


class _Part:
    """A directory the parent puts together: the shares that hold some of its entries,
    and its subdirectories too big for one share."""
    __slots__ = ("rel", "shares", "subs", "modes")

    def __init__(self, rel: str):
        self.rel = rel
        self.shares: list[int] = []
        self.subs: dict[str, _Part] = {}
        self.modes: dict[str, int] = {}


def _cut(node: _Listed, rel: str, size: int, shares: list[tuple[str, list[str], int]]) -> _Part:
    part = _Part(rel)
    chunk: list[str] = []
    weight = 0
    for name in node.names:
        sub = node.subs.get(name)
        if sub is not None and sub.total > size:
            if chunk:                  # the shares stay in walk order: so do the stats' lists
                part.shares.append(len(shares))
                shares.append((rel, chunk, weight))
                chunk, weight = [], 0
            part.subs[name] = _cut(sub, f"{rel}/{name}" if rel else name, size, shares)
            part.modes[name] = node.modes[name]
            continue
        chunk.append(name)
        weight += 1 + (sub.total if sub is not None else 0)
        if weight >= size:
            part.shares.append(len(shares))
            shares.append((rel, chunk, weight))
            chunk, weight = [], 0
    if chunk:
        part.shares.append(len(shares))
        shares.append((rel, chunk, weight))
    return part


def _fan_out(root: str, walker: Walker, rfd: int, rules: IgnoreRules, progress, at_least: int) -> str | None:
    """The full scan of `root` on workers: the root tree's id, with everything the
    workers found merged into `walker` (the parent's, holding the store). None when the tree
    is too small to be worth it. Raises Failed when the workers could not finish."""
    import threading
    listed = _list(rfd, "", root, rules)
    if listed.total < at_least:
        return None
    count = workers()
    shares: list[tuple[str, list[str], int]] = []
    top = _cut(listed, "", max(MIN_SHARE, listed.total // (count * SHARES_EACH)), shares)
    order = sorted(range(len(shares)), key=lambda i: -shares[i][2])     # the biggest first
    results: list = [None] * len(shares)
    errors: list[BaseException] = []
    written: list[str] = []
    cond = threading.Condition()
    state = {"next": 0, "files": 0, "running": count}
    setup = (root, rfd, walker.store.home, walker.fs_now_ns, walker.max_size, frozenset(walker.damaged))
    left = [len(shares)]          # shares not back yet: a worker flushes only once none is

    def run(worker: WorkerProcess) -> None:
        try:
            worker.call("setup", *setup)
            while True:
                with cond:
                    if errors or state["next"] >= len(order):
                        break
                    i = order[state["next"]]
                    state["next"] += 1
                rel, names, weight = shares[i]
                results[i] = worker.call("share", rel, names)
                with cond:
                    state["files"] += weight
                    left[0] -= 1
                    cond.notify_all()
            with cond:
                while left[0] and not errors:
                    cond.wait()
                if errors:
                    return
            packs = worker.call("flush")         # its pack durable before the scan is over
            with cond:
                written.extend(packs)
        except BaseException as e:
            with cond:
                errors.append(e)
        finally:
            worker.close()
            with cond:
                state["running"] -= 1
                cond.notify_all()

    pool = []
    try:
        for _ in range(count):
            pool.append(WorkerProcess(rfd))
    except OSError as e:
        for w in pool:
            w.close()
        raise Failed(f"no worker could start ({e.strerror or e})") from None
    threads = [threading.Thread(target=run, args=(w,), daemon=True, name="rewind-fanout") for w in pool]
    for t in threads:
        t.start()
    try:
        while True:
            with cond:
                cond.wait(0.25)
                running, done = state["running"], state["files"]
            if progress is not None:
                progress("files read", min(done, listed.total), listed.total)
            if not running:
                break
    except BaseException:             # given up (an interrupt): no worker goes on, none flushes
        with cond:
            errors.append(Failed("the scan was interrupted"))
            cond.notify_all()
        for w in pool:
            w.proc.kill()             # a read waiting on it returns now; close() reaps it
        raise
    finally:
        for t in threads:
            t.join()
        if errors:
            _remove(walker.store.home, written)
    if errors:
        raise errors[0] if isinstance(errors[0], Failed) else Failed(str(errors[0]))
    for found in results:
        walker.absorb(found)
    walker.workers = count
    walker.raw_packs = sorted(written)
    return _assemble(top, results, walker)


def _remove(home: str, packs: list[str]) -> None:
    """The packs of a scan that failed: nothing refers to them (a put never relies on a
    packed copy, and the caller holds the store lock), and the threads store it all again."""
    from rewind.store.objects import PACKS_DIR
    for name in packs:
        try:
            os.unlink(os.path.join(home, PACKS_DIR, name))
        except OSError:
            pass


def _assemble(part: _Part, results: list, walker: Walker) -> str:
    """The directories above the shares, put together from the shares' entries."""
    tree = {}
    for i in part.shares:
        tree.update(results[i].tree)
    for name, sub in part.subs.items():
        tree[name] = Entry(DIR, part.modes[name], _assemble(sub, results, walker), 0)
        walker.stats.dirs += 1
    return walker.finish_dir(tree, part.rel)
