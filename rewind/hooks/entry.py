"""`rewind hook AGENT`: the agent's payload on stdin. Never breaks the agent: always exits
0, prints nothing on stdout, logs its errors. Imports nothing heavy."""

from __future__ import annotations

import json
import os
import sys
from rewind import clock

MAX_PAYLOAD = 64 * 1024 * 1024


_CONTEXT: dict = {}     # what the failing hook was doing, for the failure ledger


def run_hook(args: list[str]) -> int:
    try:
        _run(args)
        gc_if_due()
        merge_if_due()
    except BaseException as e:  # whatever happens, the agent goes on
        if isinstance(e, KeyboardInterrupt):
            return 0
        try:
            from rewind.log import log
            log(f"hook {' '.join(args)[:100]} failed: {type(e).__name__}: {e}", e)
        except BaseException:
            pass
        if _CONTEXT.get("event"):
            from rewind.hooks.failures import note
            note(_CONTEXT.get("agent", ""), _CONTEXT["event"], _CONTEXT.get("where"), e)
    return 0


def _run(args: list[str]) -> None:
    from rewind.hooks import ADAPTERS
    from rewind.log import log
    agent = args[0] if args else ""
    if agent not in ADAPTERS:
        log(f"hook: unknown agent {agent!r} (known: {', '.join(sorted(ADAPTERS))})")
        return
    if sys.stdin is None or sys.stdin.isatty():
        sys.stderr.write("rewind hook reads an agent's hook payload on stdin; it is run by the agent.\n")
        return
    data = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(data) > MAX_PAYLOAD:
        log(f"hook {agent}: payload over {MAX_PAYLOAD} bytes, ignored")
        return
    try:
        payload = json.loads(data)
    except ValueError as e:
        # never the bytes themselves: a payload can carry file contents
        log(f"hook {agent}: payload is not JSON ({type(e).__name__} at byte {getattr(e, 'pos', '?')} "
            f"of {len(data)})")
        return
    if not isinstance(payload, dict):
        log(f"hook {agent}: payload is a JSON {type(payload).__name__}, not an object")
        return
    if b"\\ud" in data or b"\\uD" in data:      # perhaps a lone surrogate: SQLite takes none
        from rewind.text import unbroken_json
        payload = unbroken_json(payload)
    import importlib
    adapter = importlib.import_module(ADAPTERS[agent])
    event = adapter.parse(payload, os.environ)
    if event is None:
        return
    where = event.project_dir or event.cwd
    _CONTEXT.update(agent=agent, event=payload.get("hook_event_name"),
                    where=os.path.realpath(where) if isinstance(where, str) and os.path.isabs(where) else None)
    from rewind.hooks.recorder import handle
    note = handle(event)
    if os.environ.get("REWIND_HOOK_TRACE"):
        log(f"hook {agent} {payload.get('hook_event_name')}: {note}")


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
