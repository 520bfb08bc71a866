"""Stage 2 of the gated delta rule forward: Ai = (I + A)^-1 per 64-token chunk (A strictly lower).

Block algorithm over 16x16 blocks (BC): the four diagonal blocks are inverted by forward
substitution (one row per step, vector work, the four blocks interleaved), then the off-diagonal blocks follow from
``X_ij = -X_ii (sum_{j<=m<i} A_im X_mj)`` with small ``tl.dot``s in fp32, ``input_precision="ieee"``
(the solve amplifies operand rounding; tf32/hf32 would cost ~1e-3 relative error).

tl.dot lhs clobber (seed, "Ascend tl.dot clobbers the left operand"): a left operand is either a
block of A loaded from GM for that one dot, or a ``+ 0.0`` copy of a diagonal inverse made right
before the dot; the inverses themselves are never a left operand, so their later reads are clean.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_of
from ascendopt.kernels.gdn.kkt import _make_inputs as _kkt_inputs
from ascendopt.kernels.gdn.layout import CHUNK, pack
from ascendopt.kernels.gdn.workload import UBStage, dims_of, stage_spec
from ascendopt.kernels.spec import Cost

BC = 16  # diagonal block; 4 blocks per chunk


@triton.jit
def _load_block(A_seq, t0, T_seq, ROWS: tl.constexpr, i: tl.constexpr, j: tl.constexpr, BT: tl.constexpr,
                BC: tl.constexpr):
    """Block (i, j) of the chunk's A as fp32 [BC, BC], zero past the sequence end."""
    p = tl.make_block_ptr(A_seq, (T_seq, BT), (ROWS, 1), (t0 + i * BC, j * BC), (BC, BC), (1, 0))
    return tl.load(p, boundary_check=(0, 1), padding_option="zero").to(tl.float32)


@triton.jit
def _substitution_step(b_N, b_Y, r, o, BC: tl.constexpr):
    """Row r of Y = (I + N)^-1 - I: Y_r = -N_r - sum_{m<r} N_rm Y_m (rows < r of Y are final).

    The row of N is taken from the tile already in registers/UB (a masked row sum), not re-read from
    GM: 14 dependent row DMAs per block would put GM latency on the critical path."""
    b_a = -tl.sum(tl.where(o[:, None] == r, b_N, 0.0), 0)
    b_a += tl.sum(b_a[:, None] * b_Y, 0)
    return tl.where(o[:, None] == r, b_a[None, :], b_Y)


@triton.jit
def _invert_diagonals(A_seq, t0, T_seq, ROWS: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """(I + A_ii)^-1 of the four diagonal blocks by forward substitution, the four independent
    recurrences advanced in one loop so their steps overlap."""
    o = tl.arange(0, BC)
    strict = o[:, None] > o[None, :]
    N0 = tl.where(strict, _load_block(A_seq, t0, T_seq, ROWS, 0, 0, BT, BC), 0.0)
    N1 = tl.where(strict, _load_block(A_seq, t0, T_seq, ROWS, 1, 1, BT, BC), 0.0)
    N2 = tl.where(strict, _load_block(A_seq, t0, T_seq, ROWS, 2, 2, BT, BC), 0.0)
    N3 = tl.where(strict, _load_block(A_seq, t0, T_seq, ROWS, 3, 3, BT, BC), 0.0)
    Y0, Y1, Y2, Y3 = -N0, -N1, -N2, -N3  # rows 0 and 1 are already final
    for r in range(2, BC):
        Y0 = _substitution_step(N0, Y0, r, o, BC)
        Y1 = _substitution_step(N1, Y1, r, o, BC)
        Y2 = _substitution_step(N2, Y2, r, o, BC)
        Y3 = _substitution_step(N3, Y3, r, o, BC)
    eye = (o[:, None] == o[None, :]).to(tl.float32)
    return Y0 + eye, Y1 + eye, Y2 + eye, Y3 + eye


@triton.jit
def _store_block(Ai_seq, b_X, t0, T_seq, ROWS: tl.constexpr, i: tl.constexpr, j: tl.constexpr,
                 BT: tl.constexpr, BC: tl.constexpr):
    p = tl.make_block_ptr(Ai_seq, (T_seq, BT), (ROWS, 1), (t0 + i * BC, j * BC), (BC, BC), (1, 0))
    tl.store(p, b_X.to(p.dtype.element_ty), boundary_check=(0, 1))


@triton.jit(do_not_specialize=["num_tasks"])
def _gdn_solve_tril_kernel(A, Ai, cu_seqlens, chunk_indices, num_tasks, HV: tl.constexpr, BT: tl.constexpr,
                           BC: tl.constexpr):
    tl.static_assert(BT == 4 * BC, "the block solve is written for 4 diagonal blocks")
    ROWS: tl.constexpr = HV * BT
    zero = tl.zeros([BC, BC], dtype=tl.float32)
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_c, i_hv = task // HV, task % HV
        i_t, bos, T_seq = chunk_of(i_c, chunk_indices, cu_seqlens)
        t0 = i_t * BT
        A_seq = A + (bos * HV + i_hv) * BT  # rebound per task
        Ai_seq = Ai + (bos * HV + i_hv) * BT
        X00, X11, X22, X33 = _invert_diagonals(A_seq, t0, T_seq, ROWS, BT, BC)
        # first sub-diagonal: X_{i+1,i} = -X_{i+1,i+1} A_{i+1,i} X_ii
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 1, 0, BT, BC), X00, input_precision="ieee")
        X10 = -tl.dot(X11 + 0.0, S, input_precision="ieee")
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 2, 1, BT, BC), X11, input_precision="ieee")
        X21 = -tl.dot(X22 + 0.0, S, input_precision="ieee")
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 2, BT, BC), X22, input_precision="ieee")
        X32 = -tl.dot(X33 + 0.0, S, input_precision="ieee")
        # second: X_{i+2,i} = -X_{i+2,i+2} (A_{i+2,i} X_ii + A_{i+2,i+1} X_{i+1,i})
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 2, 0, BT, BC), X00, input_precision="ieee")
        S += tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 2, 1, BT, BC), X10, input_precision="ieee")
        X20 = -tl.dot(X22 + 0.0, S, input_precision="ieee")
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 1, BT, BC), X11, input_precision="ieee")
        S += tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 2, BT, BC), X21, input_precision="ieee")
        X31 = -tl.dot(X33 + 0.0, S, input_precision="ieee")
        # third: X30 = -X33 (A30 X00 + A31 X10 + A32 X20)
        S = tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 0, BT, BC), X00, input_precision="ieee")
        S += tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 1, BT, BC), X10, input_precision="ieee")
        S += tl.dot(_load_block(A_seq, t0, T_seq, ROWS, 3, 2, BT, BC), X20, input_precision="ieee")
        X30 = -tl.dot(X33 + 0.0, S, input_precision="ieee")
        # every block is written (upper ones as zeros) so NaN-poisoned outputs leave nothing unset
        _store_block(Ai_seq, X00, t0, T_seq, ROWS, 0, 0, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 0, 1, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 0, 2, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 0, 3, BT, BC)
        _store_block(Ai_seq, X10, t0, T_seq, ROWS, 1, 0, BT, BC)
        _store_block(Ai_seq, X11, t0, T_seq, ROWS, 1, 1, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 1, 2, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 1, 3, BT, BC)
        _store_block(Ai_seq, X20, t0, T_seq, ROWS, 2, 0, BT, BC)
        _store_block(Ai_seq, X21, t0, T_seq, ROWS, 2, 1, BT, BC)
        _store_block(Ai_seq, X22, t0, T_seq, ROWS, 2, 2, BT, BC)
        _store_block(Ai_seq, zero, t0, T_seq, ROWS, 2, 3, BT, BC)
        _store_block(Ai_seq, X30, t0, T_seq, ROWS, 3, 0, BT, BC)
        _store_block(Ai_seq, X31, t0, T_seq, ROWS, 3, 1, BT, BC)
        _store_block(Ai_seq, X32, t0, T_seq, ROWS, 3, 2, BT, BC)
        _store_block(Ai_seq, X33, t0, T_seq, ROWS, 3, 3, BT, BC)


def gdn_solve_tril(A, *, cu_seqlens=None, output_dtype=None, packing=None):
    """(I + A)^-1 per chunk: A [B,T,HV,64] strictly lower (fp32) -> Ai [B,T,HV,64] in ``output_dtype``
    (default fp32; the forward stores it in the input dtype, as the wy stage multiplies in that dtype)."""
    import torch

    from ascendopt.kernels.common import alloc, grid_size, launch

    B, T, HV, _ = A.shape
    packing = packing or pack(B, T, cu_seqlens, A.device)
    Ai = alloc(A.shape, output_dtype or torch.float32, A.device)
    tasks = packing.NC * HV
    launch(_gdn_solve_tril_kernel, (grid_size("cube", tasks),), A, Ai, packing.cu_seqlens, packing.chunk_indices,
           tasks, HV=HV, BT=CHUNK, BC=BC)
    return Ai


def _make_inputs(dims, dtype, device, seed):
    base = _kkt_inputs(dims, dtype, device, seed)
    out = {"A": ref.kkt_reference(base["k"], base["beta"], base["gc"], base.get("cu_seqlens"))}
    if "cu_seqlens" in base:
        out["cu_seqlens"] = base["cu_seqlens"]
    return out


def _run(inputs, config, mode):
    return {"Ai": gdn_solve_tril(inputs["A"], cu_seqlens=inputs.get("cu_seqlens"))}


def _reference(inputs, mode):
    return {"Ai": ref.solve_tril_reference(inputs["A"], inputs.get("cu_seqlens"))}


def _ub_model(dims, config, dtype):
    # 16 live [BC, BC] fp32 blocks: 4 diagonal inverses, 6 off-diagonal results kept until the stores,
    # the running sum, a loaded A block, the lhs copy, the dot result and the substitution row/mask.
    return [UBStage("solve_tril", {"BC": BC, "BC2": BC}, "fp32", 16.0, 0.85)]


def _cost(dims, dtype, mode):
    d = dims_of(dims)
    # per chunk: forward substitution 4 blocks x BC rows x BC^2, plus 16 BC^3 block products (x2 flops)
    flops = d.chunks * d.HV * (4 * BC ** 3 + 2 * 16 * BC ** 3)
    return Cost(bytes=d.B * d.T * d.HV * CHUNK * (4 + 4), flops=flops)


SPEC = stage_spec(
    name="gdn_solve_tril", description="gated delta rule fwd, stage solve: (I + A)^-1 of each 64x64 chunk",
    make_inputs=_make_inputs, run=_run, reference=_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_solve_tril_kernel",), tunables={},
)
