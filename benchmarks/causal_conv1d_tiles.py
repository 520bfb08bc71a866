"""causal_conv1d on the H200: native-CUDA correctness, a tile/tap-path sweep, and fla-core 0.6.0 beside it.

The interpreter tests prove the algorithm; this script proves the compiled kernels and picks tiles.

1. correctness: ``ascendopt.correctness.check_kernel`` (NaN-poisoned outputs vs the fp32 oracle),
   fwdbwd, bf16: every non-tiny preset with auto tunables, and the realistic one with TAPS=1 and 2;
2. sweep on the realistic preset (B4 T4096 D4096 W4, silu + bias, bf16): forward alone over
   ``(BT, BD, TAPS)`` and backward alone over ``(BT_BWD, BD_BWD, TAPS)``; GB/s from the minimum
   bytes (fwd: x in + y out; bwd: x, dy in + dx out) and the fraction of the measured copy bandwidth;
3. fla's ``causal_conv1d`` (Triton backend) fwd and fwd+bwd on the same inputs, and ours with the
   best forward and backward tiles found, so the speedup is read from one run.

Run from the repository root on the CUDA host::

    python3 benchmarks/causal_conv1d_tiles.py --out causal_conv1d_tiles.json

Prints markdown tables; raw numbers go to ``--out``. Stops starting new measurements after
``--budget-s`` seconds (default 200) and lists what it skipped.
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

# the A/B script beside this one (the script's folder is on sys.path when run as a file)
from causal_conv1d_ab import copy_gbs, error_line, host_us_per_call, timing_backend  # noqa: E402

# (BT, BD, TAPS): 1 shifted tile loads, 2 tl.gather register shifts, 3 row streaming. Ordered by
# interest: each new configuration compiles new kernels, and the time budget may stop the list early.
FWD_CONFIGS = [(64, 512, 3), (32, 512, 3), (64, 1024, 3), (128, 512, 3), (32, 128, 1), (64, 128, 1),
               (32, 128, 2)]
BWD_CONFIGS = [(32, 512, 3), (64, 512, 3), (16, 512, 3), (32, 1024, 3), (32, 128, 1), (32, 128, 2)]
# native correctness: every non-tiny preset on the auto path, and the tile paths on the realistic one
CHECKS = [("realistic", 0), ("varlen", 0), ("states", 0), ("realistic", 1), ("realistic", 2)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--preset", default="realistic", help="preset of the sweep and the fla comparison")
    ap.add_argument("--check", default="", help="presets to check on the auto path (default: CHECKS)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()


    from ascendopt import bench
    from ascendopt.correctness import check_kernel
    from ascendopt.kernels import get
    from ascendopt.kernels.causal_conv1d_bwd import causal_conv1d_bwd
    from ascendopt.kernels.causal_conv1d_fwd import causal_conv1d_fwd

    started = time.perf_counter()
    backend = timing_backend()
    if backend is None:
        return 5
    device = backend.torch_device()
    spec = get("causal_conv1d")
    result: dict = {"schema": 1, "device": backend.info().name, "command": " ".join(sys.argv),
                    "correctness": [], "fwd": [], "bwd": [], "peer": {}, "skipped": []}

    def left() -> bool:
        return time.perf_counter() - started < args.budget_s

    copy_gbs_measured = result["copy_gbs"] = copy_gbs(backend, 1 << (30 if backend.name == "cuda" else 22))

    # 1. correctness of the compiled kernels
    checks = [(p, 0) for p in args.check.split(",") if p] or CHECKS
    for preset, taps in checks:
        if not left():
            result["skipped"].append(f"correctness {preset} TAPS={taps}")
            continue
        row = {"preset": preset, "TAPS": taps}
        try:
            reports = check_kernel(spec, spec.shape(preset).dims, "bf16", "fwdbwd", {"TAPS": taps})
            row["passed"] = all(r.passed for r in reports)
            row["tensors"] = {r.name: {"err_ratio": r.err_ratio, "limit": r.limit, "reason": r.reason}
                              for r in reports}
        except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
            traceback.print_exc()
            row["error"] = error_line(exc)
        result["correctness"].append(row)
        print(f"correctness {preset} TAPS={taps}: {row.get('passed', row.get('error'))}", file=sys.stderr)

    # 2. sweep on the realistic preset
    dims = spec.shape(args.preset).dims
    inp = spec.make_inputs(dict(dims), "bf16", device, 0)
    x, w, b, dy, act = inp["x"], inp["weight"], inp.get("bias"), inp["dy"], inp["activation"]
    tensor_bytes = x.numel() * x.element_size()
    def sweep(key: str, configs, names: tuple[str, str], op, op_args: tuple, n_tensors: int) -> None:
        """Time ``op(*op_args, activation=act, BT=, BD=, taps=)`` over ``configs`` into ``result[key]``;
        GB/s from ``n_tensors`` tensors of x's size moved per call."""
        for BT, BD, g in configs:
            if not left():
                result["skipped"].append(f"{key} BT={BT} BD={BD} TAPS={g}")
                continue
            row = {names[0]: BT, names[1]: BD, "TAPS": g}
            try:
                t = bench.measure(lambda BT=BT, BD=BD, g=g: op(*op_args, activation=act, BT=BT, BD=BD, taps=g - 1),
                                  backend=backend, repeats=args.repeats)
                row.update(us=t.median_ms * 1e3, gbs=n_tensors * tensor_bytes / (t.median_ms * 1e-3) / 1e9)
                row["copy_fraction"] = row["gbs"] / copy_gbs_measured
            except Exception as exc:  # noqa: BLE001
                row["error"] = error_line(exc)
            result[key].append(row)

    # fwd: x in + y out; bwd: x, dy in + dx out
    sweep("fwd", FWD_CONFIGS, ("BT", "BD"), causal_conv1d_fwd, (x, w, b), 2)
    sweep("bwd", BWD_CONFIGS, ("BT_BWD", "BD_BWD"), causal_conv1d_bwd, (x, dy, w, b), 3)

    # 3. best tiles vs fla on the same inputs
    best_f = min((r for r in result["fwd"] if "us" in r), key=lambda r: r["us"], default=None)
    best_b = min((r for r in result["bwd"] if "us" in r), key=lambda r: r["us"], default=None)
    if best_f and best_b and left():
        # TAPS is one tunable for both directions: take the tap path with the best fwd + bwd total
        def best(rows, g):
            return min((r for r in rows if "us" in r and r["TAPS"] == g), key=lambda r: r["us"], default=None)

        totals = {g: (best(result["fwd"], g), best(result["bwd"], g)) for g in (1, 2, 3)}
        totals = {g: fb for g, fb in totals.items() if fb[0] and fb[1]}
        g = min(totals, key=lambda k: totals[k][0]["us"] + totals[k][1]["us"])
        best_f, best_b = totals[g]
        cfg = {"BT": best_f["BT"], "BD": best_f["BD"], "BT_BWD": best_b["BT_BWD"], "BD_BWD": best_b["BD_BWD"],
               "TAPS": g}
        result["best_config"] = cfg
        peer = spec.extras["peer"]
        for mode in spec.modes:
            row = {"mode": mode, "config": cfg}
            cost = spec.cost(dims, "bf16", mode)
            try:
                ours = bench.measure(lambda mode=mode: spec.run(inp, spec.config(cfg), mode), backend=backend,
                                     repeats=args.repeats)
                row["ours_us"] = ours.median_ms * 1e3
                row["ours_copy_fraction"] = cost.bytes / (ours.median_ms * 1e-3) / 1e9 / copy_gbs_measured
                theirs = bench.measure(lambda mode=mode: peer(inp, mode), backend=backend, repeats=args.repeats)
                row["fla_us"] = theirs.median_ms * 1e3
                row["fla_copy_fraction"] = cost.bytes / (theirs.median_ms * 1e-3) / 1e9 / copy_gbs_measured
                row["speedup"] = row["fla_us"] / row["ours_us"]
                # launch-bound or device-bound? host time per call vs device kernel time of one call
                for who, fn in (("ours", lambda mode=mode: spec.run(inp, spec.config(cfg), mode)),
                                ("fla", lambda mode=mode: peer(inp, mode))):
                    row[f"{who}_host_us"], row[f"{who}_kernels_us"] = _host_and_device(fn)
            except Exception as exc:  # noqa: BLE001 - fla missing or failing is reported
                traceback.print_exc()
                row["error"] = error_line(exc)
            result["peer"][mode] = row
    result["seconds"] = time.perf_counter() - started
    Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    _print(result)
    return 0


def _host_and_device(fn, calls: int = 20) -> tuple[float, dict]:
    """Host microseconds per call (launch cost, no sync) and device microseconds per kernel of one call."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    host_us = host_us_per_call(fn, torch.cuda.synchronize, calls)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = {}
    for evt in prof.key_averages():
        t = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
        if t:
            kernels[evt.key] = round(float(t), 1)
    return host_us, kernels


def _pct(v) -> str:
    return "" if v is None else f"{100 * v:.0f}"


def _print(r: dict) -> None:
    print(f"{r['device']}: device-to-device copy {r['copy_gbs']:.0f} GB/s\n")
    print("| preset | TAPS | passed | worst tensor (err / limit) |\n|---|---|---|---|")
    for c in r["correctness"]:
        worst = max(c.get("tensors", {}).items(), key=lambda kv: kv[1]["err_ratio"] / kv[1]["limit"],
                    default=(c.get("error", ""), None))
        note = worst[0] if worst[1] is None else f"{worst[0]} {worst[1]['err_ratio']:.2e} / {worst[1]['limit']:.2e}"
        print(f"| {c['preset']} | {c['TAPS']} | {c.get('passed', 'error')} | {note} |")
    for key, names in (("fwd", ("BT", "BD")), ("bwd", ("BT_BWD", "BD_BWD"))):
        print(f"\n| {key} {names[0]} | {names[1]} | TAPS | us | GB/s | % copy |\n|---|---|---|---|---|---|")
        for row in r[key]:
            print(f"| {row[names[0]]} | {row[names[1]]} | {row['TAPS']} | {row.get('us', 0):.1f} | "
                  f"{row.get('gbs', 0):.0f} | {_pct(row.get('copy_fraction'))} {row.get('error', '')} |")
    if r["peer"]:
        print(f"\nbest config: {r.get('best_config')}\n")
        print("| mode | ours us | % copy | fla us | fla % copy | speedup | ours host us/call | fla host us/call |"
              "\n|---|---|---|---|---|---|---|---|")
        for mode, row in r["peer"].items():
            print(f"| {mode} | {row.get('ours_us', 0):.1f} | {_pct(row.get('ours_copy_fraction'))} | "
                  f"{row.get('fla_us', 0):.1f} | {_pct(row.get('fla_copy_fraction'))} | "
                  f"{row.get('speedup', 0):.2f} {row.get('error', '')} | {row.get('ours_host_us', 0):.0f} | "
                  f"{row.get('fla_host_us', 0):.0f} |")
        for mode, row in r["peer"].items():
            for who in ("ours", "fla"):
                kernels = row.get(f"{who}_kernels_us") or {}
                listed = ", ".join(f"{k[:48]} {v:.1f}" for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]))
                print(f"\n{mode} {who} device us per kernel: {listed}")
    if r["skipped"]:
        print(f"\nskipped (time budget): {', '.join(r['skipped'])}")


if __name__ == "__main__":
    sys.exit(main())
