"""SIGKILL at random moments during save, a hook, to, undo and gc (seeded trials; more with
REWIND_CRASH_TRIALS=N, or benchmarks/soak.py): nothing is lost (see crashkit.py)."""

from __future__ import annotations

import os

import pytest

from crashkit import OPS, trial

TRIALS = int(os.environ.get("REWIND_CRASH_TRIALS", "6"))


@pytest.mark.parametrize("seed", range(TRIALS))
@pytest.mark.parametrize("op", OPS)
def test_a_kill_at_a_random_moment_loses_nothing(tmp_path, op, seed):
    result = trial(op, seed, tmp_path / "w")
    assert result["outcome"] in ("before", "after", "partial")
