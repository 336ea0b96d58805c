"""Tree objects: one directory's entries, a Merkle node.

Serialized as a header line, then one record per entry sorted by name bytes:
``<kind> <mode octal> <id> <size>\\t<name bytes>\\0``. Names are raw bytes (any byte but
NUL and '/'), so invalid UTF-8, newlines and tabs in names survive. In memory names are
`str` decoded with the filesystem encoding (surrogateescape), as os.scandir gives them.
"""

from __future__ import annotations

import os
from collections import namedtuple

from .constants import TREE_FORMAT
from .objects import digest_of, is_oid

FILE, DIR, LINK, LARGE = "F", "D", "L", "B"   # LARGE: present, too big to store


# kind: FILE, DIR, LINK or LARGE; mode: permission bits (st_mode & 0o7777), 0o777 for links;
# oid: blob id (file bytes, link target), tree id, or "" for LARGE; size: bytes, a link's
# target length, 0 for a dir. (collections.namedtuple: `typing` costs a hook 2 ms.)
Entry = namedtuple("Entry", "kind mode oid size")


Tree = dict[str, Entry]


def serialize(tree: Tree) -> bytes:
    parts = [TREE_FORMAT]
    for bname, name in sorted((os.fsencode(n), n) for n in tree):
        e = tree[name]
        parts.append(f"{e.kind} {e.mode:o} {e.oid or '-'} {e.size}\t".encode() + bname + b"\0")
    return b"".join(parts)


def parse(data: bytes) -> Tree:
    if not data.startswith(TREE_FORMAT):
        raise ValueError("not a tree object")
    tree: Tree = {}
    body = data[len(TREE_FORMAT):]
    if not body:
        return tree
    if not body.endswith(b"\0"):
        raise ValueError("truncated tree object")
    for record in body[:-1].split(b"\0"):
        head, _, bname = record.partition(b"\t")
        try:
            kind, mode, oid, size = head.decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            raise ValueError(f"bad tree entry {record[:80]!r}") from None
        if kind not in (FILE, DIR, LINK, LARGE) or not bname or b"/" in bname or bname in (b".", b"..") \
                or not (oid == "-" if kind == LARGE else is_oid(oid)):
            raise ValueError(f"bad tree entry {record[:80]!r}")
        tree[os.fsdecode(bname)] = Entry(kind, int(mode, 8), "" if oid == "-" else oid, int(size))
    return tree


def tree_id(tree: Tree) -> tuple[str, bytes]:
    data = serialize(tree)
    return digest_of(data), data


EMPTY_TREE_ID, EMPTY_TREE_DATA = tree_id({})
