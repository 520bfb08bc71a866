"""One tunable change for a hand-driven round: what ``ascendopt demo`` proposes after analyze.

Unlike ``search`` (which measures many configurations), this picks a single neighbour of the
current configuration without timing anything: the first tunable in the order the bottleneck class
suggests (``space.order_tunables``), moved one UB-feasible step in the class's preferred direction
(``space.preferred_direction``), else the other way.
"""

from __future__ import annotations

from collections.abc import Mapping

from ascendopt.tune import space as tune_space


def choose_change(spec, dims: Mapping[str, int], dtype: str, mode: str, ub_bytes: int, bound: str | None,
                  current: dict[str, int]) -> tuple[dict[str, int], str]:
    """One tunable change the bottleneck class suggests: the first tile tunable moved one feasible step.

    ``dims``: the shape case's dimensions; ``ub_bytes``: the UB of one vector core in bytes;
    ``bound``: analyze's class of the hot kernel (None when unclassified); ``current``: the full
    resolved configuration (``spec.config(...)``). Feasibility uses the UB model even off-npu (so the
    demo never proposes a tile that would not compile on Ascend); a value that resolves to the
    current tiles is skipped. Returns ``({name: value}, hypothesis)``; RuntimeError when no
    UB-safe change exists.
    """
    feasible, _ = tune_space.enumerate_space(spec, dims, dtype, ub_bytes, enforce_ub=True, mode=mode, around=current)
    # only configurations that launch different tiles: block_rows=2 where auto resolves to 2 is no change
    distinct, alias = tune_space.dedupe(feasible, spec, dims, dtype, mode, keep=current)
    same = alias.get(tune_space.config_key(current))
    allowed = {tune_space.config_key(c.config) for c in distinct} - {same}
    axes = tune_space.axes(spec)
    direction = tune_space.preferred_direction(bound)
    for name in tune_space.order_tunables(spec, dims, dtype, bound):
        vals = axes[name]
        i = vals.index(current[name])
        for d in (direction, -direction):
            j = i + d
            while 0 <= j < len(vals):
                cfg = {**current, name: vals[j]}
                if tune_space.config_key(cfg) in allowed:
                    auto = " (from the UB model's automatic choice)" if current[name] == 0 else ""
                    why = (f"{bound or 'unclassified'}: try {name}={vals[j]}{auto}, the next UB-safe "
                           f"{'larger' if (vals[j] > current[name] and current[name] != 0) else 'explicit'} tile")
                    return {name: vals[j]}, why
                j += d
    raise RuntimeError(f"kernel {spec.name}: no UB-safe tunable change found")
