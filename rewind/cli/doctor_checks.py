"""The checks `rewind doctor` runs, each returning findings: a level (ok, warn, fail), what
was found, and the fix."""

from __future__ import annotations

import os
import shutil

from rewind.cli import render


def finding(level: str, what: str, fix: str | None = None) -> dict:
    return {"level": level, "what": what, "fix": fix}


def check_hooks(root: str) -> list[dict]:
    import importlib
    from rewind.hooks import ADAPTERS, install as installer
    out, any_installed = [], False
    for agent, module in sorted(ADAPTERS.items()):
        mod = importlib.import_module(module)
        for scope in getattr(mod, "SCOPES", ()):
            st = installer.status_of(mod, mod.settings_path(scope, root), agent)
            if st.get("error"):
                out.append(finding("fail", f"{agent} ({scope}): {st['error']}", "fix the JSON file by hand"))
            elif st["installed"]:
                any_installed = True
                if st["command_resolves"]:
                    out.append(finding("ok", f"{agent} hooks installed ({scope}: {st['path']})"))
                else:
                    out.append(finding("fail", f"{agent} hooks ({scope}) run a command that does not exist: "
                                       + ", ".join(st["commands"]),
                                       f"rewind hooks install {agent} --scope {scope}"))
    if not any_installed:
        out.append(finding("warn", "no agent's hooks are installed for this project: prompts take no checkpoint",
                           "rewind hooks install claude   (or gemini, codex, cursor)"))
    return out


STREAK_WARN = 5      # hook calls in a row that ran on their own, none served: doctor says so


def check_watcher(project) -> list[dict]:
    from rewind import config
    from rewind.hooks.install import installed_for
    from rewind.capture.dirty import healthy, running
    settings = config.load_quietly(project.root)
    row = project.catalog.watcher(project.id)
    live = running(project.home, project.catalog, project.id)
    st = project.catalog.scan_state(project.id)
    out = []
    if live is not None:
        problem = healthy(live)
        if problem:
            out.append(finding("warn", f"the watcher runs (pid {live.pid}) but cannot be trusted: {problem}",
                               "rewind watch --stop; the next prompt starts a new one"))
        else:
            out.append(finding("ok", f"the watcher runs (pid {live.pid}, {live.dirs:,} directories)"))
    elif row is not None and row.stopped_ns is None:
        out.append(finding("warn", f"the watcher (pid {row.pid}) died without stopping",
                           "nothing is lost (hooks scan the whole tree); the next prompt starts it, or `rewind watch`"))
    elif settings is not None and not settings.watch:
        out.append(finding("ok", "the watcher is turned off (watch = false): hooks scan the whole tree"))
    elif installed_for(project.root):
        out.append(finding("ok", "the watcher is not running; an agent session starts it"))
    else:                                  # no hooks: no session of an agent starts anything
        out.append(finding("ok", "the watcher is not running; once hooks are installed (below), an agent "
                                 "session starts it"))
    hooks = project.catalog.hook_counts(project.id)
    from rewind.cli.cmd_watch import streak_fix
    fix = streak_fix(hooks["fallback"]) if hooks["streak"] >= STREAK_WARN else None
    if fix:
        out.append(finding("warn", f"the last {hooks['streak']:,} hook calls ran on their own, none served by "
                                   f"the watcher ({hooks['fallback']}): each does the watcher's work itself", fix))
    if st.fallbacks:
        out.append(finding("warn", f"{st.fallbacks} hook(s) fell back to a full scan (last: {st.fallback})",
                           "see `rewind status`; a lasting cause (watch limit) is listed below"))
    return out


def check_inotify(project) -> list[dict]:
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
        return [finding("fail", f"the project has {dirs:,} directories to watch and the inotify limit is {limit:,}",
                        "sudo sysctl fs.inotify.max_user_watches=524288 (and in /etc/sysctl.d/ to keep it)")]
    return [finding("ok", f"inotify: {dirs:,} directories to watch, limit {limit:,}")]


def check_store(project) -> list[dict]:
    from rewind.catalog import health
    from rewind.history.verify import verify
    out = []
    ok = project.catalog.quick_check()
    out.append(finding("ok" if ok == "ok" else "fail", f"catalog: {ok}",
                       None if ok == "ok" else "copy the data dir aside, then `rewind forget` the damaged project"))
    newest = project.catalog.checkpoints(project.id, limit=1)
    report = verify(project.catalog, project.store, [project.id]) if newest else None
    if report is not None:
        if report.ok:
            out.append(finding("ok", f"store: {report.objects:,} objects checked, intact"))
        else:
            first = report.problems[0]
            out.append(finding("fail", f"store: {len(report.problems)} damaged or missing object(s), e.g. "
                               f"{first.get('object', '')[:12]} {first['problem']}",
                               "`rewind verify` names each; checkpoints that need them cannot be restored"))
    usage = shutil.disk_usage(project.home)
    free = usage.free / usage.total if usage.total else 1
    level = "fail" if usage.free < 200 * 2**20 else "warn" if usage.free < 2 * 2**30 or free < 0.05 else "ok"
    if usage.free < health.ROOM:
        from rewind.cli.explain import full_disk_fix
        out.append(finding("fail", f"disk: the disk where the store is ({project.home}) is full: hooks cannot "
                           "record prompts", full_disk_fix(project.home)))
    else:
        out.append(finding(level, f"disk: {render.human_size(usage.free)} free where the store is ({project.home})",
                           None if level == "ok" else "free some space, or `rewind gc` / lower ring_size"))
    from rewind.history.restore_apply import journal_path
    if os.path.exists(journal_path(project)):
        out.append(finding("warn", "a restore was interrupted", "any rewind command reports it and the way back"))
    return out


def check_failures(project) -> list[dict]:
    from rewind.cli.common import hook_failures, lost_prompts, say_lost
    from rewind.cli.explain import full_disk_fix
    from rewind.log import log_path
    lost = project.catalog.lost(project.id)
    out = []
    if lost:
        out.append(finding("fail", f"checkpoints {lost['first']}–{lost['last']} are missing from the catalog (its "
                                   "newest commits were lost: catalog.sqlite-wal deleted?); gc sweeps nothing "
                                   "meanwhile",
                           "put a backup of catalog.sqlite-wal back beside the catalog to recover them, or "
                           "`rewind gc --forget-lost` to give them up"))
    failed = hook_failures(project)
    gaps = lost_prompts(project)
    if gaps:
        # a fail while the disk is still full (more are lost at each prompt), else history
        from rewind.catalog import health
        full = health.file_system(project.home) == health.FULL
        out.append(finding("fail" if full else "warn", say_lost(gaps),
                           full_disk_fix(project.home) if full else
                           "give those prompts again if their undo point matters; `rewind save` takes one now"))
    if out and not failed:
        return out
    if not failed:
        return [finding("ok", "every hook call since the newest checkpoint recorded")]
    last = failed[-1]
    return out + [finding("fail", f"{len(failed)} hook call(s) could not record since the newest checkpoint; last: "
                            f"{render.safe(last.get('event'))} ({render.age_ns(last['ns'])}): "
                            f"{render.safe(last.get('error'))}",
                     f"the log says why: {log_path()}; this clears at the next checkpoint")]


def check_config(root: str) -> list[dict]:
    from rewind import config
    try:
        s = config.load(root)
    except config.ConfigError as e:
        return [finding("fail", e.message, "fix the setting; until then nothing is dropped")]
    out = [finding("warn", f"{u}: not a rewind setting, ignored", "check the spelling") for u in s.unknown]
    return out or [finding("ok", f"settings: ring {s.ring_size}, retention {s.retention_days:g} days"
                           + (f" ({', '.join(s.sources)})" if s.sources else " (defaults)"))]
