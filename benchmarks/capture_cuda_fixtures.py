"""Capture REAL CUDA profiler files for ascendopt's tests (run on the H200).

Writes into ``--out``: ``trace.json`` (torch.profiler chrome trace of a small Triton workload plus
a bf16 matmul) and ``ncu_raw_pipe.csv`` / ``ncu_raw_memory.csv`` (``ncu --csv --page raw`` of the
same workload with the speed-of-light + compute-workload sections, and the memory-workload
section). These become tests/data/cuda/ with a provenance README.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

WORKLOAD = r'''
import torch, triton, triton.language as tl

@triton.jit
def _axpb_kernel(x_ptr, y_ptr, n, a, b, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.cast(pid, tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * a + b, mask=mask)

x = torch.randn(1 << 24, device="cuda")
y = torch.empty_like(x)
A = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

def workload():
    _axpb_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), 1.5, 0.25, BLOCK=4096)
    (A @ A).sum()
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wl = out / "_workload.py"
    wl.write_text(WORKLOAD + "\nif __name__ == '__main__':\n    for _ in range(3):\n        workload()\n"
                  "    torch.cuda.synchronize()\n")
    import torch
    from torch.profiler import ProfilerActivity, profile

    ns: dict = {}
    exec(compile(WORKLOAD, str(wl), "exec"), ns)
    ns["workload"]()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            ns["workload"]()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(out / "trace.json"))
    sections = {
        "pipe": ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats"],
        "memory": ["MemoryWorkloadAnalysis", "SpeedOfLight"],
    }
    for group, secs in sections.items():
        cmd = ["ncu", "--csv", "--page", "raw", "--target-processes", "all", "--launch-count", "6"]
        for s in secs:
            cmd += ["--section", s]
        cmd += [sys.executable, str(wl)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
        (out / f"ncu_raw_{group}.csv").write_text(proc.stdout)
        tail = proc.stderr[-4000:] + f"\nrc={proc.returncode}\ncmd={' '.join(cmd)}\n"
        (out / f"ncu_{group}.stderr.txt").write_text(tail)
        print(group, "rc", proc.returncode, "bytes", len(proc.stdout))
    wl.unlink()


if __name__ == "__main__":
    main()
