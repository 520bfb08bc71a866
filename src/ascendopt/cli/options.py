"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.pool.devices import LOCAL_RAY

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
    typer.Option("--workspace", "-w", metavar="DIR",
        help="Workspace folder (default: $ASCENDOPT_WORKSPACE, else the nearest "
                                           ".ascendopt/ in this folder or a parent up to the git root, else "
                                           "./.ascendopt)."),
]


DevicesOpt = Annotated[
    str | None,
    typer.Option("--devices", metavar="DEVICES",
                 help="Spread the work over a pool of this host's devices: a count N (the first N) or a list of "
                      "indices (0,2,3); one worker per device, each anchored on the frozen baseline first, a device "
                      "off it quarantined (docs/pool.md). On cpu a device is a slot of the cores. With --ray: at "
                      "most N."),
]
# ``--ray`` alone means a Ray started for the command (``cli.optional_values`` supplies it)
OPTIONAL_VALUES = {"--ray": LOCAL_RAY}
RayOpt = Annotated[
    str | None,
    typer.Option("--ray", metavar="ADDRESS",
                 help="Spread the work over a Ray cluster: one actor per device (NPU / GPU resource; on cpu the "
                      "custom resource 'device'). ADDRESS: host:port, ray://host:port or auto; --ray alone: a local "
                      "Ray for this command. Needs pip install 'ascendopt[pool]'."),
]


def pool_options(devices: str | None, ray: str | None):
    """``--devices`` / ``--ray`` as one ``pool.options.PoolOptions``, checked now (exit 2 naming a bad value)."""
    from ascendopt.device import backends
    from ascendopt.pool.options import PoolOptions

    options = PoolOptions(devices, ray)
    if options.wanted:
        options.check(backends.current().name)
    return options


def _open_events(ctx: typer.Context, value: str | None) -> str | None:
    if value is not None:
        from ascendopt import console

        console.open_events(value, ctx.info_name or "ascendopt")
    return value


EventsOpt = Annotated[
    str | None,
    typer.Option("--events", metavar="FILE", callback=_open_events,
                 help="Also write the command's progress as NDJSON events to FILE (appended; '-' for stderr): "
                      "phase_start, progress, measurement, stage_result, round_recorded, pool, phase_end, error "
                      "(schema: ascendopt/cli/schemas/events.schema.json)."),
]
def _existing_interpreter(value: str | None) -> str | None:
    """An explicit interpreter must exist: a typo is a usage error (exit 2) before any test or build starts,
    not a precheck quietly recorded as "not run"."""
    from pathlib import Path

    if value is not None:
        path = Path(value).expanduser()
        if path.is_dir():
            raise typer.BadParameter(f"{value}: a folder, not an interpreter (give its bin/python)")
        if not path.exists():
            raise typer.BadParameter(f"{value}: no such interpreter")
    return value


AscendPythonOpt = Annotated[
    str | None,
    typer.Option("--ascend-python", metavar="PATH", callback=_existing_interpreter,
                 help="Interpreter of an existing triton-ascend environment for the Ascend lowering precheck "
                      "(default $ASCENDOPT_ASCEND_PYTHON, else the one `ascendopt precheck` builds under "
                      "~/.cache/ascendopt/ascend-venv)."),
]
NoPrecheckOpt = Annotated[
    bool,
    typer.Option("--no-precheck", help="Off-NPU, do not check that the kernels lower for Ascend (the record says it "
                                       "was skipped). The check never installs triton-ascend: without an environment "
                                       "it is recorded as not run."),
]


def examples(*lines: str) -> str:
    """A command's "Examples:" epilog for ``--help``: the lines printed as written (click's ``\\b`` marker keeps
    the block from being rewrapped), indented under the heading."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)

CsvOpt = Annotated[bool, typer.Option(
    "--csv", help="Print the tables as CSV on stdout (a header row each, a blank line after each table); the "
                  "other lines go to stderr.")]
