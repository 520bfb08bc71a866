"""causal_conv1d bulk tiles streamed row by row (tunable ``TAPS=3``; the kernels' internal taps=2).

A bulk tile ``[BT, BD]`` is walked along T in blocks of 4 rows; each row is its own ``[BD]``
vector, so the W-1 previous rows (and, in the backward, the W-1 previous ``dz`` rows) are plain
registers carried from row to row. The tap shift therefore costs nothing: x and dy are read once,
``act'(z)`` is evaluated once per element (the tile paths evaluate it W times in the backward), and
no cross-lane shuffles are needed. The 4 rows of a block are loaded together, and the next block is
prefetched while the current one computes. Rows are 1-D block-pointer loads with int32 channel
offsets. Tail tiles keep the masked tile path (``TAIL_MODE=1``), or, in the forward with ``MASKED``
(``TAIL_MODE=3``, tunable ``EDGES``), take this path too with every row load and store masked to its
sequence's packed rows ``[lo, hi)`` (rows before ``lo`` come from the initial state): one DMA path,
always masked, never past the packed ``B*T`` rows.

Rows are addressed as ``base + row * D`` with ``row`` int64; the caller's bulk predicate keeps
every row (halo included) inside the sequence, so no row is masked (only a channel tail when BD
does not divide D, by ``boundary_check``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels.causal_conv1d.tiles import silu_grad, tap_weights

ROWS = tl.constexpr(4)  # rows per block: the loads of one block are issued together


@triton.jit
def _conv(p3, p2, p1, c, w0, w1, w2, w3, W: tl.constexpr):
    """``sum_w wt[w] * x[t-(W-1)+w]`` from rows t-3, t-2, t-1, t."""
    if W == 4:
        z = w0 * p3 + w1 * p2 + w2 * p1 + w3 * c
    elif W == 3:
        z = w0 * p2 + w1 * p1 + w2 * c
    else:
        z = w0 * p1 + w1 * c
    return z


@triton.jit
def _load_row(base, row, d0, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr, F32: tl.constexpr):
    """Channels d0..d0+BD-1 of packed row ``row`` (int64): a 1-D block-pointer load, fp32 when ``F32``
    else in the tensor's dtype."""
    p = tl.make_block_ptr(base + row * D, (D,), (1,), (d0,), (BD,), (0,))
    if EVEN:
        v = tl.load(p)
    else:
        v = tl.load(p, boundary_check=(0,))
    if F32:
        v = v.to(tl.float32)
    return v


@triton.jit
def _row(base, row, d0, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr):
    """``_load_row`` as fp32."""
    return _load_row(base, row, d0, D, BD, EVEN, True)


@triton.jit
def _block(base, r, d0, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr, F32: tl.constexpr):
    """Rows r..r+3 as four [BD] vectors, loads issued together: fp32 when ``F32``, else in the tensor's
    dtype (converted where used, so the loads may stay in flight)."""
    a = _load_row(base, r, d0, D, BD, EVEN, F32)
    b = _load_row(base, r + 1, d0, D, BD, EVEN, F32)
    c = _load_row(base, r + 2, d0, D, BD, EVEN, F32)
    d = _load_row(base, r + 3, d0, D, BD, EVEN, F32)
    return a, b, c, d


@triton.jit
def _put(base, row, d0, v, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr):
    p = tl.make_block_ptr(base + row * D, (D,), (1,), (d0,), (BD,), (0,))
    if EVEN:
        tl.store(p, v.to(base.dtype.element_ty))
    else:
        tl.store(p, v.to(base.dtype.element_ty), boundary_check=(0,))


@triton.jit
def _load_row_in(base, row, inside, d0, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr,
                 F32: tl.constexpr, MASKED: tl.constexpr):
    """``_load_row``; with ``MASKED`` a masked load that reads zeros, without touching memory, when
    ``inside`` (a scalar: the row lies in its own sequence) is false."""
    if MASKED:
        o = d0 + tl.arange(0, BD)
        if EVEN:
            v = tl.load(base + row * D + o, mask=inside, other=0.0)
        else:
            v = tl.load(base + row * D + o, mask=(o < D) & inside, other=0.0)
        if F32:
            v = v.to(tl.float32)
    else:
        v = _load_row(base, row, d0, D, BD, EVEN, F32)
    return v


@triton.jit
def _block_in(base, r, left, d0, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr, F32: tl.constexpr,
              MASKED: tl.constexpr):
    """``_block``; with ``MASKED`` only the first ``left`` (int32) of rows r..r+3 are in the sequence."""
    a = _load_row_in(base, r, 0 < left, d0, D, BD, EVEN, F32, MASKED)
    b = _load_row_in(base, r + 1, 1 < left, d0, D, BD, EVEN, F32, MASKED)
    c = _load_row_in(base, r + 2, 2 < left, d0, D, BD, EVEN, F32, MASKED)
    d = _load_row_in(base, r + 3, 3 < left, d0, D, BD, EVEN, F32, MASKED)
    return a, b, c, d


@triton.jit
def _put_in(base, row, inside, d0, v, D: tl.constexpr, BD: tl.constexpr, EVEN: tl.constexpr,
            MASKED: tl.constexpr):
    """``_put``; with ``MASKED`` nothing is written unless ``inside``."""
    if MASKED:
        o = d0 + tl.arange(0, BD)
        if EVEN:
            tl.store(base + row * D + o, v.to(base.dtype.element_ty), mask=inside)
        else:
            tl.store(base + row * D + o, v.to(base.dtype.element_ty), mask=(o < D) & inside)
    else:
        _put(base, row, d0, v, D, BD, EVEN)


@triton.jit
def _halo_row(x, h0, i_n, row0, k: tl.constexpr, t0, d0, o_d, m_d, D: tl.constexpr, W: tl.constexpr,
              BD: tl.constexpr, EVEN: tl.constexpr, MASKED: tl.constexpr, USE_H0: tl.constexpr):
    """x row ``row0 - k`` (fp32), time ``t0 - k`` of its sequence; with ``MASKED`` a time before 0 reads
    zero, or ``initial_state[i_n, d, t + W - 1]`` with ``USE_H0`` (k <= W - 1, so the slot is >= 0)."""
    t = t0 - k
    v = _load_row_in(x, row0 - k, t >= 0, d0, D, BD, EVEN, True, MASKED)
    if MASKED:
        if USE_H0:
            p_h = h0 + tl.cast(i_n, tl.int64) * (D * (W - 1)) + o_d * (W - 1) + (t + W - 1)
            v += tl.load(p_h, mask=m_d & (t < 0), other=0.0).to(tl.float32)
    return v


@triton.jit
def _out_row(z, bias_v, res, row, y, d0, D: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr,
             HAS_RES: tl.constexpr, EVEN: tl.constexpr, inside, MASKED: tl.constexpr):
    z = z + bias_v
    if ACT == 2:
        # silu as one division: z / (1 + 2^(-z log2 e)); sm_90: the negation and the multiply by
        # sigmoid's reciprocal fold away (~2 of ~22 instructions per element), rounding may differ
        z = z / (1.0 + tl.exp2(z * -1.4426950408889634))
    elif ACT:
        z = z * tl.sigmoid(z)
    if HAS_RES:
        z += _load_row_in(res, row, inside, d0, D, BD, EVEN, True, MASKED)
    _put_in(y, row, inside, d0, z, D, BD, EVEN, MASKED)


@triton.jit
def _tile_start(x, h0, i_n, wt, bias, row0, t0, d0, o_d, m_d, D: tl.constexpr, W: tl.constexpr,
                BD: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN: tl.constexpr, MASKED: tl.constexpr,
                USE_H0: tl.constexpr):
    """What a tile at packed row ``row0`` starts from: the W tap rows, the bias row (fp32 [BD] each) and
    x rows row0-3, row0-2, row0-1 (slots before the oldest tap repeat row0-1), each by ``_halo_row``
    (``MASKED``: rows before time 0 from the initial state, or zero)."""
    w0, w1, w2, w3 = tap_weights(wt, o_d, m_d, D, W)
    bias_v = tl.zeros([BD], dtype=tl.float32)
    if HAS_BIAS:
        bias_v = tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)
    p1 = _halo_row(x, h0, i_n, row0, 1, t0, d0, o_d, m_d, D, W, BD, EVEN, MASKED, USE_H0)
    p2 = p1
    p3 = p1
    if W > 2:
        p2 = _halo_row(x, h0, i_n, row0, 2, t0, d0, o_d, m_d, D, W, BD, EVEN, MASKED, USE_H0)
    if W > 3:
        p3 = _halo_row(x, h0, i_n, row0, 3, t0, d0, o_d, m_d, D, W, BD, EVEN, MASKED, USE_H0)
    return w0, w1, w2, w3, bias_v, p3, p2, p1


@triton.jit
def fwd_rows(x, wt, bias, residual, y, h0, i_n, row0, t0, T_n, i_d, o_d, m_d, D: tl.constexpr, W: tl.constexpr,
             BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
             HAS_RES: tl.constexpr, AHEAD: tl.constexpr, MASKED: tl.constexpr, USE_H0: tl.constexpr):
    """Forward of the tile whose first output row is packed row ``row0`` (int64), time ``t0`` (int32) of
    sequence ``i_n`` (length ``T_n``).

    Without ``MASKED`` a bulk tile: every row it reads (halo included) lies in its sequence, nothing is
    masked. With ``MASKED`` any tile: rows at or past ``T_n`` are neither read nor written, rows before
    time 0 are the initial state (``USE_H0``) or zero. The row predicates are int32 compares of
    per-tile scalars.

    ``AHEAD``: how many 4-row blocks are loaded ahead of the one computing (1 or 2). With 2 the
    blocks in flight are carried unconverted, so their loads are waited for only when they are used,
    an iteration later (the fp32 conversion of a carried value has to finish before the loop's
    back edge).
    """
    EVEN: tl.constexpr = D % BD == 0
    d0 = i_d * BD  # int32 block-pointer offset
    n_in = T_n - t0  # rows of the sequence from row0 on (MASKED: rows j < n_in are in it)
    w0, w1, w2, w3, bias_v, p3, p2, p1 = _tile_start(x, h0, i_n, wt, bias, row0, t0, d0, o_d, m_d, D, W, BD,
                                                     HAS_BIAS, EVEN, MASKED, USE_H0)
    if AHEAD == 1:
        a, b, c, d = _block_in(x, row0, n_in, d0, D, BD, EVEN, True, MASKED)
        for r0 in tl.range(0, BT, ROWS):
            # prefetch the next block while this one computes (the last prefetch re-reads this block,
            # so every load stays inside the tile)
            j = tl.minimum(r0 + ROWS, BT - ROWS)
            na, nb, nc, nd = _block_in(x, row0 + j, n_in - j, d0, D, BD, EVEN, True, MASKED)
            _fwd_block(p3, p2, p1, a, b, c, d, w0, w1, w2, w3, bias_v, residual, row0 + r0, y, d0,
                       D, W, BD, ACT, HAS_RES, EVEN, n_in - r0, MASKED)
            p3, p2, p1 = b, c, d
            a, b, c, d = na, nb, nc, nd
    else:
        a, b, c, d = _block_in(x, row0, n_in, d0, D, BD, EVEN, False, MASKED)
        j = tl.minimum(ROWS, BT - ROWS)  # clamp: loads past the tile re-read its last block
        na, nb, nc, nd = _block_in(x, row0 + j, n_in - j, d0, D, BD, EVEN, False, MASKED)
        for r0 in tl.range(0, BT, ROWS):
            j = tl.minimum(r0 + 2 * ROWS, BT - ROWS)
            ma, mb, mc, md = _block_in(x, row0 + j, n_in - j, d0, D, BD, EVEN, False, MASKED)
            fa, fb, fc, fd = a.to(tl.float32), b.to(tl.float32), c.to(tl.float32), d.to(tl.float32)
            _fwd_block(p3, p2, p1, fa, fb, fc, fd, w0, w1, w2, w3, bias_v, residual, row0 + r0, y, d0,
                       D, W, BD, ACT, HAS_RES, EVEN, n_in - r0, MASKED)
            p3, p2, p1 = fb, fc, fd
            a, b, c, d = na, nb, nc, nd
            na, nb, nc, nd = ma, mb, mc, md


@triton.jit
def _fwd_block(p3, p2, p1, a, b, c, d, w0, w1, w2, w3, bias_v, residual, r, y, d0, D: tl.constexpr,
               W: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, EVEN: tl.constexpr,
               left, MASKED: tl.constexpr):
    """Outputs of rows r..r+3 from their x rows a..d and the three rows before them (fp32); with
    ``MASKED`` only the first ``left`` of the four rows are in the sequence."""
    za = _conv(p3, p2, p1, a, w0, w1, w2, w3, W)
    zb = _conv(p2, p1, a, b, w0, w1, w2, w3, W)
    zc = _conv(p1, a, b, c, w0, w1, w2, w3, W)
    zd = _conv(a, b, c, d, w0, w1, w2, w3, W)
    _out_row(za, bias_v, residual, r, y, d0, D, BD, ACT, HAS_RES, EVEN, 0 < left, MASKED)
    _out_row(zb, bias_v, residual, r + 1, y, d0, D, BD, ACT, HAS_RES, EVEN, 1 < left, MASKED)
    _out_row(zc, bias_v, residual, r + 2, y, d0, D, BD, ACT, HAS_RES, EVEN, 2 < left, MASKED)
    _out_row(zd, bias_v, residual, r + 3, y, d0, D, BD, ACT, HAS_RES, EVEN, 3 < left, MASKED)


@triton.jit
def _bwd_step(x_c, dy_c, p3, p2, p1, g1, g2, g3, w0, w1, w2, w3, bias_v, W: tl.constexpr, ACT: tl.constexpr):
    """dz of row t from its x row, dy row and the three previous x rows; and ``dx[t-(W-1)]``."""
    g = dy_c
    if ACT:
        z = _conv(p3, p2, p1, x_c, w0, w1, w2, w3, W) + bias_v
        g = silu_grad(dy_c, z)
    # dx[t-(W-1)] = sum_w wt[w] * dz[t-w]
    if W == 4:
        dxv = w0 * g + w1 * g1 + w2 * g2 + w3 * g3
    elif W == 3:
        dxv = w0 * g + w1 * g1 + w2 * g2
    else:
        dxv = w0 * g + w1 * g1
    return g, dxv


@triton.jit
def _dw(g, p3, p2, p1, c, q0, q1, q2, q3, W: tl.constexpr):
    """dweight partials += dz[t] * x[t-(W-1)+w]."""
    if W == 4:
        q0 += g * p3
        q1 += g * p2
        q2 += g * p1
        q3 += g * c
    elif W == 3:
        q0 += g * p2
        q1 += g * p1
        q2 += g * c
    else:
        q0 += g * p1
        q1 += g * c
    return q0, q1, q2, q3


@triton.jit
def _bwd_block(dx, r, d0, a, b, c, d, ya, yb, yc, yd, p3, p2, p1, g3, g2, g1, q0, q1, q2, q3, qb,
               w0, w1, w2, w3, bias_v, D: tl.constexpr, BD: tl.constexpr, W: tl.constexpr, ACT: tl.constexpr,
               EVEN: tl.constexpr, FIRST: tl.constexpr):
    """Rows r..r+3 (x rows a..d, dy rows ya..yd): dz, dweight partials, and dx of rows r+1-W .. r+4-W
    (only rows >= r when FIRST)."""
    ga, va = _bwd_step(a, ya, p3, p2, p1, g1, g2, g3, w0, w1, w2, w3, bias_v, W, ACT)
    gb, vb = _bwd_step(b, yb, p2, p1, a, ga, g1, g2, w0, w1, w2, w3, bias_v, W, ACT)
    gc, vc = _bwd_step(c, yc, p1, a, b, gb, ga, g1, w0, w1, w2, w3, bias_v, W, ACT)
    gd, vd = _bwd_step(d, yd, a, b, c, gc, gb, ga, w0, w1, w2, w3, bias_v, W, ACT)
    q0, q1, q2, q3 = _dw(ga, p3, p2, p1, a, q0, q1, q2, q3, W)
    q0, q1, q2, q3 = _dw(gb, p2, p1, a, b, q0, q1, q2, q3, W)
    q0, q1, q2, q3 = _dw(gc, p1, a, b, c, q0, q1, q2, q3, W)
    q0, q1, q2, q3 = _dw(gd, a, b, c, d, q0, q1, q2, q3, W)
    qb += ga + gb + gc + gd
    if not FIRST:
        _put(dx, r + 1 - W, d0, va, D, BD, EVEN)
    if not FIRST or W == 2:
        _put(dx, r + 2 - W, d0, vb, D, BD, EVEN)
    if not FIRST or W <= 3:
        _put(dx, r + 3 - W, d0, vc, D, BD, EVEN)
    _put(dx, r + 4 - W, d0, vd, D, BD, EVEN)
    return b, c, d, gb, gc, gd, q0, q1, q2, q3, qb


@triton.jit
def _bwd_past_row(x, dy, dx, row, d0, p3, p2, p1, g1, g2, g3, w0, w1, w2, w3, bias_v, D: tl.constexpr,
                  BD: tl.constexpr, W: tl.constexpr, ACT: tl.constexpr, EVEN: tl.constexpr):
    """Row ``row`` past a tile: its dz finishes dx of row ``row+1-W`` (written); returns its x row and dz."""
    c = _row(x, row, d0, D, BD, EVEN)
    yc = _row(dy, row, d0, D, BD, EVEN)
    g, v = _bwd_step(c, yc, p3, p2, p1, g1, g2, g3, w0, w1, w2, w3, bias_v, W, ACT)
    _put(dx, row + 1 - W, d0, v, D, BD, EVEN)
    return c, g


@triton.jit
def bwd_rows(x, dy, dx, wt, bias, row0, i_d, o_d, m_d, D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr,
             BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """dx of the bulk tile at packed row ``row0``; returns its dweight/dbias partials ``(q0..q3, qb)``.

    Rows t0 .. t0+BT+W-2 produce dz (the last W-1 only feed dx of the tile's last rows); dx[t-(W-1)]
    is written once dz[t] is known, so the first W-1 rows of the tile write nothing yet.
    """
    EVEN: tl.constexpr = D % BD == 0
    d0 = i_d * BD  # int32 block-pointer offset
    # a bulk tile: its halo rows lie in the sequence (nothing masked, no initial state; x stands in for h0)
    w0, w1, w2, w3, bias_v, p3, p2, p1 = _tile_start(x, x, 0, wt, bias, row0, 0, d0, o_d, m_d, D, W, BD, HAS_BIAS,
                                                     EVEN, False, False)
    q0 = tl.zeros([BD], dtype=tl.float32)
    q1 = tl.zeros([BD], dtype=tl.float32)
    q2 = tl.zeros([BD], dtype=tl.float32)
    q3 = tl.zeros([BD], dtype=tl.float32)
    qb = tl.zeros([BD], dtype=tl.float32)
    # dz of rows before the tile only enter dx rows before the tile, which are not written
    g1 = tl.zeros([BD], dtype=tl.float32)
    g2 = g1
    g3 = g1
    # the first block is peeled: its first W-1 rows have no dx row of this tile to finish. Each block
    # prefetches the next one (clamped to the tile's last block, so no load leaves the tile).
    a, b, c, d = _block(x, row0, d0, D, BD, EVEN, True)
    ya, yb, yc, yd = _block(dy, row0, d0, D, BD, EVEN, True)
    rn = tl.minimum(row0 + ROWS, row0 + BT - ROWS)
    na, nb, nc, nd = _block(x, rn, d0, D, BD, EVEN, True)
    nya, nyb, nyc, nyd = _block(dy, rn, d0, D, BD, EVEN, True)
    p3, p2, p1, g3, g2, g1, q0, q1, q2, q3, qb = _bwd_block(
        dx, row0, d0, a, b, c, d, ya, yb, yc, yd, p3, p2, p1, g3, g2, g1, q0, q1, q2, q3, qb,
        w0, w1, w2, w3, bias_v, D, BD, W, ACT, EVEN, True)
    a, b, c, d, ya, yb, yc, yd = na, nb, nc, nd, nya, nyb, nyc, nyd
    for r0 in tl.range(ROWS, BT, ROWS):
        rn = tl.minimum(row0 + r0 + ROWS, row0 + BT - ROWS)
        na, nb, nc, nd = _block(x, rn, d0, D, BD, EVEN, True)
        nya, nyb, nyc, nyd = _block(dy, rn, d0, D, BD, EVEN, True)
        p3, p2, p1, g3, g2, g1, q0, q1, q2, q3, qb = _bwd_block(
            dx, row0 + r0, d0, a, b, c, d, ya, yb, yc, yd, p3, p2, p1, g3, g2, g1, q0, q1, q2, q3, qb,
            w0, w1, w2, w3, bias_v, D, BD, W, ACT, EVEN, False)
        a, b, c, d, ya, yb, yc, yd = na, nb, nc, nd, nya, nyb, nyc, nyd
    # W-1 rows past the tile (inside the sequence by the bulk predicate): their dz finish dx of the
    # tile's last W-1 rows; they add nothing to this tile's dweight
    r = row0 + BT
    a, ga = _bwd_past_row(x, dy, dx, r, d0, p3, p2, p1, g1, g2, g3, w0, w1, w2, w3, bias_v, D, BD, W, ACT, EVEN)
    if W > 2:
        b, gb = _bwd_past_row(x, dy, dx, r + 1, d0, p2, p1, a, ga, g1, g2, w0, w1, w2, w3, bias_v,
                              D, BD, W, ACT, EVEN)
        if W > 3:
            _bwd_past_row(x, dy, dx, r + 2, d0, p1, a, b, gb, ga, g1, w0, w1, w2, w3, bias_v, D, BD, W, ACT, EVEN)
    return q0, q1, q2, q3, qb
