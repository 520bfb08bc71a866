"""Fake of ``torch_npu.profiler.experimental_config`` (docs/profiler-formats.md §9.3, §9.4)."""

from __future__ import annotations

import warnings

from torch_npu.profiler._record import recorded


class ProfilerLevel:
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    """Values are the ACL names recorded in profiler_info.json ``_aic_metrics`` (§3)."""

    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Db = "db"
    Text = "text"


class HostSystem:
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


def _members(cls) -> list[str]:
    return [v for k, v in vars(cls).items() if not k.startswith("_")]


def supported_profiler_level():
    return set(_members(ProfilerLevel))


def supported_ai_core_metrics():
    return set(_members(AiCMetrics))


def supported_export_type():
    return set(_members(ExportType))


class _ExperimentalConfig:
    """Keyword parameters and defaults of torch_npu 2.13.0 (§9.3)."""

    @recorded("profiler._ExperimentalConfig")
    def __init__(self, profiler_level=ProfilerLevel.Level0, aic_metrics=AiCMetrics.PipeUtilization, l2_cache=False,
                 msprof_tx=False, mstx=False, data_simplification=True, record_op_args=False, op_attr=False,
                 gc_detect_threshold=None, export_type=ExportType.Text, host_sys=None, mstx_domain_include=None,
                 mstx_domain_exclude=None, sys_io=False, sys_interconnection=False):
        if profiler_level not in supported_profiler_level():
            raise ValueError(f"Invalid profiler_level: {profiler_level}")
        if aic_metrics not in supported_ai_core_metrics():
            raise ValueError(f"Invalid aic_metrics: {aic_metrics}")
        if profiler_level in (ProfilerLevel.Level0, ProfilerLevel.Level_none) and aic_metrics != AiCMetrics.AiCoreNone:
            warnings.warn("aic_metrics is forced to AiCoreNone at Level0/Level_none", stacklevel=2)
            aic_metrics = AiCMetrics.AiCoreNone
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = l2_cache
        self._msprof_tx = msprof_tx
        self._mstx = mstx
        self._data_simplification = data_simplification
        self.record_op_args = record_op_args
        self._op_attr = op_attr
        self._gc_detect_threshold = gc_detect_threshold
        self._export_type = export_type
        self._host_sys = host_sys
        self._sys_io = sys_io
        self._sys_interconnection = sys_interconnection

    def to_dict(self) -> dict:
        """The ``experimental_config`` block of profiler_info.json (§3 key names)."""
        return {k: v for k, v in vars(self).items()}
