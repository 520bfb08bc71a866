"""`ascendopt mcp`: the loop's commands as Model Context Protocol tools, served over stdio.

Built on the official ``mcp`` SDK (2.x, low-level ``Server``; ``pip install 'ascendopt[mcp]'``). The tool list
is read from the CLI's own command registry (``cli.COMMANDS``, through click): each tool is one command of
``TOOL_COMMANDS`` that is registered, its input schema made from the command's options and arguments, so a
command added to the registry (``status``) appears without an edit here and an absent one is not listed.

A tool call runs ``python -m ascendopt COMMAND ... --json`` in a child process with a time limit
(``--tool-timeout``): a hanging workload cannot hang the server, and no state (the selected backend, imported
kernels, a poisoned device) leaks from one call into the next. On expiry the child's process group gets
SIGTERM (the command exits 143 with its own envelope, the workspace intact), then SIGKILL. The result is the
command's JSON envelope (``cli.envelope``), as text and as structured content, ``is_error`` when its exit
code is not 0; an envelope longer than ``MAX_RESULT_CHARS`` is written whole to a file and summarized
(long lists cut, long strings shortened), its ``truncated`` field naming the file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ascendopt.cli.options import examples

# The commands an agent drives the loop with (demo, env and mcp itself are for people).
TOOL_COMMANDS = ("freeze", "collect", "analyze", "optimize-round", "gate", "reprofile", "status", "report",
                 "kernels", "lint", "ub")
DEFAULT_TOOL_TIMEOUT_S = 3600.0  # a CPU optimize-round --auto or a device gate with many pairs takes minutes
TERM_GRACE_S = 30.0  # after SIGTERM, the time a command has to print its envelope and let go of the lock
MAX_RESULT_CHARS = 20_000  # a tool result an agent's context can take; the full envelope goes to a file
_LIST_KEEP = (20, 10, 5, 2, 1)  # items kept per list while summarizing, tried in this order
_STRING_KEEP = 2_000  # characters kept of a long string while summarizing
_SKIPPED_PARAMS = {"json", "help"}  # the server always asks for --json; help is for people
_running: set[subprocess.Popen] = set()  # the children of tool calls in flight (stopped when the server stops)
_CLICK_TYPES = {"integer": "integer", "float": "number", "boolean": "boolean"}
_PYTHON_TYPES = {int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: the command it runs and how its JSON arguments become a command line."""

    name: str
    description: str
    input_schema: dict[str, Any]
    options: dict[str, Any]  # property name -> click parameter

    def argv(self, arguments: dict[str, Any]) -> list[str]:
        """The command line (after ``ascendopt``) for ``arguments``; raises ``UsageError`` for an unknown
        argument."""
        from ascendopt.errors import UsageError

        unknown = sorted(set(arguments) - set(self.options))
        if unknown:
            raise UsageError(f"{self.name}: unknown argument(s) {', '.join(unknown)}",
                             hint=f"known: {', '.join(sorted(self.options)) or 'none'}")
        words, positional = [self.name], []
        for key, param in self.options.items():
            value = arguments.get(key)
            if value is None or value is False:
                continue
            values = value if isinstance(value, list) else [value]
            if param.param_type_name == "argument":
                positional += [str(v) for v in values]
            elif value is True and param.is_flag:
                words.append(param.opts[0])
            else:
                for v in values:
                    words += [param.opts[0], str(v)]
        return words + (["--", *positional] if positional else [])


def _json_type(param: Any) -> str:
    """The JSON type of a parameter's values: from click's type where the parameter has one, else from the
    annotation typer keeps (typer >= 0.24 vendors click and types parameters by annotation)."""
    click_type = getattr(param, "type", None)
    if click_type is not None:
        return _CLICK_TYPES.get(getattr(click_type, "name", ""), "string")
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", str)
    args = getattr(annotation, "__args__", None)
    if args:  # list[int] -> int
        annotation = args[0]
    return _PYTHON_TYPES.get(annotation, "string")


def _property(param: Any) -> dict[str, Any]:
    """The JSON Schema of one click parameter (its help as the description)."""
    item: dict[str, Any] = {"type": "boolean" if getattr(param, "is_flag", False) else _json_type(param)}
    choices = getattr(getattr(param, "type", None), "choices", None)
    if choices:
        item["enum"] = list(choices)
    multiple = getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1
    prop = {"type": "array", "items": item} if multiple else dict(item)
    help_text = getattr(param, "help", None)
    if help_text:
        prop["description"] = help_text
    return prop


def tool_specs() -> list[ToolSpec]:
    """The tools of the commands in ``TOOL_COMMANDS`` that the CLI registers, in that order."""
    import typer.main

    from ascendopt.cli import app

    group = typer.main.get_command(app)
    specs = []
    for name in TOOL_COMMANDS:
        command = group.commands.get(name)  # type: ignore[attr-defined]
        if command is None:
            continue
        options, properties, required = {}, {}, []
        for param in command.params:
            if param.name in _SKIPPED_PARAMS:
                continue
            key = param.opts[0].lstrip("-").replace("-", "_") if param.param_type_name == "option" else param.name
            options[key] = param
            properties[key] = _property(param)
            if param.required:
                required.append(key)
        summary = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
        description = (f"`ascendopt {name}`: {summary} Returns the command's JSON envelope "
                       "{schema, command, status, exit_code, error, data, next}.")
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        specs.append(ToolSpec(name, description, schema, options))
    return specs


def _summarize(value: Any, keep: int) -> Any:
    if isinstance(value, list):
        return [_summarize(v, keep) for v in value[:keep]]
    if isinstance(value, dict):
        return {k: _summarize(v, keep) for k, v in value.items()}
    if isinstance(value, str) and len(value) > _STRING_KEEP:
        return value[:_STRING_KEEP] + f"... [{len(value) - _STRING_KEEP} more characters in the full result]"
    return value


def bounded(envelope: dict[str, Any], *, limit: int = MAX_RESULT_CHARS, spill_dir: Path | None = None) -> dict:
    """``envelope`` as it is when its JSON fits ``limit`` characters; else written whole to a file under
    ``spill_dir`` (default: a folder in the system's temporary directory) and returned with its ``data``
    summarized (lists cut to their first items, long strings shortened) and ``truncated`` naming the file."""
    text = json.dumps(envelope)
    if len(text) <= limit:
        return envelope
    folder = spill_dir or Path(tempfile.gettempdir()) / "ascendopt-mcp"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{envelope.get('command') or 'result'}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    path.write_text(json.dumps(envelope, indent=2) + "\n", encoding="utf-8")
    note = {"path": str(path), "chars": len(text),
            "note": "the result was too long for a tool reply: data is summarized (lists cut to their first "
                    "items); the file holds the whole envelope"}
    for keep in _LIST_KEEP:
        short = dict(envelope, data=_summarize(envelope.get("data"), keep), truncated=note)
        if len(json.dumps(short)) <= limit:
            return short
    return dict(envelope, data=None, truncated=note)


def run_tool(spec: ToolSpec, arguments: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    """Run one tool call as ``python -m ascendopt ... --json`` in a child process (its own session) and
    return its envelope; a child that ends without one gets an envelope saying why (exit 70)."""
    from ascendopt.cli import envelope
    from ascendopt.errors import AscendoptError
    from ascendopt.process import kill_group

    try:
        argv = spec.argv(arguments)
    except AscendoptError as exc:
        return envelope.build(spec.name, 2, error=envelope.error_fields(2, exc.message, hint=exc.hint,
                                                                         where="arguments"))
    args = [sys.executable, "-m", "ascendopt", *argv[:1], "--json", *argv[1:]]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    _running.add(proc)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:  # the command ends itself: exit 143, its envelope, the lock released
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:  # it ended on its own at the limit
            pass
        try:
            out, err = proc.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        _running.discard(proc)
    try:
        result = json.loads(out)
    except json.JSONDecodeError:
        tail = (err or "").strip().splitlines()[-3:]
        result = envelope.build(spec.name, 70, error=envelope.error_fields(
            70, f"ascendopt {spec.name} exited {proc.returncode} without a JSON envelope",
            hint=" | ".join(tail) or None, where=" ".join(args[2:])))
    if timed_out and result.get("error"):
        result["error"]["message"] = (f"tool call ran past the server's limit of {timeout_s:g} s (--tool-timeout) "
                                      f"and was stopped: {result['error']['message']}")
    return result


def stop_running_tools() -> None:
    """Stop the commands of tool calls still running (the server is going away): SIGTERM to each process
    group, so each command ends itself and releases its workspace; SIGKILL to what is left after the grace."""
    from ascendopt.process import kill_group

    procs = list(_running)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + TERM_GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc)


def build_server(*, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> Any:
    """The MCP server (``mcp.server.Server``) with one tool per ``tool_specs()`` entry."""
    import anyio
    import mcp.types as types
    from mcp.server import Server

    from ascendopt import __version__

    specs = {spec.name: spec for spec in tool_specs()}

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name=s.name, description=s.description,
                                                       input_schema=s.input_schema) for s in specs.values()])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        from ascendopt.cli import envelope

        spec = specs.get(params.name)
        if spec is None:
            result = envelope.build(params.name, 2, error=envelope.error_fields(
                2, f"unknown tool {params.name!r}", hint=f"tools: {', '.join(specs)}", where="name"))
        else:
            result = await anyio.to_thread.run_sync(
                lambda: run_tool(spec, dict(params.arguments or {}), timeout_s=timeout_s))
        result = bounded(result)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result, indent=2))],
                                    structured_content=result, is_error=result["exit_code"] != 0)

    return Server("ascendopt", version=__version__,
                  instructions="The ascendopt loop (freeze, collect, analyze, optimize-round, gate, reprofile, "
                               "report) as tools. Every result is a JSON envelope; exit_code follows the "
                               "README's table (0 pass, 1 correctness, 2 usage, 3 integrity, 4 regression, "
                               "5 environment, 6 inconclusive, 70 bug); `next` lists the commands to run next.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _require_sdk() -> None:
    from ascendopt.errors import EnvironmentProblem

    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise EnvironmentProblem("ascendopt mcp needs the Model Context Protocol SDK, which is not installed",
                                 hint="pip install 'ascendopt[mcp]'") from None


def mcp(
    tool_timeout: Annotated[float, typer.Option(
        "--tool-timeout", min=1, metavar="SECONDS",
        help="Limit of one tool call: its command is stopped (SIGTERM, then SIGKILL) past it.",
    )] = DEFAULT_TOOL_TIMEOUT_S,
) -> None:
    """Serve the commands as MCP tools over stdio, for agents.

    Serve the loop's commands as Model Context Protocol tools over stdio (for coding agents).

    Tools: freeze, collect, analyze, optimize-round, gate, reprofile, status, report, kernels, lint, ub;
    each call runs the command with --json in a child process and returns its JSON envelope. Needs the
    optional SDK: pip install 'ascendopt[mcp]' (exit 5 without it).
    """
    _require_sdk()
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(timeout_s=tool_timeout)

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(serve)
    finally:  # Ctrl-C, SIGTERM or the client gone: no tool call's command outlives the server
        stop_running_tools()


EXAMPLES = examples(
    "ascendopt mcp",
    "ascendopt mcp --tool-timeout 600",
    "# an MCP client's configuration:",
    '# {"mcpServers": {"ascendopt": {"command": "ascendopt", "args": ["mcp"]}}}',
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(mcp)
