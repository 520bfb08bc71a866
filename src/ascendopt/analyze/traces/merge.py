"""Merge metric groups collected in separate runs of one workload (PipeUtilization run +
MemoryUB run + ...): kernels are paired by (device, name, occurrence), occurrence being the
launch order of that name within its run (task and stream ids are assigned per run, so they
cannot pair rows; docs/profiler-formats.md §9.5).

Timing (durations, start times, core times, cycles) comes from the first run; every later run
only adds the metric columns the first run lacks. Communication tasks are not paired (their
names carry per-run ids, ``hcom_allReduce__868_0_1``) and carry no PMU data anyway.
"""

from __future__ import annotations

from collections import Counter

from ascendopt.analyze.traces.columns import BASE_COLUMNS, NON_COMPUTE_CORE_TYPES
from ascendopt.errors import ProfileError

KEYS = ["device", "name", "occurrence"]


def _with_occurrence(frame):
    # launch order decides the occurrence number; file order when a run lacks start times
    order = frame.sort_values("start_us", kind="stable") if frame["start_us"].notna().all() else frame
    order = order.copy()
    order["device"] = order["device"].astype(str)
    order["name"] = order["name"].astype(str)
    order["occurrence"] = order.groupby(["device", "name"], sort=False).cumcount()
    return order


def _compute(frame):
    return frame[~frame["core_type"].astype(str).isin(NON_COMPUTE_CORE_TYPES)]


def _check_same_launches(a, b, path_a, path_b) -> None:
    ca = Counter(zip(*(_compute(a)[k] for k in ("device", "name")), strict=True))
    cb = Counter(zip(*(_compute(b)[k] for k in ("device", "name")), strict=True))
    if ca == cb:
        return
    for key in list(ca) + list(cb):
        if ca.get(key, 0) != cb.get(key, 0):
            raise ProfileError(
                f"runs do not match: kernel {key[1]!r} on {key[0]} runs {ca.get(key, 0)} time(s) in {path_a} "
                f"and {cb.get(key, 0)} time(s) in {path_b}",
                hint="merge only runs of the same workload and schedule (one `collect --aic-metrics A,B` set)",
            )


def merge_kernel_frames(frames: list, paths: list) -> tuple:
    """Merge canonical kernel frames of several runs -> (merged frame, notes)."""
    base = _with_occurrence(frames[0])
    notes = []
    for frame, path in zip(frames[1:], paths[1:], strict=True):
        other = _with_occurrence(frame)
        _check_same_launches(base, other, paths[0], path)
        new_cols = [c for c in other.columns
                    if c not in BASE_COLUMNS and c not in base.columns and c != "occurrence"]
        if not new_cols:
            notes.append(f"{path}: adds no metric columns to the merge")
            continue
        # left join: a kernel the later run has no metric for keeps NaN (not collected), never 0
        base = base.merge(_compute(other)[KEYS + new_cols], on=KEYS, how="left", validate="one_to_one")
    return base.drop(columns=["occurrence"]).reset_index(drop=True), notes
