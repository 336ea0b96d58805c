"""History belongs to the person: the commands that delete it refuse to run from inside an
agent's tool (docs/design.md, "History belongs to the person").

An agent's shell command runs with the person's rights, so no check here can be a wall;
it is a tripwire against the one-line prompt injection (`rewind forget --yes`,
`ring_size = 1` then `rewind gc`). Two signals, either one refuses:
1. ancestry (the primary test): one of the caller's ancestors is the agent process of a
   recorded session, one with a shell window open or a session not ended, in any project
   of the store (an agent can `cd` elsewhere first). The hooks wrote that pid down when
   they opened the window (capture/procs.py `hook_chain`). A person's terminal never
   descends from an agent's process.
2. the agents' own markers in the environment (`CLAUDECODE=1`, `GEMINI_CLI=1`, ...): each
   agent sets one in the shells it starts, and a person's terminal does not have it.
A terminal proves nothing: Gemini CLI and Codex give their shells a pty.

What escapes both: a command that re-parents itself (`setsid`, a double fork) and scrubs
its environment. Then what it deletes still goes to the trash (catalog/trash.py), kept a
day, where the person finds it with `rewind trash`; only the person's own `--now`
deletes at once, and an agent can run that only through such an escape.
"""

from __future__ import annotations

import os

from rewind.errors import Refused

# Each agent's mark in its shells' environment (from their sources): Claude Code sets
# CLAUDECODE=1 and CLAUDE_CODE_ENTRYPOINT, Gemini CLI GEMINI_CLI=1, Qwen Code (a fork of
# it) QWEN_CODE=1, Copilot CLI COPILOT_CLI=1; Codex's npm launcher CODEX_MANAGED_BY_NPM=1,
# its sandbox CODEX_SANDBOX and CODEX_SANDBOX_NETWORK_DISABLED, its shells CODEX_THREAD_ID.
# tests/conftest.py clears the same list.
MARKERS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "GEMINI_CLI", "QWEN_CODE", "COPILOT_CLI",
           "CODEX_MANAGED_BY_NPM", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_THREAD_ID",
           "CODEX_CI", "CURSOR_AGENT", "OPENCODE", "CLINE_ACTIVE")


def marker(environ=None) -> str | None:
    """The first agent marker set (non-empty) in the environment, as NAME=VALUE."""
    environ = os.environ if environ is None else environ
    for name in MARKERS:
        value = environ.get(name)
        if value:
            return f"{name}={value[:20]}"
    return None


def agent_ancestor(catalog) -> tuple[int, str, str] | None:
    """(pid, agent, session id) of a recorded agent process this process descends from."""
    from rewind.capture.procs import ancestors
    known = {}
    for pid, agent, session in catalog.agent_processes():
        known.setdefault(pid, (pid, agent, session))
    if not known:
        return None
    for pid in ancestors():
        if pid in known:
            return known[pid]
    return None


def inside_agent(catalog) -> str | None:
    """Why this process looks like an agent's tool, or None."""
    found = agent_ancestor(catalog)
    if found is not None:
        pid, agent, session = found
        return f"it runs inside a shell of the {agent} session {session[:12]} (process {pid})"
    mark = marker()
    if mark is not None:
        return f"it runs inside an agent's tool ({mark} is set)"
    return None


def refuse_from_agent(catalog, what: str, command: str) -> None:
    """Raise Refused when an agent's tool runs a command that deletes history."""
    why = inside_agent(catalog)
    if why is None:
        return
    raise Refused(f"{what} deletes history, and {why}: rewind does not let an agent erase it",
                  hint=f"if you want this, run `{command}` yourself, in your own terminal")


def from_agent(catalog) -> bool:
    return inside_agent(catalog) is not None
