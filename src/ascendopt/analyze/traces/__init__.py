"""Profile reading: any supported profiler output -> one ``Profile`` with the canonical kernel table.

Public API (agreed interface 2 of the helper brief):

* ``load_profile(path) -> Profile`` — a run folder, a parent of runs (the newest is read; runs of
  the same ``collect`` set are merged; per-rank runs of one collection are stacked per device),
  or a single CSV / trace file.
* ``load_profiles(paths) -> Profile`` — merge metric-group runs of one workload.
* ``list_runs(path) -> list[Run]`` — the runs a parent folder holds, oldest first.

``Profile.kernels`` is a pandas DataFrame, one row per device task, columns
``name, op_type, core_type, start_us, duration_us, wait_us, block_dim, mix_block_dim, step, device``
followed, when the file has them, by the per-kernel context columns (text, categorical)
``task_type`` (the core column as the file says it: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, ...),
``op_state`` (static / dynamic), ``input_shapes`` (``"8,128;128,256"``), ``input_dtypes``,
``output_shapes``, and by canonical metric columns (``traces.columns``); a metric that was not
collected is absent or NaN, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendopt.analyze.traces.columns import METRIC_GROUPS, NCU_GROUPS, NOT_METRICS
from ascendopt.analyze.traces.discover import PROFILE_YAML, Run, block_csvs, find_runs, kind_of_dir, op_summaries
from ascendopt.analyze.traces.faults import reader, reading
from ascendopt.errors import ProfileError

ALL_GROUPS = tuple(METRIC_GROUPS)
CUDA_GROUPS = tuple(NCU_GROUPS)

__all__ = ["ALL_GROUPS", "Profile", "Run", "list_runs", "load_profile", "load_profiles"]


@dataclass
class Profile:
    path: Path
    kernels: Any  # pandas DataFrame, canonical columns
    device: dict[str, Any]
    metric_groups: list[str]
    not_collected: list[str]
    kind: str  # npu | msprof | msprof-op | cuda | cpu
    op_statistic: Any = None  # DataFrame from op_statistic.csv, when present
    notes: list[str] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)
    set_id: str | None = None
    # msprof op: the operator OpBasicInfo.csv / summary.jsonl describe (``traces.device.read_op_info``)
    op_info: dict[str, Any] | None = None
    files: list[Path] = field(default_factory=list)  # the files read (kernel table first), for "read: ..." lines
    # calls of the workload ascendopt's profiler schedule recorded (active x repeat steps): what a per-call
    # time divides by where the kernel table carries no step ids; None for a capture from elsewhere
    scheduled_calls: int | None = None

    @property
    def metric_columns(self) -> list[str]:
        return [c for c in self.kernels.columns if c not in NOT_METRICS and self.kernels[c].dtype.kind == "f"]


def list_runs(path: str | Path) -> list[Run]:
    return find_runs(Path(path))


@reader
def _profile_yaml(folder: Path) -> dict[str, Any]:
    path = folder / PROFILE_YAML
    if not path.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raise ProfileError(f"{path}: not valid YAML") from None
    return data if isinstance(data, dict) else {}


def load_profile(path: str | Path) -> Profile:
    """Read one profile. A parent with several runs: the newest, plus the runs of its collect set,
    or, for torch_npu runs, the runs of its collection on other devices (one folder per rank,
    stacked per device: ``traces.collection``)."""
    from ascendopt.analyze.traces.collection import collection_of

    runs = find_runs(Path(path))
    chosen = runs[-1]
    notes = []
    if len(runs) > 1:
        notes.append(f"{path}: holds {len(runs)} runs; reading the newest, {chosen.path.name} "
                     "(`ascendopt analyze --list` shows all; pass a run folder to pick another)")
        set_id = _profile_yaml(chosen.path).get("set_id") if chosen.path.is_dir() else None
        siblings = [r for r in runs[:-1]
                    if set_id and r.path.is_dir() and _profile_yaml(r.path).get("set_id") == set_id]
        if siblings:
            notes.append(f"merging {len(siblings) + 1} runs of collect set {set_id}")
            merged = load_profiles([chosen.path] + [r.path for r in siblings])
            merged.notes = notes + merged.notes
            return merged
        profile = _load_run(chosen)
        group, skipped = collection_of(chosen, profile, runs[:-1], _load_run)
        if len(group) > 1:
            names = ", ".join(p.path.name for p in group)
            notes = [(f"{path}: holds {len(runs)} runs; reading the newest collection, {len(group)} runs on "
                      f"different devices at the same time ({names}), stacked per device "
                      "(`ascendopt analyze --list` shows all; pass a run folder to pick one)")]
            profile = _combine(group)
        profile.notes = notes + skipped + profile.notes
        return profile
    profile = _load_run(chosen)
    profile.notes = notes + profile.notes
    return profile


def load_profiles(paths: list[str | Path]) -> Profile:
    """Combine several runs into one profile.

    Runs on the same device(s) are metric-group runs of one workload and are merged kernel by
    kernel (``traces.merge``). Runs whose devices do not overlap (one folder per rank / device)
    are stacked; every row keeps its ``device``, so shares stay per device.
    """
    profiles = [load_profile(p) if len(paths) == 1 else _load_run(find_runs(Path(p))[-1]) for p in paths]
    return _combine(profiles)


def _combine(profiles: list[Profile]) -> Profile:
    """Stack (disjoint devices) or merge (same devices) loaded runs; see ``load_profiles``."""
    import pandas as pd

    from ascendopt.analyze.traces.merge import merge_kernel_frames

    if len(profiles) == 1:
        return profiles[0]
    kinds = {p.kind for p in profiles}
    if len(kinds) > 1:
        raise ProfileError(f"cannot merge profiles of different kinds ({', '.join(sorted(kinds))})")
    device_sets = [set(p.kernels["device"].astype(str)) for p in profiles]
    if sum(len(d) for d in device_sets) == len(set().union(*device_sets)):
        frame = pd.concat([p.kernels for p in profiles], ignore_index=True)
        for col in ("name", "op_type", "core_type", "device"):
            frame[col] = frame[col].astype(str).astype("category")
        notes = [f"stacked {len(profiles)} runs on devices {', '.join(sorted(set().union(*device_sets)))}"]
    else:
        frame, notes = merge_kernel_frames([p.kernels for p in profiles], [p.path for p in profiles])
    first = profiles[0]
    groups = list(dict.fromkeys(g for p in profiles for g in p.metric_groups))
    # ncu's groups are requested on cuda only; on cpu no group exists to leave out
    universe = CUDA_GROUPS if first.kind == "cuda" else () if first.kind == "cpu" else ALL_GROUPS
    return Profile(
        path=first.path, kernels=frame, device=first.device, metric_groups=groups,
        not_collected=[g for g in universe if g not in groups], kind=first.kind, op_statistic=first.op_statistic,
        notes=[n for p in profiles for n in p.notes] + notes, runs=[p.path for p in profiles], set_id=first.set_id,
        files=[f for p in profiles for f in (p.files or [p.path])], scheduled_calls=first.scheduled_calls,
    )


def _load_run(run: Run) -> Profile:
    path = run.path
    with reading(path):  # the net under every loader: what a reader left unnamed is still this run's fault
        return _load_kind(run)


def _load_kind(run: Run) -> Profile:
    from ascendopt.analyze.traces import loaders

    path = run.path
    if run.kind == "file":
        return loaders.load_file(path)
    if run.kind == "npu":
        return loaders.load_npu(path)
    if run.kind == "msprof":
        return loaders.load_msprof(path, op_summaries(path))
    if run.kind == "msprof-op":
        return loaders.load_msprof_op(path, block_csvs(path))
    if run.kind == "ascendopt":
        return loaders.load_ascendopt(path)
    raise ProfileError(f"{path}: not a profile ({kind_of_dir(path)})")

