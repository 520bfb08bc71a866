"""The root of the CLI: wires one module per command and owns the single error boundary.

Command modules are imported here to build ``--help``; they must import torch, triton, pandas
and the rest inside their functions so that ``ascendopt --help`` stays fast and torch-free.

Exit codes: 0 pass, 1 correctness, 2 usage/bad input, 3 contract integrity, 4 performance
regression, 5 environment (backend/profiler unavailable), 6 performance inconclusive (noise band too
wide to tell), 70 internal error (a bug: please report).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated

import typer

from ascendopt import __version__

EXIT_CODES_HELP = (
    "Exit codes: 0 pass, 1 correctness failure, 2 usage or bad input, 3 contract integrity violation, "
    "4 performance regression, 5 environment (backend/profiler unavailable), 6 performance inconclusive "
    "(noise band too wide to tell)."
)

app = typer.Typer(
    name="ascendopt",
    help="Freeze, collect, analyze, optimize, gate and re-profile Triton-Ascend kernels.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# (module under ascendopt.cli, command name) in the order of the checklist, then the tools around it.
COMMANDS: list[tuple[str, str]] = [
    ("freeze", "freeze"),
    ("collect", "collect"),
    ("analyze", "analyze"),
    ("optimize_round", "optimize-round"),
    ("gate", "gate"),
    ("reprofile", "reprofile"),
    ("status", "status"),
    ("demo", "demo"),
    ("report", "report"),
    ("kernels", "kernels"),
    ("lint", "lint"),
    ("precheck", "precheck"),
    ("ub", "ub"),
    ("env", "env"),
]

_state = {"debug": False}

try:  # typer >= 0.24 vendors click as typer._click; older typer uses click itself
    from typer._click.exceptions import ClickException as _ClickException
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import ClickException as _ClickException


def _version_callback(value: bool) -> None:
    if value:
        sys.stdout.write(f"ascendopt {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="npu | cuda | cpu (default: auto, npu > cuda > cpu).",
                     envvar="ASCENDOPT_BACKEND"),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    from ascendopt.device import backends

    _state["debug"] = debug
    backends.reset()
    backends.select(backend)


def _register() -> None:
    for module_name, command_name in COMMANDS:
        module = importlib.import_module(f"ascendopt.cli.{module_name}")
        module.register(app, command_name)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map every expected error to its exit code."""
    from ascendopt import console
    from ascendopt.errors import AscendoptError
    from ascendopt.workspace import set_invocation

    args = sys.argv[1:] if argv is None else argv
    set_invocation(list(args))  # the command line the audit log records
    _state["debug"] = "--debug" in args or os.environ.get("ASCENDOPT_DEBUG") == "1"
    try:
        code = app(args=args, prog_name="ascendopt", standalone_mode=False)
    except AscendoptError as exc:
        if _state["debug"]:
            console.stderr().print_exception(suppress=[typer])
        console.error(str(exc))
        console.end_events(int(exc.exit_code), exc.message, exc.hint)
        sys.exit(int(exc.exit_code))
    except typer.Exit as exc:
        console.end_events(exc.exit_code)
        sys.exit(exc.exit_code)
    except _ClickException as exc:  # bad option or argument: usage error, exit 2
        exc.show(file=sys.stderr)
        console.end_events(2, exc.format_message())
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        console.error("interrupted")
        console.end_events(130, "interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the boundary: a bug, shown in full
        console.stderr().print_exception(suppress=[typer])
        console.error("internal error (this is a bug in ascendopt; the traceback above says where)")
        console.end_events(70, f"internal error: {type(exc).__name__}: {exc}")
        sys.exit(70)
    code = code if isinstance(code, int) else 0
    console.end_events(code)
    sys.exit(code)
