"""A full scan that reads its files on reader threads records exactly what the sequential
scan records: the same trees, stats, protected paths, stat cache rows and stored objects.
Both are forced by `parallel_after` (None: never; 0: from the first file to read), on real
trees: symlinks, empty files, files over the size limit and over the read-ahead, nested
ignore files, FIFOs, files that turn into something else or vanish between the walk's stat
and the read, and a file rewritten while it is read."""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import rewritten_in_place
from rewind.capture.pipeline import AHEAD_BYTES, Pipeline
from rewind.capture.scan import scan
from rewind.store.objects import Store, digest_of
from rewind.store.tree import FILE, LARGE, LINK, serialize

LIMIT = AHEAD_BYTES + 2**20    # the size limit the scans here are given
NOW = 2**62        # the filesystem's "now" for the racy rule: far ahead, so every row is racy alike


def contents(store: Store) -> dict[str, bytes]:
    """Every object the store holds, loose or packed, by id: its bytes, decoded and checked
    against its id (the reader threads compress with zstd, a sequential scan with zlib:
    the same content, other stored bytes)."""
    out = {}
    for name, pack in store.packs().items():
        for oid, off, length in pack.entries():
            out[oid] = store.get(oid)        # (a body may need its base: a dictionary's)
    if os.path.isdir(store.objects):
        for shard in os.listdir(store.objects):
            if len(shard) == 2:
                for rest in os.listdir(os.path.join(store.objects, shard)):
                    out[shard + rest] = store.get(shard + rest)
    # the dictionaries a recompression trained (store/delta.py) are the store's, not the tree's
    out = {oid: data for oid, data in out.items() if data[:4] != b"\x37\xa4\x30\xec"}
    for oid, data in out.items():
        assert digest_of(data) == oid
    return out


def scanned(root, parallel_after, home, now=NOW, **kw):
    store = Store(str(home))
    if now is None:                          # the project filesystem's own, as a real scan has it
        from rewind.capture.snapshot import project_clock
        now = project_clock(str(root), store)
    result = scan(str(root), store, {}, now, parallel_after=parallel_after, **kw)
    store.flush()
    return result, store


def same_scans(root, tmp, **kw):
    """The sequential and the parallel scan of `root`, checked equal; returns the parallel one."""
    seq, seq_store = scanned(root, None, tempfile.mkdtemp(dir=tmp), **kw)
    par, par_store = scanned(root, 0, tempfile.mkdtemp(dir=tmp), **kw)
    assert par.root == seq.root
    assert par.trees == seq.trees
    assert par.stats == seq.stats
    assert par.protected == seq.protected
    assert par.hardlinks == seq.hardlinks
    assert par.cache_upserts == seq.cache_upserts
    assert contents(par_store) == contents(seq_store)
    return par, par_store


def write(root, rel, data: bytes | str, mode=None):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        os.chmod(path, mode)


def busy_tree(root, rng: random.Random, files: int = 700) -> None:
    """Text and binary files in nested directories, with everything the walk treats apart."""
    write(root, ".gitignore", "build/\n*.o\n")
    write(root, "src/.gitignore", "gen/\n!keep.o\n")
    for i in range(files):
        d = "/".join(f"d{rng.randint(0, 5)}" for _ in range(rng.randint(0, 3)))
        name = f"{d}/f{i}.{rng.choice(['py', 'txt', 'bin', 'o'])}".lstrip("/")
        size = rng.choice([0, 1, 100, 3000, 20000, 70000])
        data = os.urandom(size) if name.endswith(".bin") else (f"line {i}\n" * (size // 8 + 1)).encode()[:size]
        write(root, name, data, 0o755 if i % 7 == 0 else None)
    write(root, "src/keep.o", "kept by a nested rule")
    write(root, "src/gen/out.txt", "ignored below src")
    write(root, "build/out.txt", "ignored")
    write(root, "empty.txt", b"")
    write(root, "dup1.txt", "same bytes")        # one blob for two paths
    write(root, "dup2.txt", "same bytes")
    write(root, "big/over_ahead.bin", os.urandom(AHEAD_BYTES + 12345))   # more than the read-ahead
    write(root, "big/compressible.txt", b"abc" * 2_000_000)
    write(root, "big/too_large.bin", b"z" * (LIMIT + 1))                   # over the size limit
    os.symlink("src/keep.o", os.path.join(root, "link"))
    os.symlink("/nonexistent/target", os.path.join(root, "dangling"))
    os.link(os.path.join(root, "dup1.txt"), os.path.join(root, "hard.txt"))
    os.mkfifo(os.path.join(root, "fifo"))
    os.makedirs(os.path.join(root, "emptydir"))


def test_parallel_scan_records_what_the_sequential_scan_records(tmp_path):
    root = tmp_path / "proj"
    busy_tree(str(root), random.Random(1))
    par, store = same_scans(root, tmp_path, max_size=LIMIT)
    assert par.stats.large == ["big/too_large.bin"] and par.stats.special == [("fifo", "fifo")]
    assert par.stats.hashed > 500 and par.stats.ignored > 100 and "hard.txt" in par.hardlinks
    tree = par.trees[par.root]
    assert tree["link"].kind == LINK and tree["empty.txt"].kind == FILE and tree["empty.txt"].size == 0
    assert par.trees[tree["big"].oid]["too_large.bin"].kind == LARGE
    assert "build" not in tree and "build" in par.protected
    src = par.trees[tree["src"].oid]
    assert "keep.o" in src and "gen" not in src
    big = par.trees[tree["big"].oid]["over_ahead.bin"]
    assert len(store.get(big.oid)) == AHEAD_BYTES + 12345


def test_a_parallel_scan_that_starts_midway_and_a_store_already_holding_objects(tmp_path):
    """The threads start past `parallel_after` files, with directories of the walk half done;
    objects the store already holds loose are reused, not written again."""
    root = tmp_path / "proj"
    busy_tree(str(root), random.Random(2), files=400)
    seq, _ = scanned(root, None, tmp_path / "a", max_size=LIMIT)
    home = tmp_path / "b"
    store = Store(str(home))
    for oid in list(seq.trees)[:5]:          # a few trees stored loose beforehand (a small batch)
        store.put(serialize(seq.trees[oid]), oid)
    store.flush()
    par, par_store = scanned(root, 37, home, max_size=LIMIT)
    assert (par.root, par.trees, par.stats, par.cache_upserts) == (seq.root, seq.trees, seq.stats,
                                                                   seq.cache_upserts)
    for oid in seq.trees:
        assert par_store.get(oid)


def test_many_directories_each_waiting_for_a_file(tmp_path):
    """More directories wait for reads than may be held open at once: no descriptor leaks."""
    root = tmp_path / "proj"
    for i in range(700):
        write(str(root), f"a{i % 3}/b{i}/c/f.txt", f"file {i}")
    same_scans(root, tmp_path)
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass            # the listing's own descriptor, closed already
    assert not [p for p in held if p.startswith(str(root))]


def test_small_scans_start_no_thread(tmp_path):
    root = tmp_path / "proj"
    for i in range(50):
        write(str(root), f"d/f{i}.txt", f"file {i}")
    before = threading.active_count()
    store = Store(str(tmp_path / "home"))
    scan(str(root), store, {}, NOW)          # the default threshold
    store.flush()
    assert not any(t.name.startswith("rewind-read") for t in threading.enumerate())
    assert threading.active_count() == before


@pytest.mark.parametrize("swap", ["symlink", "fifo", "gone"])
def test_a_file_that_changes_kind_between_the_walk_and_the_read(tmp_path, swap):
    """The progress callback runs at the 512th file, after the walk stat'ed it and before it
    is read: every file is swapped then. Files read before are stored; the 512th (and, in a
    parallel scan, any other not read yet) is reported as the sequential read reports it;
    the files after it are walked as what they have become. The two trees are made alike, so
    they are walked in the same order: the lists keep it, whichever thread found the problem."""
    walked: list[str] = []
    for after in (None, 0):
        root = tmp_path / f"proj-{after}"
        for i in range(600):
            write(str(root), f"d{i % 4}/f{i}.txt", f"content {i}")
        files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)

        def progress(phase, done, total, root=root, files=files):
            if done == 512:
                for rel in files:      # swapped by a rename: a reader thread never sees it absent
                    path = os.path.join(root, rel)
                    if swap == "gone":
                        os.unlink(path)
                        continue
                    tmp = os.path.join(root, "swap.tmp")
                    if swap == "symlink":
                        os.symlink("elsewhere", tmp)
                    else:
                        os.mkfifo(tmp)
                    os.rename(tmp, path)
        result, store = scanned(root, after, tmp_path / f"home-{after}", progress=progress)
        problems = {"symlink": result.stats.unreadable, "fifo": result.stats.special, "gone": []}[swap]
        why = dict(problems)
        stored, linked, refused, gone = [], [], [], []
        for rel in files:
            d, name = rel.split("/")
            e = result.trees[result.trees[result.root][d].oid].get(name)
            if e is not None and e.kind == FILE:
                assert store.get(e.oid) == f"content {name[1:-4]}".encode()
                stored.append(rel)
            elif rel in why:
                assert e is None and rel in result.protected
                refused.append(why[rel])
            elif e is not None:
                assert e.kind == LINK
                linked.append(rel)
            else:
                gone.append(rel)
        assert len(problems) == len(refused)
        if after is None:
            assert len(stored) == 511
        assert 0 < len(stored) <= 511 and result.stats.hashed == len(stored)
        if swap == "symlink":
            assert set(refused) == {os.strerror(errno.ELOOP)} and len(linked) == 88 and not gone
        elif swap == "fifo":
            assert set(refused) == {"fifo"} and len(refused) == 600 - len(stored) and not linked
            listed = [p for p, _ in result.stats.special]
            if after is None:
                walked = [p for p in result.cache_upserts if p in files] + listed
            else:
                assert listed == sorted(listed, key=walked.index)
        else:
            assert not refused and not linked and len(gone) == 600 - len(stored)


def test_a_file_rewritten_while_read_on_a_reader_thread_is_never_stored_torn(tmp_path):
    """As the sequential read (test_hostile): a file rewritten in place without pause is
    stored as it was at one instant or reported as changing, never as a mix of pages it
    never held at once. (An instant when the writer itself had it half written is fair.)
    The scan gets the filesystem's real "now", as every scan does: the file is then hot
    (written in the last HOT_NS) and read twice. With NOW far ahead nothing is hot, and a
    write(2) that began before the read and still copies alongside it goes unseen: this
    test failed 2 times in about 80 runs so, storing B..A..B."""
    root = tmp_path / "proj"
    for i in range(300):
        write(str(root), f"d{i % 5}/f{i}.txt", f"calm {i}")
    a, b = b"A" * 4_000_000, b"B" * 4_000_000
    write(str(root), "d2/busy.bin", a)
    with rewritten_in_place(root / "d2/busy.bin", a, b):
        results = [scanned(root, 0, tmp_path / f"h{i}", now=None) for i in range(4)]
    for result, store in results:
        e = result.trees[result.trees[result.root]["d2"].oid].get("busy.bin")
        if e is None:
            assert result.stats.changing == ["d2/busy.bin"] and "d2/busy.bin" in result.protected
            continue
        data = store.get(e.oid)
        rest = data.lstrip(data[:1])
        assert len(data) == len(a) and rest == rest[:1] * len(rest)
        assert result.stats.hashed == 301


def test_an_exception_on_a_reader_thread_is_raised_to_the_scan_in_order():
    """Results come back in submission order; a reader's exception is raised where its
    result would have been taken, after every earlier result, and none is lost."""
    taken = []

    def work(i):
        if i == 5:
            raise ZeroDivisionError(f"reader failed on {i}")
        return i

    pipe = Pipeline(2)
    with pytest.raises(ZeroDivisionError, match="reader failed on 5"):
        try:
            for i in range(20):
                pipe.submit(10, taken.append, work, i)
            pipe.drain()
        finally:
            pipe.close()
    assert taken == [0, 1, 2, 3, 4]


def test_the_read_ahead_is_bounded():
    """Never more than AHEAD_BYTES (or one bigger item) in flight, results taken meanwhile."""
    seen = []
    pipe = Pipeline(2)
    try:
        for i in range(40):
            pipe.submit(AHEAD_BYTES // 4, seen.append, lambda i: i, i)
            assert pipe.bytes <= AHEAD_BYTES and len(pipe.queue) <= 4
        pipe.drain()
    finally:
        pipe.close()
    assert seen == list(range(40))


_name = st.sampled_from(["a", "b", "c", "d.txt", "e.o", "build", ".gitignore", "f.py", "g", "sub"])
_node = st.recursive(
    st.one_of(st.binary(max_size=3000), st.sampled_from([b"", b"x" * 70_000]), st.just(("link", "a"))),
    lambda inner: st.dictionaries(_name, inner, max_size=6), max_leaves=40)


def _build(path: str, node) -> None:
    if isinstance(node, dict):
        os.makedirs(path, exist_ok=True)
        for name, sub in node.items():
            if name == ".gitignore" and not isinstance(sub, bytes):
                continue
            _build(os.path.join(path, name), b"*.o\n!e.o\nbuild/\n" if name == ".gitignore" else sub)
    elif isinstance(node, tuple):
        os.symlink(node[1], path)
    else:
        with open(path, "wb") as f:
            f.write(node)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(tree=st.dictionaries(_name, _node, max_size=8), seed=st.integers(0, 3))
def test_random_small_trees_scan_alike_with_the_threads_forced(tmp_path, tree, seed):
    work = tempfile.mkdtemp(dir=tmp_path)
    try:
        root = os.path.join(work, "proj")
        _build(root, tree)
        same_scans(root, work, max_size=50_000 if seed == 1 else 50 * 2**20)
    finally:
        shutil.rmtree(work)
