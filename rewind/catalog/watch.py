"""The watcher's rows: the watcher itself (pid, liveness, counters, why it stopped), the
events it writes for the next scan, and the cookies a hook syncs with (dirty.py and
watch/daemon.py describe the protocol)."""

from __future__ import annotations

import os

from rewind.model import PathEvent, WatcherRow, WatchEvent


class WatchMixin:
    def watcher(self, project_id: int) -> WatcherRow | None:
        row = self.db.execute(f"SELECT {','.join(WatcherRow._fields)} FROM watchers WHERE project_id=?",
                              (project_id,)).fetchone()
        return WatcherRow._make(row) if row else None

    def events(self, project_id: int, after: int, upto: int | None) -> list[WatchEvent]:
        """The watcher's events in (after, upto], oldest first."""
        sql = "SELECT path, kind, ts, writer FROM watch_events WHERE project_id=? AND seq>?"
        args: tuple = (project_id, after)
        if upto is not None:
            sql += " AND seq<=?"
            args += (upto,)
        make, decode = WatchEvent._make, os.fsdecode
        return [make((decode(p), k, ts, w)) for p, k, ts, w in self.db.execute(sql + " ORDER BY seq", args)]

    def last_event_seq(self, project_id: int) -> int:
        row = self.db.execute("SELECT max(seq) FROM watch_events WHERE project_id=?", (project_id,)).fetchone()
        return row[0] or 0

    def add_watch_events(self, project_id: int, events: dict[str, PathEvent],
                         cookie: str | None = None, limit_hit_by: int | None = None) -> None:
        """In one transaction: a batch of events (path -> its event), then the
        answer to `cookie`: the seq the stream has reached, so no event before the cookie is
        above it. `limit_hit_by`: the watcher (pid) lost a watch in this batch, said with
        its events: a scan that reads the row after them distrusts it at once (not at the
        next heartbeat), and one that read it before sees the batch's anchor."""
        with self.transaction():
            if limit_hit_by is not None:
                self.db.execute("UPDATE watchers SET limit_hit=1 WHERE project_id=? AND pid=?",
                                (project_id, limit_hit_by))
            self.db.executemany("INSERT INTO watch_events(project_id, path, kind, ts, writer) VALUES (?,?,?,?,?)",
                                [(project_id, os.fsencode(p), k, ts, w) for p, (k, ts, w) in events.items()])
            if cookie is not None:
                self.db.execute("INSERT OR REPLACE INTO watch_cookies(name, project_id, seq) VALUES (?,?,?)",
                                (cookie, project_id, self.last_event_seq(project_id)))

    def add_watch_event(self, project_id: int, path: bytes, kind: str, ts: int) -> None:
        """Inside a transaction: one event a hook writes itself (no writer); `path` as
        stored, so it can be a name no file has."""
        self.db.execute("INSERT INTO watch_events(project_id, path, kind, ts) VALUES (?,?,?,?)",
                        (project_id, path, kind, ts))

    def drop_events_upto(self, project_id: int, upto: int) -> None:
        """Inside a transaction: the events a scan consumed."""
        self.db.execute("DELETE FROM watch_events WHERE project_id=? AND seq<=?", (project_id, upto))

    def take_cookie(self, name: str) -> int | None:
        """The seq the watcher answered cookie `name` with (the answer then removed), or None
        while it has not answered."""
        row = self.db.execute("SELECT seq FROM watch_cookies WHERE name=?", (name,)).fetchone()
        if row is not None:
            self.db.execute("DELETE FROM watch_cookies WHERE name=?", (name,))
            return row[0]
        return None

    # -- the watcher's life ------------------------------------------------------------
    def register_watcher(self, project_id: int, pid: int, started_ns: int, background: bool) -> None:
        with self.transaction():
            self.db.execute("INSERT OR REPLACE INTO watchers(project_id, pid, started_ns, heartbeat_ns, "
                            "background) VALUES (?,?,?,?,?)",
                            (project_id, pid, started_ns, started_ns, int(background)))

    def heartbeat(self, project_id: int, pid: int, heartbeat_ns: int, dirs: int, events: int,
                  overflow_ns: int | None, limit_hit: bool, ready_ns: int | None = None) -> None:
        """Inside a transaction: the watcher `pid` is alive, with these counters (and ready
        since `ready_ns`, when given)."""
        self.db.execute("UPDATE watchers SET heartbeat_ns=?, dirs=?, events=?, overflow_ns=?, limit_hit=?"
                        + (", ready_ns=?" if ready_ns else "") + " WHERE project_id=? AND pid=?",
                        (heartbeat_ns, dirs, events, overflow_ns, int(limit_hit),
                         *((ready_ns,) if ready_ns else ()), project_id, pid))

    def watcher_stopped(self, project_id: int, pid: int, stopped_ns: int, reason: str | None) -> None:
        """Inside a transaction."""
        self.db.execute("UPDATE watchers SET stopped_ns=?, stop_reason=? WHERE "
                        "project_id=? AND pid=?", (stopped_ns, reason, project_id, pid))

    def last_activity(self, project_id: int | None = None) -> int:
        """When the project (None: any project of the store, which the raw packs'
        recompression waits to be quiet: store/repack.wait_for_idle) last saw a scan or a
        tool window open (0: never)."""
        where, args = ("WHERE project_id=?", (project_id, project_id)) if project_id is not None else ("", ())
        return self.db.execute(
            f"SELECT max(coalesce((SELECT max(last_scan_ns) FROM project_state {where}), 0),"
            f" coalesce((SELECT max(opened_ns) FROM windows {where}), 0))", args).fetchone()[0]

    # -- the hooks, served or on their own (watch/serve.py) ------------------------------
    _COUNT = ("INSERT INTO hook_counts(project_id, served, standalone, fallback, fallback_ns, streak, streak_ns) "
              "VALUES (?,?,?,?,?,?,?) "
              "ON CONFLICT(project_id) DO UPDATE SET served=served+excluded.served, "
              "standalone=standalone+excluded.standalone, fallback=coalesce(excluded.fallback, fallback), "
              "fallback_ns=coalesce(excluded.fallback_ns, fallback_ns), streak=streak+excluded.streak, "
              "streak_ns=coalesce(streak_ns, excluded.streak_ns)")

    def count_standalone_hook(self, project_id: int, why: str | None, now_ns: int) -> None:
        """A hook that ran on its own, and why: rides on the hook's next transaction (it
        costs the hook none of its own; `flush_riders` writes it if none came). It adds to
        the streak of such calls, which a served call ends (`count_served_hooks`)."""
        self._riders.append((self._COUNT, (project_id, 0, 1, why, now_ns if why else None, 1, now_ns)))

    def flush_riders(self) -> None:
        if self._riders:
            with self.transaction():
                pass

    def count_served_hooks(self, project_id: int, n: int, last_ns: int | None = None) -> None:
        """Inside a transaction: the watcher served `n` more hook calls (at its heartbeat),
        the last at `last_ns`: a streak of hooks that ran on their own begun before it is over."""
        self.db.execute(self._COUNT, (project_id, n, 0, None, None, 0, None))
        if last_ns is not None:
            self.db.execute("UPDATE hook_counts SET streak=0, streak_ns=NULL WHERE project_id=? AND streak_ns<=?",
                            (project_id, last_ns))

    def hook_counts(self, project_id: int) -> dict:
        """served, standalone (and the last reason one ran on its own, and when), and the
        streak: how many ran on their own in a row, none served since the first (`streak_ns`)."""
        keys = ("served", "standalone", "fallback", "fallback_ns", "streak", "streak_ns")
        row = self.db.execute(f"SELECT {','.join(keys)} FROM hook_counts WHERE project_id=?",
                              (project_id,)).fetchone()
        return dict(zip(keys, row or (0, 0, None, None, 0, None)))
