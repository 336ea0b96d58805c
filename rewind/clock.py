"""Time. REWIND_NOW (an ISO-8601 instant) is read here and nowhere else, for tests."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone


def now_ns() -> int:
    fixed = os.environ.get("REWIND_NOW")
    if fixed:
        return int(datetime.fromisoformat(fixed.replace("Z", "+00:00")).timestamp() * 1e9)
    return time.time_ns()


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_now() -> str:
    return iso(now_ns())
