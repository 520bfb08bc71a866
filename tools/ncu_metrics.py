"""Raw Nsight Compute metrics per launch, grouped by kernel, from ``ncu --csv --page raw`` files.

``ascendopt analyze`` maps ncu's metrics onto its canonical columns; this prints the raw metrics asked for,
launch by launch, in the order ncu profiled them, with each kernel's median: for side-by-side launches such
as ``benchmarks/ncu_workload.py --variants "default;peer;..."``::

    python3 tools/ncu_metrics.py run.csv --metrics gpu__time_duration.sum,dram__bytes_write.sum

Values are as ncu wrote them (its units row is printed with each metric); thousands separators are dropped.
Exit 2 when a file is not an ncu raw CSV or lacks a metric asked for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ascendopt.analyze.traces.columns import NCU_NAME
from ascendopt.analyze.traces.ncu import kernel_key, number_column, raw_launches
from ascendopt.errors import ProfileError


def launches(path: Path, metrics: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """``path``'s launches: columns ``kernel`` (bare name) and one float column per metric, in ID order; and
    each metric's unit. ProfileError naming the file when it is not an ncu raw CSV or lacks a metric."""
    data, units = raw_launches(path)
    missing = [m for m in metrics if m not in data.columns]
    if missing:
        raise ProfileError(f"{path}: no column {missing[0]!r}")
    out = pd.DataFrame({"kernel": data[NCU_NAME].map(kernel_key).to_numpy()})
    for m in metrics:
        values = number_column(data[m], path, m)
        if values.isna().any():  # a metric ncu could not collect: say so rather than print nan
            raise ProfileError(f"{path}: column {m!r} has a non-numeric value {data[m][values.isna()].iloc[0]!r}")
        out[m] = values.to_numpy()
    return out, {m: str(units[m]) if units is not None else "" for m in metrics}


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
