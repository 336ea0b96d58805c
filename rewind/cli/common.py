"""Helpers shared by the command modules: the project a command works on (found, checked,
kept to its retention), the checkpoint an id names in it, paths, and what to warn about."""

from __future__ import annotations

import os

from rewind.cli import render
from rewind.cli.pending_view import TO_WAIT_S, is_pending, settled, with_pending
from rewind.errors import CheckpointNotFound, OutsideProject, RewindError
from rewind.history.restore_apply import recover
from rewind.project import Project, find_project, open_catalog, open_project, resolve_root


def project_for(project_dir: str | None, create: bool = False) -> Project:
    """The project named by --project, else the one containing the current directory."""
    if project_dir is not None:
        if not os.path.isdir(project_dir):
            # a project whose directory is gone (moved away) can still be looked at
            _, catalog = open_catalog()
            gone = os.path.abspath(project_dir)
            known = catalog.project_id(gone, create=False)
            catalog.close()
            if not known:
                raise RewindError(f"--project {project_dir!r} is not a directory")
            project = open_project(gone, create=False)
            apply_retention(project)
            return project
        real = os.path.realpath(project_dir)
        _, catalog = open_catalog()
        root = real if catalog.project_id(real, create=False) else resolve_root(real)
        catalog.close()
    else:
        try:
            cwd = os.getcwd()
        except FileNotFoundError:
            raise RewindError("the current directory no longer exists") from None
        _, catalog = open_catalog()
        root = find_project(cwd, catalog)
        catalog.close()
    project = open_project(root, create=create)
    report_recovery(project)
    report_lost(project)
    apply_retention(project)
    if os.path.isdir(os.path.join(project.home, "bisect")):     # a killed bisect's scratch copy
        from rewind.history.bisect import clean_leftovers
        clean_leftovers(project.home)
    return project


def report_lost(project: Project) -> None:
    """Checkpoints the catalog lost (its newest commits: a deleted catalog.sqlite-wal), said
    at every command until the user decides; their numbers are never handed out again."""
    lost = project.catalog.check_lost(project.id)
    if lost:
        render.err(f"warning: checkpoints {lost['first']}–{lost['last']} of {project.root} are missing from the "
                   "catalog (its newest commits were lost: catalog.sqlite-wal deleted?). Their content stays in "
                   "the store; put a backup of the catalog's -wal back to recover them, or `rewind gc "
                   "--forget-lost` to give them up")


def project_settings(project: Project):
    """The project's settings; a bad config file is a warning (and nothing is dropped)."""
    from rewind import config
    try:
        settings = config.load(project.root)
    except config.ConfigError as e:
        render.err(f"warning: {e.message}; nothing is dropped until it is fixed")
        return None
    for key in settings.unknown:
        render.err(f"warning: {key}: not a rewind setting, ignored")
    return settings


def apply_retention(project: Project) -> None:
    """Expired checkpoints are dropped by the next command, not only the next hook."""
    from rewind.clock import now_ns
    from rewind.retention import enforce
    settings = project_settings(project)
    if settings is None:
        return
    now = now_ns()
    if enforce(project.catalog, project.id, settings, now, dry_run=True):
        with project.catalog.transaction():
            enforce(project.catalog, project.id, settings, now)


def report_recovery(project: Project) -> dict | None:
    found = recover(project)
    if found:
        render.err(f"rewind: a restore to checkpoint {found.get('target')} was interrupted; "
                   f"removed {found.get('temp_files_removed', 0)} temporary file(s).")
        render.err(f"rewind: checkpoint {found.get('safety')} holds the tree as it was before; "
                   f"`rewind to {found.get('target')}` finishes the restore, "
                   f"`rewind to {found.get('safety')}` goes back.")
    return found


def resolve_checkpoint(project: Project, spec, wait_s: float | None = TO_WAIT_S):
    """The checkpoint `spec` names. One still pending (its prompt came during the watcher's
    first scan) is waited for, up to `wait_s` seconds (REWIND_SETTLE_TIMEOUT overrides), for a
    command that needs its tree; with `wait_s=None` it is returned as it is (`show`)."""
    cp = _resolve(project, spec)
    if is_pending(cp) and wait_s is not None:
        return settled(project, cp, wait_s)
    return cp


def _resolve(project: Project, spec):
    kind, n = spec
    if kind == "n":
        # pending, or completed between the two reads
        cp = (project.catalog.checkpoint(project.id, n) or project.catalog.pending_one(project.id, n)
              or project.catalog.checkpoint(project.id, n))
        if cp is None:
            hidden = {h.number: h.hidden_why for h in project.catalog.hidden(project.id)}
            if n in hidden:
                raise CheckpointNotFound(
                    f"checkpoint {n} of {project.root} no longer exists in the listings: {hidden[n]}",
                    hint="its content stays in the store until a gc a day after it expired; a clock set "
                         "right again, or a longer retention, brings it back")
            kept = with_pending(project, project.catalog.checkpoints(project.id))
            newest, oldest = (kept[0], kept[-1]) if kept else (None, None)
            if n < 1:
                raise CheckpointNotFound(f"there is no checkpoint {n}: checkpoints are numbered from 1",
                                         hint=f"the newest is {newest.number}; `rewind list` shows them" if newest
                                         else "there are no checkpoints yet; `rewind save` takes one")
            if newest and n < oldest.number or (not newest and n < _next_number(project)):
                raise CheckpointNotFound(
                    f"checkpoint {n} of {project.root} no longer exists: the ring or the retention dropped it",
                    hint=(f"the oldest kept is {oldest.number}; " if oldest else "")
                    + "`ring_size` and `retention_days` in .rewind.toml keep more")
            raise CheckpointNotFound(
                f"no checkpoint {n} in {project.root}",
                hint=f"the newest is {newest.number}; `rewind list` shows them" if newest
                else "there are no checkpoints yet; `rewind save` takes one")
        return cp
    cps = with_pending(project, project.catalog.checkpoints(project.id, limit=n + 1))[:n + 1]
    if len(cps) <= n:
        raise CheckpointNotFound(f"no checkpoint last~{n} in {project.root} (there are {len(cps)})"
                                 if n else f"no checkpoints yet in {project.root}",
                                 hint="`rewind save` takes one")
    return cps[n]


def _next_number(project: Project) -> int:
    return project.catalog.next_number(project.id)


def project_paths(project: Project, paths: list[str] | None) -> list[str] | None:
    """Paths from the command line (relative to the current directory) as project paths."""
    if not paths:
        return None
    out = []
    cwd = os.getcwd()
    root = project.root.rstrip("/")
    for p in paths:
        absolute = os.path.normpath(os.path.join(cwd, p))
        if absolute == root or absolute.startswith(root + "/"):
            # inside the project as written: a directory that became a symlink since is a
            # path of the tree all the same (the restore puts the directory back)
            out.append(absolute[len(root) + 1:] if absolute != root else "")
            continue
        parent, base = os.path.split(absolute)
        real = os.path.join(os.path.realpath(parent), base) if base else os.path.realpath(parent)
        if real == project.root:
            out.append("")
            continue
        if not real.startswith(project.root.rstrip("/") + "/"):
            raise OutsideProject(f"{p!r} is outside the project {project.root}")
        out.append(real[len(project.root.rstrip("/")) + 1:])
    return out


def hook_failures(project: Project) -> list[dict]:
    """Hook calls for this project that could not record since its newest checkpoint (what
    a full disk left in the reserve is moved to the failure ledger first, once there is room)."""
    from rewind import clock
    from rewind.hooks.failures import settle, since
    settle(project.home, clock.wall_ns())
    newest = project.catalog.latest(project.id)
    return since(project.home, project.root, newest.created_ns if newest else 0)


def lost_prompts(project: Project) -> list[dict]:
    """Prompts of this project no hook could record (a full disk...), of the last days,
    whatever checkpoints came after: gaps in the history. After hook_failures (it settles)."""
    from rewind import clock
    from rewind.hooks.failures import lost_prompts as lost
    return lost(project.home, project.root, clock.wall_ns())


def say_lost(lost: list[dict]) -> str:
    """The lost prompts in one line: how many, why, when, which sessions, their first words."""
    last = lost[-1]
    why = "the data disk was full" if all(str(i.get("error", "")).startswith("disk full") for i in lost) \
        else render.safe(last.get("error"))
    sessions = sorted({str(i.get("session") or "?") for i in lost})
    words = ", ".join(f'"{render.safe(i["prompt"])}"' for i in lost[-3:] if i.get("prompt"))
    return (f"{len(lost)} prompt(s) were not recorded ({why}): they have no checkpoint; the last one "
            f"{render.age_ns(last['ns'])}, session {render.safe(', '.join(sessions)[:120])}"
            + (f": {words}" if words else ""))


def warn_hook_failures(project: Project) -> None:
    failed = hook_failures(project)
    if failed:
        last = failed[-1]
        render.err(f"warning: {len(failed)} hook call(s) could not record since the newest checkpoint "
                   f"(last: {render.safe(last.get('event'))}, {render.safe(last.get('error'))}); "
                   "`rewind doctor` says more")
    lost = lost_prompts(project)
    if lost:
        render.err(f"warning: {say_lost(lost)}")


def note_hidden(project: Project) -> None:
    """Checkpoints that left the listings but not the store yet, said (on stderr)."""
    hidden = project.catalog.hidden(project.id)
    if hidden:
        numbers = ", ".join(str(h.number) for h in hidden[:8]) + (" …" if len(hidden) > 8 else "")
        render.err(f"note: {len(hidden)} checkpoint(s) hidden ({numbers}): {render.safe(hidden[0].hidden_why)}")


def no_checkpoints_yet(root: str) -> str:
    """What to say of a project with no checkpoint: whether its prompts will take them."""
    from rewind.hooks.install import installed_for
    hooks = installed_for(root)
    if hooks:
        return (f"no checkpoints yet: rewind's hooks are installed for {', '.join(hooks)}, so the next prompt "
                "takes one; `rewind save` takes one now.")
    return "no checkpoints yet. `rewind save` takes one; `rewind hooks install claude` takes one at every prompt."
