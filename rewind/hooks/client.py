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

One module past the house's ~350 lines on purpose: every hook call loads it before anything
else, served or not, and each module more is one more import on every call (0.17 ms under
`python -S`, against a served hook's whole cost of a few ms).
"""

import posix      # what `os` is built on, loaded at start-up: `import os` costs a -S hook 2.5 ms
import sys
import time       # built in

MAGIC = b"RWH2"
OFFER_TIMEOUT_S = 2.0
# After `!`: the watcher's work (a scan may wait for the project lock), under the agents'
# hook timeouts (120 s): a hook the agent kills records nothing. A watcher stopped in the
# call is killed after STALL_S (rewind/stalled.py), and the hook does the work itself.
ANSWER_TIMEOUT_S = 100.0
STALL_S = 2.0                   # constants.STALL_S: this module imports nothing of rewind's (a test keeps them equal)
STILL_S = 0.5                   # constants.STILL_S
MAX_PAYLOAD = 64 * 1024 * 1024  # entry.MAX_PAYLOAD: a larger payload goes to entry, which logs it
RUN_DIR = "run"                 # in the data dir, 0700: a socket per watched project, and its root
SUN_PATH_MAX = 107              # sockaddr_un's path, less its NUL
# What the adapters and rewind read from the environment, forwarded to the watcher: it
# refuses a call whose behaviour-changing entries differ from its own (envkey.SAME_ENV).
FORWARDED = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "QWEN_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
             "GEMINI_CLI_HOME", "QWEN_HOME", "COPILOT_HOME",
             "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
_FORWARDED_B = frozenset(k.encode() for k in FORWARDED)
# hooks/__init__.ADAPTERS' names (a test keeps them equal): the package is imported only
# when the hook does its work itself
AGENTS = ("claude", "gemini", "codex", "qwen", "copilot", "opencode", "cline", "cursor", "generic")


_finished = False       # the call is over and left nothing to flush or close (see script())


def script(args: list) -> int:
    """hook.py's entry: main(); then a call the watcher served (or a SessionStart's parent,
    whose child does the work) ends the process at once. Such a call printed nothing,
    opened nothing it has not closed and registered nothing to run at exit, so the
    interpreter's finalization (its module teardown: 1.4-1.8 ms of a 10-11 ms `python -S`
    start, half the client's own cost) is skipped. A call done here exits normally: its
    log and its SQLite connection are closed as always."""
    code = main(args)
    if _finished:
        for f in (sys.stdout, sys.stderr):
            try:
                if f is not None:
                    f.flush()
            except BaseException:
                pass
        posix._exit(code)
    return code


def main(args: list) -> int:
    """`rewind hook AGENT`: served by the watcher if one answers, else done here. Always 0."""
    global _finished
    agent = args[0] if args else ""
    data = why = None
    try:
        if agent in AGENTS and sys.stdin is not None and not posix.isatty(0):
            agent = called(args)
            data = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
            if posix.environ.get(b"REWIND_WATCH") == b"0":
                why = "watcher off"
            elif len(data) > MAX_PAYLOAD:
                why = "payload too large"
            else:
                if _session_start(agent, data) and _detached():
                    _finished = True
                    return 0            # the child has it served, or registers the session and starts the watcher
                why = _served(agent, data)
                if why is None:
                    _finished = True
                    return 0
    except KeyboardInterrupt:
        return 0
    except BaseException as e:
        why = f"client: {type(e).__name__}"
    # entry reads stdin itself when nothing was read (and says what is wrong: an unknown
    # agent, a terminal)
    return _standalone(args, data, why)


# A session's start does its work after the hook returned, in a detached child: the
# watcher serves it there, or, with no watcher to, the child registers the session and
# starts the watcher (a full standalone hook: the imports of the recorder, SQLite, the
# catalog). Nothing of it has to be durable before the agent goes on. The next hook
# registers the session itself if it comes first (the SessionStart then adds its source and
# start: catalog.register_session), and waits for the starting watcher as it did. Served in
# the hook's own time, its four hand-offs between the client and the watcher's threads came
# while the agent starts up on both cores: 28 ms against 16.5 ms for a bare start in its
# place (Claude Code, the 100,000-file tree, resume mode), where the fork costs ~1 ms.
SESSION_START_AGENTS = ("claude", "gemini", "codex", "qwen")     # `"hook_event_name": "SessionStart"`
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
    parent = posix.getpid()
    try:
        pid = posix.fork()
    except OSError:
        return False            # the work is done here, before returning
    if pid:
        return True
    try:
        posix.setsid()
        null = posix.open("/dev/null", posix.O_RDWR)
        for fd in (0, 1, 2):
            posix.dup2(null, fd)
        if null > 2:
            posix.close(null)
    except OSError:
        pass
    # the hook's own exit first: on a busy machine (an agent starting up on the other core)
    # the child's imports would otherwise take the CPU the returning hook needs
    deadline = time.monotonic() + PARENT_EXIT_WAIT_S
    while posix.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.001)
    return False


def called(args: list) -> str:
    """The agent, with the event its hook command names when it names one (`hook.py copilot
    preToolUse`: Copilot CLI's and Cline's payloads do not say which event they are), as
    the one name the watcher and entry.run get: `copilot:preToolUse`."""
    if len(args) > 1 and 0 < len(args[1]) <= 40 and args[1].isalnum() and args[1].isascii():
        return args[0] + ":" + args[1]
    return args[0]


def _standalone(args: list, data, why) -> int:
    from rewind.hooks import entry
    if data is None:
        return entry.run_hook(args)
    import os
    return entry.run_standalone(entry.Call(called(args), data, os.environ, None, os.getpid(), why))


# -- finding the watcher: bytes throughout (paths and environment as the kernel has them),
# and `posix`, not `os`

def _fs(s: str) -> bytes:
    return s.encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def _home_of(env) -> bytes | None:
    """The HOME `~` stands for, as os.path.expanduser finds it from the environment; None
    when only the password database knows (the caller asks rewind.locations)."""
    home = env.get(b"HOME")
    return home.rstrip(b"/") or b"/" if home else None


def _expand(path: bytes, env) -> bytes | None:
    if not path.startswith(b"~"):
        return path
    if path != b"~" and not path.startswith(b"~/"):
        return None                          # ~user
    home = _home_of(env)
    return None if home is None else (home + path[1:] if home != b"/" else path[1:] or b"/")


def data_dir_b(env) -> bytes | None:
    """rewind.locations.data_dir() without its imports (`os`), before realpath (the run dir
    is listed through whatever links lead to it); None when only that function can say
    (an unusual environment), or raises RuntimeError as it does. A test keeps the two equal."""
    home = env.get(b"REWIND_HOME")
    if home:
        return _expand(home, env)
    if env.get(b"REWIND_TESTING"):
        raise RuntimeError("REWIND_HOME must be set in tests")
    if not sys.platform.startswith("linux"):
        return None
    base = env.get(b"XDG_DATA_HOME", b"").strip()
    if not base:
        h = _home_of(env)
        if h is None:
            return None
        base = (h if h != b"/" else b"") + b"/.local/share"
    elif not base.startswith(b"/"):
        return None                          # a relative XDG_DATA_HOME: realpath decides
    return base.rstrip(b"/") + b"/rewind"


def find(home: bytes, where: bytes, env=None):
    """(run dir, socket name) of the watcher whose project holds `where`; None when none
    does, False when no watcher runs at all: a listing of the run dir and a readlink per
    watched project. A socket of another environment's server (`p<id>-<key>`) is one only
    for a hook whose `env` has that key (looked up only when there is one), and for it
    the project's own watcher's (`p<id>`) comes second."""
    run = home + b"/" + RUN_DIR.encode()
    try:
        names = posix.listdir(run)
    except OSError:
        return False
    best, best_len, roots, key = None, -1, False, None
    for name in names:
        if not name.endswith(b".root"):
            continue
        roots = True
        stem, _, theirs = name[:-5].partition(b"-")
        if theirs:
            if key is None:          # (only where such a server runs: a module more to import)
                from rewind.envkey import env_key
                key = env_key(env if env is not None else posix.environ)
            if theirs != key:
                continue
        try:
            root = posix.readlink(run + b"/" + name)
        except OSError:
            continue
        if (where == root or where.startswith(root.rstrip(b"/") + b"/")) and \
                (len(root) > best_len or (len(root) == best_len and theirs)):
            best, best_len = name[:-5] + b".sock", len(root)
    return (run, best) if best else None if roots else False


def _field(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


def request(agent: str, cwd, pid: int, env: dict, data: bytes) -> bytes:
    """The request's bytes; `cwd` and `env`'s keys and values str or bytes."""
    enc = (lambda x: x if isinstance(x, bytes) else _fs(x))
    pairs = b"\0".join(enc(k) + b"=" + enc(v) for k, v in env.items())
    return b"".join((MAGIC, _field(agent.encode()), _field(enc(cwd)), _field(str(pid).encode()),
                     _field(pairs), _field(data)))


def _served(agent: str, data: bytes):
    """None when the watcher recorded the event, else why not (the client then does)."""
    env = posix.environ
    try:
        home = data_dir_b(env)
        if home is None:
            from rewind import locations
            home = _fs(locations.data_dir())
    except RuntimeError:
        return "no data dir"
    cwd = posix.getcwdb()
    where = env.get(b"CLAUDE_PROJECT_DIR") or env.get(b"GEMINI_PROJECT_DIR") or cwd
    if not where.startswith(b"/"):
        return "no watcher"
    # the path as given first: the project's root as a watcher has it is a real path, and so
    # is the usual project dir (the watcher checks the event's project all the same, and
    # answers `fallback other-project` for another's)
    found = find(home, where)
    if found is None:                        # (False: no watcher runs at all)
        import os                            # a link on the way, `..`, a trailing slash
        real = os.path.realpath(where)
        found = find(home, real) if real != where else None
    if not found:
        return "no watcher"
    run, name = found
    uid = posix.getuid()
    path = run + b"/" + name
    try:
        st = posix.lstat(path)
        dst = posix.lstat(run)
    except OSError:
        return "no watcher"
    if st.st_uid != uid or dst.st_uid != uid or (st.st_mode & 0o170000) != 0o140000 or dst.st_mode & 0o077:
        return "socket not ours"
    sent = {k: v for k, v in env.items() if k.startswith(b"REWIND_") or k in _FORWARDED_B}
    req = request(agent, cwd, posix.getpid(), sent, data)
    import _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    dfd = None
    try:
        s.settimeout(OFFER_TIMEOUT_S)
        try:
            if len(path) <= SUN_PATH_MAX:
                s.connect(path)
            else:   # too long for sockaddr_un: through the run dir's descriptor
                dfd = posix.open(run, posix.O_PATH | posix.O_DIRECTORY | posix.O_CLOEXEC)
                s.connect(b"/proc/self/fd/%d/%s" % (dfd, name))
        except OSError:
            return "no answer"        # a socket left behind by a watcher that is gone
        deadline = time.monotonic()
        s.sendall(req)
        deadline += OFFER_TIMEOUT_S
        offer = _recv(s, deadline)
        if offer != b"?":
            return _answer(offer) or "no answer"
        s.sendall(b"!")
        # from here on the watcher may act: only its `ok` says it did
        answer = _await(s, home, name)
        if answer is None:
            return "the watcher was stopped in the call"
        return None if answer == b"ok" else _answer(answer) or "no answer after the offer"
    except OSError:
        return "no answer"
    finally:
        s.close()
        if dfd is not None:
            posix.close(dfd)


def _await(s, home: bytes, name: bytes):
    """The watcher's answer after `!` (b"" when it hung up or ANSWER_TIMEOUT_S passed), or
    None: it was stopped (SIGSTOP, a debugger) for STALL_S in the call, and is killed
    (rewind/stalled.py verifies it is this project's watcher, stopped): the hook goes on
    alone, and the project lock the watcher held is free. A watcher that is merely slow is
    waited for (it answers, or ANSWER_TIMEOUT_S ends the wait)."""
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    answer = b""
    s.settimeout(STALL_S)
    while len(answer) < 4096:
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            if time.monotonic() >= deadline:
                return b""
            if _stopped_and_killed(s, home, name):
                return None
            s.settimeout(min(STILL_S, max(0.01, deadline - time.monotonic())))
            continue
        if not chunk:
            break
        answer += chunk
    return answer


def _stopped_and_killed(s, home: bytes, name: bytes) -> bool:
    """Whether the peer (the watcher, from SO_PEERCRED) was stopped and is killed now."""
    import _socket
    try:
        cred = s.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        pid = int.from_bytes(cred[:4], sys.byteorder)
        project_id = int(name[1:-5].partition(b"-")[0])  # p<id>.sock, p<id>-<key>.sock
    except (OSError, ValueError):
        return False
    from rewind import stalled
    if not stalled.stopped(pid):
        return False                                     # (the cheap look first: a slow one is left be)
    import os
    return stalled.take_over(os.fsdecode(home), project_id, [pid], "it served a hook")


def _recv(s, deadline: float) -> bytes:
    """The watcher's offer (`?`) or refusal (`fallback WHY`, then it closes), by `deadline`."""
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
