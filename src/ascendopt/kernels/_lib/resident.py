"""CUDA only: size a persistent 1D core grid to the programs that are resident at once.

A program of the core grid loops over tasks ``pid, pid + programs, ...``. ``grid_size`` gives SMs x
``CUDA_PROGRAMS_PER_SM`` (16) programs, but an SM holds only as many 4-warp programs as its registers
allow (sm_90: 9 of the l2norm D=128 forward at 56 registers, 6 at 80, 4 at 127). The programs past that
queue behind the first wave and the last wave runs part-empty: 8192 tasks on 2112 programs with 9
resident per SM take 2 waves x 4 = 8 task times, where 1188 programs need 7 (ceil(8192 / 1188)).

So after a kernel variant's first launch its residency is computed from the compiled kernel (registers,
warps, shared memory; the occupancy rules of the CUDA programming guide) and later launches of that
variant size the grid from it, still through ``grid_size``: ``rounds = ceil(tasks / (SMs x resident))``
task rounds are unavoidable, and ``ceil(tasks / rounds)`` programs do them with equal shares, so the
last round is full too (l2norm D=8192: 4096 rows on 792 slots is 6 rounds; 683 programs run 6 rows
each instead of 792 programs leaving a last round of 136 rows). Off CUDA (npu: one program per vector
core; the cpu interpreter) nothing is learned and the grid is ``grid_size``'s. Only for kernels whose
results do not depend on the grid (no per-program partial sums).

Default: off for these grids. Timed as device time (the device held busy while the host enqueues,
``bench.Sampler``), the capped grid made the forward passes of rms_norm, l2norm and chunk_local_cumsum
1-14 % slower than the plain core grid on the H200 and left causal_conv1d's unchanged
(``grid_study.py`` at af65bd0, benchmarks/RESULTS.md): programs beyond the resident ones start as
soon as a slot frees, which hides each program's load-compute-store bubbles better than equal
shares do. ``ASCENDOPT_CUDA_RESIDENT_GRID=1`` turns it on, ``0`` off everywhere. Kernels that write one
partial row per program cap their grid by default (causal_conv1d's backward with ``BWD_GRID=2``, rms_norm's
backward; both through ``residency_before_launch``): there every program past the resident ones adds a
partial row to write and to sum again, and buys no concurrency.
"""

from __future__ import annotations

import os

from ascendopt.kernels._lib.common import grid_size, num_cores, on_cuda

_per_sm: dict = {}  # (id(kernel), variant) -> resident programs per SM; 0 = not CUDA / unknown
_grids: dict = {}  # ((id(kernel), variant), n_tasks, default grid) -> capped grid

# sm_90 facts, used when torch's device properties lack a field.
REGS_PER_SM = 65536
THREADS_PER_SM = 2048
SHARED_PER_SM = 233472
MAX_BLOCKS_PER_SM = 32
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256
SCHEDULERS = 4  # each of the SM's 4 warp schedulers owns a quarter of the register file
BLOCK_RESERVED_SHARED = 1024  # shared memory the driver reserves per block
GRID_CACHE_SIZE = 1024


def programs(kernel, variant: tuple, n_tasks: int, default: int) -> int:
    """Programs for a launch of ``n_tasks`` tasks of ``kernel`` compiled as ``variant``.

    ``default`` is the launcher's ``grid_size("vector", n_tasks)`` (cached in its plan); it is the answer
    until the variant's residency is known. Capped grids are memoized (host time per call matters).
    """
    key = (id(kernel), variant)
    per_sm = _per_sm.get(key)
    if not per_sm:
        return default
    grid_key = (key, n_tasks, default)
    grid = _grids.get(grid_key)
    if grid is None:
        if len(_grids) >= GRID_CACHE_SIZE:  # task counts vary with T (varlen batches): stay bounded
            _grids.clear()
        grid = _grids[grid_key] = capped_grid(per_sm, n_tasks, grid_size("vector", n_tasks))
    return grid


def capped_grid(per_sm: int, n_tasks: int, default: int) -> int:
    """``default`` programs cut to the task rounds ``per_sm`` resident programs per SM need, with equal
    shares (see the module docstring); ``default`` itself when ``per_sm`` is 0 (unknown / off)."""
    if not per_sm:
        return default
    rounds = -(-n_tasks // (per_sm * num_cores("vector")))
    return min(default, grid_size("vector", -(-n_tasks // rounds)))


def residency_before_launch(kernel, variant: tuple, compile_variant, default_on: bool) -> int:
    """Programs per SM of ``variant`` of ``kernel``, from ``compile_variant()`` (a compile without a
    launch, e.g. ``kernel.warmup(..., grid=(1,))``) the first time it is asked; 0 off CUDA or when
    ``ASCENDOPT_CUDA_RESIDENT_GRID`` (default ``default_on``) switches the cap off.

    For kernels whose result depends on the grid (one partial row per program): the grid is known
    before the first launch, so every call, the first included, sums its partials in the same order."""
    key = (id(kernel), variant)
    per_sm = _per_sm.get(key)
    if per_sm is None:
        per_sm = _per_sm[key] = resident_per_sm(compile_variant()) if capping(default_on) else 0
    return per_sm


def forget() -> None:
    """Drop every learned residency and capped grid (a policy switch mid-process, as in a grid study)."""
    _per_sm.clear()
    _grids.clear()


def capping(default: bool) -> bool:
    """Cap grids here: on CUDA, and ``enabled(default)``."""
    return on_cuda() and enabled(default)


def enabled(default: bool) -> bool:
    """``ASCENDOPT_CUDA_RESIDENT_GRID`` (``0`` off, anything else on); ``default`` when it is unset."""
    value = os.environ.get("ASCENDOPT_CUDA_RESIDENT_GRID")
    return default if value is None else value != "0"


def learn(kernel, variant: tuple, compiled) -> None:
    """Record the residency of ``variant`` from the object a launch returned (a CompiledKernel on CUDA)."""
    key = (id(kernel), variant)
    if key in _per_sm:
        return
    _per_sm[key] = resident_per_sm(compiled) if capping(default=False) else 0


def resident_per_sm(compiled, limits: tuple[int, int, int] | None = None) -> int:
    """Programs of ``compiled`` one SM runs at once (0 when the kernel object does not say).

    ``limits``: (registers, threads, shared bytes) per SM; None reads them from the current CUDA device.
    """
    if not getattr(compiled, "n_regs", None) and getattr(compiled, "module", "") is None \
            and hasattr(compiled, "_init_handles"):
        # a kernel compiled by ``warmup`` and not launched yet: Triton reads its register count when it
        # loads the binary (CompiledKernel._init_handles, triton 3.x), which a launch would do anyway
        compiled._init_handles()
    n_regs = getattr(compiled, "n_regs", 0) or 0
    meta = getattr(compiled, "metadata", None)
    warps = getattr(meta, "num_warps", 0) or 0
    if n_regs <= 0 or warps <= 0:
        return 0
    regs, threads, shared = limits or _device_limits()
    warp_regs = -(-n_regs * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = (regs // SCHEDULERS // warp_regs) * SCHEDULERS // warps
    by_threads = threads // (32 * warps)
    by_shared = shared // ((getattr(meta, "shared", 0) or 0) + BLOCK_RESERVED_SHARED)
    return max(1, min(MAX_BLOCKS_PER_SM, by_regs, by_threads, by_shared))


def _device_limits() -> tuple[int, int, int]:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return (getattr(props, "regs_per_multiprocessor", REGS_PER_SM),
            getattr(props, "max_threads_per_multi_processor", THREADS_PER_SM),
            getattr(props, "shared_memory_per_multiprocessor", SHARED_PER_SM))
