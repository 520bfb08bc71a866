"""The space of a bundled kernel's tunables, as the UB model sees it.

The space is the product of each ``Tunable.choices``. Every candidate's live tile sets
(``KernelSpec.ub_model``) are checked against the UB (``ascendopt.device.ub``): a candidate that
overflows is pruned before anything runs (``enforce_ub``): on npu always (it would not compile),
elsewhere by the model chip's verdict unless the caller allows overflowing tiles
(``optimize-round --auto --allow-ub-overflow``: they stay in, their predicted UB use next to them),
so a tile tuned off-NPU is never one the NPU would reject without saying so. Configurations that
launch the same resolved tiles (an auto 0 and the value it resolves to, a tile clamped to the
extent) are collapsed (``dedupe``), and each tunable's values get a search order (``axes``) and a
preferred direction from the bottleneck class (``preferred_direction``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ascendopt.device import ub as ubmodel

# Bottleneck class (substring of analysis' class name) -> which way tiles should move first.
# Larger tiles amortize per-tile scalar work, DMA setup and launch cost (seed diagnosis table:
# vector-bound "larger row tile", UB-bandwidth "larger tiles"); core under-use needs more tasks.
_SMALLER_FIRST = ("under", "core-use", "occupancy")


@dataclass(frozen=True)
class Candidate:
    """One configuration with its UB prediction. ``ub_share`` = largest stage peak / UB bytes."""

    config: dict[str, int]
    ub_safe: bool
    ub_share: float
    ub_detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def config_text(config: Mapping[str, int] | None) -> str:
    """Tunables as ``BT=32, BD=128`` in the configuration's order; ``-`` for none (own code)."""
    return ", ".join(f"{k}={v}" for k, v in (config or {}).items()) or "-"


def config_key(config: Mapping[str, int]) -> str:
    """Stable text key of a configuration: ``BD=256,BT=16`` (names sorted)."""
    return ",".join(f"{k}={config[k]}" for k in sorted(config))



def ub_prediction(spec, dims, config: Mapping[str, int], dtype: str, ub_bytes: int, mode: str | None = None
                  ) -> Candidate:
    """Check every stage of ``spec.ub_model`` against ``ub_bytes`` (each stage with its own margin).

    With ``mode == "fwd"`` the backward stages (``bwd`` in the stage name) are left out: they
    never run in a forward-only workload.
    """
    checks = []
    for stage in spec.ub_model(dims, dict(config), dtype):
        if mode == "fwd" and "bwd" in stage.stage.lower():
            continue
        c = ubmodel.check(stage.tile, stage.dtype, stage.multiplier, ub_bytes, stage.margin)
        checks.append((stage.stage, c))
    if not checks:
        return Candidate(dict(config), True, 0.0, "no UB stages modelled")
    worst_name, worst = max(checks, key=lambda sc: sc[1].share)
    bad = [name for name, c in checks if not c.safe]
    detail = f"{worst_name}: {worst.describe()}"
    if bad:
        detail = f"overflow in {', '.join(bad)}; " + detail
    return Candidate(dict(config), not bad, round(worst.share, 4), detail)


MAX_ENUMERATED = 20_000  # raw configurations checked one by one; larger spaces are cut to a neighbourhood


def raw_size(spec, fixed: Mapping[str, int] | None = None) -> int:
    """Configurations in the product of the choices, ``fixed`` tunables held."""
    fixed = dict(fixed or {})
    return math.prod(1 if n in fixed else len(t.choices) for n, t in spec.tunables.items())


def _raw_configs(spec, fixed: Mapping[str, int], around: Mapping[str, int] | None, limit: int
                 ) -> Iterator[dict[str, int]]:
    """The product of the choices; above ``limit`` configurations, those that differ from ``around``
    in at most two tunables (at most one if that is still above ``limit``)."""
    names = list(spec.tunables)
    axes = [(fixed[n],) if n in fixed else spec.tunables[n].choices for n in names]
    if math.prod(len(a) for a in axes) <= limit:
        for values in itertools.product(*axes):
            yield dict(zip(names, values, strict=True))
        return
    if around is None:
        from ascendopt.errors import UsageError

        raise UsageError(f"{spec.name}: {raw_size(spec, fixed)} raw configurations (> {limit}); "
                         "a search needs a start configuration to explore around")
    free = [i for i, n in enumerate(names) if n not in fixed]
    pairs = sum((len(axes[i]) - 1) * (len(axes[j]) - 1) for i, j in itertools.combinations(free, 2))
    radius = 2 if pairs <= limit else 1
    yield {n: around[n] for n in names}
    for k in range(1, radius + 1):
        for idx in itertools.combinations(free, k):
            others = [[v for v in axes[i] if v != around[names[i]]] for i in idx]
            for values in itertools.product(*others):
                yield {**{n: around[n] for n in names}, **{names[i]: v for i, v in zip(idx, values, strict=True)}}


def enumerate_space(spec, dims, dtype: str, ub_bytes: int, *, enforce_ub: bool,
                    fixed: Mapping[str, int] | None = None, mode: str | None = None,
                    around: Mapping[str, int] | None = None, limit: int = MAX_ENUMERATED
                    ) -> tuple[list[Candidate], list[Candidate]]:
    """All configurations (``fixed`` tunables held) -> (feasible, pruned by the UB model).

    ``enforce_ub``: prune the candidates whose UB prediction for ``ub_bytes`` (the device's, or the
    model chip's off-NPU) overflows; with it False nothing is pruned and each candidate still carries
    its UB prediction (``ub_safe``, ``ub_share``). A space of more than ``limit`` raw configurations (the end-to-end
    gated delta rule's product of every stage's tunables has ~4e9) is cut to the configurations
    within two changed tunables of ``around`` (the search's start; coordinate descent moves one
    tunable at a time, and trades two), so enumerating it stays seconds; without ``around`` such a
    space is a usage error.
    """
    feasible, pruned = [], []
    for config in _raw_configs(spec, dict(fixed or {}), around, limit):
        cand = ub_prediction(spec, dims, config, dtype, ub_bytes, mode)
        (feasible if (cand.ub_safe or not enforce_ub) else pruned).append(cand)
    return feasible, pruned


def launch_signature(spec, dims, config: Mapping[str, int], dtype: str, mode: str | None,
                     raw: Sequence[str]) -> tuple:
    """What a configuration launches, as far as the UB model tells: every (stage, resolved tile,
    multiplier) plus the raw value of each tunable in ``raw`` (those the tiles do not reflect)."""
    stages = tuple((st.stage, tuple(sorted(st.tile.items())), st.multiplier, st.dtype)
                   for st in spec.ub_model(dims, dict(config), dtype)
                   if not (mode == "fwd" and "bwd" in st.stage.lower()))
    return stages, tuple((n, config[n]) for n in raw)


def untiled_tunables(spec, dims, dtype: str) -> list[str]:
    """Tunables whose values never change the modelled tiles of any stage (flags such as G_T_CONTIG).

    All stages count here, whatever the mode: a backward tile size is a tile, and in a forward-only
    workload it simply has no effect (so its values collapse), whereas a flag always matters.
    """
    defaults = {n: t.default for n, t in spec.tunables.items()}
    out = []
    for name, t in spec.tunables.items():
        sigs = {launch_signature(spec, dims, {**defaults, name: v}, dtype, None, ()) for v in t.choices}
        if len(sigs) == 1:
            out.append(name)
    return out


def dedupe(candidates: Sequence[Candidate], spec, dims, dtype: str, mode: str | None = None,
           keep: Mapping[str, int] | None = None) -> tuple[list[Candidate], dict[str, str]]:
    """Collapse configurations that launch the same tiles -> (unique candidates, alias -> representative).

    The bundled kernels resolve an auto 0 and clamp a tile to the extent (``BK=256`` on ``K=128``
    runs as ``BK=128``), and their UB model reports the resolved tiles; two configurations with
    identical resolved tiles and identical untiled tunables run the same kernel, so measuring
    both wastes an evaluation. ``keep`` (e.g. the start) represents its group when present.
    ``dims`` may be a list of shape cases: then configurations must coincide on every case.
    """
    cases = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    raw = sorted(set(spec.tunables) - set.intersection(*(set(spec.tunables) - set(untiled_tunables(
        spec, d, dtype)) for d in cases)))
    groups: dict[tuple, list[Candidate]] = {}
    for cand in candidates:
        sig = tuple(launch_signature(spec, d, cand.config, dtype, mode, raw) for d in cases)
        groups.setdefault(sig, []).append(cand)
    unique, alias = [], {}
    keep_key = config_key(keep) if keep else None
    for members in groups.values():
        rep = next((c for c in members if config_key(c.config) == keep_key), members[0])
        unique.append(rep)
        for c in members:
            alias[config_key(c.config)] = config_key(rep.config)
    return unique, alias


def probe_tunables(spec, dims, dtype: str) -> list[str]:
    """Tunables worth flipping early (``tune.search``'s ``probe``): flags and layouts that change no
    tile (``untiled_tunables``) and algorithm choices such as ``FORM`` (1, 2, 3), i.e. every
    tunable whose values are not a size axis (fewer than three powers of two among them)."""
    untiled = set(untiled_tunables(spec, dims, dtype))

    def is_size_axis(values) -> bool:
        return sum(v > 0 and v & (v - 1) == 0 for v in values) >= 3

    return [n for n, t in spec.tunables.items() if n in untiled or not is_size_axis(t.choices)]


def tile_names(spec, dims, dtype: str) -> list[str]:
    """Tunables that appear in the UB model's tiles (the tile sizes), in the spec's order."""
    defaults = {n: t.default for n, t in spec.tunables.items()}
    in_tiles = set()
    for stage in spec.ub_model(dims, defaults, dtype):
        in_tiles.update(stage.tile)
    return [n for n in spec.tunables if n in in_tiles]


def is_auto_zero(tunable) -> bool:
    """True when 0 means "let the UB model choose" (documented as ``0 = ...`` in the tunable's doc)."""
    return 0 in tunable.choices and "0 = " in tunable.doc


def axes(spec) -> dict[str, list[int]]:
    """Each tunable's values in search order: ascending, with an "auto" 0 placed last.

    The bundled kernels resolve an auto 0 to the largest power of two the UB model allows, so on
    the size axis it sits above every explicit value; moving "down" from it tries explicit tiles.
    """
    out = {}
    for name, t in spec.tunables.items():
        vals = sorted(t.choices)
        if is_auto_zero(t):
            vals = [v for v in vals if v != 0] + [0]
        out[name] = vals
    return out


def place_auto(choices: Mapping[str, Sequence[int]], start: Mapping[str, int],
               same_as_start: Callable[[str, int], bool]) -> dict[str, list[int]]:
    """Search orders (``axes``) with each auto 0 of ``start`` moved to where its resolved tile sits.

    ``axes`` puts an auto 0 above every explicit value, so from an auto start the first move "down"
    is the largest explicit tile (on the H200, l2norm's ``--auto`` spent its budget on
    ``block_rows=128`` first). Here the explicit values that launch the same tiles as the start
    (``same_as_start(name, value)``: an alias in ``dedupe``) are replaced by the 0, placed at the
    smallest of them, so the search's first moves from an auto start are its neighbours: the next
    smaller and the next larger explicit tile. Tunables whose start is not an auto 0, or whose
    resolved value no explicit value matches, keep their order.
    """
    out = {}
    for name, vals in choices.items():
        vals = list(vals)
        if start.get(name) == 0 and vals and vals[-1] == 0:
            twins = [v for v in vals[:-1] if same_as_start(name, v)]
            if twins:
                explicit = [v for v in vals[:-1] if v not in twins]
                at = sum(v < min(twins) for v in explicit)
                vals = explicit[:at] + [0] + explicit[at:]
        out[name] = vals
    return out


def preferred_direction(bound: str | None) -> int:
    """+1 = try larger values first, -1 = smaller first, from the bottleneck class name."""
    text = (bound or "").lower()
    if any(s in text for s in _SMALLER_FIRST):
        return -1
    return +1


def order_tunables(spec, dims, dtype: str, bound: str | None) -> list[str]:
    """Tile tunables first (they move the bound pipe), then the rest, each group in spec order."""
    tiles = tile_names(spec, dims, dtype)
    return tiles + [n for n in spec.tunables if n not in tiles]
