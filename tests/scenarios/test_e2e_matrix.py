"""Every agent, watcher on and off, on a quiet and on a busy machine: the real Claude Code,
Gemini CLI, Codex, Qwen Code, Copilot CLI and OpenCode CLIs (tests/agents/*) run one
realistic three-prompt session each, in resume mode (one CLI process a prompt). A wrapper
around the agent's binary installs rewind's hooks exactly as `rewind hooks install` writes
them, keeps a copy of the tree before the first prompt and of the tree each later prompt
finds, and makes a person's edit before the second and the third.

The session: edit-tool writes in new nested directories, an edit of an existing file (and
for Codex a deletion by apply_patch); `mkdir -p`, `sed -i`, `mv`, `ln -s`, `rm -r` by the
shell; a failing command that wrote a file first; a branch switch and a commit. Then: every
shell change is `bash` with its command, every edit-tool change `tool` with its tool, the
person's edits `external`, the link flagged `symlink`; `to 1` gives back the tree exactly as
before the session, `to 2` exactly as the second prompt found it, two `undo`s exactly the
end of the session, and the plan after that still names the person's edit as not the
agent's; `revert 2` takes back the
middle prompt alone (its `mv` as a rename, the person's file kept) and `undo` undoes that.
Gemini CLI, Qwen Code, Copilot CLI and OpenCode then fork the conversation to before the
second prompt, and the real CLI continues the fork (the hooks-only cells, quiet and busy).

"Busy" is a machine where at least two processes besides the session's own want the CPU,
while the session runs and while `to` and `undo` rewrite the tree: everything rewind does
with time in it (hooks, windows, the watcher, the restore's checks). Two spinners make it
so, each spinning unless the machine is that busy without it (the rest of the suite, a CI
machine's own load): the session never runs with less contention than two spinning processes
give it, and the spinners burn nothing where the machine is loaded already (they were a
sixth of the suite's CPU, more under load). Not while the test reads the listings back: that
is the same code on either machine."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import AGENT_CLIS, REWIND, RESUME_PROMPT, agent_cli, fingerprint, harness, no_cli, run_rewind, spinning

BINS = {agent: agent_cli(agent) for agent in AGENT_CLIS}

pytestmark = [pytest.mark.e2e, pytest.mark.matrix]

SETUP = {
    "README.md": "# shop\n",
    "src/shop/__init__.py": "",
    "src/shop/cart.py": "def total(items):\n    return sum(items)\n",
    "config/settings.ini": "[db]\nhost = old-host\n",
    "docs/notes.txt": "notes\n",
    "build/cache/a.o": "obj\n",
    "build/out.txt": "out\n",
}
DISCOUNT = "def discount(total, pct):\n    return total * (100 - pct) / 100\n"
INTRO = "# Guide\n\nStart here.\n"
SHELL = {   # the shell commands, prompt by prompt
    "report": "mkdir -p reports/2026 && echo ok > reports/2026/run.txt",
    "dirs": "mkdir -p src/shop/pricing docs/guide",      # Copilot CLI's create wants them first
    "sed": "sed -i 's/old-host/new-host/' config/settings.ini",
    "mvln": "mv docs/notes.txt docs/guide/notes.txt && ln -s src/shop/cart.py cart_link.py",
    "rm": "rm -r build",
    "fail": "echo partial > partial.log && false",
    "branch": "git checkout -q -b feature",
    "note": "git branch --show-current > branch.txt",
    "commit": "git add -A && git -c user.name=t -c user.email=t@t commit -qm work",
    # Codex's policy refuses it (`rm -rf`): a PreToolUse and no PostToolUse, and it never runs
    "refused": "mv reports/2026/run.txt reports/run.txt && rm -rf reports/2026",
}
PROMPTS = ("Add a discount module and a guide, then write a report.",
           "Round the totals, point the settings at the new host, move the notes into the guide and link the cart.",
           "Clean the build and try the tests.")
EXPECT = {
    "exists": ["src/shop/pricing/discount.py", "docs/guide/intro.md", "reports/2026/run.txt",
               "docs/guide/notes.txt", "cart_link.py", "partial.log"],
    "absent": ["docs/notes.txt", "build"],
    "contents": {"config/settings.ini": "[db]\nhost = new-host\n",
                 "src/shop/cart.py": "def total(items):\n    return round(sum(items), 2)\n",
                 "README.md": "# Shop\nedited by the person\n", "branch.txt": "feature\n"},
    "symlinks": {"cart_link.py": "src/shop/cart.py"},
    "no_tool_errors": False,
}


def _claude() -> dict:
    def bash(cmd):
        return {"tool_uses": [{"name": "Bash", "input": {"command": SHELL[cmd], "description": cmd}}]}
    return {
        "events": ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                   "Stop", "SessionEnd"],
        "prompts": [
            {"prompt": PROMPTS[0], "turns": [
                {"tool_uses": [
                    {"name": "Write", "input": {"file_path": "<PROJECT_DIR>/src/shop/pricing/discount.py",
                                                "content": DISCOUNT}},
                    {"name": "Write", "input": {"file_path": "<PROJECT_DIR>/docs/guide/intro.md",
                                                "content": INTRO}}]},
                bash("report"), bash("branch"), {"text": "Done."}]},
            {"prompt": PROMPTS[1], "turns": [
                {"tool_uses": [{"name": "Read", "input": {"file_path": "<PROJECT_DIR>/src/shop/cart.py"}},
                               {"name": "Read", "input": {"file_path": "<PROJECT_DIR>/README.md"}}]},
                {"tool_uses": [{"name": "Edit", "input": {"file_path": "<PROJECT_DIR>/src/shop/cart.py",
                                                          "old_string": "return sum(items)",
                                                          "new_string": "return round(sum(items), 2)"}}]},
                {"tool_uses": [{"name": "Edit", "input": {"file_path": "<PROJECT_DIR>/README.md",
                                                          "old_string": "# shop", "new_string": "# Shop"}}]},
                bash("sed"), bash("mvln"), bash("note"), {"text": "Done."}]},
            {"prompt": PROMPTS[2], "turns": [bash("rm"), bash("fail"), bash("commit"), {"text": "The tests fail."}]},
        ],
        "expect": {**EXPECT, "hook_counts": {"SessionStart": 3, "UserPromptSubmit": 3, "PreToolUse": 14,
                                             "PostToolUse": 13, "PostToolUseFailure": 1, "Stop": 3,
                                             "SessionEnd": 3}},
    }


def _gemini() -> dict:
    def shell(cmd):
        return {"tool_uses": [{"name": "run_shell_command", "input": {"command": SHELL[cmd], "description": cmd}}]}
    return {
        "prompts": [
            {"prompt": PROMPTS[0], "turns": [
                {"tool_uses": [
                    {"name": "write_file", "input": {"file_path": "<PROJECT_DIR>/src/shop/pricing/discount.py",
                                                     "content": DISCOUNT}},
                    {"name": "write_file", "input": {"file_path": "<PROJECT_DIR>/docs/guide/intro.md",
                                                     "content": INTRO}}]},
                shell("report"), shell("branch"), {"text": "Done."}]},
            {"prompt": PROMPTS[1], "turns": [
                {"tool_uses": [{"name": "replace", "input": {"file_path": "<PROJECT_DIR>/src/shop/cart.py",
                                                             "instruction": "Round the total.",
                                                             "old_string": "return sum(items)",
                                                             "new_string": "return round(sum(items), 2)"}}]},
                {"tool_uses": [{"name": "replace", "input": {"file_path": "<PROJECT_DIR>/README.md",
                                                             "instruction": "Capitalise the title.",
                                                             "old_string": "# shop", "new_string": "# Shop"}}]},
                shell("sed"), shell("mvln"), shell("note"), {"text": "Done."}]},
            {"prompt": PROMPTS[2], "turns": [shell("rm"), shell("fail"), shell("commit"),
                                             {"text": "The tests fail."}]},
        ],
        "expect": {**EXPECT, "hook_counts": {"SessionStart": 3, "BeforeAgent": 3, "BeforeTool": 12,
                                             "AfterTool": 12, "AfterAgent": 3, "SessionEnd": 3}},
    }


def _codex() -> dict:
    def shell(cmd):
        return {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": SHELL[cmd],
                                                                      "workdir": "<PROJECT_DIR>"}}]}
    return {
        "prompts": [
            {"prompt": PROMPTS[0], "turns": [
                {"tool_calls": [{"name": "apply_patch", "input": [
                    "*** Begin Patch", "*** Add File: src/shop/pricing/discount.py",
                    *("+" + line for line in DISCOUNT.splitlines()),
                    "*** Add File: docs/guide/intro.md", *("+" + line for line in INTRO.splitlines()),
                    "*** End Patch"]}]},
                shell("report"), shell("branch"), {"text": "Done."}]},
            {"prompt": PROMPTS[1], "turns": [
                {"tool_calls": [{"name": "apply_patch", "input": [
                    "*** Begin Patch", "*** Update File: src/shop/cart.py", "@@",
                    "-    return sum(items)", "+    return round(sum(items), 2)", "*** End Patch"]}]},
                {"tool_calls": [{"name": "apply_patch", "input": [
                    "*** Begin Patch", "*** Update File: README.md", "@@",
                    "-# shop", "+# Shop", "*** End Patch"]}]},
                shell("sed"), shell("mvln"), shell("note"), {"text": "Done."}]},
            {"prompt": PROMPTS[2], "turns": [
                {"tool_calls": [{"name": "apply_patch", "input": [      # a deletion by the edit tool
                    "*** Begin Patch", "*** Delete File: docs/guide/intro.md", "*** End Patch"]}]},
                shell("rm"), shell("refused"), shell("fail"), shell("commit"), {"text": "The tests fail."}]},
        ],
        "expect": {**EXPECT, "exists": [p for p in EXPECT["exists"] if p != "docs/guide/intro.md"],
                   "absent": [*EXPECT["absent"], "docs/guide/intro.md"],
                   "hook_counts": {"SessionStart": 3, "UserPromptSubmit": 3, "PreToolUse": 13,
                                   "PostToolUse": 12, "Stop": 3, "SessionEnd": 3}},
    }


def _chat(write, edit, read, shell, keys, dirs_first=False) -> dict:
    """An agent on an OpenAI-compatible model (tests/agents/chat_session.py): its tools'
    names and their argument names (path, content, old, new). Qwen Code edits (and lets
    `sed -i` touch) only files read in the session, as Claude Code does; Copilot CLI's
    create wants the directory made first (`dirs_first`)."""
    path, content, old, new = keys

    def run(cmd):
        return {"tool_calls": [{"name": shell[0], "arguments": {"command": SHELL[cmd], **shell[1]}}]}
    return {
        "prompts": [
            {"prompt": PROMPTS[0], "turns": [
                *([run("dirs")] if dirs_first else []),
                {"tool_calls": [
                    {"name": write, "arguments": {path: "<PROJECT_DIR>/src/shop/pricing/discount.py", content: DISCOUNT}},
                    {"name": write, "arguments": {path: "<PROJECT_DIR>/docs/guide/intro.md", content: INTRO}}]},
                run("report"), run("branch"), {"text": "Done."}]},
            {"prompt": PROMPTS[1], "turns": [
                {"tool_calls": [{"name": read, "arguments": {path: f"<PROJECT_DIR>/{rel}"}}
                                for rel in ("src/shop/cart.py", "README.md", "config/settings.ini")]},
                {"tool_calls": [{"name": edit, "arguments": {path: "<PROJECT_DIR>/src/shop/cart.py",
                                                             old: "return sum(items)",
                                                             new: "return round(sum(items), 2)"}}]},
                {"tool_calls": [{"name": edit, "arguments": {path: "<PROJECT_DIR>/README.md", old: "# shop",
                                                             new: "# Shop"}}]},
                run("sed"), run("mvln"), run("note"), {"text": "Done."}]},
            {"prompt": PROMPTS[2], "turns": [run("rm"), run("fail"), run("commit"), {"text": "The tests fail."}]},
        ],
        "expect": EXPECT,
    }


def _qwen() -> dict:
    return _chat("write_file", "edit", "read_file", ("run_shell_command", {"description": "run"}),
                 ("file_path", "content", "old_string", "new_string"))


def _copilot() -> dict:
    return _chat("create", "edit", "view", ("bash", {"description": "run", "mode": "sync"}),
                 ("path", "file_text", "old_str", "new_str"), dirs_first=True)


def _opencode() -> dict:
    return _chat("write", "edit", "read", ("bash", {"description": "run"}),
                 ("filePath", "content", "oldString", "newString"))


AGENTS = {   # scenario, harness flag, install scope, tool names (edit, shell)
    "claude": (_claude, "--claude", "local", ("Write", "Edit"), "Bash"),
    "gemini": (_gemini, "--gemini", "project", ("write_file", "replace"), "run_shell_command"),
    "codex": (_codex, "--codex", "user", ("apply_patch", "apply_patch"), "Bash"),
    "qwen": (_qwen, "--agent", "project", ("write_file", "edit"), "run_shell_command"),
    "copilot": (_copilot, "--agent", "project", ("create", "edit"), "bash"),
    "opencode": (_opencode, "--agent", "project", ("write", "edit"), "bash"),
}


def driver(agent: str, flag: str, binary: str) -> list[str]:
    """The harness's command line up to its common options."""
    if flag == "--agent":           # tests/agents/chat_session.py drives them all
        return [sys.executable, str(harness(agent).parent / "chat_session.py"), "--agent", agent, "--bin", binary]
    return [sys.executable, str(harness(agent) / "run_session.py"), flag, binary]


def wrapper(tmp: Path, agent: str, real: str, scope: str) -> str:
    """The agent's binary as a person would run it, prompt after prompt: rewind's hooks
    installed once, before the first, as `rewind hooks install` writes them (so an agent
    that rewrote its settings between prompts would lose them, and the test would say so),
    the tree kept before the first prompt, a person's edit before the second (README.md) and
    the third (a new file), and the tree each of those two finds kept too (`at2`, `at3`)."""
    script = tmp / f"{agent}-wrapped"
    install = " ".join(map(shlex.quote, [*REWIND, "hooks", "install", agent, "--scope", scope]))
    count, before, at = (shlex.quote(str(tmp / name)) for name in ("invocations", "before", "at"))
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then exec {shlex.quote(real)} "$@"; fi\n'
        f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        # a git repository, committed before the session and before the hooks (whose watcher
        # would see .git/info/exclude appear and rescan, rightly, saying so in its log)
        'if [ $n = 1 ]; then git init -q -b main && git add -A && '
        'git -c user.name=t -c user.email=t@t commit -qm init || exit 96; fi\n'
        f"if [ $n = 1 ]; then {install} --project \"$PWD\" >/dev/null || exit 97; fi\n"
        # the copy is the tree before the session
        f'if [ $n = 1 ]; then rm -rf {before}; cp -a "$PWD" {before}; fi\n'
        'if [ $n = 2 ]; then printf "edited by the person\\n" >> README.md; fi\n'
        'if [ $n = 3 ]; then printf "mine\\n" > person.txt; fi\n'
        # the tree as the prompt finds it, person's edit and all: checkpoint n
        f'if [ $n -ge 2 ]; then rm -rf {at}$n; cp -a "$PWD" {at}$n; fi\n'
        # Gemini CLI starts node twice per prompt (it relaunches itself with more heap)
        # unless told not to: with the watcher it keeps the relaunch, whose process chain the
        # shell windows' pid account must follow; the hooks-only run (no pid account) does without
        + ('if [ "$REWIND_WATCH" = 0 ]; then export GEMINI_CLI_NO_RELAUNCH=true; fi\n' if agent == "gemini" else "")
        + f'exec {shlex.quote(real)} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)




@pytest.fixture(params=[False, True], ids=["quiet", "busy"])
def load(request):
    """`with load():` runs the block on a busy machine, or as it is."""
    return spinning if request.param else contextlib.nullcontext


def _shown(proj: Path, n: int) -> tuple[dict[str, dict], dict | None]:
    """`rewind show N --json`: its changes by path, and its git move."""
    shown = json.loads(run_rewind("show", str(n), "--json", cwd=proj, check=0).stdout)
    return {c["path"]: c for c in shown["changes"]}, shown["git"]


@pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "watcher"])
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_real_session_is_attributed_and_rewound_exactly(agent, watch, load, tmp_path):
    make, flag, scope, (write_tool, edit_tool), shell_tool = AGENTS[agent]
    if not BINS[agent]:
        pytest.skip(no_cli(agent))
    scenario = {"description": "rewind's end-to-end matrix", "setup": {"files": SETUP}, **make()}
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    proj = tmp_path / "proj"
    env = dict(os.environ, REWIND_WATCH=watch, IS_SANDBOX="1")
    with load():
        r = subprocess.run([*driver(agent, flag, wrapper(tmp_path, agent, BINS[agent], scope)),
                            "--project-dir", str(proj), "--fresh",
                            "--scenario", str(tmp_path / "scenario.json"), "--mode", "resume"],
                           capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    skip = (".git",)
    before, final = fingerprint(tmp_path / "before", skip), fingerprint(proj, skip)
    if agent == "opencode":     # OpenCode writes it at its first start, before the first prompt (checkpoint 1)
        before[".opencode/.gitignore"] = final[".opencode/.gitignore"]

    cps = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)
    assert [c["kind"] for c in cps] == ["prompt"] * 3 and all(c["agent"] == agent for c in cps)
    assert [c["prompt"] for c in reversed(cps)] == list(PROMPTS)
    (one, move1), (two, move2), (three, move3) = (_shown(proj, n) for n in (1, 2, 3))

    def by_shell(changes, path, cmd):
        c = changes[path]
        assert (c["source"], c["tool"], c["command"]) == ("bash", shell_tool, SHELL[cmd]), (path, c)

    def by_tool(changes, path, tool):
        c = changes[path]
        assert (c["source"], c["tool"]) == ("tool", tool), (path, c)

    by_tool(one, "src/shop/pricing/discount.py", write_tool)
    by_tool(one, "docs/guide/intro.md", write_tool)
    by_shell(one, "reports/2026/run.txt", "report")
    assert one["README.md"]["source"] == "external", one["README.md"]
    by_tool(two, "src/shop/cart.py", edit_tool)
    by_shell(two, "config/settings.ini", "sed")
    by_shell(two, "docs/notes.txt", "mvln")
    by_shell(two, "docs/guide/notes.txt", "mvln")
    by_shell(two, "cart_link.py", "mvln")
    assert "symlink" in two["cart_link.py"]["flags"]
    assert two["person.txt"]["source"] == "external", two["person.txt"]
    for path in ("build/cache/a.o", "build/out.txt"):
        by_shell(three, path, "rm")
    by_shell(three, "partial.log", "fail")          # Codex: not with the refused command before it
    assert not [(p, c["command"]) for n in (one, two, three) for p, c in n.items()
                if "ambiguous" in c["flags"] or SHELL["refused"] in (c["command"] or "")]
    if agent == "codex":
        assert (proj / "reports/2026/run.txt").exists()                   # it never ran
        gone = three["docs/guide/intro.md"]
        assert (gone["status"], gone["source"], gone["tool"]) == ("deleted", "tool", "apply_patch"), gone
    by_tool(two, "README.md", edit_tool)              # after the person's edit of it
    by_shell(two, "branch.txt", "note")
    # git state is git state: the branch switch and the last prompt's commit are the commands',
    # shown apart from the tree's changes (the commit at once: no later checkpoint needed)
    assert not [p for n in (one, two, three) for p in n if p == ".git" or p.startswith(".git/")]
    moves = [move1, move2, move3]
    assert moves[1] is None, moves
    assert (moves[0]["before"]["branch"], moves[0]["after"]["branch"], moves[0]["source"], moves[0]["tool"],
            moves[0]["command"]) == ("main", "feature", "bash", shell_tool, SHELL["branch"]), moves[0]
    assert moves[0]["before"]["head"] == moves[0]["after"]["head"], moves[0]
    assert moves[2]["after"]["branch"] == "feature" and moves[2]["after"]["head"] != moves[2]["before"]["head"]
    assert (moves[2]["source"], moves[2]["command"]) == ("bash", SHELL["commit"]), moves[2]
    listed = {c["id"]: c for c in cps}
    assert listed[1]["summary"]["flags"].get("git") == 1 and listed[3]["summary"]["flags"].get("git") == 1
    others = {p: c["source"] for n in (one, two, three) for p, c in n.items()
              if c["source"] not in ("tool", "bash") and p not in ("README.md", "person.txt")}
    assert not others, others

    # which path the hooks took: the warm watcher served them, or each ran on its own
    deadline = time.monotonic() + 10
    while True:
        hooks = json.loads(run_rewind("watch", "--status", "--json", cwd=proj, check=0).stdout)
        if watch == "0" or hooks["hooks_served"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)                  # (the watcher writes its count at its heartbeat)
    if watch == "1":
        assert hooks["hooks_served"] > 0, hooks
    else:
        assert (hooks["hooks_served"], hooks["last_hook_fallback"]["reason"]) == (0, "watcher off"), hooks

    with load():           # back to the start, forward to the second prompt, and undone step by step
        run_rewind("to", "1", "--yes", cwd=proj, check=0)
        assert fingerprint(proj, skip) == before
        run_rewind("to", "2", "--yes", cwd=proj, check=0)
        assert fingerprint(proj, skip) == fingerprint(tmp_path / "at2", skip)
        run_rewind("undo", "--yes", cwd=proj, check=0)
        assert fingerprint(proj, skip) == before
        run_rewind("undo", "--yes", cwd=proj, check=0)
        assert fingerprint(proj, skip) == final
    plan = run_rewind("to", "1", "--dry-run", cwd=proj, check=0).stdout
    flagged = {line.split()[0] for line in plan.splitlines() if "not written by the agent" in line}
    assert flagged == {"README.md", "person.txt"}, plan          # README.md: the person's, then the agent's
    readme = next(line for line in plan.splitlines() if line.split()[:1] == ["README.md"])
    assert f"changed by: external, then tool ({edit_tool}), then rewind" in readme, plan
    effects = json.loads(run_rewind("to", "1", "--dry-run", "--json", cwd=proj, check=0).stdout)["will_not_undo"]
    git_effects = [(e["checkpoint"], e["command"]) for e in effects if e["kind"] == "git"]
    assert git_effects == [(1, SHELL["branch"]), (3, SHELL["commit"])], effects
    assert not [e for e in effects if e["kind"] == "command" and "git" in (e["command"] or "")], effects
    # take back the middle prompt alone: its edits, its sed, its mv (as a rename), its link and
    # its note go; the first prompt's work, the third's and the person's files stay
    with load():
        done = json.loads(run_rewind("revert", "2", "--yes", "--json", cwd=proj, check=0).stdout)
    outcomes = {p["path"]: p["outcome"] for p in done["paths"]}
    assert outcomes == {"src/shop/cart.py": "revert", "README.md": "revert", "config/settings.ini": "revert",
                        "docs/notes.txt": "rename", "cart_link.py": "revert", "branch.txt": "revert",
                        "person.txt": "kept"}, done["paths"]
    reverted = fingerprint(proj, skip)
    expected = {k: v for k, v in final.items() if k not in ("cart_link.py", "branch.txt", "docs/guide/notes.txt")}
    expected.update({"src/shop/cart.py": before["src/shop/cart.py"], "config/settings.ini": before["config/settings.ini"],
                     "docs/notes.txt": before["docs/notes.txt"],
                     "README.md": ("file", final["README.md"][1], b"# shop\nedited by the person\n")})
    assert reverted == expected, sorted(set(reverted.items()) ^ set(expected.items()))
    with load():
        run_rewind("undo", "--yes", cwd=proj, check=0)
    assert fingerprint(proj, skip) == final
    log = Path(os.environ["REWIND_HOME"]) / "rewind.log"
    # OpenCode writes .opencode/.gitignore at its first start: the watcher rescans, rightly, and says so
    said = [line for line in (log.read_text().splitlines() if log.exists() else [])
            if not (agent == "opencode" and line.endswith("full scan: an ignore file changed (.opencode/.gitignore)"))]
    assert not said, "\n".join(said)
    # the conversation, on a quiet and a busy machine: the fork reads and writes the agent's
    # session files alone (outside the project, where no watcher looks), so the watcher
    # cells, which would run it the same way, leave it to the hooks-only ones (it is a
    # fifth of an OpenCode cell's CPU)
    if (flag == "--agent" or agent == "gemini") and watch == "0":
        _the_fork_resumes_before_the_second_prompt(agent, proj, tmp_path, load)


FORKED = {   # the files the agent keeps a session in (under its harness's home), for the original's bytes
    # (Gemini CLI: one file per minute the session was resumed in; all but the first hold a header alone)
    "gemini": lambda home, sid: sorted((home / ".gemini" / "tmp").glob(f"*/chats/session-*-{sid[:8]}.jsonl")),
    "qwen": lambda home, sid: sorted((home / ".qwen" / "projects").glob(f"*/chats/{sid}.jsonl")),
    "copilot": lambda home, sid: [home / ".copilot" / "session-state" / sid / "events.jsonl"],
}


def _session_bytes(agent: str, home: Path, sid: str) -> dict[str, bytes] | None:
    if agent not in FORKED:
        return None
    files = {str(p): p.read_bytes() for p in FORKED[agent](home, sid) if p.exists()}
    assert files, f"no file of session {sid} under {home}"
    return files


def _the_fork_resumes_before_the_second_prompt(agent: str, proj: Path, tmp_path: Path, load) -> None:
    """`rewind to 2 --conversation-only`, then the real CLI continues the new session: the
    model is shown the first prompt's conversation and nothing of the second's or the
    third's; the original session is left as it was."""
    env = {"PATH": f"{Path(BINS[agent]).parent}{os.pathsep}{os.environ['PATH']}"} if agent == "opencode" else {}
    out, home = (Path(f"{proj}.realclient-out"), Path(f"{proj}.realclient-out") / "gemini-home") \
        if agent == "gemini" else (Path(f"{proj}.chat-out"), Path(f"{proj}.chat-out") / "home")
    original = json.loads(run_rewind("list", "--json", cwd=proj, check=0).stdout)[-1]["session_id"]
    kept = _session_bytes(agent, home, original)
    dry = run_rewind("to", "2", "--dry-run", "--conversation-only", cwd=proj, check=0, env=env).stdout
    with load():
        said = run_rewind("to", "2", "--conversation-only", cwd=proj, check=0, env=env).stdout
    new_id = said.split("Conversation: a new session ")[1].split()[0]
    assert new_id != original and new_id in dry, (dry, said)        # the dry run named the session made
    assert _session_bytes(agent, home, original) == kept                 # the original session, untouched
    (tmp_path / "cont.json").write_text(json.dumps({"prompts": [{"prompt": RESUME_PROMPT,
                                                                   "turns": [{"text": "We made a discount module."}]}]}))
    # (Gemini's harness starts a new requests log: it holds the resumed run's alone)
    sent = 0 if agent == "gemini" else (out / "requests.jsonl").read_text().count("\n")
    resume = ["--gemini-arg=--resume", f"--gemini-arg={new_id}", "--events", "SessionStart,BeforeAgent,AfterAgent"] \
        if agent == "gemini" else ["--resume", new_id]          # (a turn with no tool: no tool hooks to expect)
    with load():
        r = subprocess.run([*driver(agent, AGENTS[agent][1], BINS[agent]), "--project-dir", str(proj),
                            "--scenario", str(tmp_path / "cont.json"), *resume],
                           capture_output=True, text=True, timeout=300, cwd=proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    asked = [json.dumps(json.loads(line)["body"].get("contents" if agent == "gemini" else "messages"))
             for line in (out / "requests.jsonl").read_text().splitlines()[sent:]]
    asked = [a for a in asked if RESUME_PROMPT in a]
    assert asked, "the resumed session asked the model nothing"
    assert all(PROMPTS[0] in a and PROMPTS[1] not in a and PROMPTS[2] not in a for a in asked), asked[-1][:3000]
    # ... and still so after the agent ran, except Gemini CLI's: its own startup sweep deletes a
    # session resumed in a later minute than it began, every file of it (google-gemini/gemini-cli#27368;
    # the README says so, with the setting that stops it), and this session was resumed twice
    if kept is not None and agent != "gemini":
        assert _session_bytes(agent, home, original) == kept
