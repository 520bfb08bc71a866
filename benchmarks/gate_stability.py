"""Is `ascendopt gate` stable on a real device? (issue 5, "Done when")

On the current backend (run it on the H200), for a bundled kernel at a realistic preset:

1. freeze it in a temporary workspace (correctness, kernel hit and baseline, as `ascendopt freeze`);
2. run the full gate against its own baseline ``--runs`` times: every run must pass (exit 0);
3. plant a slowdown of ``--slowdown`` (5 %) and run the gate ``--runs`` times: every run must fail
   with exit 4 at the performance stage.

How the slowdown is planted: the kernel's spec gets one extra tunable ``PLANT`` (0 or 1), and every
call of ``run`` adds one extra pass after the kernel, on BOTH sides: on CUDA ``torch.cuda._sleep(cycles)``
(a device spin, no memory traffic), elsewhere an in-place add over the first ``n`` elements of a scratch
buffer. ``PLANT=0`` runs the smallest pass (a zero-cycle spin / one element), ``PLANT=1`` the calibrated
amount, so the extra launch costs both sides alike and only the calibrated work differs (a first run
planted the pass on one side only: its launch alone, ~5 us on a ~95 us kernel, overshot a 5 % target).

Calibration measures the slowdown curve, ``PLANT=1`` vs ``PLANT=0`` interleaved (``bench.compare``), at
0.5x, 1x and 2x a first guess (cycles at 1.5 GHz / 1 element per ns), solves for the target on the
measured points (``amount_for``: interpolation between the points that bracket it), measures at the
solution and solves again (twice), then measures the final amount with 100 interleaved pairs and
reports that as the planted slowdown. The gate compares ``PLANT=0`` (the frozen configuration) with
``PLANT=1`` (``gate --set PLANT=1``), interleaved in one process. The oracle and input factory are
unchanged, so integrity and correctness stay green and only the performance stage decides.

Usage: python benchmarks/gate_stability.py [--kernel rms_norm] [--shapes realistic] [--mode fwd]
       [--runs 10] [--slowdown 0.05] [--out results.json]
Prints a markdown table on stdout; exits 1 if any A/A gate failed or any planted gate did not exit 4.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ascendopt import kernels
from ascendopt.device import backends
from ascendopt.freeze.task import freeze_kernel
from ascendopt.gate.stages import run_gate, timing_inputs
from ascendopt.judge import bench
from ascendopt.kernels.spec import Tunable
from ascendopt.workspace import Workspace

GUESS_FACTORS = (0.5, 1.0, 2.0)  # first calibration points, as multiples of the first guess
REFINEMENTS = 2  # measure at the solution and solve again, this many times
MAX_AMOUNT = 1e9


class Plant:
    """The extra pass after every call: a device spin on CUDA, an in-place add elsewhere.

    Both sides run it: ``planted=False`` the smallest pass (0 cycles / 1 element), ``planted=True``
    ``amount`` cycles / elements, so the pass's own launch cost cancels in every comparison.
    """

    def __init__(self, device):
        self.device = device
        self.amount = 0
        self.cuda = device.type == "cuda"
        self.scratch = None if self.cuda else torch.zeros(2**26, device=device)

    def __call__(self, planted: bool) -> None:
        amount = int(self.amount) if planted else 0
        if self.cuda:
            torch.cuda._sleep(amount)
        else:
            self.scratch[: min(max(1, amount), self.scratch.numel())].add_(1.0)


def planted_spec(spec, plant: Plant):
    """``spec`` with a ``PLANT`` tunable; every call runs the kernel, then ``plant(PLANT == 1)``."""

    def run(inputs, config, mode):
        cfg = dict(config)
        planted = bool(cfg.pop("PLANT", 0))
        out = spec.run(inputs, cfg, mode)
        plant(planted)
        return out

    tunables = {**spec.tunables, "PLANT": Tunable("PLANT", 0, (0, 1), "benchmark only: planted extra pass")}
    return dataclasses.replace(spec, run=run, tunables=tunables)


def _line_at(p: tuple[float, float], q: tuple[float, float], target: float) -> float | None:
    """Amount where the line through points ``p`` and ``q`` (amount, slowdown) reaches ``target``;
    None when the line does not rise."""
    (x0, y0), (x1, y1) = p, q
    if x1 == x0 or (y1 - y0) / (x1 - x0) <= 0:
        return None
    return x0 + (target - y0) * (x1 - x0) / (y1 - y0)


def amount_for(points: list[tuple[float, float]], target: float) -> float:
    """The amount at which the measured slowdown curve reaches ``target``.

    ``points``: measured (amount, slowdown) pairs, slowdown as a fraction (0.05 = +5 %). Between the
    two neighbouring points (by amount) that bracket the target: linear interpolation. Target above
    every point: extrapolation along the two largest amounts; below every point: along the two
    smallest. Where that line does not rise (noise), the amount scales in proportion to the nearest
    point's slowdown. Clamped to [1, MAX_AMOUNT].
    """
    pts = sorted(points)
    if not pts:
        raise ValueError("amount_for needs at least one measured point")
    for p, q in itertools.pairwise(pts):
        if min(p[1], q[1]) <= target <= max(p[1], q[1]):
            x = _line_at(p, q, target)
            if x is not None:
                return float(min(max(x, 1.0), MAX_AMOUNT))
    above = all(y < target for _, y in pts)
    near = pts[-2:] if above else pts[:2]
    x = _line_at(near[0], near[-1], target) if len(near) == 2 else None
    if x is None:
        ref = near[-1] if above else near[0]
        x = ref[0] * target / max(ref[1], 1e-6)
    return float(min(max(x, 1.0), MAX_AMOUNT))


def search(slowdown: Callable[[float], float], guess: float, target: float) -> tuple[float, list]:
    """Solve ``slowdown(amount) = target`` on measured points: ``GUESS_FACTORS`` x ``guess`` first,
    then ``REFINEMENTS`` measurements at the current solution. Returns (amount, points)."""
    points = [(guess * f, slowdown(guess * f)) for f in GUESS_FACTORS]
    for _ in range(REFINEMENTS):
        amount = amount_for(points, target)
        points.append((amount, slowdown(amount)))
    return amount_for(points, target), points


def calibrate(spec, case_dims, dtype, mode, plant: Plant, target: float, device) -> dict:
    """Set ``plant.amount`` so that ``PLANT=1`` / ``PLANT=0`` = ``1 + target``, from the measured
    slowdown curve; return the points measured and the final measured slowdown (100 pairs)."""
    base_cfg = spec.config({"PLANT": 0})
    plant_cfg = spec.config({"PLANT": 1})
    inputs = timing_inputs(spec, case_dims, dtype, mode, device)

    def slowdown(amount: float, pairs: int = 60) -> float:
        plant.amount = amount
        c = bench.compare(lambda inp: spec.run(inp, base_cfg, mode), lambda inp: spec.run(inp, plant_cfg, mode),
                          inputs=inputs, pairs=pairs)
        return c.ratio - 1.0

    base_ms = bench.measure(lambda inp: spec.run(inp, base_cfg, mode), inputs=inputs).median_ms
    per_ms = 1.5e6 if plant.cuda else 1e6
    plant.amount, points = search(slowdown, max(1.0, target * base_ms * per_ms), target)
    measured = slowdown(plant.amount, pairs=100)
    return {"kernel_median_ms": base_ms, "amount": plant.amount, "unit": "cycles" if plant.cuda else "elements",
            "points": points, "target_slowdown": target, "measured_slowdown": measured}


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
    curve = ", ".join(f"{a:.0f}: {r:+.2%}" for a, r in sorted(calib["points"]))
    print(f"calibration curve ({calib['unit']}: slowdown vs the zero pass): {curve}", file=sys.stderr)
    print(f"planted pass: {calib['amount']:.0f} {calib['unit']}, asked {args.slowdown:+.2%}, measured slowdown "
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
          f"{args.mode} | planted pass {calib['amount']:.0f} {calib['unit']} (both sides pay the pass's launch): "
          f"asked {args.slowdown:+.2%}, measured {calib['measured_slowdown']:+.2%}\n")
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
            "case": {"name": case.name,
                     "dims": {k: list(v) if isinstance(v, tuple) else v for k, v in case.dims.items()}},
            "dtype": args.dtype, "mode": args.mode, "baseline": dataclasses.asdict(contract.baseline[0]),
            "calibration": calib, "rows": rows, "aa_pass": aa_pass, "planted_exit4": planted_red,
            "seconds": time.time() - started}, indent=2))
    return 0 if aa_pass == len(aa) and planted_red == len(planted) else 1


if __name__ == "__main__":
    sys.exit(main())
