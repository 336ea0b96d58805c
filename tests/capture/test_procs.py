"""The pid account behind "the command could not have made it" (procs.py), with real
processes: an agent process that runs commands the way the agents do (a shell per command),
real forks, real reaping, real ptys. The watcher is left out: these are the looks it makes
after reading a change."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest

from rewind.capture import bgtree, proc_read, procs
from rewind.capture.filetimes import TICK_NS
from rewind.capture.procs import Commands, hook_chain, last_pid
from rewind.model import ShellWindow

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


def window(agent: Agent, wid: int = 1, hooks: str = "", root=None) -> Commands:
    """A shell window of `agent`, opened now (the hook's mark: the last pid handed out);
    `root`: the project the changes are in."""
    c = Commands(None if root is None else str(root))
    c.update([ShellWindow(wid, agent.proc.pid, last_pid(), hooks)], set())
    return c


# A test that expects the proof to hold ("w:") needs every pid handed out between the
# window's mark and the look to be seen alive. Its own processes are (each is kept alive
# until after the look), but the machine's are not its to hold: on a busy machine (other
# test suites, a build) some process of someone else is born and gone between two looks,
# and the account then rightly gives the proof up (as
# test_a_process_of_another_that_came_and_went_unseen_gives_up_the_proof shows). Such an
# attempt proves nothing either way, so it is made again, with a new window; the assertion
# itself is unchanged. A pid that the account calls unseen although it is one of this
# test's live processes is never excused: that fails at once.

class Intruded(Exception):
    """The proof was lost to a process that is not this test's."""


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = procs._ppid(int(name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def looked(c: Commands) -> str | None:
    """c.explaining(); Intruded if a window lost its proof to a pid that is not this test's."""
    got = c.explaining()
    ours = _descendants(os.getpid()) | {os.getpid()}
    for why in c.why().values():
        m = re.fullmatch(r"process (\d+) came and went unseen", why)
        if m:
            assert int(m.group(1)) not in ours, f"{why}: but it is this test's, and alive"
            raise Intruded(why)
        if why.endswith("pids handed out since the last look"):
            raise Intruded(why)
    return got


def without_intruders(attempt, budget_s: float = 60.0):
    """attempt() again until no process of someone else came and went during it."""
    end, tries = time.monotonic() + budget_s, 0
    while True:
        tries += 1
        try:
            return attempt()
        except Intruded as e:
            if time.monotonic() > end:
                pytest.fail(f"{tries} attempts in {budget_s:.0f}s, each lost its proof to "
                            f"a process of someone else on this machine (last: {e})")


def test_a_change_before_the_command_starts_is_proven_not_its(agent, tmp_path):
    def before_the_command():
        c = window(agent)
        (tmp_path / "typed.txt").write_text("the person, while the agent asks for permission")
        assert looked(c) == "w:"                 # no process of the command exists yet
        assert c.why() == {1: "waiting"}
        return c
    c = without_intruders(before_the_command)
    agent.run("bg sleep 2")                      # now the command runs
    # Named by its own process even if some process of someone else also came and went
    # since the last look: the reason is the strongest evidence the look found.
    assert c.explaining() == "w:1"
    assert "descends from the agent" in c.why()[1]


def test_a_command_reaped_before_the_first_look_is_still_the_commands(agent, tmp_path):
    c = window(agent)
    agent.run(f"echo x > {tmp_path}/quick.txt")  # started, wrote, ended, reaped: never seen
    assert c.explaining() == "w:1"
    assert "came and went unseen" in c.why()[1]


def test_a_command_between_two_looks_is_the_commands(agent, tmp_path):
    def first_look():
        c = window(agent)
        assert looked(c) == "w:"
        return c
    c = without_intruders(first_look)
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
    def attempt():
        c = window(agent)
        other = subprocess.Popen(["sleep", "5"])     # alive until after both looks
        try:
            c.poll()                             # seen alive: not the agent's
            (tmp_path / "typed.txt").write_text("x")
            assert looked(c) == "w:"
        finally:
            other.kill()
            other.wait()
    without_intruders(attempt)


def test_a_thread_of_another_process_keeps_the_proof(agent, tmp_path):
    """A thread takes a pid too; its /proc entry exists but is not listed. This test process
    (not the agent's) starts one and holds it alive through the look."""
    def attempt():
        c = window(agent)
        release, started = threading.Event(), threading.Event()
        t = threading.Thread(target=lambda: (started.set(), release.wait()))
        t.start()
        try:
            started.wait()                       # its pid: present, unlisted
            assert os.path.exists(f"/proc/{t.native_id}")
            assert str(t.native_id) not in os.listdir("/proc")
            assert looked(c) == "w:"
        finally:
            release.set()
            t.join()
    without_intruders(attempt)


def test_a_process_the_listing_missed_is_looked_at_not_taken_for_a_thread(agent, monkeypatch):
    """The kernel hands out a pid before it lists the process (and before /proc/PID can be
    opened): a look that read the mark while the command's process was being created finds
    its pid unlisted, and an instant later /proc/PID exists. Taken for a thread, the
    command's process was skipped, the mark moved past it, and the window stayed "waiting"
    for good: its command's changes came out `external`. Seen in a stress on a busy machine
    (forks held up between the two by a cgroup migration); here the listing is made to miss
    the command's process, which a busy machine does at random."""
    c = window(agent)
    agent.run("bg sleep 2")                      # the command
    (child,) = _descendants(agent.proc.pid)
    listdir = os.listdir

    def missing_the_command(path="."):
        return [n for n in listdir(path) if not (path == "/proc" and n == str(child))]
    monkeypatch.setattr(procs.os, "listdir", missing_the_command)
    assert c.explaining() == "w:1"
    assert c.why()[1] == f"process {child} descends from the agent"


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
        def attempt():
            c = Commands()
            c.update([ShellWindow(1, os.getpid(), last_pid(), str(hook.proc.pid))], set())
            hook.run("bg sleep 2")               # the hook's child: a descendant of the agent too
            assert looked(c) == "w:"
            return c
        c = without_intruders(attempt)
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
    c.update([ShellWindow(1, short.pid, last_pid(), "")], set())
    short.wait()
    time.sleep(0.05)
    assert c.explaining() == "w:1"
    assert "agent process is gone" in c.why()[1]


def test_two_windows_are_named_together_once_their_commands_may_run(agent, tmp_path):
    def attempt():
        c = window(agent, 1)
        c.update([ShellWindow(2, agent.proc.pid, last_pid(), "")], set())
        assert looked(c) == "w:"
        return c
    c = without_intruders(attempt)
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


def _wait_for(path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_a_change_read_after_the_command_started_is_placed_by_its_time(agent, tmp_path):
    """A busy watcher reads the person's edit only once the command runs: the file's ctime
    is older than the last look that found the window waiting, so it is not the command's.
    What the command then writes, and a file it changes again, are."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("through a link")
    os.symlink("real", tmp_path / "link")
    (tmp_path / "doomed.txt").write_text("deleted by the command")
    (tmp_path / "quiet").mkdir()

    def the_person_then_a_look():
        c = window(agent, root=tmp_path)
        (tmp_path / "typed.txt").write_text("the person, while the agent asks for permission")
        (tmp_path / "dir" / "deep.txt").write_text("the person, deeper")
        (tmp_path / "again.txt").write_text("the person, then the command")
        (tmp_path / "quiet" / "gone.txt").write_text("written and deleted by the person")
        (tmp_path / "quiet" / "gone.txt").unlink()
        time.sleep(0.1)                          # more than a tick of the kernel's coarse clock
        assert looked(c) == "w:"                 # this look still finds no command
        return c
    c = without_intruders(the_person_then_a_look)
    agent.run(f"bg echo x > {tmp_path}/made.txt; echo y >> {tmp_path}/again.txt; "
              f"rm {tmp_path}/doomed.txt; sleep 3")
    _wait_for(tmp_path / "made.txt")
    deadline = time.monotonic() + 10
    while (tmp_path / "doomed.txt").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert c.explaining() == "w:1"               # the command runs: no file named, no proof
    assert "descends from the agent" in c.why()[1]
    assert c.explaining("typed.txt") == "w:"     # read late, made before the look
    assert c.explaining("dir/deep.txt") == "w:"
    assert c.explaining("quiet/gone.txt") == "w:"  # gone: its directory says when
    assert c.explaining("made.txt") == "w:1"     # the command's
    assert c.explaining("again.txt") == "w:1"    # changed again by the command
    assert c.explaining("doomed.txt") == "w:1"   # gone: its directory's change is the command's
    assert c.explaining("link/f.txt") == "w:1"   # through a symlink: another file's times


# -- commands gone on in the background ----------------------------------------------------

def _until(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_background_commands_processes_are_named_by_its_command_and_their_activity_shows(agent, tmp_path):
    mark = last_pid()
    out = tmp_path / "built.txt"
    command = f"sleep 0.5; echo built > {out}; sleep 30"
    agent.run("bg " + command)
    agent.run("bg sleep 30")              # another child of the agent's, after the mark: not it
    roots = bgtree.background_roots(agent.proc.pid, mark, set(), command)
    assert roots.count("@") == 1, roots
    pid = int(roots.split("@")[0])
    assert command.encode() in proc_read._cmdline(pid)
    before = bgtree.tree_signature(roots)
    assert before and str(pid) in before
    _until(out.exists)
    time.sleep(0.1)
    after = bgtree.tree_signature(roots)
    assert after != before                # the echo's write and the first sleep gone
    assert bgtree.tree_signature(roots) == after     # asleep again: nothing to see
    os.kill(pid, 9)
    _until(lambda: bgtree.tree_signature(roots) == "")
    # a pid given to a later process is not the command's: its start time differs
    assert bgtree.tree_signature(f"{os.getpid()}@1") == ""
    assert bgtree.tree_signature("") is None and bgtree.background_roots(None, mark, set(), command) == ""


def test_a_change_is_a_background_commands_only_when_its_tree_did_something_around_it():
    tick = TICK_NS
    looks = [(1000 * tick, "a"), (2000 * tick, "a"), (3000 * tick, "b"), (4000 * tick, "b")]
    assert bgtree.activity_between(looks, 2500 * tick)         # between the looks that saw it change
    assert bgtree.activity_between(looks, 1500 * tick)         # read late: the change came after
    assert not bgtree.activity_between(looks, 3500 * tick)     # asleep around it
    assert not bgtree.activity_between(looks[:2], 1500 * tick)
    assert bgtree.activity_between(looks + [(5000 * tick, None)], 4500 * tick)   # no look: no proof
    assert bgtree.activity_between(looks, None)                # no time: the last looks
    assert not bgtree.activity_between([(1, "a"), (2, "a"), (3, "a")], None)


def test_the_watcher_names_a_background_command_only_around_what_its_processes_did(agent, tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    mark = last_pid()
    command = f"sleep 0.4; echo built > {root}/built.txt; sleep 30"
    agent.run("bg " + command)
    c = Commands(str(root))
    c.update([ShellWindow(7, agent.proc.pid, mark, "")], set())
    roots = bgtree.background_roots(agent.proc.pid, mark, set(), command)
    c.update([ShellWindow(7, agent.proc.pid, mark, "", roots)], set())      # its Post event
    assert c.background and not c.active
    _until((root / "built.txt").exists)
    assert c.explaining("built.txt") == "w:7"
    time.sleep(0.2)
    c.look_background()
    (root / "person.txt").write_text("mine")          # while the command sleeps
    time.sleep(0.05)
    assert c.explaining("person.txt") == "w:/b"
    os.kill(int(roots.split("@")[0]), 9)
