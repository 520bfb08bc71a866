"""causal_conv1d forward: the Triton kernels and the launcher.

    z[t, d] = bias[d] + sum_w wt[w, d] * x[t - (W-1) + w, d]     (x at t < 0 from the initial state)
    y[t, d] = act(z[t, d]) + residual[t, d]                         act = identity | silu

Layout: x, y, residual ``[B, T, D]`` (varlen: ``B == 1`` and ``cu_seqlens``), weight ``[D, W]``
transposed on the host to ``wt [W, D]`` so each tap is one contiguous ``[BD]`` row; states
``[N, D, W-1]`` (slot ``W-2`` is the most recent token).

Launches per call (``plan``), by ``edges``: bulk tiles with ``TAIL_MODE=0`` (no masks;
the taps by the ``taps`` path: shifted tile loads, ``tl.gather`` register shifts, or row streaming, see
``tiles`` and ``rows``) and the remaining tiles with ``TAIL_MODE=1`` (masked
2-D tiles, initial state for t < 0); or, on the row path, the remaining tiles as masked rows
(``TAIL_MODE=3``), or every tile in one launch of masked rows; or bulk tiles that start W-1 rows into each
sequence (constexpr ``OFF``) and the rows left around them as masked pieces (``TAIL_MODE=5``, or
``TAIL_MODE=6`` on the row path); or those bulk tiles with each sequence's last one shifted back to end at the
sequence's end (tile starts read from a table, constexpr ``STARTS``), so only each sequence's first W-1 rows are
a piece. A last, tiny kernel writes the final state.
"""

from __future__ import annotations

from typing import NamedTuple

import triton
import triton.language as tl

from ascendopt.kernels._lib import common, resident, streams
from ascendopt.kernels._lib.rowwise import dense, per_device
from ascendopt.kernels.causal_conv1d.plan import (
    halo_rows,
    masked_bd,
    plan,
    plan_all,
    plan_offset,
    plan_shifted,
    transposed,
)
from ascendopt.kernels.causal_conv1d.rows import fwd_rows
from ascendopt.kernels.causal_conv1d.tiles import (
    load_block,
    load_rows,
    seq_bounds,
    state_ptrs,
    store_block,
    tile_of_task,
    window_rows,
)


@triton.jit(do_not_specialize=["T", "n_tasks", "n_per_seq", "t_first", "n_head", "tail_start"])
def _causal_conv1d_fwd_kernel(
    x, wt, bias, residual, h0, y, cu_seqlens, tiles,
    T, n_tasks, n_per_seq, t_first, n_head, tail_start,
    D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, HB: tl.constexpr,
    ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, USE_H0: tl.constexpr,
    IS_VARLEN: tl.constexpr, TAIL_MODE: tl.constexpr, TAPS: tl.constexpr, AHEAD: tl.constexpr,
    OFF: tl.constexpr, STARTS: tl.constexpr,
):
    ND: tl.constexpr = (D + BD - 1) // BD
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_prog):
        i_d = task % ND
        i_r = task // ND
        # Decode the time tile [t_s, t_s + BT) (rows from t_e on are not written); every pointer below is
        # rebound from the base arguments per task.
        if TAIL_MODE == 5 or TAIL_MODE == 6:  # an edge piece (i_n, t_start, t_end) of plan_offset
            i_n = tl.load(tiles + 3 * i_r)
            t_s = tl.load(tiles + 3 * i_r + 1)
            t_e = tl.load(tiles + 3 * i_r + 2)
            bos, T_n = seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
            row0 = bos + tl.cast(t_s, tl.int64)  # packed row of the tile's first output
        elif STARTS:
            # a bulk tile given by its first packed row (plan_shifted; varlen plan/plan_offset with rows=True):
            # that is all it needs (its rows and halo lie in its sequence, nothing is masked, no initial state
            # is read), so the sequence is not decoded
            row0 = tl.cast(tl.load(tiles + i_r), tl.int64)
            i_n = 0
            t_s = 0
            T_n = 0
            t_e = 0
        else:
            i_n, i_t = tile_of_task(i_r, tiles, n_per_seq, t_first, n_head, tail_start, IS_VARLEN, TAIL_MODE)
            t_s = i_t * BT + OFF  # OFF: bulk tiles start W-1 rows into the sequence (plan_offset), else 0
            bos, T_n = seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
            t_e = T_n
            # (this form, not bos + t_s: sm_90 then keeps the row kernel at 64 registers, 8 programs an SM)
            row0 = bos + tl.cast(i_t, tl.int64) * BT + OFF
        o_d = i_d * BD + tl.arange(0, BD)
        m_d = o_d < D
        if TAIL_MODE == 0 and TAPS == 2:
            fwd_rows(x, wt, bias, residual, y, h0, i_n, row0, t_s, T_n, i_d, o_d, m_d, D, W, BT, BD, ACT,
                     HAS_BIAS, HAS_RES, AHEAD, False, USE_H0)
        elif TAIL_MODE == 3 or TAIL_MODE == 6:
            # any tile (3) or edge piece (6), row path, every row masked to the sequence (3: t_e = T_n) or
            # to the piece (6: rows from t_e on are neither read nor written; row t's taps are rows <= t)
            fwd_rows(x, wt, bias, residual, y, h0, i_n, row0, t_s, t_e, i_d, o_d, m_d, D, W, BT, BD, ACT,
                     HAS_BIAS, HAS_RES, AHEAD, True, USE_H0)
        else:
            acc = tl.zeros([BT, BD], dtype=tl.float32)
            if TAIL_MODE == 0 and TAPS == 1:
                # one read of the tile and of its HB-row halo; the taps are register shifts
                b_m = load_rows(x + row0 * D, i_d, BT, D, BD)
                b_h = load_rows(x + (row0 - HB) * D, i_d, HB, D, BD)
                for w in tl.static_range(W):
                    b_w = tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)
                    if w == W - 1:
                        b_x = b_m
                    else:
                        b_x = window_rows(b_h, b_m, HB + w - (W - 1), BT, HB, BT, BD)
                    acc += b_x.to(tl.float32) * b_w[None, :]
            elif TAIL_MODE == 0:
                # W windows of one [BT+W-1, D] block, shifted by a row each: the overlap is served by
                # the cache, so HBM reads x once. Block-pointer offsets stay int32 (w, i_d * BD).
                x_win = x + (row0 - (W - 1)) * D  # halo rows are inside the sequence (bulk predicate)
                for w in tl.static_range(W):
                    p_x = tl.make_block_ptr(x_win, (BT + W - 1, D), (D, 1), (w, i_d * BD), (BT, BD), (1, 0))
                    if D % BD == 0:
                        b_x = tl.load(p_x)
                        b_w = tl.load(wt + w * D + o_d)
                    else:
                        b_x = tl.load(p_x, boundary_check=(1,))
                        b_w = tl.load(wt + w * D + o_d, mask=m_d, other=0.0)
                    acc += b_x.to(tl.float32) * b_w.to(tl.float32)[None, :]
            else:
                o_t = t_s + tl.arange(0, BT)
                for w in tl.static_range(W):
                    src = o_t - (W - 1) + w
                    m_x = (src >= 0) & (src < T_n)
                    p_x = x + (bos + src.to(tl.int64))[:, None] * D + o_d[None, :]
                    b_x = tl.load(p_x, mask=m_x[:, None] & m_d[None, :], other=0.0).to(tl.float32)
                    if USE_H0:
                        # x[t] for -(W-1) <= t < 0 is initial_state[n, d, t + W - 1]
                        m_h = (src < 0) & (src >= 1 - W)
                        p_h = state_ptrs(h0, i_n, o_d, src + W - 1, D, W)
                        b_x += tl.load(p_h, mask=m_h[:, None] & m_d[None, :], other=0.0).to(tl.float32)
                    b_w = tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)
                    acc += b_x * b_w[None, :]
            if HAS_BIAS:
                acc += tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
            if ACT:
                acc = acc * tl.sigmoid(acc)
            # residual after the activation: y = act(conv(x) + bias) + residual (fla's definition)
            if TAIL_MODE == 0:
                p_y = tl.make_block_ptr(y + row0 * D, (BT, D), (D, 1), (0, i_d * BD), (BT, BD), (1, 0))
                if HAS_RES:
                    p_r = tl.make_block_ptr(residual + row0 * D, (BT, D), (D, 1), (0, i_d * BD), (BT, BD),
                                            (1, 0))
                    acc += load_block(p_r, D, BD).to(tl.float32)
                store_block(p_y, acc.to(y.dtype.element_ty), D, BD)
            else:
                m_y = (o_t < t_e)[:, None] & m_d[None, :]
                off_y = (bos + o_t.to(tl.int64))[:, None] * D + o_d[None, :]
                if HAS_RES:
                    acc += tl.load(residual + off_y, mask=m_y, other=0.0).to(tl.float32)
                tl.store(y + off_y, acc.to(y.dtype.element_ty), mask=m_y)


@triton.jit(do_not_specialize=["T", "n_tasks"])
def _causal_conv1d_state_kernel(
    x, h0, ht, cu_seqlens, T, n_tasks,
    D: tl.constexpr, W: tl.constexpr, BS: tl.constexpr, BD: tl.constexpr,
    USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    """Final state ``ht[n, d, j] = x[T_n - (W-1) + j]`` (from the initial state when that is < 0)."""
    ND: tl.constexpr = (D + BD - 1) // BD
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    for task in tl.range(pid, n_tasks, n_prog):
        i_d = task % ND
        i_n = task // ND
        bos, T_n = seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
        o_d = i_d * BD + tl.arange(0, BD)
        m_d = o_d < D
        o_j = tl.arange(0, BS)
        m_j = o_j < W - 1
        src = T_n - (W - 1) + o_j
        b_s = tl.load(x + (bos + src.to(tl.int64))[:, None] * D + o_d[None, :],
                      mask=(m_j & (src >= 0))[:, None] & m_d[None, :], other=0.0)
        if USE_H0:
            p_h = state_ptrs(h0, i_n, o_d, src + W - 1, D, W)
            b_s += tl.load(p_h, mask=(m_j & (src < 0))[:, None] & m_d[None, :], other=0.0)
        p_s = state_ptrs(ht, i_n, o_d, o_j, D, W)
        tl.store(p_s, b_s.to(ht.dtype.element_ty), mask=m_j[:, None] & m_d[None, :])


# ``edges``: how the tiles whose halo leaves their sequence run (row path only; the tile paths always 1).
EDGES_TILES = 1  # a second launch on the masked 2-D tile path (TAIL_MODE=1)
EDGES_ONE_LAUNCH = 2  # one launch for every tile, rows masked to their sequence (TAIL_MODE=3)
EDGES_ROWS = 3  # bulk tiles unmasked, then the edge tiles as masked rows (TAIL_MODE=3)
EDGES_SIDE_STREAM = 4  # as EDGES_TILES, the edge launch on a side stream beside the bulk one (CUDA; else 1)
EDGES_OFFSET = 5  # as EDGES_SIDE_STREAM, bulk tiles W-1 rows into each sequence, edges as pieces (plan_offset)
EDGES_ROWS_SIDE = 6  # as EDGES_ROWS (edge tiles of edge_bt rows), the edge launch on a side stream (CUDA; else 3)
EDGES_OFFSET_ROWS = 7  # as EDGES_OFFSET, the pieces as masked rows (TAIL_MODE=6)
EDGES_SHIFTED = 8  # as EDGES_OFFSET_ROWS, each sequence's last bulk tile shifted to end at its end (plan_shifted)
SIDE_STREAM_EDGES = (EDGES_SIDE_STREAM, EDGES_OFFSET, EDGES_ROWS_SIDE, EDGES_OFFSET_ROWS, EDGES_SHIFTED)


class Launch(NamedTuple):
    """One launch of the forward kernel: its ``TAIL_MODE``, time and channel tiles, bulk offset ``OFF``,
    whether its tiles are first packed rows (``STARTS``), tasks, programs and tile-set arguments
    (``TileSet.args``)."""

    mode: int
    bt: int
    bd: int
    off: int
    starts: bool
    n_tasks: int
    programs: int
    tile_args: tuple


def _plan(B: int, T: int, D: int, W: int, BT: int, BD: int, cu_seqlens, edges: int = EDGES_TILES,
          edge_bd: int = 0, edge_bt: int = 0, device=None) -> tuple[Launch, ...]:
    """Launches by ``edges`` (``EDGES_*``): the bulk tiles and the edge tiles on the tile path (tiles of
    ``edge_bt`` rows, 0 = ``BT``, which it divides; channel tile ``edge_bd``, 0 = ``masked_bd``), the edge tiles
    as masked rows (``edge_bt`` rows, channel tile BD), all tiles in one launch, or bulk tiles offset by W-1
    rows and edge pieces of at most ``edge_bt`` rows, on the tile or the row path, or those bulk tiles with the
    last one of each sequence shifted to its end and its head rows as pieces (``device``: where a fixed-length
    tile table goes)."""
    bt_e = edge_bt or BT
    bd_e = edge_bd or masked_bd(bt_e, BD)
    # Varlen bulk tiles of the row-path edge modes as their first packed rows (STARTS): one load a tile, not an
    # (i_n, i_t) entry and then its sequence's bounds. H200 (benchmarks/RESULTS.md, CUDA defaults): that decode
    # chain cost the varlen bulk launch 1.2 % a row against fixed length.
    rows = cu_seqlens is not None and edges >= EDGES_ROWS
    off = 0 if rows else W - 1  # plan_offset's first packed rows already include the W-1 offset
    # (mode, tiles, BT, BD, OFF, STARTS) per launch
    if edges == EDGES_ONE_LAUNCH:  # (EDGES_SIDE_STREAM plans as EDGES_TILES; the launcher overlaps them)
        sets = ((3, plan_all((B, T), cu_seqlens, BT), BT, BD, 0, False),)
    elif edges in (EDGES_ROWS, EDGES_ROWS_SIDE):  # masked rows take the bulk channel tile
        bulk, tail = plan((B, T), cu_seqlens, BT, W, halo_right=0, split=BT // bt_e, rows=rows)
        sets = ((0, bulk, BT, BD, 0, rows), (3, tail, bt_e, BD, 0, False))
    elif edges in (EDGES_OFFSET, EDGES_OFFSET_ROWS):
        bulk, pieces = plan_offset((B, T), cu_seqlens, BT, W, bt_e, device, rows=rows)
        piece = (6, pieces, bt_e, BD) if edges == EDGES_OFFSET_ROWS else (5, pieces, bt_e, bd_e)
        sets = ((0, bulk, BT, BD, off, rows), (*piece, 0, False))
    elif edges == EDGES_SHIFTED:
        bulk, pieces = plan_shifted((B, T), cu_seqlens, BT, W, bt_e, device)
        sets = ((0, bulk, BT, BD, 0, True), (6, pieces, bt_e, BD, 0, False))
    else:
        bulk, tail = plan((B, T), cu_seqlens, BT, W, halo_right=0, split=BT // bt_e, rows=rows)
        sets = ((0, bulk, BT, BD, 0, rows), (1, tail, bt_e, bd_e, 0, False))
    launches = []
    for mode, tiles, bt, bd, tile_off, starts in sets:
        n_tasks = tiles.n_tiles * -(-D // bd)
        if n_tasks:
            launches.append(Launch(mode, bt, bd, tile_off, starts, n_tasks, common.grid_size("vector", n_tasks),
                                   tiles.args()))
    return tuple(launches)


_plans: dict = {}


def causal_conv1d_fwd(x, weight, bias=None, residual=None, initial_state=None, output_final_state=False,
                      activation=None, cu_seqlens=None, *, BT: int = 32, BD: int = 128, taps: int = 0,
                      ahead: int = 1, resident_grid: bool = False, silu: int = 1, edges: int = EDGES_TILES,
                      edge_bd: int = 0, edge_bt: int = 0):
    """Forward. x ``[B,T,D]``, weight ``[D,W]``, bias ``[D]``, residual ``[B,T,D]``, initial_state
    ``[N,D,W-1]`` (N = B, or the number of sequences with ``cu_seqlens``). Returns ``(y, final_state)``,
    final_state ``[N,D,W-1]`` in x's dtype or None. ``taps``: how bulk tiles form the W taps (0 shifted
    tile loads, 1 register shifts with ``tl.gather``, 2 row streaming; see the module docstring);
    ``ahead``: 4-row blocks the row path loads ahead (1 or 2); ``resident_grid``: size the grid by the
    programs an SM holds at once (``kernels._lib.resident``, CUDA only) instead of one program per task;
    ``silu``: 1 ``z * sigmoid(z)``, 2 ``z / (1 + exp2(-z log2 e))`` (row path only); ``edges``: how tiles at
    sequence edges run (``EDGES_*``; row path only, the tile paths always take ``EDGES_TILES``);
    ``edge_bd``: channel tile of the edge tiles on the tile path (0: ``masked_bd(edge_bt, BD)``); ``edge_bt``:
    their time tile, a divisor of BT (0: BT).

    Host time matters (a call is ~70-110 us of device time on the H200): the launch plan is memoized
    per shape and device, the transposed weight per weight tensor and version (``transposed``)."""
    B, T, D = x.shape
    W = weight.shape[1]
    x = dense(x)
    wt = transposed(weight)  # [W, D]: one contiguous row per tap
    y = common.alloc((B, T, D), x.dtype, x.device)
    HB = halo_rows(W)
    assert BT >= HB, f"BT={BT} < halo {HB}"  # bulk tiles start at t0 >= BT, so the halo stays inside
    assert not edge_bt or BT % edge_bt == 0, f"edge tile {edge_bt} does not divide BT={BT}"
    if taps != 2:
        edges = EDGES_TILES
    if cu_seqlens is None:  # varlen tile sets depend on cu_seqlens' values (plan_varlen caches them)
        launches = per_device(_plans, (B, T, D, W, BT, BD, edges, edge_bd, edge_bt, x.device),
                              lambda: _plan(B, T, D, W, BT, BD, None, edges, edge_bd, edge_bt, x.device))
    else:
        launches = _plan(B, T, D, W, BT, BD, cu_seqlens, edges, edge_bd, edge_bt)
    flags = {"D": D, "W": W, "HB": HB, "TAPS": taps, "AHEAD": ahead,
             "ACT": 2 if activation == "silu" and silu == 2 else activation == "silu", "HAS_BIAS": bias is not None,
             "HAS_RES": residual is not None, "USE_H0": initial_state is not None,
             "IS_VARLEN": cu_seqlens is not None}
    res = dense(residual) if residual is not None else None
    h0 = dense(initial_state) if initial_state is not None else None

    def run(launch: Launch) -> None:
        table, n_per_seq, t_first, n_head, tail_start = launch.tile_args
        programs = launch.programs
        variant = None
        if resident_grid:  # what the compiled kernel depends on: its constexprs and dtypes
            variant = (x.dtype, launch.mode, launch.bt, launch.bd, launch.off, launch.starts, *flags.values())
            programs = resident.programs(_causal_conv1d_fwd_kernel, variant, launch.n_tasks, programs)
        compiled = common.launch(_causal_conv1d_fwd_kernel, (programs,),
                                 x, wt, bias, res, h0, y, cu_seqlens, table,
                                 T, launch.n_tasks, n_per_seq, t_first, n_head, tail_start, TAIL_MODE=launch.mode,
                                 BT=launch.bt, BD=launch.bd, OFF=launch.off, STARTS=launch.starts, **flags)
        if variant is not None:
            resident.learn(_causal_conv1d_fwd_kernel, variant, compiled)

    if edges in SIDE_STREAM_EDGES and len(launches) == 2 and common.on_cuda():
        streams.overlapped(lambda: run(launches[1]), lambda: run(launches[0]), x.device)
    else:
        for launch in launches:
            run(launch)
    final_state = None
    if output_final_state:
        N = B if cu_seqlens is None else cu_seqlens.numel() - 1
        final_state = common.alloc((N, D, W - 1), x.dtype, x.device)
        n_tasks = N * -(-D // BD)
        if n_tasks:
            common.launch(_causal_conv1d_state_kernel, (common.grid_size("vector", n_tasks),),
                          x, h0, final_state, cu_seqlens, T, n_tasks, D=D, W=W,
                          BS=triton.next_power_of_2(W - 1), BD=BD, USE_H0=h0 is not None,
                          IS_VARLEN=cu_seqlens is not None)
    return y, final_state
