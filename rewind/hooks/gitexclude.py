"""Keep an agent's hook settings file out of git while rewind's hooks are in it.

`hooks install` writes this machine's absolute paths (the venv's python, rewind's hook.py)
into a settings file inside the project. Committed, it would break the hooks of everyone
else who checks the project out, so it goes into `.git/info/exclude` (the repository's own,
never shared, as Claude Code keeps `.claude/settings.local.json` out of git) inside a block
that `hooks uninstall` takes out again. Only a file git does not track, and only one that is
the person's own (Claude Code's local settings) or that held nothing before rewind's entries:
a project's shared settings file the person made stays as visible to git as it was.

The file stays inside rewind's scope (recorded and restored): rewind's ignore rules skip the
block (capture/ignore.py), and `export` leaves such a file out of its commit
(history/export.py).
"""

from __future__ import annotations

import json
import os
import subprocess

from rewind.capture.ignore import EXCLUDE_BEGIN, EXCLUDE_END, GIT_EXCLUDE
from rewind.fsutil import atomic_write
from rewind.hooks.install import BACKUP, PROJECT_SETTINGS, strip_ours, whole_file_ours

PERSONAL = ".claude/settings.local.json"    # the agent's own per-person file: never shared


def project_rel(root: str, path: str) -> str | None:
    """`path` as one of the agents' project settings files of `root`, else None."""
    try:
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root)).replace(os.sep, "/")
    except ValueError:
        return None
    return rel if rel in PROJECT_SETTINGS else None


def _tracked(root: str, rel: str) -> bool:
    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "--error-unmatch", "--", rel],
                           capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False        # no git to ask: the exclude line only matters to a git that is there
    return r.returncode == 0


def only_ours(before: bytes | None, agent: str) -> bool:
    """Whether a settings file's bytes before install held nothing but rewind's own entries."""
    if before is None or not before.strip():
        return True
    whole = whole_file_ours(agent, before)
    if whole is not None:           # rewind's own file, or the person's (Cline's: then chained)
        return whole
    try:
        data = json.loads(before)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    rest = strip_ours(data, agent)
    return not any(v for k, v in rest.items() if k != "hooks") and not rest.get("hooks")


def _read(exclude: str) -> bytes:
    try:
        with open(exclude, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _block(data: bytes) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(before, inside, after) rewind's block, by lines; inside empty when there is none."""
    lines = data.split(b"\n")
    bare = [ln.rstrip(b"\r") for ln in lines]
    if EXCLUDE_BEGIN not in bare:
        return lines, [], []
    start = bare.index(EXCLUDE_BEGIN)
    end = next((i for i in range(start + 1, len(bare)) if bare[i] == EXCLUDE_END), len(bare))
    return lines[:start], bare[start + 1:end], lines[end + 1:]


def keep_out(root: str, path: str, agent: str, before: bytes | None) -> str | None:
    """Add the settings file (module docstring) and install's backup of it (rewind's own
    copy of the person's original, for uninstall) to .git/info/exclude; the note to print,
    or None when neither was to be added."""
    return keep_out_all(root, [(path, before)], agent)


def keep_out_all(root: str, files: list[tuple[str, bytes | None]], agent: str) -> str | None:
    """keep_out for each (path, its bytes before install): Cline's hooks are a file each."""
    if not os.path.isdir(os.path.join(root, ".git")):
        return None
    wanted, settings = [], []
    for path, before in files:
        rel = project_rel(root, path)
        if rel is None:
            continue
        if (rel == PERSONAL or only_ours(before, agent)) and not _tracked(root, rel):
            wanted.append(rel)
            settings.append(rel)
        if os.path.lexists(os.path.join(root, rel + BACKUP)) and not _tracked(root, rel + BACKUP):
            wanted.append(rel + BACKUP)
    if not wanted:
        return None
    exclude = os.path.join(root, GIT_EXCLUDE)
    head, inside, tail = _block(_read(exclude))
    added = [r for r in wanted if b"/" + r.encode() not in inside]
    if added:
        inside += [b"/" + r.encode() for r in added]
        while head and head[-1] == b"":
            head.pop()
        new = b"\n".join([*head, EXCLUDE_BEGIN, *inside, EXCLUDE_END, *tail])
        if not new.endswith(b"\n"):
            new += b"\n"
        os.makedirs(os.path.dirname(exclude), exist_ok=True)
        atomic_write(exclude, new, mode=0o644)
    named = ", ".join(wanted) if len(wanted) <= 3 else f"{wanted[0]} and {len(wanted) - 1} more of rewind's files"
    return (f"kept out of git: {GIT_EXCLUDE} {'now ' if added else ''}names {named}"
            + (" (this machine's paths are in them)" if settings else " (rewind's copy of the original)"))


def let_in(root: str, path: str, more: tuple = ()) -> bool:
    """Take the settings file (and `more` of rewind's files) and their backups out of
    rewind's block in .git/info/exclude (the block goes when it is empty); whether anything
    changed."""
    rels = [r for r in (project_rel(root, p) for p in (path, *more)) if r is not None]
    if not rels:
        return False
    exclude = os.path.join(root, GIT_EXCLUDE)
    head, inside, tail = _block(_read(exclude))
    lines = {b"/" + x.encode() for rel in rels for x in (rel, rel + BACKUP)}
    if not lines & set(inside):
        return False
    inside = [ln for ln in inside if ln not in lines]
    new = b"\n".join([*head, *([EXCLUDE_BEGIN, *inside, EXCLUDE_END] if inside else []), *tail])
    if new.strip() and not new.endswith(b"\n"):
        new += b"\n"
    atomic_write(exclude, new if new.strip() else b"", mode=0o644)
    return True
