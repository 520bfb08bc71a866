"""causal_conv1d on the H200: the launch/grid tunables A/B, with host and device time per call.

For the realistic preset (B4 T4096 D4096 W4, silu + bias, bf16) and each configuration below
(defaults first, then one gamble at a time, then combinations):

1. native-CUDA correctness of the non-default configurations (``check_kernel``: NaN-poisoned
   outputs vs the fp32 oracle, fwdbwd);
2. median time per call of back-to-back calls (``bench.measure``, what ``benchmarks/kernels.py``
   reports), GB/s from ``spec.cost`` and the fraction of the measured device-to-device copy bandwidth;
3. host microseconds per call (launch cost, no sync) and the device time of one call's kernels
   (torch profiler): a call whose host time exceeds its device time is launch-bound.

Run from the repository root on the CUDA host (about 30-50 s)::

    python3 benchmarks/causal_conv1d_ab.py --out causal_conv1d_ab.json

Prints a markdown table; raw numbers go to ``--out``. Stops starting new measurements after
``--budget-s`` seconds and lists what it skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")

# (mode, tunables), ordered by interest: the time budget may stop the list early.
CONFIGS = [
    ("fwd", {}),
    ("fwd", {"SILU": 2}),
    ("fwd", {"AHEAD": 2}),
    ("fwd", {"AHEAD": 2, "SILU": 2}),
    ("fwd", {"FWD_GRID": 2}),
    ("fwd", {"AHEAD": 2, "FWD_GRID": 2, "SILU": 2}),
    ("fwd", {"BT": 128, "SILU": 2}),  # 992 bulk tasks: one round at 8 programs per SM
    ("fwdbwd", {}),
    ("fwdbwd", {"BWD_GRID": 2}),
    ("fwdbwd", {"BWD_GRID": 2, "BD_BWD": 256}),
    ("fwdbwd", {"AHEAD": 2, "SILU": 2, "BWD_GRID": 2}),
    ("fwd", {"BD": 1024}),
    ("fwd", {"BD": 1024, "AHEAD": 2, "SILU": 2}),
]
CHECKS = [{"AHEAD": 2, "FWD_GRID": 2, "SILU": 2, "BWD_GRID": 2},
          {"AHEAD": 2, "BD": 1024, "BWD_GRID": 2, "BD_BWD": 256}]


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``, at most 200 characters (a row's ``error`` field)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


def timing_backend():
    """The current backend, or None (after saying why on stderr) on Ascend, which these scripts do not time."""
    from ascendopt import backends

    backend = backends.current()
    if backend.name == "npu":
        print("this script times the CUDA path; on Ascend use ascendopt collect/optimize-round", file=sys.stderr)
        return None
    return backend


def host_us_per_call(fn, synchronize, calls: int = 20) -> float:
    """Host microseconds per call of ``fn`` issued back to back (launch cost: no sync between calls);
    one warm-up call first, and the device drained before and after."""
    fn()
    synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - t0) / calls * 1e6
    synchronize()
    return host_us


def _host_and_device(fn, backend, calls: int = 20) -> tuple[float, dict]:
    """Host microseconds per call (no sync) and the device microseconds of each kernel of one call."""
    from torch.profiler import ProfilerActivity, profile

    host_us = host_us_per_call(fn, backend.synchronize, calls)
    with profile(activities=[ProfilerActivity.CUDA if backend.name == "cuda" else ProfilerActivity.CPU]) as prof:
        fn()
        backend.synchronize()
    kernels = {}
    for evt in prof.key_averages():
        if evt.key.startswith(("cuda", "aten::")):  # runtime API and host ops carry their kernels' time too
            continue
        t = float(getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0) or 0)
        if t:
            kernels[evt.key] = round(t, 1)
    return host_us, kernels


def copy_gbs(backend, nbytes: int) -> float:
    """Device-to-device copy bandwidth (read + write bytes per second) of an ``nbytes`` buffer, GB/s."""
    import torch

    from ascendopt import bench

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=backend.torch_device()).normal_()
    dst = torch.empty_like(src)
    ms = bench.measure(lambda: dst.copy_(src), backend=backend, repeats=20).median_ms
    return 2 * nbytes / (ms * 1e-3) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--preset", default="realistic", help="shape preset (tiny: a CPU smoke run of this script)")
    args = ap.parse_args()

    from ascendopt import bench
    from ascendopt.correctness import check_kernel
    from ascendopt.kernels import get

    started = time.perf_counter()
    backend = timing_backend()
    if backend is None:
        return 5
    spec = get("causal_conv1d")
    dims = spec.shape(args.preset).dims
    result: dict = {"schema": 1, "device": backend.info().name, "command": " ".join(sys.argv), "dims": dims,
                    "checks": [], "rows": [], "skipped": []}
    result["copy_gbs"] = copy_gbs(backend, 1 << (30 if backend.name == "cuda" else 22))

    def left() -> bool:
        return time.perf_counter() - started < args.budget_s

    for config in CHECKS:
        if not left():
            result["skipped"].append(f"check {config}")
            continue
        row = {"config": config}
        try:
            reports = check_kernel(spec, dims, "bf16", "fwdbwd", config)
            row["passed"] = all(r.passed for r in reports)
            row["worst"] = max(((r.name, r.err_ratio / r.limit) for r in reports if r.limit), key=lambda t: t[1],
                               default=None)
        except Exception as exc:  # noqa: BLE001 - reported, the timings go on
            traceback.print_exc()
            row["error"] = error_line(exc)
        result["checks"].append(row)
        print(f"check {config}: {row.get('passed', row.get('error'))}", file=sys.stderr, flush=True)

    device = backend.torch_device()
    # two input sets (each 2 x 134 MB of x and dy, beyond the 50 MB L2) alternate between calls
    sets = [(spec.make_inputs(dict(dims), "bf16", device, seed),) for seed in (0, 1)]
    for mode, config in CONFIGS:
        if not left():
            result["skipped"].append(f"{mode} {config}")
            continue
        cfg = spec.config(config)
        row = {"mode": mode, "config": config}
        try:
            timing = bench.measure(lambda inp, cfg=cfg, mode=mode: spec.run(inp, cfg, mode), inputs=sets,
                                   backend=backend, repeats=args.repeats)
            cost = spec.cost(dims, "bf16", mode)
            row["us"] = timing.median_ms * 1e3
            row["gbs"] = cost.bytes / (timing.median_ms * 1e-3) / 1e9
            row["copy_fraction"] = row["gbs"] / result["copy_gbs"]
            row["host_us"], row["kernels_us"] = _host_and_device(
                lambda cfg=cfg, mode=mode: spec.run(sets[0][0], cfg, mode), backend)
            row["device_us"] = sum(row["kernels_us"].values())
        except Exception as exc:  # noqa: BLE001 - an illegal choice is recorded, the list goes on
            traceback.print_exc()
            row["error"] = error_line(exc)
        result["rows"].append(row)
        print(f"{mode} {config}: {row.get('us', row.get('error'))}", file=sys.stderr, flush=True)

    result["seconds"] = time.perf_counter() - started
    Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    print(f"{result['device']}: device-to-device copy {result['copy_gbs']:.0f} GB/s\n")
    for c in result["checks"]:
        print(f"- check {c['config']}: passed={c.get('passed')} worst err/limit={c.get('worst')} {c.get('error', '')}")
    print("\n| mode | tunables | us/call | GB/s | % copy | host us/call | device us/call |\n"
          "|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        tun = ", ".join(f"{k}={v}" for k, v in r["config"].items()) or "defaults"
        if "error" in r:
            print(f"| {r['mode']} | {tun} | {r['error']} | | | | |")
            continue
        print(f"| {r['mode']} | {tun} | {r['us']:.1f} | {r['gbs']:.0f} | {100 * r['copy_fraction']:.0f} | "
              f"{r['host_us']:.1f} | {r['device_us']:.1f} |")
    if result["skipped"]:
        print(f"\nskipped (budget): {', '.join(result['skipped'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
