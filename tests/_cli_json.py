"""Reading what a command printed with ``--json``.

Every command prints one envelope ``{schema, command, status, exit_code, error, data, next}`` with
``--json`` (``ascendopt.cli.envelope``). ``json_envelope`` parses it and validates it against the
shipped JSON Schemas (the envelope's and the command's ``data`` schema), so every test that reads a
command's ``--json`` output also checks that output against its schema; tests that only need the
command's own payload read ``data`` through ``json_payload``.
"""

from __future__ import annotations

import json
from typing import Any


def json_envelope(stdout: str) -> dict[str, Any]:
    """The envelope printed on stdout, validated against the envelope schema and the command's data schema
    (a bare payload or a second JSON document fails)."""
    from ascendopt.cli.envelope import validate

    envelope = json.loads(stdout)
    assert isinstance(envelope, dict) and {"schema", "command", "data", "exit_code"} <= set(envelope), (
        f"not a --json envelope: {stdout[:200]!r}")
    validate(envelope)
    return envelope


def json_payload(stdout: str) -> Any:
    """The ``data`` of the envelope printed on stdout (validated as ``json_envelope`` does)."""
    return json_envelope(stdout)["data"]
