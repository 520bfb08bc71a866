"""What every gated delta rule spec shares: shape presets, input factory, support check, tile picking.

dims: ``B, T, H`` (query/key heads), ``HV`` (value heads, a multiple of H), ``K, V`` (head dims);
varlen presets add ``seqlens`` and have B=1, T=sum(seqlens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ascendopt.kernels._lib.common import torch_dtype, ub_context
from ascendopt.kernels.gdn.layout import SUPPORTED_HEAD_DIMS, pack, token_major_to_head_major
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage

# UB safety margins of the stages that budget less than ``ub.DEFAULT_MARGIN`` (0.85, kept by kkt and
# solve as fla's chunk_scaled_dot_kkt). Kernels with several live matrices leave more room for what the
# multiplier misses (docs/practice.md §6.2); each value is its fla Triton-Ascend counterpart's, not
# re-derived: the chunk state recurrence and the output (chunk_delta_h fwd_h, chunk_o) budget 0.80 of
# UB, the WY recompute (KDA wy_fast) 0.75.
STATE_OUTPUT_MARGIN = 0.80  # gdn_state, gdn_output, gdn_state_output
WY_MARGIN = 0.75  # gdn_wy and the wy stage of gdn_kkt_solve_wy


def _preset(name: str, doc: str, **dims: Any) -> ShapePreset:
    if "seqlens" in dims:
        dims = {"B": 1, "T": sum(dims["seqlens"]), **dims}
    return ShapePreset(name, dims, doc)


# CPU presets stay tiny (interpreter: ~1 ms per program step, docs/install.md §1.7); K=V=16/32 exist
# only for them. The three realistic ones are the H200 comparison against fla's forward.
PRESETS = {p.name: p for p in (
    _preset("tiny", "fixed length, tail chunk (T=100), grouped values", B=2, T=100, H=1, HV=2, K=32, V=32),
    _preset("tiny_varlen", "three sequences, one shorter than a chunk", seqlens=(30, 64, 70), H=1, HV=2,
            K=16, V=32),
    _preset("realistic", "B4_T4096_H16_K128_V128", B=4, T=4096, H=16, HV=16, K=128, V=128),
    _preset("B2_T8192_H16_HV32_K128_V128", "Qwen3-Next-like grouped values", B=2, T=8192, H=16, HV=32,
            K=128, V=128),
    _preset("varlen_T16384_H16_K128_V128", "five packed sequences, unaligned lengths",
            seqlens=(517, 1500, 3001, 4999, 6367), H=16, HV=16, K=128, V=128),
)}


def make_base_inputs(dims, dtype: str, device, seed: int) -> dict:
    """q, k [B,T,H,K]; v [B,T,HV,V]; g, beta [B,T,HV]; initial_state [N,HV,K,V] fp32; cu_seqlens (varlen).

    Keys are L2-normalised (as models call it, use_qk_l2norm); g = logsigmoid(x + 4) is a slow
    decay (about -0.02 per token) so the state carries across chunks and the recurrence is tested.
    """
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device="cpu").manual_seed(seed)
    B, T, H, HV, K, V = (int(dims[n]) for n in ("B", "T", "H", "HV", "K", "V"))
    seqlens = dims.get("seqlens")
    N = len(seqlens) if seqlens else B
    dt = torch_dtype(dtype)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    inputs = {
        "q": randn(B, T, H, K).to(dt),
        "k": F.normalize(randn(B, T, H, K), dim=-1).to(dt),
        "v": randn(B, T, HV, V).to(dt),
        "g": F.logsigmoid(randn(B, T, HV) + 4.0),
        "beta": torch.sigmoid(randn(B, T, HV)).to(dt),
        "initial_state": randn(N, HV, K, V) * 0.5,
    }
    if seqlens:
        inputs["cu_seqlens"] = torch.tensor([0, *torch.tensor(seqlens).cumsum(0).tolist()], dtype=torch.int64)
    return {name: t.to(device) for name, t in inputs.items()}


def with_varlen(out: dict, base: dict) -> dict:
    """A stage's inputs ``out`` plus ``base``'s ``cu_seqlens`` [N+1] when the case is varlen (else as is)."""
    if "cu_seqlens" in base:
        out["cu_seqlens"] = base["cu_seqlens"]
    return out


def unsupported_reason(dims, dtype: str, mode: str) -> str | None:
    """None, or why the case is outside the kernels' real support range."""
    try:
        B, T, H, HV, K, V = (int(dims[n]) for n in ("B", "T", "H", "HV", "K", "V"))
    except KeyError as exc:
        return f"missing dim {exc.args[0]} (need B, T, H, HV, K, V)"
    if min(B, T, H, HV) <= 0:
        return "B, T, H, HV must be positive"
    if HV % H:
        return f"HV={HV} must be a multiple of H={H}"
    for name, size in (("K", K), ("V", V)):
        if size not in SUPPORTED_HEAD_DIMS:
            return f"{name}={size}: head dims {SUPPORTED_HEAD_DIMS} (tl.dot needs >= 16; 256 uses narrower tiles)"
    seqlens = dims.get("seqlens")
    if seqlens is not None and (B != 1 or sum(seqlens) != T or min(seqlens) < 0):
        return "varlen needs B=1 and T=sum(seqlens) with non-negative lengths"
    return None


@dataclass(frozen=True)
class HeadMajor:
    """A per-token, per-head scalar already transposed to ``[HV, B*T]`` by the host (G_T_CONTIG)."""

    data: Any

    @classmethod
    def of(cls, x) -> HeadMajor:
        return cls(token_major_to_head_major(x))


def token_scalar_arg(x, contiguous_t: bool):
    """(tensor, T_CONTIG flag) to pass a gate/beta to a kernel: transposed on the host when asked."""
    if isinstance(x, HeadMajor):
        return x.data, True
    if contiguous_t:
        return token_major_to_head_major(x), True
    return x, False


def chunk_stage_args(k, beta, gc, cu_seqlens, packing, config: dict):
    """(packing, beta, gc, T_CONTIG) for a per-chunk stage over k [B,T,H,K]: the packing (made from
    ``cu_seqlens`` unless given) and beta / gc as kernel arguments in beta's layout (``token_scalar_arg``)."""
    packing = packing or pack(k.shape[0], k.shape[1], cu_seqlens, k.device)
    beta_arg, contig = token_scalar_arg(beta, bool(config["G_T_CONTIG"]))
    gc_arg, _ = token_scalar_arg(gc, contig)
    return packing, beta_arg, gc_arg, contig


def value_heads(x) -> int:
    """HV of a per-token scalar given as ``[B, T, HV]`` or as ``HeadMajor`` ``[HV, B*T]``."""
    return x.data.shape[0] if isinstance(x, HeadMajor) else x.shape[-1]


# On CUDA registers, not a UB, bound a tile: with the default 4 warps (num_warps may not be set) a
# 64 x 64 fp32 accumulator takes 32 registers per thread. AOT-compiled for sm_90 (triton 3.7, ptxas
# resource usage), the wy kernel spills 1304 B/thread at BK = BV = 128 and 232 B at 64.
CUDA_TILE_ELEMENTS = 64 * 64


# The serial chunk-recurrent kernels (gdn_state, gdn_state_output) on CUDA: one task per (sequence,
# value head, value slab) walks all its chunks, and their counted chunk loop is software-pipelined into
# shared memory (one program per SM at K = 128). H200, B4_T4096_H16_K128_V128 bf16 (benchmarks/RESULTS.md,
# CUDA defaults): the state kernel took 171 us at BV = 32 (256 tasks, two rounds on 132 SMs) and 122 us at BV = 64
# (128 tasks, one round); the fused state + output kernel 277 us at BV = 32 with its while loop and 143 us
# at BV = 64 counted. So the slab is the widest <= CUDA_SERIAL_BV that still gives at least half as many
# tasks as SMs (narrower slabs only where the batch is too small to fill the device).
CUDA_SERIAL_BV = 64
CUDA_SERIAL_MAX_K = 128  # measured there; at K = 256 the pipelined tiles outgrow shared memory


def cuda_serial_tile(K: int, V: int, rows: int | None) -> int | None:
    """Value slab of a serial chunk-recurrent kernel on CUDA, None off CUDA or past ``CUDA_SERIAL_MAX_K``.

    ``rows``: sequences x value heads (tasks per value slab), None when not known (then the widest)."""
    from ascendopt.kernels._lib.common import num_cores, on_cuda

    if not on_cuda() or K > CUDA_SERIAL_MAX_K:
        return None
    BV = min(V, CUDA_SERIAL_BV)
    if rows:
        sms = num_cores("cube")
        while BV > 16 and rows * (V // BV) * 2 < sms:
            BV //= 2
    return BV


def pick_tile(requested: int, stage: UBStage, free: str, upper: int) -> int:
    """``requested`` if set (> 0), else the UB model's largest power of two for dimension ``free``
    (on CUDA also at most ``CUDA_TILE_ELEMENTS`` for the whole tile)."""
    from ascendopt.device import ub
    from ascendopt.kernels._lib.common import on_cuda

    if requested > 0:
        return min(requested, upper)
    if on_cuda():
        fixed = 1
        for name, size in stage.tile.items():
            fixed *= size if name != free else 1
        upper = min(upper, max(16, CUDA_TILE_ELEMENTS // fixed))
    return ub.solve(stage.tile, free, stage.dtype, stage.multiplier, ub_context()[0], stage.margin, upper=upper)


def tile_tunable(name: str, doc: str) -> Tunable:
    return Tunable(name, 0, (0, 16, 32, 64, 128, 256), f"{doc}; 0 = largest power of two the UB model allows")


G_T_CONTIG = Tunable("G_T_CONTIG", 1, (0, 1), "1: gate and beta transposed to [HV, T] on the host and read "
                     "T-contiguous; 0: read [T, HV] with a stride-HV gather")

SUPPORT = ("q, k [B,T,H,K], v [B,T,HV,V], HV a multiple of H; K, V in 16..256 (powers of two; 16/32 for CPU "
           "tests, 64/128 production, 256 with narrower value tiles); any T, varlen by cu_seqlens (B=1, "
           "empty sequences allowed); chunk 64")
TOLERANCES = {"fp32": 2e-5, "bf16": 2e-2}  # relative RMS error vs the fp32 oracle


def stage_spec(*, name: str, description: str, make_inputs: Callable, run: Callable, reference: Callable,
               ub_model: Callable, cost: Callable[[Any, str, str], Cost], kernel_names: tuple[str, ...],
               tunables: dict[str, Tunable], extras: dict | None = None,
               tolerances: dict[str, float] | None = None, supports: Callable | None = None,
               dtypes: tuple[str, ...] = ("bf16", "fp32"), bound: str = "cube") -> KernelSpec:
    """A forward-only KernelSpec over the shared presets (cube-bound unless said otherwise)."""
    return KernelSpec(
        name=name, description=description, bound=bound, modes=("fwd",), dtypes=dtypes,
        shapes=dict(PRESETS), tunables=tunables, make_inputs=make_inputs, run=run, reference=reference,
        ub_model=ub_model, cost=cost, supports=supports or unsupported_reason, kernel_names=kernel_names,
        tolerances=dict(tolerances or TOLERANCES), extras={"support": SUPPORT, **(extras or {})},
    )


class Extents(NamedTuple):
    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    N: int  # sequences
    chunks: int  # 64-token chunks over all sequences


def dims_of(dims) -> Extents:
    """The named extents of a dims dict, with the sequence and chunk counts."""
    B, T, H, HV, K, V = (int(dims[n]) for n in ("B", "T", "H", "HV", "K", "V"))
    seqlens = dims.get("seqlens") or (T,) * B
    return Extents(B, T, H, HV, K, V, len(seqlens), sum(-(-s // 64) for s in seqlens))


def element_bytes(dtype: str) -> int:
    from ascendopt.device.ub import dtype_bytes

    return dtype_bytes(dtype)



__all__ = ["PRESETS", "HeadMajor", "UBStage", "make_base_inputs", "pick_tile", "stage_spec", "unsupported_reason"]
