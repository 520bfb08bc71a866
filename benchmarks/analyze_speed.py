"""Speed and memory of `analyze` on a 1,000,000-row kernel_details.csv vs a bare pyarrow read.

The big file is made at run time in a temporary folder by repeating the data rows of a real fixture
(bytes as they are: line ends, the TAB after the start time, quoted shapes, N/A cells); it is never
committed. Two row templates (``--fixture``, both by default):

* ``level1_cnn``: tests/data/ascend/level1_cnn, a torch_npu Level1 PipeUtilization capture of a CNN
  (each kernel on one side: the other side's 11-13 PMU cells are 0);
* ``advisor_pipe``: tests/data/ascend/advisor_pipe, the wide PipeUtilization table of an LLM run (bf16
  MatMul / FlashAttention / vector kernels, 46 columns of which 25 are PMU columns, most filled: the
  torch_npu kernel_details an LLM user brings).

Each measurement runs in a fresh child process so its peak RSS (resource.getrusage, kernel-reported
high-water mark; tracemalloc cannot see pyarrow's allocator) belongs to that operation alone:

* ``pyarrow``: ``pyarrow.csv.read_csv(file)`` of every column (the bare read; timed in the process);
* ``analyze``: ``ascendopt.analyze.traces.load_profile`` + ``ascendopt.analyze.diagnosis.analyze(top=15)``
  (timed in the process);
* ``cli``: the whole command ``python -m ascendopt analyze --json RUN`` (wall time from the start of the
  process to its exit: interpreter start, imports, reading, analysis, rendering the JSON).

Targets: analyze time <= 1.5 x the bare read, analyze peak memory <= 3 x the file size (issue 3); the whole
CLI ``analyze --json`` <= 2 x the bare read (issue 28).

    python benchmarks/analyze_speed.py [--fixture advisor_pipe] [--rows 1000000] [--repeats 3] [--out r.json]
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
FIXTURES = {name: ROOT / "tests" / "data" / "ascend" / name / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
            for name in ("level1_cnn", "advisor_pipe")}
TIME_TARGET, MEMORY_TARGET, CLI_TARGET = 1.5, 3.0, 2.0

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


def make_file(folder: Path, rows: int, fixture: Path) -> Path:
    """Repeat the real fixture's data lines until ``rows`` data rows; keep header, line ends and bytes."""
    raw = fixture.read_bytes()
    end = b"\r\n" if b"\r\n" in raw else b"\n"
    header, _, body = raw.partition(end)
    lines = [ln for ln in body.split(end) if ln]
    out_dir = folder / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out_dir.mkdir(parents=True)
    path = out_dir / "kernel_details.csv"
    block = end.join(lines) + end
    full, rest = divmod(rows, len(lines))
    with open(path, "wb") as f:
        f.write(header + end)
        for _ in range(full):
            f.write(block)
        f.write(b"".join(ln + end for ln in lines[:rest]))
    return path


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def measure(mode: str, path: Path) -> dict:
    if mode == "cli":
        return measure_cli(path)
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True,
                          timeout=600, env=_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_cli(path: Path) -> dict:
    """The whole ``ascendopt analyze --json`` on the run folder: process wall time and that process's peak RSS
    (``os.wait4``: the rusage of this child alone)."""
    run = path.parent.parent
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ascendopt", "analyze", "--json", str(run)],
                                stdout=subprocess.PIPE, stderr=err, env=_env())
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"cli failed (exit {proc.returncode}):\n{err.read().decode(errors='replace')[-2000:]}")
    data = json.loads(out)["data"]
    return {"seconds": seconds, "rss_before_kib": 0, "peak_rss_kib": usage.ru_maxrss, "arrow_pool_max_bytes": 0,
            "rows": data.get("kernel_count")}


def bench(fixture: str, rows: int, repeats: int) -> dict:
    """Make the file from ``fixture``, time each mode ``repeats`` times interleaved; the summary."""
    with tempfile.TemporaryDirectory(prefix="ascendopt_bench_") as tmp:
        t = time.perf_counter()
        path = make_file(Path(tmp), rows, FIXTURES[fixture])
        size = path.stat().st_size
        columns = len(FIXTURES[fixture].read_bytes().splitlines()[0].split(b","))
        print(f"{fixture}: made {path.name}: {rows} rows x {columns} columns, {size / 2**20:.1f} MiB in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
        runs: dict[str, list[dict]] = {"pyarrow": [], "analyze": [], "cli": []}
        loads = [os.getloadavg()[0]]
        for _ in range(repeats):  # interleaved so drift hits every mode alike
            for mode, results in runs.items():
                results.append(measure(mode, path))
            loads.append(os.getloadavg()[0])
    summary = {}
    for mode, results in runs.items():
        secs = sorted(r["seconds"] for r in results)
        peak = max(r["peak_rss_kib"] - r["rss_before_kib"] for r in results) * 1024
        summary[mode] = {"median_s": secs[len(secs) // 2], "min_s": secs[0], "peak_bytes": peak,
                         "arrow_pool_max_bytes": max(r["arrow_pool_max_bytes"] for r in results),
                         "rows": results[0]["rows"]}
    bare = summary["pyarrow"]["median_s"]
    return {"fixture": fixture, "rows": rows, "columns": columns, "file_bytes": size, "runs": runs,
            "summary": summary, "load_average_1min": loads, "time_ratio": summary["analyze"]["median_s"] / bare,
            "cli_ratio": summary["cli"]["median_s"] / bare, "memory_ratio": summary["analyze"]["peak_bytes"] / size}


def report(result: dict, repeats: int) -> None:
    size = result["file_bytes"]
    loads = result["load_average_1min"]
    print(f"\n{result['fixture']}: {result['rows']:,} rows x {result['columns']} columns, file "
          f"{size / 2**20:.1f} MiB, {os.cpu_count()} CPU cores, median of {repeats}, load average (1 min) "
          f"{loads[0]:.2f} -> {loads[-1]:.2f} (max {max(loads):.2f})\n")
    print("| step | median s | min s | peak RSS over start (MiB; cli: the whole process) | x file size |")
    print("|---|---:|---:|---:|---:|")
    for mode, s in result["summary"].items():
        print(f"| {mode} | {s['median_s']:.2f} | {s['min_s']:.2f} | {s['peak_bytes'] / 2**20:.0f} | "
              f"{s['peak_bytes'] / size:.2f} |")
    for label, value, target in (("analyze / pyarrow time", result["time_ratio"], TIME_TARGET),
                                 ("whole CLI analyze --json / pyarrow time", result["cli_ratio"], CLI_TARGET),
                                 ("analyze peak memory / file size", result["memory_ratio"], MEMORY_TARGET)):
        print(f"{label}: {value:.2f}x (target <= {target:g}x): {'PASS' if value <= target else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", choices=sorted(FIXTURES), action="append",
                    help="row template (repeatable; default: both)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="write raw results as JSON here")
    args = ap.parse_args()
    results = []
    for fixture in args.fixture or ["level1_cnn", "advisor_pipe"]:
        results.append(bench(fixture, args.rows, args.repeats))
        report(results[-1], args.repeats)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
