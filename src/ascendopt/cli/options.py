"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print one JSON envelope on stdout, whatever the outcome: {schema, command, status, exit_code, "
                   "error, data, next} (schemas: ascendopt/cli/schemas/).")]


def _positive_seconds(value: float | None) -> float | None:
    if value is not None and not value > 0:
        raise typer.BadParameter(f"{value:g}: must be > 0 seconds")
    return value


TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", callback=_positive_seconds, metavar="SECONDS",
                 help="Limit in seconds for every child process this command starts (frozen tests, each workload "
                      "call, each timing phase, each profile), instead of the contract's frozen limits; on expiry "
                      "the child is killed with its process group and the stage that ran it fails (freeze also "
                      "stores it as the task's frozen limits)."),
]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default ./.ascendopt or $ASCENDOPT_WORKSPACE)."),
]
