"""npu collection with ``torch_npu.profiler`` (docs/profiler-formats.md §9).

The call sequence (kept exactly, the fake-torch_npu test asserts it)::

    cfg = _ExperimentalConfig(profiler_level=ProfilerLevel.<level>, aic_metrics=AiCMetrics.<group>,
                              export_type=ExportType.Text)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                 schedule=schedule(wait=, active=, warmup=, repeat=, skip_first=),
                 on_trace_ready=tensorboard_trace_handler(<staging dir>),
                 record_shapes=True, with_modules=True, experimental_config=cfg) as prof:
        for each step: fn(); torch.npu.synchronize(); prof.step()

then, for each ``*_ascend_pt`` folder whose export did not finish (no ``analyse.done``),
``torch_npu.profiler.profiler.analyse(<folder>)``. ``export_type`` is pinned to Text because the
readers parse the CSVs and 2.6.0.post5 defaults it to None.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from ascendopt.collect.metrics import LEVELS_WITHOUT_COUNTERS, NONE
from ascendopt.collect.settings import ProfileSettings
from ascendopt.errors import EnvironmentProblem, ProfileError

OUTPUT = "ASCEND_PROFILER_OUTPUT"


def aic_member(settings: ProfileSettings) -> str:
    """The AiCMetrics member to pass: the group, or AiCoreNone when nothing can be counted."""
    if settings.metric_group == NONE or settings.profiler_level in LEVELS_WITHOUT_COUNTERS:
        return "AiCoreNone"
    return settings.metric_group


def export_done(run_dir: Path) -> bool:
    """True when torch_npu finished parsing (``analyse.done`` written; placement varies by version)."""
    return (run_dir / OUTPUT / "analyse.done").exists() or (run_dir / "analyse.done").exists()


def profile_npu(fn: Callable[[], object], settings: ProfileSettings, dest_root: Path,
                on_step: Callable[[int], None] | None = None) -> list[Path]:
    """Profile ``fn`` into ``dest_root``; returns the ``*_ascend_pt`` folders (one per repeat cycle)."""
    import torch

    try:
        import torch_npu  # noqa: F401 - registers torch.npu
        from torch_npu.profiler import (
            AiCMetrics,
            ExportType,
            ProfilerActivity,
            ProfilerLevel,
            _ExperimentalConfig,
            profile,
            schedule,
            tensorboard_trace_handler,
        )
    except (ImportError, OSError, RuntimeError) as exc:
        raise EnvironmentProblem(f"torch_npu.profiler is not available: {exc}",
                                 hint="source the CANN set_env.sh; see `ascendopt env`") from None
    member = aic_member(settings)
    if not hasattr(AiCMetrics, member):
        raise EnvironmentProblem(f"this torch_npu has no AiCMetrics.{member}",
                                 hint="older torch_npu lacks MemoryAccess; pick another metric group")
    experimental = _ExperimentalConfig(profiler_level=getattr(ProfilerLevel, settings.profiler_level),
                                       aic_metrics=getattr(AiCMetrics, member), export_type=ExportType.Text)
    # A fresh folder per run: several metric groups share one staging folder, and each run must
    # return only the *_ascend_pt folders it wrote.
    dest_root = Path(tempfile.mkdtemp(prefix="npu-run-", dir=dest_root))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                 schedule=schedule(wait=settings.wait, active=settings.active, warmup=settings.warmup,
                                   repeat=settings.repeat, skip_first=settings.skip_first),
                 on_trace_ready=tensorboard_trace_handler(str(dest_root)),
                 record_shapes=True, with_modules=True, experimental_config=experimental) as prof:
        for step in range(settings.steps):
            fn()
            # Device work is asynchronous: finish it inside the step that launched it.
            torch.npu.synchronize()
            prof.step()
            if on_step:
                on_step(step)
    runs = sorted(p for p in dest_root.glob("*_ascend_pt") if p.is_dir())
    if not runs:
        raise ProfileError(f"{dest_root}: torch_npu wrote no *_ascend_pt folder",
                           hint="check the torch_npu log above; the schedule may not have reached an active step")
    for run_dir in runs:
        if not export_done(run_dir):
            from torch_npu.profiler.profiler import analyse

            analyse(profiler_path=str(run_dir))
        if not (run_dir / OUTPUT / "kernel_details.csv").exists():
            raise ProfileError(f"{run_dir}: no {OUTPUT}/kernel_details.csv after analyse()",
                               hint="the device recorded no kernel; check that the workload runs on the NPU")
    return runs
