"""Named error classes: each case a caller or test tells apart raises its own class (all are
RewindError, so the CLI prints them alike), from a real store, catalog and tree."""

from __future__ import annotations

import os
import sqlite3

import pytest

from helpers import project, run_rewind, write
from rewind import errors
from rewind.capture.working_copy import capture
from rewind.catalog.db import Catalog
from rewind.history.conversation import fork
from rewind.history.export import export
from rewind.project import open_project


def test_every_named_error_is_a_rewind_error():
    named = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)]
    assert len(named) > 15
    assert all(issubclass(c, errors.RewindError) for c in named)


def test_a_catalog_from_a_newer_rewind_is_schema_too_new(tmp_path):
    home = os.environ["REWIND_HOME"]
    Catalog(home).close()
    db = sqlite3.connect(os.path.join(home, "catalog.sqlite"))
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(errors.SchemaTooNew, match="newer than this rewind understands"):
        Catalog(home)


def test_the_data_directory_is_a_refused_root():
    home = os.environ["REWIND_HOME"]
    os.makedirs(os.path.join(home, "sub"), exist_ok=True)
    with pytest.raises(errors.RefusedRoot, match="rewind's own data directory"):
        open_project(os.path.realpath(os.path.join(home, "sub")), create=True)


def test_export_outside_a_git_repository_is_refused(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    proj = project(root)
    try:
        cp, _ = capture(proj, "manual")
        with pytest.raises(errors.ExportRefused, match="not a git repository"):
            export(proj, cp)
    finally:
        proj.close()


def test_a_checkpoint_without_a_session_has_no_conversation(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    proj = project(root)
    try:
        cp, _ = capture(proj, "manual")
        with pytest.raises(errors.ConversationUnavailable, match="and OpenCode sessions"):
            fork(cp, dry_run=True)
    finally:
        proj.close()


def test_a_named_error_reads_on_the_command_line_as_any_other(tmp_path):
    root = tmp_path / "proj"
    write(root, "a.txt", "a\n")
    run_rewind("save", cwd=root, check=0)
    r = run_rewind("diff", "1", "--", "../elsewhere.txt", cwd=root)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "outside the project" in r.stderr
    assert "Traceback" not in r.stderr
