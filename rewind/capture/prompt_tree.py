"""The tree as it was at a pending prompt, rebuilt from the tree now, the watcher's events
and the edit tools' pre-states (the rules are in pending.py's docstring)."""

from __future__ import annotations

from rewind.model import PendingEdit, SeqEvent
from rewind.store.tree import DIR, Entry, tree_id
from rewind.store.treediff import entry_at


def files_under(load, entry) -> list[str]:
    """The relative paths of every non-directory entry below directory `entry`."""
    out, stack = [], [("", entry.oid)]
    while stack:
        prefix, oid = stack.pop()
        for name, e in load(oid).items():
            if e.kind == DIR:
                stack.append((prefix + name + "/", e.oid))
            else:
                out.append(prefix + name)
    return out


def patch_tree(store, load, root: str, patch: dict) -> str:
    """Tree `root` with `patch` applied (path -> Entry, or None to remove it; a path set
    whole wins over patches below it). New tree objects go to `store` (flushed by the caller)."""

    def build(oid: str | None, changes: dict) -> str:
        tree = dict(load(oid)) if oid else {}
        below: dict[str, dict] = {}
        for path, entry in changes.items():
            head, sep, rest = path.partition("/")
            if not sep:
                if entry is None:
                    tree.pop(head, None)
                else:
                    tree[head] = entry
            else:
                below.setdefault(head, {})[rest] = entry
        for name, sub in below.items():
            if name in changes:
                continue
            cur = tree.get(name)
            base = cur.oid if cur is not None and cur.kind == DIR else None
            if base is None and all(v is None for v in sub.values()):
                continue
            tree[name] = Entry(DIR, cur.mode if base is not None else 0o755, build(base, sub), 0)
        new, data = tree_id(tree)
        store.put(data, new)
        load.cache[new] = tree
        return new

    return build(root, patch) if patch else root


def tree_at(load, now_root: str, first_root: str | None, first_done_seq: int | None, at_ns: int,
            events: dict[str, list[SeqEvent]], edits: dict[str, list[PendingEdit]],
            before_root: str | None = None) -> tuple[dict, list[str]]:
    """(the patch that turns the tree now into the tree at `at_ns`, the paths whose content
    then is not known). `first_root`: the first scan's tree, and `first_done_seq` the event
    seq the watcher had reached when it had read everything (None: no such scan);
    `before_root`: a tree from before the prompt (the first scan's, else the last one);
    `events`: path -> its watcher's events since the first scan began, oldest first;
    `edits`: path -> the edit tools' pre-states, oldest first."""
    patch: dict = {}
    unknown: list[str] = []
    created_dirs: list[str] = []
    for path in sorted(set(events) | set(edits)):
        if not path or path.startswith("\0"):
            continue
        seen = events.get(path, [])
        post = [e for e in seen if e.ts > at_ns]
        edit = next((e for e in edits.get(path, []) if e.ts > at_ns), None)
        now = entry_at(load, now_root, path)
        if edit is None and now is not None and now.kind == DIR:
            if any(e.kind == "c" for e in post):
                created_dirs.append(path)
            continue             # a directory's own events: its entries report themselves
        if edit is not None:
            if edit.kind == "?":
                unknown.append(path)
                continue
            patch[path] = None if edit.kind == "-" else Entry(edit.kind, edit.mode, edit.oid, edit.size)
            if any(e.ts < edit.ts for e in post):
                unknown.append(path)             # changed between the prompt and the tool
            continue
        if not post:
            continue                             # as it is now
        pre = len(seen) - len(post)
        before = entry_at(load, before_root, path) if before_root else None
        if not pre and post[0].kind == "c" and before_root is not None and before is None:
            # made after the prompt (a tool's temporary file, say): absent then. (A "c" is
            # also a rename over a file that was there: only for a path the tree before lacked.)
            patch[path] = None
            continue
        if not pre and first_root is not None and first_done_seq is not None and \
                all(e.seq > first_done_seq for e in seen):
            patch[path] = entry_at(load, first_root, path)   # untouched while the first scan read
            continue
        unknown.append(path)
        if first_root is not None and not pre:
            patch[path] = entry_at(load, first_root, path)   # read before or after the change: a guess
    for path in created_dirs:
        now = entry_at(load, now_root, path)
        inside = files_under(load, now)
        if all(patch.get(f"{path}/{f}", 0) is None for f in inside):
            patch[path] = None                   # made for what an edit tool wrote after the prompt
        elif not any(f"{path}/{f}" in events for f in inside):
            unknown.append(path)                 # moved in whole after the prompt
    return patch, unknown
