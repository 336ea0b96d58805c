"""The pid account behind "the command could not have made it" (procs.py), with real
processes: an agent process that runs commands the way the agents do (a shell per command),
real forks, real reaping, real ptys. The watcher is left out: these are the looks it makes
after reading a change."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rewind.capture.procs import Commands
from rewind.capture.procs import hook_chain
from rewind.capture.procs import last_pid

pytestmark = pytest.mark.skipif(last_pid() is None, reason="needs Linux /proc and ns_last_pid")

# An agent: reads a command a line, runs it through `bash -c` (as Claude Code, Gemini CLI
# and Codex do) or, with "bg " in front, starts it and leaves it running; answers "ok".
AGENT = r"""
import subprocess, sys
kept = []
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("bg "):
        kept.append(subprocess.Popen(["bash", "-c", line[3:]]))
    elif line.startswith("pty "):
        import pty
        pid, fd = pty.fork()
        if pid == 0:
            import os
            os.execvp("bash", ["bash", "-c", line[4:]])
        import os
        while True:
            try:
                if not os.read(fd, 1024):
                    break
            except OSError:
                break
        os.waitpid(pid, 0)
    elif line.startswith("shell "):
        kept.append(subprocess.Popen(["bash"], stdin=subprocess.PIPE, text=True))
    elif line.startswith("say "):
        kept[-1].stdin.write(line[4:] + "\n")
        kept[-1].stdin.flush()
    else:
        subprocess.run(["bash", "-c", line])
    print("ok", flush=True)
"""


class Agent:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", AGENT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def agent():
    a = Agent()
    a.run("true")                      # started and settled
    yield a
    a.close()


def window(agent: Agent, wid: int = 1, hooks: str = "") -> Commands:
    """A shell window of `agent`, opened now (the hook's mark: the last pid handed out)."""
    c = Commands()
    c.update([(wid, agent.proc.pid, last_pid(), hooks)], set())
    return c


def test_a_change_before_the_command_starts_is_proven_not_its(agent, tmp_path):
    c = window(agent)
    (tmp_path / "typed.txt").write_text("the person, while the agent asks for permission")
    assert c.explaining() == "w:"                # no process of the command exists yet
    assert c.why() == {1: "waiting"}
    agent.run("bg sleep 2")                      # now the command runs
    assert c.explaining() == "w:1"
    assert "descends from the agent" in c.why()[1]


def test_a_command_reaped_before_the_first_look_is_still_the_commands(agent, tmp_path):
    c = window(agent)
    agent.run(f"echo x > {tmp_path}/quick.txt")  # started, wrote, ended, reaped: never seen
    assert c.explaining() == "w:1"
    assert "came and went unseen" in c.why()[1]


def test_a_command_between_two_looks_is_the_commands(agent, tmp_path):
    c = window(agent)
    assert c.explaining() == "w:"
    c.poll()
    agent.run(f"echo x > {tmp_path}/quick.txt")
    assert c.explaining() == "w:1"


def test_a_command_through_a_pty_is_the_commands(agent, tmp_path):
    c = window(agent)
    agent.run(f"pty echo x > {tmp_path}/pty.txt; sleep 0.2")
    assert c.explaining() == "w:1"


def test_a_command_through_an_intermediate_that_left_is_the_commands(agent, tmp_path):
    """A double fork: the command's process lives on, reparented away from the agent."""
    c = window(agent)
    agent.run(f"(setsid sleep 3 &) ; echo x > {tmp_path}/f")
    assert c.explaining() == "w:1"


def test_a_persistent_shell_gives_no_proof(agent, tmp_path):
    """`echo x > f` in a shell the agent started earlier makes no new process at all."""
    agent.run("shell ")
    c = window(agent)
    agent.run(f"say echo x > {tmp_path}/builtin.txt")
    assert c.explaining() == "w:1"
    assert "shell of its own" in c.why()[1]


def test_processes_that_are_not_the_agents_keep_the_proof(agent, tmp_path):
    """Others start and end processes meanwhile (here: this test itself): accounted for,
    as long as they were seen alive."""
    c = window(agent)
    other = subprocess.Popen(["sleep", "5"])
    try:
        c.poll()                                 # seen alive: not the agent's
        (tmp_path / "typed.txt").write_text("x")
        assert c.explaining() == "w:"
    finally:
        other.kill()
        other.wait()


def test_a_process_of_another_that_came_and_went_unseen_gives_up_the_proof(agent, tmp_path):
    c = window(agent)
    subprocess.run(["true"])                     # not the agent's, but gone before any look
    assert c.explaining() == "w:1"


def test_the_opening_hooks_own_children_are_not_the_command():
    """A hook may start a detached job (gc, a pack merge) after it opened the window. Here
    this test is the agent and `hook` the hook process that opened the window."""
    hook = Agent()
    try:
        hook.run("true")
        c = Commands()
        c.update([(1, os.getpid(), last_pid(), str(hook.proc.pid))], set())
        hook.run("bg sleep 2")                   # the hook's child: a descendant of the agent too
        assert c.explaining() == "w:"
        agent_child = subprocess.Popen(["sleep", "2"])
        try:
            assert c.explaining() == "w:1"       # the agent's own child: the command may run
        finally:
            agent_child.kill()
            agent_child.wait()
    finally:
        hook.close()


def test_an_agent_that_is_gone_gives_no_proof(tmp_path):
    short = subprocess.Popen(["sleep", "0.1"])
    c = Commands()
    c.update([(1, short.pid, last_pid(), "")], set())
    short.wait()
    time.sleep(0.05)
    assert c.explaining() == "w:1"
    assert "agent process is gone" in c.why()[1]


def test_two_windows_are_named_together_once_their_commands_may_run(agent, tmp_path):
    c = window(agent, 1)
    c.update([(2, agent.proc.pid, last_pid(), "")], set())
    assert c.explaining() == "w:"
    agent.run("bg sleep 2")
    assert c.explaining() == "w:1,2"
    c.update([], {1})
    assert c.explaining() == "w:2"
    c.update([], {2})
    assert c.explaining() is None                # no window open


def test_the_hook_finds_its_agent_past_the_shells(tmp_path):
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c 'from rewind.capture.procs import hook_chain; "
                          "print(hook_chain())'"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))})
    agent, chain = eval(out.stdout)
    assert agent == os.getpid()                  # pytest ran sh, sh ran the hook
    assert len(chain) == 2                       # the hook and its sh
    assert hook_chain()[1][0] == os.getpid()
