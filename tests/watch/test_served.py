"""Hooks served by the warm watcher (watch/serve.py, hooks/client.py): the real console
script `rewind hook claude` in subprocesses, real payloads, the real watcher. The same
results as hooks that run on their own; a fallback whenever the watcher cannot serve (gone,
stopped, another project, another data dir, not our protocol); never an event lost or
recorded twice."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from helpers import REWIND, git, run_rewind, state, wait_ready, write
from rewind.hooks.client import FORWARDED, MAGIC, request
from test_watcher import alive, wait_gone
from test_watcher import payload as watcher_payload

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc and inotify")


def payload(event: str, root: Path, tool: str | None = None, session: str | None = None, **tool_input) -> dict:
    """test_watcher's, with a session of the project's own by default."""
    return watcher_payload(event, root, tool, session or f"s-{root.name}", **tool_input)


def tool_pair(root: Path, tool: str, **tool_input) -> tuple[dict, dict]:
    pre = payload("PreToolUse", root, tool, **tool_input)
    post = payload("PostToolUse", root, tool)
    post["tool_input"], post["tool_use_id"] = pre["tool_input"], pre["tool_use_id"]
    return pre, post


def hook(p: dict, root: Path, data: bytes | None = None, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run([*REWIND, "hook", "claude"], input=data if data is not None else json.dumps(p).encode(),
                          capture_output=True, cwd=root, timeout=60,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), "REWIND_WATCH": "1", **env})
    assert proc.returncode == 0 and proc.stdout == b"", proc
    return proc


def view(root: Path) -> dict:
    return json.loads(run_rewind("watch", "--status", "--json", cwd=root, check=0).stdout)


def counts(root: Path, served: int | None = None, timeout: float = 10) -> tuple[int, int]:
    """(served, standalone), once `served` is reached (the watcher writes its count at each
    heartbeat)."""
    deadline = time.monotonic() + timeout
    while True:
        v = view(root)
        if served is None or v["hooks_served"] >= served or time.monotonic() > deadline:
            return v["hooks_served"], v["hooks_standalone"]
        time.sleep(0.1)


def listing(root: Path) -> list[dict]:
    return json.loads(run_rewind("list", "--every", "--json", cwd=root, check=0).stdout)


def serving(root: Path, timeout: float = 20) -> None:
    """Until a watcher accepts on the project's socket (it opens it right after its first
    scan; a killed one's socket is left behind and refuses)."""
    run = Path(os.environ["REWIND_HOME"]) / "run"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for link in run.glob("*.root"):
            if link.is_symlink() and os.readlink(link) == str(root):
                dfd = os.open(run, os.O_PATH | os.O_DIRECTORY)   # (the path may be over 108 bytes)
                try:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.connect(f"/proc/self/fd/{dfd}/{link.stem}.sock")
                        return                    # (and hangs up: the watcher drops it)
                except OSError:
                    pass
                finally:
                    os.close(dfd)
        time.sleep(0.05)
    raise AssertionError(f"the watcher of {root} does not serve")


def start(root: Path, **env) -> dict:
    hook(payload("SessionStart", root), root, **env)
    row = wait_ready(root)
    serving(root)
    return row


def script(root: Path, **env) -> None:
    """Two prompts: a Write, a Bash command, an Edit through the tools; a hand edit between."""
    hook(payload("UserPromptSubmit", root), root, **env)
    pre, post = tool_pair(root, "Write", file_path=str(root / "src/new.py"), content="new\n")
    hook(pre, root, **env)
    write(root, "src/new.py", "new\n")
    hook(post, root, **env)
    pre, post = tool_pair(root, "Bash", command="echo built > out.txt")
    hook(pre, root, **env)
    subprocess.run(pre["tool_input"]["command"], shell=True, cwd=root, check=True)
    hook(post, root, **env)
    hook(payload("Stop", root), root, **env)
    write(root, "notes.txt", "typed by hand")
    time.sleep(0.3)
    hook(payload("UserPromptSubmit", root), root, **env)
    pre, post = tool_pair(root, "Edit", file_path=str(root / "src/m1.py"))
    hook(pre, root, **env)
    write(root, "src/m1.py", "x = 'edited'\n")
    hook(post, root, **env)
    hook(payload("Stop", root), root, **env)
    hook(payload("UserPromptSubmit", root), root, **env)


def results(root: Path) -> dict:
    """What a person sees: the checkpoints, their changes and who made them, and a diff."""
    cps = listing(root)
    keep = ("kind", "agent", "prompt", "message", "summary", "skipped", "changes_unknown")
    shown = {}
    for cp in cps:
        out = json.loads(run_rewind("show", str(cp["id"]), "--json", cwd=root, check=0).stdout)
        shown[cp["id"]] = sorted((c["path"], c["status"], c["source"], c.get("tool"), c.get("command"))
                                 for c in out["changes"])
    diff = json.loads(run_rewind("diff", "1", "3", "--json", cwd=root, check=0).stdout)
    return {"list": [{k: cp.get(k) for k in keep} for cp in cps], "shown": shown,
            "diff": sorted(json.dumps(d, sort_keys=True) for d in diff.get("changes", diff)
                           if isinstance(d, dict))}


def make(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    for i in range(5):
        write(root, f"src/m{i}.py", f"x = {i}\n")
    return root


def test_served_hooks_record_what_standalone_hooks_record(tmp_path):
    served, alone = make(tmp_path, "a"), make(tmp_path, "b")
    start(served)
    row = start(alone)
    script(served)
    # the same watcher runs for the other project, but a REWIND_* knob of its own makes
    # every hook decline to be served ("fallback env"): they run on their own (the server of
    # their environment's hooks they would start, watch/envserver.py, cannot: its lock is taken)
    from rewind.background import env_lock_name
    from rewind.envkey import env_key
    from rewind.lock import try_lock
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(alone), "REWIND_WATCH": "1", "REWIND_SERVED_TEST": "standalone"}
    held = try_lock(os.environ["REWIND_HOME"], env_lock_name(row["project_id"],
                    env_key({os.fsencode(k): os.fsencode(v) for k, v in env.items()}).decode()))
    assert held is not None
    script(alone, REWIND_SERVED_TEST="standalone")
    os.close(held)
    a, b = results(served), results(alone)
    assert a == b
    assert [cp["kind"] for cp in a["list"]] == ["prompt"] * 3
    assert any(src == "bash" for changes in a["shown"].values() for _, _, src, _, _ in changes)
    n_served, n_alone = counts(served, served=11)
    assert (n_served, n_alone) == (11, 1)       # SessionStart came before the watcher
    v = view(alone)
    assert (v["hooks_served"], v["hooks_standalone"]) == (0, 12)
    assert v["last_hook_fallback"]["reason"] == "env REWIND_SERVED_TEST"
    status = run_rewind("status", cwd=served, check=0).stdout
    assert "hooks:       11 served by the watcher, 1 ran on their own" in status


def test_a_killed_watcher_hands_the_next_hook_back_and_a_new_one_serves(tmp_path):
    root = make(tmp_path, "p")
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    assert counts(root, served=1)[0] == 1
    os.kill(row["pid"], signal.SIGKILL)
    assert wait_gone(row["pid"])
    pre, post = tool_pair(root, "Write", file_path=str(root / "src/m2.py"), content="y\n")
    hook(pre, root)                                  # the socket is left behind: nobody answers
    write(root, "src/m2.py", "y\n")
    hook(post, root)
    v = view(root)
    assert v["hooks_standalone"] == 3 and v["last_hook_fallback"]["reason"] == "no answer"
    hook(payload("UserPromptSubmit", root), root)    # on its own; it starts a new watcher
    deadline = time.monotonic() + 20
    while state(root)[0]["pid"] == row["pid"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wait_ready(root)["pid"] != row["pid"]
    serving(root)
    hook(payload("Stop", root), root)
    assert counts(root, served=2) == (2, 4)
    cps = listing(root)
    assert [cp["id"] for cp in cps] == [2, 1]
    found = {}
    for n in (1, 2):
        found.update({c["path"]: c["source"] for c in
                      json.loads(run_rewind("show", str(n), "--json", cwd=root, check=0).stdout)["changes"]})
    assert found == {"src/m2.py": "tool"}             # the Write of the fallen-back hooks, the tool's


def test_the_socket_is_private_and_serves_only_its_project_and_protocol(tmp_path):
    root = make(tmp_path, "p")
    start(root)
    run = Path(os.environ["REWIND_HOME"]) / "run"
    sock = next(run.glob("*.sock"))
    assert stat.S_IMODE(run.stat().st_mode) == 0o700 and stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(sock.stat().st_mode) and os.readlink(sock.with_suffix(".root")) == str(root)

    def ask(req: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(20)
            s.connect(str(sock))
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            try:
                return s.recv(100)
            except ConnectionResetError:          # dropped with our bytes unread
                return b""

    # a client of another data dir (or with another watcher setting) is not served
    env = {k: v for k, v in os.environ.items() if k.startswith("REWIND_") or k in FORWARDED}
    other = request("claude", str(root), os.getpid(), {**env, "REWIND_HOME": str(tmp_path / "elsewhere")}, b"{}")
    assert ask(other) == b"fallback env REWIND_HOME"
    # not the protocol: dropped, and the server goes on
    assert ask(b"GET / HTTP/1.0\r\n\r\n") == b""
    assert ask(MAGIC + (2**31).to_bytes(4, "big")) == b""
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(str(sock))                           # connects and says nothing
    try:
        hook(payload("UserPromptSubmit", root), root)
        assert counts(root, served=1) == (1, 1)
        # a project inside the watched one (its own git work tree): handed back, recorded there
        inner = root / "inner"
        write(inner, "a.txt", "a")
        git("init", "-q", cwd=inner)
        hook(payload("UserPromptSubmit", inner, session="s-inner"), inner)
        v = view(inner)
        assert (v["hooks_standalone"], v["last_hook_fallback"]["reason"]) == (1, "other-project")
        assert len(listing(inner)) == 1
        # bad payloads: logged as a standalone hook logs them, exit 0, nothing on stdout
        log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
        hook({}, root, data=b"{not json")
        hook({}, root, data=b"[1, 2]")
        text = log.read_text()
        assert "payload is not JSON (JSONDecodeError at byte 1 of 9)" in text
        assert "payload is a JSON list, not an object" in text
        assert "{not json" not in text
        assert view(root)["hooks_standalone"] == 1   # the watcher took them (nothing to record)
    finally:
        idle.close()


def test_a_data_dir_path_over_108_bytes_is_served(tmp_path, monkeypatch):
    home = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("REWIND_HOME", str(home))
    root = make(tmp_path, "p")
    start(root)
    assert len(str(home / "run" / "p1.sock").encode()) > 108
    hook(payload("UserPromptSubmit", root), root)
    pre, post = tool_pair(root, "Bash", command="echo x > y.txt")
    hook(pre, root)
    hook(post, root)
    assert counts(root, served=3) == (3, 1)
    run_rewind("watch", "--stop", cwd=root, check=0)     # (not under the data dir the conftest looks at)


def test_a_stopped_watcher_costs_the_offer_timeout_and_the_event_is_recorded_once(tmp_path):
    root = make(tmp_path, "p")
    row = start(root)
    hook(payload("UserPromptSubmit", root), root)
    assert counts(root, served=1) == (1, 1)
    os.kill(row["pid"], signal.SIGSTOP)
    try:
        write(root, "src/m3.py", "changed\n")
        hook(payload("UserPromptSubmit", root), root)    # no offer within OFFER_TIMEOUT_S: on its own
    finally:
        os.kill(row["pid"], signal.SIGCONT)
    hook(payload("Stop", root), root)                    # served again: the watcher is back
    assert counts(root, served=2) == (2, 2)
    assert view(root)["last_hook_fallback"]["reason"] == "no answer"
    assert alive(row["pid"])
    time.sleep(1.0)                                      # the watcher read the old request by now
    assert [cp["id"] for cp in listing(root)] == [2, 1]  # recorded once, not by both

