"""The public collection API: ``profile_callable``, ``collect_exec_file``, ``collect_kernel``.

Every run writes ONE metric group into its own folder (npu: torch_npu's ``*_ascend_pt``; cuda/cpu:
``<name>_<YYYYmmdd-HHMMSS>_ascendopt_<backend>``) with ``ascendopt_profile.yaml``; the runs of one
call share a ``set_id`` so analyze can merge them. Folders appear in ``out_dir`` only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ascendopt import console
from ascendopt.collect import metadata
from ascendopt.collect.metrics import NONE, parse_metric_groups
from ascendopt.collect.names import new_set_id, sanitize_name
from ascendopt.collect.settings import ProfileSettings
from ascendopt.collect.staging import prepare_out_dir, publish, staging

DEFAULT_OUT_DIR = "npu_prof"
DEFAULT_TIMEOUT_S = 600.0


def out_dir_for(out_dir: str | os.PathLike | None, workspace: str | os.PathLike | None) -> tuple[Path, bool]:
    """Where ``ascendopt collect`` writes, and whether that is a workspace's ``profiles/``: an explicit
    ``out_dir`` always; else the workspace's ``profiles/`` (where the loop looks for profiles) when
    ``workspace`` is given or the default one (``Workspace.resolve``) holds a contract; else ``DEFAULT_OUT_DIR``."""
    from ascendopt.workspace import Workspace

    if out_dir is not None:
        return Path(out_dir), False
    ws = Workspace.resolve(workspace)
    if workspace is not None or ws.contract_path.is_file():
        return ws.profiles_dir, True
    return Path(DEFAULT_OUT_DIR), False


def _backend() -> str:
    from ascendopt.device import backends

    return backends.current().name


def profile_callable(fn: Callable[[], Any], *, name: str, out_dir: str | os.PathLike = DEFAULT_OUT_DIR,
                     aic_metrics: str = "PipeUtilization", profiler_level: str = "Level1", wait: int = 0,
                     warmup: int = 1, active: int = 1, repeat: int = 1, skip_first: int = 0,
                     steps: int | None = None) -> Path:
    """Profile ``fn()`` in this process on the current backend; returns the profile folder.

    ``fn`` is called ``steps`` times (default one schedule cycle: 2), each call followed by a
    device synchronize and a profiler step. One metric group per call (``aic_metrics``, aliases
    such as ``pipe``/``ub`` accepted). On cuda this records durations only: counters need
    Nsight Compute to re-run the workload, which ``collect_exec_file`` / ``collect_kernel`` do.
    With ``repeat > 1`` on npu, torch_npu writes one folder per cycle; the newest is returned.
    """
    settings = ProfileSettings.build(name=name, aic_metrics=aic_metrics, profiler_level=profiler_level, wait=wait,
                                     warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
                                     steps=steps)
    backend = _backend()
    if backend == "cuda" and settings.metric_group != NONE:
        console.warn("profile_callable on cuda records durations only; hardware counters need Nsight Compute "
                     "to re-run the workload: use `ascendopt collect --exec-file` or collect_exec_file()")
    out = prepare_out_dir(out_dir)
    from ascendopt.collect.runs import profile_into

    call = f"ascendopt.profile_callable(name={settings.name!r}, aic_metrics={settings.metric_group!r})"
    with staging(out) as stage:
        folders = profile_into(fn, settings, stage, out_dir=out, workload=metadata.callable_workload(fn),
                               command=call, set_id=new_set_id(), git_dir=Path.cwd())
        placed = publish(folders, out)
    console.status(f"profile written to {placed[-1]} ({settings.metric_group}, {backend})")
    return placed[-1]


def _collect(groups: Sequence[str] | str, *, name: str, out_dir: str | os.PathLike, run_all: Callable[..., list],
             label: str, schedule: dict[str, Any], counters: Callable[..., None]) -> list[Path]:
    """All metric groups of one call as one set: shared set_id, one staging folder, published
    together at the end (a failure in any group leaves no folder of the set behind).

    ``run_all(settings_list, stage, out, set_id)`` -> per group, its folders; ``counters(folders,
    settings)`` adds the Nsight Compute pass on cuda.
    """
    canonical = parse_metric_groups(groups)
    settings = [ProfileSettings.build(name=name, aic_metrics=g, **schedule) for g in canonical]
    backend = _backend()
    ncu_runs = [s for s in settings if backend == "cuda" and s.metric_group != NONE]
    if ncu_runs:
        from ascendopt.collect import ncu

        ncu.require()  # fail before running anything (exit 5)
    out = prepare_out_dir(out_dir)
    set_id = new_set_id()
    groups_text = ", ".join(s.metric_group for s in settings)
    total = len(settings) + len(ncu_runs)
    with console.progress(f"collect {label} [{groups_text}] on {backend}", total=total) as bar, staging(out) as stage:
        per_group = run_all(settings, stage, out, set_id)
        bar.advance(len(settings))
        for s, folders in zip(settings, per_group, strict=True):
            if s in ncu_runs:
                bar.update(f"collect {label} [{s.metric_group}] counters with Nsight Compute")
                counters(folders, s)
                bar.advance()
        placed = publish([f for folders in per_group for f in folders], out)
    for path in placed:
        console.status(f"profile written to {path}")
    return placed


def _ncu_pass(folders: list[Path], settings: ProfileSettings, spec: dict[str, Any], *,
              kernel_filter: str | None, timeout: float | None, label: str) -> None:
    """Nsight Compute replay for one metric group, then mark the metadata."""
    from ascendopt.collect import ncu

    for folder in folders:
        facts = ncu.collect(folder, settings.metric_group, dict(spec, settings=[settings.to_dict()]),
                            kernel_filter=kernel_filter, timeout=timeout, label=label)
        metadata.update(folder, hardware_counters=True, ncu=facts)


def collect_exec_file(path: str | os.PathLike, *, metric_groups: Sequence[str] | str = ("PipeUtilization",),
                      out_dir: str | os.PathLike = DEFAULT_OUT_DIR, name: str | None = None,
                      profiler_level: str = "Level1", wait: int = 0, warmup: int = 1, active: int = 1,
                      repeat: int = 1, skip_first: int = 0, steps: int | None = None,
                      timeout: float | None = DEFAULT_TIMEOUT_S, kernel_filter: str | None = None,
                      command: str | None = None) -> list[Path]:
    """Profile ``workload()`` of an exec-file, one profiler run per metric group, in ONE child
    process (module code runs once for the whole set); returns the folders in group order.

    ``timeout``: seconds per profiler run (the child gets ``timeout x groups``; on cuda each
    Nsight Compute replay gets ``timeout``). Failures raise with ``file:line`` (exit 2) and leave
    no folder behind.
    """
    from ascendopt.collect.child import run_child
    from ascendopt.collect.workload import check_exec_file

    file = check_exec_file(path)
    name = sanitize_name(name or file.stem)
    workload = metadata.exec_file_workload(file)
    cmd = command or f"ascendopt collect --exec-file {file}"
    base_spec = {"workload": {"exec_file": str(file)}}

    def run_all(settings: list[ProfileSettings], stage: Path, out: Path, set_id: str) -> list[list[Path]]:
        spec = dict(base_spec, mode="profile", settings=[s.to_dict() for s in settings], staging=str(stage),
                    out_dir=str(out),
                    meta={"workload": workload, "command": cmd, "set_id": set_id, "git_dir": str(file.parent)})
        result = run_child(spec, label=str(file), timeout=timeout and timeout * len(settings), backend=_backend())
        return [[Path(f) for f in folders] for folders in result["folders"]]

    def counters(folders: list[Path], settings: ProfileSettings) -> None:
        _ncu_pass(folders, settings, base_spec, kernel_filter=kernel_filter, timeout=timeout, label=str(file))

    schedule = {"profiler_level": profiler_level, "wait": wait, "warmup": warmup, "active": active,
                "repeat": repeat, "skip_first": skip_first, "steps": steps}
    return _collect(metric_groups, name=name, out_dir=out_dir, run_all=run_all, label=name, schedule=schedule,
                    counters=counters)


def resolve_kernel_case(kernel: str, shape: str | None, dtype: str | None, mode: str | None,
                        config: dict[str, Any] | None) -> dict[str, Any]:
    """Kernel + shape preset or dims string + dtype + mode, validated against the KernelSpec."""
    from ascendopt import kernels
    from ascendopt.kernels.spec import parse_dims

    spec = kernels.get(kernel)
    if shape is None:
        shape = "tiny" if _backend() == "cpu" else "realistic"
    dims = dict(spec.shape(shape).dims) if shape in spec.shapes or "=" not in shape else parse_dims(shape)
    dtype = dtype or spec.dtypes[0]
    mode = mode or spec.modes[0]
    spec.check_supported(dims, dtype, mode)
    return {"kernel": spec.name, "shape": shape, "dims": dims, "dtype": dtype, "mode": mode,
            "config": spec.config(config)}


def collect_kernel(kernel: str, *, shape: str | None = None, dtype: str | None = None, mode: str | None = None,
                   config: dict[str, Any] | None = None, metric_groups: Sequence[str] | str = ("PipeUtilization",),
                   out_dir: str | os.PathLike = DEFAULT_OUT_DIR, name: str | None = None,
                   profiler_level: str = "Level1", wait: int = 0, warmup: int = 1, active: int = 1,
                   repeat: int = 1, skip_first: int = 0, steps: int | None = None,
                   timeout: float | None = DEFAULT_TIMEOUT_S, kernel_filter: str | None = None,
                   command: str | None = None) -> list[Path]:
    """Profile a bundled kernel, one folder per metric group (returned in order).

    ``shape``: a preset name (default ``tiny`` on cpu, ``realistic`` elsewhere) or a dims string
    ``"B=2,T=64,D=128"``; ``dtype``/``mode`` default to the spec's first. The kernel runs in this
    process (bundled kernels are trusted code); on cuda the Nsight Compute replay runs in a child.
    """
    from ascendopt.collect.runs import profile_into
    from ascendopt.collect.workload import kernel_callable

    case = resolve_kernel_case(kernel, shape, dtype, mode, config)
    name = sanitize_name(name or case["kernel"])
    workload = metadata.kernel_workload(case["kernel"], case["shape"], case["dims"], case["dtype"], case["mode"],
                                        case["config"])
    cmd = command or (f"ascendopt collect --kernel {case['kernel']} --shapes {case['shape']} "
                      f"--dtype {case['dtype']} --mode {case['mode']}")
    child_case = dict(case, dims={k: list(v) if isinstance(v, tuple) else v for k, v in case["dims"].items()})
    fn = kernel_callable(child_case)

    def run_all(settings: list[ProfileSettings], stage: Path, out: Path, set_id: str) -> list[list[Path]]:
        return [profile_into(fn, s, stage, out_dir=out, workload=workload, command=cmd, set_id=set_id,
                             git_dir=Path.cwd()) for s in settings]

    def counters(folders: list[Path], settings: ProfileSettings) -> None:
        _ncu_pass(folders, settings, {"workload": {"kernel": child_case}}, kernel_filter=kernel_filter,
                  timeout=timeout, label=f"kernel {case['kernel']}")

    schedule = {"profiler_level": profiler_level, "wait": wait, "warmup": warmup, "active": active,
                "repeat": repeat, "skip_first": skip_first, "steps": steps}
    return _collect(metric_groups, name=name, out_dir=out_dir, run_all=run_all, label=name, schedule=schedule,
                    counters=counters)
