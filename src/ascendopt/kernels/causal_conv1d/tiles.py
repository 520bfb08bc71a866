"""causal_conv1d tile-path building blocks (``@triton.jit`` helpers shared by the fwd/bwd kernels).

A tile path works on ``[BT, BD]`` register tiles. The W taps come from W shifted block-pointer
loads (``TAPS=1``; the repeats are cache hits, HBM sees one read) or from one load plus register
shifts with ``tl.gather`` (``TAPS=2``). Ascend code would cut one ``BT+W-1`` window with
``tl.extract_slice`` instead, but that op exists neither in upstream Triton nor in the interpreter
(docs/install.md §3.3).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_of_task(i_r, tiles, n_per_seq, t_first, n_head, tail_start, IS_VARLEN: tl.constexpr,
                 TAIL_MODE: tl.constexpr):
    """Sequence ``i_n`` and time tile ``i_t`` of tile ``i_r`` of a launch (``plan``
    tile sets; ``TAIL_MODE=2``: the state tile of sequence ``i_r``)."""
    if TAIL_MODE == 2:
        i_n = i_r
        i_t = 0
    elif IS_VARLEN:
        i_n = tl.load(tiles + 2 * i_r)
        i_t = tl.load(tiles + 2 * i_r + 1)
    else:
        i_n = i_r // n_per_seq
        j = i_r % n_per_seq
        if TAIL_MODE == 0:
            i_t = t_first + j
        else:  # a sequence's tail tiles: its first n_head tiles, then every tile from tail_start on
            i_t = tl.where(j < n_head, j, tail_start + j - n_head)
    return i_n, i_t


@triton.jit
def seq_bounds(i_n, cu_seqlens, T, IS_VARLEN: tl.constexpr):
    """First packed row ``bos`` (int64) and length ``T_n`` of sequence ``i_n``."""
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        T_n = (tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos).to(tl.int32)
    else:
        bos = tl.cast(i_n, tl.int64) * T  # int64 before the row index meets the D stride
        T_n = T
    return bos, T_n


@triton.jit
def state_ptrs(base, i_n, o_d, slot, D: tl.constexpr, W: tl.constexpr):
    """Pointers ``[len(slot), BD]`` into a state ``[N, D, W-1]`` (int64 sequence offset)."""
    return base + tl.cast(i_n, tl.int64) * (D * (W - 1)) + o_d[None, :] * (W - 1) + slot[:, None]


@triton.jit
def load_block(p, D: tl.constexpr, BD: tl.constexpr):
    """Load a ``[rows, BD]`` block pointer over channels: the channel tail is checked only when BD does
    not divide D (a compile-time split, no runtime branch around the DMA)."""
    if D % BD == 0:
        b = tl.load(p)
    else:
        b = tl.load(p, boundary_check=(1,))
    return b


@triton.jit
def store_block(p, v, D: tl.constexpr, BD: tl.constexpr):
    """Store ``v`` through a ``[rows, BD]`` block pointer over channels (tail checked as in ``load_block``)."""
    if D % BD == 0:
        tl.store(p, v)
    else:
        tl.store(p, v, boundary_check=(1,))


@triton.jit
def load_rows(base, i_d, NR: tl.constexpr, D: tl.constexpr, BD: tl.constexpr):
    """Rows ``0..NR-1`` of ``base`` (rows of D elements), channels ``i_d*BD..``: a block-pointer load."""
    p = tl.make_block_ptr(base, (NR, D), (D, 1), (0, i_d * BD), (NR, BD), (1, 0))
    return load_block(p, D, BD)


@triton.jit
def window_rows(b_a, b_b, start: tl.constexpr, NR: tl.constexpr, NA: tl.constexpr, NB: tl.constexpr,
                BD: tl.constexpr):
    """Rows ``start .. start+NR-1`` of the row concatenation ``[b_a (NA rows); b_b (NB rows)]``.

    A register shift along T by two ``tl.gather``s (no second read of memory); the portable
    alternative to Ascend's ``tl.extract_slice`` on one loaded ``BT+W-1`` window.
    """
    # tl.gather wants an index of the result's full shape; both sources are read with clamped indices
    # and tl.where keeps the one that holds each row
    idx = start + tl.arange(0, NR)[:, None] + tl.zeros([NR, BD], dtype=tl.int32)
    s_a = tl.gather(b_a, tl.minimum(tl.maximum(idx, 0), NA - 1), 0)
    s_b = tl.gather(b_b, tl.minimum(tl.maximum(idx - NA, 0), NB - 1), 0)
    return tl.where(idx < NA, s_a, s_b)


@triton.jit
def x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, K: tl.constexpr,
            D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr,
            USE_H0: tl.constexpr, TAIL_MODE: tl.constexpr):
    """x at rows ``t + K`` of the tile, fp32 ``[BT, BD]`` (initial state for rows -(W-1)..-1)."""
    if TAIL_MODE == 0:
        # x_win starts W-1 rows before the tile; K runs from -(W-1) (oldest tap) to W-1 (the bwd's
        # look-ahead), so the window spans BT + 2(W-1) rows, all inside the sequence for bulk tiles
        p = tl.make_block_ptr(x_win, (BT + 2 * (W - 1), D), (D, 1), (K + W - 1, i_d * BD), (BT, BD), (1, 0))
        b = load_block(p, D, BD).to(tl.float32)
    else:
        src = o_t + K
        m = (src >= 0) & (src < T_n)
        b = tl.load(x + (bos + src.to(tl.int64))[:, None] * D + o_d[None, :],
                    mask=m[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        if USE_H0:  # rows -(W-1)..-1 of a sequence live in its initial state, slot src + W - 1
            m_h = (src < 0) & (src >= 1 - W)
            p_h = state_ptrs(h0, i_n, o_d, src + W - 1, D, W)
            b += tl.load(p_h, mask=m_h[:, None] & m_d[None, :], other=0.0).to(tl.float32)
    return b


@triton.jit
def pick(a0, a1, a2, a3, i: tl.constexpr):
    """``(a0, a1, a2, a3)[i]`` for a compile-time ``i`` (Triton has no lists of tensors)."""
    r = a0
    if i == 1:
        r = a1
    if i == 2:
        r = a2
    if i == 3:
        r = a3
    return r


@triton.jit
def tap_weights(wt, o_d, m_d, D: tl.constexpr, W: tl.constexpr):
    """The W tap rows of ``wt [W, D]`` as fp32 ``[BD]`` vectors (slots past W repeat tap 0)."""
    b_w0 = tl.load(wt + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_w1 = tl.load(wt + 1 * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_w2 = b_w0
    b_w3 = b_w0
    if W > 2:
        b_w2 = tl.load(wt + 2 * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    if W > 3:
        b_w3 = tl.load(wt + 3 * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    return b_w0, b_w1, b_w2, b_w3


@triton.jit
def silu_grad(dy, z):
    """``dy * silu'(z)``, silu'(z) = sig(z) * (1 + z * (1 - sig(z)))."""
    sig = tl.sigmoid(z)
    return dy * sig * (1.0 + z * (1.0 - sig))


@triton.jit
def bwd_tile_loads(x, h0, dy, dht, wt, bias, x_win, row0, bos, T_n, i_n, i_d, o_t, o_d, m_d,
                D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr,
                HAS_BIAS: tl.constexpr, USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, TAIL_MODE: tl.constexpr):
    """dx rows of one tile from W shifted loads of x and dy; returns ``(dx, dz of the tile's rows)``."""
    b_w0, b_w1, b_w2, b_w3 = tap_weights(wt, o_d, m_d, D, W)
    # z at rows t + s (s = 0..W-1): each x row shift kk is loaded once and feeds every z_s using it
    # (2W-1 loads instead of W*W).
    z0 = tl.zeros([BT, BD], dtype=tl.float32)
    z1 = tl.zeros([BT, BD], dtype=tl.float32)
    z2 = tl.zeros([BT, BD], dtype=tl.float32)
    z3 = tl.zeros([BT, BD], dtype=tl.float32)
    if ACT:
        if HAS_BIAS:
            b_b = tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
            z0 += b_b
            z1 += b_b
            z2 += b_b
            z3 += b_b
        for kk in tl.static_range(1 - W, W):
            b_x = x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, kk,
                          D, W, BT, BD, USE_H0, TAIL_MODE)
            if kk <= 0:
                z0 += b_x * pick(b_w0, b_w1, b_w2, b_w3, kk + W - 1)[None, :]
            if kk >= 2 - W and kk <= 1:
                z1 += b_x * pick(b_w0, b_w1, b_w2, b_w3, kk + W - 2)[None, :]
            # (parenthesized: triton-ascend 3.2's front end rejects chains of three boolean operands)
            if (W > 2 and kk >= 3 - W) and kk <= 2:
                z2 += b_x * pick(b_w0, b_w1, b_w2, b_w3, kk + W - 3)[None, :]
            if W > 3 and kk >= 4 - W:
                z3 += b_x * pick(b_w0, b_w1, b_w2, b_w3, kk + W - 4)[None, :]
    acc = tl.zeros([BT, BD], dtype=tl.float32)
    dz0 = tl.zeros([BT, BD], dtype=tl.float32)
    for s in tl.static_range(W):
        if TAIL_MODE == 0:
            p_dy = tl.make_block_ptr(dy + row0 * D, (BT + W - 1, D), (D, 1), (s, i_d * BD), (BT, BD), (1, 0))
            dz = load_block(p_dy, D, BD).to(tl.float32)
        else:
            r = o_t + s
            m_r = (r >= 0) & (r < T_n)
            dz = tl.load(dy + (bos + r.to(tl.int64))[:, None] * D + o_d[None, :],
                         mask=m_r[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        if ACT:
            dz = silu_grad(dz, pick(z0, z1, z2, z3, s))
        acc += dz * pick(b_w0, b_w1, b_w2, b_w3, W - 1 - s)[None, :]
        if s == 0:
            dz0 = dz
    if TAIL_MODE != 0 and HAS_DHT:
        # final state slot j holds x[T_n - (W-1) + j]
        j_s = o_t - T_n + W - 1
        m_s = (j_s >= 0) & (o_t < T_n)
        p_s = state_ptrs(dht, i_n, o_d, j_s, D, W)
        acc += tl.load(p_s, mask=m_s[:, None] & m_d[None, :], other=0.0).to(tl.float32)
    return acc, dz0


@triton.jit
def bwd_tile_gather(x, dy, wt, bias, row0, i_d, o_d, m_d,
                 D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, HB: tl.constexpr,
                 ACT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """A bulk tile with register shifts: x and dy read once (+ HB-row halos).

    Returns ``(dx, dz, xs0, xs1, xs2, xs3)`` with ``xs_w`` = x shifted by ``w-(W-1)`` rows.
    """
    b_w0, b_w1, b_w2, b_w3 = tap_weights(wt, o_d, m_d, D, W)
    b_m = load_rows(x + row0 * D, i_d, BT, D, BD)
    b_l = load_rows(x + (row0 - HB) * D, i_d, HB, D, BD)
    dz_m = load_rows(dy + row0 * D, i_d, BT, D, BD).to(tl.float32)
    dz_r = load_rows(dy + (row0 + BT) * D, i_d, HB, D, BD).to(tl.float32)
    xs0 = window_rows(b_l, b_m, HB + 1 - W, BT, HB, BT, BD)
    xs1 = b_m
    xs2 = b_m
    xs3 = b_m
    if W > 2:
        xs1 = window_rows(b_l, b_m, HB + 2 - W, BT, HB, BT, BD)
    if W > 3:
        xs2 = window_rows(b_l, b_m, HB + 3 - W, BT, HB, BT, BD)
    if ACT:
        b_r = load_rows(x + (row0 + BT) * D, i_d, HB, D, BD)
        z_m = tl.zeros([BT, BD], dtype=tl.float32)
        z_r = tl.zeros([HB, BD], dtype=tl.float32)
        if HAS_BIAS:
            b_b = tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
            z_m += b_b
            z_r += b_b
        for w in tl.static_range(W):
            b_w = pick(b_w0, b_w1, b_w2, b_w3, w)[None, :]
            z_m += pick(xs0, xs1, xs2, xs3, w).to(tl.float32) * b_w
            z_r += window_rows(b_m, b_r, BT + w - (W - 1), HB, BT, HB, BD).to(tl.float32) * b_w
        dz_m = silu_grad(dz_m, z_m)
        dz_r = silu_grad(dz_r, z_r)
    acc = dz_m * pick(b_w0, b_w1, b_w2, b_w3, W - 1)[None, :]
    for s in tl.static_range(1, W):
        acc += window_rows(dz_m, dz_r, s, BT, BT, HB, BD) * pick(b_w0, b_w1, b_w2, b_w3, W - 1 - s)[None, :]
    return acc, dz_m, xs0, xs1, xs2, xs3
