"""`ascendopt env`: what the tool sees — backend and why, device, cores, UB, versions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from ascendopt.cli.options import JsonOpt, examples

# facts that are the model chip's off-NPU (the UB model predicts for it); on npu they are the device's
_MODEL_CHIP_FACTS = ("chip_model", "ub_bytes", "ub_source", "ub_enforced")


def fact_owner(key: str, facts: Mapping[str, Any]) -> str:
    """Whose fact ``key`` of ``backends.describe`` output is: this machine's, its interpreter's grid, or the
    model chip's (off-NPU, where UB use is predicted for a chip this machine is not)."""
    on_npu = facts.get("backend") == "npu"
    if key in _MODEL_CHIP_FACTS and not on_npu:
        return f"model chip {facts.get('chip_model')} (predictions only)"
    if key in ("cube_cores", "vector_cores", "cores_source") and "interpreter" in str(facts.get("cores_source")):
        return "this machine: the interpreter's grid"
    return "this machine"


def env(json: JsonOpt = False) -> None:
    """What ascendopt sees: backend, device, cores, UB, versions.

    Show the backend chosen and why, the device, core counts, UB bytes and versions; the third column
    says whose each fact is (this machine's, or off-NPU the model chip's the UB model predicts for)."""
    from ascendopt import console
    from ascendopt.device import backends

    facts = backends.describe(backends.current())
    if json:
        console.print_json(facts)
        return
    versions = facts.pop("versions")
    rows = [(k, "not known" if v is None else v, fact_owner(k, facts)) for k, v in facts.items()]
    rows += [(f"{k} version", v or "not installed", "this machine") for k, v in versions.items()]
    console.table(["fact", "value", "whose"], rows, title="ascendopt env")


EXAMPLES = examples(
    "ascendopt env",
    "ascendopt --backend cpu env --json",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(env)
