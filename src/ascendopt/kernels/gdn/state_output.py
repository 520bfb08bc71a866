"""Stages 4 + 5 fused: the chunk-state recurrence emitting the output directly, h never stored.

Per (sequence, value head, value slab), sequentially over the chunks, with the state slab in UB:

    v' = u - w h_c
    o  = scale (exp(gc) q h_c + causal(q k' exp(gc_i - gc_j)) v')
    h_{c+1} = exp(gc_last) h_c + (exp(gc_last - gc) k)' v'

The separate stages write h ([NC, HV, K, V], as large as q, k and v together at K = V = 128) and
v' and read both back; fused, that traffic is gone at the price of a longer serial chunk step, and
of the q / k' / w tiles (full K) being live next to the state (seed: fuse only if the live set fits;
the UB model below decides, and the forward falls back to the separate stages when it does not).
tl.dot left operands: w, k' and the score tile are each the left operand of exactly one dot and not
read after it; q is the left operand of two dots, so it is loaded once for each (k' is loaded twice
as well, for register pressure: it is the scores' right operand and the update's left one).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.device import ub
from ascendopt.errors import UsageError
from ascendopt.kernels._lib.common import dtype_name, on_cuda, ub_context
from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import (
    load_last_token_scalar,
    load_state,
    load_token_scalars,
    sequence_task,
    store_state,
)
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype, pack
from ascendopt.kernels.gdn.state import _make_inputs as _state_inputs
from ascendopt.kernels.gdn.workload import (
    CUDA_SERIAL_MAX_K,
    CUDA_TILE_ELEMENTS,
    G_T_CONTIG,
    STATE_OUTPUT_MARGIN,
    UBStage,
    cuda_serial_tile,
    dims_of,
    element_bytes,
    make_base_inputs,
    stage_spec,
    tile_tunable,
    token_scalar_arg,
)
from ascendopt.kernels.spec import Cost, Tunable


@triton.jit
def _chunk_step(b_h, q_seq, k_seq, w_seq, u_seq, o_seq, s_seq, gc, i_hv, bos, t0, T_seq, T_total, i_v, scale,
                causal, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                BV: tl.constexpr, G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr, HAS_SCORES: tl.constexpr):
    """One chunk: store o of chunk ``t0`` and return the state after it."""
    o_t = tl.arange(0, BT)
    valid = t0 + o_t < T_seq
    b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
    g_last = load_last_token_scalar(gc, i_hv, bos, tl.minimum(t0 + BT, T_seq) - 1, T_total, HV, G_T_CONTIG)
    b_hd = b_h.to(DOT_DTYPE)  # right operand of two dots, never a left one
    # v' = u - w h first: w dies here (short live ranges: fewer registers, no spills on CUDA)
    p_w = tl.make_block_ptr(w_seq, (T_seq, K), (HV * K, 1), (t0, 0), (BT, K), (1, 0))
    b_w = tl.load(p_w, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
    p_u = tl.make_block_ptr(u_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
    b_v = tl.load(p_u, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
    b_v -= tl.dot(b_w, b_hd, input_precision="ieee")
    # q is the left operand of two dots: loaded once for each (a reload, not a copy, so only one
    # [BT, K] q tile is ever live)
    p_q = tl.make_block_ptr(q_seq, (T_seq, K), (H * K, 1), (t0, 0), (BT, K), (1, 0))
    b_o = tl.dot(tl.load(p_q, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE), b_hd,
                 input_precision="ieee") * tl.exp(b_g)[:, None]
    # k' is loaded twice too, as the scores' right operand and (after o) as the state update's left
    # operand, so no [K, BT] tile stays live across the output's dots
    p_kt = tl.make_block_ptr(k_seq, (K, T_seq), (1, H * K), (0, t0), (K, BT), (0, 1))
    if HAS_SCORES:
        # the gated causal scores were made by the parallel kkt + solve + wy kernel (``scores``)
        p_s = tl.make_block_ptr(s_seq, (T_seq, BT), (HV * BT, 1), (t0, 0), (BT, BT), (1, 0))
        b_A = tl.load(p_s, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
    else:
        b_A = tl.dot(tl.load(p_q, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE),
                     tl.load(p_kt, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE), input_precision="ieee")
        # mask before exp: above the diagonal gc_i - gc_j > 0 and could overflow
        b_A = tl.where(causal, b_A * tl.exp(tl.where(causal, b_g[:, None] - b_g[None, :], 0.0)), 0.0).to(DOT_DTYPE)
    b_o += tl.dot(b_A, b_v.to(DOT_DTYPE), input_precision="ieee")
    p_o = tl.make_block_ptr(o_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
    tl.store(p_o, (b_o * scale).to(p_o.dtype.element_ty), boundary_check=(0, 1))
    decay = tl.where(valid, tl.exp(tl.where(valid, g_last - b_g, 0.0)), 0.0)
    b_vs = (b_v * decay[:, None]).to(DOT_DTYPE)
    b_kt = tl.load(p_kt, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
    return b_h * tl.exp(g_last) + tl.dot(b_kt, b_vs, input_precision="ieee")


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_state_output_kernel(q, k, w, u, gc, o, h0, ht, scores, cu_seqlens, scale, T_total, num_tasks,
                             H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                             BT: tl.constexpr, BV: tl.constexpr, G_T_CONTIG: tl.constexpr,
                             USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr,
                             DOT_DTYPE: tl.constexpr, PIPELINE: tl.constexpr, HAS_SCORES: tl.constexpr):
    NV: tl.constexpr = V // BV
    o_t = tl.arange(0, BT)
    causal = o_t[:, None] >= o_t[None, :]
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_n, i_hv, i_h, i_v, bos, T_seq = sequence_task(task, cu_seqlens, H, HV, NV)
        state_index = tl.cast(i_n, tl.int64) * HV + i_hv
        b_h = load_state(h0, state_index, i_v, K, V, BV, USE_INITIAL_STATE)
        # pointers rebound from the base tensors for every task (never ptr += across tasks)
        q_seq = q + (bos * H + i_h) * K
        k_seq = k + (bos * H + i_h) * K
        w_seq = w + (bos * HV + i_hv) * K
        u_seq = u + (bos * HV + i_hv) * V
        o_seq = o + (bos * HV + i_hv) * V
        s_seq = scores
        if HAS_SCORES:
            s_seq = scores + (bos * HV + i_hv) * BT
        if PIPELINE:
            # a counted loop: on CUDA the compiler software-pipelines its loads (prefetched q, k, w
            # tiles in shared memory, ~150 KB at K = 128: one program per SM)
            for i_t in range(tl.cdiv(T_seq, BT)):
                b_h = _chunk_step(b_h, q_seq, k_seq, w_seq, u_seq, o_seq, s_seq, gc, i_hv, bos, i_t * BT, T_seq,
                                  T_total, i_v, scale, causal, H, HV, K, V, BT, BV, G_T_CONTIG, DOT_DTYPE,
                                  HAS_SCORES)
        else:
            # a while loop is not software-pipelined: no prefetch buffers, so several programs share
            # an SM and hide each other's load latency (the chunk steps are serial either way)
            t0 = 0
            while t0 < T_seq:
                b_h = _chunk_step(b_h, q_seq, k_seq, w_seq, u_seq, o_seq, s_seq, gc, i_hv, bos, t0, T_seq, T_total,
                                  i_v, scale, causal, H, HV, K, V, BT, BV, G_T_CONTIG, DOT_DTYPE, HAS_SCORES)
                t0 += BT
        if STORE_FINAL_STATE:
            store_state(ht, state_index, b_h, i_v, K, V, BV)


# The chunk loop's form. On CUDA at K <= 128 the counted loop (software-pipelined: q, k, w, u and score
# tiles prefetched into shared memory, one program per SM) at BV = 64 (``workload.cuda_serial_tile``):
# H200, B4_T4096_H16_K128_V128 bf16, 143 us, against 277 us for the while loop at BV = 32 (two programs per
# SM, 255 registers, no prefetch) and 278 us for the while loop at BV = 64. At K = 256 the prefetched tiles
# outgrow shared memory, so there CUDA keeps the while loop. Off CUDA the counted loop (Ascend's compiler
# plans its own buffering). Hence the default "auto".
PIPELINE = Tunable("PIPELINE", 0, (0, 1, 2), "chunk loop: 0 auto (a counted loop, except on CUDA at K > 128); 1 "
                   "a counted loop the compiler may software-pipeline; 2 a while loop (no prefetch buffers, more "
                   "programs per core)")


def counted_chunk_loop(choice: int, K: int) -> bool:
    """The kernel's PIPELINE constexpr for a tunable choice (0 auto, 1 counted, 2 while)."""
    if choice:
        return choice == 1
    return not on_cuda() or K <= CUDA_SERIAL_MAX_K

# Live set, in bytes: 8 [K, BV] fp32 copies as the state stage (fla's fwd_h 8.0: state, its cast,
# decayed state, the k'v' product, u / v' / o slabs), plus 5 [BT, K] operand tiles in the input
# dtype (q and its reload for the second dot, k', w, and the [BT, BT] score tile with its mask, about one
# more at K >= 64; the step's order keeps fewer live at once, so this is an upper bound).
STATE_COPIES, OPERAND_TILES = 8.0, 5.0


def ub_stage(K: int, BV: int, dtype: str) -> UBStage:
    """The live set as one [K, BV] fp32-equivalent stage: the operand tiles folded into the multiplier."""
    multiplier = STATE_COPIES + OPERAND_TILES * CHUNK * element_bytes(dtype) / (4 * BV)
    return UBStage("state_output", {"K": K, "BV": BV}, "fp32", round(multiplier, 3), STATE_OUTPUT_MARGIN)


def fused_tile(K: int, V: int, dtype: str, requested: int = 0, rows: int | None = None) -> int | None:
    """Value slab of the fused kernel: ``requested``, or the widest power of two (16 <= BV <= V) whose
    live set fits the UB; None when even BV = 16 does not (the forward then runs the two stages).

    On CUDA registers and shared memory, not a UB, bound it: at K <= 128 the serial-kernel slab
    (``workload.cuda_serial_tile``, ``rows`` = sequences x value heads), beyond that the state tile is
    held to ``CUDA_TILE_ELEMENTS``."""
    if requested:
        return min(requested, V)
    if on_cuda():
        return cuda_serial_tile(K, V, rows) or min(V, max(16, CUDA_TILE_ELEMENTS // K))
    BV = min(V, 128)
    while BV >= 16:
        stage = ub_stage(K, BV, dtype)
        if ub.check(stage.tile, stage.dtype, stage.multiplier, ub_context()[0], stage.margin).safe:
            return BV
        BV //= 2
    return None


def gdn_state_output(q, k, w, u, gc, scale, *, initial_state=None, output_final_state=False, cu_seqlens=None,
                     config=None, packing=None, scores=None):
    """o [B,T,HV,V] (u's dtype) and the final state [N,HV,K,V] fp32 (or None), without storing h.

    q, k [B,T,H,K]; w [B,T,HV,K]; u [B,T,HV,V]; gc [B,T,HV] (or ``HeadMajor``); initial_state [N,HV,K,V];
    scores [B,T,HV,64]: the gated causal q k' per chunk made beforehand (``gdn_kkt_solve_wy``), or None
    to compute them here.
    """
    import torch

    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV, V = u.shape[2], u.shape[3]
    packing = packing or pack(B, T, cu_seqlens, k.device)
    dtype = dtype_name(q.dtype)
    BV = fused_tile(K, V, dtype, cfg["BV"], packing.N * HV)
    if BV is None:
        raise UsageError(f"gdn_state_output: K={K} {dtype} does not fit the UB model even at BV=16",
                         hint="run gdn_state then gdn_output")
    gc_arg, contig = token_scalar_arg(gc, bool(cfg["G_T_CONTIG"]))
    o = alloc(u.shape, u.dtype, u.device)
    final = alloc((packing.N, HV, K, V), torch.float32, k.device) if output_final_state else None
    tasks = packing.N * HV * (V // BV)
    launch(_gdn_state_output_kernel, (grid_size("cube", tasks),), q, k, w, u, gc_arg, o, initial_state, final,
           scores, packing.cu_seqlens, float(scale), packing.T_total, tasks, H=H, HV=HV, K=K, V=V, BT=CHUNK, BV=BV,
           G_T_CONTIG=contig, USE_INITIAL_STATE=initial_state is not None, STORE_FINAL_STATE=output_final_state,
           DOT_DTYPE=dot_dtype(q.dtype), PIPELINE=counted_chunk_loop(int(cfg["PIPELINE"]), K),
           HAS_SCORES=scores is not None)
    return o, final


def _make_inputs(dims, dtype, device, seed):
    out = _state_inputs(dims, dtype, device, seed)
    out["q"] = make_base_inputs(dims, dtype, device, seed)["q"]
    out["scores"] = ref.scores_reference(out["q"], out["k"], out["gc"], out.get("cu_seqlens")).to(out["q"].dtype)
    return out


def _run(inputs, config, mode):
    o, final = gdn_state_output(inputs["q"], inputs["k"], inputs["w"], inputs["u"], inputs["gc"],
                                inputs["q"].shape[-1] ** -0.5, initial_state=inputs["initial_state"],
                                output_final_state=True, cu_seqlens=inputs.get("cu_seqlens"), config=config,
                                scores=inputs["scores"] if SPEC.config(config)["SCORES"] else None)
    return {"o": o, "final_state": final}


def gdn_state_output_reference(inputs, mode):
    """Oracle of ``gdn_state_output``: ``o`` [B,T,HV,V] and ``final_state`` [N,HV,K,V], fp32."""
    lowp, cu = ref.lowp_of(inputs["q"]), inputs.get("cu_seqlens")
    h, v_new, final = ref.state_reference(inputs["k"], inputs["w"], inputs["u"], inputs["gc"],
                                          inputs["initial_state"], cu, lowp)
    o = ref.output_reference(inputs["q"], inputs["k"], ref._round(v_new, lowp), ref._round(h, lowp), inputs["gc"],
                             inputs["q"].shape[-1] ** -0.5, cu, lowp)
    return {"o": o, "final_state": final}


def _ub_model(dims, config, dtype):
    d = dims_of(dims)
    BV = fused_tile(d.K, d.V, dtype, SPEC.config(config)["BV"], d.N * d.HV)
    return [ub_stage(d.K, BV or 16, dtype)]


def _supports(dims, dtype, mode):
    from ascendopt.kernels.gdn.workload import unsupported_reason

    reason = unsupported_reason(dims, dtype, mode)
    if reason is None and fused_tile(int(dims["K"]), int(dims["V"]), dtype) is None:
        return f"K={dims['K']} in {dtype}: the fused live set does not fit the UB model even at BV=16"
    return reason


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens, state = d.B * d.T, d.HV * d.K * d.V
    moved = tokens * (2 * d.H * d.K + d.HV * d.K + 2 * d.HV * d.V) * e + tokens * d.HV * 4 + 2 * d.N * state * 4
    flops = 2 * tokens * d.HV * (2 * d.K * d.V + d.K * d.V + CHUNK * d.K + CHUNK * d.V)
    return Cost(bytes=moved, flops=flops)


SPEC = stage_spec(
    name="gdn_state_output",
    description="gated delta rule fwd, stages state + output fused: o and the final state without storing h",
    make_inputs=_make_inputs, run=_run, reference=gdn_state_output_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_state_output_kernel",),
    tunables={"BV": tile_tunable("BV", "value columns of the state per task (>= 16)"), "G_T_CONTIG": G_T_CONTIG,
              "PIPELINE": PIPELINE,
              # SCORES=0 with the while loop at BV=32 hits "out-of-range shared or local address" at the
              # score tile's dot on sm_90 (compute-sanitizer, triton 3.6; correct under the interpreter and
              # with the counted loop at BV=64): a code generation fault the gate reports as exit 5
              "SCORES": Tunable("SCORES", 1, (0, 1), "1: the intra-chunk scores come in (made by gdn_kkt_solve_wy, "
                                "as the forward does by default); 0: computed here for every value slab")},
    supports=_supports, dtypes=("bf16",),  # fp32 operand tiles at K = 128 alone exceed the UB budget
    extras={"support": "bf16; K, V in 16..256 while the fused live set fits the UB model (K=128: BV=16; K=256: "
                       "no, the forward runs gdn_state + gdn_output)"},
)
