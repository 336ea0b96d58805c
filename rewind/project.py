"""Which project a path belongs to, its git state, and the handles to its store."""

from __future__ import annotations

import os

from rewind import locations
from rewind.catalog.db import Catalog
from rewind.errors import NotInProject, RefusedRoot
from rewind.store.objects import Store
from rewind.structs import dataclass


def git_toplevel(path: str) -> str | None:
    """The work tree root containing `path` (a `.git` dir or file marks it), or None."""
    d = path
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def resolve_root(path: str) -> str:
    """A session's project: the git top-level when inside a work tree, else the directory."""
    real = os.path.realpath(path)
    return git_toplevel(real) or real


MAX_GIT_FILE = 64 * 1024
MAX_PACKED_REFS = 64 * 1024 * 1024


def _git_text(path: str, limit: int = MAX_GIT_FILE) -> str:
    from rewind.fsutil import read_small
    return read_small(path, limit).decode("utf-8", "replace")


def _confined_ref(ref: str) -> bool:
    """A ref HEAD may name: under refs/, no `..`, nothing odd (git check-ref-format, roughly).
    `ref: ../../../etc/passwd` would read a file outside the repository."""
    parts = ref.split("/")
    return (ref.startswith("refs/") and ".." not in parts and "" not in parts
            and not any(c in ref for c in "\0\\:?*[ ~^") and all(ord(c) >= 32 for c in ref))


def git_state(root: str) -> tuple[str | None, str | None]:
    """(HEAD commit, branch) read from the .git files directly; no subprocess. Each file is
    read without blocking, regular files only, bounded; the ref HEAD names is looked up only
    inside the repository's git directories."""
    gitdir = os.path.join(root, ".git")
    try:
        if os.path.isfile(gitdir):
            line = _git_text(gitdir).strip()
            if line.startswith("gitdir:"):
                gitdir = os.path.normpath(os.path.join(root, line[7:].strip()))
        head = _git_text(os.path.join(gitdir, "HEAD")).strip()
    except OSError:
        return None, None
    if not head.startswith("ref:"):
        return (head if len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head) else None), None
    ref = head[4:].strip()
    if not _confined_ref(ref):
        return None, None
    branch = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    common = gitdir
    try:
        common = os.path.normpath(os.path.join(gitdir, _git_text(os.path.join(gitdir, "commondir")).strip()))
    except OSError:
        pass
    for base in (gitdir, common):
        try:
            value = _git_text(os.path.join(base, ref)).strip()
            return value or None, branch
        except OSError:
            pass
    try:
        for line in _git_text(os.path.join(common, "packed-refs"), MAX_PACKED_REFS).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0], branch
    except OSError:
        pass
    return None, branch  # unborn branch


def git_mark(root: str) -> str:
    """The git state as one string a shell window keeps ("HEAD BRANCH", either part empty;
    "" outside a repository), compared when the window closes (a move of HEAD or branch)."""
    head, branch = git_state(root)
    return "" if head is None and branch is None else f"{head or ''} {branch or ''}"


def git_unmark(mark: str | None) -> tuple[str | None, str | None]:
    """(HEAD, branch) from a `git_mark`."""
    head, _, branch = (mark or "").partition(" ")
    return head or None, branch or None


@dataclass
class Project:
    home: str
    root: str
    id: int
    catalog: Catalog
    store: Store

    def close(self, keep_catalog: bool = False) -> None:
        """What this process found damaged is remembered in the catalog first (best effort:
        a catalog that cannot take it must not turn a read into a failure). `keep_catalog`:
        the catalog was lent (a watcher's serving connection) and stays open."""
        if self.store.found_damaged:
            try:
                from rewind.clock import now_ns
                self.catalog.note_damaged(self.store.found_damaged, now_ns())
            except Exception:
                pass
        if not keep_catalog:
            self.catalog.close()


def open_catalog() -> tuple[str, Catalog]:
    home = locations.data_dir()
    return home, Catalog(home)


SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/dev", "/proc",
                "/sys", "/run")                       # these and everything below them
SYSTEM_DIRS = ("/", "/var", "/opt", "/srv", "/tmp", "/home", "/root", "/mnt", "/media")   # these alone


def refused_root(root: str) -> str | None:
    """Why `root` cannot be a project unless the user's config allows it (`allow_roots`): a
    payload's cwd, or a command run in the wrong place, must not make the whole filesystem,
    /etc (and its shadow file) or the home directory itself a project."""
    home = os.path.realpath(os.path.expanduser("~"))
    if root in SYSTEM_DIRS or any(root == t or root.startswith(t + "/") for t in SYSTEM_TREES):
        why = "a system directory"
    elif root == home:
        why = "your home directory itself"
    else:
        return None
    from rewind.config import allowed_roots
    return None if root in allowed_roots() else why


def open_project(root: str, create: bool) -> Project:
    home, catalog = open_catalog()
    own = os.path.realpath(home)
    if create and (root == own or root.startswith(own.rstrip("/") + "/")):
        catalog.close()
        raise RefusedRoot(f"{root} is inside rewind's own data directory ({own}); it cannot be a project",
                          hint="run rewind in your project's directory, or pass --project DIR")
    why = refused_root(root) if create and catalog.project_id(root, create=False) is None else None
    if why:
        catalog.close()
        raise RefusedRoot(f"{root} is {why}: rewind does not take it as a project",
                          hint="run rewind in your project's directory, or add it to allow_roots in "
                               "rewind's config.toml")
    pid = catalog.project_id(root, create=create)
    if pid is None:
        catalog.close()
        raise NotInProject(f"no checkpoints for {root}",
                           hint="run `rewind save` there first, or pass --project DIR")
    return Project(home, root, pid, catalog, Store(home))


def find_project(start: str, catalog: Catalog) -> str:
    """For the CLI: the known project whose root contains `start` (deepest wins), else the
    directory's own root (git top-level or the directory)."""
    real = os.path.realpath(start)
    best = None
    for _, root in catalog.projects():
        if real == root or real.startswith(root.rstrip("/") + "/"):
            if best is None or len(root) > len(best):
                best = root
    return best or resolve_root(real)
