"""What a running watcher says, and where. The log file gets the whole story (watchdog's
own warnings included, which would otherwise go to stderr through logging's last resort,
a line per overflow and per failed rebuild; rewind's own line about lost events at most
once a second, with a count). A foreground `rewind watch` says on stderr
one line per lost-events episode (an inotify queue overflow, the watch limit: the next
hooks scan the whole tree), never a line per event, at most one every SAY_EVERY_S, and
never waits on a stderr nobody reads: a line that does not fit in the pipe is dropped."""

from __future__ import annotations

import logging
import os
import select
import threading
import time

SAY_EVERY_S = 5.0
LOG_EVERY_S = 1.0
MAX_LINE = 512                   # under PIPE_BUF: a write into a pipe with room never blocks

_WHAT = {"overflow": "the inotify queue overflowed",
         "limit": "the inotify watch limit was reached (fs.inotify.max_user_watches)"}


class Report:
    def __init__(self, root: str, foreground: bool):
        self.root, self.foreground = root, foreground
        self.lock = threading.Lock()
        self.said: dict[str, float] = {}         # kind -> when last said on stderr
        self.quiet: dict[str, int] = {}          # kind -> episodes not said since
        self.dropped = 0                          # lines a full stderr took no room for
        self.logged: dict[str, float] = {}        # kind -> when last logged
        self.unlogged: dict[str, int] = {}        # kind -> episodes not logged since

    def lost(self, what: str) -> None:
        """Events were lost (`what`: "overflow" or "limit", the latter once per directory
        that got no watch: thousands in a big tree): a line in the log (at most one every
        LOG_EVERY_S, with the count since), and on stderr in the foreground, rate-limited."""
        now = time.monotonic()
        with self.lock:
            logged = self.logged.get(what)
            if logged is None or now - logged >= LOG_EVERY_S:
                self.logged[what] = now
                times = self.unlogged.pop(what, 0) + 1
            else:
                self.unlogged[what] = self.unlogged.get(what, 0) + 1
                times = 0
        if times:
            from rewind.log import log
            log(f"watch {self.root}: {_WHAT.get(what, what)}" + (f" ({times} times)" if times > 1 else "")
                + "; the next scan reads the whole tree")
        if not self.foreground:
            return
        with self.lock:
            last = self.said.get(what)
            if last is not None and now - last < SAY_EVERY_S:
                self.quiet[what] = self.quiet.get(what, 0) + 1
                return
            self.said[what] = now
            more = self.quiet.pop(what, 0)
        again = f" ({more} more time{'s' if more != 1 else ''} since the last line)" if more else ""
        self.say(f"rewind watch: {_WHAT.get(what, what)}{again}; the next hook scans the whole tree "
                 "(details in rewind's log)")

    def say(self, line: str) -> bool:
        """One line on stderr if it fits now; dropped (and counted) if not."""
        data = (line[:MAX_LINE - 1] + "\n").encode("utf-8", "replace")
        try:
            poller = select.poll()
            poller.register(2, select.POLLOUT)
            if not poller.poll(0):
                self.dropped += 1
                return False
            os.write(2, data)            # (with room for a page: a short write never blocks)
            return True
        except (OSError, ValueError):
            self.dropped += 1
            return False

    def take_logging(self) -> None:
        """watchdog's logger writes to rewind's log, not to stderr."""
        logger = logging.getLogger("watchdog")
        logger.propagate = False
        if not any(isinstance(h, _ToLog) for h in logger.handlers):
            logger.addHandler(_ToLog(self.root))
        logger.setLevel(logging.WARNING)


class _ToLog(logging.Handler):
    def __init__(self, root: str):
        super().__init__(logging.WARNING)
        self.root = root

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from rewind.log import log
            exc = record.exc_info[1] if record.exc_info else None
            log(f"watch {self.root}: watchdog: {record.getMessage()}", exc)
        except Exception:
            pass
