"""rewind demo: a throw-away project and a scripted Claude Code session, then the commands."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import typer

from rewind.cli import render


SETUP = {"README.md": "# demo project\n", "config.ini": "[core]\nname = demo\nlevel = 1\n",
         "old.log": "stale log line\n", "a.txt": "alpha\n"}


def demo_impl() -> None:
    from rewind.cli.replay import bundled_session, fill, hook_in_process, replay
    base = tempfile.mkdtemp(prefix="rewind-demo-")
    project = os.path.join(base, "project")
    home = os.path.join(base, "store")
    os.makedirs(project)
    for name, text in SETUP.items():
        with open(os.path.join(project, name), "w") as f:
            f.write(text)
    os.environ["REWIND_HOME"] = home     # the demo never touches your real store
    os.environ["REWIND_WATCH"] = "0"     # and leaves no watcher behind for a throw-away project
    prompts = [0]

    def between(payload: dict) -> None:
        prompts[0] += 1
        if prompts[0] == 2:   # you edit a file in your editor between two prompts
            with open(os.path.join(project, "README.md"), "a") as f:
                f.write("\nedited by hand between prompts\n")

    session = [fill(p, project, "demo-session-1", os.path.join(base, "claude-config"))
               for p in bundled_session()]
    render.out(f"A throw-away project in {project}; a Claude Code session (real 2.1.197 hook payloads) "
               "writes, edits, runs shell commands (one fails after writing), makes a symlink, and you "
               "edit README.md between prompts.\n")
    replay(session, hook_in_process(project), between)
    env = dict(os.environ, REWIND_HOME=home)
    for args in (["list"], ["show", "2"], ["diff", "2", "--stat"], ["to", "1", "--dry-run"],
                 ["to", "1", "--yes"], ["list", "-n", "3"], ["undo", "--yes"]):
        render.out(f"$ rewind {' '.join(args)}")
        proc = subprocess.run([sys.executable, "-m", "rewind", *args], cwd=project, env=env,
                              capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        if proc.stderr:
            sys.stderr.write(proc.stderr)
        render.out("")
    render.out(f"Explore it yourself:  cd {project} && REWIND_HOME={home} rewind list")


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd():
        """Play a scripted Claude Code session in a throw-away project, then list, show, diff,
        rewind and undo it."""
        demo_impl()
