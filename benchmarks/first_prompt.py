#!/usr/bin/env python3
"""The first prompts of a session on a big tree just generated: what they cost against a
later prompt, and whether each has its checkpoint.

    python benchmarks/first_prompt.py [--files 100000] [--delay 10] [--later 3]
        [--rewind PYTHON ...] [--modes resume,stream] [--keep]

The case: a person opens Claude Code in a freshly cloned big project and types a
first prompt 10 s later. The store is empty (no `rewind save`): the watcher that SessionStart
starts takes the first snapshot, and the first prompts come while it runs. Run per install
and mode, one after the other (each its own project and REWIND_HOME, never two at once):

- a tree of --files files is generated (make_tree.py) right into the
  project, plus the small project the prompts edit, right before the session: its pages are
  as writing left them, neither dropped (we cannot) nor read again (no copy, no `git add`:
  no git repository at all, the tree's .gitignore is rewind's own to read);
- `PYTHON -m rewind hooks install claude` writes the hooks, each wrapped by session_hooks.py's
  timer; the watcher is on (REWIND_WATCH=1);
- t0 is SessionStart. In `stream` mode it is Claude Code's own: the process starts (one
  long session, as an interactive `claude` is) and fires SessionStart at once, then waits for
  a prompt on its stdin -- the prompt comes --delay s after that SessionStart began, as a
  person types it. In `resume` mode (a `claude -p` process per prompt) Claude Code cannot do
  that: `claude -p` takes its prompt when it starts (without one it waits 3 s for stdin, then
  exits before any hook). So t0 is the installed SessionStart command fired by this script
  with Claude Code's captured `startup` payload (tests/agents/claude/payloads) and the hook
  environment it gives, for the session id the first `claude -p` then gets (--session-id):
  the start of an interactive session, then its prompts as `claude -p` runs them (each with
  its own SessionStart and SessionEnd, counted to its prompt);
- prompt 1 at t0 + --delay, prompt 2 right after it (each a full turn: Write, Read, Edit,
  Bash, as session_hooks.py's), then this script waits until the watcher's first scan is in
  (`rewind watch --status --json` counts a full scan, `rewind list --json` shows no pending
  checkpoint), then --later more prompts.

It prints per prompt the hook time (every call of the prompt summed) and its ratio to the
median later prompt, the UserPromptSubmit hook alone and its ratio, each call, and each
prompt's checkpoint right after prompt 2 and at the end (`pending` in `rewind list --json`;
an item without that field is complete). The watcher's first scan: from its start
(`since`) to between the last status poll that counts no full scan and the first that
counts one, polled every --poll s from t0 (each poll is a `rewind` process: a little load of
its own), and any status field that names the first scan or baseline. SessionStart at t0 (and the stream session's SessionEnd)
count for no prompt; they are printed apart.

Exit status 1 when a prompt has no checkpoint or one still pending at the end, a hook exited
non-zero, a prompt lacks one of its hook calls (a hook Claude Code killed at its timeout
leaves no timing), a tool failed or the files do not end as scripted. Runs inside a
loopback-only network namespace when `unshare -n` works, as the harness does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session_hooks as sh  # noqa: E402

TOOL_LABELS = [f"{e} {t}" for t in sh.TOOLS for e in ("PreToolUse", "PostToolUse")]


class Poller(threading.Thread):
    """`rewind watch --status --json` every `every` s: when the first full scan is counted
    (in by the end of the first poll that counts it, not yet at the start of the one before)."""

    def __init__(self, cfg: sh.Config, every: float):
        super().__init__(daemon=True)
        self.cfg, self.every = cfg, every
        self.done = threading.Event()
        self.view: dict = {}
        self.first_in: float | None = None      # the end of the first poll that counted a full scan
        self.not_yet: float | None = None       # the start of the last poll that counted none

    def poll(self) -> dict:
        began = time.time()
        r = self.cfg.rewind("watch", "--status", "--json", check=False)
        try:
            view = json.loads(r.stdout) if r.returncode == 0 else {}
        except ValueError:
            view = {}
        if view:
            self.view = view
            if self.first_in is None:
                if view.get("full_scans", 0) >= 1:
                    self.first_in = time.time()
                else:
                    self.not_yet = began
        return view

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.poll()


def epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def checkpoints(cfg: sh.Config, prompts: list[str]) -> list[list[dict]]:
    """Each prompt's checkpoints in `rewind list --json` (one each, if all is well)."""
    listed = json.loads(cfg.rewind("list", "--json", "-n", "100000", "--every").stdout)
    return [[c for c in listed if c.get("kind") == "prompt" and c.get("prompt") == p] for p in prompts]


def cp_state(found: list[dict]) -> str:
    if not found:
        return "none"
    return ", ".join(f"#{c['id']} {'pending' if c.get('pending') else 'complete'}" for c in found)


def fire_session_start(cfg: sh.Config, env: dict, session_id: str) -> None:
    """The installed SessionStart command, as Claude Code runs it (a shell, the project as
    cwd, its hook environment), with its captured `startup` payload for `session_id`."""
    settings = json.loads((cfg.project / ".claude" / "settings.local.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    config_dir = str(cfg.out / "claude-config")
    payload = (Path(sh.rs.HERE) / "payloads" / "SessionStart.startup.json").read_text()
    for k, v in {"<PROJECT_DIR>": str(cfg.project), "<SESSION_ID>": session_id, "<CLAUDE_CONFIG_DIR>": config_dir,
                 "<PROJECT_KEY>": re.sub(r"[^A-Za-z0-9]", "-", str(cfg.project))}.items():
        payload = payload.replace(k, v)
    hook_env = dict(env, CLAUDE_PROJECT_DIR=str(cfg.project), CLAUDE_CODE_SESSION_ID=session_id, CLAUDECODE="1",
                    CLAUDE_CODE_ENTRYPOINT="sdk-cli", CLAUDE_CODE_CHILD_SESSION="1")
    subprocess.run(command, shell=True, input=json.dumps(json.loads(payload)), text=True, cwd=cfg.project,
                   env=hook_env, timeout=60)


def group_calls(cfg: sh.Config, mode: str, ends: list[float], problems: list[str]):
    """(calls at t0, each prompt's calls, calls after the last prompt), as (label, seconds);
    a call belongs to the prompt running when it started."""
    n = len(cfg.starts)
    before, after = [], []
    prompts: list[list[tuple[str, float]]] = [[] for _ in range(n)]
    tools = [{"PreToolUse": 0, "PostToolUse": 0} for _ in range(n)]
    for start, end, event, rc in sh.timed_rows(cfg):
        if rc != "0":
            problems.append(f"a {event} hook exited {rc}")
        if start < cfg.starts[0]:
            before.append((event, end - start))
            continue
        if start > ends[-1] and event == "SessionEnd":      # the stream session's, once its stdin closed
            after.append((event, end - start))
            continue
        k = sum(1 for s in cfg.starts if s <= start) - 1
        label = event
        if event in ("PreToolUse", "PostToolUse"):
            i = tools[k][event]
            tools[k][event] += 1
            label = f"{event} {sh.TOOLS[i] if i < len(sh.TOOLS) else '?'}"
        prompts[k].append((label, end - start))
    want = ["UserPromptSubmit", *TOOL_LABELS, "Stop"] + (["SessionStart", "SessionEnd"] if mode == "resume" else [])
    for k, calls in enumerate(prompts):
        got = sorted(label for label, _ in calls)
        if got != sorted(want):
            problems.append(f"prompt {k + 1} fired {got}, expected {sorted(want)}")
    if [e for e, _ in before] != ["SessionStart"]:
        problems.append(f"at t0: {[e for e, _ in before]}, expected one SessionStart")
    if [e for e, _ in after] != (["SessionEnd"] if mode == "stream" else []):
        problems.append(f"after the last prompt: {[e for e, _ in after]}")
    return before, prompts, after


def run_one(install: sh.Install, mode: str, args, work: Path, wrapper: Path, claude: str, scen: dict) -> tuple[str, list[str]]:
    """One session on a tree generated for it; its report and its problems."""
    cfg = sh.Config(install, True, work / install.name / mode)
    prompts = [p["prompt"] for p in scen["prompts"]]
    scen_path = work / "scenario.json"
    problems: list[str] = []
    poller = None
    ends: list[float] = []
    cfg.dir.mkdir(parents=True)
    cfg.out.mkdir()
    try:
        began = time.time()
        sh.make_template(cfg.project, args.files, git=False)
        made = time.time() - began
        sh.wrap_hooks(cfg, wrapper)
        if json.loads(cfg.rewind("list", "--json").stdout):
            sh.die(f"{cfg.key}: the store holds checkpoints before the session")
        cfg.mock, port = sh.rs.start_server(str(scen_path), str(cfg.project), str(cfg.out))
        env = sh.claude_env(cfg, f"http://127.0.0.1:{port}")
        poller = Poller(cfg, args.poll)
        if mode == "resume":
            cfg.new_session_id = str(uuid.uuid4())
            fire_session_start(cfg, env, cfg.new_session_id)
        else:
            sh.start_stream(cfg, claude, env)
        deadline = time.time() + 60
        while not (cfg.log.exists() and cfg.log.read_text().strip()):
            if time.time() > deadline:
                sh.die(f"{cfg.key}: no SessionStart within 60 s")
            time.sleep(0.02)
        t0 = sh.timed_rows(cfg)[0][0]
        poller.start()
        time.sleep(max(0.0, t0 + args.delay - time.time()))
        for k in (0, 1):
            sh.run_prompt(cfg, mode, k, prompts[k], claude, env, args.timeout)
            ends.append(time.time())
        after_two = [cp_state(f) for f in checkpoints(cfg, prompts[:2])]
        print(f"  {install.name} {mode}: prompts 1-2 done; waiting for the first scan", file=sys.stderr, flush=True)
        deadline = time.time() + args.scan_timeout
        while True:
            view = poller.poll()
            pending = any(c.get("pending") for f in checkpoints(cfg, prompts[:2]) for c in f)
            if view.get("full_scans", 0) >= 1 and not pending:
                break
            if time.time() > deadline:
                problems.append(f"the first scan was not in {args.scan_timeout} s after prompt 2")
                break
            time.sleep(args.poll)
        scan_wait = time.time() - ends[-1]
        for k in range(2, len(prompts)):
            sh.run_prompt(cfg, mode, k, prompts[k], claude, env, args.timeout)
            ends.append(time.time())
        sh.end_stream(cfg, args.timeout)
        poller.done.set()
        poller.join()
        at_end = checkpoints(cfg, prompts)
        for k, found in enumerate(at_end):
            if len(found) != 1 or found[0].get("pending"):
                problems.append(f"prompt {k + 1}'s checkpoint at the end: {cp_state(found)}")
        problems += sh.rs.check_files(str(cfg.project), scen["expect"])
        problems += ["tool error " + e for e in sh.rs.check_requests(sh.rs.read_jsonl(str(cfg.out / "requests.jsonl")))]
        before, calls, after = group_calls(cfg, mode, ends, problems)
        ups_at = [start for start, _, event, _ in sh.timed_rows(cfg) if event == "UserPromptSubmit"]
        log = cfg.home / "rewind.log"
        logged = log.read_text().strip() if log.exists() else ""
        status = poller.view
    finally:
        if poller is not None:
            poller.done.set()
        if cfg.stream is not None:
            cfg.stream.kill()
            cfg.stream.wait()
        if cfg.mock is not None:
            sh.rs.stop_server(cfg.mock)
        sh.stop_watchers(cfg)
    if not args.keep:
        shutil.rmtree(cfg.dir, ignore_errors=True)

    totals = [sum(s for _, s in c) for c in calls]
    ups = [sum(s for lab, s in c if lab == "UserPromptSubmit") for c in calls]
    later_total, later_ups = statistics.median(totals[2:]), statistics.median(ups[2:])
    out = [f"{mode} mode ({sh.MODES[mode]}), {install.name}:",
           f"  tree: {args.files:,} generated files + the 5-file project, written in {made:.1f} s right before the session"]
    since = epoch(status.get("since"))
    first = ""
    if poller.first_in is not None and since is not None:
        low = max(poller.not_yet or since, since)
        first = (f"; its first scan in between t0+{low - t0:.1f} s and t0+{poller.first_in - t0:.1f} s: "
                 f"{low - since:.1f}-{poller.first_in - since:.1f} s after its start (status polled every {args.poll:g} s)")
    out.append(f"  watcher: started at t0+{since - t0:.1f} s{first}" if since is not None else
               "  watcher: never seen running by a status poll")
    extra = {k: v for k, v in status.items() if "baseline" in k or "first" in k}
    if extra:
        out.append(f"  watcher status, first scan: {json.dumps(extra)}")
    last = (status.get("last_fallback") or {}).get("reason")
    out.append(f"  watcher status at the end: {status.get('full_scans')} full scan(s), {status.get('quick_scans')} quick, "
               f"{status.get('fallbacks')} fallback(s){f' (last: {last})' if last else ''}; "
               f"hooks served {status.get('hooks_served')}, standalone {status.get('hooks_standalone')}")
    out.append(f"  SessionStart at t0: {sh.ms(before[0][1]) if before else '-'} ms"
               + (f"; the session's SessionEnd after the last prompt: {sh.ms(after[0][1])} ms" if after else "")
               + f"; waited {scan_wait:.1f} s after prompt 2 for the first scan")
    rows = [("prompt", "sent at", "its UserPromptSubmit at", "hook time ms", "x later", "UserPromptSubmit ms",
             "x later", "calls", "checkpoint after prompt 2", "at the end")]
    for k in range(len(prompts)):
        name = f"{k + 1}" + (" (later)" if k >= 2 else "")
        at = f"t0+{ups_at[k] - t0:.1f}s" if k < len(ups_at) else "-"
        rows.append((name, f"t0+{cfg.starts[k] - t0:.1f}s", at, sh.ms(totals[k]), ratio(totals[k], later_total),
                     sh.ms(ups[k]), ratio(ups[k], later_ups), str(len(calls[k])),
                     after_two[k] if k < 2 else "", cp_state(at_end[k])))
    rows.append(("later: median", "", "", sh.ms(later_total), "1.00", sh.ms(later_ups), "1.00", "", "", ""))
    out += ["  " + line for line in columns(rows)]
    labels = (["SessionStart"] if mode == "resume" else []) + ["UserPromptSubmit", *TOOL_LABELS, "Stop"] \
        + (["SessionEnd"] if mode == "resume" else [])
    rows = [("per call, ms", *[f"p{k + 1}" for k in range(len(prompts))], "later median")]
    for label in labels:
        xs = [[s for lab, s in c if lab == label] for c in calls]
        cells = [",".join(sh.ms(x) for x in v) or "-" for v in xs]
        later = [x for v in xs[2:] for x in v]
        rows.append((label, *cells, sh.ms(statistics.median(later)) if later else "-"))
    out += ["  " + line for line in columns(rows)]
    out.append(f"  prompt 1: {ratio(totals[0], later_total)}x a later prompt, prompt 2: {ratio(totals[1], later_total)}x; "
               f"checkpoints: {sum(1 for f in at_end if len(f) == 1 and not f[0].get('pending'))}/{len(prompts)} complete")
    # a shell command's PreToolUse waits for the first scan by design (it could write anywhere
    # before the scan has read it): the rest of the prompt's hooks, apart
    rest = [sum(s for lab, s in c if lab != "PreToolUse Bash") for c in calls]
    later_rest = statistics.median(rest[2:]) if rest[2:] else 0
    out.append(f"  without the shell command's PreToolUse (it waits for the first scan): prompt 1 {sh.ms(rest[0])} ms "
               f"({ratio(rest[0], later_rest)}x), prompt 2 {sh.ms(rest[1])} ms ({ratio(rest[1], later_rest)}x) "
               f"against a later prompt's {sh.ms(later_rest)} ms")
    if logged:
        out.append(f"  rewind.log: {logged[-800:]}")
    return "\n".join(out), [f"{install.name} {mode}: {p}" for p in problems]


def ratio(x: float, ref: float) -> str:
    return f"{x / ref:.2f}" if ref else "-"


def columns(rows: list[tuple]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000, help="the generated tree's files (default %(default)s)")
    ap.add_argument("--delay", type=float, default=10.0, help="seconds from SessionStart to the first prompt (default 10)")
    ap.add_argument("--later", type=int, default=3, help="prompts after the first scan is in (default 3)")
    ap.add_argument("--rewind", action="append", metavar="PYTHON",
                    help="a python whose `-m rewind` is an install to measure (repeatable; default: this one)")
    ap.add_argument("--modes", default="resume,stream", help="resume, stream or both (default)")
    ap.add_argument("--poll", type=float, default=2.0, help="seconds between watcher status polls (default 2)")
    ap.add_argument("--scan-timeout", type=int, default=900, help="seconds to wait for the first scan after prompt 2")
    ap.add_argument("--claude", help="the claude executable (default: $CLAUDE_BIN, then PATH)")
    ap.add_argument("--harness", default=str(sh.HARNESS), help="the Claude Code harness (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per prompt")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--netns", choices=["auto", "off", "inner"], default="auto",
                    help="auto: run inside `unshare -n` (loopback only) when it works")
    args = ap.parse_args(argv)
    sh.rs = sh.common.harness(args.harness)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in sh.MODES for m in modes) or args.later < 1 or args.files < 0:
        ap.error("--modes takes resume and/or stream; --later at least 1")
    code = sh.in_netns(args.netns, __file__, argv)
    if code is not None:
        return code
    work = Path(tempfile.mkdtemp(prefix="rewind-first-prompt-"))
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")     # as session_hooks.py, and why
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    claude = sh.common.find_claude(args.claude)
    version = subprocess.run([claude, "--version"], capture_output=True, text=True).stdout.strip()
    ok, problems = False, []
    try:
        installs = sh.installs_of(args.rewind or [sys.executable])
        wrapper = work / "timed.sh"
        wrapper.write_text(sh.WRAPPER)
        scen = sh.scenario(2 + args.later)
        (work / "scenario.json").write_text(json.dumps(scen, indent=2))
        load = os.getloadavg()
        print(f"Claude Code {version}; a {args.files:,}-file tree generated right before each session; "
              f"SessionStart at t0, prompt 1 at t0+{args.delay:g} s, prompt 2 right after it, "
              f"{args.later} later prompt(s) once the watcher's first scan is in; each prompt: Write, Read, Edit, Bash; "
              f"store empty, watcher on; network namespace: {'loopback only' if args.netns == 'inner' else 'the host'}; "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
        for i in installs:
            print(f"  {i.name}: {i.py} ({i.binary}) -> {i.package} ({i.commit})")
        print("  times: wall time of each installed hook command, taken around it by a bash wrapper; "
              "x later: against the median of the later prompts\n", flush=True)
        for mode in modes:
            for install in installs:
                text, found = run_one(install, mode, args, work, wrapper, claude, scen)
                problems += found
                print(text + "\n", flush=True)
        ok = True
    finally:
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept: {work}", file=sys.stderr)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for p in problems:
        print(f"FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
