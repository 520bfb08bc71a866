"""How trustworthy is ascendopt's A/B verdict on a real device? (issue 2, item 9)

On the current backend (run it on the H200), with a real Triton kernel (a streaming
``y = x * a + b`` over fp32 vectors, memory-bound):

* A/A: ``--aa`` comparisons of the kernel against itself -> count of false "slower"/"faster";
* planted slowdowns: the candidate streams 3 % / 5 % more elements -> detection rate. The true
  slowdown each plants is measured separately with a long run (500 samples each side) and printed;
* CV of the median over repeated ``bench.measure`` calls.

Usage: python benchmarks/timing_quality.py [--aa 30] [--planted 30] [--out results.json]
Prints a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import triton
import triton.language as tl

from ascendopt.device import backends
from ascendopt.judge import bench


@triton.jit
def _axpb_kernel(x_ptr, y_ptr, n, a, b, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.cast(pid, tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * a + b, mask=mask)


def make_fn(n: int, device):
    x = torch.randn(n, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    block = 4096
    grid = (triton.cdiv(n, block),)

    def fn():
        _axpb_kernel[grid](x, y, n, 1.5, 0.25, BLOCK=block)

    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--aa", type=int, default=30)
    ap.add_argument("--planted", type=int, default=30)
    ap.add_argument("--n", type=int, default=2**27,
                    help="elements (fp32) of the baseline; large so +3 %% elements is +3 %% time, "
                         "not a partial extra wave")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    backend = backends.current()
    dev = backend.torch_device()
    t0 = time.time()
    base = make_fn(args.n, dev)
    # Round the planted sizes to whole blocks: triton specializes integer arguments on divisibility
    # by 16, and an odd n costs vectorized loads (~10 %), which would plant far more than 3 %.
    block = 4096
    cands = {s: make_fn(int(args.n * (1 + s)) // block * block, dev) for s in (0.03, 0.05)}

    aa = [bench.compare(base, base, backend=backend).verdict for _ in range(args.aa)]
    # Ground truth of what each plant really costs, from long interleaved runs.
    truth = {}
    for s, fn in cands.items():
        long = bench.compare(base, fn, backend=backend, pairs=500)
        truth[s] = long.ratio - 1
    detect = {s: [bench.compare(base, fn, backend=backend).verdict for _ in range(args.planted)]
              for s, fn in cands.items()}
    medians = [bench.measure(base, backend=backend).median_ms for _ in range(30)]
    cv_median = statistics.stdev(medians) / statistics.mean(medians)

    rows = [
        ("A/A comparisons", args.aa, f"{aa.count('slower') + aa.count('faster')} false alarms "
                                     f"({aa.count('slower')} slower, {aa.count('faster')} faster)"),
    ]
    for s in cands:
        v = detect[s]
        rows.append((f"planted {s:.0%} (measured {truth[s]:+.2%})", args.planted,
                     f"{v.count('slower')}/{len(v)} detected = {v.count('slower') / len(v):.0%}; "
                     f"{v.count('faster')} called faster"))
    rows.append(("CV of the median (30 x measure)", 30,
                 f"{cv_median:.3%} (median {statistics.mean(medians) * 1e3:.2f} us)"))
    info = backend.info()
    print(f"device: {info.name} ({backend.name}); torch {torch.__version__}, triton {triton.__version__}; "
          f"kernel: fp32 y=a*x+b over {args.n} elements; {time.time() - t0:.0f} s")
    print()
    print("| study | n | result |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"aa": aa, "truth": truth, "detect": {str(k): v for k, v in detect.items()},
                       "medians_ms": medians, "cv_median": cv_median, "device": info.name}, fh, indent=2)


if __name__ == "__main__":
    main()
