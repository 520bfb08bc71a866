"""Speed and memory of `analyze` on a 1,000,000-row kernel_details.csv vs a bare pyarrow read.

The big file is made at run time in a temporary folder by repeating the data rows of a real fixture
(bytes as they are: line ends, the TAB after the start time, quoted shapes, N/A cells); it is never
committed (``--keep DIR`` keeps it, for profiling). Row templates (``--fixture``, all by default):

* ``level1_cnn``: tests/data/ascend/level1_cnn, a torch_npu Level1 PipeUtilization capture of a CNN
  (each kernel on one side: the other side's 11-13 PMU cells are 0);
* ``advisor_pipe``: tests/data/ascend/advisor_pipe, the wide PipeUtilization table of an LLM run (bf16
  MatMul / FlashAttention / vector kernels, 46 columns of which 25 are PMU columns, most filled: the
  torch_npu kernel_details an LLM user brings).
* ``wide_strings``: advisor_pipe's rows under the 2025 torch_npu Level1 header (``Device_id`` after ``Step Id``:
  47 columns, as the shared reference on Ascend profiler formats lists them), string-heavy: every block of the
  fixture's rows gets one of
  32 long kernel-name tails (names of 90-130 characters) and one of 256 leading input dims, so the file holds
  ~900 kernels and ~7,000 distinct ``Input Shapes`` cells beside the PMU ratio columns (issue 41 item 7).

Each measurement runs in a fresh child process so its peak RSS (resource.getrusage, kernel-reported
high-water mark; tracemalloc cannot see pyarrow's allocator) belongs to that operation alone:

* ``pyarrow``: ``pyarrow.csv.read_csv(file)`` of every column (the bare read; timed in the process);
* ``analyze``: ``ascendopt.analyze.traces.load_profile`` + ``ascendopt.analyze.diagnosis.analyze(top=15)``
  (timed in the process);
* ``cli``: the whole command ``python -m ascendopt analyze --json RUN`` (wall time from the start of the
  process to its exit: interpreter start, imports, reading, analysis, rendering the JSON).

``--baseline-src DIR`` adds ``cli_baseline``: the same command with the package of another checkout, interleaved
with the others, so a before / after pair is measured under the same load. Times are wall times; the CPU
time (user + system) of each is reported beside them: on a shared machine the wall ratio moves with the load.

Targets: analyze time <= 1.5 x the bare read, analyze peak memory <= 3 x the file size (issue 3); the whole
CLI ``analyze --json`` <= 1.2 x the bare read (issue 41 item 7, on ``wide_strings``; issue 28 asked 2 x).

    python benchmarks/analyze_speed.py [--fixture wide_strings] [--rows 1000000] [--repeats 5] [--modes cli]
        [--keep /tmp/cap] [--out r.json]
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
# template -> (fixture whose rows it repeats, whether its blocks vary: see ``_vary_line``)
TEMPLATES = {"level1_cnn": ("level1_cnn", False), "advisor_pipe": ("advisor_pipe", False),
             "wide_strings": ("advisor_pipe", True)}
NAME_TAILS = 32  # wide_strings: distinct long-name tails per fixture kernel
SHAPE_DIMS = 256  # wide_strings: distinct leading input dims per fixture row
TIME_TARGET, MEMORY_TARGET, CLI_TARGET = 1.5, 3.0, 1.2

CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import pyarrow, pyarrow.csv, pandas
if mode == "analyze":
    from ascendopt.analyze.traces import load_profile
    from ascendopt.analyze.diagnosis import analyze
def cpu_s():  # this process's CPU time (user + system), s
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def rss_kib():  # current resident set, from /proc (Linux)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
before = rss_kib()
t0, c0 = time.perf_counter(), cpu_s()
if mode == "pyarrow":
    table = pyarrow.csv.read_csv(path)
    rows = table.num_rows
else:
    report = analyze(load_profile(path), top=15)
    rows = sum(k["count"] for k in report["kernels"])
seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "rss_before_kib": before, "peak_rss_kib": peak,
                  "arrow_pool_max_bytes": pyarrow.default_memory_pool().max_memory(), "rows": rows}))
"""


def _vary_line(line: bytes, variant: int) -> bytes:
    """One fixture row made string-heavy for ``wide_strings``: ``Device_id`` 0 after ``Step Id``, a long name
    (the fixture's name, one of ``NAME_TAILS`` tails) and the first input dim replaced (one of ``SHAPE_DIMS``).
    The first five fields hold no comma or quote, so a plain split finds the name."""
    step, model, task, stream, name, rest = line.split(b",", 5)
    tail = variant % NAME_TAILS
    long_name = name + b"_fused_bf16_rmsnorm_rope_kvcache_prefill_varlen_tile%dx%d_stage%d" % (
        64 * (1 + tail % 4), 128 * (1 + tail // 4 % 4), tail)
    dim = b"%d" % (128 + 64 * (variant % SHAPE_DIMS))
    shapes_at = rest.find(b'"""')  # the first quoted cell is Input Shapes
    if shapes_at >= 0:
        start = shapes_at + 3
        stop = start
        while stop < len(rest) and rest[stop:stop + 1].isdigit():
            stop += 1
        if stop > start:
            rest = rest[:start] + dim + rest[stop:]
    return b",".join((step, b"0", model, task, stream, long_name, rest))


def make_file(folder: Path, rows: int, template: str) -> Path:
    """Repeat the real fixture's data lines until ``rows`` data rows; keep line ends and bytes (``wide_strings``:
    the header gains ``Device_id`` and each block of rows is varied by ``_vary_line``)."""
    fixture, vary = TEMPLATES[template]
    raw = FIXTURES[fixture].read_bytes()
    end = b"\r\n" if b"\r\n" in raw else b"\n"
    header, _, body = raw.partition(end)
    lines = [ln for ln in body.split(end) if ln]
    if vary:
        header = header.replace(b"Step Id,", b"Step Id,Device_id,", 1)
        # SHAPE_DIMS blocks cycle through every (name tail, dim) pair: NAME_TAILS divides SHAPE_DIMS
        blocks = [end.join(_vary_line(ln, v) for ln in lines) + end for v in range(SHAPE_DIMS)]
    else:
        blocks = [end.join(lines) + end]
    out_dir = folder / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out_dir.mkdir(parents=True)
    path = out_dir / "kernel_details.csv"
    full, rest = divmod(rows, len(lines))
    with open(path, "wb") as f:
        f.write(header + end)
        for i in range(full):
            f.write(blocks[i % len(blocks)])
        f.write(b"".join(ln + end for ln in blocks[full % len(blocks)].split(end)[:rest]))
    return path


def _env(src: Path = ROOT / "src") -> dict[str, str]:
    """The children's environment: ``src`` first on the path, and byte code written and reused as for any installed
    package (a ``PYTHONDONTWRITEBYTECODE`` of this shell would make every CLI run compile ascendopt from source)."""
    env = dict(os.environ, PYTHONPATH=str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(mode: str, path: Path, baseline_src: Path | None = None) -> dict:
    if mode == "cli":
        return measure_cli(path)
    if mode == "cli_baseline":
        return measure_cli(path, baseline_src)
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True,
                          timeout=600, env=_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_cli(path: Path, src: Path = ROOT / "src") -> dict:
    """The whole ``ascendopt analyze --json`` on the run folder with the package under ``src``: process wall
    time, and that process's CPU time and peak RSS (``os.wait4``: the rusage of this child alone)."""
    run = path.parent.parent
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ascendopt", "analyze", "--json", str(run)],
                                stdout=subprocess.PIPE, stderr=err, env=_env(src))
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"cli failed (exit {proc.returncode}):\n{err.read().decode(errors='replace')[-2000:]}")
    data = json.loads(out)["data"]
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_before_kib": 0,
            "peak_rss_kib": usage.ru_maxrss, "arrow_pool_max_bytes": 0,
            "rows": data.get("kernel_count")}


def bench(fixture: str, rows: int, repeats: int, modes: list[str], keep: str | None = None,
          baseline_src: Path | None = None) -> dict:
    """Make the file from template ``fixture``, time each of ``modes`` ``repeats`` times interleaved; the
    summary. ``keep``: make the file under this folder and leave it there. ``baseline_src``: the ``src`` folder
    of another checkout, timed as mode ``cli_baseline``."""
    with tempfile.TemporaryDirectory(prefix="ascendopt_bench_") as tmp:
        t = time.perf_counter()
        folder = Path(keep) / f"{fixture}_{rows}" if keep else Path(tmp)
        kept = folder / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        path = kept if keep and kept.is_file() else make_file(folder, rows, fixture)
        size = path.stat().st_size
        with open(path, "rb") as f:
            columns = len(f.readline().split(b","))
        print(f"{fixture}: made {path.name}: {rows} rows x {columns} columns, {size / 2**20:.1f} MiB in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
        runs: dict[str, list[dict]] = {mode: [] for mode in modes}
        for mode in modes:  # one uncounted run each: byte code cached, files in the page cache
            measure(mode, path, baseline_src)
        loads = [os.getloadavg()[0]]
        for _ in range(repeats):  # interleaved so drift hits every mode alike
            for mode, results in runs.items():
                results.append(measure(mode, path, baseline_src))
            loads.append(os.getloadavg()[0])
    summary = {}
    for mode, results in runs.items():
        secs = sorted(r["seconds"] for r in results)
        cpus = sorted(r["cpu_s"] for r in results)
        peak = max(r["peak_rss_kib"] - r["rss_before_kib"] for r in results) * 1024
        summary[mode] = {"median_s": secs[len(secs) // 2], "min_s": secs[0], "median_cpu_s": cpus[len(cpus) // 2],
                         "peak_bytes": peak,
                         "arrow_pool_max_bytes": max(r["arrow_pool_max_bytes"] for r in results),
                         "rows": results[0]["rows"]}
    bare = summary["pyarrow"]["median_s"]
    out = {"fixture": fixture, "rows": rows, "columns": columns, "file_bytes": size, "runs": runs,
           "summary": summary, "load_average_1min": loads}
    if "analyze" in summary:
        out["time_ratio"] = summary["analyze"]["median_s"] / bare
        out["memory_ratio"] = summary["analyze"]["peak_bytes"] / size
    for mode in ("cli", "cli_baseline"):
        if mode in summary:
            out[f"{mode}_ratio"] = summary[mode]["median_s"] / bare
            out[f"{mode}_cpu_ratio"] = summary[mode]["median_cpu_s"] / summary["pyarrow"]["median_cpu_s"]
    return out


def report(result: dict, repeats: int) -> None:
    size = result["file_bytes"]
    loads = result["load_average_1min"]
    print(f"\n{result['fixture']}: {result['rows']:,} rows x {result['columns']} columns, file "
          f"{size / 2**20:.1f} MiB, {os.cpu_count()} CPU cores, median of {repeats}, load average (1 min) "
          f"{loads[0]:.2f} -> {loads[-1]:.2f} (max {max(loads):.2f})\n")
    print("| step | median s | min s | median CPU s | peak RSS over start (MiB; cli: the whole process) | "
          "x file size |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, s in result["summary"].items():
        print(f"| {mode} | {s['median_s']:.2f} | {s['min_s']:.2f} | {s['median_cpu_s']:.2f} | "
              f"{s['peak_bytes'] / 2**20:.0f} | {s['peak_bytes'] / size:.2f} |")
    for label, key, target in (("analyze / pyarrow time", "time_ratio", TIME_TARGET),
                               ("whole CLI analyze --json / pyarrow time", "cli_ratio", CLI_TARGET),
                               ("baseline CLI (--baseline-src) / pyarrow time", "cli_baseline_ratio", CLI_TARGET),
                               ("analyze peak memory / file size", "memory_ratio", MEMORY_TARGET)):
        if key not in result:
            continue
        value = result[key]
        print(f"{label}: {value:.2f}x (target <= {target:g}x): {'PASS' if value <= target else 'FAIL'}")
    for mode in ("cli", "cli_baseline"):
        if f"{mode}_cpu_ratio" in result:
            print(f"{mode} / pyarrow CPU time (user + system): {result[f'{mode}_cpu_ratio']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", choices=list(TEMPLATES), action="append",
                    help="row template (repeatable; default: all)")
    ap.add_argument("--modes", default="pyarrow,analyze,cli",
                    help="comma-separated measurements (pyarrow always runs: it is the baseline)")
    ap.add_argument("--baseline-src", metavar="DIR", type=Path,
                    help="src folder of another checkout (e.g. `git archive` of a commit): its CLI is timed too, "
                         "interleaved, as cli_baseline")
    ap.add_argument("--keep", metavar="DIR", help="make the file under DIR (outside the repo) and keep it; "
                                                     "a file kept there before is reused")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="write raw results as JSON here")
    args = ap.parse_args()
    results = []
    modes = ["pyarrow"] + [m for m in args.modes.split(",") if m in ("analyze", "cli")]
    if args.baseline_src:
        modes.append("cli_baseline")
    for fixture in args.fixture or list(TEMPLATES):
        results.append(bench(fixture, args.rows, args.repeats, modes, args.keep, args.baseline_src))
        report(results[-1], args.repeats)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
