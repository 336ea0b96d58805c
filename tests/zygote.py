"""A warm interpreter for the suite's `rewind` commands (tests/helpers.py run_rewind).

The suite runs the console script about 900 times outside the end-to-end tests; each start
imports typer, rich and rewind's CLI again (~0.1 CPU-s, a sixth of the suite's CPU on two
cores). This server imports them once per xdist worker and forks a child per command: the
child takes the caller's stdin/stdout/stderr (passed over a Unix socket), working directory,
environment and arguments, runs `rewind.cli.main()` exactly as the console script does,
and reports its exit status. Every command is still its own process, with its own pid, file
descriptors and exit; what it skips is the interpreter's start-up and the imports.

What a fresh start would read differently is never served: an environment that changes
how the interpreter starts (PYTHON*, the locale) runs the real script (helpers.run_rewind),
and so does every end-to-end test (tests/scenarios/, conftest.py). A module that reads the
environment when imported is not imported here (typer.rich_utils).

Protocol, one connection per command:
  client: 4-byte length, JSON {argv0, args, cwd, env}, with fds stdin, stdout, stderr attached
  child:  4-byte pid, then (when main returns) 4-byte signed exit status
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

FRESH_ONLY = ("typer.rich_utils",)     # read the environment at import: imported fresh in a child


def _preload() -> None:
    import importlib
    import pkgutil

    import rewind
    import rewind.cli
    import rewind.cli.app  # noqa: F401
    for info in pkgutil.walk_packages(rewind.__path__, "rewind."):
        if info.name in ("rewind.__main__", "rewind.hook", "rewind.cli.picker"):
            continue                   # entry points run on import; the picker loads textual
        importlib.import_module(info.name)
    import typer
    for name in FRESH_ONLY:
        sys.modules.pop(name, None)
        parent, _, leaf = name.rpartition(".")
        if hasattr(sys.modules.get(parent), leaf):
            delattr(sys.modules[parent], leaf)
    assert typer


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["argv0"], *request["args"]]
        conn.sendall(struct.pack("=i", os.getpid()))
        try:
            from rewind.cli import main
            main()
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        import threading
        threading._shutdown()          # as the interpreter does at exit: wait for non-daemon threads
        import atexit
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        conn.sendall(struct.pack("=i", code))
    finally:
        os._exit(code & 0xFF)


def serve(path: str) -> None:
    _preload()
    parent = os.getppid()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(128)
    srv.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)    # children reap themselves; they report their status
    print("ready", flush=True)
    while os.getppid() == parent:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        try:
            conn.settimeout(10)
            head, fds, _, _ = socket.recv_fds(conn, 4, 3)
            head += _recv_exact(conn, 4 - len(head))
            (size,) = struct.unpack("=I", head)
            request = json.loads(_recv_exact(conn, size))
            conn.settimeout(None)
            if len(fds) != 3:
                raise ValueError("want stdin, stdout and stderr")
        except Exception:
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            srv.close()
            _child(conn, request, fds)
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    serve(sys.argv[1])
