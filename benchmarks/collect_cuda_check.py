"""H200 check of `ascendopt collect` on cuda: torch.profiler table + Nsight Compute counters.

Runs, on a tiny Triton workload (a memory-bound axpb kernel and a tl.dot matmul kernel):

1. ``ascendopt --backend cuda collect --exec-file WL --aic-metrics pipe --json`` and checks the
   profile folder: metadata, ``kernels.csv`` (Triton kernel names, grid as block_dim, step),
   ``ncu_raw.csv`` (one row per replayed launch, speed-of-light + pipe columns) and that
   ``ascendopt analyze`` classifies both kernels from the counters;
2. the same with ``--aic-metrics none`` (no ncu pass, hardware_counters false);
3. the same with ``ncu`` removed from PATH (exit 5 before anything runs).

Prints a markdown table; writes every check and the analyze classes to ``--out`` (JSON);
``--keep DIR`` copies the pipe profile folder there (fixture material). Exit 0 when all pass.
Usage: python benchmarks/collect_cuda_check.py --out collect_cuda_check.json [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _axpb_kernel(x_ptr, y_ptr, n, a, b, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.cast(pid, tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a + b, mask=mask)


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    rm = (pid // tiles_n) * BM + tl.arange(0, BM)
    rn = (pid % tiles_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + tl.cast(rm, tl.int64)[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + tl.cast(k0 + rk, tl.int64)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + tl.cast(rm, tl.int64)[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


x = torch.randn(1 << 24, device="cuda")
y = torch.empty_like(x)
S = 2048
A = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
B = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
C = torch.empty(S, S, device="cuda", dtype=torch.bfloat16)


def workload():
    _axpb_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), 1.5, 0.25, BLOCK=4096)
    _matmul_kernel[((S // 128) * (S // 128),)](A, B, C, S, S, S, BM=128, BN=128, BK=64)
'''
KERNELS = ("_axpb_kernel", "_matmul_kernel")
TIMEOUT_S = 300


def _data(stdout: str):
    """The command's payload: the ``data`` of the ``--json`` envelope it printed."""
    return json.loads(stdout)["data"]


def run(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False)
    return {"cmd": " ".join(cmd), "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-3000:],
            "wall_s": round(time.monotonic() - t0, 1)}


class Checks:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, name: str, ok: bool, detail: object = "") -> bool:
        self.rows.append({"check": name, "ok": bool(ok), "detail": str(detail)[:300]})
        return bool(ok)


def check_pipe_folder(checks: Checks, folder: Path) -> dict:
    import pandas as pd
    import yaml

    files = {p.name for p in folder.iterdir()}
    want = {"ascendopt_profile.yaml", "trace.json", "kernels.csv", "ncu_raw.csv", "ncu_report.ncu-rep"}
    checks.add("pipe: folder files", want <= files, sorted(files))
    meta = yaml.safe_load((folder / "ascendopt_profile.yaml").read_text())
    checks.add("pipe: metadata", meta.get("backend") == "cuda" and meta.get("metric_group") == "PipeUtilization"
               and meta.get("hardware_counters") is True and "ComputeWorkloadAnalysis" in meta.get("ncu", {}).get(
                   "sections", []), {k: meta.get(k) for k in ("backend", "metric_group", "hardware_counters", "ncu")})
    table = pd.read_csv(folder / "kernels.csv")
    found = {k: table[table["name"] == k] for k in KERNELS}
    checks.add("kernels.csv: both Triton kernels, one launch each in step 1",
               all(len(f) == 1 and int(f["step"].iloc[0]) == 1 for f in found.values()),
               table[["name", "core_type", "duration_us", "step", "block_dim"]].head(8).to_dict("records"))
    axpb = found["_axpb_kernel"]
    checks.add("kernels.csv: block_dim = grid programs", len(axpb) == 1 and int(axpb["block_dim"].iloc[0]) == 4096,
               axpb["block_dim"].tolist())
    text = (folder / "ncu_raw.csv").read_text()
    checks.add("ncu_raw.csv: pure CSV (no ==PROF== lines)", not text.startswith("=="), text[:80])
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    raw = pd.read_csv(io.StringIO("\n".join(lines)), low_memory=False)
    names = raw["Kernel Name"].astype(str).tolist() if "Kernel Name" in raw.columns else []
    # row 0 of a raw page is the units row
    launches = [n for n in names if n in KERNELS]
    checks.add("ncu_raw.csv: only filtered kernels, 2 steps x 2 kernels", sorted(launches) == sorted(KERNELS * 2)
               and len(launches) == len(names) - 1, names)
    cols = list(raw.columns)
    pipe_cols = [c for c in cols if c.startswith(("sm__inst_executed_pipe", "sm__pipe"))]
    checks.add("ncu_raw.csv: speed-of-light and pipe-utilization columns",
               "gpu__time_duration.sum" in cols and any("pct_of_peak" in c for c in cols) and bool(pipe_cols),
               f"{len(cols)} columns; pipe columns e.g. {pipe_cols[:4]}")
    return {"metadata": meta, "ncu_columns": len(cols), "pipe_columns": pipe_cols[:20], "ncu_kernels": names}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results path")
    ap.add_argument("--keep", help="copy the pipe profile folder here")
    args = ap.parse_args()
    env = dict(os.environ)
    if shutil.which("ncu") is None and Path("/usr/local/cuda/bin/ncu").exists():
        env["PATH"] = "/usr/local/cuda/bin" + os.pathsep + env.get("PATH", "")
    work = Path(tempfile.mkdtemp(prefix="collect-cuda-check-"))
    wl = work / "cuda_tiny_triton.py"
    wl.write_text(WORKLOAD)
    base = [sys.executable, "-m", "ascendopt", "--backend", "cuda", "collect", "--exec-file", str(wl), "--timeout",
            "180"]
    checks = Checks()
    results: dict = {"checks": checks.rows, "runs": {}}

    pipe = run(base + ["--aic-metrics", "pipe", "--out-dir", str(work / "pipe"), "--json"], env)
    results["runs"]["pipe"] = pipe
    if checks.add("collect --aic-metrics pipe exits 0", pipe["rc"] == 0, pipe["stderr"][-300:]):
        folder = Path(_data(pipe["stdout"])["profiles"][0]["path"])
        try:
            results["pipe"] = check_pipe_folder(checks, folder)
        except Exception as exc:  # noqa: BLE001 - a check that crashes is a failed check, reported
            checks.add("pipe folder checks ran", False, repr(exc))
        ana = run([sys.executable, "-m", "ascendopt", "analyze", str(folder), "--json"], env)
        results["runs"]["analyze"] = ana
        if checks.add("analyze reads the folder", ana["rc"] == 0, ana["stderr"][-300:]):
            report = _data(ana["stdout"])
            classes = {k["name"]: k.get("bound") for k in report.get("kernels", [])}
            results["analyze_classes"] = classes
            results["analyze_report"] = report
            checks.add("analyze classifies both kernels from ncu counters",
                       all(classes.get(k) not in (None, "no_counters", "not_collected") for k in KERNELS), classes)
        if args.keep:
            shutil.copytree(folder, Path(args.keep) / folder.name, dirs_exist_ok=True)

    none = run(base + ["--aic-metrics", "none", "--out-dir", str(work / "none"), "--json"], env)
    results["runs"]["none"] = none
    if checks.add("collect --aic-metrics none exits 0", none["rc"] == 0, none["stderr"][-300:]):
        folder = Path(_data(none["stdout"])["profiles"][0]["path"])
        checks.add("none: no ncu pass, hardware_counters false",
                   not (folder / "ncu_raw.csv").exists() and _data(none["stdout"])["profiles"][0][
                       "hardware_counters"] is False, sorted(p.name for p in folder.iterdir()))

    ncu_dirs = {str(Path(p).parent) for p in (shutil.which("ncu", path=env["PATH"]),) if p}
    no_ncu = dict(env, PATH=os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if d not in ncu_dirs))
    missing = run(base + ["--aic-metrics", "pipe", "--out-dir", str(work / "missing")], no_ncu)
    results["runs"]["no_ncu"] = missing
    checks.add("no ncu on PATH: exit 5, one line, nothing written",
               missing["rc"] == 5 and "ncu" in missing["stderr"] and not (work / "missing").exists(),
               missing["stderr"].strip()[-200:])

    print("| check | ok | detail |\n|---|---|---|")
    for row in checks.rows:
        print(f"| {row['check']} | {'PASS' if row['ok'] else 'FAIL'} | {row['detail'][:120].replace('|', '/')} |")
    print(f"\nwall: pipe {pipe['wall_s']} s, none {none['wall_s']} s; work folder {work}")
    if "analyze_classes" in results:
        print("analyze classes:", results["analyze_classes"])
    Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    return 0 if all(r["ok"] for r in checks.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
