"""Helpers every bundled kernel launcher uses: core counts, output allocation, interpreter facts, spec
dtype names, and the backend's UB budget (``ub_context``, ``requested_tile``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

_poison = {"on": False}

# Spec dtype names (``KernelSpec.dtypes``) -> torch dtype attribute names (named, so no torch import here).
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(dtype: str):
    """The torch dtype of a spec dtype name: ``"bf16"`` -> ``torch.bfloat16``."""
    import torch

    return getattr(torch, TORCH_DTYPES[dtype])


def dtype_name(dtype) -> str:
    """``torch.bfloat16`` -> ``"bf16"`` (names as in ``KernelSpec.dtypes``); names pass through."""
    if isinstance(dtype, str):
        return dtype
    return {f"torch.{torch_name}": name for name, torch_name in TORCH_DTYPES.items()}[str(dtype)]


def interpreting() -> bool:
    """True when kernels run in Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def on_cuda() -> bool:
    """True when the current backend is cuda (the place for CUDA-only tile and grid choices)."""
    from ascendopt.device import backends

    return backends.current().name == "cuda"


def ub_context() -> tuple[int, str, bool]:
    """(UB bytes per vector core, backend name, whether UB is enforced) of the current backend."""
    from ascendopt.device import backends

    backend = backends.current()
    info = backend.info()
    return info.ub_bytes, backend.name, info.ub_enforced


def requested_tile(tunable: str, requested: int, tile: dict[str, int], multiplier: float, margin: float,
                   context: tuple[int, str, bool], fixed: str) -> int:
    """``requested``, a tunable's explicit tile size (> 0), once ``tile`` (fp32, holding it) is checked
    against the UB budget of ``context`` (``ub_context()``). On a backend that enforces UB an overflow
    is a UsageError (``fixed`` names the other tile sizes in it); elsewhere the value is taken as given."""
    from ascendopt.device import ub
    from ascendopt.errors import UsageError

    ub_bytes, _, enforced = context
    check = ub.check(tile, "fp32", multiplier, ub_bytes, margin)
    if enforced and not check.safe:
        raise UsageError(f"{tunable}={requested} with {fixed}: {check.describe()}",
                         hint=f"use {tunable}=0 (UB model) or a smaller value")
    return requested


def num_cores(bound: str) -> int:
    """Cores for a 1D core grid: cube cores for cube-bound kernels, vector cores otherwise.

    On NPU these are ``num_aicore`` / ``num_vectorcore`` (A2: 24 / 48); on CUDA the SM count.
    """
    from ascendopt.device import backends

    return backends.current().info().cores_for(bound)


@contextmanager
def nan_poisoning() -> Iterator[None]:
    """Within this block, ``alloc`` fills new outputs with NaN so an unwritten region fails the gate."""
    old = _poison["on"]
    _poison["on"] = True
    try:
        yield
    finally:
        _poison["on"] = old


def alloc(shape, dtype, device, fill_zero: bool = False):
    """Allocate an output. Launchers never use torch.empty directly, so the gate can poison outputs."""
    import torch

    if fill_zero:
        return torch.zeros(shape, dtype=dtype, device=device)
    if _poison["on"] and (dtype.is_floating_point):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def launch(kernel, grid, *args, **kwargs):
    """Launch ``kernel[grid](*args, **kwargs)`` under a profiler range named after the kernel.

    On npu/cuda the device profiler already records Triton kernels by name; under the CPU
    interpreter the launch is plain Python, so the named range is how a CPU profile proves the
    bundled kernel ran (kernel-hit check). Never pass num_warps/num_stages: Ascend ignores or
    rejects them (seed: "Hard constraint (NPU launch params)").
    """
    import torch

    name = getattr(getattr(kernel, "fn", kernel), "__name__", str(kernel))
    if interpreting():
        with torch.profiler.record_function(name):
            return kernel[grid](*args, **kwargs)
    return kernel[grid](*args, **kwargs)


def grid_size(bound: str, tasks: int, streaming: bool = False) -> int:
    """Programs of a 1D core grid: one per core (never more than there are tasks).

    On CUDA an SM runs several programs at once and num_warps may not be set (Ascend rule), so
    the grid is SMs x ``cuda_programs_per_sm(streaming)`` to keep the memory system busy (0: one
    program per task); on npu it is the exact core count (num_aicore for cube-bound, num_vectorcore for
    vector-bound kernels). ``streaming``: a kernel whose programs keep no per-program partial results.
    """
    cores = num_cores(bound)
    if on_cuda():
        per_sm = cuda_programs_per_sm(streaming)
        cores = cores * per_sm if per_sm else tasks
    return max(1, min(cores, tasks))


CUDA_PROGRAMS_PER_SM = 16  # best of 8/16/32 for the vector kernels on the H200 (benchmarks/RESULTS.md)
# Row kernels that only stream rows (rms_norm's forward, l2norm's forward and backward) launch one
# program per task on CUDA (0): the hardware starts a program whenever a slot frees, and no persistent
# loop waits on its own tile's loads. H200, device time (benchmarks/RESULTS.md, CUDA defaults): l2norm
# B4_T4096_H32_D128 forward 66.7 us against 68.0 us at 32 per SM (16 rows a tile: 65.4 us, fla 65.1).
# Kernels that write one partial row per program (rms_norm's backward) keep a bounded grid: every
# program past the resident ones adds a partial row to write and sum.
CUDA_STREAMING_PROGRAMS_PER_SM = 0


def cuda_programs_per_sm(streaming: bool = False) -> int:
    """Programs per SM of a 1D core grid on CUDA (0 = one program per task); ``ASCENDOPT_CUDA_PROGRAMS_PER_SM``
    overrides both defaults (sweeps)."""
    value = os.environ.get("ASCENDOPT_CUDA_PROGRAMS_PER_SM")
    if value is None:
        return CUDA_STREAMING_PROGRAMS_PER_SM if streaming else CUDA_PROGRAMS_PER_SM
    if not value.isdigit() or int(value) < 1:
        from ascendopt.errors import UsageError

        raise UsageError(f"ASCENDOPT_CUDA_PROGRAMS_PER_SM={value!r}: must be a positive integer")
    return int(value)
