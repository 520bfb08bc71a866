"""Profiles of a round: collect with the contract's metric groups, analyze, find the "before".

Bundled kernels are collected with ``collect.collect_kernel`` (one run per metric group) on the
contract's first shape case; own code with ``collect.collect_exec_file`` over the working tree's
``workload()``. Folders go to the workspace's ``profiles/``, where ``ascendopt collect`` run inside
the workspace puts its profiles too. Freeze profiles the baseline there as ``BASELINE``, so round 1
has a "before" (``reference_profiles``).
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt.kernels.spec import dims_text
from ascendopt.rounds.context import RoundContext
from ascendopt.workspace import Workspace

Step = Callable[[str], None]
BASELINE = "baseline"  # the name of the baseline's profile set (freeze collects it; metadata ``name``)


def profile_kernel_config(ctx: RoundContext, config: Mapping[str, int], name: str,
                          timeout: float | None = None) -> list[str]:
    """Collect the first shape case with ``config`` under each of the contract's metric groups
    (in this process; ``profile_s``, or ``timeout``, limits each Nsight Compute replay on cuda)."""
    from ascendopt.collect import collect_kernel

    contract = ctx.contract
    w = contract.workload
    case = w.shapes[0]
    paths = collect_kernel(w.kernel, shape=dims_text(case.dims), dtype=w.dtype, mode=w.mode, config=dict(config),
                           metric_groups=list(contract.metric_groups), out_dir=ctx.ws.profiles_dir, name=name,
                           timeout=contract.timeout("profile_s", timeout))
    return [str(p) for p in paths]


def profile_own_code(ctx: RoundContext, name: str, timeout: float | None = None) -> list[str]:
    """Profile the working tree's ``workload()`` once per metric group, in a fresh child process
    limited to ``profile_s`` (or ``timeout``) per metric group; a workload that raises, dies or
    outlives it raises ``WorkloadFailure`` with ``file:line`` or the limit.

    A child, not this process: modules the workload imports are loaded from the edited tree, never
    from a stale ``sys.modules`` entry of an earlier load.
    """
    from ascendopt.collect import collect_exec_file
    from ascendopt.contract.frozen import project_root

    w = ctx.contract.workload
    paths = collect_exec_file(project_root() / w.exec_file, metric_groups=list(ctx.contract.metric_groups),
                              out_dir=ctx.ws.profiles_dir, name=name, kernel_filter=w.kernel_filter,
                              timeout=ctx.contract.timeout("profile_s", timeout))
    return [str(p) for p in paths]


def analyze_paths(paths: Sequence[str] | None, kernel_filter: str | None = None) -> dict[str, Any] | None:
    """``analyze.diagnosis.analyze`` of the merged profile folders (None if there are none)."""
    if not paths:
        return None
    from ascendopt.analyze.diagnosis import analyze
    from ascendopt.analyze.traces import load_profiles

    return analyze(load_profiles([Path(p) for p in paths]), kernel_filter=kernel_filter)


def collect_profiles(ctx: RoundContext, config: Mapping[str, int] | None, name: str,
                     timeout: float | None = None) -> list[str]:
    """Profile ``config`` (bundled kernel) or the working tree (own code) into the workspace's ``profiles/``.
    ``timeout``: a command's ``--timeout``, replacing the contract's ``profile_s``."""
    if ctx.is_kernel:
        return profile_kernel_config(ctx, config or {}, name, timeout)
    return profile_own_code(ctx, name, timeout)


def newest_profiles(ws: Workspace) -> list[str]:
    """The newest profile set under ``profiles/`` (folders sharing the newest one's name prefix)."""
    if not ws.profiles_dir.is_dir():
        return []
    folders = [p for p in ws.profiles_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        return []
    newest = max(folders, key=lambda p: p.stat().st_mtime)
    return [str(newest)]


def previous_profiles(ctx: RoundContext) -> list[str]:
    """The profile before the last round's change (else its own, else the newest in the workspace)."""
    for r in reversed(ctx.records):
        if r.profiles_before:
            return list(r.profiles_before)
        if r.profiles:
            return list(r.profiles)
    return newest_profiles(ctx.ws)


def _when(stamp: Any) -> _dt.datetime | None:
    """An ISO time (``...Z`` or ``...+00:00``) as an aware datetime; None when absent or unreadable."""
    try:
        when = _dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


def baseline_profiles(ctx: RoundContext) -> list[str]:
    """This contract's baseline profile set in ``profiles/``: the newest set of folders named ``BASELINE``
    in their metadata and made no earlier than the contract (an older contract's baseline, kept there
    as evidence after a re-freeze, is not this one's); [] when there is none."""
    from ascendopt.collect.metadata import FILENAME
    from ascendopt.errors import AscendoptError
    from ascendopt.workspace import read_yaml

    frozen = _when(ctx.contract.created_at)
    if frozen is None or not ctx.ws.profiles_dir.is_dir():
        return []
    sets: dict[str, list[tuple[_dt.datetime, Path]]] = {}
    for folder in ctx.ws.profiles_dir.iterdir():
        if not (folder / FILENAME).is_file():
            continue
        try:
            meta = read_yaml(folder / FILENAME)
        except AscendoptError:
            continue  # not a profile this loop wrote; analyze reports it if it is ever named
        made = _when(meta.get("created_at"))
        if meta.get("name") == BASELINE and made is not None and made >= frozen:
            sets.setdefault(str(meta.get("set_id")), []).append((made, folder))
    if not sets:
        return []
    newest = max(sets.values(), key=lambda runs: max(made for made, _ in runs))
    return [str(folder) for _, folder in sorted(newest)]


def reference_profiles(ctx: RoundContext, step: Step | None = None, timeout: float | None = None) -> list[str]:
    """The best-so-far profile: the best round's, else the "before" of an earlier round, else the
    baseline's (freeze's ``baseline_profiles``; a bundled kernel's is collected here when missing, then
    reused)."""
    best = ctx.best_round
    if best and best.profiles:
        return list(best.profiles)
    for r in ctx.records:
        if r.profiles_before:
            return list(r.profiles_before)
    baseline = baseline_profiles(ctx)
    if baseline:
        return baseline
    if not ctx.is_kernel:
        # Own code: the working tree already holds the candidate, so only a profile collected
        # before the edit (``ascendopt collect`` into the workspace) can stand for "before".
        return newest_profiles(ctx.ws)
    if step:
        step("profiling the baseline configuration (first round)")
    return collect_profiles(ctx, ctx.best_config, BASELINE, timeout)


def collect_command(ctx: RoundContext) -> str:
    """The ``ascendopt collect`` command that profiles this task's workload into the workspace's
    ``profiles/`` with the contract's metric groups: the exec-file (by its path in the repository), or
    the bundled kernel at the best configuration so far on the first shape case."""
    contract = ctx.contract
    w = contract.workload
    if ctx.is_kernel:
        sets = [a for k, v in (ctx.best_config or {}).items() for a in ("--set", f"{k}={v}")]
        target = ["--kernel", str(w.kernel), "--shapes", dims_text(w.shapes[0].dims), "--dtype", w.dtype,
                  "--mode", w.mode, *sets]
    else:
        from ascendopt.contract.frozen import project_root

        target = ["--exec-file", str(project_root() / str(w.exec_file))]
        if w.kernel_filter:
            target += ["--kernel-filter", w.kernel_filter]
    return shlex.join(["ascendopt", "collect", *target, "--aic-metrics", ",".join(contract.metric_groups),
                       "-w", str(ctx.ws.root)])
