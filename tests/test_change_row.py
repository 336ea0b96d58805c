"""`ChangeRow.placeholder`: a change that no tree entry stands behind (a write outside the
trees, a git move, who wrote the content a restore put back) is built in one way."""

from __future__ import annotations

from rewind.model import ChangeRow


def test_a_placeholder_row_has_no_tree_entry_behind_it_unless_given():
    row = ChangeRow.placeholder("out/side.txt", source="tool", tool="Write", session_id="s1", flags=["outside"])
    assert row == ChangeRow("out/side.txt", "modified", None, None, None, None, None, None, None, None,
                            source="tool", tool="Write", session_id="s1", flags=["outside"])
    moved = ChangeRow.placeholder(".git/HEAD", old_oid="a" * 40, new_oid="b" * 40, flags=["git"])
    assert (moved.status, moved.old_oid, moved.new_oid, moved.old_kind, moved.new_size) == \
        ("modified", "a" * 40, "b" * 40, None, None)
    assert moved.source == "unknown" and moved.restored is None
    assert ChangeRow.placeholder("gone.txt", "deleted").status == "deleted"
    assert ChangeRow.placeholder("a").flags is not ChangeRow.placeholder("b").flags   # each its own list
