"""Nsight Compute raw CSV (``ncu --csv --page raw``) -> the canonical kernel table.

The file starts with ncu's ``==PROF==`` lines, then a header row of metric names, then a units
row, then one row per profiled launch; numbers may carry thousands separators (``1,980,000``).
Which raw metric becomes which canonical column is the table ``NCU_METRICS`` in
``traces.columns`` (tensor pipe -> ``mac_ratio`` like the Ascend cube, FMA/ALU pipes ->
``vec_ratio`` like the vector core, DRAM / L2 throughput -> ``dram_ratio`` / ``l2_ratio``, the
memory-movement classes). Percentages of peak become fractions 0..1.

ncu names kernels differently from torch.profiler (``at::reduce_kernel`` vs
``at::native::reduce_kernel<...>``), so ``kernel_key`` reduces both to the bare function name
for pairing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ascendopt.analyze.traces.columns import NCU_DEVICE, NCU_FALLBACK, NCU_METRICS, NCU_NAME
from ascendopt.analyze.traces.faults import reader
from ascendopt.errors import ProfileError

_TIME_UNITS_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
                     "s": 1e6, "second": 1e6}


def header_line(path: Path) -> int | None:
    """Index of ncu's header line (the first line starting with ``"ID"``), or None."""
    try:
        with open(path, "rb") as f:
            for i, line in enumerate(f):
                if i > 200:
                    return None
                if line.startswith((b'"ID"', b"ID,")):
                    return i
    except OSError:
        return None
    return None


def is_ncu_csv(path: Path) -> bool:
    return header_line(path) is not None


def kernel_key(name: str) -> str:
    """Bare function name: drops ``void``, namespaces, template arguments and parameters."""
    text = str(name).strip()
    text = text.removeprefix("void ")
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):  # first '<' or '(' at nesting depth 0 ends the qualified name
        if ch in "<(" and depth == 0:
            cut = i
            break
    base = text[:cut]
    return base.rsplit("::", 1)[-1].strip() or text


def number_column(series, path: Path, raw: str):
    """An ncu column as floats: thousands separators dropped, empty / n/a cells NaN; ProfileError on other text."""
    import pandas as pd

    cleaned = series.astype(str).str.replace(",", "", regex=False).str.strip()
    cleaned = cleaned.where(~cleaned.isin(["", "n/a", "N/A", "nan"]))
    values = pd.to_numeric(cleaned, errors="coerce")
    bad = values.isna() & cleaned.notna()
    if bad.any():
        raise ProfileError(f"{path}: column {raw!r} has a non-numeric value {cleaned[bad].iloc[0]!r}")
    return values.astype(float)


@reader
def raw_launches(path: Path):
    """An ncu raw CSV's launch rows as text (one per profiled launch, ID order) and its units row (a Series, or
    None when this ncu wrote none). ProfileError naming the file when it is not such a CSV or has no launch."""
    import pandas as pd

    skip = header_line(path)
    if skip is None:
        raise ProfileError(f"{path}: no ncu header row (a line starting with \"ID\")",
                           hint="expected `ncu --csv --page raw` output")
    try:
        raw = pd.read_csv(path, skiprows=skip, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot parse as CSV ({str(exc).splitlines()[0][:120]})") from None
    if NCU_NAME not in raw.columns:
        raise ProfileError(f"{path}: missing column {NCU_NAME!r}")
    # the row after the header holds units (its Kernel Name cell is empty); older ncu omits it
    units = raw.iloc[0] if len(raw) and raw.iloc[0][NCU_NAME] == "" else None
    data = raw.iloc[1:] if units is not None else raw
    data = data[data[NCU_NAME] != ""].reset_index(drop=True)
    if data.empty:
        raise ProfileError(f"{path}: header only, no profiled kernel rows",
                           hint="ncu profiled nothing: check --kernel-name / --launch-count")
    return data, units


@reader
def read_ncu_raw(path: Path):
    """One ncu raw CSV -> (kernel frame, device facts dict, notes).

    Frame columns: name, kernel_key, core_type (``cuda``), duration_us, block_dim, block_size,
    device, launch_id, and the canonical metrics present. Rows: one per profiled launch, in ID order.
    """
    import pandas as pd

    data, units = raw_launches(path)
    frame = pd.DataFrame({"name": data[NCU_NAME].astype(str)})
    frame["kernel_key"] = frame["name"].map(kernel_key)
    frame["core_type"] = "cuda"
    frame["launch_id"] = number_column(data["ID"], path, "ID") if "ID" in data.columns else np.arange(len(data))
    dev = (number_column(data["Device"], path, "Device") if "Device" in data.columns
           else pd.Series(0.0, index=data.index))
    frame["device"] = [f"cuda:{int(d)}" for d in dev.fillna(0)]
    notes: list[str] = []
    rank: dict[str, int] = {}
    for canon, (names, combine, scale) in NCU_METRICS.items():
        present = [n for n in names if n in data.columns]
        if not present and canon in NCU_FALLBACK:
            present = [n for n in NCU_FALLBACK[canon] if n in data.columns]
        if not present:
            continue
        chosen = present if combine == "max" else present[:1]
        # how preferred the chosen raw metric is (0 = first choice); merge_ncu_files keeps the best
        rank[canon] = (list(names) + list(NCU_FALLBACK.get(canon, ()))).index(chosen[0])
        values = np.fmax.reduce([number_column(data[n], path, n).to_numpy() for n in chosen]) * scale
        if canon == "duration_us":
            unit = str(units[chosen[0]]).strip() if units is not None else "ns"
            if unit not in _TIME_UNITS_TO_US:
                raise ProfileError(f"{path}: unknown time unit {unit!r} for {chosen[0]}")
            values = values * _TIME_UNITS_TO_US[unit]
        frame[canon] = values
    if "duration_us" not in frame.columns:
        raise ProfileError(f"{path}: missing column 'gpu__time_duration.sum' (kernel duration)",
                           hint="collect at least the SpeedOfLight section")
    frame.attrs["ncu_rank"] = rank
    return frame, _device(data, path), notes


def _device(data, path: Path) -> dict:
    facts: dict = {}
    first = data.iloc[0]
    if NCU_DEVICE["chip"] in data.columns:
        facts["chip"] = str(first[NCU_DEVICE["chip"]]).strip() or None
    for key in ("sm_count", "clock_khz"):
        col = NCU_DEVICE[key]
        if col in data.columns:
            value = re.sub(r"[^0-9.]", "", str(first[col]))
            facts[key] = float(value) if value else None
    out = {"chip": facts.get("chip")}
    if facts.get("sm_count"):
        out["cube_cores"] = out["vector_cores"] = int(facts["sm_count"])
    if facts.get("clock_khz"):
        out["clock_mhz"] = round(facts["clock_khz"] / 1000.0)
    return out


def merge_ncu_files(frames: list):
    """Several ncu files of the same launches (one per section set): columns joined by row.

    For a canonical column present in several files the one computed from the better-ranked raw
    metric wins (e.g. tensor pipe "pct_of_peak_sustained_active" over "..._elapsed"). Files with
    different launch lists cannot be paired and raise ProfileError.
    """
    base = frames[0][0].copy()
    rank = dict(base.attrs.get("ncu_rank", {}))
    for frame, _, _ in frames[1:]:
        if list(frame["kernel_key"]) != list(base["kernel_key"]):
            raise ProfileError("ncu files profile different launches; cannot pair their rows",
                               hint="collect them with the same --launch-skip/--launch-count")
        other_rank = frame.attrs.get("ncu_rank", {})
        for col in frame.columns:
            better = col in other_rank and other_rank[col] < rank.get(col, len(frame.columns))
            if col not in base.columns or (better and col != "duration_us"):
                base[col] = frame[col].to_numpy()
                if col in other_rank:
                    rank[col] = other_rank[col]
    base.attrs["ncu_rank"] = rank
    return base
