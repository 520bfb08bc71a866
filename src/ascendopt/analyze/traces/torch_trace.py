"""This tool's CUDA / CPU profiles: ``kernels.csv`` (canonical already), or the torch.profiler
chrome trace ``trace.json`` when no kernels.csv is there, plus ncu counters when present.

Kernel durations come from the trace / kernels.csv (production clocks); hardware counters come
from ncu (replayed launches), paired to kernels by bare function name (``ncu.kernel_key``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ascendopt.analyze.traces.ascend import finish_kernel_frame
from ascendopt.analyze.traces.columns import BASE_COLUMNS, KERNELS_CSV_REQUIRED, NOT_METRICS
from ascendopt.analyze.traces.csvread import read_columns, read_header
from ascendopt.analyze.traces.faults import line_of, reader
from ascendopt.errors import ProfileError

_TEXT = {"name", "core_type", "op_type", "device"}
# torch.profiler names the range of step N of its schedule "ProfilerStep#N" (a user_annotation event).
STEP_PREFIX = "ProfilerStep#"
_METRIC_SUFFIXES = ("_ratio", "_us", "_gbs", "_pct", "_kb", "_cycles", "_rate")


@reader
def read_kernels_csv(path: Path):
    """``kernels.csv`` written by ``ascendopt collect`` -> (frame, notes)."""
    header = read_header(path)
    for col in KERNELS_CSV_REQUIRED:
        if col not in header:
            raise ProfileError(f"{path}: missing column {col!r}", hint="expected ascendopt's kernels.csv")
    wanted = {h: h for h in header if h in BASE_COLUMNS or h in NOT_METRICS or h.endswith(_METRIC_SUFFIXES)}
    frame, notes = read_columns(path, wanted, _TEXT)
    if frame["name"].isna().any():
        raise ProfileError(f"{path}: {int(frame['name'].isna().sum())} row(s) have an empty name")
    frame["device"] = frame["device"].astype("string").fillna("cpu") if "device" in frame.columns else "cpu"
    return finish_kernel_frame(frame, device_default="cpu"), notes


@reader
def complete_events(path: Path) -> list[dict]:
    """A torch.profiler chrome trace's complete events (``ph`` X, with a ``dur``), as written; ProfileError
    naming the file when it is not readable JSON or has no ``traceEvents`` list.

    The one chrome-trace reader: ``read_chrome_trace``, ``collect.kernel_table`` (kernels.csv) and
    tools/kernel_gaps.py all read traces through it.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        line = line_of(exc, Path(path))
        raise ProfileError(f"{path}{f': line {line}' if line else ''}: not a readable chrome trace "
                           f"({exc.__class__.__name__})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(f"{path}: no traceEvents list")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


@reader
def read_chrome_trace(path: Path):
    """torch.profiler chrome trace -> (frame, notes): device kernels, else named CPU ranges."""
    import pandas as pd

    complete = complete_events(path)
    kernels = [e for e in complete if e.get("cat") == "kernel"]
    core = "cuda"
    if not kernels:
        # CPU interpreter: a kernel is the profiler range kernels._lib.common.launch opens
        kernels = [e for e in complete if e.get("cat") == "user_annotation"
                   and not str(e.get("name", "")).startswith(STEP_PREFIX)]
        core = "cpu"
    if not kernels:
        raise ProfileError(f"{path}: no kernel events and no named launch ranges in the trace")
    rows = []
    for e in kernels:
        args = e.get("args") or {}
        grid = args.get("grid")
        blocks = math.prod(int(g) for g in grid) if isinstance(grid, list) and grid else np.nan
        device = f"cuda:{args['device']}" if core == "cuda" and "device" in args else core
        rows.append({"name": str(e["name"]), "core_type": core, "start_us": float(e["ts"]),
                     "duration_us": float(e["dur"]), "block_dim": blocks, "device": device})
    frame = pd.DataFrame(rows).sort_values("start_us", kind="stable").reset_index(drop=True)
    frame["core_type"] = frame["core_type"].astype("category")
    return finish_kernel_frame(frame, device_default=core), []


def attach_ncu(frame, ncu_frame):
    """Join ncu metrics onto a duration table by bare kernel name (duration-weighted means).

    Kernels ncu did not profile keep NaN metrics (not collected), never 0.
    """
    from ascendopt.analyze.traces.ncu import kernel_key

    # ncu profiles a few launches (--launch-count): their duration-weighted mean stands for all
    metrics = [c for c in ncu_frame.columns
               if c not in NOT_METRICS and c not in ("name", "kernel_key", "core_type", "device", "launch_id")]
    if not metrics:
        return frame
    w = ncu_frame["duration_us"].to_numpy(float)
    weighted = ncu_frame[metrics].mul(w, axis=0)
    weights = ncu_frame[metrics].notna().mul(w, axis=0)
    keys = ncu_frame["kernel_key"]
    means = weighted.groupby(keys).sum(min_count=1) / weights.groupby(keys).sum().replace(0, np.nan)
    out = frame.copy()
    joined = means.reindex(out["name"].astype(str).map(kernel_key).to_numpy())
    for col in metrics:
        out[col] = joined[col].to_numpy()
    return out
