"""Stages 1 + 2 + 3 fused: w = Ai (beta exp(gc) k) and u = Ai (beta v) with Ai = (I + A)^-1 never stored.

Ai is only ever an operand of the WY recompute, so the fused kernel keeps it in UB/registers after
the dense solve (``kkt_solve.dense_inverse``) and goes straight on to w and u: the Ai write and the
wy stage's Ai reads, its k reread from HBM and one launch are gone (B4_T4096_H16_K128_V128 bf16:
~96 MB less traffic than kkt_solve + wy). One task = one (chunk, value head) on the cube core grid.

Given q (the forward's default, tunable hoist_scores) it also makes the output's gated causal scores
q k' per chunk for ``gdn_state_output``, once per (chunk, value head) instead of once per value slab
in the serial state kernel (sm_90: that kernel drops from 255 registers with spills to 186 without).

tl.dot left operands: each dot takes its own ``+ 0.0`` copy of Ai (cast to the dot dtype), so Ai
itself is never a left operand; the scaled k / v slabs are right operands.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_task, load_token_scalars
from ascendopt.kernels.gdn.kkt_solve import SPEC as KKT_SOLVE_SPEC
from ascendopt.kernels.gdn.kkt_solve import _fresh, _ub_stages, dense_inverse, solve_products
from ascendopt.kernels.gdn.kkt_solve import _tiles as kkt_solve_tiles
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    WY_MARGIN,
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
from ascendopt.kernels.gdn.wy import SPEC as WY_SPEC
from ascendopt.kernels.spec import Cost, Tunable


@triton.jit
def _apply_inverse(b_Ai, src, src_stride, dst, dst_stride, row_scale, t0, T_seq, COLS: tl.constexpr,
                   BT: tl.constexpr, BW: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """dst[t0:t0+BT, :COLS] = Ai (row_scale * src[t0:t0+BT, :COLS]), BW columns per dot; the rows of both
    are ``*_stride`` elements apart. Each dot takes its own copy of Ai (never a left operand itself)."""
    for i_c in range(COLS // BW):
        p_src = tl.make_block_ptr(src, (T_seq, COLS), (src_stride, 1), (t0, i_c * BW), (BT, BW), (1, 0))
        b_src = tl.load(p_src, boundary_check=(0, 1), padding_option="zero").to(tl.float32) * row_scale[:, None]
        b_dst = tl.dot(_fresh(b_Ai, DOT_DTYPE), b_src.to(DOT_DTYPE), input_precision="ieee")
        p_dst = tl.make_block_ptr(dst, (T_seq, COLS), (dst_stride, 1), (t0, i_c * BW), (BT, BW), (1, 0))
        tl.store(p_dst, b_dst.to(p_dst.dtype.element_ty), boundary_check=(0, 1))


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_kkt_solve_wy_kernel(k, v, beta, gc, w, u, q, scores, cu_seqlens, chunk_indices, T_total, num_tasks,
                             H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                             BT: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr, BW: tl.constexpr,
                             G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr, SOLVE_DTYPE: tl.constexpr,
                             SOLVE_PRECISION: tl.constexpr, MAKE_SCORES: tl.constexpr):
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        _, i_hv, i_h, bos, T_seq, t0 = chunk_task(task, chunk_indices, cu_seqlens, H, HV, BT)
        b_beta = load_token_scalars(beta, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        # pointers rebound from the base tensors for every task
        k_seq = k + (bos * H + i_h) * K
        v_seq = v + (bos * HV + i_hv) * V  # value-side tensors share the [T, HV, .] layout
        u_seq = u + (bos * HV + i_hv) * V
        w_seq = w + (bos * HV + i_hv) * K
        b_Ai = dense_inverse(k_seq, b_beta, b_g, t0, T_seq, H, K, BT, BC, BK, DOT_DTYPE, SOLVE_DTYPE,
                             SOLVE_PRECISION)
        # u = Ai (beta v), w = Ai (beta exp(gc) k)
        _apply_inverse(b_Ai, v_seq, HV * V, u_seq, HV * V, b_beta, t0, T_seq, V, BT, BW, DOT_DTYPE)
        _apply_inverse(b_Ai, k_seq, H * K, w_seq, HV * K, b_beta * tl.exp(b_g), t0, T_seq, K, BT, BW, DOT_DTYPE)
        if MAKE_SCORES:
            # the output's intra-chunk scores, causal(q k' exp(gc_i - gc_j)), made here once per
            # (chunk, value head) instead of once per value slab inside the serial state kernel
            q_seq = q + (bos * H + i_h) * K
            b_S = tl.zeros([BT, BT], dtype=tl.float32)
            for i_k in range(K // BK):
                p_q = tl.make_block_ptr(q_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
                p_k = tl.make_block_ptr(k_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
                b_S += tl.dot(tl.load(p_q, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE),
                              tl.trans(tl.load(p_k, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)),
                              input_precision="ieee")
            o_t = tl.arange(0, BT)
            causal = o_t[:, None] >= o_t[None, :]
            # mask before exp: above the diagonal gc_i - gc_j > 0 and could overflow
            b_S = tl.where(causal, b_S * tl.exp(tl.where(causal, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
            p_S = tl.make_block_ptr(scores + (bos * HV + i_hv) * BT, (T_seq, BT), (HV * BT, 1), (t0, 0), (BT, BT),
                                    (1, 0))
            tl.store(p_S, b_S.to(p_S.dtype.element_ty), boundary_check=(0, 1))


def _wy_stage(BW: int) -> UBStage:
    # wy's w stage (4.5 [BT, slab] copies at margin 0.75: the slab, its scaled copy, the fp32 result,
    # the row scale), with the [BT, BT] Ai copy counted in the dense stage's six tiles; the scores
    # (one [BT, BT] fp32 tile and two key/query slabs) come after Ai is dead, inside the same budget
    return UBStage("kkt_solve_wy.wy", {"BT": CHUNK, "BW": BW}, "fp32", 4.5, WY_MARGIN)


def _tiles(K: int, V: int, cfg: dict) -> tuple[int, int]:
    BK = kkt_solve_tiles(K, {"BK": cfg["BK"], "FORM": cfg["FORM"]})
    return BK, pick_tile(cfg["BW"], _wy_stage(1), "BW", min(K, V))


def gdn_kkt_solve_wy(k, v, beta, gc, *, q=None, cu_seqlens=None, config=None, packing=None):
    """(w [B,T,HV,K], u [B,T,HV,V], scores) in k's dtype, straight from k, v, beta and the gate cumsum.

    k [B,T,H,K]; v [B,T,HV,V]; beta, gc [B,T,HV] (or ``HeadMajor``). With q [B,T,H,K], scores
    [B,T,HV,64] are the output's gated causal q k' per chunk (for ``gdn_state_output``); else None.
    """
    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    assert value_heads(beta) == HV
    packing, beta_arg, gc_arg, contig = chunk_stage_args(k, beta, gc, cu_seqlens, packing, cfg)
    BK, BW = _tiles(K, V, cfg)
    w = alloc((B, T, HV, K), k.dtype, k.device)
    u = alloc((B, T, HV, V), k.dtype, k.device)
    scores = None if q is None else alloc((B, T, HV, CHUNK), q.dtype, k.device)
    tasks = packing.NC * HV
    launch(_gdn_kkt_solve_wy_kernel, (grid_size("cube", tasks),), k, v, beta_arg, gc_arg, w, u, q, scores,
           packing.cu_seqlens, packing.chunk_indices, packing.T_total, tasks, H=H, HV=HV, K=K, V=V, BT=CHUNK, BK=BK,
           BW=BW, G_T_CONTIG=contig, DOT_DTYPE=dot_dtype(k.dtype), MAKE_SCORES=q is not None,
           **solve_products(int(cfg["FORM"]), k.dtype))
    return w, u, scores


def _make_inputs(dims, dtype, device, seed):
    base = make_base_inputs(dims, dtype, device, seed)
    return with_varlen({"q": base["q"], "k": base["k"], "v": base["v"], "beta": base["beta"],
                        "gc": ref.gate_cumsum_reference(base["g"], base.get("cu_seqlens"))}, base)


def _run(inputs, config, mode):
    # with the output's scores, as the forward runs it (hoist_scores)
    w, u, scores = gdn_kkt_solve_wy(inputs["k"], inputs["v"], inputs["beta"], inputs["gc"], q=inputs["q"],
                                    cu_seqlens=inputs.get("cu_seqlens"), config=config)
    return {"w": w, "u": u, "scores": scores}


def gdn_kkt_solve_wy_reference(inputs, mode):
    """Oracle of ``gdn_kkt_solve_wy``: ``w`` [B,T,HV,K], ``u`` [B,T,HV,V] and the output's
    ``scores`` [B,T,HV,64], fp32."""
    cu, lowp = inputs.get("cu_seqlens"), ref.lowp_of(inputs["k"])
    A = ref.kkt_reference(inputs["k"], inputs["beta"], inputs["gc"], cu, lowp)
    Ai = ref.solve_tril_reference(A, cu).to(inputs["k"].dtype)  # the separate stages hand Ai over in k's dtype
    w, u = ref.wy_reference(inputs["k"], inputs["v"], inputs["beta"], Ai, inputs["gc"], cu, lowp)
    return {"w": w, "u": u, "scores": ref.scores_reference(inputs["q"], inputs["k"], inputs["gc"], cu, lowp)}


def _ub_model(dims, config, dtype):
    cfg = SPEC.config(config)
    BK, BW = _tiles(int(dims["K"]), int(dims["V"]), cfg)
    return [*_ub_stages(BK, int(cfg["FORM"])), _wy_stage(BW)]


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens = d.B * d.T
    # k, q, v read; w, u and the [T, HV, 64] scores written; beta, gc read
    moved = tokens * (2 * d.H * d.K + d.HV * d.V + d.HV * (d.K + d.V + CHUNK)) * e + tokens * d.HV * (e + 4)
    flops = (KKT_SOLVE_SPEC.cost(dims, dtype, mode).flops + WY_SPEC.cost(dims, dtype, mode).flops
             + 2 * d.chunks * d.HV * CHUNK * CHUNK * d.K)
    return Cost(bytes=moved, flops=flops)


SPEC = stage_spec(
    name="gdn_kkt_solve_wy",
    description="gated delta rule fwd, stages kkt + solve + wy fused: w, u (and the output's scores) without "
                "storing A or Ai",
    make_inputs=_make_inputs, run=_run, reference=gdn_kkt_solve_wy_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_kkt_solve_wy_kernel",),
    tunables={"BK": tile_tunable("BK", "key slab of the kkt dot"),
              "BW": tile_tunable("BW", "column slab of the w and u dots"),
              "FORM": Tunable("FORM", 1, (1, 2, 3), "solve dots: 1 fp32 (tf32 on CUDA for bf16 inputs); 2 in the "
                              "input dtype; 3 as 1 over 8-row diagonal blocks (see gdn_kkt_solve)"),
              "G_T_CONTIG": G_T_CONTIG},
)
