"""The hooks' account of the agents: sessions, tool windows (a shell command or an edit
tool's call, from its Pre event to its Post event), edit tools' pre-images, and
observations (who touched a path the scans cannot see). Attribution reads them; gc prunes
what no kept checkpoint needs."""

from __future__ import annotations

import os

from rewind.model import BackgroundWindow, ChangeRow, GitMoveRow, SessionProject, ShellGit, ShellWindow, Source, ToolWindow


class SessionsMixin:
    # -- sessions ----------------------------------------------------------------------
    def register_session(self, project_id: int, agent: str, session_id: str, first_cwd: str | None,
                         source: str | None, started_ns: int) -> None:
        """Inside a transaction: a session's first event (a known session keeps its row).
        A SessionStart whose hook returned before its work (hooks/client.py) may come after
        the session's first prompt: its source and earlier start are taken then."""
        self.db.execute("INSERT INTO sessions(agent, session_id, project_id, first_cwd, source, started_ns)"
                        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(agent, session_id) DO UPDATE SET"
                        " source=coalesce(sessions.source, excluded.source),"
                        " started_ns=min(sessions.started_ns, excluded.started_ns)",
                        (agent, session_id, project_id, first_cwd, source, started_ns))

    def end_session(self, agent: str, session_id: str, ended_ns: int) -> None:
        """Inside a transaction."""
        self.db.execute("UPDATE sessions SET ended_ns=? WHERE agent=? AND session_id=?",
                        (ended_ns, agent, session_id))

    def open_sessions(self, project_id: int) -> int:
        """How many of the project's sessions have not ended."""
        return self.db.execute("SELECT count(*) FROM sessions WHERE project_id=? AND ended_ns IS NULL",
                               (project_id,)).fetchone()[0]

    def has_sessions(self, project_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM sessions WHERE project_id=? LIMIT 1",
                               (project_id,)).fetchone() is not None

    def session_lacks_source(self, agent: str, session_id: str) -> bool:
        """A known session registered by an event that had no source (a prompt before its
        SessionStart's detached work: hooks/client.py)."""
        row = self.db.execute("SELECT source FROM sessions WHERE agent=? AND session_id=?",
                              (agent, session_id)).fetchone()
        return row is not None and row[0] is None

    def session_project(self, agent: str, session_id: str) -> SessionProject | None:
        row = self.db.execute("SELECT project_id, first_cwd FROM sessions WHERE agent=? AND session_id=?",
                              (agent, session_id)).fetchone()
        return SessionProject._make(row) if row else None

    # -- tool windows ------------------------------------------------------------------
    def open_shell_window(self, project_id: int, agent: str, session_id: str, agent_id: str | None,
                          tool_use_id: str | None, tool: str, command: str | None, opened_ns: int,
                          agent_pid: int | None, pid_mark: int | None, hook_pids: str,
                          git_pre: str | None = None) -> int:
        """Inside a transaction: a shell command's window (`git_pre`: the git state it
        found, project.git_mark). Returns its id."""
        return self.db.execute("INSERT INTO windows(project_id, agent, session_id, agent_id, tool_use_id, tool, kind,"
                               " command, opened_ns, agent_pid, pid_mark, hook_pids, git_pre)"
                               " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                               (project_id, agent, session_id, agent_id, tool_use_id, tool, "bash",
                                command, opened_ns, agent_pid, pid_mark, hook_pids, git_pre)).lastrowid

    def shell_git(self, window_ids: list[int]) -> list[ShellGit]:
        """The git state each of these shell windows found when it opened (None: not read)."""
        if not window_ids:
            return []
        marks = ",".join("?" * len(window_ids))
        return [ShellGit._make(r) for r in self.db.execute(
            f"SELECT id, git_pre, tool, command, session_id FROM windows WHERE id IN ({marks}) "
            "AND git_pre IS NOT NULL ORDER BY id", window_ids)]

    def add_git_move(self, project_id: int, ts: int, before: str, after: str, source: str,
                     tool: str | None, command: str | None, session_id: str | None) -> None:
        """Inside a transaction: a move of HEAD or branch, from `before` to `after` (git marks)."""
        self.db.execute("INSERT INTO git_moves(project_id, ts, before, after, source, tool, command, session_id)"
                        " VALUES (?,?,?,?,?,?,?,?)", (project_id, ts, before, after, source, tool, command,
                                                       session_id))

    def git_moves(self, project_id: int, since_ns: int, until_ns: int | None = None) -> list[GitMoveRow]:
        """The moves of HEAD or branch found from `since_ns` (until before `until_ns`), oldest first."""
        return [GitMoveRow._make(r) for r in self.db.execute(
            "SELECT ts, before, after, source, tool, command, session_id FROM git_moves WHERE project_id=? "
            "AND ts >= ? AND (? IS NULL OR ts < ?) ORDER BY seq", (project_id, since_ns, until_ns, until_ns))]

    def open_shell_git(self, project_id: int) -> list[ShellGit]:
        """The open shell windows that read the git state when they opened."""
        return [ShellGit._make(r) for r in self.db.execute(
            "SELECT id, git_pre, tool, command, session_id FROM windows WHERE project_id=? AND kind='bash' "
            "AND closed_ns IS NULL AND git_pre IS NOT NULL ORDER BY id", (project_id,))]

    def open_tool_window(self, project_id: int, agent: str, session_id: str, agent_id: str | None,
                         tool_use_id: str | None, tool: str, target: str, opened_ns: int) -> None:
        """Inside a transaction: an edit tool's window on one target."""
        self.db.execute("INSERT INTO windows(project_id, agent, session_id, agent_id, tool_use_id, tool,"
                        " kind, target, opened_ns) VALUES (?,?,?,?,?,?,?,?,?)",
                        (project_id, agent, session_id, agent_id, tool_use_id, tool,
                         "tool", os.fsencode(target), opened_ns))

    def add_closed_window(self, project_id: int, agent: str, session_id: str, tool_use_id: str | None,
                          tool: str, target: str, opened_ns: int, closed_ns: int, post_oid: str) -> None:
        """Inside a transaction: an edit tool's window reported only after the edit, closed."""
        self.db.execute("INSERT INTO windows(project_id, agent, session_id, tool_use_id, tool, kind, target,"
                        " opened_ns, closed_ns, post_oid) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (project_id, agent, session_id, tool_use_id, tool, "tool",
                         os.fsencode(target), opened_ns, closed_ns, post_oid))

    def close_window(self, window_id: int, closed_ns: int, failed: bool, post_oid: str | None = None) -> None:
        """Inside a transaction. `post_oid`: an edit tool's, the id of what its target holds
        now ("" when it could not be read); a shell window has none."""
        if post_oid is None:
            self.db.execute("UPDATE windows SET closed_ns=?, failed=? WHERE id=?",
                            (closed_ns, int(failed), window_id))
        else:
            self.db.execute("UPDATE windows SET closed_ns=?, post_oid=?, failed=? WHERE id=?",
                            (closed_ns, post_oid, int(failed), window_id))

    def close_windows(self, project_id: int, agent: str, session_id: str, agent_id: str | None,
                      closed_ns: int, exact: bool = False, background: bool = False) -> list[int]:
        """Inside a transaction: close a session's open windows (only one subagent's when
        `agent_id` is given; with `exact`, only those whose agent id is `agent_id`, None for
        the main agent's), those of commands gone on in the background too with
        `background`. Returns the ids of the shell windows among them."""
        where = "project_id=? AND closed_ns IS NULL AND agent=? AND session_id=?"
        if not background:
            where += " AND bg_ns IS NULL"
        args: tuple = (project_id, agent, session_id)
        if agent_id or exact:
            where += " AND agent_id IS ?"
            args += (agent_id,)
        ids = [r[0] for r in self.db.execute(f"SELECT id FROM windows WHERE {where} AND kind='bash'", args)]
        self.db.execute(f"UPDATE windows SET closed_ns=? WHERE {where}", (closed_ns, *args))
        return ids

    def to_background(self, window_id: int, bg_ns: int, task: str, bg_pids: str, bg_sig: str | None) -> None:
        """Inside a transaction: a shell window whose command goes on in the background
        stays open from `bg_ns` until its task ends (hooks/tools.py)."""
        self.db.execute("UPDATE windows SET task=?, bg_ns=?, bg_pids=?, bg_sig=? WHERE id=?",
                        (task, bg_ns, bg_pids, bg_sig, window_id))

    def forget_git_pre(self, window_id: int) -> None:
        """Inside a transaction: the window's close names no git move (hooks/tools.py)."""
        self.db.execute("UPDATE windows SET git_pre=NULL WHERE id=?", (window_id,))

    def background_windows(self, project_id: int, session_id: str | None = None) -> list[BackgroundWindow]:
        """The open windows of commands gone on in the background (one session's, or all)."""
        return list(map(BackgroundWindow._make, self.db.execute(
            f"SELECT {','.join(BackgroundWindow._fields)} FROM windows WHERE project_id=? AND kind='bash' "
            "AND closed_ns IS NULL AND bg_ns IS NOT NULL AND (? IS NULL OR session_id=?) ORDER BY id",
            (project_id, session_id, session_id))))

    def set_bg_sig(self, window_id: int, sig: str | None) -> None:
        self.db.execute("UPDATE windows SET bg_sig=? WHERE id=?", (sig, window_id))

    def window_of_tool(self, project_id: int, session_id: str, tool_use_id: str) -> ToolWindow | None:
        """The shell window of one tool call, open or closed (the newest, should an id repeat)."""
        row = self.db.execute(f"SELECT {','.join(ToolWindow._fields)} FROM windows WHERE project_id=? AND "
                              "kind='bash' AND session_id=? AND tool_use_id=? ORDER BY id DESC LIMIT 1",
                              (project_id, session_id, tool_use_id)).fetchone()
        if row is None:
            return None
        target = ToolWindow._fields.index("target")
        return ToolWindow(*row[:target], None, *row[target + 1:])

    def find_window(self, project_id: int, kind: str, session_id: str, tool_use_id: str | None,
                    target: str | None = None) -> int | None:
        """The open window a Post event closes: by tool-use id, else (agents without ids)
        the oldest open one of the session, on the same target for an edit tool."""
        db = self.db
        if target is not None:    # one tool call may edit several files (Codex's apply_patch)
            row = db.execute("SELECT id FROM windows WHERE project_id=? AND kind=? AND session_id=? AND target=? "
                             "AND closed_ns IS NULL AND (? IS NULL OR tool_use_id=?) ORDER BY id LIMIT 1",
                             (project_id, kind, session_id, os.fsencode(target), tool_use_id,
                              tool_use_id)).fetchone()
            if row:
                return row[0]
        if tool_use_id:
            row = db.execute("SELECT id FROM windows WHERE project_id=? AND kind=? AND tool_use_id=? AND "
                             "closed_ns IS NULL ORDER BY id DESC LIMIT 1",
                             (project_id, kind, tool_use_id)).fetchone()
            if row:
                return row[0]
        row = db.execute("SELECT id FROM windows WHERE project_id=? AND kind=? AND session_id=? AND "
                         "closed_ns IS NULL ORDER BY id LIMIT 1", (project_id, kind, session_id)).fetchone()
        return row[0] if row else None

    def open_windows(self, project_id: int) -> list[ToolWindow]:
        """The windows that may explain what the next scan finds: open ones, and those closed
        after the last scan *began* (a long scan, the watcher's first one above all, may
        have listed a directory before a tool wrote there, and ended after it closed)."""
        rows = self.db.execute(f"SELECT {','.join(ToolWindow._fields)} FROM windows WHERE project_id=? AND "
                               "(closed_ns IS NULL OR closed_ns >= (SELECT coalesce(max(CASE WHEN scan_start_ns > 0 "
                               "THEN min(scan_start_ns, last_scan_ns) ELSE last_scan_ns END), 0) "
                               "FROM project_state WHERE project_id=?))", (project_id, project_id))
        target = ToolWindow._fields.index("target")
        return [ToolWindow(*r[:target], os.fsdecode(r[target]) if r[target] is not None else None, *r[target + 1:])
                for r in rows]

    # The watcher's view of shell windows
    def shell_windows_since(self, project_id: int, since_ns: int) -> list[ShellWindow]:
        """Every shell window open at `since_ns` or opened after it, closed since or not."""
        return list(map(ShellWindow._make, self.db.execute(
            f"SELECT {','.join(ShellWindow._fields)} FROM windows WHERE project_id=? AND kind='bash' "
            "AND (closed_ns IS NULL OR closed_ns >= ?)", (project_id, since_ns))))

    def shell_windows(self, project_id: int, ids: set[int] | None = None) -> list[ShellWindow]:
        """The shell windows named by `ids` (closed or not), else the open ones."""
        return list(map(ShellWindow._make, self.db.execute(
            f"SELECT {','.join(ShellWindow._fields)} FROM windows WHERE project_id=? AND kind='bash' AND "
            + ("id IN (%s)" % ",".join(map(str, ids)) if ids else "closed_ns IS NULL"),
            (project_id,))))

    def shell_windows_closed_after(self, project_id: int, after_ns: int) -> set[int]:
        return {r[0] for r in self.db.execute(
            "SELECT id FROM windows WHERE project_id=? AND kind='bash' AND closed_ns > ?",
            (project_id, after_ns))}

    def agent_processes(self) -> list[tuple[int, str, str]]:
        """(agent pid, agent, session id) of every agent process that has a shell window
        open, or a session that has not ended, in any project of the store: an agent can
        `cd` elsewhere before it runs rewind (history/guard.py)."""
        return self.db.execute(
            "SELECT DISTINCT w.agent_pid, w.agent, w.session_id FROM windows w "
            "LEFT JOIN sessions s ON s.agent=w.agent AND s.session_id=w.session_id "
            "WHERE w.kind='bash' AND w.agent_pid IS NOT NULL "
            "AND (w.closed_ns IS NULL OR (s.session_id IS NOT NULL AND s.ended_ns IS NULL))").fetchall()

    # -- pre-images and observations ---------------------------------------------------
    def add_preimage(self, project_id: int, base: int | None, path: str, oid: str, tool: str,
                     tool_use_id: str | None, session_id: str, ts: int) -> None:
        """Inside a transaction: an edit tool's target as it was before the tool ran."""
        self.db.execute("INSERT INTO preimages(project_id, base, path, oid, tool, tool_use_id,"
                        " session_id, ts) VALUES (?,?,?,?,?,?,?,?)",
                        (project_id, base, os.fsencode(path), oid, tool, tool_use_id, session_id, ts))

    def insert_observations(self, project_id: int, base: int | None, rows: list[ChangeRow], ts: int) -> None:
        self.db.executemany(
            "INSERT INTO observations(project_id, base, path, source, tool, command, session_id, flags, ts)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            [(project_id, base, os.fsencode(r.path), r.source, r.tool, r.command, r.session_id,
              ",".join(r.flags), ts) for r in rows])

    def observations(self, project_id: int, base: int | None) -> dict[str, Source]:
        """Latest observation per path under checkpoint `base`: path -> its `Source`."""
        out: dict[str, Source] = {}
        cond = "base IS NULL" if base is None else "base=?"
        args = (project_id,) if base is None else (project_id, base)
        for path, source, tool, command, session_id, flags in self.db.execute(
                f"SELECT path, source, tool, command, session_id, flags FROM observations "
                f"WHERE project_id=? AND {cond} ORDER BY seq", args):
            out[os.fsdecode(path)] = Source(source, tool, command, session_id,
                                            tuple(f for f in flags.split(",") if f))
        return out

    def observed_sources(self, project_id: int, base: int) -> dict[str, set[str]]:
        """Every source observed per path under checkpoint `base` (not only the latest):
        path -> the set of them. A revert takes back a path only when every writer of it in
        the interval is one it was asked to take back."""
        out: dict[str, set[str]] = {}
        for path, source in self.db.execute("SELECT path, source FROM observations WHERE project_id=? "
                                            "AND base=?", (project_id, base)):
            out.setdefault(os.fsdecode(path), set()).add(source)
        return out

    def prune_history(self, project_id: int, before_ns: int) -> int:
        """Inside a transaction: rows no kept checkpoint needs any more that are older than
        `before_ns`: closed tool windows the last scan already accounted for, pre-images,
        observations taken before any checkpoint, and git moves. Returns rows removed."""
        db = self.db
        last_scan = self.state(project_id)[1]
        n = db.execute("DELETE FROM windows WHERE project_id=? AND closed_ns IS NOT NULL AND "
                       "closed_ns < ? AND closed_ns < ?", (project_id, last_scan, before_ns)).rowcount
        n += db.execute("DELETE FROM preimages WHERE project_id=? AND ts < ?",
                        (project_id, before_ns)).rowcount
        n += db.execute("DELETE FROM observations WHERE project_id=? AND base IS NULL AND ts < ?",
                        (project_id, before_ns)).rowcount
        n += db.execute("DELETE FROM git_moves WHERE project_id=? AND ts < ?", (project_id, before_ns)).rowcount
        return n

    def shell_commands(self, project_id: int, since_ns: int) -> list[tuple]:
        """(opened_ns, session_id, tool, command) of every shell window opened at `since_ns` or
        after, oldest first: the commands a restore to a checkpoint taken then does not undo."""
        return self.db.execute(
            "SELECT opened_ns, session_id, tool, command FROM windows WHERE project_id=? AND kind='bash' "
            "AND command IS NOT NULL AND opened_ns >= ? ORDER BY opened_ns", (project_id, since_ns)).fetchall()
