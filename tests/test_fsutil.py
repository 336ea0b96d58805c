"""fsutil.in_parallel, which syncs a flush's objects: a few one by one while each is quick
(an idle disk: a thread costs more than the fsync), on threads once one is slow (a busy
disk, where concurrent fsyncs share a journal commit), and many on threads at once."""

from __future__ import annotations

import threading
import time

import pytest

from rewind.fsutil import PARALLEL_FROM, fsync_dir, in_parallel


def _run(n: int, slow: bool) -> tuple[set[int], list[str]]:
    done, where = set(), []
    lock = threading.Lock()

    def work(i):
        if slow:
            time.sleep(0.01)          # as an fsync behind a busy journal
        with lock:
            done.add(i)
            where.append(threading.current_thread().name)
    in_parallel(work, range(n))
    return done, where


def test_a_few_quick_items_stay_on_the_callers_thread(tmp_path):
    dirs = []
    for i in range(5):
        (tmp_path / str(i)).mkdir()
        dirs.append(str(tmp_path / str(i)))
    seen = []
    in_parallel(lambda d: (fsync_dir(d), seen.append(threading.current_thread().name)), dirs)
    assert len(seen) == 5
    done, where = _run(6, slow=False)
    assert done == set(range(6)) and set(where) == {threading.current_thread().name}


def test_once_one_is_slow_the_rest_go_to_threads():
    began = time.monotonic()
    done, where = _run(8, slow=True)
    assert done == set(range(8))
    assert where[0] == threading.current_thread().name and len(set(where[1:]) - {where[0]}) >= 2
    assert time.monotonic() - began < 8 * 0.01        # not one by one


def test_many_go_to_threads_at_once():
    done, where = _run(PARALLEL_FROM, slow=False)
    assert done == set(range(PARALLEL_FROM)) and threading.current_thread().name not in where


@pytest.mark.parametrize("n", [5, PARALLEL_FROM + 4])
def test_an_error_is_raised_and_nothing_is_done_twice(n):
    calls = []

    def work(i):
        calls.append(i)
        if i == 2:
            raise OSError(28, "No space left on device")
    with pytest.raises(OSError, match="No space"):
        in_parallel(work, range(n))
    assert len(calls) == len(set(calls))
