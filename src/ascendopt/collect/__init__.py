"""Profiler collection (checklist step 2) on npu (torch_npu.profiler), cuda (torch.profiler +
Nsight Compute) and cpu (torch.profiler over the Triton interpreter).

Public API: ``profile_callable`` (in-process), ``collect_exec_file`` (a workload file, run in a
child process), ``collect_kernel`` (a bundled kernel), ``normalize_metric_group``. Importing this
package does not import torch.
"""

from __future__ import annotations

from ascendopt.collect.api import collect_exec_file, collect_kernel, profile_callable
from ascendopt.collect.metrics import METRIC_GROUPS, normalize_metric_group, parse_metric_groups

__all__ = ["METRIC_GROUPS", "collect_exec_file", "collect_kernel", "normalize_metric_group",
           "parse_metric_groups", "profile_callable"]
