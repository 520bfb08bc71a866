"""`ascendopt kernels`: the bundled kernels with their modes, dtypes, shape presets, tunables and support ranges."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import JsonOpt, examples


def kernels(
    name: Annotated[str | None, typer.Argument(metavar="NAME",
        hidden=True, help="Show one kernel in detail (default: list all).")] = None,
    json: JsonOpt = False,
) -> None:
    """List the bundled kernels, their shapes and tunables.

    List the bundled kernels: modes, dtypes, shape presets, tunables (default and choices), support ranges.

    NAME: one bundled kernel, shown in detail (default: all, listed).
    """
    from ascendopt import console
    from ascendopt import kernels as registry
    from ascendopt.cli.next_steps import after_kernels
    from ascendopt.kernels.describe import describe_spec

    specs = [registry.get(name)] if name else registry.all_specs()
    data = [describe_spec(spec, detail=name is not None) for spec in specs]
    console.next_steps(after_kernels(name))
    if json:
        console.print_json({"schema": 1, "kernels": data})
        return
    if name is None:
        rows = [(d["name"], d["bound"], ",".join(d["modes"]), ",".join(d["dtypes"]), " ".join(d["presets"]),
                 " ".join(f"{k}={v['default']}" for k, v in d["tunables"].items())) for d in data]
        console.table(["kernel", "bound", "modes", "dtypes", "presets", "tunables (default)"], rows,
                      title="bundled kernels")
        return
    _print_detail(data[0])


def _print_detail(d: dict[str, Any]) -> None:
    from ascendopt import console

    facts = [("description", d["description"]), ("bound", d["bound"]), ("modes", ", ".join(d["modes"])),
             ("dtypes", ", ".join(d["dtypes"])), ("support", d["support"]),
             ("kernel names", ", ".join(d["kernel_names"])),
             ("tolerances", ", ".join(f"{k} {v:g}" for k, v in d["tolerances"].items())), ("peer", d["peer"])]
    console.table(["fact", "value"], facts, title=f"kernel {d['name']}")
    console.table(["tunable", "default", "choices", "meaning"],
                  [(k, v["default"], " ".join(map(str, v["choices"])), v["doc"]) for k, v in d["tunables"].items()],
                  title="tunables")
    rows = []
    for preset, entry in d["presets"].items():
        support = "; ".join(f"{mode}/{dtype}: {why}" for mode, by_dtype in entry["modes"].items()
                            for dtype, why in by_dtype.items() if why != "supported") or "all modes and dtypes"
        ub_text = ""
        if "ub_model" in entry:
            ub_text = "; ".join(f"{s['stage']} {_tile_text(s['tile'])} x{s['multiplier']:g} "
                                f"{s['peak_bytes']}/{s['budget_bytes']} B{'' if s['safe'] else ' OVERFLOWS'}"
                                for s in entry["ub_model"]["stages"])
        rows.append((preset, entry["dims"], support, ub_text))
    console.table(["preset", "dims", "support", "UB model at defaults (peak/budget)"], rows, title="shape presets")


def _tile_text(tile: dict[str, int]) -> str:
    return "[" + ",".join(f"{k}={v}" for k, v in tile.items()) + "]"


EXAMPLES = examples(
    "ascendopt kernels",
    "ascendopt kernels rms_norm --json",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(kernels)
