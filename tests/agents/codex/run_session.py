#!/usr/bin/env python3
"""Drive the REAL OpenAI Codex CLI through a scripted scenario, fully offline.

Starts mock_openai.py on a free 127.0.0.1 port, writes an isolated CODEX_HOME
(config.toml with a "mock" model provider, approvals off, full-access sandbox, hooks on,
and hooks.json with every chosen event), runs every prompt of the scenario through
`codex exec --json` (the first prompt starts a session, later ones `codex exec resume`
it by default), stops the server, then checks the project files and the recorded hooks.

    python3 run_session.py --scenario scenario.json --project-dir <SCRATCH>/proj \
        [--codex PATH | env CODEX_BIN] [--hook-command 'CMD {event}' ...] \
        [--out DIR] [--mode resume|new] [--hooks-in home|project] \
        [--hook-trust hash|bypass] [--notify] [--netns auto|on|off] \
        [--save-payloads DIR] [--fresh]

Exit status 0 when every prompt succeeded and every check passed.

* --hook-command may be given several times; each becomes one hook command for every
  event, with "{event}" replaced by the event name.  The bundled recorder
  (record_hook.py, writing OUT/hooks.jsonl) is always added as the first hook unless
  --no-recorder is given.
* Codex only runs a non-managed hook whose trusted_hash is recorded in config.toml
  ([hooks.state."<hooks.json path>:<event>:<group>:<handler>"]), else it skips it
  SILENTLY.  --hook-trust hash (default) writes those hashes, computed the way Codex
  does; --hook-trust bypass passes --dangerously-bypass-hook-trust instead.
* --netns auto (default) re-runs this script inside a fresh network namespace that has
  only a loopback interface (`unshare -n`), so nothing the CLI does can leave the machine.
* Codex's own state goes to OUT/codex-home (CODEX_HOME), never ~/.codex.
"""
import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]
# every event Codex 0.171 knows (hook JSON schemas embedded in the binary)
KNOWN_EVENTS = DEFAULT_EVENTS + ["PermissionRequest", "PreCompact", "PostCompact",
                                 "SubagentStart", "SubagentStop", "Interrupt"]
TOOL_EVENTS = {"PreToolUse", "PostToolUse"}
MATCHER_EVENTS = {"PreToolUse", "PostToolUse", "PermissionRequest"}
SHORT_TIMEOUT_EVENTS = {"SessionEnd", "Interrupt"}  # Codex clamps their timeout to 1..3 s
HOOK_TIMEOUT = 60


# --------------------------------------------------------------------------- helpers
def log(msg):
    print("[run_session] " + msg, file=sys.stderr, flush=True)


def bring_loopback_up():
    """ip link set lo up, without needing iproute2."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))
    finally:
        s.close()


def unshare_cmd():
    """The unshare invocation that works here (root: -n; otherwise -rn), or None."""
    exe = shutil.which("unshare")
    if not exe:
        return None
    for cmd in ([exe, "-n"], [exe, "-r", "-n"]):
        try:
            if subprocess.run(cmd + ["true"], capture_output=True, timeout=10).returncode == 0:
                return cmd
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def find_codex(arg):
    cand = arg or os.environ.get("CODEX_BIN") or shutil.which("codex")
    if not cand:
        sys.exit("run_session: no codex executable: pass --codex PATH or set CODEX_BIN")
    return os.path.abspath(cand) if os.path.sep in cand else cand


def clean_env(codex_home):
    """Environment for the CLI: inherited, minus any real credentials / parent-agent vars."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "CODEX_", "ANTHROPIC_", "CLAUDE", "AZURE_OPENAI"))}
    env.update({
        "CODEX_HOME": codex_home,
        "MOCK_OPENAI_API_KEY": "sk-mock-dummy",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    })
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    return env


# --------------------------------------------------------------------------- hook trust
def event_label(event):
    """PreToolUse -> pre_tool_use (Codex's hook_event_key_label)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def hook_timeout(event, timeout):
    if event in SHORT_TIMEOUT_EVENTS:
        return min(max(timeout or 1, 1), 3)
    return max(timeout or 600, 1)


def trusted_hash(event, matcher, handler):
    """Codex's trust identity of one command hook: sha256 over key-sorted compact JSON of
    {event_name, matcher?, hooks: [normalized handler]} (None fields dropped, timeout
    always present, async always present).  Matches codex-rs/hooks discovery.rs +
    config/src/fingerprint.rs (verified against 0.171.0: the hooks fire without
    --dangerously-bypass-hook-trust)."""
    norm = {"type": "command", "command": handler["command"],
            "timeout": hook_timeout(event, handler.get("timeout")),
            "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        norm["statusMessage"] = handler["statusMessage"]
    identity = {"event_name": event_label(event), "hooks": [norm]}
    if matcher is not None and event not in ("UserPromptSubmit", "Stop"):
        identity["matcher"] = matcher
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def hooks_document(events, commands):
    hooks = {}
    for ev in events:
        t = 3 if ev in SHORT_TIMEOUT_EVENTS else HOOK_TIMEOUT
        group = {"hooks": [{"type": "command", "command": c.replace("{event}", ev), "timeout": t}
                           for c in commands]}
        if ev in MATCHER_EVENTS:
            group["matcher"] = "*"
        hooks[ev] = [group]
    return {"hooks": hooks}


def trust_entries(hooks_path, doc):
    """[hooks.state] entries that mark every hook in doc as trusted."""
    out = {}
    for ev, groups in doc["hooks"].items():
        for gi, g in enumerate(groups):
            for hi, h in enumerate(g["hooks"]):
                key = "%s:%s:%d:%d" % (hooks_path, event_label(ev), gi, hi)
                out[key] = trusted_hash(ev, g.get("matcher"), h)
    return out


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string for our inputs


def write_codex_home(codex_home, project, base_url, a, doc, hooks_path, notify_cmd):
    os.makedirs(codex_home, exist_ok=True)
    lines = [
        "# written by tests/agents/codex/run_session.py",
        "model = %s" % toml_str(a.model),
        'model_provider = "mock"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
    ]
    if notify_cmd:
        lines.append("notify = [%s]" % ", ".join(toml_str(x) for x in notify_cmd))
    lines += [
        "",
        "[model_providers.mock]",
        'name = "mock"',
        "base_url = %s" % toml_str(base_url + "/v1"),
        'env_key = "MOCK_OPENAI_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[features]",
        "hooks = true",
        "plugins = false  # else every run resolves api.github.com (curated plugin marketplace sync)",
        "",
        "[analytics]",
        "enabled = false",
        "",
    ]
    if a.project_trust != "none":
        lines += ["", "[projects.%s]" % toml_str(project), "trust_level = %s" % toml_str(a.project_trust)]
    if a.hook_trust == "hash":
        for key, h in trust_entries(hooks_path, doc).items():
            lines += ["", "[hooks.state.%s]" % toml_str(key), "enabled = true", "trusted_hash = %s" % toml_str(h)]
    with open(os.path.join(codex_home, "config.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.makedirs(os.path.dirname(hooks_path), exist_ok=True)
    with open(hooks_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def seed_project(project, setup):
    for rel, content in (setup or {}).get("files", {}).items():
        p = os.path.join(project, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as f:
            f.write(content)
    for rel, target in (setup or {}).get("symlinks", {}).items():
        p = os.path.join(project, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if os.path.lexists(p):
            os.unlink(p)
        os.symlink(target, p)


def start_server(scenario_path, project, out):
    port_file = os.path.join(out, "mock.port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    srv_log = open(os.path.join(out, "mock_server.out"), "w")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "mock_openai.py"), "--scenario", scenario_path,
         "--project-dir", project, "--port", "0", "--port-file", port_file,
         "--log", os.path.join(out, "requests.jsonl")],
        stdout=srv_log, stderr=subprocess.STDOUT)
    deadline = time.time() + 15
    while time.time() < deadline:
        if os.path.exists(port_file):
            with open(port_file) as f:
                return proc, int(f.read())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit("run_session: mock server did not start (see %s)" % srv_log.name)


def stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_events(stdout):
    """`codex exec --json` JSONL -> (thread_id, last agent message, failures, tool items)."""
    thread_id, last_msg, failures, tools, completed = None, None, [], [], False
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        t = ev.get("type")
        if t == "thread.started":
            thread_id = ev.get("thread_id")
        elif t == "turn.completed":
            completed = True
        elif t in ("turn.failed", "error"):
            failures.append(json.dumps(ev)[:500])
        elif t == "item.completed":
            item = ev.get("item") or {}
            if item.get("type") == "agent_message":
                last_msg = item.get("text")
            elif item.get("type") in ("command_execution", "file_change", "mcp_tool_call"):
                tools.append(item)
    if not completed:
        failures.append("no turn.completed event")
    return thread_id, last_msg, failures, tools


# --------------------------------------------------------------------------- running
def run_prompts(a, scenario, codex, env, project, out):
    common = ["--json", "--skip-git-repo-check"]
    if a.hook_trust == "bypass":
        common.append("--dangerously-bypass-hook-trust")
    common += a.codex_arg
    results, thread_id = [], None
    for i, p in enumerate(scenario["prompts"]):
        mode = p.get("mode") or a.mode
        if i > 0 and mode == "resume" and thread_id:
            cmd = [codex, "exec", "resume"] + common + [thread_id, p["prompt"]]
        else:
            cmd = [codex, "exec"] + common + ["-C", project, p["prompt"]]
        t0 = time.time()
        r = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True,
                           timeout=a.timeout, stdin=subprocess.DEVNULL)
        dt = time.time() - t0
        with open(os.path.join(out, "codex-%d.jsonl" % i), "w") as f:
            f.write(r.stdout)
        with open(os.path.join(out, "codex-%d.err" % i), "w") as f:
            f.write(r.stderr)
        tid, last, failures, tools = parse_events(r.stdout)
        thread_id = tid or thread_id
        tool_errors = ["%s %s: %s" % (it.get("type"), it.get("status"),
                                      json.dumps(it.get("command") or it.get("changes"))[:200])
                       for it in tools
                       if it.get("status") not in ("completed",) or it.get("exit_code") not in (None, 0)]
        ok = r.returncode == 0 and not failures
        log("prompt %d (%s): rc=%d %.2fs thread=%s last=%r" % (
            i, mode if i else "new", r.returncode, dt, tid, (last or "")[:60]))
        if not ok:
            log("  failures: %s" % failures)
            log("  stderr: " + r.stderr.strip()[-1500:])
        results.append({"prompt": p["prompt"], "mode": mode if i else "new", "rc": r.returncode,
                        "seconds": round(dt, 2), "thread_id": tid, "last_message": last,
                        "tool_items": len(tools), "tool_errors": tool_errors, "failures": failures,
                        "ok": ok})
    return results


# --------------------------------------------------------------------------- checks
def check_files(project, expect):
    problems = []
    for rel in expect.get("exists", []):
        if not os.path.lexists(os.path.join(project, rel)):
            problems.append("missing: " + rel)
    for rel in expect.get("absent", []):
        if os.path.lexists(os.path.join(project, rel)):
            problems.append("should be gone: " + rel)
    for rel, content in expect.get("contents", {}).items():
        p = os.path.join(project, rel)
        try:
            with open(p, encoding="utf-8") as f:
                got = f.read()
        except OSError as e:
            problems.append("unreadable %s: %s" % (rel, e))
            continue
        if got != content:
            problems.append("content of %s: expected %r, got %r" % (rel, content, got))
    for rel, target in expect.get("symlinks", {}).items():
        p = os.path.join(project, rel)
        if not os.path.islink(p):
            problems.append("not a symlink: " + rel)
        elif os.readlink(p) != target:
            problems.append("symlink %s -> %s, expected %s" % (rel, os.readlink(p), target))
    return problems


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def tool_outputs(requests):
    """call_id -> output text, from the tool outputs Codex sent back to the mock."""
    outs = {}
    for r in requests:
        body = r.get("body") if isinstance(r.get("body"), dict) else {}
        for it in body.get("input") or []:
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
                o = it.get("output")
                outs[it.get("call_id")] = o if isinstance(o, str) else json.dumps(o)
    return outs


def check_hooks(hooks, events, scenario, mode):
    """Every configured event fired; UserPromptSubmit once per prompt; Pre/PostToolUse once per
    scripted tool call -- or, when the scenario's expect has "hook_counts", exactly those counts
    (an entry may be a number or {"<mode>": number, "default": number})."""
    problems = []
    fired = {}
    for h in hooks:
        fired.setdefault(h["event"], []).append(h)
    counts = {ev: len(v) for ev, v in fired.items()}
    want = scenario.get("expect", {}).get("hook_counts")
    if want is not None:
        for ev, n in want.items():
            if isinstance(n, dict):
                n = n.get(mode, n.get("default"))
            if n is not None and len(fired.get(ev, [])) != n:
                problems.append("%s fired %d times, expected %d" % (ev, len(fired.get(ev, [])), n))
        return problems, counts
    for ev in events:
        if ev in DEFAULT_EVENTS and ev not in fired:
            problems.append("hook never fired: " + ev)
    n_prompts = len(scenario["prompts"])
    n_tools = sum(len(t.get("tool_calls", [])) for p in scenario["prompts"] for t in p.get("turns", []))
    if "UserPromptSubmit" in events and len(fired.get("UserPromptSubmit", [])) != n_prompts:
        problems.append("UserPromptSubmit fired %d times for %d prompts"
                        % (len(fired.get("UserPromptSubmit", [])), n_prompts))
    for ev in TOOL_EVENTS & set(events):
        if len(fired.get(ev, [])) != n_tools:
            problems.append("%s fired %d times for %d scripted tool calls" % (ev, len(fired.get(ev, [])), n_tools))
    for h in hooks:
        p = h.get("payload") or {}
        if p.get("hook_event_name") != h["event"] and h["event"] != "notify":
            problems.append("payload hook_event_name %r for event %s" % (p.get("hook_event_name"), h["event"]))
    return problems, counts


# --------------------------------------------------------------------------- payload fixtures
def sanitizer(project, codex_home, out, thread_ids, base_url, codex):
    reps = [(base_url, "http://127.0.0.1:<PORT>")]
    pkg_root = os.path.realpath(codex)
    m = re.search(r"^(.*/node_modules/@openai/codex)(?:-[^/]+)?/", pkg_root)
    paths = [(project, "<PROJECT_DIR>"), (codex_home, "<CODEX_HOME>"), (out, "<OUT_DIR>"),
             (HERE, "<HARNESS_DIR>"), (os.path.expanduser("~"), "<HOME>")]
    if m:
        paths.append((m.group(1), "<CODEX_PACKAGE_ROOT>"))
    for path, ph in paths:
        for variant in {path, os.path.realpath(path)}:
            if variant and variant != "/":
                reps.append((variant, ph))
    for i, tid in enumerate(dict.fromkeys(t for t in thread_ids if t)):
        reps.append((tid, "<SESSION_ID>" if i == 0 else "<SESSION_ID_%d>" % i))
    reps.append((sys.executable, "<PYTHON>"))
    reps.sort(key=lambda kv: -len(kv[0]))  # longest first
    rollout = re.compile(r"sessions/\d{4}/\d{2}/\d{2}/rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-")

    def clean(v):
        if isinstance(v, str):
            for src, ph in reps:
                v = v.replace(src, ph)
            return rollout.sub("sessions/<YYYY>/<MM>/<DD>/rollout-<TIMESTAMP>-", v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v
    return clean


def save_payloads(dest, hooks, clean):
    os.makedirs(dest, exist_ok=True)
    # stable placeholders for the per-prompt turn ids, in order of appearance
    tids = {}
    for h in hooks:
        p = h.get("payload") or {}
        tid = p.get("turn_id") or p.get("turn-id")
        if tid and tid not in tids:
            tids[tid] = "<TURN_ID_%d>" % (len(tids) + 1)
    base_clean = clean

    def clean(v):  # noqa: F811 - wraps the path sanitizer
        v = base_clean(v)
        if isinstance(v, dict):
            return {k: (tids.get(x, x) if k in ("turn_id", "turn-id") else clean(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    written = {}
    for h in hooks:
        ev, p = h["event"], h.get("payload") or {}
        names = [ev]
        if ev in TOOL_EVENTS | {"PermissionRequest"} and p.get("tool_name"):
            names.append("%s.%s" % (ev, p["tool_name"]))
        if ev == "SessionStart" and p.get("source"):
            names.append("%s.%s" % (ev, p["source"]))
        for n in names:
            if n not in written:
                written[n] = clean(p)
    for n, p in written.items():
        with open(os.path.join(dest, n + ".json"), "w", encoding="utf-8") as f:
            json.dump(p, f, indent=2, sort_keys=True)
            f.write("\n")
    with open(os.path.join(dest, "sequence.jsonl"), "w", encoding="utf-8") as f:
        for h in hooks:
            row = {"event": h["event"], "hook_cwd": clean(h.get("hook_cwd")),
                   "env": clean(h.get("env", {})), "payload": clean(h.get("payload"))}
            if "file_state" in h:
                row["file_state_at_hook_time"] = h["file_state"]
            f.write(json.dumps(row, sort_keys=True) + "\n")
    return sorted(written)


# --------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description="Run a scripted scenario through the real Codex CLI.")
    ap.add_argument("--scenario", default=os.path.join(HERE, "scenario.json"))
    ap.add_argument("--project-dir", default=os.environ.get("REALCLIENT_PROJECT_DIR"),
                    help="scratch project (created if missing); env REALCLIENT_PROJECT_DIR")
    ap.add_argument("--codex", help="codex executable (default: $CODEX_BIN, then PATH)")
    ap.add_argument("--hook-command", action="append", default=[],
                    help="hook command for every event; '{event}' is replaced by the event name")
    ap.add_argument("--no-recorder", action="store_true", help="do not add the bundled record_hook.py")
    ap.add_argument("--events", help="comma-separated hook events (default: the scenario's \"events\", "
                                     "else %s; 'all' = %s)" % (",".join(DEFAULT_EVENTS), ",".join(KNOWN_EVENTS)))
    ap.add_argument("--out", help="where logs go (default: <project>.realclient-out)")
    ap.add_argument("--mode", choices=["resume", "new"], default="resume",
                    help="how prompts after the first are run (default: codex exec resume <thread_id>)")
    ap.add_argument("--hooks-in", choices=["home", "project"], default="home",
                    help="write hooks.json to CODEX_HOME (default) or to <project>/.codex/")
    ap.add_argument("--hook-trust", choices=["hash", "bypass"], default="hash",
                    help="hash: write [hooks.state] trusted_hash entries (default); "
                         "bypass: --dangerously-bypass-hook-trust")
    ap.add_argument("--project-trust", choices=["trusted", "untrusted", "none"], default="trusted",
                    help="[projects.\"<project>\"] trust_level written to config.toml (none: no entry)")
    ap.add_argument("--notify", action="store_true",
                    help="also configure the legacy `notify` program (recorded as event 'notify')")
    ap.add_argument("--netns", choices=["auto", "on", "off", "inner"], default="auto",
                    help="run inside a loopback-only network namespace (unshare -n)")
    ap.add_argument("--model", default="gpt-5.5",
                    help="model slug sent to the mock (default gpt-5.5: one Codex 0.171 has metadata for "
                         "that offers exec_command + apply_patch without code mode)")
    ap.add_argument("--codex-arg", action="append", default=[], help="extra argument for codex exec")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per codex run")
    ap.add_argument("--fresh", action="store_true", help="delete project dir and out dir first")
    ap.add_argument("--save-payloads", help="write sanitized hook payloads (one file per event) here")
    a = ap.parse_args(argv)

    if not a.project_dir:
        ap.error("--project-dir (or REALCLIENT_PROJECT_DIR) is required")

    if a.netns in ("auto", "on"):
        cmd = unshare_cmd()
        if cmd:
            args = list(argv if argv is not None else sys.argv[1:])
            cleaned, skip = [], False
            for x in args:  # drop any --netns option; the inner run gets "--netns inner"
                if skip:
                    skip = False
                elif x == "--netns":
                    skip = True
                elif not x.startswith("--netns="):
                    cleaned.append(x)
            log("re-running inside a loopback-only network namespace: %s" % " ".join(cmd))
            return subprocess.call(cmd + [sys.executable, os.path.abspath(__file__)] + cleaned + ["--netns", "inner"])
        if a.netns == "on":
            sys.exit("run_session: --netns on, but `unshare -n` does not work here")
        log("no usable `unshare -n`; running in the normal network namespace")
    if a.netns == "inner":
        bring_loopback_up()

    scenario_path = os.path.abspath(a.scenario)
    with open(scenario_path, encoding="utf-8") as f:
        scenario = json.load(f)
    project = os.path.abspath(a.project_dir)
    out = os.path.abspath(a.out or project.rstrip("/") + ".realclient-out")
    if a.fresh:
        for d in (project, out):
            if os.path.isdir(d):
                shutil.rmtree(d)
    os.makedirs(project, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    project = os.path.realpath(project)
    out = os.path.realpath(out)
    codex_home = os.path.join(out, "codex-home")
    hooks_log = os.path.join(out, "hooks.jsonl")
    for stale in ("hooks.jsonl", "requests.jsonl"):
        if os.path.exists(os.path.join(out, stale)):
            os.unlink(os.path.join(out, stale))

    codex = find_codex(a.codex)
    version = subprocess.run([codex, "--version"], capture_output=True, text=True).stdout.strip()
    log("codex: %s (%s)" % (codex, version))

    if a.events == "all":
        events = list(KNOWN_EVENTS)
    else:
        events = [e for e in a.events.split(",") if e] if a.events else scenario.get("events", DEFAULT_EVENTS)
    recorder = "%s %s" % (shlex.quote(sys.executable), shlex.quote(os.path.join(HERE, "record_hook.py")))
    commands = []
    if not a.no_recorder:
        commands.append("%s {event} %s" % (recorder, shlex.quote(hooks_log)))
    commands += a.hook_command
    notify_cmd = [sys.executable, os.path.join(HERE, "record_hook.py"), "notify", hooks_log] if a.notify else None
    seed_project(project, scenario.get("setup"))
    doc = hooks_document(events, commands)
    hooks_path = (os.path.join(codex_home, "hooks.json") if a.hooks_in == "home"
                  else os.path.join(project, ".codex", "hooks.json"))

    srv, port = start_server(scenario_path, project, out)
    base_url = "http://127.0.0.1:%d" % port
    write_codex_home(codex_home, project, base_url, a, doc, hooks_path, notify_cmd)
    log("mock server on %s; project %s; logs in %s" % (base_url, project, out))
    env = clean_env(codex_home)
    t0 = time.time()
    try:
        results = run_prompts(a, scenario, codex, env, project, out)
    finally:
        stop_server(srv)
    total = time.time() - t0

    hooks = read_jsonl(hooks_log)
    requests = read_jsonl(os.path.join(out, "requests.jsonl"))
    problems = ["prompt %d failed (rc=%s): %s" % (i, r["rc"], "; ".join(r["failures"]))
                for i, r in enumerate(results) if not r["ok"]]
    problems += check_files(project, scenario.get("expect", {}))
    tool_errors = [e for r in results for e in r["tool_errors"]]
    if scenario.get("expect", {}).get("no_tool_errors", True):
        problems += ["tool error " + e for e in tool_errors]
    counts = {}
    if not a.no_recorder:
        hp, counts = check_hooks([h for h in hooks if h["event"] != "notify"], events, scenario, a.mode)
        problems += hp
        if a.notify:
            counts["notify"] = sum(1 for h in hooks if h["event"] == "notify")
    summary = {
        "codex_version": version,
        "mode": a.mode,
        "hooks_in": a.hooks_in,
        "hook_trust": a.hook_trust,
        "netns": a.netns == "inner",
        "total_seconds": round(total, 2),
        "prompts": results,
        "hook_counts": counts,
        "hook_order": [h["event"] + ("(%s)" % h["payload"].get("tool_name")
                                     if isinstance(h.get("payload"), dict) and h["payload"].get("tool_name") else "")
                       for h in hooks],
        "requests": [{"method": r["method"], "path": r["path"], "note": r["note"]} for r in requests],
        "tool_outputs": tool_outputs(requests),
        "tool_errors": tool_errors,
        "problems": problems,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if a.save_payloads and hooks:
        clean = sanitizer(project, codex_home, out, [r["thread_id"] for r in results], base_url, codex)
        names = save_payloads(os.path.abspath(a.save_payloads), hooks, clean)
        log("saved %d payload files to %s" % (len(names), a.save_payloads))
    log("hooks fired: %s" % json.dumps(counts))
    log("total %.2fs for %d prompts" % (total, len(results)))
    if problems:
        log("PROBLEMS:\n  " + "\n  ".join(problems))
        print("FAIL: %d problem(s); see %s/summary.json" % (len(problems), out))
        return 1
    print("OK: %d prompts, hooks %s, %.1fs; logs in %s" % (len(results), json.dumps(counts), total, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
