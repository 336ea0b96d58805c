"""rewind doctor: is everything in place, and if not, what to do about it."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
from typing import Optional

import typer

from rewind import __version__
from rewind.cli import render
from rewind.cli.doctor_checks import (check_config, check_failures, check_hooks, check_inotify, check_store,
                                      check_watcher, finding)
from rewind.cli.options import JsonOpt, ProjectOpt


def doctor_impl(project_dir: Optional[str], as_json: bool) -> int:
    from rewind.cli.common import project_for
    from rewind.errors import NotInProject
    findings = [finding("ok", f"rewind {__version__}, Python {platform.python_version()} ({sys.executable}), "
                              f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}")]
    try:
        project = project_for(project_dir)
    except NotInProject:
        project = None
        root = os.path.realpath(project_dir or os.getcwd())
        findings.append(finding("warn", f"no checkpoints yet for {root}",
                                "the next prompt to an agent with rewind's hooks takes one; `rewind save` takes one now"))
    except Exception as e:           # a full disk or a damaged catalog: the rest is still worth checking
        from rewind.cli.explain import catalog_trouble
        trouble = catalog_trouble(e)
        if trouble is None:
            raise
        project = None
        root = os.path.realpath(project_dir or os.getcwd())
        findings.append(finding("fail", trouble.what, trouble.fix))
    if project is not None:
        root = project.root
        try:
            for part in (check_store, check_watcher, check_inotify, check_failures):
                findings += part(project)
        finally:
            project.close()
    findings += check_hooks(root) + check_config(root)
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
    def doctor_cmd(project: ProjectOpt = None, as_json: JsonOpt = False):
        """Check hooks, watcher, store, disk, inotify limit and settings; each problem with its fix."""
        raise typer.Exit(doctor_impl(project, as_json))
