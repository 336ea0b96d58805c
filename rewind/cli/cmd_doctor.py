"""rewind doctor: is everything in place, and if not, what to do about it."""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import sys
from typing import Optional

import typer

from rewind import __version__
from rewind.cli import render


def _finding(level: str, what: str, fix: str | None = None) -> dict:
    return {"level": level, "what": what, "fix": fix}


def _hooks(root: str) -> list[dict]:
    import importlib
    from rewind.hooks import ADAPTERS
    from rewind.hooks import install as installer
    out, any_installed = [], False
    for agent, module in sorted(ADAPTERS.items()):
        mod = importlib.import_module(module)
        for scope in getattr(mod, "SCOPES", ()):
            st = installer.status(mod.settings_path(scope, root), agent)
            if st.get("error"):
                out.append(_finding("fail", f"{agent} ({scope}): {st['error']}", "fix the JSON file by hand"))
            elif st["installed"]:
                any_installed = True
                if st["command_resolves"]:
                    out.append(_finding("ok", f"{agent} hooks installed ({scope}: {st['path']})"))
                else:
                    out.append(_finding("fail", f"{agent} hooks ({scope}) run a command that does not exist: "
                                        + ", ".join(st["commands"]),
                                        f"rewind hooks install {agent} --scope {scope}"))
    if not any_installed:
        out.append(_finding("warn", "no agent's hooks are installed for this project: prompts take no checkpoint",
                            "rewind hooks install claude   (or gemini, codex, cursor)"))
    return out


def _watcher(project) -> list[dict]:
    from rewind import config
    from rewind.watch import watcher
    settings = config.load_quietly(project.root)
    row = project.catalog.watcher(project.id)
    live = watcher.running(project.home, project.catalog, project.id)
    st = project.catalog.scan_state(project.id)
    out = []
    if live is not None:
        problem = watcher.healthy(live)
        if problem:
            out.append(_finding("warn", f"the watcher runs (pid {live['pid']}) but cannot be trusted: {problem}",
                                "rewind watch --stop; the next prompt starts a new one"))
        else:
            out.append(_finding("ok", f"the watcher runs (pid {live['pid']}, {live['dirs']:,} directories)"))
    elif row is not None and row["stopped_ns"] is None:
        out.append(_finding("warn", f"the watcher (pid {row['pid']}) died without stopping",
                            "nothing is lost (hooks scan the whole tree); the next prompt starts it, or `rewind watch`"))
    elif settings is not None and not settings.watch:
        out.append(_finding("ok", "the watcher is turned off (watch = false): hooks scan the whole tree"))
    else:
        out.append(_finding("ok", "the watcher is not running; an agent session starts it"))
    if st.get("fallbacks"):
        out.append(_finding("warn", f"{st['fallbacks']} hook(s) fell back to a full scan (last: {st['fallback']})",
                            "see `rewind status`; a lasting cause (watch limit) is listed below"))
    return out


def _inotify(project) -> list[dict]:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return []
    from rewind.capture.snapshot import TreeLoader
    from rewind.store.tree import DIR
    cp = project.catalog.latest(project.id)
    if cp is None:
        return []
    load, dirs, stack = TreeLoader(project.store), 1, [cp.tree]
    try:
        while stack:
            for e in load(stack.pop()).values():
                if e.kind == DIR:
                    dirs += 1
                    stack.append(e.oid)
    except Exception:
        return []
    if dirs > 0.8 * limit:
        return [_finding("fail", f"the project has {dirs:,} directories to watch and the inotify limit is {limit:,}",
                         "sudo sysctl fs.inotify.max_user_watches=524288 (and in /etc/sysctl.d/ to keep it)")]
    return [_finding("ok", f"inotify: {dirs:,} directories to watch, limit {limit:,}")]


def _store(project) -> list[dict]:
    from rewind.history.verify import verify
    out = []
    ok = project.catalog.quick_check()
    out.append(_finding("ok" if ok == "ok" else "fail", f"catalog: {ok}",
                        None if ok == "ok" else "copy the data dir aside, then `rewind forget` the damaged project"))
    newest = project.catalog.checkpoints(project.id, limit=1)
    report = verify(project.catalog, project.store, [project.id]) if newest else None
    if report is not None:
        if report.ok:
            out.append(_finding("ok", f"store: {report.objects:,} objects checked, intact"))
        else:
            first = report.problems[0]
            out.append(_finding("fail", f"store: {len(report.problems)} damaged or missing object(s), e.g. "
                                f"{first.get('object', '')[:12]} {first['problem']}",
                                "`rewind verify` names each; checkpoints that need them cannot be restored"))
    usage = shutil.disk_usage(project.home)
    free = usage.free / usage.total if usage.total else 1
    level = "fail" if usage.free < 200 * 2**20 else "warn" if usage.free < 2 * 2**30 or free < 0.05 else "ok"
    out.append(_finding(level, f"disk: {render.human_size(usage.free)} free where the store is ({project.home})",
                        None if level == "ok" else "free some space, or `rewind gc` / lower ring_size"))
    from rewind.history.restore import _journal_path
    if os.path.exists(_journal_path(project)):
        out.append(_finding("warn", "a restore was interrupted", "any rewind command reports it and the way back"))
    return out


def _failures(project) -> list[dict]:
    from rewind.log import log_path
    from rewind.cli.common import hook_failures
    lost = project.catalog.lost(project.id)
    out = []
    if lost:
        out.append(_finding("fail", f"checkpoints {lost['first']}–{lost['last']} are missing from the catalog (its "
                                    "newest commits were lost: catalog.sqlite-wal deleted?); gc sweeps nothing "
                                    "meanwhile",
                            "put a backup of catalog.sqlite-wal back beside the catalog to recover them, or "
                            "`rewind gc --forget-lost` to give them up"))
    failed = hook_failures(project)
    if out and not failed:
        return out
    if not failed:
        return [_finding("ok", "every hook call since the newest checkpoint recorded")]
    last = failed[-1]
    return out + [_finding("fail", f"{len(failed)} hook call(s) could not record since the newest checkpoint; last: "
                             f"{render.safe(last.get('event'))} ({render.age_ns(last['ns'])}): "
                             f"{render.safe(last.get('error'))}",
                     f"the log says why: {log_path()}; this clears at the next checkpoint")]


def _config(root: str) -> list[dict]:
    from rewind import config
    try:
        s = config.load(root)
    except config.ConfigError as e:
        return [_finding("fail", e.message, "fix the setting; until then nothing is dropped")]
    out = [_finding("warn", f"{u}: not a rewind setting, ignored", "check the spelling") for u in s.unknown]
    return out or [_finding("ok", f"settings: ring {s.ring_size}, retention {s.retention_days:g} days"
                            + (f" ({', '.join(s.sources)})" if s.sources else " (defaults)"))]


def doctor_impl(project_dir: Optional[str], as_json: bool) -> int:
    from rewind.errors import NotInProject
    from rewind.cli.common import project_for
    findings = [_finding("ok", f"rewind {__version__}, Python {platform.python_version()} ({sys.executable}), "
                               f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}")]
    try:
        project = project_for(project_dir)
    except NotInProject:
        project = None
        root = os.path.realpath(project_dir or os.getcwd())
        findings.append(_finding("warn", f"no checkpoints yet for {root}",
                                 "the next prompt to an agent with rewind's hooks takes one; `rewind save` takes one now"))
    except Exception as e:           # a damaged catalog: the rest is still worth checking
        from rewind.cli import _catalog_error
        damaged = _catalog_error(e)
        if damaged is None:
            raise
        project = None
        root = os.path.realpath(project_dir or os.getcwd())
        findings.append(_finding("fail", damaged,
                                 "move the catalog aside (`mv catalog.sqlite catalog.sqlite.damaged` in the data "
                                 "directory, with its -wal and -shm files): rewind starts a new one; then "
                                 "`rewind save`"))
    if project is not None:
        root = project.root
        try:
            for part in (_store, _watcher, _inotify, _failures):
                findings += part(project)
        finally:
            project.close()
    findings += _hooks(root) + _config(root)
    failed = any(f["level"] == "fail" for f in findings)
    if as_json:
        render.emit_json({"ok": not failed, "project": root, "findings": findings})
        return 1 if failed else 0
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
    for f in findings:
        render.out(f"{marks[f['level']]}  {f['what']}")
        if f["fix"]:
            render.out(f"      fix: {f['fix']}")
    warns = sum(f["level"] == "warn" for f in findings)
    render.out("" if not failed and not warns else
               f"\n{sum(f['level'] == 'fail' for f in findings)} problem(s), {warns} warning(s)")
    return 1 if failed else 0


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor_cmd(project: Optional[str] = typer.Option(None, "--project", help="The project's directory."),
                   as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")):
        """Check hooks, watcher, store, disk, inotify limit and settings; each problem with its fix."""
        raise typer.Exit(doctor_impl(project, as_json))
