"""Raw Nsight Compute metrics per launch, grouped by kernel, from ``ncu --csv --page raw`` files.

``ascendopt analyze`` maps ncu's metrics onto its canonical columns; this prints the raw metrics asked for,
launch by launch, in the order ncu profiled them, with each kernel's median: for side-by-side launches such
as ``benchmarks/ncu_workload.py --variants "default;peer;..."``::

    python3 benchmarks/ncu_metrics.py run.csv --metrics gpu__time_duration.sum,dram__bytes_write.sum

Values are as ncu wrote them (its units row is printed with each metric); thousands separators are dropped.
Exit 2 when a file is not an ncu raw CSV or lacks a metric asked for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ascendopt.errors import ProfileError
from ascendopt.traces.ncu import header_line, kernel_key

NAME = "Kernel Name"


def launches(path: Path, metrics: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """``path``'s launches: columns ``kernel`` (bare name) and one float column per metric, in ID order; and
    each metric's unit. ProfileError naming the file when it is not an ncu raw CSV or lacks a metric."""
    skip = header_line(path)
    if skip is None:
        raise ProfileError(f"{path}: no ncu header row (a line starting with \"ID\"); expected ncu --csv --page raw")
    try:
        raw = pd.read_csv(path, skiprows=skip, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise ProfileError(f"{path}: cannot parse as CSV ({str(exc).splitlines()[0][:120]})") from None
    missing = [m for m in [NAME, *metrics] if m not in raw.columns]
    if missing:
        raise ProfileError(f"{path}: no column {missing[0]!r}")
    has_units = len(raw) > 0 and raw.iloc[0][NAME] == ""
    units = {m: str(raw.iloc[0][m]) if has_units else "" for m in metrics}
    data = raw.iloc[1:] if has_units else raw
    data = data[data[NAME] != ""]
    out = pd.DataFrame({"kernel": data[NAME].map(kernel_key).to_numpy()})
    for m in metrics:
        text = data[m].str.replace(",", "", regex=False).str.strip()
        values = pd.to_numeric(text, errors="coerce")
        if values.isna().any():
            raise ProfileError(f"{path}: column {m!r} has a non-numeric value {text[values.isna()].iloc[0]!r}")
        out[m] = values.to_numpy(dtype=float)
    return out, units


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path, help="ncu --csv --page raw outputs")
    ap.add_argument("--metrics", required=True, help="comma-separated raw metric names")
    args = ap.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    try:
        tables = [(path, *launches(path, metrics)) for path in args.files]
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path, table, units in tables:
        print(f"\n{path.name}\n")
        print("| kernel | metric | unit | per launch | median |")
        print("|---|---|---|---|---|")
        for kernel, group in table.groupby("kernel", sort=False):
            for m in metrics:
                values = ", ".join(f"{v:g}" for v in group[m])
                print(f"| {kernel} | {m} | {units[m]} | {values} | {group[m].median():g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
