"""benchmarks/session_hooks.py runs, checks what it measures and refuses what it cannot
measure; one short session, figures not asserted (they are the machine's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import agent_cli, no_cli

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "session_hooks.py"
CLAUDE = agent_cli("claude")


def _bench(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_help_names_the_options():
    out = _bench("--help", timeout=60).stdout
    for option in ("--files", "--rounds", "--rewind", "--modes", "--watch"):
        assert option in out


@pytest.mark.e2e
@pytest.mark.skipif(not CLAUDE, reason=no_cli("claude"))
def test_one_prompt_in_a_real_session_is_timed_hook_by_hook():
    r = _bench("--rounds", "1", "--modes", "resume", "--watch", "on")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "resume mode" in r.stdout and "watcher on" in r.stdout
    rows = {line.strip().split("  ")[0]: line for line in r.stdout.splitlines()}
    # a session per prompt: SessionStart, UserPromptSubmit, Pre and Post of Write, Edit and
    # Bash, Stop, SessionEnd -- each timed once
    assert rows["hook calls per prompt: median (min-max)"].split()[-2:] == ["10", "(10-10)"]
    for label in ("SessionStart", "UserPromptSubmit", "PreToolUse Write", "PostToolUse Edit", "PreToolUse Bash",
                  "Stop", "SessionEnd"):
        assert rows[label].rstrip().endswith("[1]"), rows[label]
    assert "work directory kept" not in r.stderr


@pytest.mark.e2e
@pytest.mark.skipif(not CLAUDE, reason=no_cli("claude"))
def test_a_python_without_rewind_is_refused(tmp_path):
    bare = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    r = _bench("--rewind", str(bare / "bin" / "python"), "--netns", "off", timeout=120)
    assert r.returncode != 0
    assert "cannot import rewind" in r.stderr
    kept = r.stderr.split("work directory kept: ")[1].split()[0]    # kept on a failure, to look at
    shutil.rmtree(kept)
