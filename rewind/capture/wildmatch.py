"""git's wildmatch.c as regexes: one ignore-file line into (negated, dir_only, kind, value).

The pattern language of ``man gitignore``: trailing-space trimming, ``\\`` escapes, ``!``
negation, dir-only ``foo/``, anchoring by a leading or inner ``/``, ``* ? [...]`` (never
matching ``/`` in a path pattern), ``[:class:]`` with git's ASCII-only ctype, and ``**``.
Which line wins, and which files hold the lines, is ignore.py's.
"""
import re

_SPECIAL = re.compile(r"[*?\[\\]")  # git's is_glob_special()


_CLASSES = {  # [:name:] with git's ASCII-only ctype, as (lo, hi) ranges
    name: [(lo, hi or lo) for lo, hi in re.findall(r"(.)(?:-(.))?", spec, re.S)]
    for name, spec in {
        "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "blank": " \t", "cntrl": "\x00-\x1f\x7f",
        "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@[-`{-~",
        "space": "\t\n\r ", "upper": "A-Z", "xdigit": "0-9A-Fa-f",
    }.items()
}


def _bracket(pat, i, pathname):
    """Translate the ``[...]`` starting at pat[i]; return (regex, next index) or None
    when git would abort the match (unterminated set, unknown class)."""
    n, items, prev = len(pat), [], None
    i += 1
    negated = i < n and pat[i] in "!^"
    if negated:
        i += 1
    if i >= n:
        return None
    c = pat[i]
    while True:  # a direct port of wildmatch's do { ... } while (... != ']')
        if c == "\\":
            i += 1
            if i >= n:
                return None
            c = pat[i]
            items.append((c, c))
        elif c == "-" and prev is not None and i + 1 < n and pat[i + 1] != "]":
            i += 1
            c = pat[i]
            if c == "\\":
                i += 1
                if i >= n:
                    return None
                c = pat[i]
            items.append((prev, c))
            c = None
        elif c == "[" and pat.startswith(":", i + 1):
            j = pat.find("]", i + 2)
            if j < 0:
                return None
            if j - i - 3 < 0 or pat[j - 1] != ":":
                items.append(("[", "["))  # not a class: a literal '['
            else:
                cls = _CLASSES.get(pat[i + 2 : j - 1])
                if cls is None:
                    return None
                items.extend(cls)
                i, c = j, None
        else:
            items.append((c, c))
        prev = c
        i += 1
        if i >= n:
            return None
        c = pat[i]
        if c == "]":
            break
    body = "".join("\\U%08x" % ord(lo) + ("" if lo == hi else "-\\U%08x" % ord(hi))
                   for lo, hi in items if lo <= hi)
    if negated:
        return "[^%s%s]" % (body, "/" if pathname else ""), i + 1
    if not body:
        return "(?!)", i + 1
    slash = pathname and any(lo <= "/" <= hi for lo, hi in items)
    return "%s[%s]" % ("(?!/)" if slash else "", body), i + 1


def _translate(pat, pathname, split=0):
    """Translate a wildmatch pattern into a regex for ``fullmatch`` (None: never
    matches).  With ``pathname`` (WM_PATHNAME) wildcards don't match '/'.  git
    matches the literal prefix separately, so a ``**`` right after it (index
    ``split``) counts as leading: ``x/a**/b`` matches ``x/ab`` and ``x/a/y/b``."""
    out, i, n = [], 0, len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            j = i
            while j < n and pat[j] == "*":
                j += 1
            if not pathname:
                out.append(".*")
            elif j - i > 1 and (i == split or pat[i - 1] == "/"):
                if j == n or pat.startswith("\\/", j):
                    out.append(".*")
                elif pat[j] == "/":
                    out.append("(?:.*/)?")
                    j += 1
                else:
                    out.append("[^/]*")
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]" if pathname else ".")
            i += 1
        elif c == "[":
            res = _bracket(pat, i, pathname)
            if res is None:
                return None
            out.append(res[0])
            i = res[1]
        else:
            if c == "\\":
                i += 1
                if i >= n:
                    return None
            out.append(re.escape(pat[i]))
            i += 1
    return "".join(out)


def _trim_trailing_spaces(s):
    """Strip trailing spaces, except one escaped by an odd run of backslashes."""
    t = s.rstrip(" ")
    if len(t) == len(s):
        return s
    return s[: len(t) + (len(t) - len(t.rstrip("\\"))) % 2]


def parse_line(line):
    """Parse one pattern line into (negated, dir_only, kind, value); None if inert."""
    line = _trim_trailing_spaces(line.split("\0", 1)[0])
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    if "/" not in line:  # matched against the basename at any depth
        if not line:
            return None
        if not _SPECIAL.search(line):
            return negated, dir_only, "lit", line
        rx = _translate(line, False)
        return None if rx is None else (negated, dir_only, "name", rx)
    if line.startswith("/"):
        line = line[1:]
    m = _SPECIAL.search(line)
    rx = _translate(line, True, m.start() if m else len(line))
    return None if rx is None else (negated, dir_only, "path", rx)
