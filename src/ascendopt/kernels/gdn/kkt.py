"""Stage 1 of the gated delta rule forward: A = strict_lower(beta_i k_i.k_j exp(gc_i - gc_j)) per chunk.

One task = one (chunk, value head); tasks run on a 1D core grid over the cube cores.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_task, load_token_scalars
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    UBStage,
    chunk_stage_args,
    dims_of,
    element_bytes,
    make_base_inputs,
    pick_tile,
    stage_spec,
    tile_tunable,
    value_heads,
    with_varlen,
)
from ascendopt.kernels.spec import Cost


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_kkt_kernel(k, beta, gc, A, cu_seqlens, chunk_indices, T_total, num_tasks,
                    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                    G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr):
    o_i = tl.arange(0, BT)
    strict = o_i[:, None] > o_i[None, :]
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        _, i_hv, i_h, bos, T_seq, t0 = chunk_task(task, chunk_indices, cu_seqlens, H, HV, BT)
        b_beta = load_token_scalars(beta, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        k_seq = k + (bos * H + i_h) * K  # rebound per task (never ptr += across tasks)
        b_A = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(K // BK):
            p_k = tl.make_block_ptr(k_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
            b_k = tl.load(p_k, boundary_check=(0, 1), padding_option="zero")
            # lhs (beta-scaled copy) is used once; b_k is only the rhs, so no lhs clobber reuse.
            b_kb = (b_k.to(tl.float32) * b_beta[:, None]).to(DOT_DTYPE)
            b_A += tl.dot(b_kb, tl.trans(b_k.to(DOT_DTYPE)), input_precision="ieee")
        # mask before exp: above the diagonal gc_i - gc_j > 0 and could overflow.
        b_A = tl.where(strict, b_A * tl.exp(tl.where(strict, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
        p_A = tl.make_block_ptr(A + (bos * HV + i_hv) * BT, (T_seq, BT), (HV * BT, 1), (t0, 0), (BT, BT), (1, 0))
        tl.store(p_A, b_A.to(p_A.dtype.element_ty), boundary_check=(0, 1))


def _ub_stages(K: int, BK: int) -> list[UBStage]:
    # 5.0 live [BT, BK]-sized copies (fla's chunk_scaled_dot_kkt uses 5.0 at its margin 0.85, the
    # default here): the key slab,
    # its beta-scaled copy, the transposed rhs, and the fp32 [BT, BT] score tile with its exp mask
    # (BT = 64 <= BK, so counted as two more slabs).
    return [UBStage("kkt", {"BT": CHUNK, "BK": BK}, "fp32", 5.0)]


def _tiles(K: int, config: dict) -> int:
    return pick_tile(config["BK"], _ub_stages(K, 1)[0], "BK", K)


def gdn_kkt(k, beta, gc, *, cu_seqlens=None, config=None, packing=None):
    """Scaled ``k k'`` with beta and the gate: A [B,T,HV,64] fp32, strictly lower per chunk.

    k [B,T,H,K]; beta [B,T,HV]; gc [B,T,HV] chunk-local cumsum of the log decay (or ``HeadMajor``).
    """
    import torch

    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV = value_heads(beta)
    packing, beta_arg, gc_arg, contig = chunk_stage_args(k, beta, gc, cu_seqlens, packing, cfg)
    BK = _tiles(K, cfg)
    A = alloc((B, T, HV, CHUNK), torch.float32, k.device)
    tasks = packing.NC * HV
    launch(_gdn_kkt_kernel, (grid_size("cube", tasks),), k, beta_arg, gc_arg, A, packing.cu_seqlens,
           packing.chunk_indices, packing.T_total, tasks, H=H, HV=HV, K=K, BT=CHUNK, BK=BK,
           G_T_CONTIG=contig, DOT_DTYPE=dot_dtype(k.dtype))
    return A


def _make_inputs(dims, dtype, device, seed):
    base = make_base_inputs(dims, dtype, device, seed)
    return with_varlen({"k": base["k"], "beta": base["beta"],
                        "gc": ref.gate_cumsum_reference(base["g"], base.get("cu_seqlens"))}, base)


def _run(inputs, config, mode):
    return {"A": gdn_kkt(inputs["k"], inputs["beta"], inputs["gc"], cu_seqlens=inputs.get("cu_seqlens"),
                         config=config)}


def gdn_kkt_reference(inputs, mode):
    """Oracle of ``gdn_kkt``: ``A`` [B,T,HV,64] fp32 from k [B,T,H,K], beta and gc [B,T,HV]."""
    return {"A": ref.kkt_reference(inputs["k"], inputs["beta"], inputs["gc"], inputs.get("cu_seqlens"),
                                   ref.lowp_of(inputs["k"]))}


def _ub_model(dims, config, dtype):
    K = int(dims["K"])
    return _ub_stages(K, _tiles(K, SPEC.config(config)))


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens = d.B * d.T
    moved = tokens * d.H * d.K * e + tokens * d.HV * (e + 4) + tokens * d.HV * CHUNK * 4
    return Cost(bytes=moved, flops=2 * d.chunks * d.HV * CHUNK * CHUNK * d.K)


SPEC = stage_spec(
    name="gdn_kkt", description="gated delta rule fwd, stage kkt: beta-scaled, gated k k' per 64-token chunk",
    make_inputs=_make_inputs, run=_run, reference=gdn_kkt_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_kkt_kernel",),
    tunables={"BK": tile_tunable("BK", "key slab per dot"), "G_T_CONTIG": G_T_CONTIG},
)
