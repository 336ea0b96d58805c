"""Options and arguments several commands share, each spelled (and helped) once.

A command whose option says something different (`list --project`, `verify --yes`) keeps
its own spelling; these are only the ones that read the same everywhere.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rewind.cli.ids import IdSpec, complete_id, parse_id

CheckpointArg = Annotated[IdSpec, typer.Argument(parser=parse_id, autocompletion=complete_id, metavar="ID",
                                                 help="N, last or last~N.")]
ProjectOpt = Annotated[Optional[str], typer.Option("--project", help="The project's directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON on stdout.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")]
NoPagerOpt = Annotated[bool, typer.Option("--no-pager", help="Print directly, not through $PAGER.")]
