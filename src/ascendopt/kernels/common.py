"""Helpers every bundled kernel launcher uses: core counts, output allocation, interpreter facts."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

_poison = {"on": False}


def interpreting() -> bool:
    """True when kernels run in Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def num_cores(bound: str) -> int:
    """Cores for a 1D core grid: cube cores for cube-bound kernels, vector cores otherwise.

    On NPU these are ``num_aicore`` / ``num_vectorcore`` (A2: 24 / 48); on CUDA the SM count.
    """
    from ascendopt import backends

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
