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
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ascendopt.analyze.traces.columns import BASE_COLUMNS, CORE_TYPES, SKIPPED_COLUMNS, TEXT_COLUMNS, canonical, side_of
from ascendopt.analyze.traces.csvread import read_columns, read_header
from ascendopt.analyze.traces.faults import reader, reading
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
            if seen[canon] == raw:
                raise ProfileError(f"{path}: column {raw!r} appears twice in the header; which one holds the "
                                   "data cannot be told", hint="remove the duplicate column")
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
            for col in metric_cols:  # a new array per column: arrow-backed columns are read-only views
                values = frame[col].to_numpy(dtype=float, copy=True)
                values[idle] = np.nan  # numpy, not Series.where: that is several times slower per column
                frame[col] = values


def finish_kernel_frame(frame, *, device_default: str = "npu:0", device_prefix: str = "npu", extra=None):
    """Add the missing base columns (NaN / defaults) and ``extra`` (name -> column), put base columns first.

    ``device`` becomes text (``npu:0``, ``cuda:0``, ``cpu``): numeric ids get ``device_prefix``.
    New columns are joined in one step: inserting them one by one into a wide frame is what makes
    pandas warn "DataFrame is highly fragmented".
    """
    import pandas as pd

    n = len(frame)
    replaced: dict = {}
    if "device" in frame.columns and frame["device"].dtype.kind in "fiu":
        ids = frame["device"].fillna(-1)
        labels = {v: (f"{device_prefix}:{int(v)}" if v >= 0 else device_default) for v in ids.unique()}
        replaced["device"] = pd.Categorical(ids.map(labels))
    extra = dict(extra or {})
    added: dict = {}
    for col in BASE_COLUMNS:
        if col in frame.columns or col in extra:
            continue
        if col == "op_type":
            added[col] = extra["name"] if "name" in extra else frame["name"].array
        elif col == "core_type":
            added[col] = pd.Categorical(["unknown"] * n)
        elif col == "device":
            added[col] = pd.Categorical([device_default] * n)
        else:
            added[col] = np.full(n, np.nan)
    for col, values in extra.items():
        (replaced if col in frame.columns else added)[col] = values
    base = frame.drop(columns=list(replaced)) if replaced else frame
    new = {**replaced, **added}
    if new:
        frame = pd.concat([base, pd.DataFrame(new, index=frame.index)], axis=1)
    ordered = list(BASE_COLUMNS) + [c for c in frame.columns if c not in BASE_COLUMNS]
    return frame[ordered]


@reader
def read_kernel_table(path: Path, *, device_default: str = "npu:0", extra_columns: Iterable[str] = ()):
    """kernel_details.csv or op_summary_*.csv -> (canonical frame, notes).

    Rows: one per device task, in file order. Units: ``*_us`` microseconds, ratios 0..1.
    Only the columns the analysis uses are read (``columns.SKIPPED_COLUMNS`` are not: long strings and ids
    cost read time and memory on big files). ``extra_columns``: canonical names of skipped columns to read
    anyway when the file has them (e.g. ``input_formats``, ``output_dtypes``; text columns come back
    categorical, numeric ones float64); names the file lacks are simply absent from the frame.
    """
    extra = frozenset(extra_columns)
    header = read_header(path)
    _require(header, path, NAME_HEADERS, "kernel name")
    _require(header, path, DURATION_HEADERS, "task duration")
    wanted = _wanted(header, path, skip=SKIPPED_COLUMNS - extra)
    frame, notes = read_columns(path, wanted, set(TEXT_COLUMNS))
    no_duration = frame["duration_us"].isna().to_numpy()
    if no_duration.all():
        raise ProfileError(f"{path}: no row has a valid duration ({DURATION_HEADERS[0]} / {DURATION_HEADERS[1]})")
    if no_duration.any():  # a task without a duration cannot be ranked: out of every total, said once
        frame = frame[~no_duration].reset_index(drop=True)
        notes.append(f"{path.name}: {int(no_duration.sum())} row(s) without a valid duration excluded from "
                     "every total")
    if frame["name"].isna().any():
        missing = int(frame["name"].isna().sum())
        raise ProfileError(f"{path}: {missing} row(s) have an empty name")
    extra = {}
    if "core_type" in frame.columns:
        extra["task_type"] = raw_task_types(frame["core_type"])
        extra["core_type"] = canonical_core_types(frame["core_type"])
    for col in ("input_shapes", "input_dtypes", "output_shapes"):
        if col in frame.columns:
            extra[col] = unquoted(frame[col])
    if "op_type" in frame.columns and frame["op_type"].isna().any():
        # Level0 files write N/A as the type; fall back to the kernel name.
        op_type = frame["op_type"].astype("object")
        extra["op_type"] = op_type.where(op_type.notna(), frame["name"].astype("object")).astype("category")
    frame = finish_kernel_frame(frame, device_default=device_default, extra=extra)
    blank_other_side(frame)
    return frame, notes


@reader
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


# OpBasicInfo.csv / summary.jsonl "Op Type" (the kernel's kind) -> canonical core_type of its one-row fallback
_KIND_CORE = {"cube": "cube", "vector": "vector", "mix": "mix_aic"}


def read_block_table(paths: list[Path], *, op_info: dict | None = None, folder: Path | None = None):
    """``msprof op`` per-block CSVs of one OPPROF folder -> (frame, notes).

    One row per (block_id, sub_block); columns of several group files are joined on those keys.
    ``core_type`` comes from the sub-block name (``cube0`` -> cube, ``vector0`` -> vector) and
    ``duration_us`` is that block's core time (the tool reports no per-block task duration).
    ``op_info`` (``traces.device.read_op_info``) names the kernel, its kind (``task_type``: cube / vector /
    mix as the file says) and block dims; without it the kernel is named after the folder. With op_info but
    no block CSV (only the basic info was collected) the frame is one row: the task and its duration.
    """
    merged = None
    notes: list[str] = []
    for path in paths:
        with reading(path):
            frame, more = _read_block_csv(path)
            notes += more
            if merged is None:
                merged = frame
            else:
                new = [c for c in frame.columns if c not in merged.columns or c in ("block_id", "sub_block")]
                merged = merged.merge(frame[new], on=["block_id", "sub_block"], how="outer")
    with reading(paths[0] if paths else folder or Path(".")):
        return _block_frame(merged, paths, notes, op_info, folder)


def _read_block_csv(path: Path):
    """One per-block CSV -> (frame with ``block_id``, ``sub_block`` as text, notes)."""
    header = read_header(path)
    if "block_id" not in header:
        raise ProfileError(f"{path}: missing column 'block_id'", hint="not an msprof op per-block CSV")
    wanted = _wanted(header, path, skip=frozenset())
    frame, notes = read_columns(path, wanted, set(TEXT_COLUMNS))
    if "sub_block" not in frame.columns:
        frame["sub_block"] = "block"
    frame["sub_block"] = frame["sub_block"].astype(str)
    return frame, notes


def _block_frame(merged, paths: list[Path], notes: list[str], op_info: dict | None, folder: Path | None):
    """``read_block_table``'s tail: the joined block rows (or op_info's one task row) as a kernel frame."""
    import pandas as pd

    name = (op_info or {}).get("name") or (paths[0].parent.name if paths else (folder.name if folder else "kernel"))
    kind = (op_info or {}).get("kind")
    if merged is None:
        if not op_info or op_info.get("task_duration_us") is None:
            raise ProfileError(f"{folder}: no per-block CSV and no task duration in OpBasicInfo.csv / summary.jsonl")
        # summary.jsonl's section averages (task level) stand in for the per-block rows
        metrics = {}
        for raw, value in (op_info.get("summary_metrics") or {}).items():
            canon = canonical(raw)
            if canon and canon not in TEXT_COLUMNS and canon not in metrics and math.isfinite(float(value)) \
                    and float(value) >= 0:
                metrics[canon] = [float(value)]
        merged = pd.DataFrame({"duration_us": [float(op_info["task_duration_us"])],
                               "core_type": pd.Categorical([_KIND_CORE.get(str(kind), "unknown")]), **metrics})
    else:
        sub = merged["sub_block"].str.lower()
        core = np.where(sub.str.startswith("cube"), "cube",
                        np.where(sub.str.startswith("vec"), "vector", "unknown"))
        cube_t = merged.get("cube_time_us", pd.Series(np.nan, index=merged.index))
        vec_t = merged.get("vector_time_us", pd.Series(np.nan, index=merged.index))
        duration = np.fmax(cube_t.to_numpy(float), vec_t.to_numpy(float))
        if np.isnan(duration).all():
            raise ProfileError(f"{paths[0]}: no aic_time(us) / aiv_time(us) values in the block rows")
        merged = pd.concat([merged, pd.DataFrame({"core_type": pd.Categorical(core), "duration_us": duration},
                                                 index=merged.index)], axis=1)
    n = len(merged)
    extra = {"name": pd.Categorical([name] * n), "op_type": pd.Categorical([name] * n)}
    if kind:
        extra["task_type"] = pd.Categorical([kind] * n)
    for col in ("block_dim", "mix_block_dim"):
        if op_info and op_info.get(col) is not None:
            extra[col] = np.full(n, float(op_info[col]))
    if op_info and op_info.get("device_id") is not None:
        extra["device"] = pd.Categorical([f"npu:{op_info['device_id']}"] * n)
    return finish_kernel_frame(merged, extra=extra), notes


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
