"""`ascendopt env`: what the tool sees — backend and why, device, cores, UB, versions."""

from __future__ import annotations

import typer

from ascendopt.cli.options import JsonOpt


def env(json: JsonOpt = False) -> None:
    """Show the backend chosen and why, the device, core counts, UB bytes and versions."""
    from ascendopt import console
    from ascendopt.device import backends

    facts = backends.describe(backends.current())
    if json:
        console.print_json(facts)
        return
    versions = facts.pop("versions")
    rows = [(k, v) for k, v in facts.items()]
    rows += [(f"{k} version", v or "not installed") for k, v in versions.items()]
    console.table(["fact", "value"], rows, title="ascendopt env")


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(env)
