"""OpenCode's conversation (1.18.33): sessions live in its SQLite database
(`~/.local/share/opencode/opencode.db`, under XDG_DATA_HOME), internal and written by a
running OpenCode at any time, so rewind never writes it: it goes through OpenCode's
own `opencode export ID` (the session as JSON: `info`, then `messages`, each its `info` and
`parts`) and `opencode import FILE` (which inserts a session, its messages and parts, each
by id, leaving any that exist alone).

The fork is the export cut before the checkpoint's user message, every id in it (the
session's, each message's and part's, wherever they appear) replaced by a new one: a
message's or part's keeps its time-ordered prefix, so the order stays the original's, and
its random tail comes from the ids of what is kept, so the dry run (which reads the session
from the database, read only, without a start of OpenCode) names the session the real run
imports and forking the same point again gives the same session back (a session of that id
that holds other messages, a fork resumed since, moves on to the next id; whether it is
there is read from the database, read only, by catalog/foreign.py). Both commands run
with `--pure` (no plugins: rewind's own would record the import), in the session's folder.
`opencode --session <new id>` continues it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile

from rewind.errors import ConversationUnavailable
from rewind.model import Checkpoint
from rewind.text import unbroken

NAME = "OpenCode"
TIMEOUT_S = 120
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _binary() -> str:
    found = shutil.which("opencode")
    if not found:
        raise ConversationUnavailable("`opencode` is not on PATH: rewinding an OpenCode conversation goes "
                                      "through its own export and import", hint="the files can still be rewound")
    return found


def _env(db: str | None) -> dict:
    """OpenCode's environment for the session's database: the XDG_DATA_HOME it lives under."""
    env = dict(os.environ)
    if db and os.path.basename(db) == "opencode.db" and os.path.basename(os.path.dirname(db)) == "opencode":
        env["XDG_DATA_HOME"] = os.path.dirname(os.path.dirname(db))
    return env


def _run(args: list[str], cwd: str, env: dict, what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ConversationUnavailable(f"`opencode {what}` took more than {TIMEOUT_S} s") from None
    except OSError as e:
        raise ConversationUnavailable(f"cannot run `opencode {what}` ({e.strerror})") from None


def _export(binary: str, session: str, cwd: str, env: dict) -> dict | None:
    r = _run([binary, "export", "--pure", session], cwd, env, "export")
    try:
        data = json.loads(r.stdout)
    except ValueError:
        return None
    return data if r.returncode == 0 and isinstance(data, dict) and isinstance(data.get("info"), dict) \
        and isinstance(data.get("messages"), list) else None


def _messages_of(binary: str, db: str | None, session: str, cwd: str, env: dict) -> list | None:
    """The ids of a session's messages in order, None when there is no such session: a
    read-only look into OpenCode's database (catalog/foreign.py), else its own export (a
    start of OpenCode, about a second)."""
    from rewind.catalog.foreign import Unreadable, opencode_messages
    if db:
        try:
            return opencode_messages(db, session)
        except Unreadable:
            pass
    data = _export(binary, session, cwd, env)
    return None if data is None else [m.get("info", {}).get("id") for m in data["messages"] if isinstance(m, dict)]


def check(cp: Checkpoint) -> None:
    """What the picker asks before it offers the fork (a dry run costs a start of OpenCode
    when the database cannot be read):
    an OpenCode session, and its CLI to export and import it."""
    if not cp.session_id:
        raise ConversationUnavailable(f"checkpoint {cp.number} has no OpenCode session")
    _binary()


def _prompt_text(message: dict) -> str | None:
    info = message.get("info") if isinstance(message.get("info"), dict) else {}
    if info.get("role") != "user":
        return None
    parts = message.get("parts") if isinstance(message.get("parts"), list) else []
    text = "".join(p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"
                   and isinstance(p.get("text"), str) and not p.get("synthetic"))
    # `opencode run` quotes a message word that holds a space (hooks/opencode.py keeps it as typed)
    if len(text) > 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1] and " " in text:
        text = text[1:-1]
    return text


def _new_id(old: str, seed: str) -> str:
    """`prefix_` and the time-ordered part of `old` kept, its random tail (14 characters in
    OpenCode's ids) drawn from `seed`."""
    head, sep, tail = old.partition("_")
    keep = head + sep + tail[:12] if sep and len(tail) > 12 else old
    digest = hashlib.sha256(f"{seed}:{old}".encode()).digest()
    return keep + "".join(_B62[b % 62] for b in digest[:14])


def _replaced(value, ids: dict):
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_replaced(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _replaced(v, ids) for k, v in value.items()}
    return value


def fork(cp: Checkpoint, dry_run: bool = False, root: str | None = None) -> tuple[str, str]:
    """Import the forked session into OpenCode's database; returns (new session id, the
    database it went into). A dry run reads the session from the database (no start of
    OpenCode) when it can; the real run exports it, as what it imports must be OpenCode's."""
    if not cp.session_id:
        raise ConversationUnavailable(f"checkpoint {cp.number} has no OpenCode session")
    binary, env = _binary(), _env(cp.transcript_path)
    where = cp.transcript_path or "OpenCode's database"
    cwd = root if root and os.path.isdir(root) else os.getcwd()
    data = {"info": None, "messages": _from_database(cp) if dry_run else None}
    if data["messages"] is None:
        data = _export(binary, cp.session_id, cwd, env)
        if data is None:
            raise ConversationUnavailable(f"OpenCode cannot export session {cp.session_id}",
                                          hint="it may have been deleted; the files can still be rewound")
        folder = data["info"].get("directory")
        if isinstance(folder, str) and os.path.isdir(folder):
            cwd = folder             # import files the session under the project of its folder
    messages = [m for m in data["messages"] if isinstance(m, dict)]
    cut = next((i for i, m in enumerate(messages)
                if cp.message is not None and (t := _prompt_text(m)) is not None
                and unbroken(t).strip() == cp.message.strip()), None)
    if cut is None:
        raise ConversationUnavailable(f"checkpoint {cp.number}'s prompt is not in OpenCode session {cp.session_id}",
                                      hint="the files can still be rewound")
    kept = messages[:cut]
    if not any(_prompt_text(m) is not None for m in kept):
        raise ConversationUnavailable(f"checkpoint {cp.number} comes before the first prompt of its session: "
                                      "there is no earlier conversation to continue", hint="start a new session")
    olds = [cp.session_id] + [i for m in kept for i in
                              [_info(m).get("id")] + [p.get("id") for p in m.get("parts") or [] if isinstance(p, dict)]
                              if isinstance(i, str) and i]
    # what is kept, by its ids (sorted: the same set whether read from the database or the export)
    kept_ids = hashlib.sha256("\n".join(olds[:1] + sorted(olds[1:])).encode()).hexdigest()
    for attempt in range(100):
        seed = f"{cp.session_id}:{cp.number}:{kept_ids}:{attempt}"
        ids = {old: _new_id(old, seed) for old in olds}
        new_id = ids[cp.session_id]
        existing = _messages_of(binary, cp.transcript_path, new_id, cwd, env)
        if existing is None:
            break
        if existing == [ids.get(_info(m).get("id")) for m in kept]:
            return new_id, where                # imported by an earlier fork of this point
    else:
        raise ConversationUnavailable(f"cannot find a free id for the forked OpenCode session {cp.session_id}")
    if not dry_run:
        info = {k: v for k, v in _replaced(data["info"], ids).items() if k not in ("share", "revert")}
        if isinstance(info.get("title"), str):
            info["title"] += " (fork)"
        _import(binary, {"info": info, "messages": _replaced(kept, ids)}, new_id, cwd, env)
    return new_id, where


def _info(message: dict) -> dict:
    return message["info"] if isinstance(message.get("info"), dict) else {}


def _from_database(cp: Checkpoint) -> list | None:
    """The session's messages read from OpenCode's database (catalog/foreign.py), None when
    it cannot be read so or holds no such session (the export then says why)."""
    from rewind.catalog.foreign import Unreadable, opencode_session
    if not cp.transcript_path:
        return None
    try:
        return opencode_session(cp.transcript_path, cp.session_id)
    except Unreadable:
        return None


def _import(binary: str, fork_data: dict, new_id: str, cwd: str, env: dict) -> None:
    from rewind.constants import TMP_DIR
    from rewind.locations import data_dir
    tmp = os.path.join(data_dir(), TMP_DIR)
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="opencode-fork-", suffix=".json", dir=tmp)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(fork_data, f)
        r = _run([binary, "import", "--pure", name], cwd, env, "import")
    finally:
        os.unlink(name)
    if r.returncode != 0 or new_id.encode() not in r.stdout:
        said = (r.stderr or r.stdout).decode(errors="replace").strip().splitlines()
        raise ConversationUnavailable("`opencode import` did not take the forked session"
                                      + (f": {said[-1][:200]}" if said else ""))


def resume_command(root: str, new_id: str, where: str, shown_root: str) -> str:
    """`cd ROOT && opencode --session ID`, with the XDG_DATA_HOME the database lives under
    when it is not the default ~/.local/share."""
    env = ""
    if where and os.path.basename(where) == "opencode.db":
        data = os.path.dirname(os.path.dirname(where))
        if os.path.realpath(data) != os.path.realpath(os.path.expanduser("~/.local/share")):
            env = f"XDG_DATA_HOME={shlex.quote(data)} "
    return f"cd {shown_root} && {env}opencode --session {new_id}"
