"""A checkpoint as a git commit, for people who want git's own tools on it.

Written with gitpython into the project's repository under `refs/rewind/<n>` (and, if asked,
a new branch). HEAD, the index, the work tree and existing branches are never touched: the
objects are added to the object database and a ref is pointed at the commit. The commit's
parent is the commit HEAD was on when the checkpoint was taken (so `git diff` against its
parent is what changed since that commit, wherever HEAD is now); HEAD's commit when that
one is gone from the repository, and none on an unborn branch. Git cannot hold what rewind
keeps apart: an empty directory has no entry in a git checkout, and a file rewind did not
store (too large) is left out and listed. So is an agent's hook settings file that holds
rewind's entries (this machine's absolute paths), and install's backup of one, when the
parent commit does not have it: `hooks install` keeps them out of git (hooks/gitexclude.py),
and an export keeps them out too.
"""

from __future__ import annotations

import io
import os
import re

from rewind.capture.snapshot import TreeLoader
from rewind.errors import ExportRefused
from rewind.hooks.install import BACKUP, PROJECT_SETTINGS, rewind_entries
from rewind.model import Checkpoint
from rewind.project import Project
from rewind.store.tree import DIR, FILE, LARGE, LINK

_BRANCH = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)[^\x00-\x20~^:?*\[\\\x7f]+(?<![/.])$")


def _kept_out_of_git(project: Project, rel: str, oid: str, parents: list) -> bool:
    """Whether `rel` is a file `hooks install` keeps out of git (hooks/gitexclude.py): an
    agent's settings file holding rewind's hook entries, or install's backup of one; never
    when the parent commit has it (a person who committed it chose to)."""
    import json
    agent = PROJECT_SETTINGS.get(rel)
    backup = rel.endswith(BACKUP) and rel[:-len(BACKUP)] in PROJECT_SETTINGS
    if agent is None and not backup:
        return False
    if parents:
        try:
            parents[0].tree[rel]
            return False
        except KeyError:
            pass
    if backup:
        return True
    from rewind.hooks.install import whole_file_ours
    whole = whole_file_ours(agent, project.store.get(oid))
    if whole is not None:                   # rewind's own plugin or hook file, not JSON
        return whole
    try:
        data = json.loads(project.store.get(oid))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and bool(rewind_entries(data, agent))


def export(project: Project, cp: Checkpoint, branch: str | None = None) -> dict:
    import git
    from gitdb import IStream
    try:
        repo = git.Repo(project.root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ExportRefused(f"{project.root} is not a git repository", hint="`git init` there first") from None
    if branch is not None:
        if not _BRANCH.match(branch) or branch.endswith(".lock"):
            raise ExportRefused(f"{branch!r} is not a valid branch name")
        if f"refs/heads/{branch}" in {r.path for r in repo.references}:
            raise ExportRefused(f"branch {branch!r} exists already; rewind never moves an existing branch",
                                hint="pick another name")
    parents, parent_note = [], None
    if cp.git_head:
        try:
            parents = [repo.commit(cp.git_head)]
        except (ValueError, git.BadName, git.BadObject):
            parent_note = f"the checkpoint's commit {cp.git_head[:12]} is no longer in the repository"
    if not parents:
        try:
            parents = [repo.head.commit]
        except ValueError:
            pass   # an unborn branch: a root commit
    load = TreeLoader(project.store)
    kept_out: list[str] = []
    odb = repo.odb
    left_out: list[str] = []
    blobs: dict[str, bytes] = {}

    def blob(oid: str) -> bytes:
        if oid not in blobs:
            data = project.store.get(oid)
            blobs[oid] = odb.store(IStream(b"blob", len(data), io.BytesIO(data))).binsha
        return blobs[oid]

    def write_tree(oid: str, prefix: str) -> bytes:
        entries = []
        for name, e in load(oid).items():
            bname = os.fsencode(name)
            if e.kind == DIR:
                entries.append((b"40000", bname, write_tree(e.oid, f"{prefix}{name}/"), True))
            elif e.kind == LINK:
                entries.append((b"120000", bname, blob(e.oid), False))
            elif e.kind == FILE:
                if _kept_out_of_git(project, prefix + name, e.oid, parents):
                    kept_out.append(prefix + name)
                    continue
                entries.append((b"100755" if e.mode & 0o111 else b"100644", bname, blob(e.oid), False))
            elif e.kind == LARGE:
                left_out.append(prefix + name)
        entries.sort(key=lambda t: t[1] + (b"/" if t[3] else b""))   # git's order
        data = b"".join(mode + b" " + name + b"\0" + sha for mode, name, sha, _ in entries)
        return odb.store(IStream(b"tree", len(data), io.BytesIO(data))).binsha

    tree = git.Tree(repo, write_tree(cp.tree, ""))
    first = (cp.message or "").strip().splitlines()[0][:72] if cp.message else ""
    message = (f"rewind checkpoint {cp.number}: {first or cp.kind}\n\n"
               f"Checkpoint {cp.number} ({cp.kind}) of {project.root}, taken {cp.created_at}"
               + (f" by {cp.agent}" if cp.agent else "") + ".\n"
               + (f"\nPrompt:\n{cp.message}\n" if cp.message and cp.kind == "prompt" else ""))
    commit = git.Commit.create_from_tree(repo, tree, message, parent_commits=parents, head=False)
    ref = f"refs/rewind/{cp.number}"
    git.Reference.create(repo, ref, commit, force=True)
    if branch is not None:
        git.Reference.create(repo, f"refs/heads/{branch}", commit, force=False)
    return {"commit": commit.hexsha, "ref": ref, "branch": branch, "left_out": left_out, "kept_out": kept_out,
            "parent": parents[0].hexsha if parents else None, "parent_note": parent_note}
