"""Restore, applying: carrying out a plan in the working tree, and cleaning up after one cut short.

Applying walks parent directories through file descriptors opened with O_NOFOLLOW, so a
symlink planted since the checkpoint can never redirect a write outside the project.
Files are written to a temporary name in their directory and renamed into place. A
journal records the restore while it runs; if the process dies, the next command removes
the temporary files and says how to finish or go back (`recover`). A path that is no
longer what the safety scan stored (`expectations`) is left as it is.
"""

from __future__ import annotations

import errno
import json
import os
import stat as S

from rewind.constants import COARSE_MTIME_NS, JOURNAL_DIR, TMP_PREFIX
from rewind.errors import RewindError, UnsafePath
from rewind.fsutil import read_fd, write_all
from rewind.history.restore_plan import LeftAlone, Op, RestorePlan
from rewind.model import StatEntry
from rewind.project import Project
from rewind.store.objects import digest_of
from rewind.store.tree import DIR, FILE, LINK
from rewind.structs import dataclass

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def journal_path(project: Project) -> str:
    return os.path.join(project.home, JOURNAL_DIR, f"restore-{project.id}.json")


class Dirs:
    """Directory fds below the root, opened without following symlinks."""

    def __init__(self, root: str):
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.fds: dict[str, int] = {"": self.root_fd}

    def open(self, rel_dir: str) -> int:
        fd = self.fds.get(rel_dir)
        if fd is not None:
            return fd
        parent, _, name = rel_dir.rpartition("/")
        pfd = self.open(parent)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except OSError as e:
            raise UnsafePath(f"cannot enter {rel_dir!r} without following a link: {e.strerror}",
                             hint="something changed the tree during the restore; run the restore again") from None
        self.fds[rel_dir] = fd
        return fd

    def forget(self, rel_dir: str) -> None:
        for key in [k for k in self.fds if k == rel_dir or k.startswith(rel_dir + "/")]:
            os.close(self.fds.pop(key))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def split_path(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent, name


def file_mode(mode: int) -> int:
    """The mode a restore gives a file. It cannot give back the owner (a tree records none),
    so root writes no setuid or setgid bit: another user's setuid file would come back as a
    setuid-root one."""
    if os.geteuid() == 0:
        return mode & ~(S.S_ISUID | S.S_ISGID)
    return mode


def _chmod(pfd: int, name: str, mode: int) -> None:
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
    try:
        st = os.fstat(fd)
        if S.S_ISLNK(st.st_mode):
            return
        os.chmod(f"/proc/self/fd/{fd}", file_mode(mode) if S.S_ISREG(st.st_mode) else mode)
    finally:
        os.close(fd)


def _note_written(written: dict[str, StatEntry], op: Op, name: str, pfd: int, mine: os.stat_result) -> None:
    """The stat-cache entry of a file just written, if it is still the file written (same
    inode, size and mtime; the rename changed only its ctime, read here)."""
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except OSError:
        return
    if S.S_ISREG(st.st_mode) and (st.st_ino, st.st_size, st.st_mtime_ns) == (mine.st_ino, mine.st_size,
                                                                           mine.st_mtime_ns):
        written[op.path] = StatEntry((FILE, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                      S.S_IMODE(st.st_mode), op.entry.oid))


@dataclass(frozen=True)
class Expectation:
    """What the safety scan stored at a path an operation replaces or removes. A file's
    stat fields are None when the stat cache does not vouch for it (then `reread`)."""
    kind: str                       # FILE | LINK | DIR
    oid: str | None = None          # a file's or a link's content
    ino: int | None = None
    size: int | None = None         # negative: an entry the cache keeps as still suspect
    mtime_ns: int | None = None
    ctime_ns: int | None = None     # None for a file with other links too (see `expectations`)
    reread: bool = False            # the stat cannot tell a later write: hash the bytes again


def expectations(project: Project, plan: RestorePlan, scan_ns: int,
                 hardlinks: set[str] = frozenset()) -> dict[str, Expectation | None]:
    """For each path an operation replaces or removes, what the safety scan stored there
    (None: nothing). `reread`: the stat cannot tell a later write (modified within COARSE_MTIME_NS
    of the scan, on a filesystem whose clock may be whole seconds), so the bytes are hashed
    again. A file with other links has no ctime to compare: the restore's own rename over
    another of its names changes it."""
    cache = project.catalog.statcache_lookup(project.id)
    out: dict[str, Expectation | None] = {}
    for op in plan.ops:
        if op.action not in ("delete", "write", "symlink", "rmdir", "mkdir") or op.path in out:
            continue
        c = op.old
        if c is None:
            out[op.path] = None
        elif c.kind == FILE:
            row = cache.get(op.path)
            if row is None or row.kind != FILE or row.oid != c.oid:
                out[op.path] = Expectation(FILE, c.oid, reread=True)
            else:
                out[op.path] = Expectation(FILE, c.oid, ino=row.ino, size=row.size, mtime_ns=row.mtime_ns,
                                           ctime_ns=None if op.path in hardlinks else row.ctime_ns,
                                           reread=row.size < 0 or row.mtime_ns >= scan_ns - COARSE_MTIME_NS)
        elif c.kind == LINK:
            out[op.path] = Expectation(LINK, c.oid)
        else:
            out[op.path] = Expectation(DIR)
    return out


def _changed(pfd: int, name: str, exp: Expectation | None) -> str | None:
    """Why the path no longer is what the safety scan stored, or None if it still is."""
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        return None                 # gone: nothing there to lose
    if exp is None:
        return "created since the scan"
    if exp.kind == DIR:
        return None if S.S_ISDIR(st.st_mode) else "replaced since the scan"
    if exp.kind == LINK:
        if not S.S_ISLNK(st.st_mode):
            return "replaced since the scan"
        try:
            found = digest_of(os.fsencode(os.readlink(name, dir_fd=pfd)))
        except OSError:
            return "changed since the scan"
        return None if found == exp.oid else "changed since the scan"
    if not S.S_ISREG(st.st_mode):
        return "replaced since the scan"
    if exp.ino is not None and ((st.st_ino, st.st_mtime_ns) != (exp.ino, exp.mtime_ns)
                                or (exp.ctime_ns is not None and st.st_ctime_ns != exp.ctime_ns)
                                or (exp.size >= 0 and st.st_size != exp.size)):
        return "changed since the scan"
    if exp.reread:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
            try:
                same = digest_of(read_fd(fd)) == exp.oid
            finally:
                os.close(fd)
        except OSError:
            return "unreadable since the scan"
        if not same:
            return "changed since the scan"
    return None


def apply_plan(project: Project, plan: RestorePlan, data: dict[str, bytes], tag: str, progress=None,
               written: dict[str, StatEntry] | None = None,
               expect: dict[str, Expectation | None] | None = None) -> int:
    """Apply the plan's operations; `written` gets, for each file written, the stat-cache
    entry of what was written (the scan after the restore then need not read it back).
    With `expect` (expectations()), a path that is no longer what the safety scan stored
    is left as it is (plan.left): another process wrote it after the scan, and what it
    holds now is in no checkpoint. Paths inside a directory left alone are left too."""
    dirs = Dirs(project.root)
    counter = 0
    done = 0
    left_dirs: set[str] = set()
    expect = dict(expect) if expect is not None else None
    try:
        for i, op in enumerate(plan.ops):
            if progress is not None and i % 64 == 0:
                progress("writing", i, len(plan.ops))
            parent, name = split_path(op.path)
            if expect is not None:
                if parent in left_dirs or any(parent.startswith(d + "/") for d in left_dirs):
                    plan.left.append(LeftAlone(op.path, "inside a directory left as it is"))
                    continue
            pfd = dirs.open(parent)
            if expect is not None and op.path in expect:
                why = _changed(pfd, name, expect.pop(op.path))   # at the first op on a path only
                if why is not None:
                    plan.left.append(LeftAlone(op.path, why))
                    if op.action in ("mkdir", "rmdir"):
                        left_dirs.add(op.path)
                    continue
            if op.action == "rmdir":
                try:
                    dirs.forget(op.path)
                    os.rmdir(name, dir_fd=pfd)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    if expect is None or e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    plan.left.append(LeftAlone(op.path, "holds files written since the scan"))
                done += 1
                plan.applied = done
                continue
            if op.action == "delete":
                try:
                    os.unlink(name, dir_fd=pfd)
                except FileNotFoundError:
                    pass                # gone meanwhile: as the plan wanted
            elif op.action == "mkdir":
                os.mkdir(name, 0o700, dir_fd=pfd)
            elif op.action in ("write", "symlink"):
                counter += 1
                tmp = f"{TMP_PREFIX}{tag}.{counter}"
                blob = data.get(op.entry.oid)
                if blob is None:
                    blob = project.store.get(op.entry.oid)
                try:
                    if op.action == "write":
                        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     0o600, dir_fd=pfd)
                        try:
                            write_all(fd, blob)
                            os.fchmod(fd, file_mode(op.entry.mode))
                            mine = os.fstat(fd) if written is not None else None
                        finally:
                            os.close(fd)
                    else:
                        os.symlink(os.fsdecode(blob), tmp, dir_fd=pfd)
                        mine = None
                    os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
                except Exception:
                    try:
                        os.unlink(tmp, dir_fd=pfd)      # a full disk leaves no temporary file
                    except OSError:
                        pass
                    raise
                if mine is not None:
                    _note_written(written, op, name, pfd, mine)
            elif op.action == "chmod":
                _chmod(pfd, name, op.entry.mode)
            done += 1
            plan.applied = done
    finally:
        dirs.close()
    return done


def recover(project: Project) -> dict | None:
    """Clean up after a restore that was killed half-way. Returns what was found."""
    jpath = journal_path(project)
    try:
        with open(jpath) as f:
            journal = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        journal = {"dirs": [], "tag": None}
    removed = 0
    prefix = f"{TMP_PREFIX}{journal.get('tag')}." if journal.get("tag") else TMP_PREFIX
    from rewind.capture.ignore import is_own_tmp
    dirs = Dirs(project.root)
    try:
        for rel in journal.get("dirs", []):
            if not isinstance(rel, str) or ".." in rel.split("/"):
                continue
            try:
                fd = dirs.open(rel)
                names = os.listdir(fd)
            except (OSError, RewindError):
                continue
            for name in names:
                if name.startswith(prefix) and is_own_tmp(name):
                    try:
                        os.unlink(name, dir_fd=fd)
                        removed += 1
                    except OSError:
                        pass
    finally:
        dirs.close()
    os.unlink(jpath)
    journal["temp_files_removed"] = removed
    return journal

