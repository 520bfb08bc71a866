"""The ``--json`` envelope: one JSON object on stdout for every command and every outcome.

``{schema, command, status, exit_code, error: {kind, message, hint, where} | null, data, next: [command lines]}``

``data`` is the command's own payload (what it hands to ``console.print_json``; null when it failed before
making one), ``next`` the commands that make sense after it (``console.next_steps``, the same list the text
output's ``next:`` line prints). Logs and progress stay on stderr. The JSON Schemas of the envelope and of each
command's ``data`` ship in ``ascendopt/cli/schemas/`` (``<command>.schema.json``); ``SCHEMA_VERSION`` is the
envelope's ``schema`` field and changes only when a field changes meaning or disappears.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_VERSION = 1
SCHEMA_PACKAGE = "ascendopt.cli.schemas"
ENVELOPE_SCHEMA = "envelope"

# exit code -> (error kind, status); the README's exit-code table is the contract
OUTCOMES: dict[int, tuple[str | None, str]] = {
    0: (None, "ok"),
    1: ("correctness", "fail"),
    2: ("usage", "error"),
    3: ("integrity", "fail"),
    4: ("regression", "fail"),
    5: ("environment", "error"),
    6: ("inconclusive", "inconclusive"),
    70: ("internal", "error"),
    130: ("interrupted", "interrupted"),
    143: ("terminated", "interrupted"),
}

_ROOT_OPTIONS_WITH_VALUE = {"--backend"}


def json_requested(args: Iterable[str]) -> bool:
    """``--json`` among the options (before a ``--``), and no ``--help`` (help is text for people)."""
    words = []
    for arg in args:
        if arg == "--":
            break
        words.append(arg)
    return "--json" in words and not ({"--help", "-h"} & set(words))


def command_of(args: list[str]) -> str:
    """The command word of an ``ascendopt`` command line (the first word that is not a root option);
    ``""`` when there is none."""
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in _ROOT_OPTIONS_WITH_VALUE:
            skip = True
            continue
        if not arg.startswith("-"):
            return arg
    return ""


def outcome(exit_code: int) -> tuple[str, str]:
    """``(error kind, status)`` of an exit code (an unknown code counts as an internal error)."""
    kind, status = OUTCOMES.get(exit_code, OUTCOMES[70])
    return kind or "", status


def error_fields(exit_code: int, message: str, *, hint: str | None = None, where: str | None = None) -> dict:
    """The envelope's ``error`` object for a failure with ``exit_code``."""
    return {"kind": outcome(exit_code)[0], "message": message, "hint": hint, "where": where}


def where_of(message: str) -> str | None:
    """What an error message is about, when it leads with it as the project's errors do (``PATH: problem``,
    ``contract.yaml: tolerances.fwd.rtol: must be > 0``): the words before the last ``: `` that starts a
    problem, as long as they are names (no spaces); None for a message that names nothing first."""
    parts = message.split(": ")
    names = []
    for part in parts[:-1]:
        if not part or any(ch.isspace() for ch in part):
            break
        names.append(part)
    return ": ".join(names) or None


def internal_where(exc: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame of an unexpected exception (where the bug is)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


def build(command: str, exit_code: int, *, data: Any = None, next_commands: list[str] | None = None,
          error: dict | None = None) -> dict[str, Any]:
    """The envelope of one command run; ``error`` is None exactly when ``exit_code`` is 0."""
    if exit_code and error is None:  # a command that only set its exit code (ub overflow, lint findings)
        error = error_fields(exit_code, f"ascendopt {command} exited {exit_code} ({outcome(exit_code)[0]}); "
                                        "data has the details")
    return {"schema": SCHEMA_VERSION, "command": command, "status": outcome(exit_code)[1], "exit_code": exit_code,
            "error": None if exit_code == 0 else error, "data": data, "next": list(next_commands or [])}


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While a ``--json`` command runs, everything written to stdout goes to stderr (a stray print, a child
    process writing to the inherited descriptor), so stdout carries the envelope alone."""
    real = sys.stdout
    saved_fd = None
    try:
        if real is sys.__stdout__ and real.fileno() == 1:
            real.flush()
            saved_fd = os.dup(1)
            os.dup2(sys.stderr.fileno(), 1)
    except (AttributeError, OSError, ValueError):  # not a real descriptor (an in-process test's buffer)
        saved_fd = None
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = real
        if saved_fd is not None:
            sys.stderr.flush()
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``<name>.schema.json`` shipped in the package (``envelope`` or a command name)."""
    text = resources.files(SCHEMA_PACKAGE).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def schema_names() -> list[str]:
    """The names of every schema shipped (``envelope`` and one per command)."""
    suffix = ".schema.json"
    return sorted(p.name[: -len(suffix)] for p in resources.files(SCHEMA_PACKAGE).iterdir()
                  if p.name.endswith(suffix))


def validate(envelope: dict[str, Any]) -> None:
    """Check an envelope against the envelope schema and its ``data`` against the command's schema (the
    schemas refer to each other by ``$id``, ``urn:ascendopt:schema:1:<name>``); raises
    ``jsonschema.ValidationError`` naming the path of the first wrong field."""
    import jsonschema

    registry = _registry()
    jsonschema.Draft202012Validator(schema(ENVELOPE_SCHEMA), registry=registry).validate(envelope)
    if envelope["data"] is not None:
        jsonschema.Draft202012Validator(schema(envelope["command"]), registry=registry).validate(envelope["data"])


@cache
def _registry() -> Any:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (schema(name)["$id"], DRAFT202012.create_resource(schema(name))) for name in schema_names())
