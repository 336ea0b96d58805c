"""A catalog written by an older rewind is brought up to the current schema in place,
keeping every row."""

from __future__ import annotations

import os
import sqlite3

from rewind.catalog import db as catmod
from rewind.catalog.schema import SCHEMA
from rewind.constants import CATALOG_NAME, SCHEMA_VERSION


def test_a_version_1_catalog_is_migrated_in_place(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    db = sqlite3.connect(home / CATALOG_NAME, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("BEGIN;" + SCHEMA + "COMMIT;")          # schema 1, as session 1 wrote it
    db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
    db.execute("INSERT INTO projects(root, created_at) VALUES ('/p', 'then')")
    db.execute("INSERT INTO checkpoints(project_id, number, kind, created_at, created_ns, tree) "
               "VALUES (1, 1, 'prompt', 'then', 1, 'abc')")
    db.execute("INSERT INTO project_state(project_id, last_tree, last_scan_ns) VALUES (1, 'abc', 5)")
    db.execute("INSERT INTO windows(project_id, agent, tool, kind, opened_ns) VALUES (1, 'claude', 'Bash', 'bash', 1)")
    db.close()
    cat = catmod.Catalog(str(home))
    try:
        assert cat.meta("schema_version") == str(SCHEMA_VERSION) == "11"
        assert cat.meta("object_codecs") == "raw zlib zstd zstd-delta zlib-delta zstd-dict"
        assert cat.checkpoint(1, 1).tree == "abc"
        st = cat.scan_state(1)
        assert (st.last_tree, st.last_scan_ns, st.consumed_seq, st.fallbacks) == ("abc", 5, 0, 0)
        assert cat.watcher(1) is None and cat.last_event_seq(1) == 0
        assert cat.db.execute("SELECT agent_pid FROM windows").fetchone() == (None,)
        # 3: a shell window's pid account, and who wrote what a restore put back
        assert cat.db.execute("SELECT pid_mark, hook_pids FROM windows").fetchone() == (None, None)
        assert cat.changes(1, 1) == []
        # 4: the hooks the watcher served and those that ran on their own
        assert cat.hook_counts(1) == {"served": 0, "standalone": 0, "fallback": None, "fallback_ns": None,
                                      "streak": 0, "streak_ns": None}
        # 8: git state as git state: the state a command found, the moves commands made
        assert cat.db.execute("SELECT git_pre FROM windows").fetchone() == (None,)
        assert cat.git_moves(1, 0) == []
        # 9: background commands' windows, and the prompt a task's notice folds under
        assert cat.db.execute("SELECT task, bg_ns, bg_pids, bg_sig FROM windows").fetchone() == (None,) * 4
        assert cat.checkpoint(1, 1).folds_under is None and cat.background_windows(1) == []
    finally:
        cat.close()
    cat = catmod.Catalog(str(home))           # opening it again changes nothing
    assert cat.meta("schema_version") == "11"
    cat.close()
    assert os.path.exists(home / CATALOG_NAME)


def test_a_version_3_catalog_gets_hook_counts(tmp_path):
    """3 -> 4: the hook counts start at zero, and count from the first hook on."""
    from rewind.catalog.schema import MIGRATIONS
    home = tmp_path / "home"
    home.mkdir()
    db = sqlite3.connect(home / CATALOG_NAME, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("BEGIN;" + SCHEMA + "".join(MIGRATIONS[:2]) + "COMMIT;")
    db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '3')")
    db.execute("INSERT INTO projects(root, created_at) VALUES ('/p', 'then')")
    db.close()
    cat = catmod.Catalog(str(home))
    try:
        assert cat.meta("schema_version") == "11"
        assert cat.hook_counts(1)["standalone"] == 0
        cat.count_standalone_hook(1, "no watcher", 7)
        with cat.transaction():          # the count rides on the hook's own transaction
            cat.count_served_hooks(1, 2)
        assert cat.hook_counts(1) == {"served": 2, "standalone": 1, "fallback": "no watcher", "fallback_ns": 7,
                                      "streak": 1, "streak_ns": 7}
        cat.count_standalone_hook(1, None, 8)
        cat.flush_riders()               # none came: one of its own
        assert cat.hook_counts(1) == {"served": 2, "standalone": 2, "fallback": "no watcher", "fallback_ns": 7,
                                      "streak": 2, "streak_ns": 7}
        with cat.transaction():          # a call served after the streak began ends it
            cat.count_served_hooks(1, 1, 8)
        assert (cat.hook_counts(1)["streak"], cat.hook_counts(1)["streak_ns"]) == (0, None)
    finally:
        cat.close()
