"""Kernel hit's absolute-work rule on a real device: a token launch with the work done by the host is red.

A small own-code repository (one Triton kernel that doubles a float32 vector of 2**22 elements, block 64), frozen
with its test and workload, then gated with ``gate --skip-perf --json`` after each change, undone after each:

* ``full``  -- the unchanged tree (expected exit 0);
* ``host``  -- a token launch of the kernel on one element, the outputs computed by NumPy on the host and copied
  back (1, at kernel hit);
* ``cheaper`` -- an honest change: block 1024, the whole input still through the kernel (0);
* ``split`` -- an honest split into two launches of the same name (0).

    python3 benchmarks/kernel_hit_gpu.py --work /tmp/kh --out kernel_hit_gpu.json [--backend cpu]

Each step's exit, seconds, the kernel-hit stage's summary and the two censuses' figures go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OP = '''import torch
import triton
import triton.language as tl

MODE = "full"  # the change under test: full | host | cheaper | split


@triton.jit
def my_double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def my_double(x):
    y = torch.empty_like(x)
    n = x.numel()
    if MODE == "cheaper":
        my_double_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    elif MODE == "split":
        half = n // 2
        my_double_kernel[(triton.cdiv(half, 64),)](x, y, half, BLOCK=64)
        my_double_kernel[(triton.cdiv(n - half, 64),)](x[half:], y[half:], n - half, BLOCK=64)
    elif MODE == "host":  # a token launch on one element, the work done by NumPy on the host
        my_double_kernel[(1,)](x, y, 1, BLOCK=64)
        y.copy_(torch.from_numpy(x.cpu().numpy() * 2))
    else:
        my_double_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
    return y
'''
TEST = '''import torch
from op import my_double


def test_doubles():
    x = torch.arange(4096.0, device="{device}")
    assert torch.equal(my_double(x), x * 2)
'''
BENCH = '''import torch
from op import my_double


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1 << {log2}, generator=g).to("{device}"),)


def workload(x):
    return my_double(x)
'''


def run(argv: list[str], cwd: Path, timeout: float = 900) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr, round(time.monotonic() - t0, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/kernel-hit-gpu"))
    parser.add_argument("--out", type=Path, default=Path("kernel_hit_gpu.json"))
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    repo = args.work.resolve() / "repo"
    repo.mkdir(parents=True)
    device, log2 = ("cuda", 22) if args.backend == "cuda" else ("cpu", 12)
    (repo / "tests").mkdir()
    (repo / "op.py").write_text(OP)
    (repo / "tests" / "test_op.py").write_text(TEST.format(device=device))
    (repo / "bench.py").write_text(BENCH.format(device=device, log2=log2))
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"]):
        subprocess.run(["git", *argv], cwd=repo, check=True)
    os.environ["ASCENDOPT_BACKEND"] = args.backend
    cli = [sys.executable, "-m", "ascendopt"]
    result: dict = {"backend": args.backend, "elements": 1 << log2, "steps": []}
    code, out, err, took = run([*cli, "freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                                "--kernel-filter", "my_double_kernel", "--no-profile", "--no-precheck"], repo)
    result["freeze"] = {"exit": code, "seconds": took, "tail": (out + err).strip().splitlines()[-8:]}
    if code != 0:
        print(json.dumps(result, indent=1))
        return 1
    op = repo / "op.py"
    for mode, expect in (("full", 0), ("host", 1), ("cheaper", 0), ("split", 0)):
        op.write_text(OP.replace('MODE = "full"', f'MODE = "{mode}"'))
        code, out, err, took = run([*cli, "gate", "--skip-perf", "--json"], repo)
        try:
            stages = {s["name"]: s for s in json.loads(out)["data"]["stages"]}
        except (ValueError, KeyError, TypeError):
            stages = {}
        hit = stages.get("kernel_hit", {})
        census = (hit.get("data") or {}).get("census", {})
        result["steps"].append({
            "mode": mode, "expect": expect, "exit": code, "ok": code == expect, "seconds": took,
            "kernel_hit": hit.get("status"), "summary": hit.get("summary", "")[:900],
            "failed": [c["name"] for c in hit.get("checks", []) if not c.get("passed")],
            "census": {k: census.get(k) for k in ("device_us", "host_us", "wall_us")}
            | {"kernels": {n: {f: v for f, v in k.items() if f in ("calls", "device_us", "elements")}
                           for n, k in list(census.get("kernels", {}).items())[:6]}},
            "tail": [] if stages else (out + err).strip().splitlines()[-8:]})
        print(f"[{'ok' if code == expect else 'WRONG'}] {mode}: exit {code} (expected {expect}), {took} s",
              flush=True)
        op.write_text(OP)
    args.out.write_text(json.dumps(result, indent=1))
    return 0 if all(s["ok"] for s in result["steps"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
