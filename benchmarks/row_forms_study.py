"""Forms of a row-wise forward at one wide row (l2norm, D=4096 by default) against fla's kernel, same run.

Issue 7's last l2norm gap: at B4_T4096_D4096 our forward measured 0.98x fla's one-row kernel although
both compile to the same per-thread code (``benchmarks/sass_stats.py``). This script times forms of the
same computation that differ only in program shape, loop and memory hints, each interleaved with fla's
kernel (``ascendopt.bench.compare``, device events, 20+ pairs), so the form that closes the gap is found
by measurement before the library changes. No form sets ``num_warps`` or ``num_stages`` (Ascend rule):
Triton's default 4 warps make every program 128 threads.

Forms (``--forms``, comma-separated; ``lib`` is the library's own launcher):

- ``loop<R>``: R rows a program inside the library's persistent ``tl.range`` loop (one pass per program).
- ``one<R>``: R rows a program, no loop (``task = program_id``).
- ``one<R>h``: as ``one<R>``, loads ``evict_first`` and stores ``.cs`` (streaming; read and written once).
- ``one<R>e``: as ``one<R>``, loads ``evict_first``, plain stores (a backward re-reads y, so y keeps its L2 lines).
- ``one<R>g``: as ``one<R>``, loads ``.cg`` (cached in L2 only, not in L1), plain stores.
- ``one<R>p``: as ``one<R>``, plain pointer loads and stores instead of block pointers.
- ``one<R>s``: as ``one<R>``, plain loads and ``.cs`` (streaming) stores.
- ``warp<R>``: R rows a program on a 3-D view that puts each row in one warp (R >= 4 fills the 4 warps;
  no cross-warp reduction, so no barrier between a program's loads and its stores). D a multiple of 256.
- ``two<R>``: each row in one warp as ``warp<R>``, in two passes over 256-column chunks: the sums of squares,
  then the chunks read again (from L2) and stored, four chunks at a time. D a multiple of 1024.
- ``pair<R>``: R rows a program on a ``[D/512, R, 512]`` view: a 512-column chunk spans two warps, so for R=2 each
  row sits on two warps (64 threads, 64 values a thread: fla's num_warps=2 program, two of them in one 128-thread
  program). D a multiple of 512.
- ``pre<R>``: R consecutive rows a program (grid = rows / R, every program the same work, all resident at once
  for R >= 16), one row a step; the next row's load is issued before this row's sum and store, so a program's
  loads stay in flight through its reduction barrier (software prefetch, no ``num_stages``).
- ``vec<R>``: as ``one<R>`` with 8-byte accesses (4 bf16) instead of 16-byte ones.
- ``tma<R>``: R rows a program, loaded and stored through tensor descriptors (TMA on sm_90). D a multiple of 256.
- ``rows<R>``: as ``warp<R>`` on a ``[R, D/256, 256]`` view: each row in one warp under Triton 3.6, where ``warp<R>``
  is not (see ``_view_rows``). D a multiple of 256.
- ``fla<W>``: not ours: fla's own one-row kernel launched at W warps (1, 2 or 4) instead of its autotuned pick, to
  see what the program width alone does to the same per-thread code.

Run on the CUDA host from the repository root, with fla-core 0.6.0 importable::

    python3 benchmarks/row_forms_study.py --out forms.json [--rows 16384 --d 4096 --forms lib,one1,one2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

EPS = 1e-6


@triton.jit
def _tile(x, y, rstd, eps, task, D: tl.constexpr, BR: tl.constexpr, HINTS: tl.constexpr, PLAIN: tl.constexpr):
    """One ``[BR, D]`` tile (rows ``task*BR ..``) of ``y = x * rsqrt(sum x^2 + eps)``, rstd stored fp32.
    ``HINTS``: 0 none, 1 evict-first loads and ``.cs`` stores, 2 evict-first loads, 3 ``.cg`` loads,
    4 ``.cs`` stores."""
    r0 = tl.cast(task, tl.int64) * BR
    o_r = tl.arange(0, BR)
    if PLAIN:
        offs = (r0 + o_r)[:, None] * D + tl.arange(0, D)[None, :]
        b_x = tl.load(x + offs).to(tl.float32)
    else:
        p_x = tl.make_block_ptr(x + r0 * D, (BR, D), (D, 1), (0, 0), (BR, D), (1, 0))
        p_y = tl.make_block_ptr(y + r0 * D, (BR, D), (D, 1), (0, 0), (BR, D), (1, 0))
        if HINTS == 1 or HINTS == 2:
            b_x = tl.load(p_x, eviction_policy="evict_first").to(tl.float32)
        elif HINTS == 3:
            b_x = tl.load(p_x, cache_modifier=".cg").to(tl.float32)
        else:
            b_x = tl.load(p_x).to(tl.float32)
    b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) + eps)
    b_y = (b_x * b_rstd[:, None]).to(y.dtype.element_ty)
    if PLAIN:
        tl.store(y + offs, b_y)
    elif HINTS == 1 or HINTS == 4:
        tl.store(p_y, b_y, cache_modifier=".cs")
    else:
        tl.store(p_y, b_y)
    tl.store(rstd + r0 + o_r, b_rstd)


@triton.jit
def _view_rows(x, y, rstd, eps, task, D: tl.constexpr, BR: tl.constexpr, W: tl.constexpr, ROWS_OUTER: tl.constexpr):
    """``_tile`` on a 3-D view of its BR rows cut into W-column pieces: ``[D/W, BR, W]``, or ``[BR, D/W, W]`` with
    ``ROWS_OUTER``. The view decides which dimension Triton gives the warps, and so how far a row's sum travels:

    - ``warp<R>``, W=256, rows inner: a warp's 32 lanes x 8 values span the 256 columns, so (Triton 3.7) the R rows
      lie across the warps and each row's sum stays inside one warp, its pieces held by each thread;
    - ``rows<R>``, W=256, rows outer: the same under Triton 3.6, the H200 host's. Which of the two outer dimensions
      gets the warps is Triton's tie-break between equally non-contiguous dimensions, and it differs by version
      (``sass_stats.py --case l2norm_forms``);
    - ``pair<R>``, W=512, rows inner: the 512 columns (64 threads x 8 values) take two warps and the rows the other
      two, so for R=2 each row's sum crosses two warps, as in fla's num_warps=2 program;
    - ``vec<R>``, W=4, rows outer: offsets contiguous over 4 values only, so each access moves 4 bf16 (8 bytes; a
      4-warp instruction spans 1 KB as fla's 2-warp one does with 16-byte accesses) instead of 8.

    The dimension each thread holds several values of (the pieces, or for W=4 the 4 values) is summed first."""
    r0 = tl.cast(task, tl.int64) * BR
    o_r = tl.arange(0, BR)
    o_p = tl.arange(0, D // W) * W
    o_w = tl.arange(0, W)
    if ROWS_OUTER:
        offs = (r0 + o_r)[:, None, None] * D + o_p[None, :, None] + o_w[None, None, :]
        b_x = tl.load(x + offs).to(tl.float32)
        if W <= 8:
            b_rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(b_x * b_x, axis=2), axis=1) + eps)
        else:
            b_rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(b_x * b_x, axis=1), axis=1) + eps)
        tl.store(y + offs, (b_x * b_rstd[:, None, None]).to(y.dtype.element_ty))
    else:
        offs = (r0 + o_r)[None, :, None] * D + o_p[:, None, None] + o_w[None, None, :]
        b_x = tl.load(x + offs).to(tl.float32)
        b_rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(b_x * b_x, axis=0), axis=1) + eps)
        tl.store(y + offs, (b_x * b_rstd[None, :, None]).to(y.dtype.element_ty))
    tl.store(rstd + r0 + o_r, b_rstd)


@triton.jit
def _prefetch_rows(x, y, rstd, eps, task, D: tl.constexpr, BR: tl.constexpr):
    """Rows ``task*BR .. +BR`` one at a time, each step issuing the next row's load (kept in x's dtype) before
    this row's sum and store: one row's memory traffic overlaps the last one's barrier. A runtime loop, so the
    compiler cannot hoist loads further ahead (an unrolled form held 96-125 registers at BR 8-32)."""
    r0 = tl.cast(task, tl.int64) * BR
    o_d = tl.arange(0, D)
    b_next = tl.load(x + r0 * D + o_d)
    for i in tl.range(0, BR - 1):
        b_x = b_next.to(tl.float32)
        b_next = tl.load(x + (r0 + i + 1) * D + o_d)
        b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=0) + eps)
        tl.store(y + (r0 + i) * D + o_d, (b_x * b_rstd).to(y.dtype.element_ty))
        tl.store(rstd + r0 + i, b_rstd)
    b_x = b_next.to(tl.float32)
    b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=0) + eps)
    tl.store(y + (r0 + BR - 1) * D + o_d, (b_x * b_rstd).to(y.dtype.element_ty))
    tl.store(rstd + r0 + BR - 1, b_rstd)


@triton.jit
def _warp_rows_two_pass(x, y, rstd, eps, task, D: tl.constexpr, BR: tl.constexpr):
    """Each row in one warp, in ``[BR, 256]`` chunks (a warp's 32 lanes x 8 values span 256 columns, so Triton
    lays the BR rows across the warps): a first pass sums the squares chunk by chunk, a second reads the chunks
    again (from L2: the row was just read) and stores ``y``. No value is held across the passes, and each row's
    sum stays inside its warp (no shared-memory reduction, no barrier between a program's warps)."""
    r0 = tl.cast(task, tl.int64) * BR
    o_r = tl.arange(0, BR)
    offs = (r0 + o_r)[:, None] * D + tl.arange(0, 256)[None, :]
    acc = tl.zeros([BR, 256], dtype=tl.float32)
    for c in tl.static_range(D // 256):
        b_x = tl.load(x + offs + c * 256).to(tl.float32)
        acc += b_x * b_x
    b_rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) + eps)
    # groups of 4 chunks: a group's loads are issued together (a load after a store to y may not move above it,
    # y might alias x), so the second pass waits on L2 D/1024 times, not D/256
    for g in tl.static_range(D // 1024):
        c0 = g * 1024
        b0 = tl.load(x + offs + c0).to(tl.float32)
        b1 = tl.load(x + offs + c0 + 256).to(tl.float32)
        b2 = tl.load(x + offs + c0 + 512).to(tl.float32)
        b3 = tl.load(x + offs + c0 + 768).to(tl.float32)
        tl.store(y + offs + c0, (b0 * b_rstd[:, None]).to(y.dtype.element_ty))
        tl.store(y + offs + c0 + 256, (b1 * b_rstd[:, None]).to(y.dtype.element_ty))
        tl.store(y + offs + c0 + 512, (b2 * b_rstd[:, None]).to(y.dtype.element_ty))
        tl.store(y + offs + c0 + 768, (b3 * b_rstd[:, None]).to(y.dtype.element_ty))
    tl.store(rstd + r0 + o_r, b_rstd)


@triton.jit
def _forms_kernel(x, y, rstd, eps, n_tasks, D: tl.constexpr, BR: tl.constexpr, LOOP: tl.constexpr,
                  HINTS: tl.constexpr, PLAIN: tl.constexpr, LAYOUT: tl.constexpr):
    pid = tl.program_id(0)
    if LAYOUT == 7:  # LAYOUTS: rows<R>
        _view_rows(x, y, rstd, eps, pid, D, BR, 256, True)
    elif LAYOUT == 5:  # vec<R>
        _view_rows(x, y, rstd, eps, pid, D, BR, 4, True)
    elif LAYOUT == 4:  # pre<R>
        _prefetch_rows(x, y, rstd, eps, pid, D, BR)
    elif LAYOUT == 3:  # pair<R>
        _view_rows(x, y, rstd, eps, pid, D, BR, 512, False)
    elif LAYOUT == 2:  # two<R>
        _warp_rows_two_pass(x, y, rstd, eps, pid, D, BR)
    elif LAYOUT == 1:  # warp<R>
        _view_rows(x, y, rstd, eps, pid, D, BR, 256, False)
    elif LOOP:
        for task in tl.range(pid, n_tasks, tl.num_programs(0)):
            _tile(x, y, rstd, eps, task, D, BR, HINTS, PLAIN)
    else:
        _tile(x, y, rstd, eps, pid, D, BR, HINTS, PLAIN)


@triton.jit
def _tma_kernel(xd, yd, rstd, eps, D: tl.constexpr, BR: tl.constexpr):
    """``tma<R>``: R rows a program moved by tensor descriptors (on sm_90 the TMA engine copies a box between
    global and shared memory, no per-thread address math) over a ``[rows*D/256, 256]`` view, one row a box of
    ``[D/256, 256]`` (a TMA box is at most 256 values a side)."""
    pid = tl.program_id(0)
    for i in tl.static_range(BR):
        row = pid * BR + i  # TMA box coordinates are int32 (the hardware's)
        b_x = xd.load([row * (D // 256), 0]).to(tl.float32)
        b_rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(b_x * b_x, axis=1), axis=0) + eps)
        yd.store([row * (D // 256), 0], (b_x * b_rstd).to(yd.dtype))
        tl.store(rstd + row, b_rstd)


# The forms other than loop<R>/one<R> (LAYOUT 0, the library's [BR, D] tile): their _forms_kernel branch (tma<R>
# has its own kernel).
LAYOUTS = {"warp": 1, "two": 2, "pair": 3, "pre": 4, "vec": 5, "tma": 6, "rows": 7}
D_MULTIPLE = {"warp": 256, "two": 1024, "pair": 512, "tma": 256, "rows": 256}  # the row width each of those needs


def parse_form(name: str) -> dict:
    """``"one2h"`` -> ``{"BR": 2, "LOOP": False, "HINTS": 1, "PLAIN": False, "LAYOUT": 0}`` (``LAYOUT``: 0 for
    loop<R> and one<R>, else ``LAYOUTS[prefix]``); ValueError if malformed."""
    for prefix, loop in (("loop", True), ("one", False), ("warp", False), ("two", False), ("pair", False),
                         ("pre", False), ("vec", False), ("tma", False), ("rows", False)):
        if name.startswith(prefix):
            rest = name[len(prefix):]
            flag = rest[-1] if rest and rest[-1] in "hegps" and prefix in ("loop", "one") else ""
            digits = rest[:-1] if flag else rest
            if digits.isdigit() and int(digits) & (int(digits) - 1) == 0 and int(digits) > 0:
                return {"BR": int(digits), "LOOP": loop, "HINTS": {"h": 1, "e": 2, "g": 3, "s": 4}.get(flag, 0),
                        "PLAIN": flag == "p",
                        "LAYOUT": LAYOUTS.get(prefix, 0)}
    raise ValueError(f"--forms: {name!r} is not lib, loop<R>, one<R>, one<R>h, one<R>e, one<R>g, one<R>p, "
                     "one<R>s, warp<R>, two<R>, pair<R>, pre<R>, vec<R>, tma<R> or rows<R> (R a power of two)")


def fla_warps(name: str) -> int | None:
    """``"fla2"`` -> 2 (fla's kernel at 2 warps); None for our forms; ValueError for other warp counts."""
    if not name.startswith("fla"):
        return None
    if name[3:] not in ("1", "2", "4"):
        raise ValueError(f"--forms: {name!r}: fla's kernel is timed at 1, 2 or 4 warps (fla1, fla2, fla4)")
    return int(name[3:])


def fla_at(warps: int):
    """fla's one-row l2norm forward (the kernel under its autotuner) launched at ``warps`` warps."""
    import torch

    def run(x):
        from fla.modules.norm import l2norm as fla_l2norm

        y = torch.empty_like(x)
        rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
        d = x.shape[-1]
        fla_l2norm.l2norm_fwd_kernel_row.fn[(x.numel() // d,)](
            x, y, rstd, EPS, d, BD=triton.next_power_of_2(d), num_warps=warps)  # noqa: AO101 - fla's kernel, not ours
        return y

    return run


def form_fn(name: str, n_rows: int, d: int):
    """A callable ``fn(x) -> y`` for form ``name`` (the library's launcher for ``lib``)."""
    import torch

    from ascendopt.kernels import l2norm

    if name == "lib":
        return lambda x: l2norm.l2norm_fwd(x)[0]
    warps = fla_warps(name)
    if warps is not None:
        return fla_at(warps)
    f = parse_form(name)
    if n_rows % f["BR"]:
        raise ValueError(f"--forms {name}: {n_rows} rows are not a multiple of {f['BR']}")
    layout = {code: prefix for prefix, code in LAYOUTS.items()}.get(f["LAYOUT"])
    multiple = D_MULTIPLE.get(layout, 1)
    if d % multiple:
        raise ValueError(f"--forms {name}: D={d} is not a multiple of {multiple}")
    n_tasks = n_rows // f["BR"]

    def run(x):
        y = torch.empty_like(x)
        rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
        if f["LAYOUT"] == LAYOUTS["tma"]:
            from triton.tools.tensor_descriptor import TensorDescriptor

            box = [d // 256, 256]
            xd, yd = (TensorDescriptor(t, [t.numel() // 256, 256], [256, 1], box) for t in (x, y))
            _tma_kernel[(n_tasks,)](xd, yd, rstd, EPS, D=d, BR=f["BR"])
        else:
            _forms_kernel[(n_tasks,)](x, y, rstd, EPS, n_tasks, D=d, **f)
        return y

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16384, help="rows (B*T); default 16384 = B4_T4096")
    ap.add_argument("--d", type=int, default=4096, help="row width, a power of two")
    ap.add_argument("--forms", default="lib,loop2,one1,one2,one4,one2h,one1h,one2p")
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trace", help="also write a torch.profiler chrome trace of the timed calls here (for "
                    "benchmarks/kernel_gaps.py: kernel durations and the gaps between them)")
    args = ap.parse_args()
    try:
        if args.pairs < 6:  # the A/B verdict's signed-rank test needs at least 6 pairs
            raise ValueError(f"--pairs {args.pairs}: at least 6 are needed")
        for option, path in (("--out", args.out), ("--trace", args.trace)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"{option} {path}: its folder does not exist")
        names = [n.strip() for n in args.forms.split(",") if n.strip()]
        fns = {n: form_fn(n, args.rows, args.d) for n in names}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    import torch

    from ascendopt import bench
    sys.path.insert(0, os.path.dirname(__file__))
    from kernels import copy_bandwidth_gbs
    from stage_breakdown import cuda_backend

    backend = cuda_backend("study")  # no usable cuda backend: one line, exit 5, nothing written
    if isinstance(backend, int):
        return backend
    try:
        from fla.modules.norm.l2norm import l2norm as fla_l2norm
    except ImportError as exc:
        print(f"error: fla-core 0.6.0 is not importable ({exc}); it is the peer this study times against",
              file=sys.stderr)
        return 5
    copy = copy_bandwidth_gbs(backend)
    gen = torch.Generator().manual_seed(0)
    sets = [((torch.randn(args.rows, args.d, generator=gen) + 0.1).to("cuda", torch.bfloat16),) for _ in range(3)]
    from ascendopt.kernels.l2norm import SPEC

    nbytes = SPEC.cost({"B": 1, "T": args.rows, "D": args.d}, "bf16", "fwd").bytes  # x in, y and rstd out
    rows = []
    profiler = None
    if args.trace:
        from torch.profiler import ProfilerActivity, profile

        profiler = profile(activities=[ProfilerActivity.CUDA])
        profiler.start()
    for name, fn in fns.items():
        got = fn(sets[0][0]).float()
        want = fla_l2norm(sets[0][0], eps=EPS).float()
        diff = float((got - want).abs().max())
        c = bench.compare(lambda x: fla_l2norm(x, eps=EPS), fn, inputs=sets, backend=backend, pairs=args.pairs)
        row = {"form": name, "ours_us": c.candidate.median_ms * 1e3, "fla_us": c.baseline.median_ms * 1e3,
               "speedup": c.speedup, "verdict": c.verdict, "reason": c.reason, "max_abs_diff": diff,
               "pct_copy": 100 * nbytes / (c.candidate.median_ms * 1e-3) / 1e9 / copy["gbs"]}
        rows.append(row)
        print(f"| {name} | {row['ours_us']:.1f} | {row['fla_us']:.1f} | {row['speedup']:.3f} | {c.verdict} | "
              f"{row['pct_copy']:.0f} % | {diff:.1e} |", flush=True)
    if profiler is not None:
        profiler.stop()
    with open(args.out, "w") as f:  # the timings first: a failing trace export must not lose them
        json.dump({"rows": args.rows, "d": args.d, "copy": copy, "forms": rows}, f, indent=1)
    if profiler is not None:
        profiler.export_chrome_trace(args.trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
