"""Kernel hit: proof that the target kernel ran, not a torch fallback.

One call of the workload is profiled (after a warm call, so compilation stays out) and the names
seen are matched against the expected ones by substring (device kernel names carry suffixes such
as ``_mix_aiv`` or op-type prefixes).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.errors import EnvironmentProblem


def observed_kernels(fn: Callable[[], Any]) -> list[str]:
    """Names seen in a profile of one call of ``fn`` (after one warm call), longest total time first.

    npu: the device kernels of a torch_npu profile (via ``ascendopt.collect``); cuda: device
    kernels of a torch.profiler trace; cpu: every range of a CPU trace (interpreted Triton launches
    get a range named after the ``@triton.jit`` function: ``kernels._lib.common.launch`` for bundled
    kernels, collect's interpreter hook for own code).
    """
    from ascendopt.device import backends

    backend = backends.current()
    fn()  # compile outside the profile
    backend.synchronize()
    if backend.name == "npu":
        return _observed_npu(fn)
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from ascendopt.collect.native_log import quiet_profiler
    from ascendopt.collect.torch_profiler import name_interpreted_kernels

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if backend.name == "cuda" else [])
    # On cpu, own code launches kernel[grid](...) directly: collect's hook names those launches too.
    naming = name_interpreted_kernels() if backend.name == "cpu" else contextlib.nullcontext()
    # the profiler's own lines and warnings would break the progress line: kept off the terminal
    with naming, quiet_profiler(), profile(activities=activities) as prof:
        fn()
        backend.synchronize()
    totals: dict[str, float] = {}
    for event in prof.events():
        on_device = event.device_type == DeviceType.CUDA
        if backend.name == "cuda" and not on_device:
            continue
        duration = event.device_time_total if on_device else event.cpu_time_total
        totals[event.name] = totals.get(event.name, 0.0) + float(duration)
    return sorted(totals, key=lambda n: -totals[n])


def _observed_npu(fn: Callable[[], Any]) -> list[str]:
    try:
        from ascendopt.analyze.traces import load_profile
        from ascendopt.collect import profile_callable
    except ImportError as exc:
        raise EnvironmentProblem(
            f"kernel-hit check on npu needs ascendopt.collect and ascendopt.traces ({exc})") from None
    with tempfile.TemporaryDirectory(prefix="ascendopt-hit-") as tmp:
        path = profile_callable(fn, name="kernel_hit", out_dir=Path(tmp), aic_metrics="PipeUtilization")
        frame = load_profile(path).kernels
        totals = frame.groupby("name")["duration_us"].sum().sort_values(ascending=False)
        return [str(n) for n in totals.index]


def missing_kernels(expected: tuple[str, ...] | list[str], seen: list[str]) -> list[str]:
    """Expected names (or ``regex:`` patterns) that no observed name matches (``analyze.matching``)."""
    from ascendopt.analyze.matching import unmatched

    return unmatched(expected, seen)
