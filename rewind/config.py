"""Settings: the user's `config.toml` (in the config dir), then `.rewind.toml` at the
project root on top. Both are optional; tomllib is imported only when one exists, so a
hook pays two stats when there is no config at all.

Known keys:
  ring_size       newest checkpoints kept per project (default 100, at least 1)
  retention_days  checkpoints older than this are dropped (default 30, may be fractional)
  gc_interval_hours  how often gc runs by itself (default 24, at least 1; 0 turns it off)
  watch           start the file watcher with an agent session (default true; REWIND_WATCH=0|1
                  overrides it)
  watch_idle_minutes  a background watcher exits after this long without a hook (default 30)
  allow_roots     directories that may be projects although rewind refuses them by default
                  (/, the home directory itself, system directories); the user's file only
"""

from __future__ import annotations

import os

from rewind import locations
from rewind.constants import PROJECT_FILE, RETENTION_DAYS, RING_SIZE
from rewind.errors import RewindError
from rewind.structs import dataclass

USER_FILE = "config.toml"


class ConfigError(RewindError):
    pass


@dataclass(frozen=True)
class Settings:
    ring_size: int = RING_SIZE
    retention_days: float = RETENTION_DAYS
    gc_interval_hours: float = 24.0
    watch: bool = True
    watch_idle_minutes: float = 30.0
    sources: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()   # "file: key" for keys this rewind does not know

    @property
    def retention_ns(self) -> int:
        return int(self.retention_days * 86400 * 1e9)


def _positive_int(path: str, key: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{path}: {key} must be a whole number of at least 1 (got {value!r})")
    return value


def _positive_number(path: str, key: str, value, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value < 0 or (value == 0 and not allow_zero) or value == float("inf"):
        least = "0 or more" if allow_zero else "more than 0"
        raise ConfigError(f"{path}: {key} must be a number {least} (got {value!r})")
    return float(value)


def _interval(path: str, key: str, value) -> float:
    hours = _positive_number(path, key, value, allow_zero=True)
    if 0 < hours < 1:
        raise ConfigError(f"{path}: {key} must be 0 (off) or at least 1 (got {value!r})")
    return hours


def _bool(path: str, key: str, value) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: {key} must be true or false (got {value!r})")
    return value


_CHECKS = {
    "watch": lambda p, k, v: _bool(p, k, v),
    "watch_idle_minutes": lambda p, k, v: _positive_number(p, k, v),
    "ring_size": lambda p, k, v: _positive_int(p, k, v),
    "retention_days": lambda p, k, v: _positive_number(p, k, v),
    "gc_interval_hours": lambda p, k, v: _interval(p, k, v),
}


def user_config_path() -> str:
    return os.path.join(locations.config_dir(), USER_FILE)


MAX_CONFIG = 64 * 1024


def _read(path: str) -> dict | None:
    from rewind.fsutil import NotRegular, TooLarge, read_small
    try:
        raw = read_small(path, MAX_CONFIG)
    except FileNotFoundError:
        return None
    except NotRegular:
        raise ConfigError(f"{path}: not a regular file; not read") from None
    except TooLarge:
        raise ConfigError(f"{path}: over {MAX_CONFIG // 1024} KiB; not read") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror})") from None
    import tomllib
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None


def allowed_roots() -> list[str]:
    """`allow_roots` from the user's own config.toml (never from a project's file, which an
    agent can write); unreadable or malformed: none."""
    try:
        data = _read(user_config_path()) or {}
    except ConfigError:
        return []
    roots = data.get("allow_roots", [])
    if not isinstance(roots, list):
        return []
    return [os.path.realpath(os.path.expanduser(r)) for r in roots if isinstance(r, str) and r]


def load(project_root: str | None) -> Settings:
    """The settings for a project (or the user's alone). Raises ConfigError on a bad file."""
    values: dict = {}
    sources, unknown = [], []
    paths = [user_config_path()]
    if project_root:
        paths.append(os.path.join(project_root, PROJECT_FILE))
    for path in paths:
        data = _read(path)
        if data is None:
            continue
        sources.append(path)
        for key, value in data.items():
            if key == "allow_roots":
                if path != paths[0]:
                    unknown.append(f"{path}: {key} (read from the user's config.toml only)")
                continue
            check = _CHECKS.get(key)
            if check is None:
                unknown.append(f"{path}: {key}")
                continue
            values[key] = check(path, key, value)
    env = os.environ.get("REWIND_WATCH")
    if env in ("0", "1"):
        values["watch"] = env == "1"
    return Settings(**values, sources=tuple(sources), unknown=tuple(unknown))


LOAD = object()   # "read the settings yourself", where a caller may pass the ones it has


def load_quietly(project_root: str | None) -> Settings | None:
    """For hooks: a bad config file is logged, and None says "drop nothing" (a typo in
    ring_size must not cost anyone their checkpoints)."""
    try:
        return load(project_root)
    except ConfigError as e:
        from rewind.log import log
        log(f"config: {e.message}; nothing is dropped until it is fixed")
        return None
