"""causal_conv1d bulk/tail tile plan (host side).

Bulk/tail split (seed: "Constexpr-split mutually exclusive DMA paths", "MTE DMA past packed
allocation"): a time tile is *bulk* when its whole halo window ``[t0-(W-1), t0+BT+halo_right)`` lies
inside its own sequence. Bulk tiles go to one launch with ``TAIL_MODE=0`` (unmasked block-pointer or
row loads, never past packed ``B*T``); all other tiles go to a second launch with ``TAIL_MODE=1``
(masked loads, initial state for t < 0). The host computes both tile sets, for varlen too (from
``cu_seqlens``, like fla's ``prepare_chunk_indices``), so no kernel needs the seed's runtime mode 2
that keeps both DMA paths alive: a single-chunk sequence simply has no bulk tile. ``plan_offset`` is the
forward's alternative split (tunable ``EDGES=5``): bulk tiles start W-1 rows into each sequence, so the rows
left are its first W-1 rows and a partial last tile, written as masked pieces of at most ``BT_EDGE`` rows;
``plan_shifted`` (``EDGES=8``) also shifts a sequence's last bulk tile back to end at its end, so only the head
rows are left.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import triton


@dataclass(frozen=True)
class TileSet:
    """The time tiles of one launch. Fixed length: arithmetic decode; varlen: an (i_n, i_t) table, or the
    tiles' first packed rows (``rows=True``, ``plan_shifted``); edge pieces (``plan_offset``): an
    (i_n, t_start, t_end) table."""

    n_tiles: int
    table: object | None = None  # int32 tensor [n_tiles, 2] (varlen), [n_tiles, 3] (pieces), [n_tiles, 1] (rows)
    n_per_seq: int = 1
    t_first: int = 0
    n_head: int = 0
    tail_start: int = 0

    def args(self):
        return self.table, self.n_per_seq, self.t_first, self.n_head, self.tail_start


def _ranges(length: int, BT: int, W: int, halo_right: int) -> tuple[int, int, int]:
    """(NT, lo, hi): tiles ``lo <= i_t < hi`` keep ``[t0-(W-1), t0+BT+halo_right)`` inside ``[0, length)``."""
    nt = triton.cdiv(length, BT)
    # lo: the first tile whose W-1 halo rows before it exist; hi: one past the last tile whose rows
    # plus halo_right rows after it end inside the sequence (the bwd reads dz W-1 rows ahead)
    lo = triton.cdiv(W - 1, BT)
    hi = max(0, (length - halo_right) // BT)
    return nt, lo, hi


def plan_fixed(B: int, T: int, BT: int, W: int, halo_right: int, split: int = 1) -> tuple[TileSet, TileSet]:
    """Bulk and tail tile sets for B sequences of length T; the tail tiles are ``BT // split`` rows (the
    rows the ``BT`` tiles outside the bulk cover, cut into ``split`` pieces, pieces past T dropped)."""
    nt, lo, hi = _ranges(T, BT, W, halo_right)
    n_bulk = max(0, hi - lo)
    nt_tail = triton.cdiv(T, BT // split)
    n_head = min(lo * split, nt_tail)
    tail_start = max(hi, lo) * split
    n_tail = n_head + max(0, nt_tail - tail_start)
    bulk = TileSet(B * n_bulk, None, max(n_bulk, 1), lo, 0, 0)
    tail = TileSet(B * n_tail, None, max(n_tail, 1), 0, n_head, tail_start)
    return bulk, tail


# Keyed by tensor identity and version: reading cu_seqlens costs a device sync, so it happens once
# per tensor (fla's prepare_chunk_indices caches the same way); an in-place edit bumps the version.
_plan_cache: dict = {}


def plan_varlen(cu_seqlens, BT: int, W: int, halo_right: int, split: int = 1, rows: bool = False
                 ) -> tuple[TileSet, TileSet]:
    """Bulk and tail (i_n, i_t) tables from ``cu_seqlens`` (one host read, cached per tensor); tail tiles of
    ``BT // split`` rows as in ``plan_fixed``. ``rows``: the bulk tiles as their first packed rows instead
    (``[n, 1]``, ``bos + i_t * BT``; see ``plan_offset``)."""

    def build(lens):
        bulk, tail, bos = [], [], 0
        for n, length in enumerate(lens):
            _, lo, hi = _ranges(length, BT, W, halo_right)
            bulk += [(bos + t * BT,) if rows else (n, t) for t in range(lo, hi)]
            tail += [(n, t) for t in range(triton.cdiv(length, BT // split))
                     if not lo * split <= t < hi * split]
            bos += length
        return _table(bulk, cu_seqlens.device, 1 if rows else 2), _table(tail, cu_seqlens.device)

    return _cached_varlen(cu_seqlens, (BT, W, halo_right, split, rows), build)


def plan_all(x_shape, cu_seqlens, BT: int) -> TileSet:
    """Every time tile of every sequence as one tile set, decoded like a tail set (``n_head`` = all).

    For kernels that mask every row to its sequence (``TAIL_MODE=3``), so bulk and edge tiles share a launch."""
    if cu_seqlens is None:
        B, T = x_shape[0], x_shape[1]
        nt = triton.cdiv(T, BT)
        return TileSet(B * nt, None, max(nt, 1), 0, nt, nt)

    def build(lens):
        return _table([(n, t) for n, length in enumerate(lens) for t in range(triton.cdiv(length, BT))],
                      cu_seqlens.device)

    return _cached_varlen(cu_seqlens, ("all", BT), build)


def plan_offset(x_shape, cu_seqlens, BT: int, W: int, piece: int, device, rows: bool = False
                ) -> tuple[TileSet, TileSet]:
    """Bulk tiles that start ``W-1`` rows into each sequence, and the edge pieces around them.

    Bulk tile ``i_t`` of a sequence covers rows ``[W-1 + i_t*BT, W-1 + (i_t+1)*BT)``: its halo starts at row
    ``i_t*BT >= 0``, so only the sequence's first ``W-1`` rows and its rows past the last whole tile are left
    (a sequence shorter than ``W-1+BT`` is left whole). Those go to ``(i_n, t_start, t_end)`` pieces of at most
    ``piece`` rows (``TAIL_MODE=5``: rows at or past ``t_end`` are not written, so no row is written twice).
    Bulk tiles decode as in ``plan`` (offset by ``W-1`` in the kernel, constexpr ``OFF``); varlen with ``rows``:
    a table of their first packed rows (``bos + W-1 + i_t * BT``; the kernel's ``STARTS``), one load a tile
    instead of the (i_n, i_t) entry and the sequence's ``cu_seqlens`` bounds after it."""
    off = W - 1

    def split(length: int) -> tuple[int, list]:
        n_bulk = max(0, (length - off) // BT)
        spans = [(0, off), (off + n_bulk * BT, length)] if n_bulk else [(0, length)]
        return n_bulk, [(s, min(s + piece, e)) for lo, e in spans for s in range(lo, e, piece)]

    if cu_seqlens is None:
        B, T = x_shape[0], x_shape[1]
        n_bulk, pieces = split(T)
        return (TileSet(B * n_bulk, None, max(n_bulk, 1), 0, 0, 0),
                _table([(n, *p) for n in range(B) for p in pieces], device, 3))

    def build(lens):
        bulk, pieces, bos = [], [], 0
        for n, length in enumerate(lens):
            n_bulk, mine = split(length)
            bulk += [(bos + off + t * BT,) if rows else (n, t) for t in range(n_bulk)]
            pieces += [(n, *p) for p in mine]
            bos += length
        return _table(bulk, cu_seqlens.device, 1 if rows else 2), _table(pieces, cu_seqlens.device, 3)

    return _cached_varlen(cu_seqlens, ("offset", BT, W, piece, rows), build)


def plan_shifted(x_shape, cu_seqlens, BT: int, W: int, piece: int, device) -> tuple[TileSet, TileSet]:
    """As ``plan_offset``, with a sequence's last bulk tile shifted back to end at the sequence's end.

    A sequence of at least ``W-1+BT`` rows gets bulk tiles starting at ``W-1, W-1+BT, ...`` and a last one at
    ``length-BT``: every row from ``W-1`` on is in a bulk tile, so its only edge piece is the head, rows
    ``[0, W-1)``. The last tile overlaps the one before it by up to ``BT-1`` rows; those rows are computed and
    written twice, with the same values (a row's output depends only on x rows ``t-(W-1)..t``). Shorter
    sequences are left whole to the pieces. The bulk set is a table of the tiles' first packed rows
    (``bos + t_start``, int32; fixed length too): a bulk tile needs nothing else (constexpr ``STARTS``)."""
    off = W - 1

    def split(length: int) -> tuple[list, list]:
        if length < off + BT:
            return [], [(s, min(s + piece, length)) for s in range(0, length, piece)]
        n_bulk = triton.cdiv(length - off, BT)
        starts = [off + j * BT for j in range(n_bulk - 1)] + [length - BT]
        return starts, [(s, min(s + piece, off)) for s in range(0, off, piece)]

    if cu_seqlens is None:
        B, T = x_shape[0], x_shape[1]
        starts, pieces = split(T)
        return (_table([(n * T + s,) for n in range(B) for s in starts], device, 1),
                _table([(n, *p) for n in range(B) for p in pieces], device, 3))

    def build(lens):
        bulk, pieces, bos = [], [], 0
        for n, length in enumerate(lens):
            starts, mine = split(length)
            bulk += [(bos + s,) for s in starts]
            pieces += [(n, *p) for p in mine]
            bos += length
        return _table(bulk, cu_seqlens.device, 1), _table(pieces, cu_seqlens.device, 3)

    return _cached_varlen(cu_seqlens, ("shifted", BT, W, piece), build)


def _table(rows, device, width: int = 2) -> TileSet:
    """``rows`` (tuples of ``width`` ints) as an int32 ``[len(rows), width]`` tensor on ``device``."""
    import torch

    t = torch.tensor(rows, dtype=torch.int32).reshape(-1, width).to(device)
    return TileSet(len(rows), t)


def _cached_varlen(cu_seqlens, key: tuple, build):
    """``build(sequence lengths)`` cached per ``cu_seqlens`` tensor and version and ``key``."""
    full_key = (id(cu_seqlens), cu_seqlens._version, *key)
    hit = _plan_cache.get(full_key)
    if hit is not None and hit[0]() is cu_seqlens:
        return hit[1]
    value = build((cu_seqlens[1:] - cu_seqlens[:-1]).tolist())
    if len(_plan_cache) > 64:
        _plan_cache.clear()
    _plan_cache[full_key] = (weakref.ref(cu_seqlens), value)
    return value


def plan(x_shape, cu_seqlens, BT: int, W: int, halo_right: int, split: int = 1, rows: bool = False
         ) -> tuple[TileSet, TileSet]:
    """``plan_fixed`` or ``plan_varlen`` (``rows``: varlen bulk tiles as first packed rows)."""
    B, T = x_shape[0], x_shape[1]
    if cu_seqlens is None:
        return plan_fixed(B, T, BT, W, halo_right, split)
    return plan_varlen(cu_seqlens, BT, W, halo_right, split, rows)


# Keyed like _plan_cache: (id, version, data_ptr) of the weight, checked against a weak reference.
_wt_cache: dict = {}


def transposed(weight):
    """``weight [D, W]`` as a contiguous ``[W, D]`` (one row per tap), cached per weight tensor.

    The transpose is a device copy plus its host launch on every call otherwise (host time is the
    limit of a short forward). An in-place update of the weight bumps its version and renews the
    copy; only writes through ``weight.data`` (which has its own version counter) would go unseen.
    """
    key = (id(weight), weight._version, weight.data_ptr())
    hit = _wt_cache.get(key)
    if hit is not None and hit[0]() is weight:
        return hit[1]
    wt = weight.detach().t().contiguous()  # the kernels take no autograd graph; a cached one would pin it
    if len(_wt_cache) > 64:
        _wt_cache.clear()
    _wt_cache[key] = (weakref.ref(weight), wt)
    return wt


def masked_bd(BT: int, BD: int) -> int:
    """Channel tile of masked (tail/state) tiles: BD, capped so the [BT, BD] tile stays <= 4096 elements.

    The row path (TAPS=3) runs wide BD (512+) on bulk tiles; tail tiles always take the 2-D tile path,
    whose live set grows with BT*BD (the UB model's tile stages, and registers on CUDA).
    """
    return min(BD, max(16, 4096 // BT))


def halo_rows(W: int) -> int:
    """Rows of the halo tile the gather path loads: W-1 padded to a power of two (>= 2)."""
    return max(2, 1 << (W - 2).bit_length())  # next power of two >= W-1 (plain ints: runs every call)
