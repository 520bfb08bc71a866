"""Stage 4 of the gated delta rule forward: the chunk-state recurrence.

Per sequence, value head and value slab [K, BV] of the state, sequentially over its chunks:

    h_c stored;  v' = u - w h_c;  h_{c+1} = exp(gc_last) h_c + (exp(gc_last - gc) k)' v'

One task = one (sequence, value head, value slab) on a 1D core grid over the cube cores. Left
operands (``w``, ``k'``) are loaded from GM for their single dot; the state is only ever a right
operand, so it is never clobbered (seed, tl.dot lhs clobber).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.errors import UsageError
from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import (
    load_last_token_scalar,
    load_state,
    load_token_scalars,
    sequence_task,
    store_state,
)
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype, pack
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    STATE_OUTPUT_MARGIN,
    UBStage,
    cuda_serial_tile,
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
from ascendopt.kernels.spec import Cost, Tunable


@triton.jit
def _state_step(b_h, k_seq, w_seq, u_seq, vn_seq, h, gc, chunk, i_hv, bos, t0, T_seq, T_total, i_v,
                H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                BV: tl.constexpr, G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """One chunk: store h_c (global chunk ``chunk``, int64) and v' of chunk ``t0``; return h_{c+1}."""
    o_t = tl.arange(0, BT)
    store_state(h, chunk, b_h, i_v, K, V, BV)
    p_w = tl.make_block_ptr(w_seq, (T_seq, K), (HV * K, 1), (t0, 0), (BT, K), (1, 0))
    b_w = tl.load(p_w, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
    p_u = tl.make_block_ptr(u_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
    b_v = tl.load(p_u, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
    b_v -= tl.dot(b_w, b_h.to(DOT_DTYPE), input_precision="ieee")
    p_vn = tl.make_block_ptr(vn_seq, (T_seq, V), (HV * V, 1), (t0, i_v * BV), (BT, BV), (1, 0))
    tl.store(p_vn, b_v.to(p_vn.dtype.element_ty), boundary_check=(0, 1))
    last = tl.minimum(t0 + BT, T_seq) - 1
    g_last = load_last_token_scalar(gc, i_hv, bos, last, T_total, HV, G_T_CONTIG)
    b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
    # mask before exp: rows past the sequence read gc = 0 and must not contribute
    decay = tl.where(t0 + o_t < T_seq, tl.exp(tl.where(t0 + o_t < T_seq, g_last - b_g, 0.0)), 0.0)
    b_v = b_v * decay[:, None]
    p_kt = tl.make_block_ptr(k_seq, (K, T_seq), (1, H * K), (0, t0), (K, BT), (0, 1))
    b_kt = tl.load(p_kt, boundary_check=(0, 1), padding_option="zero").to(DOT_DTYPE)
    return b_h * tl.exp(g_last) + tl.dot(b_kt, b_v.to(DOT_DTYPE), input_precision="ieee")


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_state_kernel(k, w, u, gc, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T_total, num_tasks,
                      H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                      BV: tl.constexpr, G_T_CONTIG: tl.constexpr, USE_INITIAL_STATE: tl.constexpr,
                      STORE_FINAL_STATE: tl.constexpr, DOT_DTYPE: tl.constexpr, PIPELINE: tl.constexpr):
    NV: tl.constexpr = V // BV
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_n, i_hv, i_h, i_v, bos, T_seq = sequence_task(task, cu_seqlens, H, HV, NV)
        first_chunk = tl.load(chunk_offsets + i_n)
        state_index = tl.cast(i_n, tl.int64) * HV + i_hv  # [N, HV, K, V] states
        b_h = load_state(h0, state_index, i_v, K, V, BV, USE_INITIAL_STATE)
        # pointers rebound from the base tensors for every task (never ptr += across tasks)
        k_seq = k + (bos * H + i_h) * K
        w_seq = w + (bos * HV + i_hv) * K
        u_seq = u + (bos * HV + i_hv) * V
        vn_seq = v_new + (bos * HV + i_hv) * V
        if PIPELINE:
            # a counted loop: on CUDA the compiler software-pipelines its k, w, u loads (see PIPELINE)
            for i_t in range(tl.cdiv(T_seq, BT)):
                chunk = tl.cast(first_chunk + i_t, tl.int64) * HV + i_hv
                b_h = _state_step(b_h, k_seq, w_seq, u_seq, vn_seq, h, gc, chunk, i_hv, bos, i_t * BT, T_seq,
                                  T_total, i_v, H, HV, K, V, BT, BV, G_T_CONTIG, DOT_DTYPE)
        else:
            # a while loop is not software-pipelined: no prefetch buffers in shared memory
            i_t = 0
            while i_t * BT < T_seq:
                chunk = tl.cast(first_chunk + i_t, tl.int64) * HV + i_hv
                b_h = _state_step(b_h, k_seq, w_seq, u_seq, vn_seq, h, gc, chunk, i_hv, bos, i_t * BT, T_seq,
                                  T_total, i_v, H, HV, K, V, BT, BV, G_T_CONTIG, DOT_DTYPE)
                i_t += 1
        if STORE_FINAL_STATE:
            store_state(ht, state_index, b_h, i_v, K, V, BV)


# The chunk loop's form, as in gdn_state_output. Counted by default (auto): on sm_90 at K = V = 128,
# BV = 64 the pipelined loop is one program per SM (140 KB of shared memory, 255 registers); H200,
# B4_T4096_H16: 122 us, against 265 us for the while loop at the same slab (benchmarks/RESULTS.md).
PIPELINE = Tunable("PIPELINE", 0, (0, 1, 2), "chunk loop: 0 auto (counted); 1 a counted loop the compiler may "
                   "software-pipeline; 2 a while loop (no prefetch buffers, more programs per core)")


def _ub_stages(K: int, BV: int) -> list[UBStage]:
    # 8.0 live [K, BV] fp32 copies, as fla's Triton-Ascend chunk_delta_h forward (fwd_h 8.0, margin
    # 0.80): the state, its cast for the dot, the decayed state, the k'v' product, and the [BT, K]
    # w and k' tiles plus the [BT, BV] u / v' tiles (BT = 64 rows, about one [K, BV] each).
    return [UBStage("state", {"K": K, "BV": BV}, "fp32", 8.0, STATE_OUTPUT_MARGIN)]


def _tiles(K: int, V: int, config: dict, rows: int | None = None) -> int:
    """BV: as requested, else on CUDA the serial-kernel slab (``cuda_serial_tile``), else the UB model's.
    ``rows``: sequences x value heads."""
    if not config["BV"]:
        serial = cuda_serial_tile(K, V, rows)
        if serial:
            return serial
    return pick_tile(config["BV"], _ub_stages(K, 1)[0], "BV", V)


def gdn_state(k, w, u, gc, *, initial_state=None, output_final_state=False, cu_seqlens=None, config=None,
              packing=None):
    """The chunk-state recurrence.

    k [B,T,H,K]; w [B,T,HV,K]; u [B,T,HV,V]; gc [B,T,HV] (or ``HeadMajor``); initial_state [N,HV,K,V].
    Returns h [NC,HV,K,V] (state entering each chunk, in k's dtype), v_new [B,T,HV,V] (u's dtype) and
    the final state [N,HV,K,V] fp32 (None unless ``output_final_state``).
    """
    import torch

    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV, V = u.shape[2], u.shape[3]
    if value_heads(gc) != HV or w.shape[2] != HV:
        raise UsageError(f"gdn_state: w {tuple(w.shape)}, u {tuple(u.shape)} and gc disagree on value heads")
    packing = packing or pack(B, T, cu_seqlens, k.device)
    if initial_state is not None and tuple(initial_state.shape) != (packing.N, HV, K, V):
        raise UsageError(f"initial_state {tuple(initial_state.shape)}: expected [N={packing.N}, HV={HV}, "
                         f"K={K}, V={V}]")
    BV = _tiles(K, V, cfg, packing.N * HV)
    gc_arg, contig = token_scalar_arg(gc, bool(cfg["G_T_CONTIG"]))
    h = alloc((packing.NC, HV, K, V), k.dtype, k.device)
    v_new = alloc(u.shape, u.dtype, u.device)
    final = alloc((packing.N, HV, K, V), torch.float32, k.device) if output_final_state else None
    tasks = packing.N * HV * (V // BV)
    launch(_gdn_state_kernel, (grid_size("cube", tasks),), k, w, u, gc_arg, h, v_new, initial_state, final,
           packing.cu_seqlens, packing.chunk_offsets, packing.T_total, tasks, H=H, HV=HV, K=K, V=V, BT=CHUNK,
           BV=BV, G_T_CONTIG=contig, USE_INITIAL_STATE=initial_state is not None,
           STORE_FINAL_STATE=output_final_state, DOT_DTYPE=dot_dtype(k.dtype), PIPELINE=cfg["PIPELINE"] != 2)
    return h, v_new, final


def _make_inputs(dims, dtype, device, seed):
    base = make_base_inputs(dims, dtype, device, seed)
    gc, w, u = ref.wy_inputs_reference(base)
    dt = base["k"].dtype
    return with_varlen({"k": base["k"], "w": w.to(dt), "u": u.to(dt), "gc": gc,
                        "initial_state": base["initial_state"]}, base)


def _run(inputs, config, mode):
    h, v_new, final = gdn_state(inputs["k"], inputs["w"], inputs["u"], inputs["gc"],
                                initial_state=inputs["initial_state"], output_final_state=True,
                                cu_seqlens=inputs.get("cu_seqlens"), config=config)
    return {"h": h, "v_new": v_new, "final_state": final}


def gdn_state_reference(inputs, mode):
    """Oracle of ``gdn_state``: ``h`` [chunks,HV,K,V], ``v_new`` [B,T,HV,V], ``final_state`` [N,HV,K,V], fp32."""
    h, v_new, final = ref.state_reference(inputs["k"], inputs["w"], inputs["u"], inputs["gc"],
                                          inputs["initial_state"], inputs.get("cu_seqlens"), ref.lowp_of(inputs["k"]))
    return {"h": h, "v_new": v_new, "final_state": final}


def _ub_model(dims, config, dtype):
    d = dims_of(dims)
    return _ub_stages(d.K, _tiles(d.K, d.V, SPEC.config(config), d.N * d.HV))


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens, state = d.B * d.T, d.HV * d.K * d.V
    moved = tokens * (d.H * d.K + d.HV * d.K + 2 * d.HV * d.V) * e + tokens * d.HV * 4 + d.chunks * state * e
    return Cost(bytes=moved + 2 * d.N * state * 4, flops=4 * tokens * state)


SPEC = stage_spec(
    name="gdn_state", description="gated delta rule fwd, stage state: chunk-state recurrence h, v_new, final state",
    make_inputs=_make_inputs, run=_run, reference=gdn_state_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_state_kernel",),
    tunables={"BV": tile_tunable("BV", "value columns of the state per task"), "G_T_CONTIG": G_T_CONTIG,
              "PIPELINE": PIPELINE},
)
