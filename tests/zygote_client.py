"""run_rewind's side of tests/zygote.py: start the warm interpreter once per process, and run
one command in a child of it as subprocess.run(..., capture_output=True, text=True) would."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_STARTUP = ("PYTHON", "LC_", "LANG")     # what the interpreter reads as it starts
_server: dict = {}
_lock = threading.Lock()


def _startup_env(env) -> dict:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP)}


def may_serve(env: dict) -> bool:
    """Whether a child of the warm interpreter starts as the real script would with `env`."""
    started = _server.get("startup")
    return _startup_env(env) == (started if started is not None else _startup_env(os.environ))


def _start() -> str:
    with _lock:
        proc = _server.get("proc")
        if proc is not None and proc.poll() is None:
            return _server["path"]
        where = tempfile.mkdtemp(prefix="rewind-zygote-")
        path = os.path.join(where, "sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith("REWIND_")}
        proc = subprocess.Popen([sys.executable, os.path.join(_HERE, "zygote.py"), path], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the warm interpreter did not start (tests/zygote.py)")
        _server.update(proc=proc, path=path, startup=_startup_env(env))
        atexit.register(_stop, proc)
        return path


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _decode(data: bytes) -> str:
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")    # subprocess's text mode


def run_warm(argv: list[str], args: list[str], cwd=None, input=None, env=None,
             timeout=None) -> subprocess.CompletedProcess:
    """`argv` as the real script would be run, `args` its arguments after the script."""
    path = _start()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    request = json.dumps({"argv0": argv[0], "args": list(args),
                          "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                          "env": dict(env if env is not None else os.environ)}).encode()
    try:
        socket.send_fds(conn, [struct.pack("=I", len(request)) + request], [in_r, out_w, err_w])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    if input:
        threading.Thread(target=_feed, args=(in_w, input.encode()), daemon=True).start()
    else:
        os.close(in_w)
    conn.settimeout(timeout)
    pid = None
    try:
        pid = struct.unpack("=i", _exact(conn, 4))[0]
        out, err = _drain(out_r, err_r, timeout)
        try:
            code = struct.unpack("=i", _exact(conn, 4))[0]
        except EOFError:
            code = -signal.SIGKILL          # ended without a word: killed
    except (socket.timeout, TimeoutError):
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        conn.close()
    return subprocess.CompletedProcess(argv, code, _decode(out), _decode(err))


def _feed(fd: int, data: bytes) -> None:
    try:
        with open(fd, "wb") as f:
            f.write(data)
    except (BrokenPipeError, OSError):
        pass


def _exact(conn, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _drain(out_r: int, err_r: int, timeout) -> tuple[bytes, bytes]:
    got = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in got:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            ready = sel.select(timeout)
            if not ready:
                raise TimeoutError
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    got[key.fd].append(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    return b"".join(got[out_r]), b"".join(got[err_r])
