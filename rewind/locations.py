"""The only code that knows where rewind keeps its files.

REWIND_HOME overrides the data directory (every test sets it). Otherwise platformdirs'
user data dir: checkpoints are user data, not a rebuildable cache.
"""

from __future__ import annotations

import os
import sys

APP = "rewind"
# the environment the directories below are read from (ignore.IgnoreRules.for_root keeps
# its rules while these stay as they were): keep it with the functions
ENV_READ = ("REWIND_HOME", "REWIND_CONFIG_HOME", "REWIND_TESTING", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
            "XDG_STATE_HOME", "HOME")


def data_dir() -> str:
    home = os.environ.get("REWIND_HOME")
    if home:
        return os.path.realpath(os.path.expanduser(home))
    if os.environ.get("REWIND_TESTING"):
        raise RuntimeError("REWIND_HOME must be set in tests")
    if sys.platform.startswith("linux"):
        # what platformdirs answers on Linux, without its ~20 ms import on the hook path
        base = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
        return os.path.realpath(os.path.join(base, APP))
    from platformdirs import user_data_dir

    return os.path.realpath(user_data_dir(APP, appauthor=False))


def config_dir() -> str:
    home = os.environ.get("REWIND_CONFIG_HOME")
    if home:
        return os.path.realpath(os.path.expanduser(home))
    if os.environ.get("REWIND_HOME"):
        return os.path.join(data_dir(), "config")
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
        return os.path.join(base, APP)
    from platformdirs import user_config_dir

    return user_config_dir(APP, appauthor=False)


def log_dir() -> str:
    if os.environ.get("REWIND_HOME"):
        return data_dir()
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.expanduser("~/.local/state")
        return os.path.join(base, APP, "log")
    from platformdirs import user_log_dir

    return user_log_dir(APP, appauthor=False)


def own_dirs_in(root: str) -> frozenset[str]:
    """rewind's own directories (data, log, config) that lie inside `root`, relative to it:
    never captured, never touched by a restore, wherever they sit (like `.git/`)."""
    root = root.rstrip("/")
    found = set()
    for where in (data_dir, log_dir, config_dir):
        try:
            path = os.path.realpath(where())
        except (OSError, RuntimeError):
            continue
        if path.startswith(root + "/"):
            found.add(path[len(root) + 1:])
    return frozenset(found)
