"""One collection on several devices: the per-rank run folders of one profiled job.

A multi-rank job profiled with torch_npu writes one ``*_ascend_pt`` folder per rank into the same
parent. Those runs are read together, stacked with their ``device`` column, so shares stay per
device (issue 3: "multi-device / multi-rank folders: per device, with a device column").

Two runs are of the same collection when they ran on different devices at the same time: their
kernel time spans (device timestamps in us since the epoch) overlap. Collections made one after
another never overlap, and repeat cycles of one device share its device: for those the newest run
is read alone, as before.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.analyze.traces.columns import ASCEND_COLUMNS
from ascendopt.analyze.traces.device import run_rank
from ascendopt.analyze.traces.discover import Run
from ascendopt.analyze.traces.faults import reader
from ascendopt.errors import ProfileError

_DEVICE_HEADERS = {raw for raw, canonical in ASCEND_COLUMNS.items() if canonical == "device"}


def _npu_dirs(path: Path) -> tuple[Path, Path]:
    """(folder holding kernel_details.csv, run folder) of a torch_npu run, as ``loaders.load_npu`` sees it."""
    out = path if path.name == "ASCEND_PROFILER_OUTPUT" or not (path / "ASCEND_PROFILER_OUTPUT").is_dir() \
        else path / "ASCEND_PROFILER_OUTPUT"
    return out, (out.parent if out.name == "ASCEND_PROFILER_OUTPUT" else out)


@reader
def _first_row_device(table: Path) -> str | None:
    """The ``Device_id`` of the first data row of a kernel table, read without loading the table."""
    try:
        with open(table, encoding="utf-8-sig", errors="replace", newline="") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            row = next(reader, [])
    except OSError:
        return None
    for i, name in enumerate(header):
        if name in _DEVICE_HEADERS and i < len(row):
            try:
                return f"npu:{int(float(row[i]))}"
            except ValueError:
                return None
    return None


def device_hint(run: Run) -> str | None:
    """The device a torch_npu run's rows will carry, read cheaply: the first row's ``Device_id``,
    else the run's rank, else npu:0 (the loader's default). None for other kinds of run."""
    if run.kind != "npu":
        return None
    out, run_dir = _npu_dirs(run.path)
    device = _first_row_device(out / "kernel_details.csv")
    if device:
        return device
    rank = run_rank(run_dir)
    return f"npu:{rank}" if rank is not None else "npu:0"


def time_span(kernels) -> tuple[float, float] | None:
    """(first start, last end) in us of a canonical kernel table; None when it has no start times."""
    start = kernels["start_us"].astype(float)
    end = start + kernels["duration_us"].astype(float).fillna(0.0)
    if start.notna().sum() == 0:
        return None
    return float(start.min()), float(end.max())


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def collection_of(chosen: Run, first: Any, others: list[Run],
                  load: Callable[[Run], Any]) -> tuple[list[Any], list[str]]:
    """``first`` (the loaded ``chosen`` run) plus the runs of ``others`` of its collection on other
    devices, newest first; returns (profiles, notes). Candidates are picked by ``device_hint`` and
    loaded only when their device is not taken yet; a candidate that fails to load is skipped with
    a note (it must not stop the newest run from being read)."""
    hint = device_hint(chosen)
    span = time_span(first.kernels)
    if hint is None or span is None:
        return [first], []
    taken = set(first.kernels["device"].astype(str))
    group, notes = [first], []
    for run in reversed(others):
        other = device_hint(run)
        if other is None or other in taken:
            continue
        try:
            profile = load(run)
        except ProfileError as exc:
            notes.append(f"{run.path.name}: not read ({exc})")
            continue
        devices = set(profile.kernels["device"].astype(str))
        other_span = time_span(profile.kernels)
        if devices & taken or other_span is None or not _overlap(span, other_span):
            continue
        group.append(profile)
        taken |= devices
    return group, notes
