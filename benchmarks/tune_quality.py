"""How good is `optimize-round --auto`? The search's best within its budget vs the exhaustive best.

For every bundled kernel with tunables and two of its non-tiny shape presets, every configuration
of the space is measured once (synchronized, ``ascendopt.bench.measure``); then the search of
``ascendopt.tune`` is replayed over those measurements with the default budget (25 % of the
space, as ``--auto`` uses) from the kernel's default configuration. Replay (kernel_tuner's
"simulation mode") makes the comparison exact: the search sees the same numbers the exhaustive
pass saw. When the two winners differ, they are timed again interleaved (``bench.compare``) so the
reported gap is not an artefact of one noisy sample.

Target: the search's best within 3 % of the exhaustive best, using at most 25 % of the evaluations.

Space: mode ``fwd`` (``*_bwd`` tunables stay at their defaults: they do not affect a forward
pass), bf16 where supported, configurations that launch the same resolved tiles counted once, and
by default the UB model of the model chip prunes candidates as it would on Ascend
(``--no-enforce-ub`` keeps them). Spaces larger than ``--max-space`` are skipped
(their exhaustive pass would not fit the time budget) and listed as skipped.

    python benchmarks/tune_quality.py --out tune_quality.json            # H200: all kernels, ~3-4 min
    python benchmarks/tune_quality.py --presets tiny --kernels rms_norm   # CPU smoke run (interpreter)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def _prepare():
    from ascendopt import backends

    backend = backends.current()
    backend.prepare_kernels()  # cpu: TRITON_INTERPRET=1 before any kernel module is imported
    return backend


def presets_for(spec, wanted: list[str] | None) -> list[str]:
    """Two presets per kernel: the named ones, else the first two that are not tiny."""
    if wanted:
        return [p for p in wanted if p in spec.shapes][:2]
    return [name for name in spec.shapes if not name.startswith("tiny")][:2]


def space_for(spec, dims, dtype, info, enforce_ub: bool):
    from ascendopt import tune_space

    fixed = {n: t.default for n, t in spec.tunables.items() if "bwd" in n.lower()}
    return tune_space.enumerate_space(spec, dims, dtype, info.ub_bytes, enforce_ub=enforce_ub, fixed=fixed,
                                mode="fwd")


def measure_config(spec, dims, dtype, config, backend, inputs, repeats: int) -> float | None:
    """Median ms per call, or None when the configuration fails (compile error, resources, ...)."""
    from ascendopt import bench

    try:
        t = bench.measure(lambda inp: spec.run(inp, config, "fwd"), inputs=inputs, backend=backend, warmup=3,
                          warmup_ms=10.0, repeats=repeats, min_sample_ms=0.5)
    except Exception as exc:  # noqa: BLE001 - a failing configuration is a data point, not a crash
        print(f"    {config}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})",
              file=sys.stderr)
        return None
    return t.median_ms


def replay(space, start, table, spec, dims, dtype, budget):
    """Run ``tune.search`` over measured numbers; returns the SearchResult."""
    from ascendopt import tune, tune_space

    def evaluate(cfg, incumbent):
        ms = table[tune.config_key(cfg)]
        return tune.Trial(cfg, ms, note="replay")

    bound = f"{spec.bound}_bound"
    return tune.search(space, start, evaluate, order=tune_space.order_tunables(spec, dims, dtype, bound),
                       direction=tune_space.preferred_direction(bound), budget=budget, choices=tune_space.axes(spec))


def study_case(spec, preset, dtype, backend, info, args, deadline):
    from ascendopt import bench, tune, tune_space
    from ascendopt.gate import timing_inputs

    dims = dict(spec.shapes[preset].dims)
    row = {"kernel": spec.name, "shape": preset, "dims": dims, "dtype": dtype}
    try:
        spec.check_supported(dims, dtype, "fwd")
    except Exception as exc:  # noqa: BLE001
        return {**row, "skipped": f"unsupported: {exc}"}
    raw = math.prod(len(t.choices) for n, t in spec.tunables.items() if "bwd" not in n.lower())
    if raw > 20 * args.max_space:  # not even worth enumerating: the exhaustive pass could never finish
        return {**row, "skipped": f"{raw} raw configurations (> 20 x --max-space)"}
    feasible, pruned = space_for(spec, dims, dtype, info, args.enforce_ub)
    start = spec.config({n: t.default for n, t in spec.tunables.items()})
    if tune.config_key(start) not in {tune.config_key(c.config) for c in feasible}:
        return {**row, "skipped": "default configuration pruned by the UB model"}
    # configurations with the same resolved tiles launch the same kernel: both the exhaustive pass
    # and the search see each distinct launch once (``tune_space.dedupe``)
    distinct, _ = tune_space.dedupe(feasible, spec, dims, dtype, "fwd", keep=start)
    space = [c.config for c in distinct]
    row.update(space=len(space), feasible=len(feasible), pruned=len(pruned))
    if len(space) > args.max_space:
        return {**row, "skipped": f"space {len(space)} > --max-space {args.max_space}"}
    inputs = timing_inputs(spec, dims, dtype, "fwd", backend.torch_device())
    table = {}
    t0 = time.monotonic()
    for i, cfg in enumerate(space):
        if time.monotonic() > deadline:
            return {**row, "skipped": f"time budget reached after {i} of {len(space)} configurations"}
        table[tune.config_key(cfg)] = measure_config(spec, dims, dtype, cfg, backend, inputs, args.repeats)
    row["exhaustive_s"] = round(time.monotonic() - t0, 1)
    ok = {k: v for k, v in table.items() if v is not None}
    if table[tune.config_key(start)] is None or not ok:
        return {**row, "skipped": "the default configuration failed to run"}
    best_key = min(ok, key=ok.get)
    budget = max(2, len(space) // 4)  # the target is <= 25 % of the space, so round down (start included)
    result = replay(space, start, table, spec, dims, dtype, budget)
    found_key = tune.config_key(result.best.config)
    gap = table[found_key] / ok[best_key] - 1.0
    row.update(budget=budget, evaluations=result.evaluations, eval_share=result.evaluations / len(space),
               exhaustive_best=best_key, exhaustive_ms=ok[best_key], found=found_key, found_ms=table[found_key],
               default_ms=table[tune.config_key(start)], gap=gap, failed=sum(v is None for v in table.values()),
               stopped=result.stopped)
    if found_key != best_key and time.monotonic() < deadline:
        best_cfg = next(c for c in space if tune.config_key(c) == best_key)
        found_cfg = result.best.config
        cmp = bench.compare(lambda inp: spec.run(inp, best_cfg, "fwd"), lambda inp: spec.run(inp, found_cfg, "fwd"),
                            inputs=inputs, backend=backend, pairs=args.pairs, warmup_ms=10.0, min_sample_ms=0.5)
        row["recheck"] = {"ratio_found_over_best": cmp.ratio, "verdict": cmp.verdict, "reason": cmp.reason}
    return row


MIN_SPACE = 8  # below 8 distinct configurations a 25 % budget leaves the start and at most one move


def meets_target(r) -> bool:
    return r["gap"] <= 0.03 and r["eval_share"] <= 0.25 + 1e-9


def markdown(rows) -> str:
    head = ("| kernel | shape | distinct / feasible (pruned) | evals / budget | share | exhaustive best | ms "
            "| search best | ms | gap | re-check (found/best) | within 3 % in <= 25 % |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['kernel']} | {r['shape']} | {r.get('space', '-')} / {r.get('feasible', '-')} "
                         f"({r.get('pruned', '-')}) "
                         f"| - | - | skipped: {r['skipped']} | | | | | | |")
            continue
        recheck = r.get("recheck")
        rc = f"{recheck['ratio_found_over_best']:.3f} ({recheck['verdict']})" if recheck else "same config"
        ok = "n/a (space < 8)" if r["space"] < MIN_SPACE else ("yes" if meets_target(r) else "NO")
        lines.append(f"| {r['kernel']} | {r['shape']} | {r['space']} / {r['feasible']} ({r['pruned']}) | "
                     f"{r['evaluations']} / "
                     f"{r['budget']} | {r['eval_share']:.0%} | {r['exhaustive_best']} | {r['exhaustive_ms']:.4f} "
                     f"| {r['found']} | {r['found_ms']:.4f} | {r['gap']:+.1%} | {rc} | {ok} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write raw results as JSON here")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default: all with tunables)")
    ap.add_argument("--presets", default="", help="comma-separated shape presets (default: first two non-tiny)")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--repeats", type=int, default=10, help="samples per configuration in the exhaustive pass")
    ap.add_argument("--pairs", type=int, default=16, help="interleaved pairs of the re-check")
    ap.add_argument("--max-space", type=int, default=80)
    ap.add_argument("--time-budget", type=float, default=220.0, help="seconds for the whole study")
    ap.add_argument("--no-enforce-ub", dest="enforce_ub", action="store_false",
                    help="keep candidates the UB model of the model chip rejects")
    args = ap.parse_args(argv)
    started = time.monotonic()
    deadline = started + args.time_budget
    backend = _prepare()
    from ascendopt import backends, kernels

    info = backend.info()
    wanted = [k for k in args.kernels.split(",") if k]
    specs = [kernels.get(k) for k in wanted] if wanted else [s for s in kernels.all_specs() if s.tunables]
    presets = [p for p in args.presets.split(",") if p] or None
    rows = []
    for spec in specs:
        dtype = args.dtype if args.dtype in spec.dtypes else spec.dtypes[0]
        for preset in presets_for(spec, presets):
            if time.monotonic() > deadline:
                rows.append({"kernel": spec.name, "shape": preset, "skipped": "time budget reached"})
                continue
            print(f"{spec.name} [{preset}] {dtype} ...", file=sys.stderr, flush=True)
            rows.append(study_case(spec, preset, dtype, backend, info, args, deadline))
    done = [r for r in rows if "skipped" not in r]
    judged = [r for r in done if r["space"] >= MIN_SPACE]
    summary = {
        "cases": len(done),
        "judged": len(judged),
        "meets_target": sum(meets_target(r) for r in judged),
        "within_3pct": sum(r["gap"] <= 0.03 for r in done),
        "max_gap": max((r["gap"] for r in done), default=None),
        "mean_eval_share": (sum(r["eval_share"] for r in done) / len(done)) if done else None,
        "geomean_found_over_best": (math.exp(sum(math.log(r["found_ms"] / r["exhaustive_ms"]) for r in done)
                                             / len(done)) if done else None),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(markdown(rows))
    print()
    print(f"{summary['within_3pct']} of {summary['cases']} cases within 3 % of the exhaustive best; "
          f"{summary['meets_target']} of {summary['judged']} cases with >= {MIN_SPACE} distinct configurations meet "
          f"the target (<= 3 % in <= 25 % of the evaluations); mean evaluations {summary['mean_eval_share']:.0%} "
          "of the space; " if done else "no case completed; ", end="")
    print(f"{summary['seconds']} s on {backends.describe(backend)['name']} ({backend.name})")
    if args.out:
        args.out.write_text(json.dumps({"backend": backends.describe(backend), "args": {k: str(v) for k, v in
                                                                                      vars(args).items()},
                                        "summary": summary, "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
