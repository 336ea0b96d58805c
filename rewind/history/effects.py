"""What a restore does not undo: effects that live outside the project's tree.

A restore puts files back. It cannot take back what happened elsewhere after the checkpoint:
- an edit tool's write outside the project (changes flagged `outside`: never captured);
- a git move (the checkpoint's `git`: HEAD and branches stay where they are);
- shell commands whose effects may live outside the tree. `classify` is a small, explicit
  list over the command line the agent's shell tool ran (the `command` of its window):

  | category  | commands |
  |-----------|----------|
  | network   | curl, wget, ssh, scp, sftp, ftp, nc, telnet, http/https (HTTPie), gh; rsync to a host (`host:path`, `rsync://`) |
  | publish   | npm/yarn/pnpm publish, twine upload, cargo publish, gem push, poetry/flit/hatch/uv publish |
  | install   | pip/pip3/uv pip install (and `python -m pip install`), npm/pnpm/yarn install -g / global add, apt/apt-get/dnf/yum/brew install, cargo/go/gem install |
  | git       | git push, fetch, pull, tag, branch, stash, remote (not their read-only forms: `branch --show-current`, `tag -l`, `stash list`, `remote -v`); commit, checkout, switch, reset, merge, rebase, cherry-pick, revert and am are the git move they made, if any |
  | container | docker, podman, nerdctl, docker-compose, kubectl, helm (but their read-only ps/images/logs/inspect/get/describe/version) |
  | database  | psql, mysql, mariadb, mongosh, mongo, redis-cli; sqlite3 on a file outside the project; migrations: alembic, `manage.py migrate`, django-admin migrate, prisma migrate / db push, rails/rake db:*, flask db, knex/sequelize migrate, dbmate, flyway, liquibase, goose, diesel migration, sqlx migrate |
  | cloud     | aws, gcloud, az, terraform apply/destroy/import, pulumi up/destroy |

  A command line is split at `;`, `&&`, `||`, `|`, `&`, newlines and `$(...)`; `sudo`, `env`,
  `time`, `nohup`, `nice`, `timeout`, `command`, `exec`, and leading `VAR=value` are looked
  through, and `bash -c '...'` / `sh -c '...'` is read inside.

What it cannot know: what a script or program does by itself (`make deploy`, `./release.sh`,
`npm run migrate`, `python sync.py`), aliases and shell functions, a command the agent ran
through another tool (an MCP server), and what anyone did outside the agent's shell tool. The
plan says so under the list.
"""

from __future__ import annotations

import os
import shlex

from rewind.model import ChangeRow, Checkpoint
from rewind.structs import dataclass

CATEGORIES = {
    "network": "network: what it sent stays sent",
    "publish": "a release stays published",
    "install": "installed packages stay installed",
    "git": "git: history, refs and remotes stay",
    "container": "containers and clusters keep their state",
    "database": "a database keeps its changes",
    "cloud": "cloud resources keep their state",
}

_NETWORK = {"curl", "wget", "ssh", "scp", "sftp", "ftp", "nc", "ncat", "telnet", "http", "https", "gh"}
_PUBLISH = {("npm", "publish"), ("yarn", "publish"), ("pnpm", "publish"), ("twine", "upload"),
            ("cargo", "publish"), ("gem", "push"), ("poetry", "publish"), ("flit", "publish"),
            ("hatch", "publish"), ("uv", "publish")}
_INSTALL = {("pip", "install"), ("pip3", "install"), ("apt", "install"), ("apt-get", "install"),
            ("dnf", "install"), ("yum", "install"), ("brew", "install"), ("cargo", "install"),
            ("go", "install"), ("gem", "install")}
# not commit, merge, rebase, reset, checkout, switch, cherry-pick, revert, am: what they leave
# outside the tree is where HEAD and the branch point, which the checkpoint's git move says
# (with the command that made it); when nothing moved, they left nothing
_GIT = {"push", "tag", "fetch", "pull", "branch", "stash", "remote"}
# read-only forms: `git branch --show-current`, `git tag -l`, `git stash list`, `git remote -v`
_GIT_BRANCH_WRITES = {"-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-f", "--force",
                      "-u", "--set-upstream-to", "--unset-upstream", "--edit-description", "-t", "--track"}
_GIT_TAG_WRITES = {"-d", "--delete", "-a", "--annotate", "-s", "--sign", "-f", "--force", "-m", "-F"}
_CONTAINER = {"docker", "podman", "nerdctl", "docker-compose", "kubectl", "helm"}
_CONTAINER_READ = {"ps", "images", "logs", "inspect", "get", "describe", "version", "info", "top", "--version",
                   "--help", "help"}
_DATABASE = {"psql", "mysql", "mariadb", "mongosh", "mongo", "redis-cli", "alembic", "dbmate", "flyway",
             "liquibase", "goose"}
_MIGRATE = {("prisma", "migrate"), ("prisma", "db"), ("flask", "db"), ("knex", "migrate:latest"),
            ("knex", "migrate:up"), ("knex", "migrate:rollback"), ("sequelize", "db:migrate"),
            ("diesel", "migration"), ("sqlx", "migrate"), ("django-admin", "migrate"), ("manage.py", "migrate")}
_CLOUD = {"aws", "gcloud", "az"}
_CLOUD_SUB = {("terraform", "apply"), ("terraform", "destroy"), ("terraform", "import"),
              ("pulumi", "up"), ("pulumi", "destroy")}
_WRAPPERS = {"sudo", "env", "time", "nohup", "nice", "timeout", "command", "exec", "doas", "xargs"}
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "$", "|&", ";;", "`"}


def classify(command: str | None, root: str | None = None) -> list[tuple[str, str]]:
    """(category, the command word that decided it) for each part of a shell command line
    whose effects may live outside the project's tree; [] when none is known to."""
    if not command:
        return []
    found: list[tuple[str, str]] = []
    for words in _simple_commands(command):
        hit = _one(words, root)
        if hit is not None and hit not in found:
            found.append(hit)
    return found


def _simple_commands(command: str, depth: int = 0) -> list[list[str]]:
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()`")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:              # an unclosed quote: the words as they come
        tokens = command.replace("\n", " ; ").split()
    out: list[list[str]] = []
    words: list[str] = []
    for tok in tokens + [";"]:
        if tok in _SEPARATORS or (tok and set(tok) <= set(";&|()`")):
            if words:
                out.append(words)
            words = []
        else:
            words.append(tok)
    if depth < 3:                   # `bash -c '...'`: the script it runs
        for words in list(out):
            name = os.path.basename(words[0])
            if name in ("bash", "sh", "zsh", "dash") and "-c" in words[1:-1]:
                out += _simple_commands(words[words.index("-c") + 1], depth + 1)
    return out


def _strip_wrappers(words: list[str]) -> list[str]:
    i = 0
    while i < len(words):
        w = words[i]
        name = os.path.basename(w)
        if "=" in w and not w.startswith("-") and w.split("=", 1)[0].isidentifier():
            i += 1                  # VAR=value before the command
        elif name in _WRAPPERS:
            i += 1
            while i < len(words) and (words[i].startswith("-") or "=" in words[i]
                                      or (name == "timeout" and words[i][:1].isdigit())
                                      or (name == "nice" and words[i].lstrip("-").isdigit())):
                i += 1
        else:
            break
    return words[i:]


def _one(words: list[str], root: str | None) -> tuple[str, str] | None:
    words = _strip_wrappers(words)
    if not words:
        return None
    name = os.path.basename(words[0])
    args = words[1:]
    if name.startswith("python") and args[:2] == ["-m", "pip"]:
        name, args = "pip", args[2:]
    elif name.startswith("python") and args and os.path.basename(args[0]) == "manage.py":
        name, args = "manage.py", args[1:]
    elif name == "bundle" and args[:1] == ["exec"]:
        return _one(args[1:], root)
    elif name in ("rake", "rails"):
        return ("database", f"{name} db:") if any(a.startswith("db:") for a in args) else None
    elif name in ("npx", "pnpx", "bunx") and args:
        name, args = os.path.basename(args[0]), args[1:]
    sub = next((a for a in args if not a.startswith("-")), None)
    if name == "uv" and args[:2] == ["pip", "install"]:
        return "install", "uv pip install"
    if name == "git":
        sub, rest = _git_subcommand(args)
        return ("git", f"git {sub}") if sub in _GIT and not _git_reads(sub, rest) else None
    if name in _NETWORK:
        return "network", name
    if name == "rsync":
        remote = any(("://" in a or (":" in a.split("/", 1)[0] and not a.startswith("-"))) for a in args)
        return ("network", "rsync") if remote else None
    if (name, sub) in _PUBLISH:
        return "publish", f"{name} {sub}"
    if (name, sub) in _INSTALL:
        return "install", f"{name} {sub}"
    if name in ("npm", "pnpm", "yarn") and (
            (sub in ("install", "i", "add") and ("-g" in args or "--global" in args)) or args[:2] == ["global", "add"]):
        return "install", f"{name} {' '.join(args[:2])}"
    if name in _CONTAINER:
        return None if sub in _CONTAINER_READ or sub is None else ("container", f"{name} {sub}")
    if name in _DATABASE:
        return "database", name
    if name == "sqlite3":
        db = sub
        if db is not None and _outside(db, root):
            return "database", "sqlite3"
        return None
    if (name, sub) in _MIGRATE:
        return "database", f"{name} {sub}"
    if name in _CLOUD:
        return "cloud", name
    if (name, sub) in _CLOUD_SUB:
        return "cloud", f"{name} {sub}"
    return None


def _git_subcommand(args: list[str]) -> tuple[str | None, list[str]]:
    """(the subcommand, its arguments) of git's arguments (its own options looked through)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return a, args[i + 1:]
    return None, []


def _git_reads(sub: str, rest: list[str]) -> bool:
    """Whether a git subcommand only reads (lists branches, tags, stashes, remotes): no effect."""
    # `>`, `2>&1` and what follows are the shell's, not git's
    rest = [a for a in rest if not a[:1] in "<>" and not a[:2] in ("1>", "2>", "&>")]
    positional = [a for a in rest if not a.startswith("-")]
    if sub == "branch":
        return ("--list" in rest or "-l" in rest or "--show-current" in rest or not positional) and \
            not any(a in _GIT_BRANCH_WRITES or a.startswith("--set-upstream-to=") for a in rest)
    if sub == "tag":
        return ("--list" in rest or "-l" in rest or not positional) and not any(a in _GIT_TAG_WRITES for a in rest)
    if sub == "stash":
        return bool(positional) and positional[0] in ("list", "show")
    if sub == "remote":
        return not positional or positional[0] in ("show", "get-url")
    return False


def _outside(path: str, root: str | None) -> bool:
    """A file argument that names a place outside the project (relative paths are taken as
    inside: the command's directory is not known here)."""
    if path.startswith("~") or path.startswith("$"):
        return True
    if not os.path.isabs(path):
        return path.startswith("../")
    if root is None:
        return True
    root = root.rstrip("/")
    return not (os.path.normpath(path) + "/").startswith(root + "/")


# -- what a restore to a checkpoint leaves as it is ------------------------------------------------

@dataclass
class Effect:
    checkpoint: int             # the checkpoint it ran in (its changes are listed under it)
    kind: str                   # outside | git | command
    what: str                   # one line, for people
    category: str | None = None  # a command's category (CATEGORIES)
    path: str | None = None
    command: str | None = None
    source: str | None = None
    tool: str | None = None
    session_id: str | None = None

    def as_json(self) -> dict:
        return {"checkpoint": self.checkpoint, "kind": self.kind, "category": self.category,
                "path": self.path, "command": self.command, "source": self.source, "tool": self.tool,
                "session_id": self.session_id, "why": self.what}


def not_undone(project, target: Checkpoint, changes: list[tuple[Checkpoint, list[ChangeRow]]]) -> list[Effect]:
    """What a restore to `target` does not undo: outside writes and git moves from the changes
    under `target` and every checkpoint after it (`changes`, newest first), and the shell
    commands the agent ran since `target` was taken that `classify` names, each with the
    checkpoint it ran in, oldest first."""
    found: list[Effect] = []
    seen: set[tuple[int, str]] = set()
    for cp, rows in changes:
        move = getattr(rows, "git", None)
        if move is not None:
            by = (f", by `{move.command}`" if move.source == "bash" and move.command else
                  ", by someone other than the agent" if move.source == "external" else "")
            found.append(Effect(cp.number, "git", f"git {move.text()}{by}: HEAD and branches stay where they are",
                                command=move.command, source=move.source, tool=move.tool,
                                session_id=move.session_id))
        for row in rows:
            if "outside" in row.flags:
                by = f" ({row.tool})" if row.tool else ""
                found.append(Effect(cp.number, "outside", f"a write outside the project{by}: {row.path}",
                                    path=row.path, command=row.command, source=row.source, tool=row.tool,
                                    session_id=row.session_id))
    numbers = sorted((cp.number, cp.created_ns) for cp, _ in changes)
    commands = [(opened_ns, session_id, tool, command)
                for opened_ns, session_id, tool, command in project.catalog.shell_commands(project.id, target.created_ns)]
    for cp, rows in changes:        # a window pruned away still left its changes' command
        commands += [(cp.created_ns, r.session_id, r.tool, r.command) for r in rows
                     if r.source == "bash" and r.command]
    for opened_ns, session_id, tool, command in sorted(commands, key=lambda c: c[0]):
        number = next((n for n, ns in reversed(numbers) if ns <= opened_ns), target.number)
        if (number, command) in seen:
            continue
        seen.add((number, command))
        for category, word in classify(command, project.root):
            found.append(Effect(number, "command", f"{word} ({CATEGORIES[category]})", category=category,
                                command=command, source="bash", tool=tool, session_id=session_id))
            break
    found.sort(key=lambda e: e.checkpoint)
    return found
