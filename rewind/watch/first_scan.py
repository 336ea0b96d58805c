"""The watcher's first scan: the full scan every later incremental one builds on."""

from __future__ import annotations

import os
import time

from rewind import clock

CALL_FIRST_S = 1.0
FIRST_SCAN_LOCK_TIMEOUT_S = 120.0   # the first scan's wait for the project lock


def first_scan(watcher) -> None:
    """A full scan right after the watches are in place, on its own thread while the
    main loop flushes events and beats: the base every later incremental scan builds on
    (the first snapshot of a big tree, off the hooks' time). A prompt meanwhile is
    recorded as pending (capture/pending.py), completed here right after the scan."""
    from rewind.capture import pending
    from rewind.capture.dirty import FullUpto, sync
    from rewind.capture.working_copy import Scan, locked
    from rewind.project import open_project
    try:
        project = open_project(watcher.root, create=True)
        try:
            # what an earlier watcher left pending is completed after this scan, with the rest
            with locked(project, FIRST_SCAN_LOCK_TIMEOUT_S) as wc:
                wc.between_chunks = lambda: _let_calls_in(watcher)
                cat = project.catalog
                upto = cat.last_event_seq(watcher.project_id)    # before any prompt can be pending
                cat.set_baseline(watcher.project_id, os.getpid(), clock.wall_ns())
                try:
                    wc.commit(wc.scan(Scan("baseline", source=FullUpto(upto))))
                    first_root = cat.scan_state(watcher.project_id).last_tree
                    done_seq = sync(project, timeout=5.0)     # every event from before here is in
                finally:
                    cat.set_baseline(watcher.project_id, os.getpid(), None)
                pending.complete(wc, by="watcher", first_root=first_root, first_done_seq=done_seq,
                                 watching_since=watcher.watching_since)
        finally:
            project.close()
    except Exception as e:
        from rewind.log import log
        log(f"watch {watcher.root}: the first scan failed", e)
    # after the scan, not competing with it: a hook compiles no module it imports
    from rewind.bytecode import ensure_compiled
    ensure_compiled()


def _let_calls_in(watcher) -> None:
    """Between two of the first scan's catalog transactions: a call being served (an edit
    tool's pre-image, a prompt) takes the catalog first; it is short (bounded all the
    same: a call waiting on something this scan holds must not stall it)."""
    server = watcher.server
    if server is None:
        return
    deadline = time.monotonic() + CALL_FIRST_S
    while server.serve_lock.locked() and time.monotonic() < deadline:
        time.sleep(0.002)
