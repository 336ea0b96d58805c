"""Rewinding an agent's conversation: a new session that ends just before a checkpoint's
prompt, beside the original (which is never modified), and the command that continues it.
One module per agent whose sessions can be forked safely (history/forks/: claude, gemini,
qwen, copilot, opencode; each says how its agent keeps a session); any other agent's checkpoint gets a one-line
refusal that says why.
"""

from __future__ import annotations

import importlib

from rewind.errors import ConversationUnavailable
from rewind.model import Checkpoint

AGENTS = {"claude": "Claude Code", "gemini": "Gemini CLI", "qwen": "Qwen Code", "copilot": "Copilot CLI", "opencode": "OpenCode"}
# why the others cannot be forked
_WHY_NOT = {
    "codex": ("Codex finds a session to resume through its own database (the threads of "
              "$CODEX_HOME/state_*.sqlite), which rewind does not write; the files can still be rewound"),
    "cline": "Cline's CLI resumes a task only in its terminal interface; the files can still be rewound",
    "cursor": "Cursor keeps its conversations inside the editor; the files can still be rewound",
}


def _module(cp: Checkpoint):
    name = cp.agent or ""
    if name not in AGENTS:
        who = f"checkpoint {cp.number} is from {name or 'no agent session'}"
        raise ConversationUnavailable(f"{who}: rewinding the conversation works for "
                                      f"{', '.join(list(AGENTS.values())[:-1])} and {list(AGENTS.values())[-1]} "
                                      "sessions", hint=_WHY_NOT.get(name))
    return importlib.import_module(f"rewind.history.forks.{name}")


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    """Write the forked session; returns (new session id, where it was written). With
    `dry_run`, the id and place the real run would write, nothing written. `root`: the
    project's folder (where OpenCode's CLI is run)."""
    return _module(cp).fork(cp, dry_run, root=root)


def refusal(cp: Checkpoint) -> str | None:
    """Why the conversation of `cp` cannot be forked, or None when it can: a dry-run fork
    (the transcript read and the prompt found, nothing written), or the agent's cheaper check
    where a dry run costs seconds (OpenCode starts its CLI for it)."""
    try:
        mod = _module(cp)
        (getattr(mod, "check", None) or (lambda c: mod.fork(c, dry_run=True)))(cp)
    except ConversationUnavailable as e:
        return e.message
    return None


def resume_command(cp: Checkpoint, root: str, new_id: str, where: str, shown_root: str | None = None) -> str:
    """The command line that continues the fork, in the project's folder."""
    return _module(cp).resume_command(root, new_id, where, shown_root or root)


def caveat(cp: Checkpoint, root: str, where: str) -> str | None:
    """What the agent itself may do to the fork once it is continued, when the person should
    know it (one line), or None."""
    check = getattr(_module(cp), "caveat", None)
    return check(root, where) if check else None
