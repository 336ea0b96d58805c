"""`rewind hook AGENT`: the agent's payload on stdin. Never breaks the agent: always exits
0, prints nothing on stdout, logs its errors. Imports nothing heavy."""

from __future__ import annotations

import json
import os
import sys
from rewind import clock

MAX_PAYLOAD = 64 * 1024 * 1024


class Call:
    """One hook call, whoever runs it: this process on its own (`run_hook`), or the
    project's watcher for a thin client (watch/serve.py) with the client's cwd, pid and the
    environment entries the adapters and rewind read. One code path for both."""

    __slots__ = ("agent", "data", "env", "cwd", "pid", "fallback", "context")

    def __init__(self, agent: str, data: bytes, env, cwd: str | None, pid: int, fallback: str | None = None):
        self.agent, self.data, self.env, self.cwd, self.pid = agent, data, env, cwd, pid
        self.fallback = fallback      # standalone: why the watcher did not serve it
        self.context: dict = {}       # what the failing hook was doing, for the failure ledger


def run_hook(args: list[str]) -> int:
    """This process does the work: read the payload from stdin, record it."""
    agent = args[0] if args else ""
    try:
        from rewind.hooks import ADAPTERS
        if agent not in ADAPTERS:
            from rewind.log import log
            log(f"hook: unknown agent {agent!r} (known: {', '.join(sorted(ADAPTERS))})")
            return 0
        if sys.stdin is None or sys.stdin.isatty():
            sys.stderr.write("rewind hook reads an agent's hook payload on stdin; it is run by the agent.\n")
            return 0
        data = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    except BaseException as e:
        failed(Call(agent, b"", os.environ, None, os.getpid()), e)
        return 0
    # the event the command names, as hooks/client.py `called` joins it (a test keeps them equal)
    named = args[1] if len(args) > 1 and 0 < len(args[1]) <= 40 and args[1].isalnum() and args[1].isascii() else None
    return run_standalone(Call(f"{agent}:{named}" if named else agent, data, os.environ, None, os.getpid()))


def run_standalone(call: Call) -> int:
    """Record `call` in this process, then start what housekeeping is due. Always 0."""
    try:
        run(call)
        gc_if_due()
        merge_if_due()
    except BaseException as e:  # whatever happens, the agent goes on
        failed(call, e)
    return 0


def failed(call: Call, e: BaseException) -> None:
    """A hook call that raised: logged, and noted in the failure ledger when it had an event."""
    if isinstance(e, KeyboardInterrupt):
        return
    try:
        from rewind.log import log
        log(f"hook {call.agent[:100]} failed: {type(e).__name__}: {e}", e)
    except BaseException:
        pass
    ctx = call.context
    if ctx.get("event"):
        try:
            from rewind.hooks.failures import note
            note(ctx.get("agent", ""), ctx["event"], ctx.get("where"), e,
                 {k: ctx.get(k) for k in ("session", "kind", "prompt")})
        except BaseException:
            pass


def run(call: Call, served_root: str | None = None, catalog=None) -> str | None:
    """Parse the payload and record the event. Returns the recorder's note (None when
    there was nothing to record). With `served_root` (the watcher serves the call), an
    event of another project raises recorder.OtherProject before anything is written;
    `catalog`: the watcher's serving connection, lent for the call."""
    from rewind.hooks import ADAPTERS
    from rewind.log import log
    agent, _, named = call.agent.partition(":")     # the event the hook command named (client.called)
    data = call.data
    if agent not in ADAPTERS:
        log(f"hook: unknown agent {agent!r} (known: {', '.join(sorted(ADAPTERS))})")
        return None
    if len(data) > MAX_PAYLOAD:
        log(f"hook {agent}: payload over {MAX_PAYLOAD} bytes, ignored")
        return None
    try:
        payload = json.loads(data)
    except ValueError as e:
        # never the bytes themselves: a payload can carry file contents
        log(f"hook {agent}: payload is not JSON ({type(e).__name__} at byte {getattr(e, 'pos', '?')} "
            f"of {len(data)})")
        return None
    if not isinstance(payload, dict):
        log(f"hook {agent}: payload is a JSON {type(payload).__name__}, not an object")
        return None
    if named and not isinstance(payload.get("hook_event_name"), str):
        payload["hook_event_name"] = named
    if b"\\ud" in data or b"\\uD" in data:      # perhaps a lone surrogate: SQLite takes none
        from rewind.text import unbroken_json
        payload = unbroken_json(payload)
    __import__(ADAPTERS[agent])             # not importlib: its import (and warnings') costs 1 ms a hook
    adapter = sys.modules[ADAPTERS[agent]]
    event = adapter.parse(payload, call.env)
    if event is None:
        return None
    where = event.project_dir or event.cwd
    call.context.update(agent=agent, event=payload.get("hook_event_name"), session=(event.session_id or "")[:200],
                        kind=event.kind, prompt=event.prompt if event.kind == "prompt" else None,
                        where=os.path.realpath(where) if isinstance(where, str) and os.path.isabs(where) else None)
    from rewind.hooks.recorder import handle
    note = handle(event, pid=call.pid, served_root=served_root, fallback=call.fallback, catalog=catalog)
    settle_reserve(catalog.home if catalog is not None else None)
    if call.env.get("REWIND_HOOK_TRACE"):
        log(f"hook {agent} {payload.get('hook_event_name')}{' (served)' if served_root else ''}: {note}")
    return note


RESERVE = "hook-failures.reserve"   # reserve.NAME; that module is imported only when it has work


def settle_reserve(home: str | None) -> None:
    """After a call that recorded (so there is room again): what a full disk left in the
    reserve moves to the failure ledger; a data dir without a reserve gets one (once). One
    stat otherwise. Never raises."""
    try:
        if home is None:
            from rewind import locations
            home = locations.data_dir()
        try:
            if os.stat(os.path.join(home, RESERVE)).st_mtime_ns == 0:     # reserve.CLEAN_NS
                return
        except FileNotFoundError:
            pass
        from rewind.hooks.failures import settle
        settle(home, clock.wall_ns())
    except Exception:
        pass


def gc_if_due() -> None:
    """Once a day a hook (or a command) starts gc detached, never inside the hook's time.
    One stat when it is not due (the interval is at least an hour)."""
    from rewind import locations
    home = locations.data_dir()
    try:
        if clock.wall() - os.stat(os.path.join(home, "gc.stamp")).st_mtime < 3600:
            return
    except FileNotFoundError:
        pass
    from rewind.background import spawn_if_due
    spawn_if_due(home)


def merge_if_due() -> None:
    """Past a number of packs, a hook starts their merge detached: one listing otherwise."""
    from rewind import locations
    from rewind.store.objects import MERGE_AT, PACKS_DIR
    home = locations.data_dir()
    try:
        if len(os.listdir(os.path.join(home, PACKS_DIR))) < MERGE_AT:
            return
    except FileNotFoundError:
        return
    from rewind.background import spawn_merge
    spawn_merge(home)
