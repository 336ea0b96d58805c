"""Git-compatible ignore rules: .git/info/exclude, .gitignore and .rewindignore.

A stdlib-only port of the matching logic in git's dir.c (see ``man gitignore``; the
pattern language, wildmatch.c, is wildmatch.py): comments, trailing-space trimming, ``\\`` escapes,
``!`` negation (last match wins; deeper files beat shallower ones and
.git/info/exclude is lowest), dir-only ``foo/``, anchoring by a leading or
inner ``/``, ``* ? [...]`` (never matching ``/``) and ``**``.  Matching is
case-sensitive.  ``.rewindignore`` uses the same syntax and is applied after
the ``.gitignore`` of the same directory.

Walker contract: call ``is_ignored`` for every entry of a directory with the
rules for that directory (``for_root`` / ``for_subdir``), passing
``is_dir=entry.is_dir(follow_symlinks=False)`` (git treats symlinks as
non-directories), and never descend into an ignored directory.  That gives
git's rule that a file cannot be re-included when a parent directory is
excluded.

Known differences from git: ``?`` and ``[...]`` match one code point, not one
byte (only matters for non-ASCII names); core.excludesFile is not read;
there is no index, so tracked files are not exempt; nested repositories are
descended into (only entries named ``.git`` are skipped); the rule files
themselves (every ``.gitignore`` and ``.rewindignore``, the root's
``.rewind.toml``) are never ignored, so a rule cannot hide them.
"""
import os
import re
import time

from rewind.capture.wildmatch import parse_line
from rewind.constants import COARSE_MTIME_NS, PROJECT_FILE, TMP_PREFIX

__all__ = ["ALWAYS_IGNORED_NAMES", "EXCLUDE_BEGIN", "EXCLUDE_END", "GIT_EXCLUDE", "IGNORE_FILES", "TMP_PREFIX", "IgnoreRules", "exclude_signature",
           "is_always_ignored", "without_rewinds_block"]

ALWAYS_IGNORED_NAMES = frozenset({".git"})
IGNORE_FILES = (".gitignore", ".rewindignore")   # in every directory, after .git/info/exclude
GIT_EXCLUDE = ".git/info/exclude"                # the root's, read first
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO must not block


# rewind's own temporary names, exactly: a restore's `.rewind-tmp-<safety>.<n>`, a hook's
# cookie `.rewind-tmp-cookie-<pid>-<ns>` and window marker `.rewind-tmp-cookie-open-<id>-<pid>-<ns>`.
# A person's `.rewind-tmp-notes` is theirs, captured and restored like any file.
# Matched by hand, not by a regex: compiling one costs every hook more than all its matches.
def _number(text: str, commas: bool = False) -> bool:
    return bool(text) and text.isascii() and (text.isdigit() or (commas and text.replace(",", "").isdigit()))


def is_own_tmp(name: str) -> bool:
    if not name.startswith(TMP_PREFIX):
        return False
    rest = name[len(TMP_PREFIX):]
    before, dot, after = rest.partition(".")
    if dot:
        return _number(before) and _number(after)
    if not rest.startswith("cookie-"):
        return False
    parts = rest[len("cookie-"):].split("-")
    if parts[0] in ("open", "close"):
        if len(parts) != 4 or not _number(parts[1], commas=True):
            return False
        parts = parts[2:]
    return len(parts) == 2 and _number(parts[0]) and _number(parts[1])


def is_always_ignored(name: str) -> bool:
    """``.git`` and rewind's own temporary files are ignored whatever the rules say."""
    return name in ALWAYS_IGNORED_NAMES or (name.startswith(TMP_PREFIX) and is_own_tmp(name))


def _read_lines(path, follow=False):
    """Pattern lines of an ignore file, split like git (LF, optional CR, BOM)."""
    return _split_lines(_read_bytes(path, follow))


def _exclude_lines(root):
    """<root>/.git/info/exclude's pattern lines, without the block rewind keeps there."""
    return _split_lines(without_rewinds_block(_read_bytes(os.path.join(root, GIT_EXCLUDE), True)))


def _read_bytes(path, follow=False) -> bytes:
    try:
        fd = os.open(path, _OPEN_FLAGS | (0 if follow else _NOFOLLOW))
    except (OSError, ValueError):
        return b""
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o100000:  # regular files only
            return b""
        with open(fd, "rb", closefd=False) as f:
            data = f.read(MAX_IGNORE_FILE + 1)
    except OSError:
        return b""
    finally:
        os.close(fd)
    if len(data) > MAX_IGNORE_FILE:
        return b""      # not a real ignore file: no rules from it (more is captured, nothing lost)
    return data


# The lines `rewind hooks install` adds to .git/info/exclude for an agent's settings file that
# holds this machine's paths (hooks/gitexclude.py): git reads them and so leaves the file out
# of `git status` and commits; rewind's own rules skip them, so the file stays recorded and
# restored like any other.
EXCLUDE_BEGIN = b"# rewind: agent hook settings with this machine's paths (`rewind hooks uninstall` takes them out)"
EXCLUDE_END = b"# rewind: end"


def without_rewinds_block(data: bytes) -> bytes:
    """An exclude file's bytes without the lines between rewind's two marker lines."""
    if EXCLUDE_BEGIN not in data:
        return data
    kept, inside = [], False
    for line in data.split(b"\n"):
        bare = line.rstrip(b"\r")
        if bare == EXCLUDE_BEGIN:
            inside = True
        elif inside and bare == EXCLUDE_END:
            inside = False
        elif not inside:
            kept.append(line)
    return b"\n".join(kept)


MAX_IGNORE_FILE = 64 * 1024 * 1024


def _split_lines(data: bytes):
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return [ln[:-1] if ln.endswith("\r") else ln
            for ln in os.fsdecode(data).split("\n") if ln and ln[0] != "#"]


def _fullmatch(regexes):
    return re.compile("|".join("(?:%s)" % r for r in regexes), re.S).fullmatch if regexes else None


def _compile_runs(lines, pos):
    """Group patterns into runs of equal sign (order inside a run is irrelevant
    because only the sign of the last match matters); return them last-first.
    A run is (negated, pos, names, name_re, path_re, dir_names, dir_name_re,
    dir_path_re): literal basenames go into sets, the rest into one regex each."""
    runs, cur, cur_neg = [], None, None
    for line in lines:
        p = parse_line(line)
        if p is None:
            continue
        negated, dir_only, kind, value = p
        if cur is None or negated != cur_neg:
            cur, cur_neg = {}, negated
            runs.append((negated, cur))
        cur.setdefault((dir_only, kind), []).append(value)
    out = []
    for negated, g in reversed(runs):
        out.append((negated, pos,
                    frozenset(g.get((False, "lit"), ())), _fullmatch(g.get((False, "name"))),
                    _fullmatch(g.get((False, "path"))), frozenset(g.get((True, "lit"), ())),
                    _fullmatch(g.get((True, "name"))), _fullmatch(g.get((True, "path")))))
    return tuple(out)


def exclude_signature(root: str) -> list | None:
    """What <root>/.git/info/exclude is now (None: no such file), to tell whether it
    changed: it lies in .git/, which no watch covers."""
    try:
        st = os.stat(os.path.join(root, GIT_EXCLUDE))
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


# for_root's last answer per root: a watcher serving hooks reads the same rules each call,
# ~0.2 ms of compiling (0.3-0.5 ms with the watcher's threads around)
_ROOT_RULES: dict[str, tuple] = {}


def _root_key(root: str) -> tuple | None:
    """What for_root's answer depends on: the environment naming rewind's own directories,
    whether .git is a directory, and the identity, size and times of its info/exclude and
    the root's ignore files.
    None (not to be kept) when one changed within COARSE_MTIME_NS of now: a rewrite of the same size
    within a coarse filesystem's time step would look the same (git's racy rule)."""
    from rewind.locations import ENV_READ
    key = [os.environ.get(k) for k in ENV_READ]
    key.append(os.path.isdir(os.path.join(root, ".git")))
    now = time.time_ns()
    for rel, follow in ((GIT_EXCLUDE, True), *((name, False) for name in IGNORE_FILES)):
        try:
            st = os.stat(os.path.join(root, rel), follow_symlinks=follow)
        except (OSError, ValueError):
            key.append(None)
            continue
        if now - max(st.st_mtime_ns, st.st_ctime_ns) < COARSE_MTIME_NS:
            return None
        key.append((st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(key)


def _own_dirs(root: str) -> frozenset[str]:
    from rewind.locations import own_dirs_in
    return own_dirs_in(os.path.realpath(root))


class IgnoreRules:
    """The ignore patterns in effect inside one directory (immutable)."""

    __slots__ = ("_runs", "_own")

    def __init__(self, runs=(), own: frozenset[str] = frozenset()):
        self._runs = runs  # deepest level first; within a level, last pattern first
        self._own = own    # rewind's own directories inside the project (locations.own_dirs_in)

    @classmethod
    def for_root(cls, root: str) -> "IgnoreRules":
        """Rules for the project root: <root>/.git/info/exclude (only if <root>/.git
        is a directory), then <root>/.gitignore, then <root>/.rewindignore; and rewind's
        own directories, wherever they sit inside it. Kept for the next call while none of
        those files changed (_root_key): the watcher serves every hook with them."""
        key = _root_key(root)
        hit = _ROOT_RULES.get(root)
        if key is not None and hit is not None and hit[0] == key:
            return hit[1]
        runs = ()
        if os.path.isdir(os.path.join(root, ".git")):
            runs = _compile_runs(_exclude_lines(root), 0)
        rules = cls(runs, _own_dirs(root)).for_subdir("", root)
        if key is not None:
            if len(_ROOT_RULES) >= 16:
                _ROOT_RULES.clear()
            _ROOT_RULES[root] = (key, rules)
        return rules

    def for_subdir(self, rel_dir: str, abs_dir: str) -> "IgnoreRules":
        """Rules inside the (non-ignored) directory rel_dir: ours plus its own
        .gitignore and .rewindignore (relative to rel_dir).  Returns self when
        the directory has neither file."""
        lines = []
        for fname in IGNORE_FILES:
            lines += _read_lines(os.path.join(abs_dir, fname))
        if not lines:
            return self
        runs = _compile_runs(lines, len(rel_dir) + 1 if rel_dir else 0)
        return IgnoreRules(runs + self._runs, self._own) if runs else self

    @classmethod
    def for_root_contents(cls, root: str, contents: list[bytes]) -> "IgnoreRules":
        """Like for_root, but the root's .gitignore/.rewindignore given as bytes (in that
        order), e.g. as a checkpoint's tree holds them; .git/info/exclude read from disk."""
        runs = ()
        if os.path.isdir(os.path.join(root, ".git")):
            runs = _compile_runs(_exclude_lines(root), 0)
        return cls(runs, _own_dirs(root)).with_contents("", contents)

    def with_contents(self, rel_dir: str, contents: list[bytes]) -> "IgnoreRules":
        """for_subdir with the ignore files' bytes given instead of read from disk."""
        lines = [ln for data in contents for ln in _split_lines(data)]
        runs = _compile_runs(lines, len(rel_dir) + 1 if rel_dir else 0) if lines else ()
        return IgnoreRules(runs + self._runs, self._own) if runs else self

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether rel_path (an entry of the directory these rules are for) is ignored."""
        name = rel_path[rel_path.rfind("/") + 1 :]
        if name in ALWAYS_IGNORED_NAMES or (name.startswith(TMP_PREFIX) and is_own_tmp(name)) \
                or (self._own and rel_path in self._own):       # inline: a call per entry costs
            return True
        for negated, pos, names, name_re, path_re, dnames, dname_re, dpath_re in self._runs:
            if (name in names or (name_re is not None and name_re(name))
                    or (path_re is not None and path_re(rel_path, pos))):
                # the rule files are recorded whatever they say (an agent's `*` must not hide
                # them, nor what they hid); checked only on a match, off the hot path
                return not negated and (is_dir or not (name in IGNORE_FILES or rel_path == PROJECT_FILE))
            if is_dir and (name in dnames or (dname_re is not None and dname_re(name))
                           or (dpath_re is not None and dpath_re(rel_path, pos))):
                return not negated
        return False
