"""Test-only bundled kernels for the contract/freeze/gate tests (Triton interpreter, tiny grids).

``t_scale`` computes ``y = 2 x`` and, in fwdbwd, ``dx = 2 dy`` with a real ``@triton.jit`` kernel
launched through ``kernels.common.launch`` (so the CPU profile shows ``_t_scale_kernel``) and outputs
allocated through ``kernels.common.alloc`` (so the gate can NaN-poison them). Variants swap in one
defect each: ``wrong`` (scale 2.5), ``unwritten`` (the last block of ``y`` is never stored), and
``fallback`` (plain torch, no Triton kernel).

The tunable ``EXTRA`` plants a slowdown: an extra pass over ``EXTRA`` percent of the elements.
``VIRTUAL`` is a deterministic clock (ms): each launch advances it by 1 us per element with a
seeded +-0.3 % jitter (``VIRTUAL["jitter"]``: a test may widen it to plant a noisy device), so the
gate's verdict on a planted 5 % slowdown does not depend on this machine's load.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import triton
import triton.language as tl

from ascendopt.kernels._lib.common import alloc, grid_size, launch
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable

VIRTUAL = {"ms": 0.0, "rng": np.random.default_rng(7), "jitter": 0.003}


def virtual_clock() -> float:
    return VIRTUAL["ms"]


@triton.jit
def _t_scale_kernel(x_ptr, y_ptr, n, scale, tasks, BLOCK: tl.constexpr, SKIP_LAST: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    for task in range(pid, tasks, programs):
        offs = tl.cast(task, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        limit = n - BLOCK if SKIP_LAST else n  # SKIP_LAST: a planted bug, the last block stays unwritten
        mask = offs < limit
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, (x * scale).to(y_ptr.dtype.element_ty), mask=mask)


def _scale(x, out, scale: float, block: int, skip_last: bool = False, count: int | None = None):
    n = x.numel() if count is None else count
    tasks = triton.cdiv(n, block)
    launch(_t_scale_kernel, (grid_size("vector", tasks),), x, out, n, scale, tasks, BLOCK=block,
           SKIP_LAST=skip_last)
    VIRTUAL["ms"] += n * 1e-3 * (1.0 + VIRTUAL["jitter"] * float(VIRTUAL["rng"].standard_normal()))
    return out


def make_inputs(dims, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    # varlen: sequences packed along T of one batch row (the bundled kernels' convention)
    shape = (1, sum(dims["seqlens"]), dims["D"]) if "seqlens" in dims else (dims["B"], dims["T"], dims["D"])
    x = torch.randn(shape, generator=g).to(torch_dtype).to(device)
    dy = torch.randn(shape, generator=g).to(torch_dtype).to(device)
    return {"x": x, "dy": dy}


def _run(inputs, config, mode, *, scale=2.0, skip_last=False):
    x = inputs["x"]
    y = _scale(x, alloc(x.shape, x.dtype, x.device), scale, config["BLOCK"], skip_last)
    if config["EXTRA"]:
        extra = alloc(x.shape, x.dtype, x.device)
        _scale(x, extra, scale, config["BLOCK"], count=x.numel() * config["EXTRA"] // 100)
    out = {"y": y}
    if mode == "fwdbwd":
        dy = inputs["dy"]
        out["dx"] = _scale(dy, alloc(dy.shape, dy.dtype, dy.device), 2.0, config["BLOCK"])
    return out


def t_scale(inputs, config, mode):
    return _run(inputs, config, mode)


def t_scale_reference(inputs, mode):
    out = {"y": inputs["x"].float() * 2.0}
    if mode == "fwdbwd":
        out["dx"] = inputs["dy"].float() * 2.0
    return out


SPEC = KernelSpec(
    name="t_scale",
    description="test kernel: y = 2 x, dx = 2 dy",
    bound="vector",
    modes=("fwd", "fwdbwd"),
    dtypes=("fp32", "bf16"),
    shapes={"tiny": ShapePreset("tiny", {"B": 2, "T": 10, "D": 32}),
            "tiny_varlen": ShapePreset("tiny_varlen", {"seqlens": (7, 13), "D": 32}),
            "realistic": ShapePreset("realistic", {"B": 4, "T": 64, "D": 64})},
    tunables={"BLOCK": Tunable("BLOCK", 64, (32, 64, 128), "elements per program step"),
              "EXTRA": Tunable("EXTRA", 0, (0, 5, 50), "planted slowdown: extra pass over EXTRA % of elements")},
    make_inputs=make_inputs,
    run=t_scale,
    reference=t_scale_reference,
    ub_model=lambda dims, config, dtype: [],
    cost=lambda dims, dtype, mode: Cost(bytes=sum(dims.get("seqlens", ())) * dims["D"] * 8
                                        or dims["B"] * dims["T"] * dims["D"] * 8, flops=0),
    supports=lambda dims, dtype, mode: None,
    kernel_names=("_t_scale_kernel",),
    tolerances={"fp32": 1e-6, "bf16": 1e-2},
)


def variant(kind: str) -> KernelSpec:
    """The same spec (same oracle, same name) with one planted defect in ``run``."""
    if kind == "wrong":
        def run(inputs, config, mode):
            return _run(inputs, config, mode, scale=2.5)
    elif kind == "unwritten":
        def run(inputs, config, mode):
            return _run(inputs, config, mode, skip_last=True)
    elif kind == "fallback":
        def run(inputs, config, mode):
            out = {"y": inputs["x"] * 2.0}
            if mode == "fwdbwd":
                out["dx"] = inputs["dy"] * 2.0
            return out
    elif kind in ("raises", "faults"):
        # a configuration that cannot run (a compile-time resource limit) / one that breaks the device
        message = ("out of resource: shared memory, Required: 263688, Hardware limit: 232448" if kind == "raises"
                   else "CUDA error: an illegal memory access was encountered")

        def run(inputs, config, mode):
            raise RuntimeError(message)
    else:
        raise ValueError(kind)
    return dataclasses.replace(SPEC, run=run)


def install(monkeypatch, spec: KernelSpec = SPEC) -> None:
    """Make ``spec`` the only bundled kernel (the registry is replaced for this test)."""
    from ascendopt import kernels

    monkeypatch.setattr(kernels, "_registry", {spec.name: spec})


def noisy_device(monkeypatch, jitter: float = 0.15) -> None:
    """Plant a noisy device for this test: each launch's virtual time varies by ``jitter`` (0.15 =
    +-15 %, one sigma), far beyond what the A/B rule's band can narrow to "same"."""
    monkeypatch.setitem(VIRTUAL, "jitter", jitter)
