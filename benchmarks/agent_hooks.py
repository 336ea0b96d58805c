#!/usr/bin/env python3
"""rewind's hook time per prompt in a real session of Qwen Code, Copilot CLI and OpenCode,
against as many bare `python -S` starts, measured in the same run.

    python benchmarks/agent_hooks.py [--agents qwen,copilot,opencode] [--prompts 5]
        [--rounds 2] [--watch on,off] [--keep]

Each agent's real CLI (scripts/install-agents; $QWEN_BIN, $COPILOT_BIN, $OPENCODE_BIN)
runs a scripted session through tests/agents/chat_session.py against its mock model: each
prompt writes a file, reads and edits another and runs a shell command, each in a turn of
its own. `rewind hooks install AGENT` writes the hooks exactly as a person gets them (for
OpenCode, its plugin); then the interpreter's path in what it wrote is pointed at a few
lines of bash that take the wall time around the real call ($EPOCHREALTIME, no fork) and
log it. The baseline is the same session with that wrapper running `python -S` that reads
its stdin and exits, for every hook the agent calls, in the same round (sessions of an
agent alternate, rewind's and the baseline's, so a slow moment of the machine falls on
both). A call counts for the prompt that was running when it started.

Prints, per agent and watcher mode: hook calls per prompt, rewind's hook time per prompt
(median over the prompts of every round) and the ratio against as many bare starts (the
baseline's median call), the figure the issue bounds at 2x. Checks, or it fails: every
prompt has its checkpoint and its calls, every session succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

REPO = common.REPO
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from helpers import AGENT_CLIS_HOME, agent_cli  # noqa: E402

TOOLS = {   # write, edit, read, shell (name, extra arguments), argument names (path, content, old, new)
    "qwen": ("write_file", "edit", "read_file", ("run_shell_command", {"description": "run"}),
             ("file_path", "content", "old_string", "new_string")),
    "copilot": ("create", "edit", "view", ("bash", {"description": "run", "mode": "sync"}),
                ("path", "file_text", "old_str", "new_str")),
    "opencode": ("write", "edit", "read", ("bash", {"description": "run"}),
                 ("filePath", "content", "oldString", "newString")),
}


def scenario(agent: str, prompts: int) -> dict:
    write, edit, read, (shell, extra), (path, content, old, new) = TOOLS[agent]
    out = []
    for k in range(prompts):
        target = "<PROJECT_DIR>/app/config.py"
        out.append({"prompt": f"Prompt {k + 1}: a note, the round, a test run.", "turns": [
            {"tool_calls": [{"name": write, "arguments": {path: f"<PROJECT_DIR>/note{k + 1}.txt", content: f"{k}\n"}}]},
            {"tool_calls": [{"name": read, "arguments": {path: target}}]},
            {"tool_calls": [{"name": edit, "arguments": {path: target, old: f"ROUND = {k}", new: f"ROUND = {k + 1}"}}]},
            {"tool_calls": [{"name": shell, "arguments": {"command": f"echo {k} > out{k + 1}.log", **extra}}]},
            {"text": "Done."}]})
    return {"setup": {"files": {"app/config.py": "ROUND = 0\n", "README.md": "# app\n"}}, "prompts": out,
            "expect": {"contents": {"app/config.py": f"ROUND = {prompts}\n"}}}


def timer(path: Path, log: Path, real: list[str]) -> None:
    """Bash that times `real "$@"` (or, for the baseline, a bare start that reads stdin)."""
    path.write_text("#!/bin/bash\ns=$EPOCHREALTIME\n" + " ".join(map(shlex.quote, real)) + ' "$@"\n'
                    f"e=$EPOCHREALTIME\necho \"$s $e\" >> {shlex.quote(str(log))}\n")
    path.chmod(0o755)


def run(agent: str, binary: str, work: Path, prompts: int, watch: str, bare: bool) -> list[list[float]]:
    """One session; per prompt, the durations (s) of the hook calls that started in it."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log, marks = work / "calls.log", work / "prompts.log"
    from rewind.hooks.install import hook_command
    py = shlex.split(hook_command(agent))[0]          # the interpreter the installed hooks run
    timed = work / "timed-python"
    timer(timed, log, [py, "-S", "-c", "import sys; sys.stdin.buffer.read()"] if bare else [py])
    rewind = " ".join(map(shlex.quote, common.rewind_cmd()))
    wrapper = work / "agent"
    # the hooks as `rewind hooks install` writes them, the interpreter's path then pointed at the timer
    files = " ".join(shlex.quote(p) for p in (".qwen/settings.json", ".github/hooks/rewind.json",
                                              ".opencode/plugins/rewind.js"))
    wrapper.write_text(
        "#!/bin/bash\n"
        f"echo $EPOCHREALTIME >> {shlex.quote(str(marks))}\n"
        f"{rewind} hooks install {agent} --project \"$PWD\" >/dev/null || exit 97\n"
        f"for f in {files}; do [ -f \"$f\" ] && sed -i 's#[^\" ]*/python[0-9.]*\\( -S\\|\", \"-S\\)#{timed}\\1#g' \"$f\"; done\n"
        f"exec {shlex.quote(binary)} \"$@\"\n")
    wrapper.chmod(0o755)
    (work / "scenario.json").write_text(json.dumps(scenario(agent, prompts)))
    env = dict(os.environ, REWIND_HOME=str(work / "rewind-home"), REWIND_WATCH=watch)
    r = subprocess.run([sys.executable, str(REPO / "tests" / "agents" / "chat_session.py"), "--agent", agent,
                        "--bin", str(wrapper), "--scenario", str(work / "scenario.json"),
                        "--project-dir", str(work / "proj"), "--fresh"],
                       capture_output=True, text=True, env=env, timeout=900)
    if r.returncode:
        sys.exit(f"agent_hooks: {agent} session failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    if not bare:
        listed = json.loads(subprocess.run([*common.rewind_cmd(), "list", "--json"], cwd=work / "proj", env=env,
                                           capture_output=True, text=True, check=True).stdout)
        if len(listed) != prompts:
            sys.exit(f"agent_hooks: {agent}: {len(listed)} checkpoints for {prompts} prompts")
        subprocess.run([*common.rewind_cmd(), "watch", "--stop"], cwd=work / "proj", env=env, capture_output=True)
    starts = [float(x) for x in marks.read_text().split()]
    per = [[] for _ in starts]
    for line in log.read_text().splitlines():
        s, e = map(float, line.split())
        k = max(i for i, t in enumerate(starts) if t <= s) if s >= starts[0] else 0
        per[k].append(e - s)
    if any(not calls for calls in per):
        sys.exit(f"agent_hooks: {agent}: a prompt with no hook calls ({[len(c) for c in per]})")
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", default="qwen,copilot,opencode")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--watch", default="on,off")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    cache = AGENT_CLIS_HOME / "copilot" / "cache"
    if cache.is_dir():
        os.environ.setdefault("COPILOT_CACHE_HOME", str(cache))
    root = Path(tempfile.mkdtemp(prefix="rewind-agent-hooks-"))
    print(f"{'agent':<9} {'watcher':<8} {'calls/prompt':>12} {'rewind/prompt':>14} {'bare start':>11} {'ratio':>6}")
    try:
        for agent in a.agents.split(","):
            binary = agent_cli(agent)
            if not binary:
                sys.exit(f"agent_hooks: {agent} is not installed (scripts/install-agents)")
            for watch in a.watch.split(","):
                w = "1" if watch == "on" else "0"
                ours, bare = [], []
                for k in range(a.rounds):
                    ours += run(agent, binary, root / f"{agent}-{watch}-{k}", a.prompts, w, False)
                    bare += [d for calls in run(agent, binary, root / f"{agent}-bare-{k}", a.prompts, w, True)
                             for d in calls]
                start = statistics.median(bare)
                per_prompt = statistics.median(sum(c) for c in ours)
                calls = statistics.median(len(c) for c in ours)
                ratio = statistics.median(sum(c) / (len(c) * start) for c in ours)
                print(f"{agent:<9} {watch:<8} {calls:>12.0f} {per_prompt * 1000:>11.1f} ms {start * 1000:>8.1f} ms "
                      f"{ratio:>5.2f}x", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept: {root}")


if __name__ == "__main__":
    main()
