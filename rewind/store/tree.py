"""Tree objects: one directory's entries, a Merkle node.

Serialized as a header line, then one record per entry sorted by name bytes:
``<kind> <mode octal> <id> <size>\\t<name bytes>\\0``. Names are raw bytes (any byte but
NUL and '/'), so invalid UTF-8, newlines and tabs in names survive. In memory names are
`str` decoded with the filesystem encoding (surrogateescape), as os.scandir gives them.
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

from rewind.constants import TREE_FORMAT
from rewind.store.objects import digest_of

FILE, DIR, LINK, LARGE = "F", "D", "L", "B"   # LARGE: present, too big to store


# kind: FILE, DIR, LINK or LARGE; mode: permission bits (st_mode & 0o7777), 0o777 for links;
# oid: blob id (file bytes, link target), tree id, or "" for LARGE; size: bytes, a link's
# target length, 0 for a dir. (collections.namedtuple: `typing` costs a hook 2 ms.)
Entry = namedtuple("Entry", "kind mode oid size")


Tree = dict[str, Entry]

_KINDS = {b"F": FILE, b"D": DIR, b"L": LINK, b"B": LARGE}
_HEX = frozenset(b"0123456789abcdef")
_ENCODING = sys.getfilesystemencoding()


def serialize(tree: Tree) -> bytes:
    parts = [TREE_FORMAT]
    for bname, name in sorted((os.fsencode(n), n) for n in tree):
        e = tree[name]
        parts.append(f"{e.kind} {e.mode:o} {e.oid or '-'} {e.size}\t".encode() + bname + b"\0")
    return b"".join(parts)


def parse(data: bytes) -> Tree:
    """The entries of a tree object. Every field is checked (a name that could leave its
    directory, an id that is not 64 lowercase hex digits), though the store has already
    checked the bytes against their id: a tree is read for every restore."""
    if not data.startswith(TREE_FORMAT):
        raise ValueError("not a tree object")
    tree: Tree = {}
    body = data[len(TREE_FORMAT):]
    if not body:
        return tree
    if not body.endswith(b"\0"):
        raise ValueError("truncated tree object")
    kinds, new, ids = _KINDS, tuple.__new__, []
    for record in body[:-1].split(b"\0"):
        head, _, bname = record.partition(b"\t")
        fields = head.split(b" ")
        try:
            kind_b, mode, oid, size = fields
            kind = kinds[kind_b]
            if not bname or b"/" in bname or bname == b"." or bname == b"..":
                raise ValueError
            if kind == LARGE:
                if oid != b"-":
                    raise ValueError
                oid = b""
            elif len(oid) != 64:
                raise ValueError
            else:
                ids.append(oid)
            tree[bname.decode(_ENCODING, "surrogateescape")] = new(
                Entry, (kind, int(mode, 8), oid.decode("ascii"), int(size)))
        except (ValueError, KeyError, UnicodeDecodeError):
            raise ValueError(f"bad tree entry {record[:80]!r}") from None
    if ids and not _HEX.issuperset(b"".join(ids)):
        raise ValueError("bad tree entry: an id that is not 64 lowercase hex digits")
    return tree


def tree_id(tree: Tree) -> tuple[str, bytes]:
    data = serialize(tree)
    return digest_of(data), data


EMPTY_TREE_ID, EMPTY_TREE_DATA = tree_id({})
