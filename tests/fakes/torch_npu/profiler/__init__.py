"""Fake ``torch_npu.profiler``: the public names of torch_npu 2.13.0 (docs/profiler-formats.md §9.1) with
the real signatures; ``analyse`` lives in ``torch_npu.profiler.profiler`` as in the real package.
Every call is recorded in ``torch_npu.CALLS`` with its arguments as passed."""

from torch_npu.profiler.experimental_config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from torch_npu.profiler.profiler import (
    ProfilerActivity,
    profile,
    supported_activities,
    tensorboard_trace_handler,
)
from torch_npu.profiler.scheduler import ProfilerAction
from torch_npu.profiler.scheduler import Schedule as schedule

__all__ = [
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "_ExperimentalConfig",
    "profile",
    "schedule",
    "supported_activities",
    "supported_ai_core_metrics",
    "supported_export_type",
    "supported_profiler_level",
    "tensorboard_trace_handler",
]
