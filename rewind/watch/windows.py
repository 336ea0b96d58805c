"""The shell windows a watcher tags its events with: opened and closed at the hooks' markers
in its own event stream (capture/dirty.py `put_marker`), so a change's place against a window is
read from one queue, not from two processes' clocks; the pid account (capture/procs.py)
says which open window's command could have made each change."""

from __future__ import annotations

from rewind import clock

WINDOW_LOST_S = 30.0             # a window closed this long ago without its marker: gone


class ShellWindows:
    """Mixed into the Watcher: needs `catalog`, `project_id`, `commands` (procs.Commands),
    `closed`, `windows_lock`, `windows_loaded`, `watching_since`, `flush`."""

    def load_windows(self) -> None:
        """Once, before the first event is placed: every shell window open when the watches
        went in, closed since or not (a hook may have opened one, and the command run,
        before this watcher could see the open marker; its close marker comes later in the
        stream and takes it out there). Until then a window's changes would go untagged."""
        with self.windows_lock:
            if self.windows_loaded:
                return
            rows = self.catalog.shell_windows_since(self.project_id, self.watching_since)
            self.commands.update([w for w in rows if w.id not in self.closed], set())
            self.windows_loaded = True

    def marker(self, what: str, name: str) -> None:
        """A hook's marker, at its place in the event stream: a shell window opens or
        closes exactly here (dirty.put_marker); any other cookie is a sync to answer."""
        kind, _, rest = what.partition("-")
        if kind in ("open", "close", "bg"):
            ids = {int(x) for x in rest.split("-", 1)[0].split(",") if x.isdigit()}
            with self.windows_lock:
                if kind in ("open", "bg"):       # bg: its command goes on in the background from here
                    self.refresh_windows(ids)
                else:
                    self.closed.update(ids)
                    self.commands.update([], ids)
            return
        self.refresh_windows()                 # a hook may have just opened a shell window
        self.flush(cookie=name)

    def refresh_windows(self, ids: set[int] | None = None) -> None:
        """Shell windows open in the catalog join the watcher's view (those named by an open
        marker, or all of them). Only a close marker takes one out, at its place in the
        stream: a window the catalog says is closed may still have changes of its command
        waiting in the queue. A window closed WINDOW_LOST_S ago whose marker never came (it
        could not be written) leaves then."""
        with self.windows_lock:
            # named by an open marker: it opens here even if the catalog says it closed since
            # (a watcher this late reads its close marker further on)
            rows = self.catalog.shell_windows(self.project_id, ids)
            lost = set()
            if ids is None:
                known = set(self.commands.windows)
                recent = self.catalog.shell_windows_closed_after(
                    self.project_id, clock.wall_ns() - int(WINDOW_LOST_S * 1e9))
                lost = known - {w.id for w in rows} - recent
            self.commands.update([w for w in rows if w.id not in self.closed], lost)
            if len(self.closed) > 1000:
                self.closed = set(sorted(self.closed)[-100:])
