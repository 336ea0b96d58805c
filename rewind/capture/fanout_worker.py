"""A fan-out worker process (`python -m rewind.capture.fanout_worker`), and the parent's handle on one.

The parent (fanout.py) sends pickled requests on the worker's stdin and reads one pickled
answer per request on its stdout: ("setup", root, root fd, store home, fs_now_ns, max_size,
damaged), then ("share", directory, names) any number of times (answer: a
walker.ShareFound), then ("flush",) (answer: the packs it wrote, made durable). Each answer
is ("ok", value) or ("error", why); after an error the worker discards its pack and stops.
"""

from __future__ import annotations

import os
import pickle
import sys

from rewind.capture.ignore import IgnoreRules
from rewind.capture.walker import OPEN_DIR


class Failed(Exception):
    """The workers could not do the scan: it runs on threads."""


class WorkerProcess:
    """One worker, started with the root's directory fd inherited."""

    def __init__(self, rfd: int):
        import subprocess
        import rewind
        env = dict(os.environ)
        top = os.path.dirname(os.path.dirname(os.path.abspath(rewind.__file__)))
        env["PYTHONPATH"] = top + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # -P and cwd "/": never a module of the project being scanned (its own rewind/, say)
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "rewind.capture.fanout_worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd="/", close_fds=True, pass_fds=(rfd,))

    def call(self, *msg):
        try:
            pickle.dump(msg, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
            kind, value = pickle.load(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError) as e:
            raise Failed(f"a worker stopped answering ({e.__class__.__name__})") from None
        if kind != "ok":
            raise Failed(f"a worker failed: {value}")
        return value

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except Exception:
            self.proc.kill()
            self.proc.wait()


# -- in the worker -------------------------------------------------------------------------

def _open_dir(rfd: int, rel: str) -> int:
    """The directory `rel` under the root, each step with O_NOFOLLOW: one swapped for a
    link since the plan listed it fails the scan (it runs again on threads)."""
    fd = os.dup(rfd)
    for part in rel.split("/") if rel else ():
        try:
            sub = os.open(part, OPEN_DIR, dir_fd=fd)
        except OSError as e:
            raise Failed(f"{rel}: {e.strerror or e} (changed since it was listed)") from None
        finally:
            os.close(fd)
        fd = sub
    return fd


def _serve(inp, out) -> None:
    from rewind.capture.walker import Walker
    from rewind.store.objects import Store
    store = None
    rfd = -1
    rules: dict[str, IgnoreRules] = {}

    def rules_for(rel: str) -> IgnoreRules:
        got = rules.get(rel)
        if got is None:
            if not rel:
                got = IgnoreRules.for_root(root)
            else:
                parent = rel.rpartition("/")[0]
                got = rules_for(parent).for_subdir(rel, os.path.join(root, rel))
            rules[rel] = got
        return got

    while True:
        try:
            msg = pickle.load(inp)
        except EOFError:
            if store is not None:
                store.discard()          # the parent gave up on the scan: nothing to keep
            break
        try:
            if msg[0] == "setup":
                root, rfd, home, fs_now_ns, max_size, damaged = msg[1:]   # rfd: the parent's, inherited
                store = Store(home)
                store.raw_packs = True
                reply = None
            elif msg[0] == "share":
                rel, names = msg[1:]
                dfd = _open_dir(rfd, rel)
                try:
                    walker = Walker(root, store, {}, fs_now_ns, max_size, damaged, for_worker=True)
                    reply = walker.walk_names(dfd, rel, rules_for(rel), names)
                finally:
                    os.close(dfd)
            elif msg[0] == "flush":
                store.flush()
                reply = store.written
            else:
                raise ValueError(f"unknown request {msg[0]!r}")
            answer = ("ok", reply)
        except BaseException as e:
            if store is not None:
                store.discard()
            answer = ("error", f"{e.__class__.__name__}: {e}")
        try:
            pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except OSError:                  # the parent is gone
            answer = ("error", None)
            if store is not None:
                store.discard()
        if answer[0] != "ok":
            break


if __name__ == "__main__":
    # the answers go out on a copy of stdout; whatever else prints goes to /dev/null
    answers = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    _serve(sys.stdin.buffer, answers)
