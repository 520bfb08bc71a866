"""Per-kernel device time of one bundled kernel (several configurations) and of its fla peer, same run.

Where ``benchmarks/kernels.py`` times whole calls, this answers "which launch inside the call costs
what": each variant runs ``--calls`` times under ``torch.profiler`` (CUDA activity only, after a
warm-up call that compiles), and every GPU kernel's device time is summed and divided by the number
of calls. Launch gaps are not counted, so a variant's total is its device busy time per call.

Variants are tunable overrides of the spec's defaults, separated by ``;`` (``default`` is the spec's
own configuration, ``peer`` fla's equivalent, ``spec.extras["peer"]``; ``--peer`` adds it at the end).
A variant that faults the device is recorded and ends the run (the CUDA context is lost), so list a
suspect one last; results are written after every variant.

Run on the CUDA host from the repository root::

    python3 tools/stage_breakdown.py --kernel chunk_gated_delta_rule_fwd --preset realistic \
        --dtype bf16 --variants "default;kkt_solve_FORM=2;fuse_wy=0" --peer --out breakdown.json

Prints one markdown table per variant (kernel, launches per call, us per call, share) and a summary;
raw numbers go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")


def parse_variant(text: str) -> dict:
    """``"a=1,b=2"`` -> ``{"a": 1, "b": 2}``; ``"default"`` -> ``{}``. A malformed item is a UsageError."""
    from ascendopt.kernels.spec import parse_assignments

    text = text.strip()
    if text == "default":
        return {}
    return parse_assignments(text, option="--variants", example="BV=64,FORM=2", integer=True)


def resolve_case(args) -> tuple:
    """(spec, dims, dtype, mode, variants) from the case arguments, every one checked before anything
    runs: an unknown kernel, preset, tunable or value, an unsupported dtype/mode, or ``peer`` for a kernel
    without one is a UsageError naming it. ``variants``: ``[(name, config or None for the peer)]``."""
    from ascendopt.errors import UsageError
    from ascendopt.kernels import get

    spec = get(args.kernel)
    dtype = args.dtype or spec.dtypes[0]
    mode = args.mode or spec.modes[0]
    dims = spec.shape(args.preset).dims
    spec.check_supported(dims, dtype, mode)
    texts = [t.strip() or "default" for t in args.variants.split(";")]
    if getattr(args, "peer", False) and "peer" not in texts:
        texts.append("peer")
    if "peer" in texts and spec.extras.get("peer") is None:
        raise UsageError(f"--variants: {spec.name} has no peer")
    variants = [(t, None if t == "peer" else spec.config(parse_variant(t))) for t in texts]
    return spec, dims, dtype, mode, variants


def by_launch(launches: list[tuple[float, str, float]], calls: int) -> dict[str, dict]:
    """``{"<i>:<kernel>": {"launches": 1, "us": mean device us}}`` for the i-th device launch of a call.

    ``launches``: (start, kernel name, device us) of every launch of ``calls`` identical calls, any order.
    Two launches of one kernel in a call (a bulk and a tail launch) are told apart by their position.
    A count that is not a multiple of ``calls`` means the calls differ: ValueError."""
    ordered = sorted(launches)
    if calls < 1 or len(ordered) % calls:
        raise ValueError(f"{len(ordered)} launches do not split into {calls} equal calls")
    per_call = len(ordered) // calls
    out: dict[str, dict] = {}
    for i in range(per_call):
        names = {ordered[c * per_call + i][1] for c in range(calls)}
        if len(names) != 1:
            raise ValueError(f"launch {i} of a call is not the same kernel in every call: {sorted(names)}")
        total = sum(ordered[c * per_call + i][2] for c in range(calls))
        out[f"{i}:{names.pop()}"] = {"launches": 1.0, "us": total / calls}
    return out


def open_case(args, what: str) -> tuple | int:
    """``resolve_case``, then the cuda backend and the case's inputs: ``(spec, dims, dtype, mode, variants,
    inputs)``, or the exit code after a one-line error (2 a bad case, 5 no cuda; ``what`` names the
    script in that line)."""
    from ascendopt.device import backends
    from ascendopt.errors import AscendoptError

    try:
        spec, dims, dtype, mode, variants = resolve_case(args)
    except AscendoptError as exc:  # bad case (2), no usable backend (5): one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if backends.current().name != "cuda":
        print(f"this {what} needs the cuda backend", file=sys.stderr)
        return 5
    inputs = spec.make_inputs(dict(dims), dtype, backends.current().torch_device(), 0)
    return spec, dims, dtype, mode, variants, inputs


def cuda_backend(what: str):
    """The current backend when it is cuda; else the exit code after a one-line ``error: this <what> needs the
    cuda backend, got <name>`` (5; an unusable backend: its own error and code)."""
    from ascendopt.device import backends
    from ascendopt.errors import AscendoptError, EnvironmentProblem

    try:
        backend = backends.current()
        if backend.name != "cuda":
            raise EnvironmentProblem(f"this {what} needs the cuda backend, got {backend.name}")
    except AscendoptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return backend


def kernel_times(fn, calls: int, per_launch: bool = False) -> dict[str, dict]:
    """{kernel name: {"launches": per call, "us": device us per call}} of ``calls`` runs of ``fn``;
    ``per_launch``: keyed by each launch's position in the call instead (``by_launch``)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()  # compile / warm up outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    if per_launch:
        return by_launch([(e.time_range.start, e.name, e.time_range.elapsed_us()) for e in prof.events()
                          if e.device_type == DeviceType.CUDA and e.time_range.elapsed_us() > 0], calls)
    out = {}
    for evt in prof.key_averages():
        device_us = getattr(evt, "self_device_time_total", None)
        if device_us is None:
            device_us = evt.self_cuda_time_total
        if device_us <= 0:
            continue
        out[evt.key] = {"launches": evt.count / calls, "us": device_us / calls}
    return out


def table(name: str, kernels: dict[str, dict]) -> str:
    total = sum(k["us"] for k in kernels.values())
    lines = [f"\n{name}: {total:.1f} us device time per call\n", "| kernel | launches/call | us/call | share |",
             "|---|---|---|---|"]
    for kname, k in sorted(kernels.items(), key=lambda kv: -kv[1]["us"]):
        short = kname if len(kname) <= 70 else kname[:67] + "..."
        lines.append(f"| {short} | {k['launches']:.0f} | {k['us']:.1f} | {100 * k['us'] / total:.0f} % |")
    return "\n".join(lines)


def add_case_arguments(ap: argparse.ArgumentParser) -> None:
    """The kernel case and its variants (shared with ``benchmarks/ncu_workload.py``)."""
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--preset", default="realistic")
    ap.add_argument("--dtype", default="")
    ap.add_argument("--mode", default="")
    ap.add_argument("--variants", default="default",
                    help="';'-separated variants: 'default', 'peer' or tunable overrides, e.g. 'default;BV=16'")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_arguments(ap)
    ap.add_argument("--peer", action="store_true", help="also break down the spec's fla peer")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--per-launch", action="store_true",
                    help="time each launch of a call separately (e.g. a kernel's bulk and tail launches)")
    ap.add_argument("--check", action="store_true",
                    help="also run the gate's correctness check (NaN-poisoned outputs vs the spec's reference) "
                         "on every variant of ours")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from ascendopt.device import backends
    from ascendopt.judge.correctness import check_kernel

    started = time.perf_counter()
    case = open_case(args, "benchmark")
    if isinstance(case, int):
        return case
    spec, dims, dtype, mode, jobs, inputs = case

    import torch

    props = torch.cuda.get_device_properties(0)
    results = []

    def save() -> None:  # after every variant: a later device fault must not lose the earlier ones
        Path(args.out).write_text(json.dumps({
            "schema": 1, "device": props.name, "torch": torch.__version__, "triton": __import__("triton").__version__,
            "kernel": spec.name, "preset": args.preset, "dims": {k: list(v) if isinstance(v, tuple) else v
                                                                 for k, v in dims.items()},
            "dtype": dtype, "mode": mode, "calls": args.calls, "results": results,
            "seconds": time.perf_counter() - started, "command": " ".join(sys.argv)}, indent=2, default=str))

    peer = spec.extras.get("peer")
    for name, cfg in jobs:
        print(f"{spec.name} {args.preset} {name} ...", file=sys.stderr, flush=True)
        if cfg is None:
            fn, title = (lambda: peer(inputs, mode)), f"peer ({spec.extras.get('peer_name')})"
        else:
            fn, title = (lambda cfg=cfg: spec.run(inputs, cfg, mode)), name
        try:
            kernels = kernel_times(fn, args.calls, args.per_launch)
        except Exception as exc:  # noqa: BLE001 - one failing variant must not lose the others
            results.append({"variant": name, "config": cfg, "error": f"{type(exc).__name__}: {exc}"})
            print(f"\n{name}: error {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            save()
            if backends.sticky_device_fault(exc):
                print("device fault: the CUDA context is lost, later variants cannot run", flush=True)
                break
            continue
        row = {"variant": name, "config": cfg, "kernels": kernels}
        results.append(row)
        print(table(title, kernels), flush=True)
        if args.check and cfg is not None:
            reports = check_kernel(spec, dims, dtype, mode, cfg)
            row["correct"] = all(r.passed for r in reports)
            row["checks"] = [r.line() for r in reports]
            print("correctness: " + ("pass" if row["correct"] else "FAIL") + "; " + "; ".join(row["checks"]),
                  flush=True)
        save()
    print("\n| variant | device us per call | correctness |\n|---|---|---|")
    for r in results:
        if "kernels" not in r:
            print(f"| {r['variant']} | {r['error'][:80]} | |")
            continue
        total = sum(k["us"] for k in r["kernels"].values())
        print(f"| {r['variant']} | {total:.1f} | {({True: 'pass', False: 'FAIL'}).get(r.get('correct'), '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
