"""benchmarks/first_prompt.py runs and checks what it measures, on a small tree and a short
delay so it cannot rot; figures not asserted (they are the machine's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import agent_cli, no_cli

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "first_prompt.py"
CLAUDE = agent_cli("claude")


def _bench(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_help_names_the_options():
    out = _bench("--help", timeout=60).stdout
    for option in ("--files", "--delay", "--later", "--rewind", "--modes", "--keep"):
        assert option in out


@pytest.mark.e2e
@pytest.mark.skipif(not CLAUDE, reason=no_cli("claude"))
def test_first_prompts_on_a_fresh_tree_are_timed_and_checkpointed():
    r = _bench("--files", "1000", "--delay", "2", "--later", "1", "--modes", "resume,stream")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "FAILED" not in r.stdout
    for mode, calls in (("resume", "10"), ("stream", "8")):
        block = r.stdout.split(f"{mode} mode (")[1].split("\n\n")[0]
        rows = {line.strip().split("  ")[0]: line.strip().split("  ")[1:] for line in block.splitlines()
                if line.startswith("  ")}
        rows = {name: [c.strip() for c in cells if c.strip()] for name, cells in rows.items()}
        # prompts 1 and 2, then a later one after the first scan; each with all its hook
        # calls and a checkpoint of its own, complete by the end
        for k in range(1, 4):
            row = rows[f"{k} (later)" if k > 2 else str(k)]
            assert row[6] == calls and row[-1] == f"#{k} complete", row
        assert rows["1"][7] == "#1 complete" and rows["2"][7] == "#2 complete"
        assert rows["later: median"][1:4:2] == ["1.00", "1.00"]
        for label in ("UserPromptSubmit", "PreToolUse Write", "PostToolUse Edit", "PreToolUse Bash", "Stop"):
            assert len(rows[label]) == 4, rows[label]          # 3 prompts, the later median
        assert "first scan" in block and "SessionStart at t0" in block
    assert "work directory kept" not in r.stderr
