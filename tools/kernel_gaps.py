"""Per-kernel device durations and the idle gaps between back-to-back kernels, from a kernel trace.

Device events time a batch of calls from its first kernel's start to its last kernel's end, so a difference
between two sides can sit in the kernels or in the idle time between them. This reads the kernel records of
a torch.profiler chrome trace (``*.json``: events of category ``kernel``, ``ts``/``dur`` in us, ``args.stream``)
or of an Nsight Systems trace exported to SQLite (``nsys export --type sqlite``: table
``CUPTI_ACTIVITY_KIND_KERNEL``, names in ``StringIds``) and prints, per kernel name: launches, median / mean
duration, and the median idle gap before the kernel when the kernel before it on the same stream has the same
name (back-to-back calls of one side).

    python3 tools/kernel_gaps.py trace.json [--min-us 20] [--batches N|auto]
    nsys export --type sqlite report.nsys-rep && python3 tools/kernel_gaps.py report.sqlite --batches auto

Exit 2 when the file is not such a trace.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys

import pandas as pd

QUERY = """SELECT k.start AS start, k.end AS end, k.deviceId AS device, k.streamId AS stream, s.value AS name
           FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON k.shortName = s.id"""


def kernel_records(path: str) -> pd.DataFrame:
    """The trace's kernels, one row each: ``start``/``end`` (ns), ``device``, ``stream``, ``name``, sorted by
    start. ValueError naming the file when it has no kernel records."""
    if path.endswith(".json"):
        return _chrome_kernels(path)
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            return pd.read_sql_query(QUERY, con).sort_values("start", kind="stable").reset_index(drop=True)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        cause = exc.__cause__ or exc  # pandas wraps sqlite's error in a message that quotes the whole query
        raise ValueError(f"{path}: not an Nsight Systems SQLite export with kernel records ({cause})") from exc


def _chrome_kernels(path: str) -> pd.DataFrame:
    """``kernel_records`` of a torch.profiler chrome trace (times in us, fractional)."""
    from ascendopt.analyze.traces.torch_trace import complete_events
    from ascendopt.errors import ProfileError

    try:
        events = complete_events(path)
    except ProfileError as exc:
        raise ValueError(str(exc)) from None
    kernels = [e for e in events if e.get("cat") == "kernel" and "ts" in e]
    if not kernels:
        raise ValueError(f"{path}: no kernel events in the chrome trace")
    try:
        t0 = min(float(e["ts"]) for e in kernels)  # times from the first kernel: epoch-sized us lose digits in ns
        rows = [{"start": (float(e["ts"]) - t0) * 1e3, "end": (float(e["ts"]) - t0 + float(e["dur"])) * 1e3,
                 "device": (e.get("args") or {}).get("device", 0), "stream": (e.get("args") or {}).get("stream", 0),
                 "name": str(e.get("name", "?"))} for e in kernels]
    except (TypeError, ValueError):
        raise ValueError(f"{path}: a kernel event's ts or dur is not a number") from None
    return pd.DataFrame(rows).sort_values("start", kind="stable").reset_index(drop=True)


def gap_table(kernels: pd.DataFrame, min_us: float = 0.0) -> pd.DataFrame:
    """Per kernel name (kernels of at least ``min_us`` us): ``launches``, ``median_us``, ``mean_us`` (duration),
    and ``gap_us`` / ``gaps``: the median idle time between a launch and the one before it on the same device
    and stream when that one has the same name, and how many such pairs there were."""
    k = kernels.copy()
    k["dur_us"] = (k["end"] - k["start"]) / 1e3
    by_stream = k.groupby(["device", "stream"], sort=False)
    k["gap_us"] = (k["start"] - by_stream["end"].shift()) / 1e3
    k["same_before"] = k["name"] == by_stream["name"].shift()
    k = k[k["dur_us"] >= min_us]
    rows = []
    for name, g in k.groupby("name", sort=True):
        back_to_back = g.loc[g["same_before"], "gap_us"]
        rows.append({"kernel": name, "launches": len(g), "median_us": g["dur_us"].median(),
                     "mean_us": g["dur_us"].mean(), "gap_us": back_to_back.median() if len(back_to_back) else None,
                     "gaps": len(back_to_back)})
    return pd.DataFrame(rows, columns=["kernel", "launches", "median_us", "mean_us", "gap_us", "gaps"])


def batch_table(kernels: pd.DataFrame, calls: int | None = None) -> pd.DataFrame:
    """Per kernel name, over its runs of exactly ``calls`` back-to-back launches on one stream (the timed
    batches of ``ascendopt.judge.bench``, each run bounded by other kernels such as the device hold); ``calls`` None:
    each kernel's most frequent run length of at least 2 (``ascendopt.judge.bench`` sizes a comparison's batches from
    its sides' speed, so one trace may hold several). Columns: ``calls``, ``batches``, ``median_us`` (launch
    duration), ``gap_us`` (idle time between a batch's launches) and ``span_us`` (a batch's first start to last
    end, per launch: what the device events around it measure), medians over the batches of each batch's
    median."""
    k = kernels.copy()
    k["dur_us"] = (k["end"] - k["start"]) / 1e3
    runs = []
    for _, stream in k.groupby(["device", "stream"], sort=False):
        stream = stream.reset_index(drop=True)
        run = (stream["name"] != stream["name"].shift()).cumsum()  # a new run where the name changes
        runs += [b for _, b in stream.groupby(run, sort=False) if len(b) >= 2]
    wanted = {}
    for b in runs:
        wanted.setdefault(b["name"].iloc[0], []).append(len(b))
    wanted = {name: calls if calls is not None else pd.Series(lengths).mode().max()
              for name, lengths in wanted.items()}
    rows = []
    for b in runs:
        n = len(b)
        if n != wanted[b["name"].iloc[0]]:
            continue
        gaps = (b["start"].iloc[1:].to_numpy() - b["end"].iloc[:-1].to_numpy()) / 1e3
        span = (b["end"].iloc[-1] - b["start"].iloc[0]) / 1e3 / n
        rows.append({"kernel": b["name"].iloc[0], "calls": n, "dur": b["dur_us"].median(),
                     "gap": float(pd.Series(gaps).median()), "span": span})
    per = pd.DataFrame(rows, columns=["kernel", "calls", "dur", "gap", "span"])
    table = per.groupby("kernel", sort=True).agg(calls=("calls", "first"), batches=("dur", "size"),
                                                 median_us=("dur", "median"), gap_us=("gap", "median"),
                                                 span_us=("span", "median"))
    return table.reset_index()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a torch.profiler chrome trace (.json) or an nsys trace exported to SQLite")
    ap.add_argument("--min-us", type=float, default=0.0, help="leave out kernels shorter than this (us)")
    ap.add_argument("--batches", metavar="N|auto",
                    help="also a table over the runs of exactly N back-to-back launches of one kernel (the timed "
                         "batches of ascendopt.judge.bench: N is its calls per sample); auto: each kernel's most "
                         "frequent run length")
    args = ap.parse_args()
    calls = None
    if args.batches is not None and args.batches != "auto":
        if not args.batches.isdigit() or int(args.batches) < 2:
            print(f"error: --batches {args.batches}: a batch has at least 2 launches (or auto)", file=sys.stderr)
            return 2
        calls = int(args.batches)
    try:
        kernels = kernel_records(args.trace)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = gap_table(kernels, args.min_us)
    print("| kernel | launches | median us | mean us | median gap before (same kernel before) us | gaps |")
    print("|---|---|---|---|---|---|")
    for r in table.itertuples():
        gap = "" if r.gap_us is None or pd.isna(r.gap_us) else f"{r.gap_us:.2f}"
        print(f"| {r.kernel} | {r.launches} | {r.median_us:.2f} | {r.mean_us:.2f} | {gap} | {r.gaps} |")
    if args.batches is not None:
        print("\nTimed batches: runs of N back-to-back launches of one kernel (medians over the batches):\n")
        print("| kernel | N | batches | launch us | gap us | span per launch us |")
        print("|---|---|---|---|---|---|")
        for r in batch_table(kernels, calls).itertuples():
            print(f"| {r.kernel} | {r.calls} | {r.batches} | {r.median_us:.2f} | {r.gap_us:.2f} | {r.span_us:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
