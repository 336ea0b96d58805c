"""The installed hook as a thin client: it hands the payload to the project's warm watcher
over a private Unix socket (watch/serve.py) and waits for its answer; when no watcher
answers, the hook does the work itself exactly as it always did (entry.py).

Every hook call pays for this module's imports, served or not, so it imports `os` and `sys`
only (the socket module only when there is a socket to talk to, and then `_socket`, not
`socket`, which pulls in `enum`): no json, no sqlite3, no hashlib. The payload goes over
unparsed; the watcher parses it with the same code a standalone hook does.

The protocol, all on one connection:
  client:  RWH2, then length-prefixed fields: agent, cwd, pid, environment, payload
  watcher: `?`  (an offer, once it has read the whole request)
  client:  `!`  (only within OFFER_TIMEOUT_S of sending; else it closes and falls back)
  watcher: `ok` (the event is recorded, what must be durable is committed)
           or `fallback WHY` (nothing was done: the client does the work itself)
The watcher acts only after reading `!`, and the client falls back on anything but `ok`:
an event is recorded exactly once, by one of them, whatever state the watcher is in (a
SIGSTOPped watcher costs a hook OFFER_TIMEOUT_S, then the hook records the event itself).
The one case the client cannot tell apart is a watcher that dies after `!` and before
`ok`: it falls back, so the event is recorded, perhaps twice. The recorder's operations are
not all idempotent (a prompt twice makes two checkpoints of the same tree, a PreToolUse
twice opens two windows of which the Post closes one; the other is closed at the next
prompt), but a duplicate costs a redundant row, where a lost prompt would cost its undo
point: the lesser harm.
"""

import os
import sys

MAGIC = b"RWH2"
OFFER_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 600.0        # after `!`: the watcher's work (a scan may wait for the project lock)
MAX_PAYLOAD = 64 * 1024 * 1024  # entry.MAX_PAYLOAD: a larger payload goes to entry, which logs it
RUN_DIR = "run"                 # in the data dir, 0700: a socket per watched project, and its root
SUN_PATH_MAX = 107              # sockaddr_un's path, less its NUL
# What the adapters and rewind read from the environment, forwarded to the watcher: it
# refuses a call whose behaviour-changing entries differ from its own (serve.SAME_ENV).
FORWARDED = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME",
             "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")


def main(args: list) -> int:
    """`rewind hook AGENT`: served by the watcher if one answers, else done here. Always 0."""
    agent = args[0] if args else ""
    data = why = None
    try:
        from rewind.hooks import ADAPTERS
        if agent in ADAPTERS and sys.stdin is not None and not os.isatty(0):
            data = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
            if os.environ.get("REWIND_WATCH") == "0":
                why = "watcher off"
            elif len(data) > MAX_PAYLOAD:
                why = "payload too large"
            else:
                why = _served(agent, data)
                if why is None:
                    return 0
                if why in NO_WATCHER and _session_start(agent, data) and _detached():
                    return 0            # the child registers the session and starts the watcher
    except KeyboardInterrupt:
        return 0
    except BaseException as e:
        why = f"client: {type(e).__name__}"
    # entry reads stdin itself when nothing was read (and says what is wrong: an unknown
    # agent, a terminal)
    return _standalone(args, data, why)


# A session's start with no watcher to serve it does its work after the hook returned, in a
# detached child: it registers the session and starts the watcher (a full standalone hook:
# the imports of the recorder, SQLite, the catalog), and nothing of it has to be durable
# before the agent goes on. The next hook registers the session itself if it comes first
# (the SessionStart then adds its source and start: catalog.register_session), and waits
# for the starting watcher as it did.
NO_WATCHER = ("no watcher", "no answer")
SESSION_START_AGENTS = ("claude", "gemini", "codex")     # `"hook_event_name": "SessionStart"`
SESSION_START_MAX = 16 * 1024
PARENT_EXIT_WAIT_S = 0.2


def _session_start(agent: str, data: bytes) -> bool:
    """Whether the payload is a SessionStart, without json (and its `re`, `enum`): the key
    once, unescaped, followed by the name. Anything unusual says no: the hook then does
    the work before returning, as any other."""
    if agent not in SESSION_START_AGENTS or len(data) > SESSION_START_MAX:
        return False
    key = b'"hook_event_name"'
    i = data.find(key)
    if i < 0 or data.find(key, i + 1) >= 0:
        return False
    rest = data[i + len(key):].lstrip(b" \t\r\n")
    return rest[:1] == b":" and rest[1:].lstrip(b" \t\r\n").startswith(b'"SessionStart"')


def _detached() -> bool:
    """Fork: True in the parent (the hook returns now), False in a child that holds none of
    the agent's pipes, in a session of its own (a Ctrl-C to the agent is not its)."""
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return False            # the work is done here, before returning
    if pid:
        return True
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if null > 2:
            os.close(null)
    except OSError:
        pass
    # the hook's own exit first: on a busy machine (an agent starting up on the other core)
    # the child's imports would otherwise take the CPU the returning hook needs
    import time
    deadline = time.monotonic() + PARENT_EXIT_WAIT_S
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.001)
    return False


def _standalone(args: list, data, why) -> int:
    from rewind.hooks import entry
    if data is None:
        return entry.run_hook(args)
    return entry.run_standalone(entry.Call(args[0], data, os.environ, None, os.getpid(), why))


def find(home: str, where: str):
    """(run dir, socket name) of the watcher whose project holds `where`, or None: a
    listing of the run dir and a readlink per watched project."""
    run = os.path.join(home, RUN_DIR)
    try:
        names = os.listdir(run)
    except OSError:
        return None
    best, best_len = None, -1
    for name in names:
        if not name.endswith(".root"):
            continue
        try:
            root = os.readlink(os.path.join(run, name))
        except OSError:
            continue
        if (where == root or where.startswith(root.rstrip("/") + "/")) and len(root) > best_len:
            best, best_len = name[:-5] + ".sock", len(root)
    return (run, best) if best else None


def _field(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


def request(agent: str, cwd: str, pid: int, env: dict, data: bytes) -> bytes:
    pairs = b"\0".join(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())
    return b"".join((MAGIC, _field(agent.encode()), _field(os.fsencode(cwd)), _field(str(pid).encode()),
                     _field(pairs), _field(data)))


def _served(agent: str, data: bytes):
    """None when the watcher recorded the event, else why not (the client then does)."""
    from rewind import locations
    try:
        home = locations.data_dir()
    except RuntimeError:
        return "no data dir"
    env = os.environ
    cwd = os.getcwd()
    where = env.get("CLAUDE_PROJECT_DIR") or env.get("GEMINI_PROJECT_DIR") or cwd
    found = find(home, os.path.realpath(where)) if os.path.isabs(where) else None
    if found is None:
        return "no watcher"
    run, name = found
    uid = os.getuid()
    path = os.path.join(run, name)
    try:
        st = os.lstat(path)
        dst = os.lstat(run)
    except OSError:
        return "no watcher"
    if st.st_uid != uid or dst.st_uid != uid or (st.st_mode & 0o170000) != 0o140000 or dst.st_mode & 0o077:
        return "socket not ours"
    sent = {k: env[k] for k in env if k.startswith("REWIND_") or k in FORWARDED}
    req = request(agent, cwd, os.getpid(), sent, data)
    import _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    dfd = None
    try:
        s.settimeout(OFFER_TIMEOUT_S)
        try:
            if len(os.fsencode(path)) <= SUN_PATH_MAX:
                s.connect(path)
            else:   # too long for sockaddr_un: through the run dir's descriptor
                dfd = os.open(run, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                s.connect(f"/proc/self/fd/{dfd}/{name}")
        except OSError:
            return "no answer"        # a socket left behind by a watcher that is gone
        import time
        deadline = time.monotonic()
        s.sendall(req)
        deadline += OFFER_TIMEOUT_S
        offer = _recv(s, deadline)
        if offer != b"?":
            return _answer(offer) or "no answer"
        s.sendall(b"!")
        # from here on the watcher may act: only its `ok` says it did
        s.settimeout(ANSWER_TIMEOUT_S)
        answer = b""
        while len(answer) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        return None if answer == b"ok" else _answer(answer) or "no answer after the offer"
    except OSError:
        return "no answer"
    finally:
        s.close()
        if dfd is not None:
            os.close(dfd)


def _recv(s, deadline: float) -> bytes:
    """The watcher's offer (`?`) or refusal (`fallback WHY`, then it closes), by `deadline`."""
    import time
    got = b""
    while got != b"?" and len(got) < 512:
        left = deadline - time.monotonic()
        if left <= 0:
            return b""
        s.settimeout(left)
        try:
            chunk = s.recv(512)
        except OSError:
            return b""
        if not chunk:
            break
        got += chunk
    return got


def _answer(raw: bytes):
    if raw.startswith(b"fallback"):
        return raw[9:].decode("utf-8", "replace")[:200] or "fallback"
    return None
