"""`ascendopt ub`: peak live bytes of a tile set against a chip's Unified Buffer, and the largest safe tile."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, examples
from ascendopt.device.ub import DEFAULT_MARGIN


def ub(
    tile: Annotated[str, typer.Option("--tile", metavar="NAME=SIZE,...",
        help="Tile sizes, NAME=SIZE comma-separated, e.g. BT=64,BD=256.")],
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE",
        help="Element type: bf16, fp16, fp32, int32, ...")] = "fp32",
    mult: Annotated[
        float, typer.Option("--mult", metavar="FACTOR",
            help="Memory multiplier: live tile-sized buffers (accumulators, copies, masks).")
    ] = ...,
    chip: Annotated[
        str | None,
        typer.Option("--chip", metavar="CHIP",
            help="Chip from configs/chips.yaml (Ascend910B2 or 910B2); default Ascend910B2."),
    ] = None,
    ub_bytes: Annotated[
        int | None, typer.Option("--ub-bytes", metavar="BYTES", help="UB capacity in bytes (overrides --chip).")
    ] = None,
    margin: Annotated[
        float, typer.Option("--margin", metavar="FRACTION", help="Safety margin in (0, 1]; budget = margin x UB.")
    ] = DEFAULT_MARGIN,
    solve: Annotated[
        str | None, typer.Option("--solve", metavar="NAME",
            help="Print the largest safe power of two for this tile dimension.")
    ] = None,
    json: JsonOpt = False,
) -> None:
    """UB budget: a tile set's peak bytes against a chip's UB.

    Peak UB bytes = mult x tile elements x dtype bytes, against margin x UB.

    Exit 0 when the tile fits the budget, 1 when it overflows, 2 on bad input. With --solve DIM the
    other dimensions stay fixed and the answer is the largest power of two for DIM that fits.
    """
    from ascendopt import console
    from ascendopt.device import config
    from ascendopt.device import ub as model
    from ascendopt.errors import UsageError
    from ascendopt.kernels.spec import parse_assignments

    # every size a positive integer, each dimension once (two sizes for one name is a typo, not an override)
    sizes = parse_assignments(tile, option="--tile", example="BT=64,BD=256", integer=True, minimum=1,
                              unique=True, value="size")
    if ub_bytes is not None:
        chip_name, capacity, source = chip or "custom", ub_bytes, "--ub-bytes"
    else:
        if chip is None:
            chip = config.default_model_chip()
            console.status(f"no --chip or --ub-bytes: using {chip}")
        try:
            chip_name, capacity = model.resolve_chip(chip)
        except UsageError as exc:  # the option the name came from, as ASCENDOPT_CHIP's errors name the variable
            raise UsageError(f"--chip {chip}: {exc.message}", hint=exc.hint) from None
        source = "configs/chips.yaml"
    solved = None
    if solve:
        solved = model.solve(sizes, solve, dtype, mult, capacity, margin)
        sizes = {**sizes, solve: solved}
    check = model.check(sizes, dtype, mult, capacity, margin)
    result = {
        "schema": 1, "chip": chip_name, "ub_bytes": capacity, "ub_source": source,
        "tile": sizes, "elements": _elements(sizes), "dtype": dtype,
        "dtype_bytes": model.dtype_bytes(dtype), "multiplier": mult, "margin": margin,
        "peak_bytes": check.peak_bytes, "share_of_ub": round(check.share, 6), "budget_bytes": check.budget_bytes,
        "safe": check.safe, "solve": {"dim": solve, "largest_safe": solved} if solve else None,
    }
    if json:
        console.print_json(result)
    else:
        tile_text = " x ".join(f"{k}={v}" for k, v in sizes.items())
        rows = [
            ("chip", f"{chip_name} (UB {capacity} B, from {source})"),
            ("tile", f"{tile_text} = {result['elements']} elements of {dtype} ({result['dtype_bytes']} B)"),
            ("multiplier", f"{mult:g}"),
            ("peak", f"{check.peak_bytes} B"),
            ("share of UB", f"{check.share:.1%}"),
            ("budget", f"{check.budget_bytes} B (margin {margin:g})"),
            ("verdict", "safe" if check.safe else "OVERFLOWS the budget"),
        ]
        if solve:
            rows.insert(0, (f"largest safe {solve}", str(solved)))
        console.table(["quantity", "value"], rows, title="ascendopt ub")
    if not check.safe:
        raise typer.Exit(1)


def _elements(sizes: dict[str, int]) -> int:
    total = 1
    for size in sizes.values():
        total *= size
    return total


EXAMPLES = examples(
    "ascendopt ub --chip 910B2 --tile BT=64,BD=256 --dtype bf16 --mult 6",
    "ascendopt ub --chip 910B2 --tile BD=256 --dtype bf16 --mult 6 --solve BT",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(ub)
