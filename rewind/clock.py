"""Time, read here and nowhere else. Two clocks, for two different questions:

- `now_ns()`: the policy clock. A checkpoint's `created_at`, the ring and the retention
  read it, and tests move it with REWIND_NOW (an ISO-8601 instant).
- `wall_ns()`: the real wall clock, never moved by REWIND_NOW. Everything compared with
  times the kernel or another process wrote reads it: a tool window's open and close
  against the watcher's events, heartbeats, a scan's start against file times, the age
  of a file or a stamp. A faked time there would put events in the wrong order.

Durations and deadlines use `time.monotonic()` where they are measured; they are not
times of day.
"""

from __future__ import annotations

import os
import time


def now_ns() -> int:
    fixed = os.environ.get("REWIND_NOW")
    if fixed:
        from datetime import datetime
        return int(datetime.fromisoformat(fixed.replace("Z", "+00:00")).timestamp() * 1e9)
    return time.time_ns()


def wall_ns() -> int:
    """The real time, in ns (see the module docstring)."""
    return time.time_ns()


def wall() -> float:
    """The real time, in seconds, as file times are compared."""
    return time.time()


def local_stamp() -> str:
    """The real local time as a log line's stamp."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def iso(ns: int) -> str:
    from datetime import datetime, timezone     # not at import: the hooks that never print a time skip it
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_now() -> str:
    return iso(now_ns())
