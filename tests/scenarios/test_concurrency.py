"""Many hook processes of several sessions, in one project and across projects, at once:
no lost checkpoint, nothing reaching the agent, no "database is locked", a clean store."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers import REWIND, run_rewind, write

ROUNDS = 4


def session(root: Path, sid: str) -> list[tuple[int, bytes, bytes]]:
    """One agent session: its hooks in order, each a real process."""
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(root)}
    results = []

    def send(payload):
        p = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload).encode(), cwd=root,
                           env=env, capture_output=True, timeout=120)
        results.append((p.returncode, p.stdout, p.stderr))
    base = {"session_id": sid, "cwd": str(root), "transcript_path": str(root / f"{sid}.jsonl")}
    send({**base, "hook_event_name": "SessionStart", "source": "startup"})
    for r in range(ROUNDS):
        send({**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{sid} prompt {r}"})
        cmd = {"command": f"echo {r} > {sid}-{r}.txt"}
        send({**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": cmd,
              "tool_use_id": f"{sid}-b{r}"})
        write(root, f"{sid}-{r}.txt", f"{r}\n")
        send({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": cmd,
              "tool_use_id": f"{sid}-b{r}", "tool_response": {}})
        target = {"file_path": str(root / f"{sid}.md"), "content": f"round {r}"}
        send({**base, "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": target,
              "tool_use_id": f"{sid}-w{r}"})
        write(root, f"{sid}.md", f"round {r}")
        send({**base, "hook_event_name": "PostToolUse", "tool_name": "Write", "tool_input": target,
              "tool_use_id": f"{sid}-w{r}", "tool_response": {}})
    send({**base, "hook_event_name": "SessionEnd", "reason": "other"})
    return results


def test_many_sessions_in_two_projects_at_once_lose_nothing(tmp_path):
    roots = [tmp_path / "one", tmp_path / "two"]
    for root in roots:
        for i in range(30):
            write(root, f"src/m{i}.py", f"x = {i}\n")
    jobs = [(root, f"{root.name}-s{k}") for root in roots for k in range(3)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        outcomes = [r for rs in pool.map(lambda j: session(*j), jobs) for r in rs]
    assert all(code == 0 and out == b"" for code, out, _ in outcomes)
    for root in roots:
        cps = json.loads(run_rewind("list", "--json", "-n", "100", cwd=root, check=0).stdout)
        assert len(cps) == 3 * ROUNDS, len(cps)                 # every prompt, a checkpoint
        assert len({c["id"] for c in cps}) == len(cps)
        assert {c["prompt"] for c in cps} == {f"{root.name}-s{k} prompt {r}" for k in range(3) for r in range(ROUNDS)}
    assert json.loads(run_rewind("verify", "--json", cwd=tmp_path, check=0).stdout)["ok"]
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    text = log.read_text() if log.exists() else ""
    assert "locked" not in text and "failed" not in text, text[-2000:]
