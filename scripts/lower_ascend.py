"""Lower every bundled Triton kernel through triton-ascend's front end to its MLIR, on a CPU machine.

Runs in a SEPARATE virtual environment with triton-ascend (never next to upstream triton; see
docs/lowering.md and docs/install.md §3.7)::

    python3 -m venv /work/venv-ascend
    /work/venv-ascend/bin/pip install torch==2.13.0 'numpy<2.4' pybind11 pyyaml triton-ascend==3.2.0
    /work/venv-ascend/bin/python scripts/lower_ascend.py --out lowering.json

How: each spec's launcher runs on CPU tensors of its shape presets with ``kernels._lib.common.launch``
replaced by a recorder, so nothing executes; every distinct (kernel, argument types, constexprs)
launch is then compiled with ``triton.compile(ASTSource(...), target=GPUTarget("npu", ARCH, 0))``
with the ``npubin`` stage removed (``bishengir-compile`` comes with CANN, not the wheel). A kernel
"lowers" when its ``.ttadapter`` (linalg/HIVM MLIR from the bundled ``triton-adapter-opt``) is
written. This catches unsupported ops and lowering failures; it says nothing about UB overflow
(decided by ``bishengir-compile``) or speed. Exit 0 when every launch lowers, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.pop("TRITON_INTERPRET", None)  # real front end, not the interpreter
os.environ["ASCENDOPT_BACKEND"] = "cpu"  # host-side facts (core counts, modelled UB) only
ARCH = "Ascend910B2"
# Presets whose launches are recorded: tiny (bulk + tail variants), realistic (UB-model tiles), varlen.
PRESET_PREFIXES = ("tiny", "realistic", "varlen", "wide", "widest", "states")

TYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int32": "i32", "int64": "i64",
              "int8": "i8", "uint8": "u8", "bool": "i1"}


def record_launches(specs_filter: set[str],
                    prefixes: tuple[str, ...] = PRESET_PREFIXES) -> tuple[list[dict], list[dict]]:
    """Run every spec's launcher with ``common.launch`` recording instead of launching."""
    import torch

    from ascendopt.device import backends
    from ascendopt.kernels._lib import common

    backends.Backend.prepare_kernels = lambda self: None  # keep TRITON_INTERPRET off: we compile, not run
    launches: list[dict] = []
    current: dict = {}

    def record(kernel, grid, *args, **kwargs):
        # Keep only what the signature needs (tensor dtypes), never the tensors: presets are large.
        light = [TensorType(a.dtype) if isinstance(a, torch.Tensor) else a for a in args]
        launches.append({"kernel": kernel, "args": light, "kwargs": kwargs, **current})

    common.launch = record
    from ascendopt.kernels import all_specs  # imported after the patch so op modules bind the recorder

    problems = []
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


class TensorType:
    """A recorded tensor argument: its dtype only."""

    def __init__(self, dtype):
        self.dtype = dtype


def signature_of(launch: dict) -> tuple[dict, dict]:
    """Triton signature (arg -> type) and constants (constexprs and None args) of one recorded launch."""
    fn = launch["kernel"]
    names = fn.arg_names
    # positional args may stop short of the parameter list: the rest were passed as kwargs
    values = dict(zip(names, launch["args"], strict=False))
    values.update(launch["kwargs"])
    signature, constants = {}, {}
    for name in names:
        value = values[name]
        is_constexpr = fn.params[names.index(name)].is_constexpr
        if is_constexpr or value is None:
            signature[name], constants[name] = "constexpr", value
        elif isinstance(value, TensorType):
            signature[name] = "*" + TYPE_NAMES[str(value.dtype).replace("torch.", "")]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"argument {name}: cannot type {type(value).__name__}")
    return signature, constants


def patch_out_npubin() -> None:
    """Drop the ``npubin`` stage from the backend class that ``triton.backends`` actually loaded."""
    from triton.backends import backends as loaded

    cls = loaded["ascend"].compiler
    original = cls.add_stages
    if getattr(original, "_no_npubin", False):
        return

    def add_stages(self, stages, options):
        original(self, stages, options)
        stages.pop("npubin", None)

    add_stages._no_npubin = True
    cls.add_stages = add_stages


def lower(launch: dict, cache: Path) -> dict:
    """Compile one launch to ttadapter; returns status, the artifact paths and the error if any."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = launch["kernel"]
    signature, constants = signature_of(launch)
    shown = {k: v for k, v in constants.items() if v is not None}
    result = {"spec": launch["spec"], "preset": launch["preset"], "mode": launch["mode"], "kernel": fn.__name__,
              "config": launch["config"], "constexprs": shown}
    before = set(cache.rglob("*.ttadapter"))
    t0 = time.perf_counter()
    try:
        triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("npu", ARCH, 0))
    except AttributeError as exc:
        if "KernelMetadata" not in str(exc):  # expected: no npubin metadata after the last stage
            result.update(status="failed", error=f"AttributeError: {exc}")
    except Exception as exc:  # noqa: BLE001 - the lowering error is the result
        text = " ".join(str(exc).split())
        # Triton's message is "at L:C:", the source, then the reason last: keep the location and the tail.
        short = text if len(text) <= 400 else f"{text[:12]} ... {text[-300:]}"
        result.update(status="failed", error=f"{type(exc).__name__}: {short}", error_full=str(exc)[:6000])
    result["seconds"] = round(time.perf_counter() - t0, 2)
    new = sorted(set(cache.rglob("*.ttadapter")) - before)
    if "status" not in result:
        if new:
            result.update(status="lowered", ttadapter=str(new[0]), ttadapter_bytes=new[0].stat().st_size)
        else:
            result.update(status="failed", error="no .ttadapter written (cache hit or silent stop)")
    return result


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

    if not hasattr(triton, "backends") or "ascend" not in __import__("triton.backends").backends.backends:
        print("triton-ascend is not the installed triton here: run this in the triton-ascend venv", file=sys.stderr)
        return 5
    patch_out_npubin()
    prefixes = tuple(p for p in args.presets.split(",") if p)
    launches, problems = record_launches({n for n in args.kernels.split(",") if n}, prefixes)
    seen, results = set(), []
    for launch in launches:
        signature, constants = signature_of(launch)
        key = (launch["kernel"].__name__, tuple(signature.items()), tuple(sorted((k, repr(v))
                                                                                for k, v in constants.items())))
        if key in seen:
            continue
        seen.add(key)
        results.append(lower(launch, cache))
        r = results[-1]
        print(f"{r['status']:>8}  {r['spec']:<28} {r['kernel']:<36} {r['preset']}/{r['mode']} "
              f"{r.get('error', '')[:300]}", file=sys.stderr, flush=True)
    by_kernel: dict[str, set] = {}
    for r in results:
        by_kernel.setdefault(r["kernel"], set()).add(r["status"])
    summary = {k: ("lowered" if v == {"lowered"} else "failed") for k, v in sorted(by_kernel.items())}
    payload = {"schema": 1, "triton": triton.__version__, "arch": ARCH, "artifacts": str(cache),
               "kernels": summary, "launches": results, "host_problems": problems}
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
