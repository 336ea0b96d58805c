"""The cookies of the watcher's own process, answered in memory (capture/dirty.py `sync`)."""

from __future__ import annotations

import threading


class Answers:
    """The cookies of this process's own scans (the hooks it serves, its first scan), answered
    in memory (capture/dirty.py `sync`): no answer row to write and poll for, no thread hop
    through SQLite. A cookie of another process is answered with a row, as always."""

    def __init__(self, project_id: int):
        self.project_id = project_id
        self.lock = threading.Lock()
        self.waiting: dict[str, Waiter] = {}

    def expect(self, project_id: int, name: str) -> Waiter | None:
        if project_id != self.project_id:
            return None
        w = Waiter()
        with self.lock:
            self.waiting[name] = w
        return w

    def take(self, name: str) -> Waiter | None:
        """The waiter of cookie `name`, no longer waiting (the watcher's answer, or the
        caller's giving up)."""
        with self.lock:
            return self.waiting.pop(name, None)


class Waiter:
    __slots__ = ("event", "seq")

    def __init__(self):
        self.event = threading.Event()
        self.seq: int | None = None

    def answer(self, seq: int | None) -> None:
        self.seq = seq
        self.event.set()

    def wait(self, timeout: float) -> int | None:
        """Never on the main thread (a signal handler and Event.wait: see Watcher._pause)."""
        return self.seq if self.event.wait(timeout) else None
