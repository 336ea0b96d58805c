"""Paths given after `--`: `rewind.cli.main` splits them off before click parses, so
`diff 3 -- a.py` can never take a.py for the optional second id."""

from __future__ import annotations

PATHS: list[str] | None = None


def paths_after_dashes() -> list[str] | None:
    return PATHS
