"""The watcher serves the hooks: the installed hook is a thin client (hooks/client.py, which
has the protocol) that hands its payload to the warm watcher of its project, which records
the event in-process with the same code a standalone hook runs (entry.run) and answers
once what must be durable is committed.

The socket is `run/p<project id>.sock` in the data dir, beside `run/p<id>.root`, a symlink
whose target is the project's root (how a client finds it: a listing and a readlink). The
run dir is 0700 and the socket 0600; each peer's uid is checked (SO_PEERCRED), and its
pid, from the kernel, is where the shell window's process chain starts (procs.hook_chain).

A call is refused (`fallback WHY`: the client does the work itself) when its environment
differs from the watcher's in anything that changes what a hook does (SAME_ENV: the
watcher never mutates its os.environ, a threaded process), when its event belongs to
another project, or while the watcher stops. Connections are read in their own threads
with bounded sizes and timeouts (a client that sends garbage or nothing costs a thread for
READ_TIMEOUT_S, never the server); calls are served one at a time, never on the main loop,
which keeps flushing events, and so answers the calls' cookies, meanwhile.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

from rewind import clock
from rewind.fsutil import ensure_private_dir
from rewind.envkey import PER_CALL_ENV, SAME_ENV
from rewind.hooks.client import MAGIC, MAX_PAYLOAD, OFFER_TIMEOUT_S, RUN_DIR, SUN_PATH_MAX

READ_TIMEOUT_S = 5.0                 # a request must arrive whole within this
CONFIRM_TIMEOUT_S = OFFER_TIMEOUT_S + 2.0   # the client's `!` (it sends it within OFFER_TIMEOUT_S or never)
MAX_CONNECTIONS = 32
# agent, cwd, pid, environment, payload
LIMITS = (64, 64 * 1024, 32, 1024 * 1024, MAX_PAYLOAD)


def env_differences(theirs: dict[str, str], ours: dict[str, str]) -> list[str]:
    """The settings, sorted, in which a hook's environment and the watcher's differ: SAME_ENV
    and every REWIND_* of either, less what is read per call. Any one makes the watcher
    refuse the call (`rewind status` lists them all)."""
    keys = set(SAME_ENV) | {k for k in (*theirs, *ours) if k.startswith("REWIND_")}
    return [k for k in sorted(keys - PER_CALL_ENV) if theirs.get(k) != ours.get(k)]


class BadRequest(Exception):
    pass


def socket_name(project_id: int, key: str | None = None) -> str:
    """The project's watcher's socket, or (`key`: hooks/client.py env_key) that of the
    server of another environment's hooks (envserver.py)."""
    return f"p{project_id}-{key}.sock" if key else f"p{project_id}.sock"


class HookServer:
    """The watcher's socket and the threads behind it. `stopping()` says the watcher is on
    its way out (no more calls are taken)."""

    def __init__(self, home: str, root: str, project_id: int, stopping, key: str | None = None):
        self.home, self.root, self.project_id, self.stopping = home, root, project_id, stopping
        self.key = key                          # another environment's server: its env_key
        self.run_dir = os.path.join(home, RUN_DIR)
        self.serve_lock = threading.Lock()      # one call at a time
        self.count_lock = threading.Lock()
        self.served = 0                         # calls served, not yet counted in the catalog
        self.last_ns: int | None = None         # when the last one was
        self.closing = False
        self.sock: socket.socket | None = None
        self.ino: int | None = None
        self.thread: threading.Thread | None = None
        self.calls: set[threading.Thread] = set()
        self._catalog = None                    # the calls' connection (under serve_lock), and
        self._catalog_file = None               # the catalog file it was opened on

    # -- life --------------------------------------------------------------------------
    def start(self) -> None:
        ensure_private_dir(self.run_dir)
        os.chmod(self.run_dir, 0o700)
        name = socket_name(self.project_id, self.key)
        tmp = f".p{self.project_id}.{os.getpid()}.tmp"
        dfd = os.open(self.run_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for leftover in (tmp, tmp + ".root"):
                try:
                    os.unlink(os.path.join(self.run_dir, leftover))
                except FileNotFoundError:
                    pass
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            path = os.path.join(self.run_dir, tmp)
            # sockaddr_un holds 108 bytes: a longer path is reached through the dir's descriptor
            sock.bind(path if len(os.fsencode(path)) <= SUN_PATH_MAX else f"/proc/self/fd/{dfd}/{tmp}")
            os.chmod(path, 0o600)
            sock.listen(MAX_CONNECTIONS)
            sock.settimeout(0.5)
            self.ino = os.lstat(path).st_ino
            os.rename(path, os.path.join(self.run_dir, name))     # replaces a dead watcher's
            os.symlink(self.root, path + ".root")
            os.rename(path + ".root", os.path.join(self.run_dir, name[:-5] + ".root"))
        finally:
            os.close(dfd)
        self.sock = sock
        self.thread = threading.Thread(target=self._accept, name="rewind-hooks", daemon=True)
        self.thread.start()

    def close(self, wait_s: float = 5.0) -> None:
        """No more calls; the one being served finishes (within `wait_s`); the socket goes."""
        self.closing = True
        name = socket_name(self.project_id, self.key)
        path = os.path.join(self.run_dir, name)
        try:
            if os.lstat(path).st_ino == self.ino:    # still ours, not a newer watcher's
                os.unlink(path)
                os.unlink(path[:-5] + ".root")
        except OSError:
            pass
        if self.thread is not None:
            self.thread.join(timeout=1.0)
        deadline = time.monotonic() + wait_s
        with self.count_lock:
            calls = list(self.calls)
        for t in calls:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.sock is not None:
            self.sock.close()
        # (a call still running past `wait_s` keeps it: the process is on its way out)
        if self.serve_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                self._drop_catalog()
            finally:
                self.serve_lock.release()

    def take_count(self) -> int:
        """Calls served since the last take (the heartbeat writes them)."""
        with self.count_lock:
            n, self.served = self.served, 0
        return n

    # -- connections -------------------------------------------------------------------
    def _accept(self) -> None:
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self.closing:
                    return
                time.sleep(0.05)
                continue
            with self.count_lock:
                full = len(self.calls) >= MAX_CONNECTIONS
            if full:
                conn.close()                   # the client falls back
                continue
            t = threading.Thread(target=self._connection, args=(conn,), daemon=True)
            with self.count_lock:
                self.calls.add(t)
            t.start()

    def _connection(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(READ_TIMEOUT_S)
            pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
            if uid != os.getuid():
                return
            agent, cwd, _, env, data = read_request(conn)
            why = self._refuse(env)
            if why:
                conn.sendall(b"fallback " + why.encode())
                return
            conn.sendall(b"?")
            conn.settimeout(CONFIRM_TIMEOUT_S)
            if conn.recv(1) != b"!":
                return                         # the client gave up: it records the event itself
            answer = self._record_call(agent, cwd, pid, env, data)
            conn.sendall(answer.encode())
            conn.shutdown(socket.SHUT_WR)      # the client has its whole answer: it returns now
            if answer == "ok":
                from rewind.hooks.entry import gc_if_due, merge_if_due
                gc_if_due()                    # what a standalone hook starts after its work
                merge_if_due()
        except (OSError, BadRequest, ValueError, struct.error):
            pass                               # not a client, or one that went away
        except Exception as e:
            from rewind.log import log
            log(f"watch {self.root}: a hook connection failed", e)
        finally:
            conn.close()
            lent = self._catalog
            if lent is not None and lent.numbers_later:
                with self.serve_lock:          # (one writer at a time: a highest number is never lowered)
                    if self._catalog is not None:
                        self._catalog.write_numbers_later()
            with self.count_lock:
                self.calls.discard(threading.current_thread())

    def _refuse(self, env: dict[str, str]) -> str | None:
        if self.closing or self.stopping():
            return "stopping"
        differ = env_differences(env, os.environ)
        return f"env {differ[0]}" if differ else None

    def _record_call(self, agent: str, cwd: str, pid: int, env: dict[str, str], data: bytes) -> str:
        from rewind.hooks import entry
        from rewind.hooks.recorder import OtherProject
        from rewind.hooks.tools import FirstScanRunning
        with self.serve_lock:
            if self.closing or self.stopping():
                return "fallback stopping"
            call = entry.Call(agent, data, env, cwd, pid)
            try:
                catalog = self._lent_catalog()
                note = entry.run(call, served_root=self.root, catalog=catalog)
            except OtherProject:
                return "fallback other-project"
            except FirstScanRunning:
                return "fallback first-scan"    # a shell command waits for it, in its own process
            except BaseException as e:         # as a standalone hook: logged, noted, the agent goes on
                self._drop_catalog()
                entry.failed(call, e)
                note = "failed"
            finally:
                if self._catalog is not None and not self._catalog.clean():
                    self._drop_catalog()       # never lent on with a transaction or a queue left open
            if note is not None:
                with self.count_lock:
                    self.served += 1
                    self.last_ns = clock.wall_ns()     # the clock the hooks' own counts use
            return "ok"

    # -- the calls' catalog connection: opened once (its open and close cost 1 ms a call),
    # used under serve_lock only, dropped at anything unusual -------------------------------
    def _lent_catalog(self):
        from rewind.catalog.db import Catalog
        from rewind.constants import CATALOG_NAME
        try:
            st = os.stat(os.path.join(self.home, CATALOG_NAME))
            now = (st.st_dev, st.st_ino)
        except OSError:
            now = None
        if self._catalog is not None and now != self._catalog_file:
            self._drop_catalog()               # replaced or removed since: a new connection
        if self._catalog is None:
            self._catalog = Catalog(self.home, shared=True)
            self._catalog.numbers_later = {}     # written after the answer
            if now is None:                    # (it made the file)
                st = os.stat(self._catalog.path)
                now = (st.st_dev, st.st_ino)
            self._catalog_file = now
        return self._catalog

    def _drop_catalog(self) -> None:
        cat, self._catalog, self._catalog_file = self._catalog, None, None
        if cat is not None:
            cat.write_numbers_later()
            try:
                if cat.db.in_transaction:
                    cat.db.rollback()
            except Exception:
                pass
            try:
                cat.close()
            except Exception:
                pass


def read_request(conn: socket.socket) -> tuple[str, str, int, dict[str, str], bytes]:
    """(agent, cwd, pid, environment, payload), each field within its LIMITS."""
    deadline = time.monotonic() + READ_TIMEOUT_S + len(LIMITS)
    if _exact(conn, 4, deadline) != MAGIC:
        raise BadRequest("not a rewind hook")
    fields = []
    for limit in LIMITS:
        n = int.from_bytes(_exact(conn, 4, deadline), "big")
        if n > limit:
            raise BadRequest("a field over its limit")
        fields.append(_exact(conn, n, deadline + n / 50e6))   # a large payload: 50 MB/s at least
    agent = fields[0].decode("ascii")
    env = {}
    for pair in fields[3].split(b"\0") if fields[3] else ():
        k, sep, v = pair.partition(b"=")
        if sep:
            env[os.fsdecode(k)] = os.fsdecode(v)
    return agent, os.fsdecode(fields[1]), int(fields[2]), env, fields[4]


def _exact(conn: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if time.monotonic() > deadline:
            raise BadRequest("too slow")
        k = conn.recv_into(view[got:])
        if not k:
            raise BadRequest("cut short")
        got += k
    return bytes(buf)
