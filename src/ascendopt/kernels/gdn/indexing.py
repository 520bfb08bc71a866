"""``@triton.jit`` helpers shared by the gated delta rule stage kernels: task decoding and gate loads.

Index rules (seed, "int64 before multiply"): sequence starts ``bos`` come from ``cu_seqlens`` loaded
as int64, so ``bos * heads * dim`` never wraps; chunk ids and in-sequence offsets stay int32 because
they feed ``make_block_ptr`` offsets, which must be 32-bit.
"""

import triton
import triton.language as tl


@triton.jit
def chunk_of(i_c, chunk_indices, cu_seqlens):
    """Global chunk ``i_c`` -> (chunk id in its sequence, first token of the sequence int64, its length int32)."""
    i_n = tl.load(chunk_indices + i_c * 2)
    i_t = tl.load(chunk_indices + i_c * 2 + 1)
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    return i_t, bos, (eos - bos).to(tl.int32)


@triton.jit
def load_token_scalars(ptr, i_hv, bos, t0, T_seq, T_total, HV: tl.constexpr, BT: tl.constexpr,
                       T_CONTIG: tl.constexpr):
    """fp32 [BT] of a per-token, per-value-head scalar (gate cumsum or beta), zero past the sequence.

    T_CONTIG: the host stored it head-major ``[HV, T_total]`` (BT consecutive values per chunk);
    otherwise it is the public ``[T_total, HV]`` layout, a stride-HV gather.
    """
    return load_token_scalars_at(ptr, i_hv, bos, t0 + tl.arange(0, BT), T_seq, T_total, HV, T_CONTIG)


@triton.jit
def load_token_scalars_at(ptr, i_hv, bos, o_t, T_seq, T_total, HV: tl.constexpr, T_CONTIG: tl.constexpr):
    """As ``load_token_scalars`` for in-sequence token indices ``o_t`` of any shape (int32)."""
    if T_CONTIG:
        ptrs = ptr + tl.cast(i_hv, tl.int64) * T_total + bos + o_t
    else:
        ptrs = ptr + (bos + o_t) * HV + i_hv
    return tl.load(ptrs, mask=o_t < T_seq, other=0.0).to(tl.float32)


@triton.jit
def load_last_token_scalar(ptr, i_hv, bos, last, T_total, HV: tl.constexpr, T_CONTIG: tl.constexpr):
    """The scalar of token ``last`` (int32, in-sequence) of one value head."""
    if T_CONTIG:
        value = tl.load(ptr + tl.cast(i_hv, tl.int64) * T_total + bos + last)
    else:
        value = tl.load(ptr + (bos + last) * HV + i_hv)
    return value.to(tl.float32)
