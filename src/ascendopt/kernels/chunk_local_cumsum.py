"""chunk_local_cumsum: cumulative sum of a gate along time, restarting at every chunk.

``g`` is ``[B, T, H]`` (one gate per head) or ``[B, T, H, S]`` (a gate vector per head); the result has
the same shape, accumulated in fp32 and stored as ``output_dtype``: ``o[t] = scale * sum(g[c0..t])``
for ``c0`` the start of ``t``'s chunk of ``chunk_size`` tokens (``reverse``: ``sum(g[t..c_end])``).
Varlen: ``B == 1`` and ``cu_seqlens`` ``[N+1]`` (int32 or int64); chunks align to each sequence start.

Kernel view: the gate as ``[B, T, C]`` with ``C = H*S``; a task is one ``[BT, BC]`` tile (a chunk of
``BT`` steps by ``BC`` channels). The tile is one contiguous 2D DMA: no stride-H gather along T.
With ``t_contig=1`` the host first transposes ``g`` to ``[B, C, T]`` (when ``C > 1``) and the kernel
loads the same tile T-contiguous (constexpr ``T_CONTIG``), the G_T_CONTIG layout of the seed.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ascendopt.device import ub
from ascendopt.device.ub import DEFAULT_MARGIN as UB_MARGIN  # fla's vector-kernel margin (its cumsum's too)
from ascendopt.device.ub import dtype_bytes
from ascendopt.errors import UsageError
from ascendopt.kernels._lib import resident
from ascendopt.kernels._lib.common import alloc, grid_size, launch, requested_tile, torch_dtype, ub_context
from ascendopt.kernels._lib.rowwise import cuda_cap, per_device
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage

# Live fp32 copies of the [BT, BC] tile: fla's Ascend cumsum uses 8.0 for its 2D (vector) tile and
# 3.0 for the 1D scalar one (ops/utils/backends/triton_ascend/cumsum.py); our tile is always 2D
# (gate, prefix sums, the reverse total and the scan's temporaries), so 8.0, at fla's vector margin.
MEM_MULT = 8.0
CHUNK_SIZES = (16, 32, 64, 128)
# On CUDA the register file bounds the tile (rowwise.cuda_cap), counted in live fp32 values per tile
# element. Compiled for sm_90 (triton 3.7.1, C divisible by 16): a 4096-element tile takes 72 registers
# forward and 128 with reverse+scale, no spills; 8192 elements spill in reverse. 6.0 caps the tile at
# 4096 elements (BT=64 -> BC=64), where the UB multiplier 8.0 stopped at BC=32.
CUDA_MEM_MULT = 6.0


# C = H*S is fixed by the model, so it is left specializable: knowing 16 | C, Triton proves every row of
# the [BT, BC] tile 16-byte aligned and loads/stores it as v4 (scalar b32 accesses with C unspecialized).
@triton.jit(do_not_specialize=["T", "n_seqs", "n_tasks", "n_cblocks", "chunk_start", "n_chunks"])
def _chunk_local_cumsum_kernel(g, o, cu_seqlens, chunk_offsets, scale, T, C, n_seqs, n_tasks, n_cblocks,
                               chunk_start, n_chunks,
                               BT: tl.constexpr, BC: tl.constexpr, REVERSE: tl.constexpr, HAS_SCALE: tl.constexpr,
                               IS_VARLEN: tl.constexpr, NP: tl.constexpr, SEARCH_STEPS: tl.constexpr,
                               TAIL: tl.constexpr, EVEN_C: tl.constexpr, T_CONTIG: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    if IS_VARLEN and NP > 0:
        # Few sequences: every program derives the chunk index itself, once (no host-side work).
        o_n = tl.arange(0, NP)
        m_n = o_n < n_seqs
        b_len = (tl.load(cu_seqlens + o_n + 1, mask=m_n, other=0).to(tl.int64)
                 - tl.load(cu_seqlens + o_n, mask=m_n, other=0).to(tl.int64))
        b_chunks = (b_len + BT - 1) // BT
        b_end = tl.cumsum(b_chunks, axis=0)  # chunk_offsets[i_n + 1]
    for task in tl.range(pid, n_tasks, n_programs):
        i_cb = task % n_cblocks
        i_c = task // n_cblocks
        if IS_VARLEN:
            # Sequence of global chunk i_c: the largest i_n with chunk_offsets[i_n] <= i_c.
            if NP > 0:
                i_n = tl.minimum(tl.sum(((b_end <= i_c) & m_n).to(tl.int32), axis=0), n_seqs - 1)
                first = tl.sum(tl.where(o_n < i_n, b_chunks, 0), axis=0)
            else:  # many sequences: binary search in the host-computed chunk_offsets
                i_n = i_c * 0
                hi = i_n + n_seqs
                for _ in tl.static_range(SEARCH_STEPS):
                    mid = (i_n + hi) // 2
                    go = tl.load(chunk_offsets + mid) <= i_c
                    i_n = tl.where(go, mid, i_n)
                    hi = tl.where(go, hi, mid)
                first = tl.load(chunk_offsets + i_n)
            i_t = tl.cast(i_c - first, tl.int32)
            bos = tl.load(cu_seqlens + i_n).to(tl.int64)
            eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
            t_seq = (eos - bos).to(tl.int32)
            # Tasks past the last chunk (the host bounds the count without a device sync) land beyond
            # t_seq: their boundary-checked DMAs read zeros and store nothing.
            batch = tl.cast(0, tl.int64)
        else:
            batch = tl.cast(i_c // n_chunks, tl.int64)
            i_t = chunk_start + i_c % n_chunks
            bos = tl.cast(0, tl.int64)
            t_seq = T
        # int64 element offsets of this task's sequence; block-pointer offsets below stay int32.
        rows = batch * T + bos
        if T_CONTIG:
            p_g = tl.make_block_ptr(g + batch * C * T + bos, (t_seq, C), (1, T),
                                    (i_t * BT, i_cb * BC), (BT, BC), (0, 1))
        else:
            p_g = tl.make_block_ptr(g + rows * C, (t_seq, C), (C, 1), (i_t * BT, i_cb * BC), (BT, BC), (1, 0))
        p_o = tl.make_block_ptr(o + rows * C, (t_seq, C), (C, 1), (i_t * BT, i_cb * BC), (BT, BC), (1, 0))
        b_g = _load_chunk(p_g, TAIL, EVEN_C).to(tl.float32)
        b_o = tl.cumsum(b_g, axis=0)
        if REVERSE:
            # suffix sum = chunk total - prefix sum + own term (padded rows are 0 and add nothing)
            b_o = tl.sum(b_g, axis=0)[None, :] - b_o + b_g
        if HAS_SCALE:
            b_o = b_o * scale
        _store_chunk(p_o, b_o.to(p_o.dtype.element_ty), TAIL, EVEN_C)


@triton.jit
def _load_chunk(p, TAIL: tl.constexpr, EVEN_C: tl.constexpr):
    """Checks only what can be out of bounds: rows in tail chunks, channels when BC does not divide C."""
    if TAIL:
        if EVEN_C:
            tile = tl.load(p, boundary_check=(0,), padding_option="zero")
        else:
            tile = tl.load(p, boundary_check=(0, 1), padding_option="zero")
    else:
        if EVEN_C:
            tile = tl.load(p)
        else:
            tile = tl.load(p, boundary_check=(1,), padding_option="zero")
    return tile


@triton.jit
def _store_chunk(p, value, TAIL: tl.constexpr, EVEN_C: tl.constexpr):
    if TAIL:
        if EVEN_C:
            tl.store(p, value, boundary_check=(0,))
        else:
            tl.store(p, value, boundary_check=(0, 1))
    else:
        if EVEN_C:
            tl.store(p, value)
        else:
            tl.store(p, value, boundary_check=(1,))


# Up to this many sequences the kernel builds its chunk index in-kernel: four [NP] int64 vectors stay
# live beside the tile, <= 8 KiB at 256, inside the UB left over by UB_MARGIN (more: host offsets + search).
MAX_IN_KERNEL_SEQS = 256
OFFSETS_CACHE_SIZE = 4  # like fla's tensor_cache (FLA_TENSOR_CACHE_SIZE default 4)
_offsets_cache: list = []


def _chunk_offsets(cu_seqlens, chunk_size: int):
    """``[N+1]`` int64 prefix sums of per-sequence chunk counts, computed on the device (no sync).

    Recent results are kept, like fla's ``tensor_cache``, per ``cu_seqlens`` object; an entry holds a
    reference (so the id cannot be reused) and the tensor's version counter (an in-place edit recomputes).
    """
    key = (id(cu_seqlens), cu_seqlens._version, chunk_size)
    for entry_key, tensor, offsets in _offsets_cache:
        if entry_key == key and tensor is cu_seqlens:
            return offsets
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int64)
    offsets = torch.zeros(lens.numel() + 1, dtype=torch.int64, device=cu_seqlens.device)
    torch.cumsum(torch.div(lens + (chunk_size - 1), chunk_size, rounding_mode="floor"), 0, out=offsets[1:])
    _offsets_cache.append((key, cu_seqlens, offsets))
    del _offsets_cache[:-OFFSETS_CACHE_SIZE]
    return offsets


def _block_c(c: int, chunk_size: int, requested: int) -> int:
    """Channels per tile: ``requested``, or the largest power of two the UB model allows (<= C)."""
    context = ub_context()
    if requested:
        return requested_tile("block_c", requested, {"BT": chunk_size, "BC": requested}, MEM_MULT, UB_MARGIN,
                              context, f"chunk_size={chunk_size}")
    ub_bytes, backend, _ = context
    bc = ub.solve({"BT": chunk_size, "BC": 1}, "BC", "fp32", MEM_MULT, ub_bytes, UB_MARGIN, upper=c)
    if backend == "cuda":  # the register file bounds the tile there (see rowwise.cuda_cap)
        bc = min(bc, cuda_cap(CUDA_MEM_MULT, chunk_size))
    return bc


def _validate(g, chunk_size: int, cu_seqlens) -> None:
    if g.dim() not in (3, 4):
        raise UsageError(f"g: expected [B, T, H] or [B, T, H, S], got shape {tuple(g.shape)}")
    if chunk_size not in CHUNK_SIZES:
        raise UsageError(f"chunk_size={chunk_size}: must be one of {', '.join(map(str, CHUNK_SIZES))}")
    if cu_seqlens is not None:
        if g.shape[0] != 1:
            raise UsageError(f"g: varlen (cu_seqlens given) needs B == 1, got B={g.shape[0]}")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            raise UsageError(f"cu_seqlens: expected [N+1] with N >= 1, got shape {tuple(cu_seqlens.shape)}")
        if cu_seqlens.dtype not in (torch.int32, torch.int64):
            raise UsageError(f"cu_seqlens: dtype {cu_seqlens.dtype} must be int32 or int64")


def chunk_local_cumsum(g, chunk_size, *, reverse=False, scale=None, cu_seqlens=None, output_dtype=torch.float32,
                       config=None):
    """Chunk-local cumsum of ``g`` ``[B, T, H]`` or ``[B, T, H, S]`` along T; same shape, fp32 sums.

    ``scale`` multiplies the sums; ``reverse`` sums to the chunk end; ``cu_seqlens`` ``[N+1]`` (int32
    or int64, with B == 1) restarts chunks at every sequence start; ``output_dtype`` of the result.
    ``config``: tunables ``block_c`` and ``t_contig`` (see ``SPEC``).
    """
    _validate(g, chunk_size, cu_seqlens)
    cfg = SPEC.config(config)
    b, t = g.shape[0], g.shape[1]
    c = math.prod(g.shape[2:])
    o = alloc(g.shape, output_dtype, g.device)
    if b * t * c == 0:
        return o
    t_contig = bool(cfg["t_contig"])
    if t_contig and c > 1:
        src = g.reshape(b, t, c).transpose(1, 2).contiguous()  # [B, C, T]: T-contiguous rows per channel
    else:
        src = g if g.is_contiguous() else g.contiguous()
    n_seqs = 0 if cu_seqlens is None else cu_seqlens.numel() - 1
    plan = per_device(_plans, (b, t, c, chunk_size, cfg["block_c"], n_seqs),
                      lambda: _plan(b, t, c, chunk_size, cfg["block_c"], n_seqs))
    common = {"BT": chunk_size, "BC": plan.block_c, "REVERSE": bool(reverse), "HAS_SCALE": scale is not None,
              "EVEN_C": plan.even_c, "T_CONTIG": t_contig}
    scale = 1.0 if scale is None else float(scale)
    if cu_seqlens is not None:
        offsets = None if plan.in_kernel else _chunk_offsets(cu_seqlens, chunk_size)
        programs, n_tasks, _, _, _ = plan.launches[0]
        np_, steps = (ub.next_pow2(n_seqs), 0) if plan.in_kernel else (0, (n_seqs - 1).bit_length())
        variant = (src.dtype, o.dtype, cu_seqlens.dtype, c % 16 == 0, c == 1, np_, steps, *common.values())
        grid = resident.programs(_chunk_local_cumsum_kernel, variant, n_tasks, programs)
        compiled = launch(_chunk_local_cumsum_kernel, (grid,), src, o, cu_seqlens, offsets, scale, t, c, n_seqs,
                          n_tasks, plan.n_cblocks, 0, 1, IS_VARLEN=True, NP=np_, SEARCH_STEPS=steps, TAIL=True,
                          **common)
        resident.learn(_chunk_local_cumsum_kernel, variant, compiled)
        return o
    for programs, n_tasks, start, chunks, tail in plan.launches:
        variant = (src.dtype, o.dtype, c % 16 == 0, c == 1, tail, *common.values())  # what the kernel compiles for
        grid = resident.programs(_chunk_local_cumsum_kernel, variant, n_tasks, programs)
        compiled = launch(_chunk_local_cumsum_kernel, (grid,), src, o, None, None, scale, t, c, 1, n_tasks,
                          plan.n_cblocks, start, chunks, IS_VARLEN=False, NP=0, SEARCH_STEPS=0, TAIL=tail, **common)
        resident.learn(_chunk_local_cumsum_kernel, variant, compiled)
    return o


@dataclass(frozen=True)
class _Plan:
    """Tile and launches of one call shape; launches are (programs, n_tasks, chunk_start, n_chunks, tail)."""

    block_c: int
    n_cblocks: int
    even_c: bool
    in_kernel: bool  # varlen: chunk index built in-kernel (few sequences) instead of host offsets
    launches: tuple[tuple[int, int, int, int, bool], ...]


_plans: dict = {}


def _plan(b: int, t: int, c: int, chunk_size: int, block_c: int, n_seqs: int) -> _Plan:
    """Memoized per call shape by ``rowwise.per_device``: the UB solve is host time on every call."""
    bc = _block_c(c, chunk_size, block_c)
    n_cblocks = triton.cdiv(c, bc)
    if n_seqs:
        # Upper bound of sum(cdiv(len_i, BT)) known on the host: cdiv(T, BT) + N (no device sync).
        n_tasks = (triton.cdiv(t, chunk_size) + n_seqs) * n_cblocks
        launches = ((grid_size("vector", n_tasks), n_tasks, 0, 1, True),)
    else:
        # Full chunks in one launch; the partial last chunk of every sequence (if any) in a TAIL one.
        full, rest = divmod(t, chunk_size)
        launches = tuple((grid_size("vector", b * chunks * n_cblocks), b * chunks * n_cblocks, start, chunks, tail)
                         for start, chunks, tail in ((0, full, False), (full, 1 if rest else 0, True))
                         if b * chunks)
    return _Plan(bc, n_cblocks, c % bc == 0, n_seqs <= MAX_IN_KERNEL_SEQS, launches)


def chunk_local_cumsum_reference(inputs: dict, mode: str = "fwd") -> dict:
    """fp32 torch oracle: per sequence, pad to whole chunks, cumsum inside each chunk."""
    g = inputs["g"].float()
    chunk, reverse, scale = inputs["chunk_size"], inputs["reverse"], inputs.get("scale")
    cu = inputs.get("cu_seqlens")
    bounds = [(i, 0, g.shape[1]) for i in range(g.shape[0])] if cu is None else [
        (0, int(s), int(e)) for s, e in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)]
    o = torch.zeros_like(g)
    for bi, s, e in bounds:
        seq = g[bi, s:e]
        n = seq.shape[0]
        pad = (-n) % chunk
        padded = torch.cat([seq, seq.new_zeros((pad,) + seq.shape[1:])]).view(-1, chunk, *seq.shape[1:])
        if reverse:
            sums = padded.flip(1).cumsum(1).flip(1)
        else:
            sums = padded.cumsum(1)
        o[bi, s:e] = sums.reshape(-1, *seq.shape[1:])[:n]
    if scale is not None:
        o = o * scale
    return {"o": o}


# -- spec ------------------------------------------------------------------------------------


def _shape(dims) -> tuple[int, ...]:
    t = sum(dims["seqlens"]) if "seqlens" in dims else dims["T"]
    b = 1 if "seqlens" in dims else dims["B"]
    return (b, t, dims["H"]) + ((dims["S"],) if "S" in dims else ())


def _make_inputs(dims, dtype: str, device, seed: int = 0, mode: str = "fwd") -> dict:
    """``g`` (log-space decays, negative), plus the op's options: ``chunk_size``, ``reverse``, ``scale``."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.nn.functional.logsigmoid(torch.randn(_shape(dims), generator=gen) + 2.0)
    inputs = {"g": g.to(device, torch_dtype(dtype)), "chunk_size": int(dims.get("chunk", 64)),
              "reverse": bool(dims.get("reverse", 0)), "scale": None}
    if "seqlens" in dims:
        cu = torch.tensor([0, *itertools.accumulate(dims["seqlens"])], dtype=torch.int64)
        inputs["cu_seqlens"] = cu.to(device)
    return inputs


def _run(inputs: dict, config: dict, mode: str) -> dict:
    return {"o": chunk_local_cumsum(inputs["g"], inputs["chunk_size"], reverse=inputs["reverse"],
                                    scale=inputs.get("scale"), cu_seqlens=inputs.get("cu_seqlens"), config=config)}


def _channels(dims) -> int:
    return dims["H"] * dims.get("S", 1)


def _ub_model(dims, config: dict, dtype: str) -> list[UBStage]:
    chunk = int(dims.get("chunk", 64))
    bc = _block_c(_channels(dims), chunk, config["block_c"])
    return [UBStage("fwd", {"BT": chunk, "BC": bc}, "fp32", MEM_MULT, UB_MARGIN)]  # MEM_MULT: fla's 2D cumsum


def _cost(dims, dtype: str, mode: str) -> Cost:
    n = math.prod(_shape(dims))
    return Cost(n * (dtype_bytes(dtype) + 4), 2 * n)  # g in, fp32 o out; one add (and scale) per element


def _supports(dims, dtype: str, mode: str) -> str | None:
    if "H" not in dims:
        return "missing dimension H (give B, T, H, optionally S, chunk; or seqlens for varlen)"
    if "seqlens" not in dims and ("B" not in dims or "T" not in dims):
        return "missing dimension B or T (or give seqlens=L1:L2:... for varlen)"
    if int(dims.get("chunk", 64)) not in CHUNK_SIZES:
        return f"chunk={dims.get('chunk')}: chunk sizes are {', '.join(map(str, CHUNK_SIZES))}"
    if mode != "fwd":
        return "forward only: the cumsum's backward is this op with reverse=True"
    if _channels(dims) < 1 or (("seqlens" not in dims) and min(dims["B"], dims["T"]) < 1):
        return "every dimension must be >= 1"
    return None


def _peer(inputs: dict, mode: str) -> dict:
    """flash-linear-attention's chunk_local_cumsum (fla-core 0.6.0) on the same inputs."""
    from fla.ops.utils.cumsum import chunk_local_cumsum as fla_cumsum

    cu = inputs.get("cu_seqlens")
    return {"o": fla_cumsum(inputs["g"], inputs["chunk_size"], reverse=inputs["reverse"], scale=inputs.get("scale"),
                            cu_seqlens=None if cu is None else cu.long(), output_dtype=torch.float32)}


SPEC = KernelSpec(
    name="chunk_local_cumsum",
    description="per-chunk cumsum of a gate along T ([B,T,H] or [B,T,H,S]; reverse, scale, varlen), fp32 out",
    bound="vector",
    modes=("fwd",),
    dtypes=("fp32", "bf16"),
    shapes={
        "tiny": ShapePreset("tiny", {"B": 2, "T": 150, "H": 3, "chunk": 64}, "CPU CI: 2 full chunks + a tail"),
        "tiny_varlen": ShapePreset("tiny_varlen", {"seqlens": (70, 0, 33, 128), "H": 2, "chunk": 32},
                                   "CPU CI: non-aligned, empty and aligned sequences"),
        "realistic": ShapePreset("realistic", {"B": 4, "T": 4096, "H": 32, "chunk": 64},
                                 "B4_T4096_H32: the scalar gate of gated delta rule, chunk 64"),
        "realistic_vector": ShapePreset("realistic_vector", {"B": 2, "T": 4096, "H": 16, "S": 128, "chunk": 64},
                                        "B2_T4096_H16_S128: a per-channel (KDA-style) gate, chunk 64"),
        "realistic_varlen": ShapePreset("realistic_varlen",
                                        {"seqlens": (4096, 1000, 3001, 2048, 5000, 1239), "H": 32, "chunk": 64},
                                        "six packed sequences, 16384 tokens, H32, chunk 64"),
    },
    tunables={
        "block_c": Tunable("block_c", 0, (0, 1, 2, 4, 8, 16, 32, 64, 128, 256),
                           "channels (H*S) per [BT, BC] tile; 0 = the largest power of two the UB model allows"),
        "t_contig": Tunable("t_contig", 0, (0, 1),
                            "1 = host-transpose g to [B, H*S, T] and load T-contiguous; 0 = load the [BT, BC] "
                            "slab of the [B, T, H*S] layout (also one contiguous DMA, no transpose pass)"),
    },
    make_inputs=_make_inputs,
    run=_run,
    reference=chunk_local_cumsum_reference,
    ub_model=_ub_model,
    cost=_cost,
    supports=_supports,
    kernel_names=("_chunk_local_cumsum_kernel",),
    tolerances={"fp32": 1e-5, "bf16": 1e-5},
    extras={"support": "g [B, T, H(, S)], any T, H*S; chunk 16-128; varlen: B=1, int32/int64 cu_seqlens, empty seqs ok",
            "peer": _peer, "peer_name": "fla.ops.utils.cumsum.chunk_local_cumsum (fla-core 0.6.0)",
            "outputs": {"fwd": ("o",)}, "options": ("chunk_size", "reverse", "scale"),
            "lowering_configs": [{"t_contig": 1}]},
)
