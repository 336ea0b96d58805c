#!/usr/bin/env python3
"""rewind's hook time in a real Claude Code session, per prompt and per call, against the
interpreter's bare start, measured in the same run.

    python benchmarks/session_hooks.py [--files 0] [--rounds 3] [--rewind PYTHON ...]
        [--modes resume,stream] [--watch on,off] [--cold] [--keep]

It drives the real `claude` CLI (--claude PATH or $CLAUDE_BIN; it stops and says so when
neither is given) through tests/agents/claude (run_session.py): the harness's
mock of the model API scripts the turns, Claude Code really runs the tools and really fires
the hooks. Each prompt writes a file (Write), reads and edits another (Read, Edit) and runs a
shell command (Bash), each in a turn of its own, as real turns do.

Each `--rewind PYTHON` is an install to measure (a venv's python; default: this one). Its
`python -m rewind hooks install claude` writes the project's hooks, exactly as a user gets
them; then each installed command is wrapped by a few lines of bash that take the wall
time around it ($EPOCHREALTIME, no fork) and append it to a log. The baseline is the same
session with every hook replaced by `PYTHON -S -c pass` through the same wrapper, run once
per interpreter binary (venvs of one Python start alike, and share it).

Modes: `resume` runs a `claude -p` process per prompt (`--resume` the session: a
SessionStart and a SessionEnd per prompt, as `claude -p`, Codex and Gemini CLI do); `stream`
keeps one process for all prompts (stream-json input: one long session). Each runs with the
watcher (REWIND_WATCH=1) and without (REWIND_WATCH=0). Every configuration has its own copy
of the project, its own REWIND_HOME under a temporary directory, and its own mock; they
advance prompt by prompt in turn, in a rotating order, so a slow moment of the machine falls
on all of them. Unless `--cold`, each store holds the tree before the session (`rewind
save`): the figures are a working session's, not the first snapshot's; the disk is synced
once every configuration is ready, so no session starts under another's copy. Every install runs
from byte code, compiled up front into the work directory (PYTHONPYCACHEPREFIX), as a
pip-installed one runs from its own; no checkout gets a __pycache__.

A call counts for the prompt that was running when it started; in stream mode the session's
SessionStart counts for the first prompt and its SessionEnd for the last. Pre/PostToolUse
are told apart by tool by their order (Write, Edit, Bash: each in a turn of its own).

Checks, or it fails: every prompt fired its hooks (one UserPromptSubmit, a Pre and a Post
per tool, a Stop), every hook exited 0, every prompt has its checkpoint (`rewind list
--json`), no tool failed, the files end as scripted. Watchers the run started are stopped.
Runs inside a loopback-only network namespace when `unshare -n` works, as the harness does.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

HARNESS = common.HARNESS

# The span it times is the command, and bash's fork and exec of it; bash's own start and the
# append fall outside. The same for every hook and for the baseline.
WRAPPER = """#!/bin/bash
# timed.sh LOG EVENT COMMAND...: runs COMMAND on this stdin, appends "EVENT START END STATUS" to LOG
s=$EPOCHREALTIME
"${@:3}"
r=$?
e=$EPOCHREALTIME
echo "$2 $s $e $r" >>"$1"
exit $r
"""

SKIP_STDLIB = r"/(test|tests|idlelib|tkinter|lib2to3|ensurepip|turtledemo|site-packages)/"
TOOLS = ["Write", "Edit", "Bash"]         # the hooked tools of a prompt, in the order it runs them
SMALL = {                                 # the 5-file project (--files 0), added to a generated tree
    "README.md": "# bench project\n",
    "app/__init__.py": "",
    "app/main.py": "from app.config import ROUND\n\n\ndef main():\n    print('round', ROUND)\n",
    "app/config.py": "NAME = 'bench'\nROUND = 0\n",
    "tests/test_main.py": "from app.main import main\n\n\ndef test_main():\n    main()\n",
}
LABELS = ["SessionStart", "UserPromptSubmit"] + [f"{e} {t}" for t in TOOLS for e in ("PreToolUse", "PostToolUse")] \
    + ["Stop", "SessionEnd"]
rs = None                                 # the harness's run_session module, imported by main()
MODES = {"resume": "a `claude -p --resume` process per prompt", "stream": "one process, one long session"}


def die(msg: str) -> None:
    raise SystemExit(f"session_hooks: {msg}")


def scenario(rounds: int) -> dict:
    """The harness's scenario format; tool inputs as Claude Code 2.1.197 sends them
    (tests/agents/claude/payloads)."""
    prompts = []
    for k in range(1, rounds + 1):
        prompts.append({
            "prompt": f"Round {k}: write the round's notes, bump ROUND in app/config.py and log the round.",
            "turns": [
                {"text": "Writing the notes.", "tool_uses": [
                    {"name": "Write", "input": {"file_path": f"<PROJECT_DIR>/notes/round_{k}.md",
                                                "content": f"# round {k}\n\n- notes of round {k}\n"}}]},
                {"tool_uses": [{"name": "Read", "input": {"file_path": "<PROJECT_DIR>/app/config.py"}}]},
                {"tool_uses": [{"name": "Edit", "input": {"file_path": "<PROJECT_DIR>/app/config.py",
                                                          "old_string": f"ROUND = {k - 1}",
                                                          "new_string": f"ROUND = {k}"}}]},
                {"tool_uses": [{"name": "Bash", "input": {"command": f"echo 'round {k}' >> rounds.log && wc -l < rounds.log",
                                                          "description": "Log the round"}}]},
                {"text": f"Round {k} done."}]})
    return {"prompts": prompts,
            "expect": {"exists": [f"notes/round_{k}.md" for k in range(1, rounds + 1)],
                       "contents": {"app/config.py": f"NAME = 'bench'\nROUND = {rounds}\n",
                                    "rounds.log": "".join(f"round {k}\n" for k in range(1, rounds + 1))},
                       "no_tool_errors": True}}


def make_template(path: Path, files: int, git: bool = True) -> None:
    """The project every configuration gets a copy of: a generated tree (or none) plus the
    small project the prompts edit, committed to git (unless not `git`), as a real project is."""
    if files:
        common.gen_tree(path, files)
    for rel, text in SMALL.items():
        p = path / rel
        if rel != "README.md" and p.exists():
            die(f"{p} exists in the generated tree")
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    if not git:
        return
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
    # no automatic gc: a detached `git gc --auto` after the commit would repack while the
    # template is copied, or later in a configuration's copy while it is measured
    for cmd in (["init", "-q"], ["config", "gc.auto", "0"], ["config", "maintenance.auto", "false"],
                ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *cmd], cwd=path, env=env, check=True, stdout=subprocess.DEVNULL)


class Install:
    """One rewind to measure: a python whose `-m rewind` is that install. Its commands run
    from "/": `-c` and `-m` put the current directory first on sys.path, and a checkout
    there would be imported instead."""

    def __init__(self, py: str, name: str):
        self.py, self.name = py, name
        self.binary = os.path.realpath(py)
        r = subprocess.run([py, "-c", "import os, rewind; print(os.path.dirname(os.path.abspath(rewind.__file__)))"],
                           capture_output=True, text=True, cwd="/")
        if r.returncode:
            die(f"{py} cannot import rewind: {r.stderr.strip()[-500:]}")
        self.package = r.stdout.strip()
        head = subprocess.run(["git", "-C", self.package, "log", "-1", "--format=%h %s"], capture_output=True, text=True)
        self.commit = head.stdout.strip()[:70] if head.returncode == 0 else "not a git checkout"
        # an installed rewind runs from byte code, and so does the standard library it imports.
        # One process, no `-j 0`: with everything compiled already (the usual case) the
        # process pool costs 8.6 s of CPU to find nothing to do, one process 0.35 s
        stdlib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                                capture_output=True, text=True, cwd="/").stdout.strip()
        for args in (["-x", SKIP_STDLIB, stdlib], [self.package]):
            subprocess.run([py, "-m", "compileall", "-q", *args], check=True, stdout=subprocess.DEVNULL, cwd="/")


class Config:
    """One column of one table: an install with the watcher on or off, or a bare baseline."""

    def __init__(self, install: Install, watch: bool | None, work: Path):
        self.install, self.watch = install, watch
        self.bare = watch is None
        self.key = f"{install.name}-bare" if self.bare else f"{install.name}-watch{'on' if watch else 'off'}"
        self.dir = work / self.key
        self.project, self.home, self.out = self.dir / "proj", self.dir / "home", self.dir / "out"
        self.log = self.dir / "timings.log"
        self.starts: list[float] = []      # when each prompt was handed to claude
        self.mock = self.stream = self.transcript = None
        self.session_id = None
        self.new_session_id = None         # given to the first `claude -p` (--session-id), if set

    def rewind(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, REWIND_HOME=str(self.home), REWIND_WATCH="0")
        env.pop("REWIND_CONFIG_HOME", None)
        r = subprocess.run([self.install.py, "-m", "rewind", *args, "--project", str(self.project)],
                           env=env, capture_output=True, text=True, cwd="/")
        if check and r.returncode:
            die(f"{self.key}: rewind {' '.join(args)} failed: {r.stderr.strip()[-800:]}")
        return r


def wrap_hooks(cfg: Config, wrapper: Path) -> None:
    """Install the hooks as `rewind hooks install claude` writes them, then wrap each command
    (or, for the baseline, put `python -S -c pass` of the same interpreter in its place)."""
    cfg.rewind("hooks", "install", "claude")
    path = cfg.project / ".claude" / "settings.local.json"
    settings = json.loads(path.read_text())
    installed = {h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]}
    if len(installed) != 1 or cfg.install.package not in installed.pop():
        die(f"{cfg.key}: `rewind hooks install claude` wrote commands that do not run {cfg.install.package}")
    for event, groups in settings["hooks"].items():
        for group in groups:
            for handler in group["hooks"]:
                command = handler["command"]
                if cfg.bare:
                    command = f"{shlex.quote(shlex.split(command)[0])} -S -c pass"
                handler["command"] = f"/bin/bash {shlex.quote(str(wrapper))} {shlex.quote(str(cfg.log))} {event} {command}"
    path.write_text(json.dumps(settings, indent=2) + "\n")


def claude_env(cfg: Config, base_url: str) -> dict:
    env = rs.clean_env(base_url, str(cfg.out / "claude-config"), os.geteuid() == 0)
    env.update(REWIND_HOME=str(cfg.home), REWIND_WATCH="1" if cfg.watch else "0")
    for k in ("REWIND_CONFIG_HOME", "BASH_ENV", "REWIND_HOOK_TRACE"):
        env.pop(k, None)
    return env


def run_prompt(cfg: Config, mode: str, k: int, prompt: str, claude: str, env: dict, timeout: int) -> None:
    """Prompt k of cfg's session, as the harness runs it (run_prompts / run_stream)."""
    if mode == "resume":
        cmd = [claude, "-p", "--output-format", "json", "--dangerously-skip-permissions"]
        if cfg.session_id:
            cmd += ["--resume", cfg.session_id]
        elif cfg.new_session_id:
            cmd += ["--session-id", cfg.new_session_id]
        cfg.starts.append(time.time())
        r = subprocess.run(cmd + [prompt], cwd=cfg.project, env=env, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        (cfg.out / f"claude-{k}.out").write_text(r.stdout)
        (cfg.out / f"claude-{k}.err").write_text(r.stderr)
        res = rs.parse_result(r.stdout)
        if r.returncode or not res or res.get("is_error"):
            die(f"{cfg.key}: prompt {k + 1} failed (rc {r.returncode}): {r.stderr.strip()[-800:] or r.stdout[-800:]}")
        cfg.session_id = res.get("session_id") or cfg.session_id
    else:
        if cfg.stream is None:
            start_stream(cfg, claude, env)
        cfg.starts.append(time.time())
        cfg.stream.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
        cfg.stream.stdin.flush()
        res = {}
        for line in cfg.stream.stdout:
            cfg.transcript.write(line)
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("type") == "result":
                res = obj
                break
        if not res or res.get("is_error"):
            die(f"{cfg.key}: prompt {k + 1} failed in the stream session: {json.dumps(res)[:800]}")


def start_stream(cfg: Config, claude: str, env: dict) -> None:
    """The stream session's process: it fires SessionStart at once, then waits for a prompt."""
    cmd = [claude, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
           "--dangerously-skip-permissions"]
    cfg.stream = subprocess.Popen(cmd, cwd=cfg.project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(cfg.out / "claude-stream.err", "w"), text=True)
    cfg.transcript = open(cfg.out / "claude-stream.out", "w")


def end_stream(cfg: Config, timeout: int) -> None:
    if cfg.stream is None:
        return
    cfg.stream.stdin.close()
    for line in cfg.stream.stdout:
        cfg.transcript.write(line)
    rc = cfg.stream.wait(timeout)
    cfg.transcript.close()
    cfg.stream = None
    if rc:
        die(f"{cfg.key}: the stream session exited {rc}")


def timed_rows(cfg: Config) -> list[tuple[float, float, str, str]]:
    """The wrapper's log: (start, end, event, exit status) of every hook call, by start."""
    if not cfg.log.exists():
        die(f"{cfg.key}: no hook ran at all ({cfg.log} is missing)")
    rows = []
    for line in cfg.log.read_text().splitlines():
        event, start, end, rc = line.split()
        rows.append((float(start.replace(",", ".")), float(end.replace(",", ".")), event, rc))
    return sorted(rows)


def read_calls(cfg: Config, mode: str, rounds: int) -> list[list[tuple[str, float]]]:
    """The timed calls of each prompt, as (label, seconds), checked: a call belongs to the
    prompt that was running when it started (SessionStart before the first prompt's message
    to the first, SessionEnd after the last to the last)."""
    rows = []
    for start, end, event, rc in timed_rows(cfg):
        if rc != "0":
            die(f"{cfg.key}: a {event} hook exited {rc}")
        rows.append((start, end, event))
    prompts: list[list[tuple[str, float]]] = [[] for _ in range(rounds)]
    tools = [{"PreToolUse": 0, "PostToolUse": 0} for _ in range(rounds)]
    for start, end, event in rows:
        k = max(0, sum(1 for s in cfg.starts if s <= start) - 1)
        label = event
        if event in ("PreToolUse", "PostToolUse"):
            i = tools[k][event]
            tools[k][event] += 1
            label = f"{event} {TOOLS[i] if i < len(TOOLS) else '?'}"
        prompts[k].append((label, end - start))
    for k, calls in enumerate(prompts):
        if not calls:
            die(f"{cfg.key}: prompt {k + 1} had 0 hook calls")
        got = sorted(label for label, _ in calls)
        want = ["UserPromptSubmit", "Stop"] + [f"{e} {t}" for t in TOOLS for e in ("PreToolUse", "PostToolUse")]
        if mode == "resume" or k == 0:
            want.append("SessionStart")
        if mode == "resume" or k == rounds - 1:
            want.append("SessionEnd")
        if got != sorted(want):
            die(f"{cfg.key}: prompt {k + 1} fired {got}, expected {sorted(want)}")
    return prompts


def check_session(cfg: Config, expect: dict, prompts: list[str]) -> None:
    problems = rs.check_files(str(cfg.project), expect)
    problems += ["tool error " + e for e in rs.check_requests(rs.read_jsonl(str(cfg.out / "requests.jsonl")))]
    if problems:
        die(f"{cfg.key}: " + "; ".join(problems))
    if cfg.bare:
        return
    listed = json.loads(cfg.rewind("list", "--json", "-n", "100000", "--every").stdout)
    got = [c.get("prompt") for c in reversed(listed) if c.get("kind") == "prompt"]
    if got != prompts:
        die(f"{cfg.key}: the prompt checkpoints are {got}, expected one per prompt: {prompts}")
    log = cfg.home / "rewind.log"
    if log.exists() and log.read_text().strip():
        print(f"warning: {cfg.key}: rewind.log says: {log.read_text().strip()[-600:]}", file=sys.stderr)


def stop_watchers(cfg: Config) -> None:
    """Stop the watcher this configuration's hooks started, if one still runs."""
    if cfg.bare or not cfg.home.exists():
        return
    cfg.rewind("watch", "--stop", check=False)
    r = cfg.rewind("watch", "--status", "--json", check=False)
    try:
        view = json.loads(r.stdout)
    except ValueError:
        return
    if view.get("running") and view.get("pid"):
        try:
            os.kill(view["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ms(x: float) -> str:
    return f"{x * 1000:.0f}" if x >= 0.1 else f"{x * 1000:.1f}"


def table(title: str, cols: list[Config], bare: dict[str, float], data: dict[str, list],
          slots: dict[str, dict[str, float]]) -> str:
    """One column per install, then each install's ratio to the first (same row). `slots`:
    per interpreter, the bare start's median in each call's own place of the session (the
    agent's own work at that moment, such as its start-up around SessionStart, slows a
    process it starts then)."""
    heads = [c.install.name for c in cols] + [f"{c.install.name}/{cols[0].install.name}" for c in cols[1:]]
    rows: list[tuple[str, list[str]]] = []

    def add(name, values, ratio=True):
        cells = [v[0] for v in values]
        if ratio:
            cells += [f"{v[1] / values[0][1]:.2f}" if values[0][1] else "-" for v in values[1:]]
        else:
            cells += [""] * (len(values) - 1)
        rows.append((name, cells))

    per_prompt = {c.key: [sum(s for _, s in calls) for calls in data[c.key]] for c in cols}
    counts = {c.key: [len(calls) for calls in data[c.key]] for c in cols}
    ratios = {c.key: [t / (bare[c.install.binary] * n) for t, n in zip(per_prompt[c.key], counts[c.key])] for c in cols}
    add("hook time per prompt, ms: median (min-max)",
        [(f"{ms(med(per_prompt[c.key]))} ({ms(min(per_prompt[c.key]))}-{ms(max(per_prompt[c.key]))})",
          med(per_prompt[c.key])) for c in cols])
    add("hook calls per prompt: median (min-max)",
        [(f"{med(counts[c.key]):g} ({min(counts[c.key])}-{max(counts[c.key])})", med(counts[c.key])) for c in cols],
        ratio=False)
    add("bare start (python -S -c pass), ms", [(ms(bare[c.install.binary]), bare[c.install.binary]) for c in cols])
    add("per prompt / (bare start x calls): median",
        [(f"{med(ratios[c.key]):.2f}x", med(ratios[c.key])) for c in cols])
    rows.append(("per call, ms: median (x bare start; x a bare start in its place) [n]", [""] * len(heads)))
    for label in LABELS:
        values = []
        for c in cols:
            xs = [s for calls in data[c.key] for lab, s in calls if lab == label]
            slot = slots.get(c.install.binary, {}).get(label)
            there = f"; {med(xs) / slot:.1f}x" if slot and slot == slot else ""
            values.append((f"{ms(med(xs))} ({med(xs) / bare[c.install.binary]:.1f}x{there}) [{len(xs)}]", med(xs))
                          if xs else ("-", 0))
        if any(v[1] for v in values):
            add("  " + label, values)
    width0 = max(len(r[0]) for r in rows)
    widths = [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(heads)]
    out = [title, " " * width0 + "  " + "  ".join(h.rjust(w) for h, w in zip(heads, widths))]
    for name, cells in rows:
        out.append(name.ljust(width0) + "  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    return "\n".join(out)


def run_mode(mode: str, installs: list[Install], watches: list[bool], args, work: Path, template: Path,
             wrapper: Path, claude: str, scen: dict) -> str:
    configs = [Config(i, w, work / mode) for i in installs for w in watches]
    seen = set()
    for i in installs:                  # one baseline per interpreter (venvs of one Python share it)
        if i.binary not in seen:
            seen.add(i.binary)
            configs.append(Config(i, None, work / mode))
    scen_path = work / "scenario.json"
    prompts = [p["prompt"] for p in scen["prompts"]]
    try:
        for cfg in configs:
            cfg.dir.mkdir(parents=True)
            cfg.out.mkdir()
            subprocess.run(["cp", "-a", str(template), str(cfg.project)], check=True)
            wrap_hooks(cfg, wrapper)
            if not cfg.bare and not args.cold:
                cfg.rewind("save", "-m", "before the session")
            cfg.mock, port = rs.start_server(str(scen_path), str(cfg.project), str(cfg.out))
            cfg.env = claude_env(cfg, f"http://127.0.0.1:{port}")
        # the copies' and the saves' writeback (GBs for a 100,000-file tree) is no session's:
        # the first configuration's first hooks would otherwise run under all of it
        os.sync()
        for k, prompt in enumerate(prompts):
            for j in range(len(configs)):
                cfg = configs[(j + k) % len(configs)]
                run_prompt(cfg, mode, k, prompt, claude, cfg.env, args.timeout)
            print(f"  {mode}: prompt {k + 1}/{len(prompts)} done in every configuration", file=sys.stderr, flush=True)
        for j in range(len(configs)):
            end_stream(configs[(j + len(prompts)) % len(configs)], args.timeout)
        data = {}
        for cfg in configs:
            data[cfg.key] = read_calls(cfg, mode, len(prompts))
            check_session(cfg, scen["expect"], prompts)
    finally:
        for cfg in configs:
            if cfg.stream is not None:
                cfg.stream.kill()
                cfg.stream.wait()
            if cfg.mock is not None:
                rs.stop_server(cfg.mock)
            stop_watchers(cfg)
    if not args.keep:
        shutil.rmtree(work / mode, ignore_errors=True)
    bare, slots = {}, {}
    for cfg in configs:
        if cfg.bare:
            bare[cfg.install.binary] = med([s for calls in data[cfg.key] for _, s in calls])
            slots[cfg.install.binary] = {label: med([s for calls in data[cfg.key] for lab, s in calls if lab == label])
                                         for label in LABELS}
    out = []
    for w in watches:
        cols = [c for c in configs if c.watch is w]
        title = f"{mode} mode ({MODES[mode]}), watcher {'on' if w else 'off'}:"
        out.append(table(title, cols, bare, data, slots))
    return "\n\n".join(out)


def in_netns(netns: str, script: str, argv: list[str] | None) -> int | None:
    """--netns auto: run `script` again inside `unshare -n` (loopback only) when that works,
    and return its exit status; inner: bring that namespace's loopback up. None: go on here."""
    if netns == "auto":
        cmd = rs.unshare_cmd()
        if cmd:
            rest = list(argv if argv is not None else sys.argv[1:])
            rest = [a for i, a in enumerate(rest) if not a.startswith("--netns") and (i == 0 or rest[i - 1] != "--netns")]
            return subprocess.call(cmd + [sys.executable, os.path.abspath(script)] + rest + ["--netns", "inner"])
    if netns == "inner":
        rs.bring_loopback_up()
    return None


def installs_of(pythons: list[str]) -> list[Install]:
    """An Install per --rewind PYTHON, named by its venv (primes tell equal names apart)."""
    installs, names = [], set()
    for py in pythons:
        p = Path(py)
        name = p.parent.parent.name if p.parent.name == "bin" else p.name
        while name in names:
            name += "'"
        names.add(name)
        installs.append(Install(py, name))
    return installs


def main(argv: list[str] | None = None) -> int:
    global rs
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=0, help="a generated tree of N files (make_tree.py); 0: the 5-file project alone")
    ap.add_argument("--rounds", type=int, default=3, help="prompts per session (default 3)")
    ap.add_argument("--rewind", action="append", metavar="PYTHON",
                    help="a python whose `-m rewind` is an install to measure (repeatable; default: this one)")
    ap.add_argument("--modes", default="resume,stream", help="resume, stream or both (default)")
    ap.add_argument("--watch", default="on,off", help="on, off or both (default)")
    ap.add_argument("--cold", action="store_true", help="no `rewind save` before the session: prompt 1 takes the first snapshot")
    ap.add_argument("--claude", help="the claude executable (default: $CLAUDE_BIN, then PATH)")
    ap.add_argument("--harness", default=str(HARNESS), help="the Claude Code harness (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per prompt")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--netns", choices=["auto", "off", "inner"], default="auto",
                    help="auto: run inside `unshare -n` (loopback only) when it works")
    args = ap.parse_args(argv)
    rs = common.harness(args.harness)
    modes = [m for m in args.modes.split(",") if m]
    watches = [{"on": True, "off": False}[w] for w in args.watch.split(",") if w]
    if any(m not in MODES for m in modes) or args.rounds < 1:
        ap.error("--modes takes resume and/or stream; --rounds at least 1")
    code = in_netns(args.netns, __file__, argv)
    if code is not None:
        return code
    work = Path(tempfile.mkdtemp(prefix="rewind-session-hooks-"))
    # Byte code goes to the work directory, for every Python this run starts (the hooks and
    # watchers too): each install runs from byte code, as a pip-installed one does, and no
    # checkout gets a __pycache__ written into it.
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    claude = common.find_claude(args.claude)
    version = subprocess.run([claude, "--version"], capture_output=True, text=True).stdout.strip()
    ok = False
    try:
        installs = installs_of(args.rewind or [sys.executable])
        wrapper = work / "timed.sh"
        wrapper.write_text(WRAPPER)
        scen = scenario(args.rounds)
        (work / "scenario.json").write_text(json.dumps(scen, indent=2))
        template = work / "template"
        make_template(template, args.files)
        size = f"a generated {args.files:,}-file tree" if args.files else "a 5-file project"
        print(f"Claude Code {version}; {size}; {args.rounds} prompt(s) a session, each: Write, Read, Edit, Bash; "
              f"store {'cold' if args.cold else 'warm (rewind save before the session)'}; "
              f"network namespace: {'loopback only' if args.netns == 'inner' else 'the host'}")
        for i in installs:
            print(f"  {i.name}: {i.py} ({i.binary}) -> {i.package} ({i.commit})")
        print("  times: wall time of each installed hook command, taken around it by a bash wrapper; "
              "bare start: the same sessions with `PYTHON -S -c pass` as every hook (one per interpreter binary)\n")
        sys.stdout.flush()
        for mode in modes:
            print(run_mode(mode, installs, watches, args, work, template, wrapper, claude, scen) + "\n", flush=True)
        ok = True
    finally:
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept: {work}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
