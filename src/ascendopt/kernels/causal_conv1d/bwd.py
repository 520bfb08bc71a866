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

dweight/dbias: fp32 partials ``[W+1, BD]`` go to slots of a ``[n_slots, W+1, D]`` scratch and a
finalize kernel sums the slots in a fixed order (seed: "fp32 partials + deterministic finalize"; no
atomics, so results are bit-identical run to run). When the program count is a multiple of the
channel-block count, every program keeps one channel block for all its tasks (``task % ND ==
pid % ND``) and accumulates its partials in registers: one slot per ND programs instead of one per
tile, which keeps the scratch traffic far below the tensor traffic (``PER_PROGRAM``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels._lib import common, resident
from ascendopt.kernels._lib.rowwise import dense, per_device
from ascendopt.kernels.causal_conv1d.plan import halo_rows, masked_bd, plan, transposed
from ascendopt.kernels.causal_conv1d.rows import bwd_rows
from ascendopt.kernels.causal_conv1d.tiles import (
    bwd_tile_gather,
    bwd_tile_loads,
    seq_bounds,
    state_ptrs,
    store_block,
    tile_of_task,
    x_rows,
)

# Finalize tile: BS slots x BDF channels per step. Fixed, tiny (32 x 64 fp32 = 8 KiB live) and not
# worth a tunable: the scratch it reads is ~1/BT of the bwd traffic.
_FIN_BS, _FIN_BD = 32, 64


@triton.jit
def _store_partials(part, slot, o_d, m_d, p0, p1, p2, p3, pb, D: tl.constexpr, W: tl.constexpr,
                    HAS_BIAS: tl.constexpr):
    """Row ``slot`` of ``part [n_slots, W+1, D]``: dweight taps 0..W-1, then dbias."""
    p = part + tl.cast(slot, tl.int64) * ((W + 1) * D) + o_d
    tl.store(p, p0, mask=m_d)
    tl.store(p + D, p1, mask=m_d)
    if W > 2:
        tl.store(p + 2 * D, p2, mask=m_d)
    if W > 3:
        tl.store(p + 3 * D, p3, mask=m_d)
    if HAS_BIAS:
        tl.store(p + W * D, pb, mask=m_d)


@triton.jit(do_not_specialize=["T", "n_tasks", "n_per_seq", "t_first", "n_head", "tail_start", "slot0"])
def _causal_conv1d_bwd_kernel(
    x, wt, bias, h0, dy, dht, dx, dh0, part, cu_seqlens, tiles,
    T, n_tasks, n_per_seq, t_first, n_head, tail_start, slot0,
    D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, HB: tl.constexpr,
    ACT: tl.constexpr, HAS_BIAS: tl.constexpr, USE_H0: tl.constexpr, HAS_DHT: tl.constexpr,
    IS_VARLEN: tl.constexpr, TAIL_MODE: tl.constexpr, TAPS: tl.constexpr, PER_PROGRAM: tl.constexpr,
):
    ND: tl.constexpr = (D + BD - 1) // BD
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    # per-program dweight/dbias accumulators (PER_PROGRAM: this program's channel block is pid % ND)
    q0 = tl.zeros([BD], dtype=tl.float32)
    q1 = tl.zeros([BD], dtype=tl.float32)
    q2 = tl.zeros([BD], dtype=tl.float32)
    q3 = tl.zeros([BD], dtype=tl.float32)
    qb = tl.zeros([BD], dtype=tl.float32)
    for task in tl.range(pid, n_tasks, n_prog):
        i_d = task % ND
        i_r = task // ND
        # every pointer below is rebound from the base arguments per task
        i_n, i_t = tile_of_task(i_r, tiles, n_per_seq, t_first, n_head, tail_start, IS_VARLEN, TAIL_MODE)
        bos, T_n = seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
        if TAIL_MODE == 2:
            t0 = 1 - W
        else:
            t0 = i_t * BT
        o_t = t0 + tl.arange(0, BT)
        o_d = i_d * BD + tl.arange(0, BD)
        m_d = o_d < D
        row0 = bos + tl.cast(i_t, tl.int64) * BT
        x_win = x + (row0 - (W - 1)) * D  # only dereferenced in bulk mode (block pointers)
        if TAIL_MODE == 0 and TAPS == 2:
            p0, p1, p2, p3, pb = bwd_rows(x, dy, dx, wt, bias, row0, i_d, o_d, m_d,
                                          D, W, BT, BD, ACT, HAS_BIAS)
        else:
            if TAIL_MODE == 0 and TAPS == 1:
                acc, dz0, xs0, xs1, xs2, xs3 = bwd_tile_gather(x, dy, wt, bias, row0, i_d, o_d, m_d,
                                                            D, W, BT, BD, HB, ACT, HAS_BIAS)
                p0 = tl.sum(dz0 * xs0.to(tl.float32), axis=0)
                p1 = tl.sum(dz0 * xs1.to(tl.float32), axis=0)
                p2 = tl.sum(dz0 * xs2.to(tl.float32), axis=0)
                p3 = tl.sum(dz0 * xs3.to(tl.float32), axis=0)
            else:
                acc, dz0 = bwd_tile_loads(x, h0, dy, dht, wt, bias, x_win, row0, bos, T_n, i_n, i_d, o_t, o_d,
                                       m_d,
                                       D, W, BT, BD, ACT, HAS_BIAS, USE_H0, HAS_DHT, TAIL_MODE)
                p0 = tl.zeros([BD], dtype=tl.float32)
                p1 = tl.zeros([BD], dtype=tl.float32)
                p2 = tl.zeros([BD], dtype=tl.float32)
                p3 = tl.zeros([BD], dtype=tl.float32)
                if TAIL_MODE != 2:  # dweight[w] = sum_t dz[t] * x[t - (W-1) + w]
                    for w in tl.static_range(W):
                        b_x = x_rows(x, h0, x_win, bos, T_n, i_n, o_t, o_d, m_d, i_d, w - (W - 1),
                                      D, W, BT, BD, USE_H0, TAIL_MODE)
                        if w == 0:
                            p0 = tl.sum(dz0 * b_x, axis=0)
                        if w == 1:
                            p1 = tl.sum(dz0 * b_x, axis=0)
                        if w == 2:
                            p2 = tl.sum(dz0 * b_x, axis=0)
                        if w == 3:
                            p3 = tl.sum(dz0 * b_x, axis=0)
            if TAIL_MODE == 0:
                p_dx = tl.make_block_ptr(dx + row0 * D, (BT, D), (D, 1), (0, i_d * BD), (BT, BD), (1, 0))
                store_block(p_dx, acc.to(dx.dtype.element_ty), D, BD)
            elif TAIL_MODE == 1:
                m_y = (o_t < T_n)[:, None] & m_d[None, :]
                p_dx = dx + (bos + o_t.to(tl.int64))[:, None] * D + o_d[None, :]
                tl.store(p_dx, acc.to(dx.dtype.element_ty), mask=m_y)
            else:
                m_h = ((o_t < 0) & (o_t >= 1 - W))[:, None] & m_d[None, :]
                p_h = state_ptrs(dh0, i_n, o_d, o_t + W - 1, D, W)
                tl.store(p_h, acc.to(dh0.dtype.element_ty), mask=m_h)
            pb = tl.sum(dz0, axis=0)
        if TAIL_MODE != 2:
            if PER_PROGRAM:
                q0 += p0
                q1 += p1
                q2 += p2
                q3 += p3
                qb += pb
            else:
                _store_partials(part, slot0 + i_r, o_d, m_d, p0, p1, p2, p3, pb, D, W, HAS_BIAS)
    if PER_PROGRAM:
        o_d = (pid % ND) * BD + tl.arange(0, BD)
        _store_partials(part, slot0 + pid // ND, o_d, o_d < D, q0, q1, q2, q3, qb, D, W, HAS_BIAS)


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


def _grid(n_tasks: int, nd: int, per_sm: int = 0) -> tuple[int, bool]:
    """Programs for one launch and whether they accumulate dweight per program.

    Per-program accumulation needs ``programs % nd == 0`` (each program then sees one channel block);
    the grid is rounded down to a multiple of nd when that idles at most 1/8 of the cores.
    ``per_sm`` > 0: the programs an SM holds at once (CUDA, from the compiled kernel) cap the grid.
    """
    # At most 4 programs per core: a bwd program needs 130-250 registers per thread on sm_90, so no
    # more are resident per SM anyway, and every program adds a (W+1) x BD fp32 partial row to write
    # and finalize. (npu: grid_size is already the core count.) With fewer resident than 4 (sm_90,
    # BT=32 BD=512: 167 registers, 3 per SM) the programs past them run as a second wave of whole
    # task loops; per_sm (tunable BWD_GRID=2) keeps the grid inside one wave.
    programs = min(common.grid_size("vector", n_tasks), (per_sm or 4) * common.num_cores("vector"))
    rounded = programs - programs % nd
    if rounded > 0 and 8 * rounded >= 7 * programs:
        return rounded, True
    return programs, False


def _halo_right(taps: int, W: int, HB: int) -> int:
    """Rows a bulk tile reads past its end: the gather path (taps 1) whole HB-row halos, the others W-1."""
    return HB if taps == 1 else W - 1


def _plan(B: int, T: int, D: int, W: int, BT: int, BD: int, HB: int, taps: int, has_h0: bool, per_sm: int,
          cu_seqlens) -> tuple[tuple, int]:
    """Launches ``(TAIL_MODE, tiles, BT, BD, n_tasks, programs, per_program, slot0)`` and the slot count."""
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    bulk, tail = plan((B, T), cu_seqlens, BT, W, halo_right=_halo_right(taps, W, HB))
    # (TAIL_MODE, tiles, BT, BD): bulk, tail, and one state tile per sequence (rows -(W-1)..-1) for dh0
    launches = [(0, bulk, BT, BD), (1, tail, BT, masked_bd(BT, BD))]
    if has_h0:
        launches.append((2, None, HB, masked_bd(HB, BD)))
    plans, n_slots = [], 0
    for mode, tiles, bt, bd in launches:
        nd = -(-D // bd)
        n_tasks = (N if tiles is None else tiles.n_tiles) * nd
        if n_tasks == 0:
            continue
        if mode == 2:
            grid, per_program = common.grid_size("vector", n_tasks), False
        else:  # per_sm is learned from the bulk kernel, which carries nearly all the work
            grid, per_program = _grid(n_tasks, nd, per_sm if mode == 0 else 0)
        plans.append((mode, tiles, bt, bd, n_tasks, grid, per_program, n_slots))
        if mode != 2:  # one partial row per ND programs, or per tile
            n_slots += grid // nd if per_program else n_tasks // nd
    return tuple(plans), n_slots


_plans: dict = {}


def causal_conv1d_bwd(x, dy, weight, bias=None, initial_state=None, dfinal_state=None, activation=None,
                      cu_seqlens=None, *, BT: int = 32, BD: int = 128, taps: int = 0, resident_grid: bool = False):
    """Backward of ``causal_conv1d_fwd``. x, dy ``[B,T,D]``; weight ``[D,W]``; initial_state and
    dfinal_state ``[N,D,W-1]``. Returns ``(dx, dweight, dbias, dinitial_state)``; dbias / dinitial_state
    are None when bias / initial_state are. d residual is ``dy`` itself (y = act(z) + residual).
    ``taps``: 0 shifted tile loads, 1 register shifts (``tl.gather``), 2 row streaming (bulk tiles).
    ``resident_grid``: cap the bulk launch at the programs the SMs hold at once (CUDA; from the bulk kernel
    compiled, not launched, before the first call's launches, so every call sums its dweight partials in one
    order; ``kernels._lib.resident.residency_before_launch``). The launch plan is memoized per shape and device
    (host time, see ``causal_conv1d_fwd``)."""
    import torch

    B, T, D = x.shape
    W = weight.shape[1]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    x, dy = dense(x), dense(dy)
    wt = transposed(weight)
    h0 = dense(initial_state) if initial_state is not None else None
    dht = dense(dfinal_state) if dfinal_state is not None else None
    dx = common.alloc((B, T, D), x.dtype, x.device)
    HB = halo_rows(W)
    assert BT >= HB, f"BT={BT} < halo {HB}"
    flags = {"D": D, "W": W, "HB": HB, "TAPS": taps, "ACT": activation == "silu",
             "HAS_BIAS": bias is not None, "USE_H0": h0 is not None, "HAS_DHT": dht is not None,
             "IS_VARLEN": cu_seqlens is not None}
    dh0 = common.alloc((N, D, W - 1), h0.dtype, x.device) if h0 is not None else None
    per_sm = 0
    if resident_grid:  # the kernel's constexprs and dtypes: what its registers depend on

        def compile_bulk():
            bulk, _ = plan((B, T), cu_seqlens, BT, W, halo_right=_halo_right(taps, W, HB))
            table, n_per_seq, t_first, n_head, tail_start = bulk.args()
            part_stub = torch.empty(1, dtype=torch.float32, device=x.device)  # its pointer type only
            return _causal_conv1d_bwd_kernel.warmup(
                x, wt, bias, h0, dy, dht, dx, dh0, part_stub, cu_seqlens, table, T, 1, n_per_seq, t_first,
                n_head, tail_start, 0, BT=BT, BD=BD, TAIL_MODE=0, PER_PROGRAM=True, grid=(1,), **flags)

        variant = (x.dtype, dy.dtype, BT, BD, *flags.values())
        per_sm = resident.residency_before_launch(_causal_conv1d_bwd_kernel, variant, compile_bulk, default_on=True)
    shape = (B, T, D, W, BT, BD, HB, taps, h0 is not None, per_sm)
    if cu_seqlens is None:
        plans, n_slots = per_device(_plans, shape, lambda: _plan(*shape, None))
    else:
        plans, n_slots = _plan(*shape, cu_seqlens)
    part = common.alloc((n_slots, W + 1, D), torch.float32, x.device)
    for mode, tiles, bt, bd, n_tasks, grid, per_program, slot0 in plans:
        args = tiles.args() if tiles is not None else (None, 1, 0, 0, 0)
        common.launch(_causal_conv1d_bwd_kernel, (grid,),
                      x, wt, bias, h0, dy, dht, dx, dh0, part, cu_seqlens, args[0],
                      T, n_tasks, *args[1:], slot0,
                      BT=bt, BD=bd, TAIL_MODE=mode, PER_PROGRAM=per_program, **flags)
    dweight = common.alloc((D, W), weight.dtype, x.device)
    dbias = common.alloc((D,), bias.dtype, x.device) if bias is not None else None
    n_fin = -(-D // _FIN_BD) * (W + (bias is not None))
    common.launch(_causal_conv1d_dw_finalize_kernel, (common.grid_size("vector", n_fin),),
                  part, dweight, dbias, n_slots, n_fin,
                  D=D, W=W, BS=_FIN_BS, BD=_FIN_BD, HAS_BIAS=bias is not None)
    return dx, dweight, dbias, dh0
