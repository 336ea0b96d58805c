#!/usr/bin/env python3
"""Drive a REAL agent CLI that talks to an OpenAI-compatible model (Qwen Code, Copilot CLI,
OpenCode) through a scripted scenario, fully offline.

Starts mock_chat.py on a free 127.0.0.1 port, gives the CLI a home of its own under OUT
(its config pointing at the mock), runs every prompt of the scenario as one CLI process
(the first starts a session, later ones resume it), stops the server, then checks the
project files against the scenario's "expect".

    python3 chat_session.py --agent qwen|copilot|opencode --bin PATH --scenario S.json \
        --project-dir DIR [--out DIR] [--fresh] [--netns auto|on|off] [--timeout S] [--resume ID]

The scenario: {"setup": {"files": {...}}, "prompts": [{"prompt": P, "turns": [{"text": T,
"tool_calls": [{"name": TOOL, "arguments": {...}}]}]}], "expect": {...}} (mock_chat.py's
format; `<PROJECT_DIR>` in arguments is the project's path). The hooks are the caller's
business: the matrix's wrapper installs rewind's before each prompt, as a person would.
Exit status 0 when every prompt succeeded and every check passed.

* --netns auto (default) re-runs this script in a fresh network namespace with only a
  loopback interface (`unshare -n`), so nothing the CLI does can leave the machine.
* Copilot CLI unpacks itself at its first start (235 MB, 1.3 s): $COPILOT_CACHE_HOME (set by
  the tests to the one scripts/install-agents filled) is shared between runs.
* OpenCode installs its plugin SDK into `.opencode/` at start unless it is there: the SDK
  scripts/install-agents put beside the CLI ($OPENCODE_PLUGIN_DEPS) is copied in first.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _gemini_driver():
    """The network-namespace and project helpers of gemini/run_session.py."""
    spec = importlib.util.spec_from_file_location("gemini_run_session", os.path.join(HERE, "gemini", "run_session.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = _gemini_driver()


def log(msg):
    print("[chat_session] " + msg, file=sys.stderr, flush=True)


def clean_env(home):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "CLAUDE", "GEMINI", "GOOGLE_", "QWEN", "DASHSCOPE",
                                "COPILOT_", "GITHUB_TOKEN", "GH_TOKEN", "OPENCODE", "AZURE_OPENAI", "XDG_"))}
    env.update({"HOME": home, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "GITHUB_SHA",
              "SURFACE"):
        env.pop(k, None)
    if os.environ.get("COPILOT_CACHE_HOME"):
        env["COPILOT_CACHE_HOME"] = os.environ["COPILOT_CACHE_HOME"]
    return env


# --------------------------------------------------------------------------- the agents
class Qwen:
    """Qwen Code 0.24.4: `qwen --yolo --output-format json PROMPT`, then `--resume ID`."""

    def setup(self, home, project, base_url, env):
        os.makedirs(os.path.join(home, ".qwen"), exist_ok=True)
        with open(os.path.join(home, ".qwen", "settings.json"), "w") as f:
            json.dump({"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "mock-model"},
                       "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                       "general": {"enableAutoUpdate": False, "disableAutoUpdate": True,
                                   "disableUpdateNag": True}}, f)
        env.update({"OPENAI_API_KEY": "dummy", "OPENAI_BASE_URL": base_url + "/v1", "OPENAI_MODEL": "mock-model"})

    def command(self, binary, prompt, session):
        return [binary, "--yolo", "--output-format", "json", *(["--resume", session] if session else []), prompt]

    def session(self, stdout, home):
        try:
            data = json.loads(stdout)
        except ValueError:
            return None
        for item in data if isinstance(data, list) else [data]:
            if isinstance(item, dict) and item.get("session_id"):
                return item["session_id"]
        return None


class Copilot:
    """Copilot CLI 1.0.102: `copilot -p PROMPT --allow-all --output-format json`, then
    `--resume=ID` (the id its result line names)."""

    def setup(self, home, project, base_url, env):
        os.makedirs(os.path.join(home, ".copilot"), exist_ok=True)
        with open(os.path.join(home, ".copilot", "config.json"), "w") as f:
            json.dump({"trusted_folders": [project], "trustedFolders": [project]}, f)
        env.update({"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": base_url + "/v1",
                    "COPILOT_PROVIDER_TYPE": "openai", "COPILOT_PROVIDER_API_KEY": "dummy",
                    "COPILOT_MODEL": "mock-model", "COPILOT_AUTO_UPDATE": "false"})

    def command(self, binary, prompt, session):
        return [binary, "-p", prompt, "--allow-all", "--output-format", "json",
                *([f"--resume={session}"] if session else [])]

    def session(self, stdout, home):
        for line in reversed(stdout.splitlines()):
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and item.get("type") == "result" and item.get("sessionId"):
                return item["sessionId"]
        root = os.path.join(home, ".copilot", "session-state")
        try:
            return sorted(n for n in os.listdir(root) if not n.startswith("."))[0]
        except (OSError, IndexError):
            return None


class OpenCode:
    """OpenCode 1.18.33: `opencode run --format json PROMPT`, then `-s ID`; its provider in
    the project's opencode.json (written here, and excluded from the tree's checks)."""

    def setup(self, home, project, base_url, env):
        config = {"$schema": "https://opencode.ai/config.json",
                  "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                        "options": {"baseURL": base_url + "/v1", "apiKey": "dummy"},
                                        "models": {"mock-model": {"name": "Mock Model", "tool_call": True,
                                                                  "limit": {"context": 100000, "output": 4000}}}}},
                  "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False,
                  "share": "disabled",
                  "permission": {"*": "allow", "edit": "allow", "bash": "allow", "external_directory": "allow"}}
        cfg = os.path.join(home, ".config", "opencode")
        os.makedirs(cfg, exist_ok=True)
        with open(os.path.join(cfg, "opencode.json"), "w") as f:
            json.dump(config, f)
        deps = os.environ.get("OPENCODE_PLUGIN_DEPS")
        if deps:
            for d in (os.path.join(project, ".opencode"), cfg):
                os.makedirs(d, exist_ok=True)
                for name in ("package.json", "package-lock.json"):
                    if os.path.exists(os.path.join(deps, name)) and not os.path.exists(os.path.join(d, name)):
                        shutil.copy(os.path.join(deps, name), d)
                if not os.path.exists(os.path.join(d, "node_modules")):
                    shutil.copytree(os.path.join(deps, "node_modules"), os.path.join(d, "node_modules"), symlinks=True)
        env.update({"XDG_CONFIG_HOME": os.path.join(home, ".config"),
                    "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
                    "XDG_CACHE_HOME": os.path.join(home, ".cache"),
                    "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
                    "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
                    "OPENCODE_DISABLE_CLAUDE_CODE": "1", "npm_config_offline": "true"})

    def command(self, binary, prompt, session):
        return [binary, "run", "--format", "json", *(["-s", session] if session else []), prompt]

    def session(self, stdout, home):
        m = re.search(r'"sessionID"\s*:\s*"([^"]+)"', stdout)
        return m.group(1) if m else None


AGENTS = {"qwen": Qwen, "copilot": Copilot, "opencode": OpenCode}


def start_mock(scenario_path, project, out, seconds):
    port_file = os.path.join(out, "mock.port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    srv_log = open(os.path.join(out, "mock_server.out"), "w")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "mock_chat.py"), scenario_path, port_file,
                             os.path.join(out, "requests.jsonl"), project, "--max-seconds", str(seconds)],
                            stdout=srv_log, stderr=subprocess.STDOUT)
    deadline = time.time() + 15
    while time.time() < deadline:
        if os.path.exists(port_file) and os.path.getsize(port_file):
            with open(port_file) as f:
                return proc, int(f.read())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit("chat_session: the mock model did not start (see %s)" % srv_log.name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", choices=sorted(AGENTS), required=True)
    ap.add_argument("--bin", required=True, help="the agent's executable (or a wrapper around it)")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--project-dir", required=True)
    ap.add_argument("--out")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--netns", choices=["auto", "on", "off", "inner"], default="auto")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per prompt")
    ap.add_argument("--mode", choices=["resume"], default="resume")
    ap.add_argument("--resume", metavar="ID", help="continue this session (a fork) from the first prompt on")
    a = ap.parse_args(argv)

    if a.netns in ("auto", "on"):
        cmd = G.unshare_cmd()
        if cmd:
            args = [x for x in (argv if argv is not None else sys.argv[1:])]
            while "--netns" in args:
                i = args.index("--netns")
                del args[i:i + 2]
            return subprocess.call(cmd + [sys.executable, os.path.abspath(__file__)] + args + ["--netns", "inner"])
        if a.netns == "on":
            sys.exit("chat_session: --netns on, but `unshare -n` does not work here")
        log("no usable `unshare -n`; running in the normal network namespace")
    if a.netns == "inner":
        G.bring_loopback_up()

    with open(a.scenario, encoding="utf-8") as f:
        scenario = json.load(f)
    project = os.path.abspath(a.project_dir)
    out = os.path.abspath(a.out or project.rstrip("/") + ".chat-out")
    if a.fresh:
        for d in (project, out):
            shutil.rmtree(d, ignore_errors=True)
    os.makedirs(project, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    project, out = os.path.realpath(project), os.path.realpath(out)
    home = os.path.join(out, "home")
    os.makedirs(home, exist_ok=True)
    G.seed_project(project, scenario.get("setup"))
    agent = AGENTS[a.agent]()
    srv, port = start_mock(os.path.abspath(a.scenario), project, out, a.timeout * len(scenario["prompts"]) + 30)
    env = clean_env(home)
    env["PWD"] = project            # as a shell in it says (OpenCode takes its folder from PWD)
    agent.setup(home, project, "http://127.0.0.1:%d" % port, env)
    problems, session, took = [], a.resume, []
    t0 = time.time()
    try:
        for i, p in enumerate(scenario["prompts"]):
            t = time.time()
            try:
                r = subprocess.run(agent.command(a.bin, p["prompt"], session), cwd=project, env=env,
                                   capture_output=True, text=True, timeout=a.timeout, stdin=subprocess.DEVNULL)
                rc, stdout, stderr = r.returncode, r.stdout, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, stdout, stderr = "timeout", e.stdout or "", e.stderr or ""
                stdout, stderr = (x.decode(errors="replace") if isinstance(x, bytes) else x for x in (stdout, stderr))
            for name, data in (("out", stdout), ("err", stderr)):
                with open(os.path.join(out, "%s-%s%d.%s" % (a.agent, "resumed-" if a.resume else "", i, name)), "w") as f:
                    f.write(data)
            session = agent.session(stdout, home) or session
            took.append(round(time.time() - t, 2))
            log("prompt %d: rc=%s %.2fs session=%s" % (i, rc, took[-1], session))
            if rc != 0:
                problems.append("prompt %d failed (rc=%s): %s" % (i, rc, stderr.strip()[-1500:]))
            elif i == 0 and not session:
                problems.append("prompt 0 gave no session id to resume")
    finally:
        srv.kill()          # (its stop timer is a thread that would keep it up after a SIGINT)
        srv.wait()
    problems += G.check_files(project, scenario.get("expect", {}))
    with open(os.path.join(out, "summary-resumed.json" if a.resume else "summary.json"), "w") as f:
        json.dump({"agent": a.agent, "session": session, "seconds": round(time.time() - t0, 2),
                   "prompts": took, "problems": problems}, f, indent=2)
    if problems:
        log("PROBLEMS:\n  " + "\n  ".join(problems))
        print("FAIL: %d problem(s); see %s" % (len(problems), out))
        return 1
    print("OK: %d prompts in %.1fs; logs in %s" % (len(scenario["prompts"]), time.time() - t0, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
