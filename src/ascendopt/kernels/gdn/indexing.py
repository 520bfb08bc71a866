"""``@triton.jit`` helpers shared by the gated delta rule stage kernels: task decoding, gate loads and
state-slab transfers (Triton inlines them, so they cost nothing over writing them out in each kernel).

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
def chunk_task(task, chunk_indices, cu_seqlens, H: tl.constexpr, HV: tl.constexpr, BT: tl.constexpr):
    """Task of a (chunk, value head) grid -> (i_c, i_hv, i_h, bos, T_seq, t0).

    ``i_h`` is the key head value head ``i_hv`` reads (HV // H value heads per key head); ``bos`` is
    int64, ``T_seq`` and the chunk's first in-sequence token ``t0`` int32.
    """
    i_c, i_hv = task // HV, task % HV
    i_t, bos, T_seq = chunk_of(i_c, chunk_indices, cu_seqlens)
    return i_c, i_hv, i_hv // (HV // H), bos, T_seq, i_t * BT


@triton.jit
def sequence_task(task, cu_seqlens, H: tl.constexpr, HV: tl.constexpr, NV: tl.constexpr):
    """Task of a (sequence, value head, value slab) grid -> (i_n, i_hv, i_h, i_v, bos int64, T_seq int32)."""
    i_n, i_hv, i_v = task // (HV * NV), (task // NV) % HV, task % NV
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    T_seq = (tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos).to(tl.int32)
    return i_n, i_hv, i_hv // (HV // H), i_v, bos, T_seq


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


@triton.jit
def load_state(h0, state_index, i_v, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr,
               USE_INITIAL_STATE: tl.constexpr):
    """fp32 [K, BV]: value slab ``i_v`` of state ``state_index`` (int64) of ``h0`` [.., K, V], or zeros."""
    b_h = tl.zeros([K, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        p_h0 = tl.make_block_ptr(h0 + state_index * K * V, (K, V), (V, 1), (0, i_v * BV), (K, BV), (1, 0))
        b_h += tl.load(p_h0).to(tl.float32)
    return b_h


@triton.jit
def store_state(h, state_index, b_h, i_v, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """Store the [K, BV] slab ``b_h`` as value slab ``i_v`` of state ``state_index`` (int64) of ``h``."""
    p_h = tl.make_block_ptr(h + state_index * K * V, (K, V), (V, 1), (0, i_v * BV), (K, BV), (1, 0))
    tl.store(p_h, b_h.to(p_h.dtype.element_ty))
