"""rewind save: a checkpoint of the project's tree, taken by hand."""

from __future__ import annotations

from typing import Optional

import typer

from rewind.capture.pending import locked_completing
from rewind.capture.working_copy import capture
from rewind.cli import render
from rewind.cli.common import project_for
from rewind.cli.options import ProjectOpt


def save_impl(message: Optional[str], project_dir: Optional[str]) -> None:
    project = project_for(project_dir, create=True)
    try:
        from rewind import config
        from rewind.history.guard import from_agent
        # a save from an agent's tool never evicts a checkpoint: a loop of saves must not
        # push the person's history out of the ring (the next prompt's checkpoint applies it)
        settings = None if from_agent(project.catalog) else config.LOAD
        tick = render.progress("save")
        try:
            from rewind.text import unbroken
            cp, result = capture(project, "manual", message=unbroken(message) if message else message,
                                 full=True, progress=tick, settings=settings, lock=locked_completing)
            if settings is None:         # and it counts in a ring of its own (retention.py)
                with project.catalog.transaction():
                    project.catalog.set_stats(project.id, cp.number, dict(cp.stats, by_agent=True))
        finally:
            if tick is not None:
                tick.close()
        st = result.stats
        render.out(f"Saved checkpoint {cp.number} of {project.root}: {st.files} files, "
                   f"{st.symlinks} symlinks, {st.dirs} dirs ({st.hashed} read, the rest unchanged).")
        for key, label, with_why in (("large", "too large to store", False), ("unreadable", "unreadable", True),
                                     ("special", "special files skipped", True),
                                     ("changing", "kept changing while read", False)):
            items = getattr(st, key)
            if items:
                names = [path for path, _why in items] if with_why else items
                render.err(f"warning: {len(items)} {label}: "
                           + ", ".join(render.display_path(n) for n in names[:5])
                           + (" …" if len(names) > 5 else ""))
    finally:
        project.close()


def register(app: typer.Typer) -> None:
    @app.command("save")
    def save_cmd(message: Optional[str] = typer.Option(None, "-m", "--message", help="A note for this checkpoint."),
                 project: ProjectOpt = None):
        """Take a checkpoint of the project's tree now."""
        save_impl(message, project)
