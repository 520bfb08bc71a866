"""Chrome trace (torch.profiler ``trace.json``) -> this tool's kernel table (``kernels.csv``).

Canonical columns (agreed interface): ``name, core_type, start_us, duration_us, step, device`` and,
when the trace knows it, ``block_dim`` (CUDA: programs in the launch grid, the counterpart of
Ascend's Block Dim). Rows:

* cuda: every device activity: ``kernel`` (core_type ``cuda``), ``gpu_memcpy`` (``memcpy``),
  ``gpu_memset`` (``memset``). Triton kernels carry their ``@triton.jit`` function name.
* cpu: Triton kernels run in the interpreter as host code, so a kernel is a named profiler range
  (``kernels._lib.common.launch`` and the collector's interpreter hook open one per launch; core_type
  ``cpu``), plus every top-level torch op outside such a range (core_type ``torch_op``), which is
  what a torch fallback looks like.

``step`` is the number of the ``ProfilerStep#N`` range that contains the row's start.

The trace file is read by ``analyze.traces.torch_trace.complete_events``, the one chrome-trace reader
(``analyze`` reads the same files back); this module only turns its events into rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ascendopt.analyze.traces.torch_trace import STEP_PREFIX, complete_events

COLUMNS = ["name", "core_type", "start_us", "duration_us", "step", "device", "block_dim"]
_DEVICE_CATEGORIES = {"kernel": "cuda", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def load_events(trace_path: Path) -> list[dict[str, Any]]:
    """Complete ("X") events of a chrome trace that carry a start time (``ts``, us): every row and step
    range below is placed by it. ProfileError naming the file when it is not a readable trace."""
    return [e for e in complete_events(trace_path) if "ts" in e]


def _steps(events: Iterable[dict[str, Any]]) -> list[tuple[float, float, int]]:
    spans = []
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") == "user_annotation" and name.startswith(STEP_PREFIX):
            suffix = name[len(STEP_PREFIX):]
            if suffix.isdigit():
                spans.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), int(suffix)))
    return sorted(spans)


def _step_of(ts: float, steps: list[tuple[float, float, int]]) -> int | None:
    inside = [n for start, end, n in steps if start <= ts <= end]
    if inside:
        return inside[-1]
    before = [n for start, _, n in steps if start <= ts]  # async device work may outlive its step range
    return before[-1] if before else None


def _grid_programs(args: dict[str, Any]) -> int | None:
    grid = args.get("grid")
    if isinstance(grid, list) and grid and all(isinstance(g, (int, float)) for g in grid):
        return int(math.prod(int(g) for g in grid))
    return None


def _row(e: dict[str, Any], core_type: str, device: str, steps, block_dim=None) -> dict[str, Any]:
    ts = float(e["ts"])
    return {"name": str(e["name"]), "core_type": core_type, "start_us": ts, "duration_us": float(e["dur"]),
            "step": _step_of(ts, steps), "device": device, "block_dim": block_dim}


def cuda_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = _steps(events)
    rows = []
    for e in events:
        core_type = _DEVICE_CATEGORIES.get(str(e.get("cat", "")))
        if core_type is None:
            continue
        args = e.get("args") or {}
        device = f"cuda:{args['device']}" if "device" in args else "cuda"
        rows.append(_row(e, core_type, device, steps, _grid_programs(args)))
    return rows


def cpu_rows(events: list[dict[str, Any]], kernel_names: set[str] | None = None) -> list[dict[str, Any]]:
    """Named kernel ranges and top-level torch ops, found by interval nesting per thread.

    ``kernel_names``: if given, only ranges with these names count as kernels (other user ranges
    are skipped). A range nested directly in a range of the same name (launch() inside the
    interpreter hook) is one launch, not two.
    """
    steps = _steps(events)
    rows = []
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") in ("user_annotation", "cpu_op"):
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[dict[str, Any]] = []
        for e in thread_events:
            ts = float(e["ts"])
            while stack and ts >= float(stack[-1]["ts"]) + float(stack[-1]["dur"]):
                stack.pop()
            name = str(e["name"])
            is_step = e["cat"] == "user_annotation" and name.startswith(STEP_PREFIX)
            enclosing = [s for s in stack if not str(s["name"]).startswith(STEP_PREFIX)]
            if e["cat"] == "user_annotation" and not is_step:
                duplicate = bool(enclosing) and enclosing[-1]["name"] == name
                if not duplicate and (kernel_names is None or name in kernel_names):
                    rows.append(_row(e, "cpu", "cpu", steps))
            elif e["cat"] == "cpu_op" and not enclosing:
                rows.append(_row(e, "torch_op", "cpu", steps))
            stack.append(e)
    return rows


def build(trace_paths: list[Path], backend: str, kernel_names: set[str] | None = None):
    """Kernel table (pandas DataFrame, canonical columns, sorted by start) from one or more traces."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for path in trace_paths:
        events = load_events(path)
        rows += cuda_rows(events) if backend == "cuda" else cpu_rows(events, kernel_names)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["step"] = frame["step"].astype("Int64")
    frame["block_dim"] = frame["block_dim"].astype("Int64")
    if backend != "cuda" or frame["block_dim"].isna().all():
        frame = frame.drop(columns=["block_dim"])  # only written when the trace knows it
    return frame.sort_values("start_us", kind="stable").reset_index(drop=True)


def write(trace_paths: list[Path], dest: Path, backend: str, kernel_names: set[str] | None = None) -> Path:
    frame = build(trace_paths, backend, kernel_names)
    path = Path(dest) / "kernels.csv"
    frame.to_csv(path, index=False)
    return path
