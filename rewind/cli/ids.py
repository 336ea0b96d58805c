"""Checkpoint ids as typed on the command line (N, last, last~N), and their shell completion."""

from __future__ import annotations

import os
import re
from typing import NamedTuple

import typer

from rewind.cli import render
from rewind.project import find_project

_ID = re.compile(r"^(?:(\d+)|last(?:~(\d+))?)$")


class IdSpec(NamedTuple):
    """A checkpoint id as typed: ("n", N) or ("last", K) for last~K."""
    kind: str
    n: int


def parse_id(value) -> IdSpec:
    """N, last, or last~N. Anything else is a usage error (exit 2)."""
    if isinstance(value, IdSpec):
        return value
    m = _ID.match(str(value).strip())
    if not m:
        raise typer.BadParameter(f"{value!r} is not a checkpoint id (a number, `last` or `last~N`)")
    if m.group(1) is not None:
        return IdSpec("n", int(m.group(1)))
    return IdSpec("last", int(m.group(2) or 0))


def parse_second_id(value) -> IdSpec:
    """`diff`'s optional second id: a word that is not one is most likely a path, and said so."""
    try:
        return parse_id(value)
    except typer.BadParameter:
        raise typer.BadParameter(f"{value!r} is not a checkpoint id; paths go after `--` "
                                 f"(rewind diff ID -- {value})") from None


def complete_id(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of checkpoint ids, with each one's prompt as the description.
    Never fails: a completion that cannot be computed is simply empty."""
    try:
        from rewind import locations
        from rewind.catalog.db import Catalog
        from rewind.constants import CATALOG_NAME
        home = locations.data_dir()
        if not os.path.exists(os.path.join(home, CATALOG_NAME)):
            return []
        catalog = Catalog(home)
        try:
            pid = catalog.project_id(find_project(os.getcwd(), catalog), create=False)
            if pid is None:
                return []
            cps = sorted(catalog.checkpoints(pid, limit=100) + catalog.pending(pid), key=lambda cp: -cp.number)
            out = [(str(cp.number), ("pending " if cp.stats.get("pending") else "") + f"{cp.kind}: "
                    + render.short(cp.message or "", 50))
                   for cp in cps if str(cp.number).startswith(incomplete)]
        finally:
            catalog.close()
        return out + [(w, h) for w, h in (("last", "the newest checkpoint"),) if w.startswith(incomplete)]
    except Exception:
        return []
