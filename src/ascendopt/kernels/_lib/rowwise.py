"""Pieces shared by the row-wise norms (``l2norm``, ``rms_norm``): the row tile and the bulk/tail plan.

A row-wise op views its input as ``[n_rows, D]`` and processes ``[BR, BD]`` tiles: ``BD`` is the
whole row padded to a power of two (one pass, no second sweep over D), ``BR`` rows come from the
UB model. Full tiles run in a *bulk* launch whose block pointers never leave the tensor along the
rows; the last partial tile runs in a separate *tail* launch with ``TAIL=True`` (a constexpr), so
no compiled kernel carries both DMA paths (seed: "Constexpr-split mutually exclusive DMA paths").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import triton
import triton.language as tl

from ascendopt.device import ub
from ascendopt.errors import UsageError
from ascendopt.kernels._lib.common import grid_size, requested_tile, ub_context
from ascendopt.kernels.spec import UBStage

# fla caps its row tile at 128 (_MAX_BT in modules/norm/triton_ascend/l2norm.py) to bound compile variants.
MAX_BLOCK_ROWS = 128
# On CUDA the register file, not a UB, bounds a tile. Triton's default 4 warps (num_warps may not be
# set, see kernels._lib.common) are 128 threads; the multiplier that counts live fp32 tile copies in UB
# counts them in registers too. Compiled for sm_90 (triton 3.7.1, cuobjdump), this budget gives the
# default tiles 72-168 registers per thread and no spills; only rms_norm bwd at D=8192 (already one
# row) spills 72 bytes. Twice the budget spills (rms_norm bwd at D=4096 with 4 rows: 488 bytes).
CUDA_LIVE_FP32_VALUES = 24576
# Streaming row kernels on CUDA run one program per tile (common.CUDA_STREAMING_PROGRAMS_PER_SM); narrow
# rows then do best with short tiles: l2norm D=128 forward 66.0 / 65.4 / 66.1 / 66.7 us at 8 / 16 / 32 /
# 64 rows (H200 device time, benchmarks/RESULTS.md, CUDA defaults). Wide rows are bounded by cuda_cap first.
CUDA_STREAM_MAX_ROWS = 16
ROW_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64, 128)
ROW_DOC = "rows per [BR, BD] tile; 0 = the largest power of two the UB model allows"


def n_rows(shape: tuple[int, ...]) -> int:
    """Rows of the ``[n_rows, D]`` view of a ``[..., D]`` shape (its leading extents multiplied)."""
    return math.prod(shape[:-1])


def row_block(d: int) -> int:
    """``BD``: the whole row, padded to a power of two (at least 16 for aligned vector tiles)."""
    return max(16, ub.next_pow2(d))


def max_row_width(multiplier: float, ub_bytes: int, margin: float) -> int:
    """Largest power-of-two ``BD`` whose single-row fp32 tile fits the UB budget."""
    return ub.solve({"BR": 1, "BD": 1}, "BD", "fp32", multiplier, ub_bytes, margin)


def block_rows(n_rows: int, d: int, multiplier: float, margin: float, requested: int = 0,
               streaming: bool = False) -> int:
    """``BR`` for an fp32 ``[BR, row_block(d)]`` tile with ``multiplier`` live copies.

    ``requested`` > 0 is taken as given (on npu it must fit the UB budget); 0 solves the UB model,
    capped by ``MAX_BLOCK_ROWS``, the rows present, and on CUDA by ``cuda_cap`` (and for ``streaming``
    kernels, one program per tile, by ``CUDA_STREAM_MAX_ROWS``).
    """
    bd = row_block(d)
    context = ub_context()  # looked up here, so tests can set this module's ub_context
    ub_bytes, backend, _ = context
    if requested:
        return requested_tile("block_rows", requested, {"BR": requested, "BD": bd}, multiplier, margin, context,
                              f"BD={bd}")
    rows = ub.solve({"BR": 1, "BD": bd}, "BR", "fp32", multiplier, ub_bytes, margin, upper=max(n_rows, 1))
    rows = min(rows, MAX_BLOCK_ROWS)
    if backend == "cuda":
        rows = min(rows, cuda_cap(multiplier, bd), CUDA_STREAM_MAX_ROWS if streaming else MAX_BLOCK_ROWS)
    return rows


def cuda_cap(multiplier: float, fixed_elements: int) -> int:
    """Largest power of two ``n`` with ``multiplier * n * fixed_elements <= CUDA_LIVE_FP32_VALUES`` (>= 1)."""
    largest = int(CUDA_LIVE_FP32_VALUES // (multiplier * fixed_elements))
    return ub.pow2_floor(largest)


@dataclass(frozen=True)
class Launch:
    """One launch of a row-wise kernel: tasks ``[0, n_tasks)`` cover rows from ``row_start``."""

    row_start: int
    n_tasks: int
    programs: int
    tail: bool
    first_program: int  # index of this launch's first program among all launches (partials rows)


def plan_rows(n_rows: int, rows_per_tile: int, streaming: bool = False) -> list[Launch]:
    """Bulk launch over the full tiles, then one tail launch for the remaining rows (if any).
    ``streaming``: the kernel keeps no per-program partials (``common.grid_size``)."""
    full, rest = divmod(n_rows, rows_per_tile)
    launches = []
    if full:
        launches.append(Launch(0, full, grid_size("vector", full, streaming), False, 0))
    if rest:
        first = launches[0].programs if launches else 0
        launches.append(Launch(full * rows_per_tile, 1, 1, True, first))
    return launches


@dataclass(frozen=True)
class RowPlan:
    """Everything a launcher needs for one row-wise pass: ``BR``, ``BD`` and the launches."""

    block_rows: int
    block_cols: int
    launches: tuple[Launch, ...]


PLAN_CACHE_SIZE = 256
_plans: dict = {}


def per_device(cache: dict, key: tuple, build):
    """``build()`` memoized in ``cache`` under ``key`` plus the device facts a plan depends on.

    Launchers run on every call and small ops are host-bound (H200 run 3: the D=8192 forwards took
    86-99 us per call for ~32 us of memory traffic; ~60 us of launcher Python per call on the CI CPU,
    most of it the UB solve's exact fractions, ~10 us with this memo). An entry is valid only for the
    device facts it was built from (the ``info`` object, which ``backends.reset`` renews) and the CUDA
    programs-per-SM setting.
    """
    from ascendopt.device import backends
    from ascendopt.kernels._lib.common import cuda_programs_per_sm

    backend = backends.current()
    info = backend.info()
    full_key = key + (backend.name, cuda_programs_per_sm() if backend.name == "cuda" else 0)
    hit = cache.get(full_key)
    if hit is not None and hit[0] is info:
        return hit[1]
    value = build()
    if len(cache) >= PLAN_CACHE_SIZE:
        cache.clear()
    cache[full_key] = (info, value)
    return value


def row_plan(n_rows: int, d: int, multiplier: float, margin: float, requested: int = 0,
             streaming: bool = False) -> RowPlan:
    """``block_rows`` + ``row_block`` + ``plan_rows`` for one call, memoized (see ``per_device``)."""

    def build() -> RowPlan:
        br = block_rows(n_rows, d, multiplier, margin, requested, streaming)
        return RowPlan(br, row_block(d), tuple(plan_rows(n_rows, br, streaming)))

    return per_device(_plans, (n_rows, d, multiplier, margin, requested, streaming), build)


def norm_stages(n_rows: int, d: int, config: dict, fwd_mult: float, bwd_mult: float,
                margin: float, bwd_streaming: bool) -> list[UBStage]:
    """The forward and backward ``[BR, BD]`` fp32 row-tile UB stages of a norm (tunables
    ``block_rows`` / ``block_rows_bwd``); the forward streams rows, the backward when ``bwd_streaming``
    (no per-program partials), as its launcher plans them (``row_plan``)."""
    bd = row_block(d)
    fwd = block_rows(n_rows, d, fwd_mult, margin, config["block_rows"], streaming=True)
    bwd = block_rows(n_rows, d, bwd_mult, margin, config["block_rows_bwd"], streaming=bwd_streaming)
    return [UBStage("fwd", {"BR": fwd, "BD": bd}, "fp32", fwd_mult, margin),
            UBStage("bwd", {"BR": bwd, "BD": bd}, "fp32", bwd_mult, margin)]


def unsupported_rows(dims, op: str, needs: str, shape_of, mode: str, fwd_mult: float, bwd_mult: float,
                     margin: float) -> str | None:
    """Why a row-wise op cannot run ``dims`` (None if it can): ``needs`` names the dimensions it takes,
    ``shape_of(dims)`` gives its input shape; the padded row must fit UB as one fp32 tile row."""
    for key in ("B", "T", "D"):
        if key not in dims:
            return f"missing dimension {key} (give {needs})"
    if "seqlens" in dims:
        return f"{op} is row-wise: varlen packing changes nothing, use B=1,T=<total>"
    if min(shape_of(dims)) < 1:
        return "every dimension must be >= 1"
    ub_bytes = ub_context()[0]
    mult = bwd_mult if mode == "fwdbwd" else fwd_mult
    widest = max_row_width(mult, ub_bytes, margin)
    if row_block(dims["D"]) > widest:
        return (f"D={dims['D']} pads to BD={row_block(dims['D'])} > {widest}, the widest single-pass row "
                f"whose fp32 tile (x{mult} live copies) fits {margin:.0%} of UB {ub_bytes} B")
    return None


def total_programs(launches) -> int:
    return sum(launch.programs for launch in launches)


def check_rows(x, name: str = "x") -> int:
    """Validate a ``[..., D]`` input; return D. The row view needs a contiguous last dimension."""
    if x.dim() < 2:
        raise UsageError(f"{name}: expected at least 2 dims [..., D], got shape {tuple(x.shape)}")
    if x.shape[-1] == 0:
        raise UsageError(f"{name}: last dimension D is 0")
    return int(x.shape[-1])


def check_like(dy, x, rstd, n_rows: int) -> None:
    """A backward's ``dy`` must match ``x`` and ``rstd`` hold one value per row (the kernels trust both)."""
    if dy.shape != x.shape:
        raise UsageError(f"dy: shape {tuple(dy.shape)} must match {tuple(x.shape)}")
    if rstd.numel() != n_rows:
        raise UsageError(f"rstd: {rstd.numel()} values, expected one per row ({n_rows})")


def dense(t):
    """``t`` itself when contiguous (the common case, no torch call), else a contiguous copy."""
    return t if t.is_contiguous() else t.contiguous()


@triton.jit
def row_task(task, row_start, n_rows, BR: tl.constexpr):
    """Task ``task`` -> (its first row ``r0``, the rows left from it, so ``[0, rows_left)`` is in bounds)."""
    r0 = row_start + task * BR
    return r0, n_rows - r0


@triton.jit
def row_tile(base, r0, rows_left, D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr):
    """``[BR, BD]`` block pointer at row ``r0`` of a row-major ``[n_rows, D]`` tensor.

    int64 before the stride (r0 * D passes 2^31 at large T*D); rebound from the base for every task
    (in-place ptr += across tasks can miscompile).
    """
    return tl.make_block_ptr(base + tl.cast(r0, tl.int64) * D, (rows_left, D), (D, 1), (0, 0), (BR, BD), (1, 0))


@triton.jit
def row_values(base, r0, rows_left, BR: tl.constexpr):
    """``[BR]`` block pointer at row ``r0`` of a per-row vector (e.g. rstd)."""
    return tl.make_block_ptr(base + tl.cast(r0, tl.int64), (rows_left,), (1,), (0,), (BR,), (0,))


@triton.jit
def load_tile(p, TAIL: tl.constexpr):
    """Load a ``[BR, BD]`` block: bulk tiles check only the padded columns, tail tiles rows too."""
    if TAIL:
        tile = tl.load(p, boundary_check=(0, 1), padding_option="zero")
    else:
        tile = tl.load(p, boundary_check=(1,), padding_option="zero")
    return tile


@triton.jit
def store_tile(p, value, TAIL: tl.constexpr):
    if TAIL:
        tl.store(p, value, boundary_check=(0, 1))
    else:
        tl.store(p, value, boundary_check=(1,))


@triton.jit
def load_rows(p, TAIL: tl.constexpr):
    """Load a ``[BR]`` per-row vector (e.g. rstd); only tail tiles can run past the last row."""
    if TAIL:
        rows = tl.load(p, boundary_check=(0,), padding_option="zero")
    else:
        rows = tl.load(p)
    return rows


@triton.jit
def store_rows(p, value, TAIL: tl.constexpr):
    if TAIL:
        tl.store(p, value, boundary_check=(0,))
    else:
        tl.store(p, value)
