"""Lower every bundled Triton kernel through triton-ascend's front end to its MLIR, on a CPU machine.

Runs in a SEPARATE virtual environment with triton-ascend (never next to upstream triton; see
docs/lowering.md and docs/install.md §3.7)::

    python3 -m venv /work/venv-ascend
    /work/venv-ascend/bin/pip install torch==2.13.0 'numpy<2.4' pybind11 pyyaml triton-ascend==3.2.0
    /work/venv-ascend/bin/python scripts/lower_ascend.py --out lowering.json

How: each spec's launcher runs on CPU tensors of its shape presets with every ``kernel[grid](...)``
recorded instead of launched, and each distinct (kernel, argument types, constexprs) is compiled to its
``.ttadapter``: the same code path as ``ascendopt precheck`` (``ascendopt.device.lowering``; this
script only adds the bundled specs' launchers). Each lowered launch also gets the IR's core type and UB
estimate (``ascendopt.device.ttadapter``), and the output lists each spec's hand UB model per stage for
the calibration table of docs/lowering.md. It says nothing about the real UB verdict (decided by
``bishengir-compile``) or speed. Exit 0 when every launch lowers, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.pop("TRITON_INTERPRET", None)  # real front end, not the interpreter (before any kernel import)
os.environ["ASCENDOPT_BACKEND"] = "cpu"  # host-side facts (core counts, modelled UB) only
from ascendopt.device import lowering  # noqa: E402 - after the path set-up above
from ascendopt.kernels import launches as launch_recorder  # noqa: E402

ARCH = "Ascend910B2"
PRESET_PREFIXES = launch_recorder.PRESET_PREFIXES


def record_launches(specs_filter: set[str],
                    prefixes: tuple[str, ...] = PRESET_PREFIXES) -> tuple[list[dict], list[dict]]:
    """Run every spec's launcher with each ``kernel[grid](...)`` recorded instead of launched."""
    launches: list[dict] = []
    current: dict = {}
    with lowering.recording(launches, current):
        problems = launch_recorder.record_spec_launches(specs_filter, prefixes, current)
    return launches, problems


def ir_facts(path: str) -> dict:
    """Core type and UB estimate of one lowered kernel (device/ttadapter.py, the model chip's UB)."""
    from ascendopt.device import ttadapter
    from ascendopt.device.ub import resolve_chip

    kernel = ttadapter.read(path)
    return {"core_type": kernel.core_type, "buffers": [b.describe() for b in kernel.buffers],
            "ub": ttadapter.ub_estimate(kernel, resolve_chip(ARCH)[1]).to_dict()}


def hand_models(spec_names: set[str], prefixes: tuple[str, ...]) -> list[dict]:
    """Each spec's own UB model (``spec.ub_model``) per preset at the default config, for docs/lowering.md's
    calibration table: stage, tile, dtype, multiplier and the modelled peak bytes."""
    from ascendopt.device import ub
    from ascendopt.kernels import all_specs

    models = []
    for spec in all_specs():
        if spec.name not in spec_names:
            continue
        for preset in spec.shapes:
            if not preset.startswith(prefixes):
                continue
            dims, dtype = spec.shape(preset).dims, spec.dtypes[0]
            if any(spec.supports(dims, dtype, mode) for mode in spec.modes):
                continue
            for stage in spec.ub_model(dims, spec.config(), dtype):
                models.append({"spec": spec.name, "preset": preset, "stage": stage.stage, "tile": stage.tile,
                               "dtype": stage.dtype, "multiplier": stage.multiplier,
                               "peak_bytes": ub.peak_bytes(stage.tile, stage.dtype, stage.multiplier)})
    return models


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="", help="write the results as JSON here")
    ap.add_argument("--kernels", default="", help="comma-separated spec names (default: all registered)")
    ap.add_argument("--keep", default="", help="directory for the MLIR artifacts (default: a temporary one)")
    ap.add_argument("--presets", default=",".join(PRESET_PREFIXES),
                    help="preset name prefixes to record (e.g. 'tiny' for a quick CI pass)")
    args = ap.parse_args()

    cache = Path(args.keep or tempfile.mkdtemp(prefix="ascendopt-lower-"))
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    import triton

    if not lowering.ascend_is_loaded():
        print("triton-ascend is not the installed triton here: run this in the triton-ascend venv", file=sys.stderr)
        return 5
    lowering.patch_out_npubin()
    prefixes = tuple(p for p in args.presets.split(",") if p)
    launches, problems = record_launches({n for n in args.kernels.split(",") if n}, prefixes)
    results, signature_problems, _ = lowering.lower_launches(launches, cache, ARCH)
    problems += [{"spec": "", "preset": "", "mode": "", "config": {}, "error": p} for p in signature_problems]
    for r in results:
        if r["status"] == "lowered":
            r.update(ir_facts(r["ttadapter"]))
        print(f"{r['status']:>8}  {r['spec']:<28} {r['kernel']:<36} {r['preset']}/{r['mode']} "
              f"{r.get('error', '')[:300]}", file=sys.stderr, flush=True)
    by_kernel: dict[str, set] = {}
    for r in results:
        by_kernel.setdefault(r["kernel"], set()).add(r["status"])
    summary = {k: ("lowered" if v == {"lowered"} else "failed") for k, v in sorted(by_kernel.items())}
    payload = {"schema": 2, "triton": triton.__version__, "arch": ARCH, "artifacts": str(cache),
               "kernels": summary, "launches": results, "host_problems": problems,
               "ub_models": hand_models({r["spec"] for r in results}, prefixes)}
    if args.out:
        Path(args.out).write_text(json.dumps(payload, indent=2, default=str))
    print("| kernel | lowers to ttadapter |\n|---|---|")
    for name, status in summary.items():
        print(f"| {name} | {status} |")
    for p in problems:
        print(f"host problem: {p['spec']} {p['preset']}/{p['mode']}: {p['error']}")
    return 0 if results and all(r["status"] == "lowered" for r in results) and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
