"""How good is `optimize-round --auto`? The search's best within its budget vs the exhaustive best.

For every bundled kernel with tunables and two of its non-tiny shape presets, the configurations
of the space are measured (synchronized, ``ascendopt.judge.bench``) and recorded in the JSON as the
case's *landscape*: every configuration with its median/p20/p80 ms, sample count and UB verdict
(configurations the UB model prunes are listed unmeasured). The search of ``ascendopt.tune.search`` then
runs over that landscape (kernel_tuner's "simulation mode") with the default budget (25 % of the
measured space) from the kernel's default configuration, so the comparison is exact: the search
sees the numbers the exhaustive pass saw. When the two winners differ, they are timed again
interleaved (``bench.compare``) so the reported gap is not an artefact of one noisy sample.

``--replay results.json`` runs the same search over a recorded landscape (no device): search
strategies can be compared offline against real H200 landscapes.

Target: the search's best within 3 % of the exhaustive best, using at most 25 % of the evaluations.

Cost control (the whole study fits ``--time-budget``): cases run cheapest first, each gets an
equal share of the remaining time; a configuration stops sampling once its p20 exceeds the best
p80 so far by ``--cut-margin`` (it cannot win); a space larger than ``--max-per-case`` is randomly
sampled (seeded; the default configuration always included), and so is one whose time share runs
out. The table states the measured share of every case: a sampled case is judged on its sample.

Space: mode ``fwd`` (``*_bwd`` tunables stay at their defaults), bf16 where supported,
configurations that launch the same resolved tiles counted once, and by default the UB model of
the model chip prunes candidates as it would on Ascend (``--no-enforce-ub`` keeps them).

    python benchmarks/tune_quality.py --out tune_quality.json            # H200: all kernels, ~4 min
    python benchmarks/tune_quality.py --replay tune_quality.json         # offline, any machine
    python benchmarks/tune_quality.py --presets tiny --kernels rms_norm   # CPU smoke run (interpreter)
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
import time
from pathlib import Path

MIN_SPACE = 8  # below 8 distinct configurations a 25 % budget leaves the start and at most one move


def _prepare():
    from ascendopt.device import backends

    backend = backends.current()
    backend.prepare_kernels()  # cpu: TRITON_INTERPRET=1 before any kernel module is imported
    return backend


def presets_for(spec, wanted: list[str] | None) -> list[str]:
    """Two presets per kernel: the named ones, else the first two that are not tiny."""
    if wanted:
        return [p for p in wanted if p in spec.shapes][:2]
    return [name for name in spec.shapes if not name.startswith("tiny")][:2]


def plan_case(spec, preset, dtype, info, enforce_ub: bool):
    """-> (row, distinct candidates): the space of one case and the search's parameters, nothing run."""
    from ascendopt.tune import search as tune
    from ascendopt.tune import space as tune_space

    dims = dict(spec.shapes[preset].dims)
    row = {"kernel": spec.name, "shape": preset, "dims": dims, "dtype": dtype}
    try:
        spec.check_supported(dims, dtype, "fwd")
    except Exception as exc:  # noqa: BLE001
        return {**row, "skipped": f"unsupported: {exc}"}, []
    fixed = {n: t.default for n, t in spec.tunables.items() if "bwd" in n.lower()}
    start = spec.config({n: t.default for n, t in spec.tunables.items()})
    if tune_space.raw_size(spec, fixed) > tune_space.MAX_ENUMERATED:
        row["neighbourhood"] = "space cut to configurations within two changed tunables of the default"
    feasible, pruned = tune_space.enumerate_space(spec, dims, dtype, info.ub_bytes, enforce_ub=enforce_ub,
                                                  fixed=fixed, mode="fwd", around=start)
    if tune.config_key(start) not in {tune.config_key(c.config) for c in feasible} and enforce_ub \
            and not info.ub_enforced:
        # Off npu the auto (0) tiles resolve for this backend (larger on cuda), so the default itself
        # can overflow the model chip's UB: pruning would compare nothing that runs here.
        row["ub_note"] = f"not UB-pruned: the default's tiles as resolved on {info.backend} exceed the model UB"
        feasible, pruned = tune_space.enumerate_space(spec, dims, dtype, info.ub_bytes, enforce_ub=False,
                                                      fixed=fixed, mode="fwd", around=start)
    if tune.config_key(start) not in {tune.config_key(c.config) for c in feasible}:
        return {**row, "skipped": "default configuration pruned by the UB model"}, []
    # configurations with the same resolved tiles launch the same kernel: measured once
    distinct, _ = tune_space.dedupe(feasible, spec, dims, dtype, "fwd", keep=start)
    bound = f"{spec.bound}_bound"
    order = tune_space.order_tunables(spec, dims, dtype, bound)
    row.update(space=len(distinct), feasible=len(feasible), pruned=len(pruned),
               search={"start": start, "order": order, "direction": tune_space.preferred_direction(bound),
                       "choices": tune_space.axes(spec),
                       "probe": [n for n in tune_space.probe_tunables(spec, dims, dtype) if n not in fixed]},
               landscape=[{"config": c.config, "ub_pruned": True, "ub_safe": False, "ub_share": c.ub_share}
                          for c in pruned])
    return row, distinct


def measure_config(spec, config, backend, inputs, repeats: int, cut_ms: float | None) -> dict:
    """Samples of one configuration: ``repeats`` at most, stopping after 3 once p20 > ``cut_ms``."""
    import numpy as np

    from ascendopt.judge import bench

    try:
        run = bench.Sampler(lambda inp: spec.run(inp, config, "fwd"), inputs, backend)
        calls = bench.calls_per_sample(run.warmup(3, 10.0), 0.5)
        samples = []
        while len(samples) < repeats:
            samples.append(run.sample(calls))
            if cut_ms is not None and len(samples) >= 3 and np.percentile(samples, 20) > cut_ms:
                break  # clearly slower than the best so far: more samples would not change the verdict
    except Exception as exc:  # noqa: BLE001 - a failing configuration is a data point, not a crash
        from ascendopt.device import backends
        from ascendopt.errors import DeviceFault

        if backends.sticky_device_fault(exc):  # the context is gone: every later number would be an error
            raise DeviceFault(f"{config}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}",
                              config=config) from exc
        first = str(exc).splitlines()[0][:120] if str(exc) else ""
        print(f"    {config}: failed ({type(exc).__name__}: {first})", file=sys.stderr)
        return {"median_ms": None, "note": f"{type(exc).__name__}: {first}"}
    t = bench.summarize(samples, calls)
    return {"median_ms": t.median_ms, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "samples": len(samples)}


def measure_case(row, distinct, spec, backend, args, stop_at: float) -> None:
    """Measure the case's landscape in place: the start first, then a seeded shuffle of the rest."""
    from ascendopt.gate.stages import timing_inputs
    from ascendopt.tune import search as tune

    start_key = tune.config_key(row["search"]["start"])
    rest = [c for c in distinct if tune.config_key(c.config) != start_key]
    random.Random(f"{args.seed}|{row['kernel']}|{row['shape']}").shuffle(rest)
    first = next(c for c in distinct if tune.config_key(c.config) == start_key)
    todo = [first, *rest][:args.max_per_case]
    inputs = timing_inputs(spec, row["dims"], row["dtype"], "fwd", backend.torch_device())
    best_p80 = None
    t0 = time.monotonic()
    for cand in todo:
        if time.monotonic() > stop_at:
            break
        cut = best_p80 * (1 + args.cut_margin) if best_p80 is not None else None
        m = measure_config(spec, cand.config, backend, inputs, args.repeats, cut)
        row["landscape"].append({"config": cand.config, "ub_pruned": False, "ub_safe": cand.ub_safe,
                                 "ub_share": cand.ub_share, **m})
        if m["median_ms"] is not None and m["samples"] == args.repeats:
            best_p80 = min(best_p80 if best_p80 is not None else math.inf, m["p80_ms"])
    row["exhaustive_s"] = round(time.monotonic() - t0, 1)


def search_axes(row) -> dict[str, list[int]]:
    """The search's value orders for a recorded case, each auto 0 of the start placed where its
    resolved tile sits (``tune_space.place_auto``, as ``optimize-round --auto`` does). The landscape
    does not record which explicit values alias the start; a fully measured case tells: they are the
    values missing from it (collapsed into the start by ``dedupe``; a value collapsed into another
    explicit tile is larger than the auto's, and ``place_auto`` uses the smallest). A sampled case keeps
    the recorded order."""
    from ascendopt.tune import search as tune
    from ascendopt.tune import space as tune_space

    choices = {n: list(v) for n, v in row["search"]["choices"].items()}
    if row.get("neighbourhood") or len([e for e in row["landscape"] if not e["ub_pruned"]]) < row.get("space", 0):
        return choices
    start = row["search"]["start"]
    known = {tune.config_key(e["config"]) for e in row["landscape"]}
    return tune_space.place_auto(choices, start, lambda name, v: tune.config_key({**start, name: v}) not in known)


def judge(row) -> dict:
    """Run ``tune.search`` over the row's recorded landscape; returns the result fields (or skipped)."""
    from ascendopt.tune import search as tune

    table = {tune.config_key(e["config"]): e.get("median_ms") for e in row["landscape"] if not e["ub_pruned"]}
    s = row["search"]
    start_key = tune.config_key(s["start"])
    if table.get(start_key) is None:
        return {"skipped": "the default configuration failed to run or was not measured"}
    if len(table) < 2:
        return {"skipped": f"time share ran out after {len(table)} of {row['space']} configurations"}
    ok = {k: v for k, v in table.items() if v is not None}
    best_key = min(ok, key=ok.get)
    budget = max(2, len(table) // 4)  # the target is <= 25 % of the space, so round down (start included)
    space = [e["config"] for e in row["landscape"] if not e["ub_pruned"]]
    result = tune.search(space, s["start"], lambda cfg, inc: tune.Trial(cfg, table[tune.config_key(cfg)]),
                         order=s["order"], direction=s["direction"], budget=budget,
                         choices=search_axes(row), probe=s.get("probe", ()))
    found_key = tune.config_key(result.best.config)
    return dict(measured=len(table), budget=budget, evaluations=result.evaluations,
                eval_share=result.evaluations / len(table), exhaustive_best=best_key, exhaustive_ms=ok[best_key],
                found=found_key, found_ms=table[found_key], default_ms=table[start_key],
                gap=table[found_key] / ok[best_key] - 1.0, failed=sum(v is None for v in table.values()),
                stopped=result.stopped)


def recheck(row, spec, backend, args) -> None:
    """Time the search's winner against the exhaustive one interleaved (the gap is not one sample's)."""
    from ascendopt.gate.stages import timing_inputs
    from ascendopt.judge import bench
    from ascendopt.tune import search as tune

    def cfg_of(key):
        return next(e["config"] for e in row["landscape"] if tune.config_key(e["config"]) == key)

    best_cfg, found_cfg = cfg_of(row["exhaustive_best"]), cfg_of(row["found"])
    inputs = timing_inputs(spec, row["dims"], row["dtype"], "fwd", backend.torch_device())
    cmp = bench.compare(lambda inp: spec.run(inp, best_cfg, "fwd"), lambda inp: spec.run(inp, found_cfg, "fwd"),
                        inputs=inputs, backend=backend, pairs=args.pairs, warmup_ms=10.0, min_sample_ms=0.5)
    row["recheck"] = {"ratio_found_over_best": cmp.ratio, "verdict": cmp.verdict, "reason": cmp.reason}


def within_3pct(r) -> bool:
    """The found configuration is within 3 % of the exhaustive best: by the landscape's medians, or, when
    the two were timed again interleaved (``recheck``, the more exact measurement), by that ratio or a
    "same"/"faster" verdict (the landscape's gap did not reproduce: a few-microsecond kernel's noise)."""
    if r["gap"] <= 0.03:
        return True
    rc = r.get("recheck")
    return bool(rc) and (rc["ratio_found_over_best"] <= 1.03 or rc["verdict"] in ("same", "faster"))


def meets_target(r) -> bool:
    return within_3pct(r) and r["eval_share"] <= 0.25 + 1e-9


def markdown(rows) -> str:
    head = ("| kernel | shape | measured / distinct | feasible (pruned) | evals / budget | share | exhaustive best "
            "| ms | search best | ms | gap | re-check (found/best) | within 3 % in <= 25 % |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['kernel']} | {r['shape']} | - / {r.get('space', '-')} | {r.get('feasible', '-')} "
                         f"({r.get('pruned', '-')}) | - | - | skipped: {r['skipped']} | | | | | | |")
            continue
        recheck = r.get("recheck")
        rc = f"{recheck['ratio_found_over_best']:.3f} ({recheck['verdict']})" if recheck else (
            "same config" if r["found"] == r["exhaustive_best"] else "not re-timed")
        ok = f"n/a (space < {MIN_SPACE})" if r["measured"] < MIN_SPACE else ("yes" if meets_target(r) else "NO")
        sampled = f"{r['measured']} / {r['space']} ({r['measured'] / r['space']:.0%} sampled)" \
            if r["measured"] < r["space"] else f"{r['measured']} / {r['space']}"
        lines.append(f"| {r['kernel']} | {r['shape']} | {sampled} | {r['feasible']} ({r['pruned']}) | "
                     f"{r['evaluations']} / {r['budget']} | {r['eval_share']:.0%} | {r['exhaustive_best']} "
                     f"| {r['exhaustive_ms']:.4f} | {r['found']} | {r['found_ms']:.4f} | {r['gap']:+.1%} | {rc} "
                     f"| {ok} |")
    return "\n".join(lines)


def summarize(rows, seconds: float) -> dict:
    done = [r for r in rows if "skipped" not in r]
    judged = [r for r in done if r["measured"] >= MIN_SPACE]
    return {
        "cases": len(done),
        "judged": len(judged),
        "sampled": sum(r["measured"] < r["space"] for r in done),
        "meets_target": sum(meets_target(r) for r in judged),
        "within_3pct": sum(within_3pct(r) for r in done),
        "max_gap": max((r["gap"] for r in done), default=None),
        "mean_eval_share": (sum(r["eval_share"] for r in done) / len(done)) if done else None,
        "geomean_found_over_best": (math.exp(sum(math.log(r["found_ms"] / r["exhaustive_ms"]) for r in done)
                                             / len(done)) if done else None),
        "seconds": round(seconds, 1),
    }


def summary_line(s, where: str) -> str:
    if not s["cases"]:
        return f"no case completed; {s['seconds']} s {where}"
    return (f"{s['within_3pct']} of {s['cases']} cases within 3 % of the exhaustive best ({s['sampled']} judged on a "
            f"random sample of their space); {s['meets_target']} of {s['judged']} cases with >= {MIN_SPACE} "
            f"measured configurations meet the target (<= 3 % in <= 25 % of the evaluations); mean evaluations "
            f"{s['mean_eval_share']:.0%} of the space; {s['seconds']} s {where}")


def replay_file(path: Path) -> int:
    """Re-run the search over every recorded landscape in ``path`` and print the table (no device)."""
    from ascendopt.errors import UsageError

    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
        rows = data["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a tune_quality results file ({exc}); record one with --out") from exc
    started = time.monotonic()
    out = []
    for r in rows:
        base = {k: v for k, v in r.items() if k not in ("recheck", "skipped")}
        if "landscape" not in r or "search" not in r:
            out.append({**base, "skipped": r.get("skipped", "no recorded landscape (older results file)")})
            continue
        new = {**base, **judge(base)}
        if r.get("recheck") and new.get("found") == r.get("found") and new.get("exhaustive_best") == r.get(
                "exhaustive_best"):
            new["recheck"] = r["recheck"]  # the device re-check still applies to the same pair
        out.append(new)
    print(markdown(out))
    print()
    print(summary_line(summarize(out, time.monotonic() - started), f"replayed from {path}"))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write raw results (with landscapes) as JSON here")
    ap.add_argument("--replay", type=Path, default=None, help="re-run the search over a recorded results JSON")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default: all with tunables)")
    ap.add_argument("--presets", default="", help="comma-separated shape presets (default: first two non-tiny)")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--repeats", type=int, default=10, help="most samples per configuration")
    ap.add_argument("--cut-margin", type=float, default=0.10,
                    help="stop sampling a configuration once its p20 > (1 + this) x the best p80 so far")
    ap.add_argument("--pairs", type=int, default=16, help="interleaved pairs of the re-check")
    ap.add_argument("--max-per-case", type=int, default=32, help="larger spaces are randomly sampled to this")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    ap.add_argument("--time-budget", type=float, default=220.0, help="seconds for the whole study")
    ap.add_argument("--no-enforce-ub", dest="enforce_ub", action="store_false",
                    help="keep candidates the UB model of the model chip rejects")
    args = ap.parse_args(argv)
    if args.replay:
        from ascendopt.errors import UsageError

        try:
            return replay_file(args.replay)
        except UsageError as exc:  # a one-line message, not a traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
    started = time.monotonic()
    deadline = started + args.time_budget
    backend = _prepare()
    from ascendopt import kernels
    from ascendopt.device import backends
    from ascendopt.errors import DeviceFault

    info = backend.info()
    wanted = [k for k in args.kernels.split(",") if k]
    specs = [kernels.get(k) for k in wanted] if wanted else [s for s in kernels.all_specs() if s.tunables]
    presets = [p for p in args.presets.split(",") if p] or None
    cases = []
    for spec in specs:
        dtype = args.dtype if args.dtype in spec.dtypes else spec.dtypes[0]
        for preset in presets_for(spec, presets):
            row, distinct = plan_case(spec, preset, dtype, info, args.enforce_ub)
            cases.append((spec, row, distinct))
    listed = [(c[1]["kernel"], c[1]["shape"]) for c in cases]  # the table keeps the kernels' order
    # cheapest first: a slow case late in the list cannot starve the quick ones
    cases.sort(key=lambda c: min(len(c[2]), args.max_per_case))
    rows = []
    broken = None
    for i, (spec, row, distinct) in enumerate(cases):
        rows.append(row)
        if broken:
            row["skipped"] = f"not run: the device broke earlier ({broken})"
            continue
        if "skipped" in row:
            continue
        case_end = time.monotonic() + (deadline - time.monotonic()) / (len(cases) - i)
        print(f"{spec.name} [{row['shape']}] {row['dtype']}: {min(len(distinct), args.max_per_case)} of "
              f"{len(distinct)} configurations ...", file=sys.stderr, flush=True)
        try:
            measure_case(row, distinct, spec, backend, args,
                         stop_at=case_end - 0.15 * (case_end - time.monotonic()))
        except DeviceFault as exc:
            broken = exc.message
            print(f"    device fault at {broken}: stopping the study", file=sys.stderr, flush=True)
            row["skipped"] = f"device fault at {broken}"
            continue
        row.update(judge(row))
        if "skipped" not in row and row["found"] != row["exhaustive_best"] and time.monotonic() < case_end:
            recheck(row, spec, backend, args)
        if args.out:  # after every case: a crash that kills the device context later keeps these
            write_results(args.out, backend, args, rows, time.monotonic() - started)
    rows.sort(key=lambda r: listed.index((r["kernel"], r["shape"])))
    summary = summarize(rows, time.monotonic() - started)
    print(markdown(rows))
    print()
    print(summary_line(summary, f"on {backends.describe(backend)['name']} ({backend.name})"))
    if args.out:
        write_results(args.out, backend, args, rows, time.monotonic() - started)
    return 0


def write_results(path: Path, backend, args, rows, seconds: float) -> None:
    from ascendopt.device import backends

    path.write_text(json.dumps({"backend": backends.describe(backend), "args": {k: str(v) for k, v in
                                                                                vars(args).items()},
                                "summary": summarize(rows, seconds), "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
