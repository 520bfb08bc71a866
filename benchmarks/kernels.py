"""H200 benchmark of every bundled kernel against flash-linear-attention's own kernels, same run.

For each registered spec, each non-tiny shape preset and each mode (``fwd``, ``fwdbwd``), the bundled
Triton kernel (``spec.run`` at its default tunables) and fla's equivalent (``spec.extras["peer"]``,
fla-core 0.6.0) run on the same inputs, timed interleaved (ABBA) with synchronized device events by
``ascendopt.judge.bench.compare`` (device time: the device is held busy while the host enqueues each
timed batch, so launch overhead is not counted; the host's enqueue time per call is its own column).
Reported per row: median time of each side, speedup (peer / ours), our
achieved GB/s from ``spec.cost`` (minimum bytes: every input read once, every output written once),
the fraction of the device-to-device copy bandwidth measured at the start of the same run (a 1 GiB buffer),
for memory-bound kernels the fraction of a copy moving the same bytes (``same_size_copy_ms``: where launch and
ramp-up dominate, as for 4 MB, no transfer reaches the large-buffer bandwidth), TFLOP/s for cube-bound kernels,
and the relative RMS difference between the two sides' outputs.

Run on the CUDA host from the repository root (no network needed)::

    python3 benchmarks/kernels.py --out results.json [--kernels l2norm,rms_norm] [--sweep]
    python3 benchmarks/kernels.py --out conv.json --kernels causal_conv1d --config EDGES=1,BT=32

``--config`` replaces default tunables in every case (each named kernel must have them; a bad name or
value is one line and exit 2 before any device work).

Bounded time: each case is time-limited by a global budget (``--budget-s``, default 210 s); cases
left when it runs out are listed as skipped. Prints a markdown table; raw results go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")

L2_FLUSH_FACTOR = 3  # rotate input sets until the working set is ~3x the L2, so timings are not L2-hot
MAX_INPUT_SETS = 8


def copy_bandwidth_gbs(backend, nbytes: int = 1 << 30) -> dict:
    """Device-to-device copy bandwidth (read + write bytes / time) of a ``nbytes`` buffer (one source: a
    1 GiB buffer is far past the L2)."""
    ms = same_size_copy_ms(2 * nbytes, backend, l2_bytes=0)
    return {"bytes": nbytes, "median_ms": ms, "gbs": 2 * nbytes / (ms * 1e-3) / 1e9}


def same_size_copy_ms(nbytes: int, backend, l2_bytes: int, device: str = "cuda") -> float:
    """Device time (ms) of one device-to-device copy that moves ``nbytes`` (a buffer of ``nbytes/2`` read and
    written), timed like the kernels: sources rotated until they are ~3x the L2 (``l2_bytes``), so the copy is
    not L2-hot. A kernel's time against it says how close the kernel is to a transfer of its own size, launch
    included: small shapes cannot reach the large-buffer copy bandwidth, and neither can this copy."""
    import torch

    from ascendopt.judge import bench

    half = max(1, nbytes // 2)
    count = max(1, min(MAX_INPUT_SETS, math.ceil(L2_FLUSH_FACTOR * l2_bytes / half)))
    sources = [(torch.randint(0, 255, (half,), dtype=torch.uint8, device=device),) for _ in range(count)]
    dst = torch.empty(half, dtype=torch.uint8, device=device)
    return bench.measure(lambda src: dst.copy_(src), inputs=sources, backend=backend, repeats=20).median_ms


def _input_bytes(inputs: dict) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in inputs.values() if isinstance(v, torch.Tensor))


def _input_sets(spec, dims, dtype, mode, device, l2_bytes: int) -> list[tuple[dict]]:
    first = spec.make_inputs(dict(dims), dtype, device, 0)
    count = max(1, min(MAX_INPUT_SETS, math.ceil(L2_FLUSH_FACTOR * l2_bytes / max(_input_bytes(first), 1))))
    return [(first,)] + [(spec.make_inputs(dict(dims), dtype, device, seed),) for seed in range(1, count)]


def _rel_rms(a, b) -> float | None:
    if a is None or b is None or a.shape != b.shape:
        return None
    a, b = a.double(), b.double()
    denom = float(b.pow(2).mean().sqrt())
    diff = float((a - b).pow(2).mean().sqrt())
    return diff / denom if denom > 0 else diff


def run_case(spec, preset: str, mode: str, dtype: str, backend, copy_gbs: float, l2_bytes: int,
             peer_ok: bool, overrides: dict | None = None) -> dict:
    """Time ours (and the peer if there is one) on one preset; returns one result row. ``overrides``:
    tunable values replacing the spec's defaults."""
    from ascendopt.judge import bench

    dims = spec.shape(preset).dims
    row = {"kernel": spec.name, "preset": preset, "dims": {k: list(v) if isinstance(v, tuple) else v
                                                           for k, v in dims.items()},
           "mode": mode, "dtype": dtype, "bound": spec.bound}
    reason = spec.supports(dims, dtype, mode)
    if reason:
        row["skipped"] = reason
        return row
    device = backend.torch_device()
    sets = _input_sets(spec, dims, dtype, mode, device, l2_bytes)
    cfg = spec.config(overrides)
    row["config"] = cfg
    row["input_sets"] = len(sets)
    cost = spec.cost(dims, dtype, mode)
    row["cost"] = {"bytes": cost.bytes, "flops": cost.flops}

    def ours(inp):
        return spec.run(inp, cfg, mode)

    peer = spec.extras.get("peer") if peer_ok else None
    if peer is not None:
        try:
            ours_out, peer_out = ours(sets[0][0]), peer(sets[0][0], mode)
            backend.synchronize()
            row["diff_vs_peer"] = {k: _rel_rms(ours_out[k], peer_out.get(k)) for k in ours_out}
        except Exception as exc:  # noqa: BLE001 - a peer failure is reported, ours is still timed
            row["peer_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            peer = None
    if peer is not None:
        result = bench.compare(lambda inp: peer(inp, mode), ours, inputs=sets, backend=backend, pairs=20)
        row["peer_ms"] = result.baseline.median_ms
        row["ours_ms"] = result.candidate.median_ms
        row["speedup_vs_peer"] = result.speedup
        row["verdict_vs_peer"] = result.verdict
        row["ours_timing"], row["peer_timing"] = result.candidate.to_dict(), result.baseline.to_dict()
        row["peer_host_ms"] = result.baseline.host_ms
    else:
        timing = bench.measure(ours, inputs=sets, backend=backend, repeats=20)
        row["ours_ms"] = timing.median_ms
        row["ours_timing"] = timing.to_dict()
    row["ours_host_ms"] = (row["ours_timing"] or {}).get("host_ms")
    seconds = row["ours_ms"] * 1e-3
    row["ours_gbs"] = cost.bytes / seconds / 1e9
    row["copy_fraction"] = row["ours_gbs"] / copy_gbs
    if spec.bound != "cube":  # memory-bound: also against a copy of the same bytes (launch-bound sizes)
        row["same_size_copy_ms"] = same_size_copy_ms(cost.bytes, backend, l2_bytes, device)
        row["same_size_copy_fraction"] = row["same_size_copy_ms"] / row["ours_ms"]
    if spec.bound == "cube":
        row["ours_tflops"] = cost.flops / seconds / 1e12
    if "peer_ms" in row:
        row["peer_gbs"] = cost.bytes / (row["peer_ms"] * 1e-3) / 1e9
    return row


MAX_SWEEP_TILE_ELEMENTS = 32768  # larger tiles take minutes to compile for CUDA (thousands of values per thread)


def sweep_case(spec, preset: str, mode: str, dtype: str, backend, l2_bytes: int, deadline: float) -> list[dict]:
    """Time every legal choice of every tunable (one at a time, others at default) on one preset."""
    from ascendopt.judge import bench

    dims = spec.shape(preset).dims
    sets = _input_sets(spec, dims, dtype, mode, backend.torch_device(), l2_bytes)
    rows = []
    for name, tunable in spec.tunables.items():
        for choice in tunable.choices:
            cfg = spec.config({name: choice})
            largest = max(math.prod(stage.tile.values()) for stage in spec.ub_model(dims, cfg, dtype))
            if largest > MAX_SWEEP_TILE_ELEMENTS or time.perf_counter() > deadline:
                continue
            try:
                timing = bench.measure(lambda inp, cfg=cfg: spec.run(inp, cfg, mode), inputs=sets, backend=backend,
                                       repeats=10)
                rows.append({"kernel": spec.name, "preset": preset, "mode": mode, "tunable": name, "value": choice,
                             "ms": timing.median_ms})
            except Exception as exc:  # noqa: BLE001 - an illegal choice is recorded, the sweep goes on
                rows.append({"kernel": spec.name, "preset": preset, "mode": mode, "tunable": name, "value": choice,
                             "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
    return rows


def _fmt(value, spec: str = ".1f") -> str:
    return "" if value is None else format(value, spec)


def _us(ms) -> str:
    return _fmt(ms and ms * 1e3)


def markdown(rows: list[dict], copy: dict) -> str:
    lines = [(f"Device-to-device copy: {copy['gbs']:.0f} GB/s ({copy['bytes'] >> 20} MiB buffer, median "
             f"{copy['median_ms'] * 1e3:.1f} us)."), "",
             ("| kernel | preset | mode | dtype | ours us | fla us | speedup | ours GB/s | % copy BW "
              "| % same-size copy | TFLOP/s | host us ours / fla | max diff vs fla | note |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        diffs = [v for v in (r.get("diff_vs_peer") or {}).values() if v is not None]
        note = r.get("skipped") or r.get("error") or r.get("peer_error") or r.get("verdict_vs_peer", "")
        lines.append("| " + " | ".join([
            r["kernel"], r["preset"], r["mode"], r["dtype"],
            _fmt(r.get("ours_ms") and r["ours_ms"] * 1e3), _fmt(r.get("peer_ms") and r["peer_ms"] * 1e3),
            _fmt(r.get("speedup_vs_peer"), ".2f"), _fmt(r.get("ours_gbs"), ".0f"),
            _fmt(r.get("copy_fraction") and r["copy_fraction"] * 100, ".0f"),
            _fmt(r.get("same_size_copy_fraction") and r["same_size_copy_fraction"] * 100, ".0f"),
            _fmt(r.get("ours_tflops"), ".1f"),
            f"{_us(r.get('ours_host_ms'))} / {_us(r.get('peer_host_ms'))}",
            _fmt(max(diffs) if diffs else None, ".1e"), str(note).replace("|", "/")]) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="raw results JSON path")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default: all registered)")
    ap.add_argument("--presets", default="", help="comma-separated presets (default: every preset except tiny*)")
    ap.add_argument("--dtype", default="", help="dtype for all kernels (default: each spec's first dtype)")
    ap.add_argument("--sweep", action="store_true", help="also time every tunable choice on the realistic preset")
    ap.add_argument("--budget-s", type=float, default=210.0, help="stop starting new cases after this many seconds")
    ap.add_argument("--config", default="",
                    help="tunable overrides for every kernel run, NAME=VALUE,... (each kernel must have them)")
    ap.add_argument("--modes", default="", help="comma-separated modes, fwd and/or fwdbwd (default: each spec's)")
    args = ap.parse_args()

    import torch

    from ascendopt.device import backends
    from ascendopt.errors import AscendoptError, UsageError
    from ascendopt.kernels import all_specs, get
    from ascendopt.kernels.spec import parse_assignments

    started = time.perf_counter()
    try:
        specs = [get(n) for n in args.kernels.split(",") if n] or all_specs()
        overrides = parse_assignments(args.config, option="--config", example="block_rows=16", integer=True)
        for spec in specs:
            spec.config(overrides)  # an unknown tunable or value: one line, exit 2, before any device work
        modes = [m for m in args.modes.split(",") if m]
        for mode in modes:
            if not any(mode in spec.modes for spec in specs):
                raise UsageError(f"--modes: no kernel asked for has mode {mode!r} (modes: fwd, fwdbwd)")
    except AscendoptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    backend = backends.current()
    if backend.name != "cuda":
        print(f"this benchmark needs the cuda backend, got {backend.name} ({backend.reason})", file=sys.stderr)
        return 5
    props = torch.cuda.get_device_properties(0)
    l2_bytes = int(getattr(props, "L2_cache_size", 50 << 20))
    try:
        import fla

        peer_ok, peer_note = True, f"fla {getattr(fla, '__version__', '?')}"
    except Exception as exc:  # noqa: BLE001 - the run continues without peers and says why
        peer_ok, peer_note = False, f"fla not importable: {type(exc).__name__}: {exc}"
    print(f"device {props.name}, {props.multi_processor_count} SMs, L2 {l2_bytes >> 20} MiB; {peer_note}",
          file=sys.stderr)
    wanted = [p for p in args.presets.split(",") if p]
    copy = copy_bandwidth_gbs(backend)
    rows, sweeps, sweep_jobs = [], [], []
    for spec in specs:
        dtype = args.dtype or spec.dtypes[0]
        presets = wanted or [p for p in spec.shapes if not p.startswith("tiny")]
        for preset in presets:
            if preset not in spec.shapes:
                continue
            for mode in [m for m in spec.modes if not modes or m in modes]:
                if time.perf_counter() - started > args.budget_s:
                    rows.append({"kernel": spec.name, "preset": preset, "mode": mode, "dtype": dtype,
                                 "skipped": f"time budget {args.budget_s:.0f} s used up"})
                    continue
                print(f"{spec.name} {preset} {mode} {dtype} ...", file=sys.stderr, flush=True)
                try:
                    rows.append(run_case(spec, preset, mode, dtype, backend, copy["gbs"], l2_bytes, peer_ok,
                                         overrides))
                except Exception as exc:  # noqa: BLE001 - one failing case must not lose the others
                    traceback.print_exc()
                    rows.append({"kernel": spec.name, "preset": preset, "mode": mode, "dtype": dtype,
                                 "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
                if args.sweep and preset == "realistic":
                    sweep_jobs.append((spec, preset, mode, dtype))
    # Sweeps after every comparison, with what is left of the budget.
    for spec, preset, mode, dtype in sweep_jobs:
        print(f"sweep {spec.name} {preset} {mode} ...", file=sys.stderr, flush=True)
        try:
            sweeps.extend(sweep_case(spec, preset, mode, dtype, backend, l2_bytes, started + args.budget_s))
        except Exception as exc:  # noqa: BLE001 - the comparisons above are kept whatever a sweep does
            sweeps.append({"kernel": spec.name, "preset": preset, "mode": mode, "tunable": "-", "value": "-",
                           "error": f"{type(exc).__name__}: {exc}"})
    result = {"schema": 1, "device": props.name, "sms": props.multi_processor_count, "l2_bytes": l2_bytes,
              "torch": torch.__version__, "triton": __import__("triton").__version__, "peer": peer_note,
              "copy": copy, "rows": rows, "sweeps": sweeps, "seconds": time.perf_counter() - started,
              "command": " ".join(sys.argv)}
    Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    print(markdown(rows, copy))
    if sweeps:
        print("\n| kernel | mode | tunable | value | ours us |\n|---|---|---|---|---|")
        for s in sweeps:
            print(f"| {s['kernel']} | {s['mode']} | {s['tunable']} | {s['value']} | "
                  f"{_fmt(s.get('ms') and s['ms'] * 1e3) or s.get('error', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
