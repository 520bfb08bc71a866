"""The root of the CLI: wires one module per command and owns the single error boundary.

Command modules are imported here to build ``--help``; they must import torch, triton, pandas
and the rest inside their functions so that ``ascendopt --help`` stays fast and torch-free.

Exit codes: 0 pass, 1 correctness, 2 usage/bad input, 3 contract integrity, 4 performance
regression, 5 environment (backend/profiler unavailable), 6 performance inconclusive (noise band too
wide to tell), 70 internal error (a bug: please report), 130/143 interrupted by SIGINT/SIGTERM (``cli.exits``).
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
    "(noise band too wide to tell), 70 internal error (a bug), 130/143 interrupted (SIGINT/SIGTERM). With --json "
    "every command prints one JSON envelope on stdout, whatever the outcome."
)

app = typer.Typer(
    name="ascendopt",
    help="Freeze, collect, analyze, optimize, gate and re-profile Triton-Ascend kernels.\n\n" + EXIT_CODES_HELP,
    epilog="Examples:\n\n\b\n  ascendopt demo                    # the whole loop on a bundled kernel\n"
           "  ascendopt freeze --help           # every command has --help with examples\n"
           "  ascendopt --backend cpu gate --skip-perf --junit gate.xml",
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
    ("adopt", "adopt"),
    ("demo", "demo"),
    ("report", "report"),
    ("kernels", "kernels"),
    ("lint", "lint"),
    ("precheck", "precheck"),
    ("ub", "ub"),
    ("env", "env"),
    ("mcp", "mcp"),
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
        typer.Option("--backend", metavar="BACKEND", help="npu | cuda | cpu (default: auto, npu > cuda > cpu).",
                     envvar="ASCENDOPT_BACKEND"),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdict line and errors (no progress, "
                                        "status lines or tables); --json and --events are unchanged.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, as with NO_COLOR set (output that is "
                                           "not a terminal never has colour).")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    from ascendopt import console
    from ascendopt.device import backends

    _state["debug"] = debug
    console.configure(quiet=quiet, no_color=no_color)
    backends.reset()
    backends.select(backend)


def _register() -> None:
    for module_name, command_name in COMMANDS:
        module = importlib.import_module(f"ascendopt.cli.{module_name}")
        module.register(app, command_name)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map every outcome to its exit code.

    With ``--json`` (anywhere before ``--``) stdout carries exactly one envelope (``cli.envelope``) whatever
    happens: success, a usage error click raises before the command runs, a red gate, an interrupt, a bug.
    Without it, a reader that closes stdout early is not a failure (``cli.exits``).
    """
    from ascendopt import console
    from ascendopt.cli import envelope, exits
    from ascendopt.workspace import set_invocation

    typed = sys.argv[1:] if argv is None else argv
    set_invocation(list(typed))  # the command line the audit log records
    args = optional_values(hoist_output_flags(list(typed)))
    console.reset()
    if "--no-color" in args:  # before the root callback runs: a usage error is printed without colour too
        console.configure(no_color=True)
    _state["debug"] = "--debug" in args or os.environ.get("ASCENDOPT_DEBUG") == "1"
    as_json = envelope.json_requested(args)
    command = envelope.command_of(args)
    with exits.signals_raise_interrupted():
        with (console.capture_json() if as_json else console.deferred_next_steps()) as captured:
            with envelope.stdout_to_stderr() if as_json else exits.pipe_safe_stdout():
                code, error = _run(args, command)
                console.end_events(code, (error or {}).get("message"), (error or {}).get("hint"))  # --events
        if not as_json:  # the text output's `next:` line comes last, after the command's own output
            console.print_next_steps(captured)
        else:
            result = envelope.build(command, code, data=captured.data, next_commands=captured.next, error=error)
            with exits.pipe_safe_stdout():  # a reader gone before the envelope: the exit code still says it all
                sys.stdout.write(console.dumps_json(result) + "\n")
                sys.stdout.flush()
    sys.exit(code)


OUTPUT_FLAGS = ("--quiet", "--no-color")  # root options also accepted after the command name


def hoist_output_flags(args: list[str]) -> list[str]:
    """``ascendopt gate --quiet`` as ``ascendopt --quiet gate``: the output flags are the root's options, and
    are also accepted anywhere after the command (before ``--``), where people type them."""
    cut = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:cut] if a in OUTPUT_FLAGS]
    if not flags:
        return list(args)
    return flags + [a for a in args[:cut] if a not in OUTPUT_FLAGS] + list(args[cut:])


def optional_values(args: list[str]) -> list[str]:
    """Options whose value may be left out (``OPTIONAL_VALUES``: ``--ray`` alone is ``--ray local``), given their
    default value where none follows them (the end, or another option), before ``--``. Click has no such option."""
    from ascendopt.cli.options import OPTIONAL_VALUES

    cut = args.index("--") if "--" in args else len(args)
    out = []
    for i, a in enumerate(args[:cut]):
        out.append(a)
        if a in OPTIONAL_VALUES and (i + 1 >= cut or args[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[a])
    return out + list(args[cut:])


def _run(args: list[str], command: str) -> tuple[int, dict | None]:
    """The single error boundary: run the app; ``(exit code, the envelope's error fields or None)``.

    Every expected error prints one line on stderr; a bug prints its traceback and exits 70.
    """
    from ascendopt import console
    from ascendopt.cli import envelope, exits
    from ascendopt.errors import AscendoptError

    try:
        code = app(args=args, prog_name="ascendopt", standalone_mode=False)
    except AscendoptError as exc:
        if _state["debug"]:
            console.stderr().print_exception(suppress=[typer])
        console.error(str(exc))
        code = int(exc.exit_code)
        return code, envelope.error_fields(code, exc.message, hint=exc.hint, where=envelope.where_of(exc.message))
    except typer.Exit as exc:
        return exc.exit_code, None
    except _ClickException as exc:  # bad option or argument, raised before the command runs: usage error, exit 2
        if _is_help_request(exc):  # `ascendopt` or a group alone: the help, as click prints it
            exc.show(file=sys.stderr)
            return 2, envelope.error_fields(2, exc.format_message())
        usage = " ".join(filter(None, ("ascendopt", command, "--help")))
        message = _click_message(exc)
        console.error(f"{message} (see `{usage}`)")  # one line, like every other usage error
        return 2, envelope.error_fields(2, message, hint=usage, where=_click_where(exc))
    except (exits.Interrupted, KeyboardInterrupt, typer.Abort) as exc:
        code = exc.exit_code if isinstance(exc, exits.Interrupted) else 130
        what = f"ascendopt {command}".strip()
        console.error(f"interrupted: {what} stopped by {exc if isinstance(exc, exits.Interrupted) else 'Ctrl-C'}; "
                      "the workspace is intact (files are replaced whole, child processes were stopped, the lock "
                      "was released)")
        return code, envelope.error_fields(code, f"{what} interrupted", where=what)
    except BrokenPipeError:  # stdout closed under a write the pipe-safe stream did not see: nothing to report
        return 0, None
    except OSError as exc:  # a file system's refusal no inner layer named: the machine's state, not a bug
        from ascendopt.workspace import is_write_problem, write_problem

        if not is_write_problem(exc) or exc.filename is None:
            return _internal_error(exc)
        if _state["debug"]:
            console.stderr().print_exception(suppress=[typer])
        problem = write_problem(exc, doing=None)
        console.error(str(problem))
        code = int(problem.exit_code)
        return code, envelope.error_fields(code, problem.message, where=envelope.where_of(problem.message))
    except Exception as exc:  # noqa: BLE001 - the boundary: a bug, shown in full
        return _internal_error(exc)
    return (code if isinstance(code, int) else 0), None


def _internal_error(exc: BaseException) -> tuple[int, dict]:
    """A bug: its traceback and one line on stderr, exit 70."""
    from ascendopt import console
    from ascendopt.cli import envelope

    console.stderr().print_exception(suppress=[typer])
    console.error("internal error (this is a bug in ascendopt; the traceback above says where)")
    return 70, envelope.error_fields(70, f"{type(exc).__name__}: {exc}", where=envelope.internal_where(exc),
                                     hint="a bug in ascendopt: please report it with the traceback (stderr)")


def _is_help_request(exc: Exception) -> bool:
    """Click's "no arguments: show the help" (``no_args_is_help``), which it raises as a usage error."""
    return type(exc).__name__ == "NoArgsIsHelpError"


def _click_message(exc: Exception) -> str:
    """Click's usage error as one line: its message with the line breaks of long choice lists folded."""
    return " ".join(exc.format_message().split())


def _click_where(exc: Exception) -> str | None:
    """The option or argument a click usage error is about (``--pairs``), when it says."""
    param = getattr(exc, "param", None)
    if param is not None:
        opts = getattr(param, "opts", None) or [getattr(param, "name", None)]
        return opts[0]
    return getattr(exc, "option_name", None)
