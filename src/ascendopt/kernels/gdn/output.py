"""Stage 5 of the gated delta rule forward: o = scale (exp(gc) q h_c + causal(q k' exp(gc_i - gc_j)) v').

Inter-chunk (state) and intra-chunk (attention-like) parts fused in one kernel with one store (seed,
"Producer -> consumer on the same output"). One task = one (chunk, value head, value slab) on a 1D
core grid over the cube cores. The query slab is the left operand of two dots, so a ``+ 0.0`` copy is
taken before the first one (seed, tl.dot lhs clobber, "+ 0.0 for tight multi-dot sequences").
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.errors import UsageError
from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_task, load_token_scalars
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype, pack
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    STATE_OUTPUT_MARGIN,
    UBStage,
    dims_of,
    element_bytes,
    make_base_inputs,
    pick_tile,
    stage_spec,
    tile_tunable,
    token_scalar_arg,
    value_heads,
    with_varlen,
)
from ascendopt.kernels.spec import Cost


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_output_kernel(q, k, v_new, h, gc, o, cu_seqlens, chunk_indices, scale, T_total, num_tasks,
                       H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                       BK: tl.constexpr, BV: tl.constexpr, G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr):
    NV: tl.constexpr = V // BV
    o_i = tl.arange(0, BT)
    causal = o_i[:, None] >= o_i[None, :]
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_c, i_hv, i_h, bos, T_seq, t0 = chunk_task(task // NV, chunk_indices, cu_seqlens, H, HV, BT)
        i_v = task % NV
        q_seq = q + (bos * H + i_h) * K  # rebound per task
        k_seq = k + (bos * H + i_h) * K
        h_chunk = h + (tl.cast(i_c, tl.int64) * HV + i_hv) * K * V  # chunks are numbered like i_c
        b_o = tl.zeros([BT, BV], dtype=tl.float32)
        b_A = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(K // BK):
            p_q = tl.make_block_ptr(q_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
            b_q = tl.load(p_q, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
            b_q_copy = b_q + 0.0  # before the first dot that takes b_q as lhs
            p_kt = tl.make_block_ptr(k_seq, (K, T_seq), (1, H * K), (i_k * BK, t0), (BK, BT), (0, 1))
            b_kt = tl.load(p_kt, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
            p_h = tl.make_block_ptr(h_chunk, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
            b_h = tl.load(p_h).to(DOT_DTYPE)
            b_o += tl.dot(b_q, b_h, input_precision="ieee")
            b_A += tl.dot(b_q_copy, b_kt, input_precision="ieee")
        b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        b_o = b_o * tl.exp(b_g)[:, None]
        # mask before exp: above the diagonal gc_i - gc_j > 0 and could overflow
        b_A = tl.where(causal, b_A * tl.exp(tl.where(causal, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
        vn_seq = v_new + (bos * HV + i_hv) * V
        p_v = tl.make_block_ptr(vn_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
        b_v = tl.load(p_v, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
        b_o = (b_o + tl.dot(b_A.to(DOT_DTYPE), b_v, input_precision="ieee")) * scale
        p_o = tl.make_block_ptr(o + (bos * HV + i_hv) * V, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV),
                                (1, 0))
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))


def _ub_stages(BK: int, BV: int) -> list[UBStage]:
    # 6.0 live [BT, slab] copies as fla's Triton-Ascend chunk_o (O 6.0, margin 0.80): fp32 output
    # accumulator, v' tile, state slab, and the [BT, BT] score tile with its exp mask (= 64-wide slabs);
    # the key-slab side holds q, its lhs copy, k' and the state slab.
    return [UBStage("output.o", {"BT": CHUNK, "BV": BV}, "fp32", 6.0, STATE_OUTPUT_MARGIN),
            UBStage("output.qk", {"BT": CHUNK, "BK": BK}, "fp32", 6.0, STATE_OUTPUT_MARGIN)]


def _tiles(K: int, V: int, config: dict) -> tuple[int, int]:
    o_stage, qk_stage = _ub_stages(1, 1)
    return pick_tile(config["BK"], qk_stage, "BK", K), pick_tile(config["BV"], o_stage, "BV", V)


def gdn_output(q, k, v_new, h, gc, scale, *, cu_seqlens=None, config=None, packing=None):
    """o [B,T,HV,V] in v_new's dtype.

    q, k [B,T,H,K]; v_new [B,T,HV,V]; h [NC,HV,K,V] states entering each chunk; gc [B,T,HV] (or
    ``HeadMajor``); ``scale`` multiplies q (usually K**-0.5).
    """
    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = q.shape
    HV, V = v_new.shape[2], v_new.shape[3]
    packing = packing or pack(B, T, cu_seqlens, q.device)
    if value_heads(gc) != HV or tuple(h.shape) != (packing.NC, HV, K, V):
        raise UsageError(f"gdn_output: h {tuple(h.shape)}: expected [NC={packing.NC}, HV={HV}, K={K}, V={V}]")
    BK, BV = _tiles(K, V, cfg)
    gc_arg, contig = token_scalar_arg(gc, bool(cfg["G_T_CONTIG"]))
    o = alloc(v_new.shape, v_new.dtype, v_new.device)
    tasks = packing.NC * HV * (V // BV)
    launch(_gdn_output_kernel, (grid_size("cube", tasks),), q, k, v_new, h, gc_arg, o, packing.cu_seqlens,
           packing.chunk_indices, float(scale), packing.T_total, tasks, H=H, HV=HV, K=K, V=V, BT=CHUNK, BK=BK,
           BV=BV, G_T_CONTIG=contig, DOT_DTYPE=dot_dtype(q.dtype))
    return o


def _make_inputs(dims, dtype, device, seed):
    base = make_base_inputs(dims, dtype, device, seed)
    cu = base.get("cu_seqlens")
    gc, w, u = ref.wy_inputs_reference(base)
    h, v_new, _ = ref.state_reference(base["k"], w, u, gc, base["initial_state"], cu)
    dt = base["k"].dtype
    return with_varlen({"q": base["q"], "k": base["k"], "v_new": v_new.to(dt), "h": h.to(dt), "gc": gc}, base)


def _scale(inputs) -> float:
    return inputs["q"].shape[-1] ** -0.5


def _run(inputs, config, mode):
    return {"o": gdn_output(inputs["q"], inputs["k"], inputs["v_new"], inputs["h"], inputs["gc"], _scale(inputs),
                            cu_seqlens=inputs.get("cu_seqlens"), config=config)}


def gdn_output_reference(inputs, mode):
    """Oracle of ``gdn_output``: ``o`` [B,T,HV,V] fp32."""
    return {"o": ref.output_reference(inputs["q"], inputs["k"], inputs["v_new"], inputs["h"], inputs["gc"],
                                      _scale(inputs), inputs.get("cu_seqlens"), ref.lowp_of(inputs["q"]))}


def _ub_model(dims, config, dtype):
    BK, BV = _tiles(int(dims["K"]), int(dims["V"]), SPEC.config(config))
    return _ub_stages(BK, BV)


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens = d.B * d.T
    moved = tokens * (2 * d.H * d.K + 2 * d.HV * d.V) * e + tokens * d.HV * 4 + d.chunks * d.HV * d.K * d.V * e
    return Cost(bytes=moved, flops=2 * tokens * d.HV * (d.K * d.V + CHUNK * d.K + CHUNK * d.V))


SPEC = stage_spec(
    name="gdn_output", description="gated delta rule fwd, stage output: inter-chunk q h plus intra-chunk causal part",
    make_inputs=_make_inputs, run=_run, reference=gdn_output_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_output_kernel",),
    tunables={"BK": tile_tunable("BK", "key slab per dot"), "BV": tile_tunable("BV", "value slab per task"),
              "G_T_CONTIG": G_T_CONTIG},
)
