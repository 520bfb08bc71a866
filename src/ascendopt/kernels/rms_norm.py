"""RMS norm with a weight over the last dimension, forward and backward.

Forward: ``y = x * rstd * w`` with ``rstd = 1 / sqrt(mean(x^2) + eps)``; ``x`` ``[..., D]`` (bf16 or
fp32), ``w`` ``[D]``, ``y`` like ``x``, ``rstd`` ``[...]`` fp32. Backward:
``dx = rstd * (w*dy) - x * rstd^3 * mean(w*dy*x)`` and ``dw = sum_rows(dy * x * rstd)``. The weight
gradient is reduced deterministically: every program writes one fp32 partial row, a second kernel
sums the partials in a fixed order. Accumulation is fp32 throughout.
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl

from ascendopt.device import ub
from ascendopt.device.ub import DEFAULT_MARGIN as UB_MARGIN  # fla's norm margin, as every vector kernel here
from ascendopt.device.ub import dtype_bytes
from ascendopt.kernels._lib import resident, rowwise
from ascendopt.kernels._lib.common import alloc, grid_size, launch, num_cores, on_cuda, torch_dtype
from ascendopt.kernels._lib.rowwise import load_rows, load_tile, store_rows, store_tile
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage

# Live fp32 copies per [BR, BD] tile element, counted from the kernels below and anchored on fla's
# calibrated l2norm (2.0 fwd / 4.0 bwd, modules/norm/triton_ascend/l2norm.py): forward x, y and the
# weight broadcast to [BR, BD] -> 3.0; backward x, dy, dx, the broadcast weight and the dy*x*rstd
# product feeding the dw row-sum -> 5.0 (fla's layernorm, which also keeps mean-centred x and a bias,
# uses 6.0 / 8.0). The [BD] weight and dw accumulator rows fit within these at BR >= 1.
FWD_MEM_MULT = 3.0
BWD_MEM_MULT = 5.0
# dw finalize: the [BP, BDW] partial tile and its column-sum temporary.
FINALIZE_MEM_MULT = 2.0
# Partial rows summed per finalize step: deep enough that ~one program per core keeps many bytes in flight.
MAX_PARTIAL_ROWS = 256
DEFAULT_EPS = 1e-6


@triton.jit(do_not_specialize=["n_rows", "row_start", "n_tasks"])
def _rms_norm_fwd_kernel(x, w, y, rstd, eps, n_rows, row_start, n_tasks,
                         D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr,
                         W_RESIDENT: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    p_w = tl.make_block_ptr(w, (D,), (1,), (0,), (BD,), (0,))
    if W_RESIDENT:  # the weight row is loaded once per program and kept across its tasks
        b_w = tl.load(p_w, boundary_check=(0,), padding_option="zero").to(tl.float32)
    for task in tl.range(pid, n_tasks, n_programs):
        r0, rows_left = rowwise.row_task(task, row_start, n_rows, BR)
        p_x = rowwise.row_tile(x, r0, rows_left, D, BR, BD)
        p_y = rowwise.row_tile(y, r0, rows_left, D, BR, BD)
        p_r = rowwise.row_values(rstd, r0, rows_left, BR)
        b_x = load_tile(p_x, TAIL).to(tl.float32)
        b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) / D + eps)
        if not W_RESIDENT:
            # Reloaded per tile (a cache hit), after the row sums: its registers are not live across them.
            b_w = tl.load(p_w, boundary_check=(0,), padding_option="zero").to(tl.float32)
        b_y = b_x * b_rstd[:, None] * b_w[None, :]
        store_tile(p_y, b_y.to(p_y.dtype.element_ty), TAIL)
        store_rows(p_r, b_rstd, TAIL)


@triton.jit(do_not_specialize=["n_rows", "row_start", "n_tasks", "first_program"])
def _rms_norm_bwd_kernel(x, w, rstd, dy, dx, dw_partial, n_rows, row_start, n_tasks, first_program,
                         D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    p_w = tl.make_block_ptr(w, (D,), (1,), (0,), (BD,), (0,))
    b_w = tl.load(p_w, boundary_check=(0,), padding_option="zero").to(tl.float32)
    b_dw = tl.zeros([BD], dtype=tl.float32)
    for task in tl.range(pid, n_tasks, n_programs):
        r0, rows_left = rowwise.row_task(task, row_start, n_rows, BR)
        p_x = rowwise.row_tile(x, r0, rows_left, D, BR, BD)
        p_dy = rowwise.row_tile(dy, r0, rows_left, D, BR, BD)
        p_dx = rowwise.row_tile(dx, r0, rows_left, D, BR, BD)
        p_r = rowwise.row_values(rstd, r0, rows_left, BR)
        b_x = load_tile(p_x, TAIL).to(tl.float32)
        b_dy = load_tile(p_dy, TAIL).to(tl.float32)
        b_rstd = load_rows(p_r, TAIL)  # tail rows past n_rows load 0, so they add nothing to dw
        b_xr = b_x * b_rstd[:, None]  # the normalized row x_hat
        b_dw += tl.sum(b_dy * b_xr, axis=0)
        b_wdy = b_dy * b_w[None, :]
        b_c = tl.sum(b_wdy * b_xr, axis=1) / D
        b_dx = (b_wdy - b_xr * b_c[:, None]) * b_rstd[:, None]
        store_tile(p_dx, b_dx.to(p_dx.dtype.element_ty), TAIL)
    # One fp32 partial row per program (never atomics): the finalize kernel sums them in order.
    partial_row = tl.cast(first_program + pid, tl.int64) * D
    p_dw = tl.make_block_ptr(dw_partial + partial_row, (D,), (1,), (0,), (BD,), (0,))
    tl.store(p_dw, b_dw, boundary_check=(0,))


@triton.jit(do_not_specialize=["n_partials", "n_tasks"])
def _rms_norm_dweight_kernel(dw_partial, dw, n_partials, n_tasks,
                             D: tl.constexpr, BP: tl.constexpr, BDW: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_programs):
        c0 = task * BDW
        b_acc = tl.zeros([BDW], dtype=tl.float32)
        for p0 in range(0, n_partials, BP):
            p_part = tl.make_block_ptr(dw_partial, (n_partials, D), (D, 1), (p0, c0), (BP, BDW), (1, 0))
            b_acc += tl.sum(tl.load(p_part, boundary_check=(0, 1), padding_option="zero"), axis=0)
        p_dw = tl.make_block_ptr(dw, (D,), (1,), (c0,), (BDW,), (0,))
        tl.store(p_dw, b_acc.to(p_dw.dtype.element_ty), boundary_check=(0,))


def _check_weight(weight, d: int):
    from ascendopt.errors import UsageError

    if weight.shape != (d,):
        raise UsageError(f"weight: expected shape ({d},) to match x's last dim, got {tuple(weight.shape)}")
    return weight.contiguous()


WEIGHT_MODES = (0, 1, 2)
WEIGHT_DOC = ("forward's [D] weight row: 1 = loaded once per program and kept, 2 = reloaded with every tile "
              "(a cache hit; fewer live registers), 0 = auto (2 on CUDA, 1 elsewhere)")


def _weight_resident(mode: int) -> bool:
    """W_RESIDENT for ``weight_mode``. On CUDA registers bound how many programs an SM holds, and a
    resident fp32 row takes D/128 of them per thread (sm_90: 168 -> 96 registers at D=8192, 127 -> 96
    at D=4096 with 2 rows, i.e. 3 -> 5 and 4 -> 5 programs per SM); a UB keeps it for free on npu."""
    if mode == 0:
        return not on_cuda()
    return mode == 1


def rms_norm_fwd(x, weight, eps: float = DEFAULT_EPS, *, config: dict | None = None):
    """Forward: ``x`` ``[..., D]``, ``weight`` ``[D]`` -> (``y`` like ``x``, ``rstd`` ``[...]`` fp32)."""
    import torch

    cfg = SPEC.config(config)
    # The kernels take [n_rows, D] row-major memory, which any contiguous [..., D] tensor already is:
    # no views on the hot path (each torch call is microseconds of host time on a host-bound op).
    d = rowwise.check_rows(x)
    x = rowwise.dense(x)
    w = _check_weight(weight, d)
    n_rows = x.numel() // d
    y = alloc(x.shape, x.dtype, x.device)
    rstd = alloc(x.shape[:-1], torch.float32, x.device)
    plan = rowwise.row_plan(n_rows, d, FWD_MEM_MULT, UB_MARGIN, cfg["block_rows"],
                            streaming=True)
    w_resident = _weight_resident(cfg["weight_mode"])
    for part in plan.launches:
        variant = (x.dtype, w.dtype, d, plan.block_rows, part.tail, w_resident)  # what the kernel compiles for
        grid = resident.programs(_rms_norm_fwd_kernel, variant, part.n_tasks, part.programs)
        compiled = launch(_rms_norm_fwd_kernel, (grid,), x, w, y, rstd, eps, n_rows, part.row_start, part.n_tasks,
                          D=d, BR=plan.block_rows, BD=plan.block_cols, TAIL=part.tail, W_RESIDENT=w_resident)
        resident.learn(_rms_norm_fwd_kernel, variant, compiled)
    return y, rstd


def _finalize_tiles(n_partials: int, d: int) -> tuple[int, int]:
    """(BP, BDW) for the dw finalize: about one column block per vector core, BP rows from the UB model."""
    ub_bytes, backend, _ = rowwise.ub_context()
    return _finalize_tiles_for(n_partials, d, num_cores("vector"), ub_bytes, backend)


@functools.lru_cache(maxsize=256)  # the exact-fraction UB solve is host time on every backward call
def _finalize_tiles_for(n_partials: int, d: int, cores: int, ub_bytes: int, backend: str) -> tuple[int, int]:
    bdw = max(16, min(256, rowwise.row_block(d), ub.pow2_floor(d // max(cores, 1))))
    bp = ub.solve({"BP": 1, "BDW": bdw}, "BP", "fp32", FINALIZE_MEM_MULT, ub_bytes, UB_MARGIN, upper=n_partials)
    bp = min(bp, MAX_PARTIAL_ROWS)
    if backend == "cuda":
        bp = min(bp, rowwise.cuda_cap(FINALIZE_MEM_MULT, bdw))
    return bp, bdw


def _bwd_launches(plan, x, w, rstd, dy, dx, d: int) -> tuple:
    """The plan's launches, the bulk one capped on CUDA at the programs the SMs hold at once.

    Every program writes one [D] fp32 partial row that the finalize reads back; programs past the
    resident ones run in later waves, so they add partial traffic and no concurrency (H200 run 3:
    B1_T4096_D8192 launched 2112 programs for 4096 rows, 69 MB of partials next to 201 MB of rows).
    The residency comes from compiling the bulk variant before its first launch, so the number of
    partials, and the order they are summed in, is the same on every call (``ASCENDOPT_CUDA_RESIDENT_GRID=0``
    keeps the planned grid)."""
    from dataclasses import replace

    bulk = plan.launches[0]
    if bulk.tail:
        return plan.launches
    variant = (x.dtype, dy.dtype, d, plan.block_rows)

    def compile_bulk():
        import torch

        partial = torch.empty(1, dtype=torch.float32, device=x.device)  # only its pointer type matters
        return _rms_norm_bwd_kernel.warmup(x, w, rstd, dy, dx, partial, 0, 0, 1, 0, D=d, BR=plan.block_rows,
                                           BD=plan.block_cols, TAIL=False, grid=(1,))

    per_sm = resident.residency_before_launch(_rms_norm_bwd_kernel, variant, compile_bulk, default_on=True)
    programs = resident.capped_grid(per_sm, bulk.n_tasks, bulk.programs)
    if programs == bulk.programs:
        return plan.launches
    capped = [replace(bulk, programs=programs)]
    capped += [replace(part, first_program=programs) for part in plan.launches[1:]]
    return tuple(capped)


def rms_norm_bwd(x, weight, rstd, dy, *, config: dict | None = None):
    """Backward: returns (``dx`` like ``x``, ``dweight`` like ``weight``) from the forward's ``rstd``."""
    import torch

    cfg = SPEC.config(config)
    d = rowwise.check_rows(x)
    x, dy, rstd = rowwise.dense(x), rowwise.dense(dy), rowwise.dense(rstd)
    w = _check_weight(weight, d)
    n_rows = x.numel() // d
    rowwise.check_like(dy, x, rstd, n_rows)
    dx = alloc(x.shape, dy.dtype, x.device)
    plan = rowwise.row_plan(n_rows, d, BWD_MEM_MULT, UB_MARGIN, cfg["block_rows_bwd"])
    launches = _bwd_launches(plan, x, w, rstd, dy, dx, d)
    n_partials = rowwise.total_programs(launches)
    dw_partial = alloc((n_partials, d), torch.float32, x.device)
    for part in launches:
        launch(_rms_norm_bwd_kernel, (part.programs,), x, w, rstd, dy, dx, dw_partial,
               n_rows, part.row_start, part.n_tasks, part.first_program,
               D=d, BR=plan.block_rows, BD=plan.block_cols, TAIL=part.tail)
    dweight = alloc((d,), weight.dtype, x.device)
    bp, bdw = _finalize_tiles(n_partials, d)
    tasks = triton.cdiv(d, bdw)
    launch(_rms_norm_dweight_kernel, (grid_size("vector", tasks),), dw_partial, dweight, n_partials, tasks,
           D=d, BP=bp, BDW=bdw)
    return dx, dweight


def rms_norm(x, weight, eps: float = DEFAULT_EPS, *, config: dict | None = None):
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` for ``x`` ``[..., D]``, ``weight`` ``[D]``."""
    return rms_norm_fwd(x, weight, eps, config=config)[0]


def rms_norm_reference(inputs: dict, mode: str) -> dict:
    """fp32 torch oracle: ``y``; for ``fwdbwd`` also ``dx`` and ``dweight`` (exact, through autograd)."""
    import torch

    grad = mode == "fwdbwd"
    x = inputs["x"].detach().float().requires_grad_(grad)
    w = inputs["weight"].detach().float().requires_grad_(grad)
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + DEFAULT_EPS) * w
    out = {"y": y.detach()}
    if grad:
        dx, dw = torch.autograd.grad(y, (x, w), inputs["dy"].float())
        out.update(dx=dx, dweight=dw)
    return out


# -- spec ------------------------------------------------------------------------------------


def _shape(dims) -> tuple[int, ...]:
    return (dims["B"], dims["T"], dims["D"])


def _make_inputs(dims, dtype: str, device, seed: int = 0, mode: str = "fwdbwd") -> dict:
    import torch

    dt = torch_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    shape = _shape(dims)
    x = torch.randn(shape, generator=gen)
    weight = 1.0 + 0.1 * torch.randn(dims["D"], generator=gen)
    dy = torch.randn(shape, generator=gen)
    return {"x": x.to(device, dt), "weight": weight.to(device, dt), "dy": dy.to(device, dt)}


def _run(inputs: dict, config: dict, mode: str) -> dict:
    y, rstd = rms_norm_fwd(inputs["x"], inputs["weight"], config=config)
    out = {"y": y}
    if mode == "fwdbwd":
        out["dx"], out["dweight"] = rms_norm_bwd(inputs["x"], inputs["weight"], rstd, inputs["dy"], config=config)
    return out


def _ub_model(dims, config: dict, dtype: str) -> list[UBStage]:
    n, d = rowwise.n_rows(_shape(dims)), dims["D"]
    bp, bdw = _finalize_tiles(64, d)
    # Multipliers: see FWD_MEM_MULT / BWD_MEM_MULT / FINALIZE_MEM_MULT above for their origin.
    return (rowwise.norm_stages(n, d, config, FWD_MEM_MULT, BWD_MEM_MULT, UB_MARGIN, bwd_streaming=False)
            + [UBStage("dweight", {"BP": bp, "BDW": bdw}, "fp32", FINALIZE_MEM_MULT, UB_MARGIN)])


def _cost(dims, dtype: str, mode: str) -> Cost:
    n, d = rowwise.n_rows(_shape(dims)), dims["D"]
    b = dtype_bytes(dtype)
    fwd_bytes = 2 * n * d * b + d * b + 4 * n  # x in, y out, weight in, rstd out
    fwd_flops = 4 * n * d
    if mode == "fwd":
        return Cost(fwd_bytes, fwd_flops)
    # fwdbwd minimum: x, dy, weight read once; y, dx, dweight written once; rstd round-trips in fp32.
    return Cost(4 * n * d * b + 2 * d * b + 8 * n, fwd_flops + 9 * n * d)


def _supports(dims, dtype: str, mode: str) -> str | None:
    return rowwise.unsupported_rows(dims, "rms_norm", "B, T, D", _shape, mode, FWD_MEM_MULT, BWD_MEM_MULT,
                                    UB_MARGIN)


def _peer(inputs: dict, mode: str) -> dict:
    """flash-linear-attention's rms_norm (fla-core 0.6.0) on the same inputs, for the H200 comparison."""
    from fla.modules.norm.layernorm import rms_norm as fla_rms_norm

    if mode == "fwd":
        return {"y": fla_rms_norm(inputs["x"], inputs["weight"], None, eps=DEFAULT_EPS)}
    x = inputs["x"].detach().requires_grad_(True)
    w = inputs["weight"].detach().requires_grad_(True)
    y = fla_rms_norm(x, w, None, eps=DEFAULT_EPS)
    y.backward(inputs["dy"])
    return {"y": y.detach(), "dx": x.grad, "dweight": w.grad}


SPEC = KernelSpec(
    name="rms_norm",
    description="RMS norm with weight over the last dim (fwd: y, rstd; bwd: dx, dweight via fp32 partials)",
    bound="vector",
    modes=("fwd", "fwdbwd"),
    dtypes=("bf16", "fp32"),
    shapes={
        "tiny": ShapePreset("tiny", {"B": 2, "T": 37, "D": 96}, "CPU CI: 74 rows of a non-power-of-two width"),
        "realistic": ShapePreset("realistic", {"B": 4, "T": 4096, "D": 4096}, "B4_T4096_D4096: a 4096-wide model"),
        "widest": ShapePreset("widest", {"B": 1, "T": 4096, "D": 8192}, "B1_T4096_D8192: the widest supported row"),
    },
    tunables={
        "block_rows": Tunable("block_rows", 0, rowwise.ROW_CHOICES, "forward " + rowwise.ROW_DOC),
        "block_rows_bwd": Tunable("block_rows_bwd", 0, rowwise.ROW_CHOICES, "backward " + rowwise.ROW_DOC),
        "weight_mode": Tunable("weight_mode", 0, WEIGHT_MODES, WEIGHT_DOC),
    },
    make_inputs=_make_inputs,
    run=_run,
    reference=rms_norm_reference,
    ub_model=_ub_model,
    cost=_cost,
    supports=_supports,
    kernel_names=("_rms_norm_fwd_kernel", "_rms_norm_bwd_kernel", "_rms_norm_dweight_kernel"),
    tolerances={"fp32": 1e-5, "bf16": 1e-2},
    extras={"support": f"x [B, T, D], weight [D]: D 1..8192 (fp32 row tile x3 fwd / x5 bwd in {UB_MARGIN:.0%} of a "
                       "192 KiB UB)",
            "peer": _peer, "peer_name": "fla.modules.norm.layernorm.rms_norm (fla-core 0.6.0)",
            "outputs": {"fwd": ("y",), "fwdbwd": ("y", "dx", "dweight")},
            "lowering_configs": [{"weight_mode": 2}]},
)
