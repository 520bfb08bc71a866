"""Profiles of a round: collect with the contract's metric groups, analyze, find the "before".

Bundled kernels are collected with ``collect.collect_kernel`` (one run per metric group) on the
contract's first shape case; own code with ``collect.collect_exec_file`` over the working tree's
``workload()``. Folders go to the workspace's ``profiles/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt.rounds import records as rounds
from ascendopt.rounds.records import RoundRecord
from ascendopt.workspace import Workspace

Step = Callable[[str], None]


def dims_text(dims: Mapping[str, Any]) -> str:
    """Dims as the ``B=2,T=64`` string ``collect_kernel`` accepts (``seqlens=3:17``)."""
    return ",".join(f"{k}={':'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in dims.items())


def profile_kernel_config(ws: Workspace, contract, config: Mapping[str, int], name: str) -> list[str]:
    """Collect the first shape case with ``config`` under each of the contract's metric groups."""
    from ascendopt.collect import collect_kernel

    w = contract.workload
    case = w.shapes[0]
    paths = collect_kernel(w.kernel, shape=dims_text(case.dims), dtype=w.dtype, mode=w.mode, config=dict(config),
                           metric_groups=list(contract.metric_groups), out_dir=ws.profiles_dir, name=name)
    return [str(p) for p in paths]


def profile_own_code(ws: Workspace, contract, name: str) -> list[str]:
    """Profile the working tree's ``workload()`` once per metric group, in a fresh child process.

    A child, not this process: modules the workload imports are loaded from the edited tree, never
    from a stale ``sys.modules`` entry of an earlier load.
    """
    from ascendopt.collect import collect_exec_file
    from ascendopt.contract.frozen import project_root

    paths = collect_exec_file(project_root() / contract.workload.exec_file, metric_groups=list(contract.metric_groups),
                              out_dir=ws.profiles_dir, name=name, kernel_filter=contract.workload.kernel_filter)
    return [str(p) for p in paths]


def analyze_paths(paths: Sequence[str] | None, kernel_filter: str | None = None) -> dict[str, Any] | None:
    """``analysis.analyze`` of the merged profile folders (None if there are none)."""
    if not paths:
        return None
    from ascendopt.analyze.diagnosis import analyze
    from ascendopt.analyze.traces import load_profiles

    return analyze(load_profiles([Path(p) for p in paths]), kernel_filter=kernel_filter)


def collect_profiles(ws: Workspace, contract, config: Mapping[str, int] | None, name: str) -> list[str]:
    if contract.is_kernel:
        return profile_kernel_config(ws, contract, config or {}, name)
    return profile_own_code(ws, contract, name)


def reference_profiles(ws: Workspace, contract, records: Sequence[RoundRecord], plan_best: Mapping[str, int] | None,
                       step: Step | None = None) -> list[str]:
    """The best-so-far profile: the best round's, else the baseline's (collected once, then reused)."""
    best = rounds.best_round(records)
    if best and best.profiles:
        return list(best.profiles)
    for r in records:
        if r.profiles_before:
            return list(r.profiles_before)
    if not contract.is_kernel:
        # Own code: the working tree already holds the candidate, so only a profile collected
        # before the edit (``ascendopt collect`` into the workspace) can stand for "before".
        from ascendopt.rounds.reprofile import newest_profiles

        return newest_profiles(ws)
    if step:
        step("profiling the baseline configuration (first round)")
    return collect_profiles(ws, contract, plan_best, "baseline")


def kernel_names(contract) -> list[str]:
    return list(contract.expected_kernels) or ([contract.workload.kernel_filter] if contract.workload.kernel_filter
                                               else [])
