"""Speed and memory of `analyze` on a 1,000,000-row kernel_details.csv vs a bare pyarrow read.

The big file is made at run time in a temporary folder by repeating the data rows of the real
fixture tests/data/ascend/level1_cnn (bytes as they are: CRLF, the TAB after the start time,
quoted shapes, N/A communication rows); it is never committed. Each measurement runs in a fresh
child process so its peak RSS (resource.getrusage, kernel-reported high-water mark; tracemalloc
cannot see pyarrow's allocator) belongs to that operation alone:

* ``pyarrow``: ``pyarrow.csv.read_csv(file)`` of every column (the bare read);
* ``analyze``: ``ascendopt.analyze.traces.load_profile`` + ``ascendopt.analyze.diagnosis.analyze(top=15)``.

Targets (issue 3): analyze time <= 1.5 x the bare read, analyze peak memory <= 3 x the file size.

    python benchmarks/analyze_speed.py [--rows 1000000] [--repeats 3] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "ascend" / "level1_cnn" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"

CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import pyarrow, pyarrow.csv, pandas
if mode == "analyze":
    from ascendopt.analyze.traces import load_profile
    from ascendopt.analyze.diagnosis import analyze
def rss_kib():  # current resident set, from /proc (Linux)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
before = rss_kib()
t0 = time.perf_counter()
if mode == "pyarrow":
    table = pyarrow.csv.read_csv(path)
    rows = table.num_rows
else:
    report = analyze(load_profile(path), top=15)
    rows = sum(k["count"] for k in report["kernels"])
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
print(json.dumps({"seconds": seconds, "rss_before_kib": before, "peak_rss_kib": peak,
                  "arrow_pool_max_bytes": pyarrow.default_memory_pool().max_memory(), "rows": rows}))
"""


def make_file(folder: Path, rows: int) -> Path:
    """Repeat the real fixture's data lines until ``rows`` data rows; keep header and bytes."""
    raw = FIXTURE.read_bytes()
    header, _, body = raw.partition(b"\r\n")
    lines = body.split(b"\r\n")
    lines = [ln for ln in lines if ln]
    out_dir = folder / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out_dir.mkdir(parents=True)
    path = out_dir / "kernel_details.csv"
    block = b"\r\n".join(lines) + b"\r\n"
    full, rest = divmod(rows, len(lines))
    with open(path, "wb") as f:
        f.write(header + b"\r\n")
        for _ in range(full):
            f.write(block)
        f.write(b"".join(ln + b"\r\n" for ln in lines[:rest]))
    return path


def measure(mode: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True,
                          timeout=600, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="write raw results as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ascendopt_bench_") as tmp:
        t = time.perf_counter()
        path = make_file(Path(tmp), args.rows)
        size = path.stat().st_size
        print(f"made {path.name}: {args.rows} rows, {size / 2**20:.1f} MiB in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        runs: dict[str, list[dict]] = {"pyarrow": [], "analyze": []}
        for _ in range(args.repeats):  # interleaved so drift hits both alike
            for mode, results in runs.items():
                results.append(measure(mode, path))
    summary = {}
    for mode, results in runs.items():
        secs = sorted(r["seconds"] for r in results)
        peak = max(r["peak_rss_kib"] - r["rss_before_kib"] for r in results) * 1024
        summary[mode] = {"median_s": secs[len(secs) // 2], "min_s": secs[0], "peak_bytes": peak,
                         "arrow_pool_max_bytes": max(r["arrow_pool_max_bytes"] for r in results),
                         "rows": results[0]["rows"]}
    ratio = summary["analyze"]["median_s"] / summary["pyarrow"]["median_s"]
    mem_ratio = summary["analyze"]["peak_bytes"] / size
    print(f"\n{args.rows:,} rows, file {size / 2**20:.1f} MiB, {os.cpu_count()} CPU cores, median of {args.repeats}\n")
    print("| step | median s | min s | peak RSS over start (MiB) | x file size |")
    print("|---|---:|---:|---:|---:|")
    for mode, s in summary.items():
        print(f"| {mode} | {s['median_s']:.2f} | {s['min_s']:.2f} | {s['peak_bytes'] / 2**20:.0f} | "
              f"{s['peak_bytes'] / size:.2f} |")
    print(f"\nanalyze / pyarrow time: {ratio:.2f}x (target <= 1.5x): {'PASS' if ratio <= 1.5 else 'FAIL'}")
    print(f"analyze peak memory / file size: {mem_ratio:.2f}x (target <= 3x): {'PASS' if mem_ratio <= 3 else 'FAIL'}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": args.rows, "file_bytes": size, "runs": runs,
                                              "summary": summary, "time_ratio": ratio, "memory_ratio": mem_ratio},
                                             indent=2))


if __name__ == "__main__":
    main()
