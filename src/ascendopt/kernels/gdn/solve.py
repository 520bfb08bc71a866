"""Stage 2 of the gated delta rule forward: Ai = (I + A)^-1 per 64-token chunk (A strictly lower).

Block algorithm over 16x16 blocks (BC): the four diagonal blocks are inverted together by forward
substitution (one row per step on a [4, 16, 16] tile), then the off-diagonal blocks follow from
``X_ij = -X_ii (sum_{j<=m<i} A_im X_mj)``.

All products are fp32 broadcast-multiply-reductions (``_matmul``), not ``tl.dot``: at 16x16x16 they
are vector work either way, they keep full fp32 precision (what ``input_precision="ieee"`` would
buy), and no left operand can be clobbered (seed, tl.dot lhs clobber). AOT-compiled for sm_90 the
16 fp32 ``tl.dot``s needed 255 registers per thread, these 147 (more programs in flight for a
latency-bound kernel). So the kernel is vector-bound and runs on a 1D grid over the vector cores.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_of
from ascendopt.kernels.gdn.kkt import _make_inputs as _kkt_inputs
from ascendopt.kernels.gdn.layout import CHUNK, pack
from ascendopt.kernels.gdn.workload import UBStage, dims_of, stage_spec, with_varlen
from ascendopt.kernels.spec import Cost

BC = 16  # diagonal block; 4 blocks per chunk


@triton.jit
def _load_block(A_seq, t0, T_seq, ROWS: tl.constexpr, i: tl.constexpr, j: tl.constexpr, BT: tl.constexpr,
                BC: tl.constexpr):
    """Block (i, j) of the chunk's A as fp32 [BC, BC], zero past the sequence end."""
    p = tl.make_block_ptr(A_seq, (T_seq, BT), (ROWS, 1), (t0 + i * BC, j * BC), (BC, BC), (1, 0))
    return tl.load(p, boundary_check=(0, 1), padding_option="zero").to(tl.float32)


@triton.jit
def _load_diagonals(A_seq, t0, T_seq, ROWS: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """The strictly lower part of the chunk's BT // BC diagonal blocks as one [NB, BC, BC] tile."""
    b = tl.arange(0, BT // BC)[:, None, None]
    r = tl.arange(0, BC)[None, :, None]
    c = tl.arange(0, BC)[None, None, :]
    rows = t0 + b * BC + r
    return tl.load(A_seq + tl.cast(rows, tl.int64) * ROWS + b * BC + c, mask=(rows < T_seq) & (r > c), other=0.0)


@triton.jit
def invert_diagonals(N, BC: tl.constexpr):
    """(I + N_i)^-1 of every strictly lower [BC, BC] block of N [NB, BC, BC], as one tile.

    Forward substitution, Y = X - I: Y_r = -N_r - sum_{m<r} N_rm Y_m, for all blocks at once, so
    each step costs one row extraction and one reduction for the whole chunk instead of one per
    block (the steps are a serial chain; on CUDA each reduction across warps is a barrier)."""
    r = tl.arange(0, BC)[None, :, None]
    c = tl.arange(0, BC)[None, None, :]
    Y = -N  # rows 0 and 1 are already final
    for step in range(2, BC):
        b_a = -tl.sum(tl.where(r == step, N, 0.0), 1)  # [NB, BC]: row `step` of every block, from UB
        b_a += tl.sum(b_a[:, :, None] * Y, 1)
        Y = tl.where(r == step, b_a[:, None, :], Y)
    return Y + (r == c).to(tl.float32)


@triton.jit
def _block_of(X, i: tl.constexpr, NB: tl.constexpr):
    """Block ``i`` [BC, BC] of a [NB, BC, BC] tile."""
    return tl.sum(tl.where(tl.arange(0, NB)[:, None, None] == i, X, 0.0), 0)


@triton.jit
def _matmul(a, b):
    """[M, R] x [R, N] in fp32 as a broadcast multiply and a reduction."""
    return tl.sum(a[:, :, None] * b[None, :, :], 1)


@triton.jit
def _store_block(Ai_seq, b_X, t0, T_seq, ROWS: tl.constexpr, i: tl.constexpr, j: tl.constexpr,
                 BT: tl.constexpr, BC: tl.constexpr):
    p = tl.make_block_ptr(Ai_seq, (T_seq, BT), (ROWS, 1), (t0 + i * BC, j * BC), (BC, BC), (1, 0))
    tl.store(p, b_X.to(p.dtype.element_ty), boundary_check=(0, 1))


@triton.jit
def merge_and_store(Ai_seq, X, A10, A20, A21, A30, A31, A32, t0, T_seq, ROWS: tl.constexpr, BT: tl.constexpr,
                    BC: tl.constexpr):
    """Off-diagonal blocks X_ij = -X_ii (sum_{j<=m<i} A_im X_mj) from the diagonal inverses X [4, BC, BC]
    and the strictly lower blocks A_ij of the chunk; all 16 blocks of Ai stored (upper ones as zeros,
    so NaN-poisoned outputs leave nothing unset)."""
    X00, X11, X22, X33 = _block_of(X, 0, 4), _block_of(X, 1, 4), _block_of(X, 2, 4), _block_of(X, 3, 4)
    # first sub-diagonal: X_{i+1,i} = -X_{i+1,i+1} A_{i+1,i} X_ii
    X10 = -_matmul(X11, _matmul(A10, X00))
    X21 = -_matmul(X22, _matmul(A21, X11))
    X32 = -_matmul(X33, _matmul(A32, X22))
    # second: X_{i+2,i} = -X_{i+2,i+2} (A_{i+2,i} X_ii + A_{i+2,i+1} X_{i+1,i})
    X20 = -_matmul(X22, _matmul(A20, X00) + _matmul(A21, X10))
    X31 = -_matmul(X33, _matmul(A31, X11) + _matmul(A32, X21))
    # third: X30 = -X33 (A30 X00 + A31 X10 + A32 X20)
    X30 = -_matmul(X33, _matmul(A30, X00) + _matmul(A31, X10) + _matmul(A32, X20))
    zero = tl.zeros([BC, BC], dtype=tl.float32)
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


@triton.jit(do_not_specialize=["num_tasks"])
def _gdn_solve_tril_kernel(A, Ai, cu_seqlens, chunk_indices, num_tasks, HV: tl.constexpr, BT: tl.constexpr,
                           BC: tl.constexpr):
    tl.static_assert(BT == 4 * BC, "the block solve is written for 4 diagonal blocks")
    ROWS: tl.constexpr = HV * BT
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_c, i_hv = task // HV, task % HV
        i_t, bos, T_seq = chunk_of(i_c, chunk_indices, cu_seqlens)
        t0 = i_t * BT
        A_seq = A + (bos * HV + i_hv) * BT  # rebound per task
        Ai_seq = Ai + (bos * HV + i_hv) * BT
        X = invert_diagonals(_load_diagonals(A_seq, t0, T_seq, ROWS, BT, BC), BC)
        A10 = _load_block(A_seq, t0, T_seq, ROWS, 1, 0, BT, BC)
        A20 = _load_block(A_seq, t0, T_seq, ROWS, 2, 0, BT, BC)
        A21 = _load_block(A_seq, t0, T_seq, ROWS, 2, 1, BT, BC)
        A30 = _load_block(A_seq, t0, T_seq, ROWS, 3, 0, BT, BC)
        A31 = _load_block(A_seq, t0, T_seq, ROWS, 3, 1, BT, BC)
        A32 = _load_block(A_seq, t0, T_seq, ROWS, 3, 2, BT, BC)
        merge_and_store(Ai_seq, X, A10, A20, A21, A30, A31, A32, t0, T_seq, ROWS, BT, BC)


def gdn_solve_tril(A, *, cu_seqlens=None, output_dtype=None, packing=None):
    """(I + A)^-1 per chunk: A [B,T,HV,64] strictly lower (fp32) -> Ai [B,T,HV,64] in ``output_dtype``
    (default fp32; the forward stores it in the input dtype, as the wy stage multiplies in that dtype)."""
    import torch

    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    B, T, HV, _ = A.shape
    packing = packing or pack(B, T, cu_seqlens, A.device)
    Ai = alloc(A.shape, output_dtype or torch.float32, A.device)
    tasks = packing.NC * HV
    launch(_gdn_solve_tril_kernel, (grid_size("vector", tasks),), A, Ai, packing.cu_seqlens, packing.chunk_indices,
           tasks, HV=HV, BT=CHUNK, BC=BC)
    return Ai


def _make_inputs(dims, dtype, device, seed):
    base = _kkt_inputs(dims, dtype, device, seed)
    return with_varlen({"A": ref.kkt_reference(base["k"], base["beta"], base["gc"], base.get("cu_seqlens"))}, base)


def _run(inputs, config, mode):
    return {"Ai": gdn_solve_tril(inputs["A"], cu_seqlens=inputs.get("cu_seqlens"))}


def gdn_solve_tril_reference(inputs, mode):
    """Oracle of ``gdn_solve_tril``: ``Ai`` [B,T,HV,64] fp32, per chunk (I + A)^-1."""
    return {"Ai": ref.solve_tril_reference(inputs["A"], inputs.get("cu_seqlens"))}


def _ub_model(dims, config, dtype):
    # [BC, BC, BC] fp32 product temporaries: the broadcast product and its reduction (2), the diagonal
    # [4, BC, BC] tile with its row mask and the A blocks (1 more); the 10 result blocks are 10/16 of one.
    return [UBStage("solve_tril", {"BC": BC, "BC2": BC, "BC3": BC}, "fp32", 4.0)]  # the default margin


def _cost(dims, dtype, mode):
    d = dims_of(dims)
    # per chunk: forward substitution 4 blocks x BC rows x BC^2, plus 16 BC^3 block products (x2 flops)
    flops = d.chunks * d.HV * (4 * BC ** 3 + 2 * 16 * BC ** 3)
    return Cost(bytes=d.B * d.T * d.HV * CHUNK * (4 + 4), flops=flops)


SPEC = stage_spec(
    name="gdn_solve_tril", description="gated delta rule fwd, stage solve: (I + A)^-1 of each 64x64 chunk",
    make_inputs=_make_inputs, run=_run, reference=gdn_solve_tril_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_solve_tril_kernel",), tunables={}, bound="vector",
)
