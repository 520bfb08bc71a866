"""l2norm over the last dimension: ``y = x / sqrt(sum(x^2) + eps)``, forward and backward.

Shapes: ``x`` ``[..., D]`` (bf16 or fp32), ``y`` like ``x``, ``rstd`` ``[...]`` fp32 (saved for the
backward). Backward: ``dx = rstd * (dy - sum(dy * y) * y)``. Accumulation is fp32. Each program of a
1D core grid loops over ``[BR, BD]`` row tiles (``BD`` = the padded row, ``BR`` from the UB model).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.device.ub import DEFAULT_MARGIN as UB_MARGIN  # fla's norm margin, as every vector kernel here
from ascendopt.device.ub import dtype_bytes
from ascendopt.kernels._lib import resident, rowwise
from ascendopt.kernels._lib.common import alloc, launch, torch_dtype
from ascendopt.kernels._lib.rowwise import load_rows, load_tile, store_rows, store_tile
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage

# Live fp32 tiles per [BR, BD] element, from fla's device-calibrated l2norm
# (modules/norm/triton_ascend/l2norm.py: _FWD_MEM_MULT 2.0 = x and y; _BWD_MEM_MULT 4.0 = y, dy,
# dx and the dy*y product; "backward overflows at BT=128, BD=128, while BT=64 is safe").
FWD_MEM_MULT = 2.0
BWD_MEM_MULT = 4.0
DEFAULT_EPS = 1e-6


@triton.jit(do_not_specialize=["n_rows", "row_start", "n_tasks"])
def _l2norm_fwd_kernel(x, y, rstd, eps, n_rows, row_start, n_tasks,
                       D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_programs):
        r0, rows_left = rowwise.row_task(task, row_start, n_rows, BR)
        p_x = rowwise.row_tile(x, r0, rows_left, D, BR, BD)
        p_y = rowwise.row_tile(y, r0, rows_left, D, BR, BD)
        p_r = rowwise.row_values(rstd, r0, rows_left, BR)
        b_x = load_tile(p_x, TAIL).to(tl.float32)
        b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) + eps)
        store_tile(p_y, (b_x * b_rstd[:, None]).to(p_y.dtype.element_ty), TAIL)
        store_rows(p_r, b_rstd, TAIL)


@triton.jit(do_not_specialize=["n_rows", "row_start", "n_tasks"])
def _l2norm_bwd_kernel(y, rstd, dy, dx, n_rows, row_start, n_tasks,
                       D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_programs):
        r0, rows_left = rowwise.row_task(task, row_start, n_rows, BR)
        p_y = rowwise.row_tile(y, r0, rows_left, D, BR, BD)
        p_dy = rowwise.row_tile(dy, r0, rows_left, D, BR, BD)
        p_dx = rowwise.row_tile(dx, r0, rows_left, D, BR, BD)
        p_r = rowwise.row_values(rstd, r0, rows_left, BR)
        b_y = load_tile(p_y, TAIL).to(tl.float32)
        b_dy = load_tile(p_dy, TAIL).to(tl.float32)
        b_rstd = load_rows(p_r, TAIL)
        # dx = rstd * (dy - <dy, y> y): the projection of dy off the unit vector y, scaled back.
        b_dot = tl.sum(b_dy * b_y, axis=1)
        b_dx = (b_dy - b_dot[:, None] * b_y) * b_rstd[:, None]
        store_tile(p_dx, b_dx.to(p_dx.dtype.element_ty), TAIL)


def l2norm_fwd(x, eps: float = DEFAULT_EPS, *, config: dict | None = None):
    """Forward: ``x`` ``[..., D]`` -> (``y`` like ``x``, ``rstd`` ``[...]`` fp32)."""
    import torch

    cfg = SPEC.config(config)
    # Any contiguous [..., D] tensor is the kernels' [n_rows, D] row-major view: no torch views on the
    # hot path (small shapes are host-bound, see rowwise.row_plan).
    d = rowwise.check_rows(x)
    x = rowwise.dense(x)
    n_rows = x.numel() // d
    y = alloc(x.shape, x.dtype, x.device)
    rstd = alloc(x.shape[:-1], torch.float32, x.device)
    plan = rowwise.row_plan(n_rows, d, FWD_MEM_MULT, UB_MARGIN, cfg["block_rows"],
                            streaming=True)
    for part in plan.launches:
        variant = (x.dtype, d, plan.block_rows, part.tail)  # what the compiled kernel depends on
        grid = resident.programs(_l2norm_fwd_kernel, variant, part.n_tasks, part.programs)
        compiled = launch(_l2norm_fwd_kernel, (grid,), x, y, rstd, eps, n_rows, part.row_start, part.n_tasks,
                          D=d, BR=plan.block_rows, BD=plan.block_cols, TAIL=part.tail)
        resident.learn(_l2norm_fwd_kernel, variant, compiled)
    return y, rstd


def l2norm_bwd(y, rstd, dy, *, config: dict | None = None):
    """Backward from the forward's ``y`` and ``rstd``: returns ``dx`` like ``dy``."""
    cfg = SPEC.config(config)
    d = rowwise.check_rows(y, "y")
    y, dy, rstd = rowwise.dense(y), rowwise.dense(dy), rowwise.dense(rstd)
    n_rows = y.numel() // d
    rowwise.check_like(dy, y, rstd, n_rows)
    dx = alloc(dy.shape, dy.dtype, dy.device)
    plan = rowwise.row_plan(n_rows, d, BWD_MEM_MULT, UB_MARGIN, cfg["block_rows_bwd"],
                            streaming=True)
    for part in plan.launches:
        variant = (y.dtype, dy.dtype, d, plan.block_rows, part.tail)
        grid = resident.programs(_l2norm_bwd_kernel, variant, part.n_tasks, part.programs)
        compiled = launch(_l2norm_bwd_kernel, (grid,), y, rstd, dy, dx, n_rows, part.row_start, part.n_tasks,
                          D=d, BR=plan.block_rows, BD=plan.block_cols, TAIL=part.tail)
        resident.learn(_l2norm_bwd_kernel, variant, compiled)
    return dx


def l2norm(x, eps: float = DEFAULT_EPS, *, config: dict | None = None):
    """``x / sqrt(sum(x^2, -1) + eps)`` over the last dim of ``x`` ``[..., D]``; same shape and dtype."""
    return l2norm_fwd(x, eps, config=config)[0]


def l2norm_reference(inputs: dict, mode: str) -> dict:
    """fp32 torch oracle: ``y`` and, for ``fwdbwd``, ``dx`` (exact gradient through autograd)."""
    import torch

    x = inputs["x"].detach().float().requires_grad_(mode == "fwdbwd")
    y = x * torch.rsqrt((x * x).sum(-1, keepdim=True) + DEFAULT_EPS)
    out = {"y": y.detach()}
    if mode == "fwdbwd":
        (dx,) = torch.autograd.grad(y, x, inputs["dy"].float())
        out["dx"] = dx
    return out


# -- spec ------------------------------------------------------------------------------------


def _shape(dims) -> tuple[int, ...]:
    lead = (dims["B"], dims["T"]) + ((dims["H"],) if "H" in dims else ())
    return lead + (dims["D"],)


def _make_inputs(dims, dtype: str, device, seed: int = 0, mode: str = "fwdbwd") -> dict:
    import torch

    dt = torch_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    shape = _shape(dims)
    x = torch.randn(shape, generator=gen) + 0.1
    dy = torch.randn(shape, generator=gen)
    return {"x": x.to(device, dt), "dy": dy.to(device, dt)}


def _run(inputs: dict, config: dict, mode: str) -> dict:
    y, rstd = l2norm_fwd(inputs["x"], config=config)
    out = {"y": y}
    if mode == "fwdbwd":
        out["dx"] = l2norm_bwd(y, rstd, inputs["dy"], config=config)
    return out


def _ub_model(dims, config: dict, dtype: str) -> list[UBStage]:
    # Multipliers: see FWD_MEM_MULT / BWD_MEM_MULT (fla's calibrated l2norm values).
    return rowwise.norm_stages(rowwise.n_rows(_shape(dims)), dims["D"], config, FWD_MEM_MULT, BWD_MEM_MULT, UB_MARGIN,
                               bwd_streaming=True)


def _cost(dims, dtype: str, mode: str) -> Cost:
    n, d = rowwise.n_rows(_shape(dims)), dims["D"]
    b = dtype_bytes(dtype)
    fwd_bytes = 2 * n * d * b + 4 * n  # x in, y out, rstd out
    fwd_flops = 3 * n * d  # square, sum, scale
    if mode == "fwd":
        return Cost(fwd_bytes, fwd_flops)
    # fwdbwd minimum: x and dy read once, y and dx written once (rstd round-trips as fp32).
    return Cost(4 * n * d * b + 8 * n, fwd_flops + 5 * n * d)


def _supports(dims, dtype: str, mode: str) -> str | None:
    return rowwise.unsupported_rows(dims, "l2norm", "B, T, D and optionally H", _shape, mode, FWD_MEM_MULT,
                                    BWD_MEM_MULT, UB_MARGIN)


def _peer(inputs: dict, mode: str) -> dict:
    """flash-linear-attention's l2norm (fla-core 0.6.0) on the same inputs, for the H200 comparison."""
    from fla.modules.norm.l2norm import l2norm as fla_l2norm

    if mode == "fwd":
        return {"y": fla_l2norm(inputs["x"], eps=DEFAULT_EPS)}
    x = inputs["x"].detach().requires_grad_(True)
    y = fla_l2norm(x, eps=DEFAULT_EPS)
    y.backward(inputs["dy"])
    return {"y": y.detach(), "dx": x.grad}


SPEC = KernelSpec(
    name="l2norm",
    description="L2 normalization over the last dim (fwd: y, rstd; bwd: dx), [BR, BD] row tiles from the UB model",
    bound="vector",
    modes=("fwd", "fwdbwd"),
    dtypes=("bf16", "fp32"),
    shapes={
        "tiny": ShapePreset("tiny", {"B": 2, "T": 37, "D": 64}, "CPU CI: 74 rows, bulk + tail tiles"),
        "realistic": ShapePreset("realistic", {"B": 4, "T": 4096, "H": 32, "D": 128},
                                 "B4_T4096_H32_D128: q/k normalization of a gated-delta-rule layer"),
        "wide": ShapePreset("wide", {"B": 4, "T": 4096, "D": 4096}, "B4_T4096_D4096: one 4096-wide row per token"),
        "widest": ShapePreset("widest", {"B": 1, "T": 4096, "D": 8192}, "B1_T4096_D8192: the widest supported row"),
    },
    tunables={
        "block_rows": Tunable("block_rows", 0, rowwise.ROW_CHOICES, "forward " + rowwise.ROW_DOC),
        "block_rows_bwd": Tunable("block_rows_bwd", 0, rowwise.ROW_CHOICES, "backward " + rowwise.ROW_DOC),
    },
    make_inputs=_make_inputs,
    run=_run,
    reference=l2norm_reference,
    ub_model=_ub_model,
    cost=_cost,
    supports=_supports,
    kernel_names=("_l2norm_fwd_kernel", "_l2norm_bwd_kernel"),
    tolerances={"fp32": 1e-5, "bf16": 1e-2},
    extras={"support": f"x [..., D]: D 1..8192 (fp32 row tile x2 fwd / x4 bwd in {UB_MARGIN:.0%} of a 192 KiB UB), "
                       "any rows",
            "peer": _peer, "peer_name": "fla.modules.norm.l2norm.l2norm (fla-core 0.6.0)",
            "outputs": {"fwd": ("y",), "fwdbwd": ("y", "dx")}},
)
