"""Stage 3 of the gated delta rule forward: the WY recompute w = Ai (beta exp(gc) k), u = Ai (beta v).

One task = one (chunk, value head) on a 1D core grid over the cube cores; value slabs of BV, key
slabs of BK. ``Ai`` is the left operand of every dot, so it is reloaded from GM for each one (seed,
tl.dot lhs clobber, "Strategy A GM reload of b_A between u and w loops"): one 64x64 tile, from L2.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_task, load_token_scalars
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
from ascendopt.kernels.spec import Cost


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_wy_kernel(k, v, beta, gc, Ai, w, u, cu_seqlens, chunk_indices, T_total, num_tasks,
                   H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                   BK: tl.constexpr, BV: tl.constexpr, G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr):
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        _, i_hv, i_h, bos, T_seq, t0 = chunk_task(task, chunk_indices, cu_seqlens, H, HV, BT)
        b_beta = load_token_scalars(beta, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        p_Ai = tl.make_block_ptr(Ai + (bos * HV + i_hv) * BT, (T_seq, BT), (HV * BT, 1), (t0, 0), (BT, BT),
                                 (1, 0))
        v_seq = v + (bos * HV + i_hv) * V  # value-side tensors share the [T, HV, V] layout
        u_seq = u + (bos * HV + i_hv) * V
        for i_v in range(V // BV):
            b_Ai = tl.load(p_Ai, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
            p_v = tl.make_block_ptr(v_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
            b_vb = tl.load(p_v, boundary_check=(0, 1), padding_option="zero").to(tl.float32) * b_beta[:, None]
            b_u = tl.dot(b_Ai, b_vb.to(DOT_DTYPE), input_precision="ieee")
            p_u = tl.make_block_ptr(u_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
            tl.store(p_u, b_u.to(p_u.dtype.element_ty), boundary_check=(0, 1))
        b_ks = b_beta * tl.exp(b_g)
        k_seq = k + (bos * H + i_h) * K
        w_seq = w + (bos * HV + i_hv) * K
        for i_k in range(K // BK):
            b_Ai = tl.load(p_Ai, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
            p_k = tl.make_block_ptr(k_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
            b_kb = tl.load(p_k, boundary_check=(0, 1), padding_option="zero").to(tl.float32) * b_ks[:, None]
            b_w = tl.dot(b_Ai, b_kb.to(DOT_DTYPE), input_precision="ieee")
            p_w = tl.make_block_ptr(w_seq, (T_seq, K), (HV * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
            tl.store(p_w, b_w.to(p_w.dtype.element_ty), boundary_check=(0, 1))


def _ub_stages(BK: int, BV: int) -> list[UBStage]:
    # Multipliers as fla's Triton-Ascend WY recompute (KDA wy_fast: U 3.5, W 4.5, margin 0.75) over
    # [BT, slab] tiles: the loaded slab, its scaled copy, the fp32 dot result, and the reloaded
    # 64x64 Ai (one more slab-sized tile when slab >= 64); w carries the extra exp(gc) row scale.
    return [UBStage("wy.u", {"BT": CHUNK, "BV": BV}, "fp32", 3.5, WY_MARGIN),
            UBStage("wy.w", {"BT": CHUNK, "BK": BK}, "fp32", 4.5, WY_MARGIN)]


def _tiles(K: int, V: int, config: dict) -> tuple[int, int]:
    u_stage, w_stage = _ub_stages(1, 1)
    return pick_tile(config["BK"], w_stage, "BK", K), pick_tile(config["BV"], u_stage, "BV", V)


def gdn_wy(k, v, beta, Ai, gc, *, cu_seqlens=None, config=None, packing=None):
    """w [B,T,HV,K] and u [B,T,HV,V] in k's dtype.

    k [B,T,H,K]; v [B,T,HV,V]; beta, gc [B,T,HV] (or ``HeadMajor``); Ai [B,T,HV,64] from the solve.
    """
    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    assert value_heads(beta) == HV
    packing, beta_arg, gc_arg, contig = chunk_stage_args(k, beta, gc, cu_seqlens, packing, cfg)
    BK, BV = _tiles(K, V, cfg)
    w = alloc((B, T, HV, K), k.dtype, k.device)
    u = alloc((B, T, HV, V), k.dtype, k.device)
    tasks = packing.NC * HV
    launch(_gdn_wy_kernel, (grid_size("cube", tasks),), k, v, beta_arg, gc_arg, Ai, w, u, packing.cu_seqlens,
           packing.chunk_indices, packing.T_total, tasks, H=H, HV=HV, K=K, V=V, BT=CHUNK, BK=BK, BV=BV,
           G_T_CONTIG=contig, DOT_DTYPE=dot_dtype(k.dtype))
    return w, u


def _make_inputs(dims, dtype, device, seed):
    base = make_base_inputs(dims, dtype, device, seed)
    gc, Ai = ref.solve_inputs_reference(base)
    return with_varlen({"k": base["k"], "v": base["v"], "beta": base["beta"], "Ai": Ai.to(base["k"].dtype),
                        "gc": gc}, base)


def _run(inputs, config, mode):
    w, u = gdn_wy(inputs["k"], inputs["v"], inputs["beta"], inputs["Ai"], inputs["gc"],
                  cu_seqlens=inputs.get("cu_seqlens"), config=config)
    return {"w": w, "u": u}


def gdn_wy_reference(inputs, mode):
    """Oracle of ``gdn_wy``: ``w`` [B,T,HV,K] and ``u`` [B,T,HV,V], fp32."""
    w, u = ref.wy_reference(inputs["k"], inputs["v"], inputs["beta"], inputs["Ai"], inputs["gc"],
                            inputs.get("cu_seqlens"), ref.lowp_of(inputs["k"]))
    return {"w": w, "u": u}


def _ub_model(dims, config, dtype):
    BK, BV = _tiles(int(dims["K"]), int(dims["V"]), SPEC.config(config))
    return _ub_stages(BK, BV)


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens = d.B * d.T
    moved = tokens * (d.H * d.K + 2 * d.HV * d.V + d.HV * d.K) * e + tokens * d.HV * (CHUNK * e + e + 4)
    return Cost(bytes=moved, flops=2 * d.chunks * d.HV * CHUNK * CHUNK * (d.K + d.V))


SPEC = stage_spec(
    name="gdn_wy", description="gated delta rule fwd, stage wy: w = Ai beta exp(gc) k, u = Ai beta v",
    make_inputs=_make_inputs, run=_run, reference=gdn_wy_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_wy_kernel",),
    tunables={"BK": tile_tunable("BK", "key slab of w"), "BV": tile_tunable("BV", "value slab of u"),
              "G_T_CONTIG": G_T_CONTIG},
)
