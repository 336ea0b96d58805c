"""rewind's own log file (errors of hooks, internal errors of commands)."""

from __future__ import annotations

import os
import sys

from rewind import __version__, clock, locations
from rewind.constants import LOG_NAME

_MAX = 5 * 1024 * 1024


def log_path() -> str:
    return os.path.join(locations.log_dir(), LOG_NAME)


def log(message: str, exc: BaseException | None = None) -> str | None:
    """Append a line (and a traceback) to the log. Never raises; returns the log's path."""
    try:
        path = log_path()
        from rewind.fsutil import ensure_private_dir
        ensure_private_dir(os.path.dirname(path))   # each missing parent 0700, whatever the umask
        try:
            if os.lstat(path).st_size > _MAX:
                os.replace(path, path + ".1")
        except OSError:
            pass
        stamp = clock.local_stamp()
        text = f"{stamp} [{os.getpid()}] rewind {__version__} py{sys.version_info[0]}.{sys.version_info[1]}: {message}\n"
        if exc is not None:
            import traceback        # only when there is one to write: 3 ms a hook saves
            text += "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        # never through a link planted at the log's name (the log may hold paths and errors)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return path
    except Exception:
        return None
