"""Tests for rewind.capture.ignore, checked against real git as the oracle.

Every scenario builds a tree in a fresh repository and walks it with
IgnoreRules the way the snapshot walker does.  Then each .rewindignore is
appended to the .gitignore of the same directory (exactly the precedence
.rewindignore is specified to have) and git is asked: for every entry we
visited, ``git check-ignore`` must agree with ``is_ignored``, and the files we
keep must equal ``git ls-files --others --exclude-standard``.
"""
import os
import random
import shutil
import subprocess
import time

import pytest

from rewind.capture.ignore import ALWAYS_IGNORED_NAMES, IgnoreRules, is_always_ignored

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is needed as the oracle")


class Symlink(str):
    """Tree spec value: a symbolic link to this target."""


# --------------------------------------------------------------------- helpers

def _git_env(home):
    os.makedirs(home, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C",
        "XDG_CONFIG_HOME": os.path.join(home, ".config"), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }


def _git(cwd, env, *args, stdin=b""):
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
    return proc.stdout


def _write(root, spec):
    """spec: {rel_path: str | bytes | Symlink | None (empty dir)}; parents are created."""
    for rel, content in spec.items():
        path = os.path.join(os.fsencode(root), os.fsencode(rel))
        os.makedirs(path if content is None else os.path.dirname(path), exist_ok=True)
        if isinstance(content, Symlink):
            os.symlink(os.fsencode(content), path)
        elif content is not None:
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else os.fsencode(content))


def _as_bytes(content):
    return content if isinstance(content, bytes) else os.fsencode(content)


def _merged_for_git(spec):
    """The git-side spec: each .rewindignore is appended to its sibling .gitignore."""
    out = dict(spec)
    for rel, content in spec.items():
        if rel.rsplit("/", 1)[-1] == ".rewindignore":
            gi = rel[: -len(".rewindignore")] + ".gitignore"
            head = _as_bytes(out.get(gi, b""))
            if head and not head.endswith(b"\n"):
                head += b"\n"
            tail = _as_bytes(content)
            out[gi] = head + (tail[3:] if tail.startswith(b"\xef\xbb\xbf") else tail)
    return out


def walk(root):
    """Walk like the snapshot walker; return ({rel: ignored} for every entry seen, kept files)."""
    decisions, kept = {}, set()

    def rec(rel, abs_dir, rules):
        for entry in sorted(os.scandir(abs_dir), key=lambda e: e.name):
            rel_path = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            ignored = rules.is_ignored(rel_path, is_dir)
            if entry.name not in ALWAYS_IGNORED_NAMES:
                decisions[rel_path] = ignored
            if ignored:
                continue
            if is_dir:
                rec(rel_path, entry.path, rules.for_subdir(rel_path, entry.path))
            else:
                kept.add(rel_path)

    rec("", root, IgnoreRules.for_root(root))
    return decisions, kept


def git_oracle(repo, env, paths):
    """({path: ignored} according to git check-ignore, untracked non-ignored files)."""
    # "./" keeps a leading ':' from being read as pathspec magic; with -n git answers
    # every path, in order: source, line number, pattern, path.
    out = _git(repo, env, "check-ignore", "--no-index", "-v", "-n", "-z", "--stdin",
               stdin=b"".join(b"./" + os.fsencode(p) + b"\0" for p in paths))
    fields = out.split(b"\0")
    assert len(fields) == 4 * len(paths) + 1, fields
    verdict = {p: bool(fields[4 * i]) and not fields[4 * i + 2].startswith(b"!")
               for i, p in enumerate(paths)}
    listed = _git(repo, env, "ls-files", "--others", "--exclude-standard", "-z")
    return verdict, {os.fsdecode(p) for p in listed.split(b"\0") if p}


def check_against_git(base, spec, exclude=None):
    """Build the tree in a fresh repository, walk it with our rules, then merge each
    .rewindignore into its .gitignore and ask git; return our decisions."""
    repo, spec = str(base / "repo"), dict(spec)
    env = _git_env(str(base / "home"))
    for rel in [r for r in spec if r.rsplit("/", 1)[-1] == ".rewindignore"]:
        spec.setdefault(rel[: -len(".rewindignore")] + ".gitignore", "")  # same entries for git
    _write(repo, spec)
    _git(repo, env, "init", "-q")
    if exclude is not None:
        _write(repo, {".git/info/exclude": exclude})
    decisions, kept = walk(repo)
    merged = _merged_for_git(spec)
    _write(repo, {rel: merged[rel] for rel in merged if merged[rel] is not spec[rel]})
    verdict, listed = git_oracle(repo, env, sorted(decisions))
    # the one deliberate difference: the rule files are recorded whatever they say (a
    # `.rewindignore` of `*` must not hide itself, nor what it hid)
    rule_files = {p for p in decisions if p.rsplit("/", 1)[-1] in (".gitignore", ".rewindignore")
                  or p == ".rewind.toml"}
    verdict.update({p: False for p in rule_files})
    listed |= rule_files & kept
    context = {k: v for k, v in spec.items() if k.endswith("ignore")}
    if exclude is not None:
        context[".git/info/exclude"] = exclude
    wrong = {p: (decisions[p], verdict[p]) for p in decisions if decisions[p] != verdict[p]}
    assert not wrong, f"(ours, git) differ: {wrong!r}\nignore files: {context!r}"
    assert kept == listed, f"only ours: {kept - listed!r}, only git: {listed - kept!r}\n{context!r}"
    return decisions


# ---------------------------------------------------------- hand-written cases

def case(id, spec, ignored=(), kept=(), exclude=None):
    return pytest.param(spec, set(ignored), set(kept), exclude, id=id)


CASES = [
    case("comments-blank-hash", {".gitignore": "# comment\n\n   \n*.log\n\\#hash\n", "# comment": "",
                                 "a.log": "", "#hash": "", "b.txt": ""},
         ignored={"a.log", "#hash"}, kept={"# comment", "b.txt"}),
    case("trailing-spaces", {".gitignore": "foo   \nbar\\ \nbaz\\  \nqux\\ \\ \ntab\t\nw\\\\ \n",
                             "foo": "", "foo ": "", "bar": "", "bar ": "", "baz ": "", "baz  ": "",
                             "qux  ": "", "tab": "", "tab\t": "", "w\\": "", "w\\ ": ""},
         ignored={"foo", "bar ", "baz ", "qux  ", "tab\t", "w\\"},
         kept={"foo ", "bar", "baz  ", "tab", "w\\ "}),
    case("negation", {".gitignore": "*.log\n!keep.log\n\\!bang\n", "a.log": "", "keep.log": "",
                      "!bang": "", "bang": ""},
         ignored={"a.log", "!bang"}, kept={"keep.log", "bang"}),
    case("last-match-wins", {".gitignore": "!x.log\n*.log\n!y.log\n", "x.log": "", "y.log": ""},
         ignored={"x.log"}, kept={"y.log"}),
    case("dir-only", {".gitignore": "build/\nout/\nlinkdir/\n", "build/a.o": "", "sub/build": "",
                      "sub/out/x": "", "linkdir": Symlink("sub")},
         ignored={"build", "sub/out"}, kept={"sub/build", "linkdir"}),
    case("anchored-root", {".gitignore": "/top.txt\nsub/x.txt\n/dironly/\ndoc/*.md\n", "top.txt": "",
                           "a/top.txt": "", "sub/x.txt": "", "a/sub/x.txt": "", "dironly/f": "",
                           "a/dironly/f": "", "doc/a.md": "", "doc/deep/b.md": ""},
         ignored={"top.txt", "sub/x.txt", "dironly", "doc/a.md"},
         kept={"a/top.txt", "a/sub/x.txt", "a/dironly/f", "doc/deep/b.md"}),
    case("anchored-subdir", {"p/.gitignore": "/y\nz/w\nn\n", "p/y": "", "p/q/y": "", "y": "",
                             "p/z/w": "", "p/q/z/w": "", "p/n": "", "p/q/n": "", "n": ""},
         ignored={"p/y", "p/z/w", "p/n", "p/q/n"}, kept={"p/q/y", "y", "p/q/z/w", "n"}),
    case("wildcards", {".gitignore": "*.py[co]\n?.txt\n[!a]*.md\n[^b]z\n[a-c]r\nq[]]\n", "a.pyc": "",
                       "a.pyo": "", "a.py": "", "x.txt": "", "xy.txt": "", "a.md": "", "b.md": "",
                       "az": "", "bz": "", "ar": "", "dr": "", "q]": ""},
         ignored={"a.pyc", "a.pyo", "x.txt", "b.md", "az", "ar", "q]"},
         kept={"a.py", "xy.txt", "a.md", "bz", "dr"}),
    case("wildcards-dont-match-slash", {".gitignore": "a/*.txt\na/?/c\nm[/]n/o\np[!q]r/s\n",
                                        "a/b.txt": "", "a/b/c.txt": "", "a/x/c": "", "a/xy/c": "",
                                        "m/n/o": "", "p/r/s": "", "pxr/s": ""},
         ignored={"a/b.txt", "a/x/c", "pxr/s"}, kept={"a/b/c.txt", "a/xy/c", "m/n/o", "p/r/s"}),
    case("double-star", {".gitignore": "**/foo\nabc/**\na/**/b\nx**y\n", "foo": "", "d/foo": "",
                         "d/e/foo": "", "abc/f": "", "abc/d/g": "", "a/b": "", "a/x/b": "",
                         "a/x/y/b": "", "a/c": "", "xzy": "", "d/xzzy": "", "ab/b": "", "fo": ""},
         ignored={"foo", "d/foo", "d/e/foo", "abc/f", "abc/d", "a/b", "a/x/y/b", "xzy", "d/xzzy"},
         kept={"a/c", "ab/b", "fo"}),
    case("double-star-2", {".gitignore": "**/build/\nlogs/**/*.log\nk/a**/b\nk/**z\n**\\/q/r\n",
                           "x/build/o": "", "build/o": "", "y/build": "", "logs/a.log": "",
                           "logs/d/e/b.log": "", "logs/b.txt": "", "k/a/x/b": "", "k/ab/b": "",
                           "k/ax/y/b": "", "k/b": "", "k/z": "", "k/d/z": "", "k/d/e/z": "",
                           "q/r": "", "p/q/r": ""},
         ignored={"x/build", "build", "logs/a.log", "logs/d/e/b.log"}, kept={"y/build", "logs/b.txt"}),
    case("deeper-overrides", {".gitignore": "*.log\n", "sub/.gitignore": "!*.log\n",
                              "sub/deeper/.gitignore": "*.log\n", "a.log": "", "sub/a.log": "",
                              "sub/deeper/a.log": "", "sub/other/a.log": ""},
         ignored={"a.log", "sub/deeper/a.log"}, kept={"sub/a.log", "sub/other/a.log"}),
    case("info-exclude-lowest", {".gitignore": "!keep.tmp\n*.o\n", "a.tmp": "", "keep.tmp": "",
                                 "x.o": "", "y.o": "", "d/z.tmp": ""},
         ignored={"a.tmp", "x.o", "y.o", "d/z.tmp"}, kept={"keep.tmp"}, exclude="*.tmp\n!x.o\n"),
    case("parent-excluded", {".gitignore": "logs/\n!logs/keep.txt\nlogs2/*\n!logs2/keep.txt\n",
                             "logs/keep.txt": "", "logs/x": "", "logs2/keep.txt": "", "logs2/x": ""},
         ignored={"logs", "logs2/x"}, kept={"logs2/keep.txt"}),
    case("crlf-bom-no-final-newline", {".gitignore": b"\xef\xbb\xbf*.a\r\nb.b\r\nc.c\r\r\nlast",
                                       "x.a": "", "b.b": "", "c.c": "", "c.c\r": "", "last": ""},
         ignored={"x.a", "b.b", "c.c\r", "last"}, kept={"c.c"}),
    case("brackets-edge", {".gitignore": "[a-]x\n[z-a]y\n[[:digit:]]*\n[[:alpha:]]q\n[abc\nt\\\n"
                                         "[[:bogus:]]r\n[[:a]\n[\\]]e\n[!]]f\n[[:]z\n",
                           "ax": "", "-x": "", "bx": "", "zy": "", "ay": "", "1st": "", "Aq": "",
                           "abc": "", "[abc": "", "t": "", "t\\": "", "br": "", ":": "", "]e": "",
                           "xf": "", "]f": "", "[z": "", ":z": ""},
         ignored={"ax", "-x", "zy", "1st", "Aq", ":", "]e", "xf", "[z", ":z"},
         kept={"bx", "ay", "abc", "[abc", "t", "t\\", "br", "]f"}),
    case("glob-chars-in-names", {".gitignore": "\\*\n\\[a]\na\\?b\n", "*": "", "x": "", "[a]": "",
                                 "a": "", "a?b": "", "axb": ""},
         ignored={"*", "[a]", "a?b"}, kept={"x", "a", "axb"}),
    case("odd-bytes-in-names", {".gitignore": "*.pyc\nn?l\n", "\udcff.pyc": "", "n\nl": "", "nl": ""},
         ignored={"\udcff.pyc", "n\nl"}, kept={"nl"}),
    case("symlinked-gitignore-not-followed", {"real": "*.x\n", "sub/.gitignore": Symlink("../real"),
                                              "sub/a.x": ""}, kept={"sub/a.x"}),
    case("whitelist", {".gitignore": "*\n!*/\n!*.c\n", "a.c": "", "a.h": "", "d/b.c": "", "d/b.h": ""},
         ignored={"a.h", "d/b.h"}, kept={"a.c", "d/b.c", ".gitignore"}),   # rule files: never ignored
    case("case-sensitive", {".gitignore": "README\n*.TXT\n", "readme": "", "README": "", "a.txt": ""},
         ignored={"README"}, kept={"readme", "a.txt"}),
    case("slash-oddities", {".gitignore": "//x\nx//\n/\n!\n!/\na\\/b\n**\\/c\n", "x/f": "", "a/b": "",
                            "c": "", "d/c": ""},
         ignored={"a/b", "d/c"}, kept={"x/f", "c"}),
    case("nul-in-pattern", {".gitignore": b"ab\0cd\n", "ab": "", "abcd": ""},
         ignored={"ab"}, kept={"abcd"}),
    case("dot-git-always-ignored", {".gitignore": "!.git\n", "sub/.git": "not a repo", "sub/f": ""},
         kept={"sub/f"}),
    case("rewindignore-adds", {".rewindignore": "*.bak\n", "a.bak": "", "d/b.bak": "", "c": ""},
         ignored={"a.bak", "d/b.bak"}, kept={"c", ".rewindignore"}),
    case("rewindignore-after-gitignore", {".gitignore": "*.log\n!x.tmp", ".rewindignore": "!keep.log\n*.tmp\n",
                                          "a.log": "", "keep.log": "", "x.tmp": ""},
         ignored={"a.log", "x.tmp"}, kept={"keep.log"}),
    case("rewindignore-subdirs", {".rewindignore": "*.bak\n/top\n", "sub/.gitignore": "!*.bak\n",
                                  "sub/inner/.rewindignore": "/x\n", "a.bak": "", "sub/a.bak": "",
                                  "top": "", "sub/top": "", "sub/inner/x": "", "sub/inner/d/x": ""},
         ignored={"a.bak", "top", "sub/inner/x"}, kept={"sub/a.bak", "sub/top", "sub/inner/d/x"}),
]


@pytest.mark.parametrize("spec,ignored,kept,exclude", CASES)
def test_matches_git(tmp_path, spec, ignored, kept, exclude):
    decisions = check_against_git(tmp_path, spec, exclude)
    assert {p for p in ignored if not decisions[p]} == set(), "expected ignored"
    assert {p for p in kept if decisions[p]} == set(), "expected kept"


# ------------------------------------------------------------- random cases

NAMES = ["a", "b", "ab", "a.py", "b.pyc", "x.log", "build", "d", "sub", "[a]", "a b", "#a", "!a",
         "a*", "ab ", "a?", "a\\b", "-", "ba", "A"]
TOKENS = ["a", "a", "b", "ab", "d", "build", ".py", ".pyc", ".log", "sub", "x", "*", "*", "*", "?",
          "**", "***", "[ab]", "[!a]", "[^b]", "[a-c]", "[]a]", "[a-]", "[[:alpha:]]", "\\*", "\\[a]",
          "\\?", "\\ ", " ", "#", "!", "\\!", "\\#", "[", "\\", "\\a"]


def _mutate(rng, name):
    """Replace one character of name by a wildcard (or an escape), so it often still matches."""
    i = rng.randrange(len(name))
    wild = rng.choice(("?", "*", "**", "[a-c]", "[!x]", "[^a]", "\\" + name[i], "*" + name[i]))
    return name[:i] + wild + name[i + 1 :]


def _random_pattern(rng, rel_paths):
    r = rng.random()
    if r < 0.45 and rel_paths:  # derived from a real path below the ignore file
        segs = rng.choice(rel_paths).split("/")
        segs = segs[rng.randrange(len(segs)) :] if rng.random() < 0.5 else segs
        segs = [("*" if x < 0.1 else "**" if x < 0.2 else _mutate(rng, seg) if x < 0.5 else seg)
                for seg, x in ((seg, rng.random()) for seg in segs)]
    elif r < 0.75:
        segs = [_mutate(rng, rng.choice(NAMES))]
    else:
        segs = ["".join(rng.choice(TOKENS) for _ in range(rng.choice((1, 2, 3))))
                for _ in range(rng.choice((1, 1, 2, 3)))]
    pat = "/".join(segs)
    if rng.random() < 0.15:
        pat = "/" + pat
    if rng.random() < 0.1:
        pat = "**/" + pat
    if rng.random() < 0.2:
        pat += "/"
    if rng.random() < 0.25:
        pat = "!" + pat
    if rng.random() < 0.1:
        pat += rng.choice(("  ", "\\ ", " \\ ", "\r"))
    return pat


def _random_ignore_file(rng, rel_paths=()):
    lines = [_random_pattern(rng, rel_paths) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(("", "# c", "#a", "   ")))
    return "\n".join(lines) + rng.choice(("\n", "\n", ""))


def _random_tree(rng, prefix, spec, depth=0):
    """Fill spec with a random tree below prefix; every directory gets at least one file."""
    spec[prefix + rng.choice(NAMES)] = ""
    for _ in range(rng.randint(1, 4)):
        path = prefix + rng.choice(NAMES)
        if path in spec or any(k.startswith(path + "/") for k in spec):
            continue
        if depth < 3 and rng.random() < 0.45:
            _random_tree(rng, path + "/", spec, depth + 1)
        else:
            spec[path] = ""


def _random_case(rng, prefix):
    spec = {}
    _random_tree(rng, prefix, spec)
    dirs = {prefix} | {k[: k.rfind("/") + 1] for k in spec}
    paths = sorted(spec)
    for d in sorted(dirs):
        below = [p[len(d) :] for p in paths if p.startswith(d)]
        if rng.random() < (0.9 if d == prefix else 0.3):
            spec[d + ".gitignore"] = _random_ignore_file(rng, below)
        if rng.random() < 0.12:
            spec[d + ".rewindignore"] = _random_ignore_file(rng, below)
    return spec


def test_random_cases_in_subdirectories(tmp_path):
    """300 random cases, 100 per repository, each in its own subdirectory c000..c099."""
    rng = random.Random(20240229)
    total = ignored = 0
    for repo in range(3):
        spec = {}
        for n in range(100):
            spec.update(_random_case(rng, f"c{n:03d}/"))
        decisions = check_against_git(tmp_path / f"r{repo}", spec)
        total += len(decisions)
        ignored += sum(decisions.values())
    print(f"random subdir cases: {total} entries checked, {ignored} ignored")
    assert 0.15 * total < ignored < 0.85 * total  # the generator exercises both outcomes


def test_random_cases_at_root(tmp_path):
    """Random cases at the repository root, with .git/info/exclude."""
    rng = random.Random(1337)
    for n in range(25):
        spec = _random_case(rng, "")
        exclude = _random_ignore_file(rng, sorted(spec)) if rng.random() < 0.7 else None
        check_against_git(tmp_path / f"r{n}", spec, exclude)


# ------------------------------------------------------------ direct tests

def test_always_ignored():
    assert ALWAYS_IGNORED_NAMES == frozenset({".git"})
    assert is_always_ignored(".git") and is_always_ignored(".rewind-tmp-12.3")
    assert is_always_ignored(".rewind-tmp-cookie-1-2") and is_always_ignored(".rewind-tmp-cookie-open-7-1-2")
    assert not is_always_ignored(".gitignore") and not is_always_ignored("x.git")
    # a person's file that merely starts like rewind's temporary names is theirs
    assert not is_always_ignored(".rewind-tmp-123") and not is_always_ignored(".rewind-tmp-notes")


def test_always_ignored_beats_negation(tmp_path):
    (tmp_path / ".gitignore").write_text("!*\n!.git\n!.rewind-tmp-*\n")
    rules = IgnoreRules.for_root(str(tmp_path))
    assert rules.is_ignored(".git", True) and rules.is_ignored("a/.git", False)
    assert rules.is_ignored(".rewind-tmp-4.2", False) and not rules.is_ignored("x", False)
    assert not rules.is_ignored(".rewind-tmp-x", False)


def test_exclude_only_read_from_git_directory(tmp_path):
    (tmp_path / "info").mkdir()
    (tmp_path / "info" / "exclude").write_text("*.x\n")
    (tmp_path / ".git").write_text("gitdir: elsewhere\n")  # a worktree-style .git file
    assert not IgnoreRules.for_root(str(tmp_path)).is_ignored("a.x", False)
    (tmp_path / ".git").unlink()
    (tmp_path / ".git").mkdir()
    (tmp_path / "info").rename(tmp_path / ".git" / "info")
    assert IgnoreRules.for_root(str(tmp_path)).is_ignored("a.x", False)


def test_no_files_no_rules_and_cheap_subdirs(tmp_path):
    (tmp_path / "d").mkdir()
    rules = IgnoreRules.for_root(str(tmp_path))
    assert not rules.is_ignored("anything", False) and not rules.is_ignored("d", True)
    assert rules.for_subdir("d", str(tmp_path / "d")) is rules
    (tmp_path / "d" / ".gitignore").write_text("# only a comment\n\n")
    assert rules.for_subdir("d", str(tmp_path / "d")) is rules


def test_unreadable_or_odd_ignore_files_are_fine(tmp_path):
    (tmp_path / ".gitignore").mkdir()  # a directory, not a file
    os.mkfifo(tmp_path / ".rewindignore")  # must not block
    assert not IgnoreRules.for_root(str(tmp_path)).is_ignored("x", False)


def test_speed_of_typical_rules(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules/\n*.pyc\nbuild/\ndist/\n.DS_Store\n*.log\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("!important.log\n/local/\n")
    rules = IgnoreRules.for_root(str(tmp_path)).for_subdir("pkg", str(tmp_path / "pkg"))
    paths = [(f"pkg/{n}", d) for n, d in [("main.py", False), ("main.pyc", False), ("build", True),
                                          ("node_modules", True), ("src", True), ("README.md", False),
                                          ("important.log", False), ("local", True)]]
    n = 100_000
    start = time.perf_counter()
    for i in range(n):
        rel, is_dir = paths[i % len(paths)]
        rules.is_ignored(rel, is_dir)
    elapsed = time.perf_counter() - start
    print(f"is_ignored: {elapsed / n * 1e6:.2f} us/call ({n} calls in {elapsed:.3f}s)")
    assert [rules.is_ignored(p, d) for p, d in paths] == [False, True, True, True, False, False,
                                                           False, True]


def test_root_rules_are_kept_only_while_their_files_are_unchanged(tmp_path, monkeypatch):
    """for_root's answer is kept for the next call (the watcher serves every hook with it),
    and read again after any change: a rewrite of the same size, a rename over, a new
    exclude file, .git appearing, another data directory."""
    from rewind.capture import ignore
    monkeypatch.setattr(ignore, "COARSE_MTIME_NS", 0)    # (the racy window: the next test)
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".gitignore").write_text("a.txt\n")
    first = IgnoreRules.for_root(str(root))
    assert IgnoreRules.for_root(str(root)) is first          # kept
    assert first.is_ignored("a.txt", False) and not first.is_ignored("b.txt", False)
    (root / ".gitignore").write_text("b.txt\n")              # same size, same inode
    now = IgnoreRules.for_root(str(root))
    assert now.is_ignored("b.txt", False) and not now.is_ignored("a.txt", False)
    (root / "new").write_text("c.txt\n")
    os.replace(root / "new", root / ".gitignore")            # renamed over
    assert IgnoreRules.for_root(str(root)).is_ignored("c.txt", False)
    (root / ".rewindignore").write_text("d.txt\n")
    assert IgnoreRules.for_root(str(root)).is_ignored("d.txt", False)
    (root / ".git" / "info").mkdir(parents=True)             # .git appears, with an exclude
    (root / ".git" / "info" / "exclude").write_text("e.txt\n")
    assert IgnoreRules.for_root(str(root)).is_ignored("e.txt", False)
    (root / "store").mkdir()
    monkeypatch.setenv("REWIND_HOME", str(root / "store"))   # rewind's own dir, now inside
    assert IgnoreRules.for_root(str(root)).is_ignored("store", True)


def test_root_rules_changed_just_now_are_read_every_time(tmp_path):
    """A file changed within the racy window is never kept: on a filesystem counting whole
    seconds a second rewrite of the same size would look unchanged."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".gitignore").write_text("a.txt\n")
    assert IgnoreRules.for_root(str(root)) is not IgnoreRules.for_root(str(root))
    old = time.time() - 10
    os.utime(root / ".gitignore", (old, old))                # (the ctime stays now)
    assert IgnoreRules.for_root(str(root)) is not IgnoreRules.for_root(str(root))
