"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default ./.ascendopt or $ASCENDOPT_WORKSPACE)."),
]
