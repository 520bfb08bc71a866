"""Is `ascendopt gate` stable on a real device? (issue 5, "Done when")

On the current backend (run it on the H200), for a bundled kernel at a realistic preset:

1. freeze it in a temporary workspace (correctness, kernel hit and baseline, as `ascendopt freeze`);
2. run the full gate against its own baseline ``--runs`` times: every run must pass (exit 0);
3. plant a slowdown of ``--slowdown`` (5 %) and run the gate ``--runs`` times: every run must fail
   with exit 4 at the performance stage.

How the slowdown is planted: the kernel's spec gets one extra tunable ``PLANT`` (0 or 1); with
``PLANT=1`` each call of ``run`` adds one extra pass after the kernel. On CUDA the pass is
``torch.cuda._sleep(cycles)`` (a device spin of a given cycle count, no memory traffic); elsewhere an
in-place add over the first ``n`` elements of a scratch buffer. ``cycles`` / ``n`` are calibrated
(affine fit over two settings, then one secant step) until the interleaved A/B ratio of
``run`` vs ``run + pass`` is ``1 + slowdown``; the planted slowdown is then measured separately with
100 interleaved pairs and reported. The gate compares ``PLANT=0`` (the frozen configuration) with
``PLANT=1`` (``gate --set PLANT=1``), interleaved in one process. The oracle and input factory are
unchanged, so integrity and correctness stay green and only the performance stage decides.

Usage: python benchmarks/gate_stability.py [--kernel rms_norm] [--shapes realistic] [--mode fwd]
       [--runs 10] [--slowdown 0.05] [--out results.json]
Prints a markdown table on stdout; exits 1 if any A/A gate failed or any planted gate did not exit 4.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from ascendopt import backends, bench, kernels
from ascendopt.freeze import freeze_kernel
from ascendopt.gate import run_gate, timing_inputs
from ascendopt.kernels.spec import Tunable
from ascendopt.workspace import Workspace


class Plant:
    """The calibrated extra pass: a device spin on CUDA, an in-place add elsewhere."""

    def __init__(self, device):
        self.device = device
        self.amount = 0
        self.cuda = device.type == "cuda"
        self.scratch = None if self.cuda else torch.zeros(2**26, device=device)

    def __call__(self) -> None:
        if self.amount <= 0:
            return
        if self.cuda:
            torch.cuda._sleep(int(self.amount))
        else:
            self.scratch[: int(self.amount)].add_(1.0)


def planted_spec(spec, plant: Plant):
    """``spec`` with a ``PLANT`` tunable: 1 runs ``plant()`` after the kernel on every call."""

    def run(inputs, config, mode):
        cfg = dict(config)
        extra = cfg.pop("PLANT", 0)
        out = spec.run(inputs, cfg, mode)
        if extra:
            plant()
        return out

    tunables = {**spec.tunables, "PLANT": Tunable("PLANT", 0, (0, 1), "benchmark only: planted extra pass")}
    return dataclasses.replace(spec, run=run, tunables=tunables)


def calibrate(spec, case_dims, dtype, mode, plant: Plant, target: float, device) -> dict:
    """Set ``plant.amount`` so that run+plant / run = ``1 + target``; return the measured steps."""
    base_cfg = spec.config({"PLANT": 0})
    plant_cfg = spec.config({"PLANT": 1})
    inputs = timing_inputs(spec, case_dims, dtype, mode, device)

    def ratio(amount: float, pairs: int = 40) -> float:
        plant.amount = amount
        c = bench.compare(lambda inp: spec.run(inp, base_cfg, mode), lambda inp: spec.run(inp, plant_cfg, mode),
                          inputs=inputs, pairs=pairs)
        return c.ratio - 1.0

    base_ms = bench.measure(lambda inp: spec.run(inp, base_cfg, mode), inputs=inputs).median_ms
    # First guess: cycles at ~1.5 GHz (CUDA) or elements at ~1 element/ns of in-place add (other).
    per_ms = 1.5e6 if plant.cuda else 1e6
    a1 = max(1.0, target * base_ms * per_ms)
    steps = []
    r1 = ratio(a1)
    steps.append((a1, r1))
    a2 = a1 * 2
    r2 = ratio(a2)
    steps.append((a2, r2))
    for _ in range(2):  # secant steps on the (amount, slowdown) line
        (x0, y0), (x1, y1) = steps[-2], steps[-1]
        slope = (y1 - y0) / (x1 - x0) if x1 != x0 else 0.0
        nxt = x1 + (target - y1) / slope if slope > 0 else x1 * target / max(y1, 1e-6)
        nxt = max(1.0, min(nxt, 1e9))
        steps.append((nxt, ratio(nxt)))
    plant.amount = steps[-1][0]
    measured = ratio(plant.amount, pairs=100)
    return {"kernel_median_ms": base_ms, "amount": plant.amount, "unit": "cycles" if plant.cuda else "elements",
            "steps": steps, "measured_slowdown": measured}


def gate_row(label: str, result) -> dict:
    perf = result.stages[3]
    comparisons = perf.data.get("comparisons", [])
    c = comparisons[0] if comparisons else None
    return {
        "run": label,
        "exit_code": result.exit_code,
        "failed_stage": result.failed_stage.name if result.failed_stage else None,
        "verdict": c["verdict"] if c else None,
        "ratio": c["ratio"] if c else None,
        "threshold_rel": c["threshold_rel"] if c else None,
        "p_value": c["p_value"] if c else None,
        "baseline": c["baseline"] if c else None,
        "candidate": c["candidate"] if c else None,
        "summary": perf.summary if c else result.failed_stage.summary if result.failed_stage else "",
    }


def _us(t: dict | None) -> str:
    if not t:
        return "-"
    return f"{t['median_ms'] * 1e3:.2f} [{t['p20_ms'] * 1e3:.2f}, {t['p80_ms'] * 1e3:.2f}]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="rms_norm")
    ap.add_argument("--shapes", default="realistic")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--mode", default="fwd")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--slowdown", type=float, default=0.05)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    started = time.time()
    backend = backends.current()
    device = backend.torch_device()
    kernels.all_specs()  # load the registry, then swap in the planted twin under the same name
    original = kernels.get(args.kernel)
    plant = Plant(device)
    spec = planted_spec(original, plant)
    kernels._registry[args.kernel] = spec

    tmp = Path(tempfile.mkdtemp(prefix="ascendopt-gate-stability-"))
    ws = Workspace(tmp / "ws")
    contract = freeze_kernel(ws, kernel=args.kernel, shapes=[args.shapes], dtype=args.dtype, mode=args.mode)
    case = contract.workload.shapes[0]
    print(f"froze {args.kernel} {case.name} {case.dims} {args.dtype} {args.mode} on {backend.name} "
          f"({backend.info().name}); baseline {contract.baseline[0].median_ms * 1e3:.2f} us", file=sys.stderr)
    calib = calibrate(spec, case.dims, args.dtype, args.mode, plant, args.slowdown, device)
    print(f"planted pass: {calib['amount']:.0f} {calib['unit']}, measured slowdown "
          f"{calib['measured_slowdown']:+.2%} (100 interleaved pairs)", file=sys.stderr)

    rows = []
    for i in range(args.runs):
        rows.append(gate_row(f"A/A {i + 1}", run_gate(ws, pairs=args.pairs)))
    for i in range(args.runs):
        rows.append(gate_row(f"planted {i + 1}", run_gate(ws, pairs=args.pairs, config_override={"PLANT": 1})))

    aa = [r for r in rows if r["run"].startswith("A/A")]
    planted = [r for r in rows if r["run"].startswith("planted")]
    aa_pass = sum(r["exit_code"] == 0 for r in aa)
    planted_red = sum(r["exit_code"] == 4 for r in planted)
    info = backend.info()
    print(f"Device: {info.name} | backend {backend.name} | torch {torch.__version__} | "
          f"triton {info.versions.get('triton')} | kernel {args.kernel} {case.name} {case.dims} {args.dtype} "
          f"{args.mode} | planted pass {calib['amount']:.0f} {calib['unit']} = "
          f"{calib['measured_slowdown']:+.2%} measured\n")
    print("| run | exit | verdict | change | noise band | p | baseline us [p20, p80] | candidate us [p20, p80] |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        change = f"{r['ratio'] - 1:+.2%}" if r["ratio"] is not None else "-"
        band = f"±{r['threshold_rel']:.2%}" if r["threshold_rel"] is not None else "-"
        p = f"{r['p_value']:.2g}" if r["p_value"] is not None else "-"
        print(f"| {r['run']} | {r['exit_code']} | {r['verdict'] or r['failed_stage']} | {change} | {band} | {p} | "
              f"{_us(r['baseline'])} | {_us(r['candidate'])} |")
    print(f"\nA/A gates passing: {aa_pass}/{len(aa)}; planted {calib['measured_slowdown']:+.2%} gates exiting 4: "
          f"{planted_red}/{len(planted)}; total {time.time() - started:.0f} s")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "backend": backend.name, "device": info.name, "versions": info.versions, "kernel": args.kernel,
            "case": {"name": case.name, "dims": {k: list(v) if isinstance(v, tuple) else v for k, v in case.dims.items()}},
            "dtype": args.dtype, "mode": args.mode, "baseline": dataclasses.asdict(contract.baseline[0]),
            "calibration": calib, "rows": rows, "aa_pass": aa_pass, "planted_exit4": planted_red,
            "seconds": time.time() - started}, indent=2))
    return 0 if aa_pass == len(aa) and planted_red == len(planted) else 1


if __name__ == "__main__":
    sys.exit(main())
