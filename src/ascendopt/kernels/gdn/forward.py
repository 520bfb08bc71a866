"""The chunked gated delta rule forward (Qwen3-Next's linear attention), composed of its stage kernels.

    gc   = chunk_local_cumsum(g)                 vector kernel (ascendopt.kernels.chunk_local_cumsum)
    A    = gdn_kkt(k, beta, gc)                  strict_lower(beta k k' exp(gc_i - gc_j))
    Ai   = gdn_solve_tril(A)                     (I + A)^-1
    (Ai = gdn_kkt_solve(k, beta, gc): the first two fused, A never stored; tunable fuse_kkt_solve)
    (w, u = gdn_kkt_solve_wy(k, v, beta, gc): the first three fused, Ai never stored either; the
     default, tunable fuse_wy; it also makes the output's intra-chunk scores for the fused state +
     output kernel, tunable hoist_scores)
    w, u = gdn_wy(k, v, beta, Ai, gc)            WY representation
    h, v', h_T = gdn_state(k, w, u, gc, h_0)     chunk-state recurrence
    o    = gdn_output(q, k, v', h, gc)           inter + intra chunk output
    (o, h_T = gdn_state_output(q, k, w, u, gc, h_0): the last two fused, h never stored; the
     default when its live set fits the UB model, tunable fuse_state_output)

Each stage is its own ``KernelSpec`` (``gdn_kkt`` ... ``gdn_output``) so the loop can optimise each;
this module's spec, ``chunk_gated_delta_rule_fwd``, times and checks the whole forward against the
token-by-token oracle and, on CUDA, against fla-core's ``chunk_gated_delta_rule``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ascendopt.errors import UsageError
from ascendopt.kernels._lib.common import dtype_name
from ascendopt.kernels.chunk_local_cumsum import SPEC as CUMSUM_SPEC
from ascendopt.kernels.chunk_local_cumsum import chunk_local_cumsum
from ascendopt.kernels.gdn import kkt, kkt_solve, kkt_solve_wy, output, solve, state, state_output, wy
from ascendopt.kernels.gdn.layout import CHUNK, check_heads, pack
from ascendopt.kernels.gdn.reference import chunk_gated_delta_rule_reference, chunked_reference, lowp_of
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    HeadMajor,
    dims_of,
    element_bytes,
    make_base_inputs,
    stage_spec,
    tile_tunable,
)
from ascendopt.kernels.spec import Cost, Tunable

# e2e tunable -> (stage spec, stage tunable)
_STAGE_TUNABLES = {
    "kkt_BK": (kkt.SPEC, "BK"), "kkt_solve_BK": (kkt_solve.SPEC, "BK"), "kkt_solve_FORM": (kkt_solve.SPEC, "FORM"),
    "wy_BK": (wy.SPEC, "BK"),
    "wy_BV": (wy.SPEC, "BV"),
    "state_BV": (state.SPEC, "BV"), "state_PIPELINE": (state.SPEC, "PIPELINE"),
    "out_BK": (output.SPEC, "BK"), "out_BV": (output.SPEC, "BV"),
    "fused_BV": (state_output.SPEC, "BV"), "fused_PIPELINE": (state_output.SPEC, "PIPELINE"),
}


def _stage_config(cfg: dict, spec) -> dict:
    stage = {name: cfg[key] for key, (owner, name) in _STAGE_TUNABLES.items() if owner is spec}
    return {**stage, "G_T_CONTIG": cfg["G_T_CONTIG"]}


def chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, config=None):
    """Chunked gated delta rule forward.

    Args:
        q, k: queries and keys ``[B, T, H, K]`` (keys usually L2-normalised).
        v: values ``[B, T, HV, V]``; HV a multiple of H (value head ``hv`` reads q/k head ``hv // (HV//H)``).
        g: log-space decay ``[B, T, HV]`` (any float dtype; summed in fp32).
        beta: ``[B, T, HV]`` write strengths.
        scale: multiplies q; default ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (fp32 preferred), N = B, or the number of sequences when varlen.
        output_final_state: also return the ``[N, HV, K, V]`` fp32 final state.
        cu_seqlens: ``[N+1]`` int32/int64 sequence bounds of a packed batch (B == 1).
        config: tunables of ``SPEC`` (stage tiles, G_T_CONTIG).

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in v's dtype; final_state or None.
    """
    import torch

    cfg = SPEC.config(config)
    B, T, _, HV, K, V = check_heads(q, k, v, g, beta)
    # the kernels index dense row-major tensors (q/k are often strided views of a fused projection)
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    initial_state = None if initial_state is None else initial_state.contiguous()
    scale = K ** -0.5 if scale is None else scale
    packing = pack(B, T, cu_seqlens, q.device)
    if initial_state is not None and tuple(initial_state.shape) != (packing.N, HV, K, V):
        raise UsageError(f"initial_state {tuple(initial_state.shape)}: expected [N={packing.N}, HV={HV}, "
                         f"K={K}, V={V}]")
    gc = chunk_local_cumsum(g, CHUNK, cu_seqlens=cu_seqlens, output_dtype=torch.float32)
    if cfg["G_T_CONTIG"]:
        # one host transpose each, shared by all four stages that read them
        gc, beta = HeadMajor.of(gc), HeadMajor.of(beta)
    scores = None
    if _fused_wy(cfg):
        # the fused state + output kernel can take the intra-chunk scores from here (hoist_scores)
        hoist = bool(cfg["hoist_scores"]) and _fused(cfg, K, V, q.dtype)
        w, u, scores = kkt_solve_wy.gdn_kkt_solve_wy(k, v, beta, gc, q=q if hoist else None,
                                                     config=_fused_wy_config(cfg), packing=packing)
    else:
        if cfg["fuse_kkt_solve"]:
            Ai = kkt_solve.gdn_kkt_solve(k, beta, gc, config=_stage_config(cfg, kkt_solve.SPEC), packing=packing)
        else:
            A = kkt.gdn_kkt(k, beta, gc, config=_stage_config(cfg, kkt.SPEC), packing=packing)
            Ai = solve.gdn_solve_tril(A, output_dtype=k.dtype, packing=packing)
        w, u = wy.gdn_wy(k, v, beta, Ai, gc, config=_stage_config(cfg, wy.SPEC), packing=packing)
    if _fused(cfg, K, V, q.dtype):
        return state_output.gdn_state_output(q, k, w, u, gc, scale, initial_state=initial_state,
                                             output_final_state=output_final_state,
                                             config=_stage_config(cfg, state_output.SPEC), packing=packing,
                                             scores=scores)
    h, v_new, final = state.gdn_state(k, w, u, gc, initial_state=initial_state,
                                      output_final_state=output_final_state,
                                      config=_stage_config(cfg, state.SPEC), packing=packing)
    o = output.gdn_output(q, k, v_new, h, gc, scale, config=_stage_config(cfg, output.SPEC), packing=packing)
    return o, final


def _fused_wy(cfg: dict) -> bool:
    """Run kkt + solve + wy as one kernel: asked for, on top of the fused kkt + solve in a dense form."""
    return bool(cfg["fuse_wy"] and cfg["fuse_kkt_solve"] and cfg["kkt_solve_FORM"])


def _fused_wy_config(cfg: dict) -> dict:
    return {"BK": cfg["kkt_solve_BK"], "FORM": cfg["kkt_solve_FORM"], "BW": cfg["fused_wy_BW"],
            "G_T_CONTIG": cfg["G_T_CONTIG"]}


def _fused(cfg: dict, K: int, V: int, dtype) -> bool:
    """Run the fused state + output kernel: asked for, and its live set fits the UB model."""
    fits = state_output.fused_tile(K, V, dtype_name(dtype), cfg["fused_BV"]) is not None
    return bool(cfg["fuse_state_output"]) and fits


def _run(inputs, config, mode):
    o, final = chunk_gated_delta_rule_fwd(inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"],
                                          initial_state=inputs["initial_state"], output_final_state=True,
                                          cu_seqlens=inputs.get("cu_seqlens"), config=config)
    return {"o": o, "final_state": final}


def chunk_gated_delta_rule_fwd_reference(inputs, mode):
    """fp32 inputs: the token-by-token oracle. Low-precision inputs: torch's own computation of the
    chunked algorithm with the same intermediates rounded to that dtype (the gate's bf16 yardstick)."""
    lowp = lowp_of(inputs["q"])
    if lowp is not None:
        o, final = chunked_reference(inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"],
                                     initial_state=inputs["initial_state"], cu_seqlens=inputs.get("cu_seqlens"),
                                     lowp=lowp)
        return {"o": o, "final_state": final}
    o, final = chunk_gated_delta_rule_reference(inputs["q"], inputs["k"], inputs["v"], inputs["g"],
                                                inputs["beta"], initial_state=inputs["initial_state"],
                                                cu_seqlens=inputs.get("cu_seqlens"))
    return {"o": o, "final_state": final}


def _peer(inputs, mode):
    """fla-core 0.6.0's ``chunk_gated_delta_rule`` forward on the same inputs (bf16/fp16 only: fla
    refuses fp32). With grouped values (HV > H) on an fla build that cannot do them natively (probed
    once), q and k are repeated to HV heads first, and the repeat is part of the peer's time."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    group = v.shape[2] // q.shape[2]
    if group > 1 and not _fla_grouped_values(q.device, q.dtype):
        q, k = q.repeat_interleave(group, dim=2), k.repeat_interleave(group, dim=2)
    cu = inputs.get("cu_seqlens")
    o, final = chunk_gated_delta_rule(q, k, v, inputs["g"], inputs["beta"], initial_state=inputs["initial_state"],
                                      output_final_state=True, cu_seqlens=None if cu is None else cu.long())
    return {"o": o, "final_state": final}


@cache
def _fla_grouped_values(device, dtype) -> bool:
    """Does this fla build compute HV > H natively? Compared with its own repeated-heads answer on a
    tiny case, so a build that ignores the grouping is caught instead of timed."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    tiny = make_base_inputs({"B": 1, "T": 128, "H": 1, "HV": 2, "K": 64, "V": 64}, "bf16", device, 0)
    args = [tiny[n].to(dtype) for n in ("q", "k", "v")] + [tiny["g"], tiny["beta"].to(dtype)]
    try:
        native, _ = chunk_gated_delta_rule(*args)
    except Exception:  # noqa: BLE001 - any refusal means "not supported"
        return False
    repeated, _ = chunk_gated_delta_rule(args[0].repeat_interleave(2, 2), args[1].repeat_interleave(2, 2),
                                         *args[2:])
    return native.shape == repeated.shape and bool((native.float() - repeated.float()).abs().max() < 1e-2)


def _ub_model(dims, config, dtype):
    cfg = SPEC.config(config)
    d = dims_of(dims)
    cumsum_dims = {"seqlens": dims["seqlens"], "H": d.HV} if dims.get("seqlens") else {"B": d.B, "T": d.T, "H": d.HV}
    stages = [replace(s, stage=f"cumsum.{s.stage}")
              for s in CUMSUM_SPEC.ub_model(cumsum_dims, CUMSUM_SPEC.config(), dtype)]
    head = (kkt_solve.SPEC, wy.SPEC) if cfg["fuse_kkt_solve"] else (kkt.SPEC, solve.SPEC, wy.SPEC)
    if _fused_wy(cfg):
        stages += kkt_solve_wy.SPEC.ub_model(dims, _fused_wy_config(cfg), dtype)
        head = ()
    tail = (state_output.SPEC,) if _fused(cfg, d.K, d.V, dtype) else (state.SPEC, output.SPEC)
    for spec in (*head, *tail):
        stages += spec.ub_model(dims, _stage_config(cfg, spec) if spec.tunables else {}, dtype)
    return stages


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    # minimum traffic: q, k, v read and o written once, g (fp32) and beta once, both states once
    moved = d.B * d.T * (2 * d.H * d.K + 2 * d.HV * d.V + d.HV * (4 + e)) + 2 * d.N * d.HV * d.K * d.V * 4
    # the algorithm's flops, counted on the separate stages (the fused kernel only saves traffic)
    flops = sum(spec.cost(dims, dtype, mode).flops for spec in (kkt.SPEC, solve.SPEC, wy.SPEC, state.SPEC,
                                                                 output.SPEC))
    return Cost(bytes=moved, flops=flops)


def _make_inputs(dims, dtype, device, seed):
    return make_base_inputs(dims, dtype, device, seed)


SPEC = stage_spec(
    name="chunk_gated_delta_rule_fwd",
    description="gated delta rule forward (chunked, 64-token chunks): cumsum, kkt, solve, wy, state, output",
    make_inputs=_make_inputs, run=_run, reference=chunk_gated_delta_rule_fwd_reference, ub_model=_ub_model, cost=_cost,
    # the gate cumsum and the kernel that makes w and u (fused by default, gdn_wy when fuse_wy=0)
    kernel_names=CUMSUM_SPEC.kernel_names + ("_gdn_kkt_solve_wy_kernel", "_gdn_wy_kernel"),
    # ordered by what a sweep (one tunable at a time, in this order, under a time budget) should
    # reach first: the default path's choices, then the tiles of the stages it does not run
    tunables={
        "fuse_wy": Tunable("fuse_wy", 1, (0, 1), "1: kkt + solve + wy as one kernel (A and Ai never stored; "
                           "needs fuse_kkt_solve=1 and a dense kkt_solve_FORM); 0: the gdn_wy stage reads Ai"),
        "hoist_scores": Tunable("hoist_scores", 1, (0, 1), "1: the fused kkt + solve + wy kernel also makes the "
                                "output's gated causal q k' scores (stored [T, HV, 64]) for the fused state + "
                                "output kernel; 0: that serial kernel computes them for every value slab"),
        "fused_PIPELINE": replace(state_output.PIPELINE, name="fused_PIPELINE"),
        "kkt_solve_FORM": replace(kkt_solve.SPEC.tunables["FORM"], name="kkt_solve_FORM"),
        "fused_BV": tile_tunable("fused_BV", "value slab of the fused state + output kernel"),
        "fused_wy_BW": tile_tunable("fused_wy_BW", "column slab of the w and u dots in the fused kkt + solve + wy"),
        "kkt_solve_BK": tile_tunable("kkt_solve_BK", "key slab of the fused kkt + solve kernel"),
        "fuse_kkt_solve": Tunable("fuse_kkt_solve", 1, (0, 1), "1: one kernel for kkt + solve (A never stored); "
                                  "0: the separate gdn_kkt and gdn_solve_tril stages"),
        "fuse_state_output": Tunable("fuse_state_output", 1, (0, 1),
                                     "1: one kernel for state + output when its live set fits the UB model (h "
                                     "never stored); 0: the separate gdn_state and gdn_output stages"),
        "G_T_CONTIG": G_T_CONTIG,
        "kkt_BK": tile_tunable("kkt_BK", "key slab of the kkt stage"),
        "wy_BK": tile_tunable("wy_BK", "key slab of w"), "wy_BV": tile_tunable("wy_BV", "value slab of u"),
        "state_BV": tile_tunable("state_BV", "value columns of the state per task"),
        "state_PIPELINE": replace(state.PIPELINE, name="state_PIPELINE"),
        "out_BK": tile_tunable("out_BK", "key slab of the output stage"),
        "out_BV": tile_tunable("out_BV", "value slab of the output stage"),
    },
    extras={"peer": _peer, "peer_name": "fla.ops.gated_delta_rule.chunk_gated_delta_rule (fla-core 0.6.0)",
            "outputs": {"fwd": ("o", "final_state")}},
)
