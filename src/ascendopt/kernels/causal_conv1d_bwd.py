"""causal_conv1d backward: dx, d initial state, and deterministic dweight/dbias.

With ``dz = dy * act'(z)`` (recomputed from x, never stored):

    dx[t]     = sum_w wt[w] * dz[t + (W-1) - w]                     (rows of dz outside the sequence are 0)
    dh0[j]    = dx[j - (W-1)]                 j < W-1: the same formula at the W-1 rows before the sequence
    dwt[w]    = sum_t dz[t] * x[t - (W-1) + w]
    dbias     = sum_t dz[t]
    dx[t]    += dfinal_state[t - T_n + W - 1]  for the last W-1 rows (final state = last W-1 inputs)

The bwd halo reaches W-1 rows *after* the tile too (``dz[t + W-1]``), so the bulk predicate counts
``halo_right = W-1``. ``TAIL_MODE``: 0 bulk (block pointers), 1 tail (masked), 2 state tiles (masked,
rows ``-(W-1)..-1`` of each sequence, written to d initial state).

dweight/dbias: each time tile writes fp32 partials ``[W+1, BD]`` to its own slot of a
``[n_tiles, W+1, D]`` scratch, then a finalize kernel sums the slots in a fixed order (seed: "fp32
partials + deterministic finalize"; no atomics, so results are bit-identical run to run).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels import common
from ascendopt.kernels.causal_conv1d_fwd import plan, state_ptrs

# Finalize tile: BS slots x BDF channels per step. Fixed, tiny (32 x 64 fp32 = 8 KiB live) and not
# worth a tunable: the scratch it reads is ~1/BT of the bwd traffic.
_FIN_BS, _FIN_BD = 32, 64


@triton.jit
def _x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, K: tl.constexpr,
            D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr,
            USE_H0: tl.constexpr, TAIL_MODE: tl.constexpr):
    """x at rows ``t + K`` of the tile, fp32 ``[BT, BD]`` (initial state for rows -(W-1)..-1)."""
    if TAIL_MODE == 0:
        p = tl.make_block_ptr(x_win, (BT + 2 * (W - 1), D), (D, 1), (K + W - 1, i_d * BD), (BT, BD), (1, 0))
        if D % BD == 0:
            b = tl.load(p).to(tl.float32)
        else:
            b = tl.load(p, boundary_check=(1,)).to(tl.float32)
    else:
        src = o_t + K
        m = (src >= 0) & (src < T_n)
        b = tl.load(x + (bos + src.to(tl.int64))[:, None] * D + o_d[None, :],
                    mask=m[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        if USE_H0:
            m_h = (src < 0) & (src >= 1 - W)
            p_h = state_ptrs(h0, i_n, o_d, src + W - 1, D, W)
            b += tl.load(p_h, mask=m_h[:, None] & m_d[None, :], other=0.0).to(tl.float32)
    return b


@triton.jit(do_not_specialize=["T", "n_tasks", "n_per_seq", "t_first", "n_head", "tail_start", "slot0"])
def _causal_conv1d_bwd_kernel(
    x, wt, bias, h0, dy, dht, dx, dh0, part, cu_seqlens, tiles,
    T, n_tasks, n_per_seq, t_first, n_head, tail_start, slot0,
    D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr,
    ACT: tl.constexpr, HAS_BIAS: tl.constexpr, USE_H0: tl.constexpr, HAS_DHT: tl.constexpr,
    IS_VARLEN: tl.constexpr, TAIL_MODE: tl.constexpr,
):
    ND: tl.constexpr = (D + BD - 1) // BD
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_prog):
        i_d = task % ND
        i_r = task // ND
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
            else:
                i_t = tl.where(j < n_head, j, tail_start + j - n_head)
        if IS_VARLEN:
            bos = tl.load(cu_seqlens + i_n).to(tl.int64)
            T_n = (tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos).to(tl.int32)
        else:
            bos = tl.cast(i_n, tl.int64) * T
            T_n = T
        if TAIL_MODE == 2:
            t0 = 1 - W
        else:
            t0 = i_t * BT
        o_t = t0 + tl.arange(0, BT)
        o_d = i_d * BD + tl.arange(0, BD)
        m_d = o_d < D
        row0 = bos + tl.cast(i_t, tl.int64) * BT
        x_win = x + (row0 - (W - 1)) * D  # only dereferenced in bulk mode (block pointers)
        if HAS_BIAS:
            b_b = tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)
        acc = tl.zeros([BT, BD], dtype=tl.float32)
        dz0 = tl.zeros([BT, BD], dtype=tl.float32)
        for s in tl.static_range(W):
            if TAIL_MODE == 0:
                p_dy = tl.make_block_ptr(dy + row0 * D, (BT + W - 1, D), (D, 1), (s, i_d * BD), (BT, BD),
                                         (1, 0))
                if D % BD == 0:
                    b_dy = tl.load(p_dy).to(tl.float32)
                else:
                    b_dy = tl.load(p_dy, boundary_check=(1,)).to(tl.float32)
            else:
                r = o_t + s
                m_r = (r >= 0) & (r < T_n)
                b_dy = tl.load(dy + (bos + r.to(tl.int64))[:, None] * D + o_d[None, :],
                               mask=m_r[:, None] & m_d[None, :], other=0.0).to(tl.float32)
            if ACT:
                z = tl.zeros([BT, BD], dtype=tl.float32)
                if HAS_BIAS:
                    z += b_b[None, :]
                for w2 in tl.static_range(W):
                    b_w2 = tl.load(wt + w2 * D + o_d, mask=m_d, other=0.0).to(tl.float32)
                    z += _x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, s - (W - 1) + w2,
                                 D, W, BT, BD, USE_H0, TAIL_MODE) * b_w2[None, :]
                sig = tl.sigmoid(z)
                dz = b_dy * sig * (1.0 + z * (1.0 - sig))
            else:
                dz = b_dy
            b_w = tl.load(wt + (W - 1 - s) * D + o_d, mask=m_d, other=0.0).to(tl.float32)
            acc += dz * b_w[None, :]
            if s == 0:
                dz0 = dz
        if TAIL_MODE != 0 and HAS_DHT:
            # final state slot j holds x[T_n - (W-1) + j]
            j_s = o_t - T_n + W - 1
            m_s = (j_s >= 0) & (o_t < T_n)
            p_s = state_ptrs(dht, i_n, o_d, j_s, D, W)
            acc += tl.load(p_s, mask=m_s[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        if TAIL_MODE == 0:
            p_dx = tl.make_block_ptr(dx + row0 * D, (BT, D), (D, 1), (0, i_d * BD), (BT, BD), (1, 0))
            if D % BD == 0:
                tl.store(p_dx, acc.to(dx.dtype.element_ty))
            else:
                tl.store(p_dx, acc.to(dx.dtype.element_ty), boundary_check=(1,))
        elif TAIL_MODE == 1:
            m_y = (o_t < T_n)[:, None] & m_d[None, :]
            p_dx = dx + (bos + o_t.to(tl.int64))[:, None] * D + o_d[None, :]
            tl.store(p_dx, acc.to(dx.dtype.element_ty), mask=m_y)
        else:
            m_h = ((o_t < 0) & (o_t >= 1 - W))[:, None] & m_d[None, :]
            p_h = state_ptrs(dh0, i_n, o_d, o_t + W - 1, D, W)
            tl.store(p_h, acc.to(dh0.dtype.element_ty), mask=m_h)
        if TAIL_MODE != 2:
            p_part = part + tl.cast(slot0 + i_r, tl.int64) * ((W + 1) * D) + o_d
            for w in tl.static_range(W):
                b_x = _x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, w - (W - 1),
                              D, W, BT, BD, USE_H0, TAIL_MODE)
                tl.store(p_part + w * D, tl.sum(dz0 * b_x, axis=0), mask=m_d)
            if HAS_BIAS:
                tl.store(p_part + W * D, tl.sum(dz0, axis=0), mask=m_d)


@triton.jit(do_not_specialize=["n_slots", "n_tasks"])
def _causal_conv1d_dw_finalize_kernel(part, dw, db, n_slots, n_tasks,
                                      D: tl.constexpr, W: tl.constexpr, BS: tl.constexpr, BD: tl.constexpr,
                                      HAS_BIAS: tl.constexpr):
    """dweight ``[D, W]`` (and dbias): fixed-order sum of the tile partials ``part [n_slots, W+1, D]``."""
    ND: tl.constexpr = (D + BD - 1) // BD
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_prog):
        i_d = task % ND
        i_w = task // ND  # 0..W-1: dweight column, W: dbias
        o_d = i_d * BD + tl.arange(0, BD)
        m_d = o_d < D
        acc = tl.zeros([BS, BD], dtype=tl.float32)
        for i0 in tl.range(0, n_slots, BS):
            o_s = i0 + tl.arange(0, BS)
            p = part + o_s.to(tl.int64)[:, None] * ((W + 1) * D) + i_w * D + o_d[None, :]
            acc += tl.load(p, mask=(o_s < n_slots)[:, None] & m_d[None, :], other=0.0)
        b = tl.sum(acc, axis=0)
        tl.store(dw + o_d * W + i_w, b.to(dw.dtype.element_ty), mask=m_d & (i_w < W))
        if HAS_BIAS:
            tl.store(db + o_d, b.to(db.dtype.element_ty), mask=m_d & (i_w == W))


def causal_conv1d_bwd(x, dy, weight, bias=None, initial_state=None, dfinal_state=None, activation=None,
                      cu_seqlens=None, *, BT: int = 32, BD: int = 64):
    """Backward of ``causal_conv1d_fwd``. x, dy ``[B,T,D]``; weight ``[D,W]``; initial_state and
    dfinal_state ``[N,D,W-1]``. Returns ``(dx, dweight, dbias, dinitial_state)``; dbias / dinitial_state
    are None when bias / initial_state are. d residual is ``dy`` itself (y = act(z) + residual)."""
    import torch

    B, T, D = x.shape
    W = weight.shape[1]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    x, dy = x.contiguous(), dy.contiguous()
    wt = weight.t().contiguous()
    h0 = initial_state.contiguous() if initial_state is not None else None
    dht = dfinal_state.contiguous() if dfinal_state is not None else None
    dx = common.alloc((B, T, D), x.dtype, x.device)
    bulk, tail = plan(x.shape, cu_seqlens, BT, W, halo_right=W - 1)
    n_slots = bulk.n_tiles + tail.n_tiles
    part = common.alloc((n_slots, W + 1, D), torch.float32, x.device)
    nd = triton.cdiv(D, BD)
    flags = {"D": D, "W": W, "BD": BD, "ACT": activation == "silu", "HAS_BIAS": bias is not None,
             "USE_H0": h0 is not None, "HAS_DHT": dht is not None, "IS_VARLEN": cu_seqlens is not None}
    dh0 = common.alloc((N, D, W - 1), h0.dtype, x.device) if h0 is not None else None
    launches = [(0, bulk, 0, BT), (1, tail, bulk.n_tiles, BT)]
    if h0 is not None:
        # one state tile per sequence: rows -(W-1)..-1, at least 2 rows so tl.arange stays a vector
        launches.append((2, None, 0, max(2, triton.next_power_of_2(W - 1))))
    for mode, tiles, slot0, bt in launches:
        n_tiles = N if tiles is None else tiles.n_tiles
        n_tasks = n_tiles * nd
        if n_tasks == 0:
            continue
        args = tiles.args() if tiles is not None else (None, 1, 0, 0, 0)
        common.launch(_causal_conv1d_bwd_kernel, (common.grid_size("vector", n_tasks),),
                      x, wt, bias, h0, dy, dht, dx, dh0, part, cu_seqlens, args[0],
                      T, n_tasks, *args[1:], slot0,
                      BT=bt, TAIL_MODE=mode, **flags)
    dweight = common.alloc((D, W), weight.dtype, x.device)
    dbias = common.alloc((D,), bias.dtype, x.device) if bias is not None else None
    n_fin = triton.cdiv(D, _FIN_BD) * (W + (bias is not None))
    common.launch(_causal_conv1d_dw_finalize_kernel, (common.grid_size("vector", n_fin),),
                  part, dweight, dbias, n_slots, n_fin,
                  D=D, W=W, BS=_FIN_BS, BD=_FIN_BD, HAS_BIAS=bias is not None)
    return dx, dweight, dbias, dh0
