"""Restore: plan first, then take a safety checkpoint, verify, and apply.

The plan is a list of operations per path (delete, rmdir, mkdir, write, symlink, chmod)
in an order that is valid when run one after the other. Paths a scan did not store
(ignored, unreadable, special, large, still changing) are never deleted or overwritten,
and neither are the directories holding them; the plan lists them as skipped.

Applying walks parent directories through file descriptors opened with O_NOFOLLOW, so a
symlink planted since the checkpoint can never redirect a write outside the project.
Files are written to a temporary name in their directory and renamed into place. A
journal records the restore while it runs; if the process dies, the next command removes
the temporary files and says how to finish or go back (`recover`).
"""

from __future__ import annotations

import errno
import json
import os
import stat as S
import time
from rewind.structs import dataclass
from rewind.structs import field

from rewind.model import Checkpoint
from rewind.clock import iso_now
from rewind.constants import JOURNAL_DIR, TMP_PREFIX
from rewind.diff import path_selector
from rewind.errors import CheckpointNotFound, RewindError
from rewind.fsutil import atomic_write, ensure_private_dir, read_fd, write_all
from rewind.capture.ignore import IgnoreRules
from rewind.lock import project_lock
from rewind.store.objects import digest_of
from rewind.project import Project
from rewind.capture.scan import ScanResult
from rewind.capture.snapshot import TreeLoader
from rewind.capture.snapshot import record
from rewind.capture.snapshot import working_scan
from rewind.store.tree import DIR
from rewind.store.tree import FILE
from rewind.store.tree import LARGE
from rewind.store.tree import LINK
from rewind.store.tree import Entry

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MEMORY_BUDGET = 256 * 1024 * 1024


@dataclass
class Op:
    action: str                 # delete | rmdir | mkdir | write | symlink | chmod
    path: str
    entry: Entry | None = None  # what the path becomes (mkdir, write, symlink, chmod)
    old: Entry | None = None    # what is there now


@dataclass
class RestorePlan:
    target: Checkpoint
    ops: list[Op] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (path, why)
    left: list[tuple[str, str]] = field(default_factory=list)      # (path, why): changed since the scan
    applied: int = 0                                                # operations carried out so far
    kept_hooks: list[str] = field(default_factory=list)   # agents' settings files keeping rewind's hooks
    extra: dict[str, bytes] = field(default_factory=dict)  # contents made by the plan (not in the store)

    @property
    def empty(self) -> bool:
        return not self.ops

    def overwrites(self) -> list[Op]:
        """Operations that replace or remove content that exists now."""
        return [op for op in self.ops if op.old is not None and op.action in ("delete", "write", "symlink")]

    def touched(self) -> list[str]:
        return sorted({op.path for op in self.ops})


def plan_restore(project: Project, target: Checkpoint, current: ScanResult,
                 paths: list[str] | None = None) -> RestorePlan:
    load = TreeLoader(project.store, current.trees)
    plan = RestorePlan(target)
    protected = current.protected
    blocked: set[str] = set()  # directories that hold protected paths
    for p in protected:
        blocked.update(_ancestors(p))
    select = path_selector(paths)
    dir_modes: list[Op] = []

    def rules_in(tree, rel_dir: str, parent: IgnoreRules) -> IgnoreRules:
        """The checkpoint's own ignore rules inside one of its directories."""
        contents = [project.store.get(tree[n].oid) for n in (".gitignore", ".rewindignore")
                    if n in tree and tree[n].kind == FILE]
        return parent.with_contents(rel_dir, contents) if contents else parent

    def remove(path: str, c: Entry, trules: IgnoreRules, check_self: bool = True) -> bool:
        """Ops removing `c` at `path`; False when something there must be kept. A path
        the checkpoint's own rules ignore is kept: the checkpoint says nothing about it."""
        if check_self and trules.is_ignored(path, c.kind == DIR):
            plan.skipped.append((path, "ignored at the checkpoint: left alone"))
            blocked.update(_ancestors(path))
            return False
        if c.kind != DIR:
            plan.ops.append(Op("delete", path, None, c))
            return True
        sub = load(c.oid)
        for name in sorted(sub):
            remove(f"{path}/{name}", sub[name], trules)
        if path in blocked:
            plan.skipped.append((path, "directory kept: it holds files rewind does not remove"))
            return False
        plan.ops.append(Op("rmdir", path, None, c))
        return True

    def create(path: str, t: Entry) -> None:
        if t.kind == DIR:
            plan.ops.append(Op("mkdir", path, t))
            dir_modes.append(Op("chmod", path, t))
            sub = load(t.oid)
            for name in sorted(sub):
                create(f"{path}/{name}", sub[name])
        elif t.kind == FILE:
            plan.ops.append(Op("write", path, t))
        elif t.kind == LINK:
            plan.ops.append(Op("symlink", path, t))
        else:
            plan.skipped.append((path, "too large to have been stored: cannot be restored"))

    def walk(cur_oid: str | None, tgt_oid: str | None, prefix: str, trules: IgnoreRules) -> None:
        cur = load(cur_oid) if cur_oid else {}
        tgt = load(tgt_oid) if tgt_oid else {}
        for name in sorted(cur.keys() | tgt.keys()):
            path = f"{prefix}/{name}" if prefix else name
            where = select(path)
            if where is None:
                continue
            c, t = cur.get(name), tgt.get(name)
            if where == "anc":
                if path in protected:
                    plan.skipped.append((path, "not stored by rewind (ignored, unreadable or "
                                               "special): left alone"))
                    continue
                if t is not None and t.kind != DIR:
                    t = None  # the selected path does not exist in the checkpoint
                if c is not None and c.kind != DIR:
                    if t is None:
                        continue  # nothing selected exists on either side below here
                    plan.ops.append(Op("delete", path, None, c))
                    c = None
                if c is None and t is not None:
                    plan.ops.append(Op("mkdir", path, t))
                    dir_modes.append(Op("chmod", path, t))
                sub_rules = rules_in(load(t.oid), path, trules) if t is not None else trules
                walk(c.oid if c else None, t.oid if t else None, path, sub_rules)
                continue
            if c == t:
                continue
            if path in protected:
                if t is not None and not (t.kind == LARGE and c is not None and c.kind == LARGE):
                    plan.skipped.append((path, "not stored by rewind (ignored, unreadable, special "
                                               "or too large): left alone"))
                continue
            if c is not None and t is not None and c.kind == DIR and t.kind == DIR:
                if c.oid != t.oid:
                    walk(c.oid, t.oid, path, rules_in(load(t.oid), path, trules))
                if c.mode != t.mode:
                    dir_modes.append(Op("chmod", path, t, c))
                continue
            if t is not None and t.kind == LARGE:
                plan.skipped.append((path, "too large to have been stored: cannot be restored"))
                continue
            if c is not None and t is not None and c.kind == t.kind == FILE and c.oid == t.oid:
                plan.ops.append(Op("chmod", path, t, c))
                continue
            if c is not None and (c.kind == DIR or t is None or t.kind == DIR):
                if not remove(path, c, trules, check_self=t is None):
                    if t is not None:
                        plan.skipped.append((path, "cannot replace a directory that holds files "
                                                   "rewind does not store"))
                    continue
                c = None
            if t is not None:
                if c is not None:  # file <-> link or new content: replaced by rename
                    action = "write" if t.kind == FILE else "symlink"
                    plan.ops.append(Op(action, path, t, c))
                else:
                    create(path, t)

    def keep_hooks() -> None:
        """An agent's settings file is restored like any file, but keeps rewind's own hook
        entries: a restore never stops the recording (DESIGN)."""
        from rewind.hooks.install import PROJECT_SETTINGS, keep_ours
        for i, op in enumerate(plan.ops):
            if op.path not in PROJECT_SETTINGS or op.action not in ("write", "delete") or \
                    op.old is None or op.old.kind != FILE:
                continue
            target_bytes = project.store.get(op.entry.oid) if op.action == "write" else None
            merged = keep_ours(op.path, project.store.get(op.old.oid), target_bytes)
            if merged is None or merged == target_bytes:
                continue
            oid = digest_of(merged)
            if oid == op.old.oid:
                plan.ops[i] = None          # already what it would become
            else:
                mode = op.entry.mode if op.entry is not None else op.old.mode
                plan.ops[i] = Op("write", op.path, Entry(FILE, mode, oid, len(merged)), op.old)
                plan.extra[oid] = merged
            plan.kept_hooks.append(op.path)
        keep_dirs = {a for path in plan.kept_hooks for a in _ancestors(path)}
        plan.ops = [op for op in plan.ops if op is not None
                    and not (op.action == "rmdir" and op.path in keep_dirs)]

    root_tree = load(target.tree)
    walk(current.root, target.tree, "",
         IgnoreRules.for_root_contents(project.root, [project.store.get(root_tree[n].oid)
                                                      for n in (".gitignore", ".rewindignore")
                                                      if n in root_tree and root_tree[n].kind == FILE]))
    plan.ops.extend(reversed(dir_modes))  # deepest first, after every write inside them
    keep_hooks()
    return plan


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


# -- applying ------------------------------------------------------------------------------

def _journal_path(project: Project) -> str:
    return os.path.join(project.home, JOURNAL_DIR, f"restore-{project.id}.json")


class _Dirs:
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
            raise RewindError(f"cannot enter {rel_dir!r} without following a link: {e.strerror}",
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


def _split(path: str) -> tuple[str, str]:
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


def _note_written(written: dict, op: Op, name: str, pfd: int, mine: os.stat_result) -> None:
    """The stat-cache entry of a file just written, if it is still the file written (same
    inode, size and mtime; the rename changed only its ctime, read here)."""
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except OSError:
        return
    if S.S_ISREG(st.st_mode) and (st.st_ino, st.st_size, st.st_mtime_ns) == (mine.st_ino, mine.st_size,
                                                                           mine.st_mtime_ns):
        written[op.path] = (FILE, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                            S.S_IMODE(st.st_mode), op.entry.oid)


STILL_NS = 2 * 10**9    # a file modified this close to the scan: its stat cannot vouch (coarse clocks)


def expectations(project: Project, plan: RestorePlan, scan_ns: int,
                 hardlinks: set[str] = frozenset()) -> dict[str, tuple | None]:
    """For each path an operation replaces or removes, what the safety scan stored there:
    ("F", ino, size, mtime_ns, ctime_ns, oid, reread) | ("L", oid) | ("D",) | None (nothing).
    `reread`: the stat cannot tell a later write (modified within STILL_NS of the scan, on
    a filesystem whose clock may be whole seconds), so the bytes are hashed again. A file
    with other links has no ctime to compare: the restore's own rename over another of its
    names changes it."""
    cache = project.catalog.statcache_lookup(project.id)
    out: dict[str, tuple | None] = {}
    for op in plan.ops:
        if op.action not in ("delete", "write", "symlink", "rmdir", "mkdir") or op.path in out:
            continue
        c = op.old
        if c is None:
            out[op.path] = None
        elif c.kind == FILE:
            row = cache.get(op.path)
            if row is None or row[0] != FILE or row[6] != c.oid:
                out[op.path] = (FILE, None, None, None, None, c.oid, True)
            else:
                out[op.path] = (FILE, row[4], row[1], row[2], None if op.path in hardlinks else row[3], c.oid,
                                row[1] < 0 or row[2] >= scan_ns - STILL_NS)
        elif c.kind == LINK:
            out[op.path] = (LINK, c.oid)
        else:
            out[op.path] = (DIR,)
    return out


def _changed(pfd: int, name: str, exp: tuple | None) -> str | None:
    """Why the path no longer is what the safety scan stored, or None if it still is."""
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        return None                 # gone: nothing there to lose
    if exp is None:
        return "created since the scan"
    kind = exp[0]
    if kind == DIR:
        return None if S.S_ISDIR(st.st_mode) else "replaced since the scan"
    if kind == LINK:
        if not S.S_ISLNK(st.st_mode):
            return "replaced since the scan"
        try:
            return None if digest_of(os.fsencode(os.readlink(name, dir_fd=pfd))) == exp[1] else "changed since the scan"
        except OSError:
            return "changed since the scan"
    if not S.S_ISREG(st.st_mode):
        return "replaced since the scan"
    _, ino, size, mtime, ctime, oid, reread = exp
    if ino is not None and ((st.st_ino, st.st_mtime_ns) != (ino, mtime)
                            or (ctime is not None and st.st_ctime_ns != ctime)
                            or (size >= 0 and st.st_size != size)):
        return "changed since the scan"
    if reread:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
            try:
                same = digest_of(read_fd(fd)) == oid
            finally:
                os.close(fd)
        except OSError:
            return "unreadable since the scan"
        if not same:
            return "changed since the scan"
    return None


def apply_plan(project: Project, plan: RestorePlan, data: dict[str, bytes], tag: str, progress=None,
               written: dict[str, tuple] | None = None, expect: dict[str, tuple | None] | None = None) -> int:
    """Apply the plan's operations; `written` gets, for each file written, the stat-cache
    entry of what was written (the scan after the restore then need not read it back).
    With `expect` (expectations()), a path that is no longer what the safety scan stored
    is left as it is (plan.left): another process wrote it after the scan, and what it
    holds now is in no checkpoint. Paths inside a directory left alone are left too."""
    dirs = _Dirs(project.root)
    counter = 0
    done = 0
    left_dirs: set[str] = set()
    expect = dict(expect) if expect is not None else None
    try:
        for i, op in enumerate(plan.ops):
            if progress is not None and i % 64 == 0:
                progress("writing", i, len(plan.ops))
            parent, name = _split(op.path)
            if expect is not None:
                if parent in left_dirs or any(parent.startswith(d + "/") for d in left_dirs):
                    plan.left.append((op.path, "inside a directory left as it is"))
                    continue
            pfd = dirs.open(parent)
            if expect is not None and op.path in expect:
                why = _changed(pfd, name, expect.pop(op.path))   # at the first op on a path only
                if why is not None:
                    plan.left.append((op.path, why))
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
                    plan.left.append((op.path, "holds files written since the scan"))
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


def restore(project: Project, target: Checkpoint, paths: list[str] | None = None,
            is_undo: bool = False, lock_timeout: float = 30.0, progress=None, before_apply=None,
            skip_if_empty: bool = False):
    """Scan the tree (storing it), plan from that scan, take the safety checkpoint of it,
    verify every object, apply. `before_apply(plan, scan)` sees the plan before anything is
    written (it may raise to stop); with `skip_if_empty` an empty plan takes no checkpoint
    and returns (None, plan, 0). Returns (safety checkpoint, plan applied, operations done)."""
    with project_lock(project.home, project.id, timeout=lock_timeout):
        recover(project)
        if project.catalog.checkpoint(project.id, target.number) is None:
            raise CheckpointNotFound(f"checkpoint {target.number} was dropped while this rewind waited",
                                     hint="the ring or the retention removed it; `rewind list` shows what is left")
        scan_ns = time.time_ns()
        _, current, _ = record(project, None, locked=True, full=True, progress=progress)
        plan = plan_restore(project, target, current, paths)
        if before_apply is not None:
            before_apply(plan, current)
        if skip_if_empty and plan.empty:
            return None, plan, 0
        # every object the plan needs is read and verified before anything is recorded or
        # written: a damaged object stops the rewind with the ring as it was
        data: dict[str, bytes] = {}
        budget = _MEMORY_BUDGET
        for op in plan.ops:
            if op.action in ("write", "symlink") and op.entry.oid not in data:
                if op.entry.oid in plan.extra:
                    data[op.entry.oid] = plan.extra[op.entry.oid]
                    continue
                blob = project.store.get(op.entry.oid)
                project.store.note_binary(op.entry.oid, blob)
                if len(blob) <= budget:
                    data[op.entry.oid] = blob
                    budget -= len(blob)
        _whole(project, plan)
        if plan.extra:              # contents the plan made (settings keeping rewind's hooks)
            for oid, blob in plan.extra.items():
                project.store.put(blob, oid)
            project.store.flush()
        # the checkpoint of the tree just scanned: nothing is read again; on disk (objects and
        # catalog rows) before the first write, a power cut included. It evicts nothing until
        # the restore has written something (a restore that fails first leaves the ring).
        with project.catalog.durable():
            safety, _, _ = record(project, "rewind", restore_target=target.number, locked=True, touched={},
                                  message=("undo" if is_undo else f"before rewind to {target.number}"),
                                  settings=None)
            with project.catalog.transaction():
                project.catalog.insert_restore(project.id, target.number, safety.number, is_undo,
                                               plan.touched(), iso_now())
        tag = f"{safety.number}"
        journal = {"project": project.root, "target": target.number, "safety": safety.number,
                   "tag": tag, "started_at": iso_now(),
                   "dirs": sorted({_split(op.path)[0] for op in plan.ops})}
        jpath = _journal_path(project)
        ensure_private_dir(os.path.dirname(jpath))
        atomic_write(jpath, json.dumps(journal).encode())
        written: dict[str, tuple] = {}
        try:
            done = apply_plan(project, plan, data, tag, progress, written,
                              expect=expectations(project, plan, scan_ns, current.hardlinks))
        except Exception as e:
            raise _failed(project, plan, safety, jpath, e) from None
        os.sync()
        os.unlink(jpath)
        # what the restore wrote is attributed to it; only those paths are read again
        touched = {op.path: ("c" if op.action == "mkdir" else "m") for op in plan.ops}
        record(project, None, locked=True, forced=("rewind", None, None, None), touched=touched,
               hints=written)
        _enforce_ring(project)
        return safety, plan, done


def _whole(project: Project, plan: RestorePlan) -> None:
    """What the plan overwrites or removes must be whole in the store, or the safety
    checkpoint could not give it back: each object is read and verified, and one found
    damaged is mended from the file itself when its bytes still match; otherwise the
    rewind stops here, before anything is recorded or written."""
    dirs = _Dirs(project.root)
    try:
        for op in plan.overwrites():
            if op.old is None or op.old.kind not in (FILE, LINK):
                continue
            try:
                project.store.get(op.old.oid)
                continue
            except RewindError:
                pass
            parent, name = _split(op.path)
            try:
                pfd = dirs.open(parent)
                if op.old.kind == LINK:
                    found = os.fsencode(os.readlink(name, dir_fd=pfd))
                else:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
                    try:
                        found = read_fd(fd)
                    finally:
                        os.close(fd)
                project.store.mend(op.old.oid, found)
            except (OSError, RewindError):
                raise RewindError(f"{op.path}: its stored copy is damaged and the file no longer matches it, "
                                  "so the safety checkpoint could not give it back; nothing was changed",
                                  hint="`rewind verify` names the damage; `rewind save` stores the file "
                                       "as it is now, then rewind again") from None
    finally:
        dirs.close()


def _failed(project: Project, plan: RestorePlan, safety: Checkpoint, jpath: str, e: Exception) -> RewindError:
    """What a restore that stopped half-way says: exactly what state the tree is in, and what
    brings it back. One that wrote nothing takes its safety checkpoint away again (the tree
    is that checkpoint's, and the ring is as it was)."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    where = f" ({render_path(e.filename)})" if isinstance(e, OSError) and e.filename else ""
    if plan.applied == 0:
        try:
            os.unlink(jpath)
        except OSError:
            pass
        with project.catalog.transaction():
            project.catalog.drop_checkpoints(project.id, [safety.number])
        return RewindError(f"the rewind stopped before changing anything: {why}{where}; the tree is as it was",
                           hint="fix the cause (free space, permissions), then rewind again")
    total = len(plan.ops)
    return RewindError(f"the rewind stopped after {plan.applied} of {total} steps: {why}{where}. The tree is "
                       f"part checkpoint {plan.target.number}, part as it was; everything it overwrote is in "
                       f"checkpoint {safety.number}",
                       hint=f"`rewind to {safety.number}` puts the tree back as it was before the rewind; "
                            f"`rewind to {plan.target.number}` tries again")


def render_path(name) -> str:
    try:
        return os.fsdecode(name)
    except (TypeError, ValueError):
        return str(name)


def _enforce_ring(project: Project) -> None:
    from rewind import config
    from rewind.clock import now_ns
    from rewind.retention import enforce
    settings = config.load_quietly(project.root)
    if settings is not None:
        with project.catalog.transaction():
            enforce(project.catalog, project.id, settings, now_ns())


def recover(project: Project) -> dict | None:
    """Clean up after a restore that was killed half-way. Returns what was found."""
    jpath = _journal_path(project)
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
    dirs = _Dirs(project.root)
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


def plan_for_display(project: Project, target: Checkpoint, paths: list[str] | None,
                     current: ScanResult | None = None) -> RestorePlan:
    return plan_restore(project, target, current or working_scan(project), paths)


def undo(project: Project, lock_timeout: float = 30.0):
    """Revert the newest rewind not yet undone: put back, from its safety checkpoint, the
    paths it touched. Returns (the undone rewind's target, safety, plan, done) or None."""
    row = project.catalog.newest_undoable(project.id)
    if row is None:
        return None
    restore_id, target_number, safety_number = row
    safety = project.catalog.checkpoint(project.id, safety_number)
    if safety is None:
        raise RewindError(f"the safety checkpoint {safety_number} of that rewind is gone",
                          hint="it was dropped by retention; `rewind list` shows what is left")
    touched = project.catalog.restore_made(project.id, safety_number)[1] or []
    if touched:
        result = restore(project, safety, touched, is_undo=True, lock_timeout=lock_timeout)
    else:
        result = (None, RestorePlan(safety), 0)
    with project.catalog.transaction():
        project.catalog.mark_undone(restore_id)
    return (target_number, *result)
