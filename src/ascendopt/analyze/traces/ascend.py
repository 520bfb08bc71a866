"""Readers for Ascend profiler tables -> the canonical kernel table.

* ``read_kernel_table``: torch_npu ``kernel_details.csv`` and msprof ``op_summary_*.csv`` (the
  same rows before and after torch_npu's six renames; every header variant of
  docs/profiler-formats.md §4.2 loads because columns are looked up by name).
* ``read_op_statistic``: ``op_statistic.csv`` (aggregate per OP Type and Core Type).
* ``read_block_table``: ``msprof op`` per-block CSVs (``OPPROF_*/<Group>.csv``), one row per
  block / sub-block, merged across the group files of one folder.

Every reader returns canonical columns only (``traces.columns``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ascendopt.analyze.traces.columns import BASE_COLUMNS, CORE_TYPES, SKIPPED_COLUMNS, TEXT_COLUMNS, canonical, side_of
from ascendopt.analyze.traces.csvread import read_columns, read_header
from ascendopt.errors import ProfileError

NAME_HEADERS = ("Name", "Op Name")
DURATION_HEADERS = ("Duration(us)", "Task Duration(us)")


def _wanted(header: list[str], path: Path, *, skip: frozenset[str] = SKIPPED_COLUMNS) -> dict[str, str]:
    """raw -> canonical for the header's columns this tool uses; duplicates are an error."""
    wanted: dict[str, str] = {}
    seen: dict[str, str] = {}
    for raw in header:
        if not raw:
            continue  # the empty name after a trailing comma (msprof op CSVs)
        canon = canonical(raw)
        if canon is None or canon in skip:
            continue
        if canon in seen:
            raise ProfileError(f"{path}: columns {seen[canon]!r} and {raw!r} both mean {canon!r}")
        seen[canon] = raw
        wanted[raw] = canon
    return wanted


def _require(header: list[str], path: Path, choices: tuple[str, ...], what: str) -> None:
    if not any(h in header for h in choices):
        found = ", ".join(h for h in header[:8] if h)
        raise ProfileError(
            f"{path}: missing column {' or '.join(repr(c) for c in choices)} ({what}); found: {found}, ...",
            hint="is this a kernel_details.csv / op_summary CSV?",
        )


def canonical_core_types(values):
    """Map raw Accelerator Core values (a pandas Series, possibly categorical) to canonical ones.

    Works on the distinct values only (a million rows hold a handful of core types).
    """
    import pandas as pd

    cat = values.astype("category")
    mapped = [CORE_TYPES.get(str(v).strip(), str(v).strip().lower()) for v in cat.cat.categories]
    labels = sorted(set(mapped) | {"unknown"})
    index = np.array([labels.index(m) for m in mapped] + [labels.index("unknown")], dtype=np.int32)
    codes = cat.cat.codes.to_numpy()
    return pd.Categorical.from_codes(index[np.where(codes < 0, len(mapped), codes)], categories=labels)


def raw_task_types(values):
    """The core column as the file says it (``AI_CORE``, ``AI_CPU``, ``MIX_AIC``, ...), categorical;
    an empty / ``N/A`` cell reads ``N/A``. Works on the distinct values only."""
    cat = values.astype("category")
    cat = cat.cat.rename_categories([str(v).strip() for v in cat.cat.categories])
    if cat.isna().any():
        cat = cat.cat.add_categories(["N/A"]) if "N/A" not in cat.cat.categories else cat
        cat = cat.fillna("N/A")
    return cat


def unquoted(values):
    """Shape / dtype cells without the literal quotes some exports wrap them in (``"32,3,224,224"`` ->
    ``32,3,224,224``); categorical, missing stays missing. Distinct values only."""
    cat = values.astype("category")
    stripped = [str(v).strip().strip('"') for v in cat.cat.categories]
    if len(set(stripped)) == len(stripped):
        return cat.cat.rename_categories(stripped)
    import pandas as pd

    return pd.Categorical(cat.astype("object").map(lambda v: v if v is None or v != v else str(v).strip().strip('"')))


def blank_other_side(frame) -> None:
    """Set PMU cells of the half a task did not run on to NaN (in place).

    A vector kernel's ``aic_*`` block is all 0 and means "not applicable", not "idle" (§4.4).
    The half counts as not run when its cycle counter is 0; without cycle columns (older
    groups) the core type decides. MIX rows keep both halves unless a half has 0 cycles.
    """
    cols = set(frame.columns)
    for side, cycles, core in (("cube", "cube_cycles", "vector"), ("vector", "vector_cycles", "cube")):
        metric_cols = [c for c in frame.columns if side_of(c) == side]
        if not metric_cols:
            continue
        if cycles in cols:
            idle = (frame[cycles] == 0).to_numpy()
        else:
            idle = (frame["core_type"] == core).to_numpy()
        if idle.any():
            for col in metric_cols:  # column-wise: arrow-backed columns are read-only views
                frame[col] = frame[col].where(~idle)


def finish_kernel_frame(frame, *, device_default: str = "npu:0", device_prefix: str = "npu"):
    """Add the missing base columns (NaN / defaults) and put base columns first.

    ``device`` becomes text (``npu:0``, ``cuda:0``, ``cpu``): numeric ids get ``device_prefix``.
    """
    import pandas as pd

    n = len(frame)
    if "device" in frame.columns and frame["device"].dtype.kind in "fiu":
        ids = frame["device"].fillna(-1)
        labels = {v: (f"{device_prefix}:{int(v)}" if v >= 0 else device_default) for v in ids.unique()}
        frame["device"] = pd.Categorical(ids.map(labels))
    for col in BASE_COLUMNS:
        if col in frame.columns:
            continue
        if col == "op_type":
            frame[col] = frame["name"]
        elif col == "core_type":
            frame[col] = pd.Categorical(["unknown"] * n)
        elif col == "device":
            frame[col] = pd.Categorical([device_default] * n)
        else:
            frame[col] = np.nan
    ordered = list(BASE_COLUMNS) + [c for c in frame.columns if c not in BASE_COLUMNS]
    return frame[ordered]


def read_kernel_table(path: Path, *, device_default: str = "npu:0"):
    """kernel_details.csv or op_summary_*.csv -> (canonical frame, notes).

    Rows: one per device task, in file order. Units: ``*_us`` microseconds, ratios 0..1.
    """
    header = read_header(path)
    _require(header, path, NAME_HEADERS, "kernel name")
    _require(header, path, DURATION_HEADERS, "task duration")
    wanted = _wanted(header, path)
    frame, notes = read_columns(path, wanted, set(TEXT_COLUMNS))
    if frame["name"].isna().any():
        missing = int(frame["name"].isna().sum())
        raise ProfileError(f"{path}: {missing} row(s) have an empty name")
    if "core_type" in frame.columns:
        frame["task_type"] = raw_task_types(frame["core_type"])
        frame["core_type"] = canonical_core_types(frame["core_type"])
    for col in ("input_shapes", "input_dtypes", "output_shapes"):
        if col in frame.columns:
            frame[col] = unquoted(frame[col])
    if "op_type" in frame.columns and frame["op_type"].isna().any():
        # Level0 files write N/A as the type; fall back to the kernel name.
        op_type = frame["op_type"].astype("object")
        frame["op_type"] = op_type.where(op_type.notna(), frame["name"].astype("object")).astype("category")
    blank_other_side(frame)
    return finish_kernel_frame(frame, device_default=device_default), notes


def read_op_statistic(path: Path):
    """op_statistic.csv -> frame with op_type, core_type, count, total_us, min_us, avg_us, max_us,
    ratio_pct (and device when present)."""
    header = read_header(path)
    _require(header, path, ("OP Type",), "op type")
    _require(header, path, ("Total Time(us)",), "total time")
    wanted = _wanted(header, path, skip=frozenset())
    frame, _ = read_columns(path, wanted, set(TEXT_COLUMNS))
    if "core_type" in frame.columns:
        frame["core_type"] = canonical_core_types(frame["core_type"])
    return frame


def read_block_table(paths: list[Path]):
    """``msprof op`` per-block CSVs of one OPPROF folder -> (frame, notes).

    One row per (block_id, sub_block); columns of several group files are joined on those keys.
    ``core_type`` comes from the sub-block name (``cube0`` -> cube, ``vector0`` -> vector) and
    ``duration_us`` is that block's core time (the tool reports no task duration).
    """
    import pandas as pd

    merged = None
    notes: list[str] = []
    for path in paths:
        header = read_header(path)
        if "block_id" not in header:
            raise ProfileError(f"{path}: missing column 'block_id'", hint="not an msprof op per-block CSV")
        wanted = _wanted(header, path, skip=frozenset())
        frame, more = read_columns(path, wanted, set(TEXT_COLUMNS))
        notes += more
        if "sub_block" not in frame.columns:
            frame["sub_block"] = "block"
        frame["sub_block"] = frame["sub_block"].astype(str)
        if merged is None:
            merged = frame
        else:
            new = [c for c in frame.columns if c not in merged.columns or c in ("block_id", "sub_block")]
            merged = merged.merge(frame[new], on=["block_id", "sub_block"], how="outer")
    assert merged is not None
    sub = merged["sub_block"].str.lower()
    core = np.where(sub.str.startswith("cube"), "cube", np.where(sub.str.startswith("vec"), "vector", "unknown"))
    merged["core_type"] = pd.Categorical(core)
    cube_t = merged.get("cube_time_us", pd.Series(np.nan, index=merged.index))
    vec_t = merged.get("vector_time_us", pd.Series(np.nan, index=merged.index))
    merged["duration_us"] = np.fmax(cube_t.to_numpy(float), vec_t.to_numpy(float))
    if merged["duration_us"].isna().all():
        raise ProfileError(f"{paths[0]}: no aic_time(us) / aiv_time(us) values in the block rows")
    op = paths[0].parent.name
    merged["name"] = pd.Categorical([op] * len(merged))
    return finish_kernel_frame(merged), notes


def clock_from_cycles(frame) -> float | None:
    """Back-solve the AI Core clock in MHz from cycles and core time (§6.5), or None.

    Uses rows whose block count is at most 20 (the smallest A2 core count), so every block ran in
    one wave and cycles / blocks / core time is the clock; pooled as sum(cycles) / sum(blocks x
    time) so long rows (little rounding in their times) dominate.
    """
    cycles_sum, block_time_sum = 0.0, 0.0
    for cycles, time_col in (("cube_cycles", "cube_time_us"), ("vector_cycles", "vector_time_us")):
        if cycles not in frame.columns or time_col not in frame.columns:
            continue
        blk = frame["block_dim"]
        ok = (blk > 0) & (blk <= 20) & (frame[time_col] > 0) & (frame[cycles] > 0)
        if cycles == "vector_cycles":
            # MIX_AIC: the vector half runs over Mix Block Dim blocks (§6.4); skip those rows
            ok &= frame["core_type"] != "mix_aic"
        cycles_sum += float(frame.loc[ok, cycles].sum())
        block_time_sum += float((blk[ok] * frame.loc[ok, time_col]).sum())
    if block_time_sum <= 0:
        return None
    return float(round(cycles_sum / block_time_sum))


def cube_cores_from_utilization(frame, clock_mhz: float) -> int | None:
    """ai_core_num = cycles / (clock x Duration x cube_utilization / 100) (§6.5), median, or None."""
    need = {"cube_cycles", "cube_utilization_pct", "duration_us"}
    if not need <= set(frame.columns) or not clock_mhz:
        return None
    ok = (frame["cube_utilization_pct"] > 0) & (frame["cube_cycles"] > 0) & (frame["duration_us"] > 0)
    if not ok.any():
        return None
    est = frame.loc[ok, "cube_cycles"] / (clock_mhz * frame.loc[ok, "duration_us"] *
                                          frame.loc[ok, "cube_utilization_pct"] / 100.0)
    value = float(np.median(est.to_numpy()))
    return round(value) if math.isfinite(value) and value >= 1 else None
