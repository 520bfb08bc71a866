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
os.environ.pop("TRITON_INTERPRET", None)  # real front end, not the interpreter
os.environ["ASCENDOPT_BACKEND"] = "cpu"  # host-side facts (core counts, modelled UB) only
from ascendopt.device import lowering  # noqa: E402 - after the path set-up above

ARCH = "Ascend910B2"
# Presets whose launches are recorded: tiny (bulk + tail variants), realistic (UB-model tiles), varlen.
PRESET_PREFIXES = ("tiny", "realistic", "varlen", "wide", "widest", "states")


def record_launches(specs_filter: set[str],
                    prefixes: tuple[str, ...] = PRESET_PREFIXES) -> tuple[list[dict], list[dict]]:
    """Run every spec's launcher with each ``kernel[grid](...)`` recorded instead of launched."""
    import torch

    from ascendopt.device import backends
    from ascendopt.kernels import all_specs

    backends.Backend.prepare_kernels = lambda self: None  # keep TRITON_INTERPRET off: we compile, not run
    launches: list[dict] = []
    current: dict = {}
    problems = []
    with lowering.recording(launches, current):
        for spec in all_specs():
            if specs_filter and spec.name not in specs_filter:
                continue
            for preset in spec.shapes:
                if not preset.startswith(prefixes):
                    continue
                dims = spec.shape(preset).dims
                for mode in spec.modes:
                    dtype = spec.dtypes[0]
                    if spec.supports(dims, dtype, mode):
                        continue
                    # Defaults, plus any configs a spec names for constexpr paths the defaults do not take.
                    for config in [{}, *spec.extras.get("lowering_configs", [])]:
                        current.update(spec=spec.name, preset=preset, mode=mode, config=config)
                        try:
                            with torch.no_grad():
                                inputs = spec.make_inputs(dict(dims), dtype, torch.device("cpu"), 0)
                                spec.run(inputs, spec.config(config), mode)
                        except Exception as exc:  # noqa: BLE001 - reported per spec, the others go on
                            problems.append({"spec": spec.name, "preset": preset, "mode": mode, "config": config,
                                             "error": f"launcher failed on the host: {type(exc).__name__}: {exc}"})
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
    seen, results = set(), []
    for launch in launches:
        fn = launch["kernel"]
        signature, constants = lowering.signature_of(fn, launch["args"], launch["kwargs"])
        key = lowering.launch_key(fn, signature, constants)
        if key in seen:
            continue
        seen.add(key)
        shown = {k: v for k, v in constants.items() if v is not None}
        r = {"spec": launch["spec"], "preset": launch["preset"], "mode": launch["mode"], "kernel": fn.__name__,
             "config": launch["config"], "constexprs": shown, "grid": launch["grid"],
             **lowering.lower(fn, signature, constants, cache, ARCH)}
        if r["status"] == "lowered":
            r.update(ir_facts(r["ttadapter"]))
        results.append(r)
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
