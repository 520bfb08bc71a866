"""Reading what a command printed with ``--json``.

Every command prints one envelope ``{schema, command, status, exit_code, error, data, next}`` with
``--json``; tests that only need the command's own payload read ``data`` through ``json_payload``.
Until every command prints the envelope, a bare payload (no ``command`` and ``data`` keys) is returned
as it is.
"""

from __future__ import annotations

import json
from typing import Any


def json_payload(stdout: str) -> Any:
    """The ``data`` of the envelope printed on stdout (a bare payload as it is)."""
    obj = json.loads(stdout)
    if isinstance(obj, dict) and "command" in obj and "data" in obj and "exit_code" in obj:
        return obj["data"]
    return obj
