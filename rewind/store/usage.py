"""What the store holds: its loose objects listed, and the sizes `status` and `gc` report."""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from rewind.constants import OBJECTS_DIR
from rewind.store.objects import Store

_HEX2 = re.compile(r"^[0-9a-f]{2}$")
_HEX62 = re.compile(r"^[0-9a-f]{62}$")


class Usage(NamedTuple):
    objects: int      # each object once, loose or packed
    bytes: int        # what its files take on disk: loose files and whole packs


def shards(objects: str) -> list[str]:
    """The objects/<2 hex> directories, sorted."""
    try:
        return sorted(n for n in os.listdir(objects) if _HEX2.match(n))
    except FileNotFoundError:
        return []


def is_loose_name(name: str) -> bool:
    """A loose object's file name inside its shard: the id's 62 last hex digits."""
    return _HEX62.match(name) is not None


def _loose_sizes(home: str):
    """(id, size on disk) of every loose object."""
    objects = os.path.join(home, OBJECTS_DIR)
    for shard in shards(objects):
        try:
            with os.scandir(os.path.join(objects, shard)) as it:
                for de in it:
                    if is_loose_name(de.name):
                        try:
                            yield shard + de.name, de.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            continue
        except FileNotFoundError:
            pass


def totals(home: str) -> Usage:
    """The store as `status` and `gc` both report it."""
    ids: set[str] = set()
    size = 0
    for oid, n in _loose_sizes(home):
        size += n
        ids.add(oid)
    for pack in Store(home).packs().values():
        try:
            size += os.stat(pack.path).st_size
        except OSError:
            continue
        ids.update(oid for oid, _, _ in pack.entries())
    return Usage(len(ids), size)


def object_sizes(home: str) -> dict[str, int]:
    """Every object in the store and its size on disk."""
    out = dict(_loose_sizes(home))
    for pack in Store(home).packs().values():
        for oid, _, n in pack.entries():
            out.setdefault(oid, n)
    return out
