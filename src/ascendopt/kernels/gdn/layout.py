"""Host-side layout for the gated delta rule stages: packing, chunk maps, gate transpose, dot dtype.

Every stage kernel works on the *packed* layout: a fixed-length batch ``[B, T, ...]`` is the same
memory as ``[1, B*T, ...]`` with ``cu_seqlens = [0, T, 2T, ...]``, so one kernel path serves fixed
and variable length (no runtime branch between the two, no second compile). Sequences are cut into
chunks of ``CHUNK = 64`` tokens; a 1D core grid flattens (chunk, head) work into tasks and decodes a
global chunk id through ``chunk_indices`` (sequence id, chunk id within the sequence).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from ascendopt.errors import UsageError

CHUNK = 64  # BT: chunk size of the chunked form (fla uses 64 as well)


@dataclass(frozen=True)
class Packing:
    """Sequence bookkeeping shared by every stage.

    ``cu_seqlens`` [N+1] (int32 or int64; kernels load it as int64), ``chunk_indices`` [NC, 2] int32
    (sequence id, chunk id within it), ``chunk_offsets`` [N+1] int32 (first global chunk of each
    sequence), ``T_total`` packed tokens, ``N`` sequences, ``NC`` chunks over all sequences.
    """

    cu_seqlens: object
    chunk_indices: object
    chunk_offsets: object
    T_total: int
    N: int
    NC: int
    varlen: bool


def pack(batch: int, seq_len: int, cu_seqlens=None, device=None) -> Packing:
    """Build the ``Packing`` of a fixed batch (``cu_seqlens=None``) or a packed varlen batch (B=1).

    Varlen needs the lengths on the host (one device sync), as fla's ``prepare_chunk_indices``; the
    result is kept for the same ``cu_seqlens`` tensor (held, so its id cannot be reused; its version
    counter catches in-place edits), so repeated calls do not sync. The fixed-length maps are built
    on the device and cached per (B, T, device).
    """
    if cu_seqlens is None:
        return _pack_fixed(batch, seq_len, str(device))
    key = (id(cu_seqlens), cu_seqlens._version, batch, seq_len, str(device))
    hit = _varlen_cache.get(key)
    if hit is not None and hit[0] is cu_seqlens:
        return hit[1]
    packing = _pack_varlen(batch, seq_len, cu_seqlens, device)
    if len(_varlen_cache) >= 8:
        _varlen_cache.pop(next(iter(_varlen_cache)))
    _varlen_cache[key] = (cu_seqlens, packing)
    return packing


_varlen_cache: dict = {}


def _pack_varlen(batch: int, seq_len: int, cu_seqlens, device) -> Packing:
    import torch

    if batch != 1:
        raise UsageError(f"cu_seqlens given with batch size {batch}: pack sequences into B=1")
    bounds = [int(x) for x in cu_seqlens.tolist()]
    if len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != seq_len or any(b < a for a, b in pairwise(bounds)):
        raise UsageError(f"cu_seqlens {bounds[:8]}: must rise from 0 to T={seq_len}")
    lengths = [b - a for a, b in pairwise(bounds)]
    chunks = [(n, i) for n, length in enumerate(lengths) for i in range(-(-length // CHUNK))]
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + -(-length // CHUNK))
    indices = torch.tensor(chunks or [(0, 0)], dtype=torch.int32, device=device).reshape(-1, 2)
    return Packing(cu_seqlens, indices, torch.tensor(offsets, dtype=torch.int32, device=device),
                   seq_len, len(lengths), len(chunks), True)


@lru_cache(maxsize=32)
def _pack_fixed(batch: int, seq_len: int, device: str) -> Packing:
    import torch

    per_seq = -(-seq_len // CHUNK)
    ids = torch.arange(batch * per_seq, device=device, dtype=torch.int32)
    indices = torch.stack((ids // per_seq, ids % per_seq), dim=1).contiguous()
    cu = torch.arange(batch + 1, device=device, dtype=torch.int64) * seq_len
    offsets = torch.arange(batch + 1, device=device, dtype=torch.int32) * per_seq
    return Packing(cu, indices, offsets, batch * seq_len, batch, batch * per_seq, False)


def token_major_to_head_major(x):
    """``[B, T, HV]`` per-token scalars (gate, beta) -> contiguous ``[HV, B*T]``.

    Loading a ``[B, T, HV]`` gate along T is a stride-HV gather (10x-35x slower on Ascend, seed
    "Gate g along T"); after this host transpose every chunk reads BT consecutive values
    (G_T_CONTIG). For HV == 1 it is a free view.
    """
    heads = x.shape[-1]
    return x.reshape(-1, heads).transpose(0, 1).contiguous()


def dot_dtype(dtype):
    """Element type fed to ``tl.dot``: the input type on hardware (bf16 tensor/cube units, fp32
    accumulation), fp32 under the interpreter, whose bf16 dot multiplies raw bits
    (docs/install.md §1.5)."""
    import torch
    import triton.language as tl

    from ascendopt.kernels._lib.common import interpreting

    if interpreting() or dtype == torch.float32:
        return tl.float32
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[dtype]


def check_heads(q, k, v, g, beta) -> tuple[int, int, int, int, int, int]:
    """Validate ``q, k [B,T,H,K]``, ``v [B,T,HV,V]``, ``g, beta [B,T,HV]``; returns B, T, H, HV, K, V."""
    if q.dim() != 4 or k.shape != q.shape:
        raise UsageError(f"q {tuple(q.shape)} and k {tuple(k.shape)}: expected equal shapes [B, T, H, K]")
    B, T, H, K = q.shape
    if v.dim() != 4 or v.shape[:2] != (B, T):
        raise UsageError(f"v {tuple(v.shape)}: expected [B={B}, T={T}, HV, V]")
    HV, V = v.shape[2], v.shape[3]
    if HV % H:
        raise UsageError(f"value heads HV={HV} must be a multiple of the query/key heads H={H}")
    for name, t in (("g", g), ("beta", beta)):
        if t.shape != (B, T, HV):
            raise UsageError(f"{name} {tuple(t.shape)}: expected [B={B}, T={T}, HV={HV}]")
    for name, size in (("K", K), ("V", V)):
        if size not in SUPPORTED_HEAD_DIMS:
            raise UsageError(f"head dim {name}={size}: supported {SUPPORTED_HEAD_DIMS}")
    return B, T, H, HV, K, V


# tl.dot needs every dimension >= 16; 16 and 32 exist for CPU tests, 64/128 are the production
# sizes, 256 fits the UB model with narrower value tiles (see each stage's ub model).
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)
