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


STEPS = [
    ("The story, a checkpoint a line: each prompt, then what happened after it", ["list"]),
    ("One checkpoint: every change after prompt 2, and who made it", ["show", "2"]),
    ("What changed after it, line counts per path", ["diff", "2", "--stat"]),
    ("Back to checkpoint 1: the plan, then the restore (a safety checkpoint first)", ["to", "1", "--yes"]),
    ("The prompts stay in front: the rewind's safety checkpoint folds under checkpoint 1", ["list"]),
    ("Every checkpoint on its own row, the newest three: the safety checkpoint is one too",
     ["list", "--every", "-n", "3"]),
    ("Take the rewind back", ["undo", "--yes"]),
]


def rewind_command() -> str:
    """How to run rewind from a shell right now: the script beside this interpreter (the
    quick start's .venv/bin/rewind, which is not on PATH), else `python -m rewind`."""
    import shutil
    script = os.path.join(os.path.dirname(sys.executable), "rewind")
    if shutil.which("rewind") == script:
        return "rewind"
    return script if os.path.exists(script) else f"{sys.executable} -m rewind"


def demo_impl(keep: bool = False) -> None:
    import shutil
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
    try:
        render.out(f"== A session: a throw-away project in {project}; a Claude Code session (real 2.1.197 "
                   "hook payloads) writes, edits, runs shell commands (one fails after writing), makes a "
                   "symlink, and you edit README.md between prompts.\n")
        replay(session, hook_in_process(project), between)
        env = dict(os.environ, REWIND_HOME=home)
        for number, (title, args) in enumerate(STEPS, 1):
            render.out(f"== {number}. {title}")
            render.out(f"$ rewind {' '.join(args)}")
            proc = subprocess.run([sys.executable, "-m", "rewind", *args], cwd=project, env=env,
                                  capture_output=True, text=True)
            sys.stdout.write(proc.stdout)
            if proc.stderr:
                sys.stderr.write(proc.stderr)
            render.out("")
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    cmd = rewind_command()
    if keep:
        render.out(f"Explore it yourself:  cd {project} && REWIND_HOME={home} {cmd} list")
    else:
        render.out(f"The throw-away project and its store (REWIND_HOME={home}) are removed again; "
                   f"`{cmd} demo --keep` keeps them to explore.")
    render.out(f"In your own project:  cd your-project && {cmd} hooks install claude   (or gemini, codex, cursor)")


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(keep: bool = typer.Option(False, "--keep", help="Keep the throw-away project and its store.")):
        """Play a scripted Claude Code session in a throw-away project, then list, show, diff,
        rewind and undo it."""
        demo_impl(keep)
