"""``optimize-round --auto``: search a bundled kernel's tunables, each fresh candidate a recorded round.

The space and the search are ``ascendopt.tune.search``'s; this module supplies the evaluator: one full
round per candidate (gate on the candidate, then baseline/best/candidate timed interleaved), with
the candidate's own verdict deciding whether it becomes the incumbent.

Tiles the UB model says overflow are pruned on every backend: on npu they would not compile, and
off-NPU the model chip's verdict (``ASCENDOPT_CHIP``) stands in for it, so a search on cuda or the
interpreter never keeps a tile the NPU would reject. ``allow_ub_overflow`` (``--allow-ub-overflow``)
keeps them searchable off-NPU; each such round's ``ub["warning"]`` then says so. Where the spec has no UB model,
precheck's IR estimate prunes instead (``ir_ub_prune``, docs/lowering.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ascendopt.errors import DeviceFault, UsageError
from ascendopt.rounds import records as rounds
from ascendopt.rounds.context import RoundContext
from ascendopt.rounds.run import Plan, RoundOutcome, Step, check_stop, command_line, record_round, ub_use
from ascendopt.tune import search as tune
from ascendopt.tune import space as tune_space
from ascendopt.workspace import Workspace


def run_auto(ws: Workspace, *, hypothesis: str, budget: int | None = None, force: bool = False, pairs: int = 20,
             step: Step | None = None, on_round: Callable[[RoundOutcome], None] | None = None,
             timer: Callable[[], float] | None = None, allow_ub_overflow: bool = False, precheck: bool = True,
             ascend_python: str | None = None) -> dict[str, Any]:
    """``--auto``: search the bundled kernel's tunables; each fresh candidate is a recorded round.

    Returns ``{"search": SearchResult.to_dict(), "rounds": [numbers], "pruned": n, "best": config,
    "ub_chip": the chip whose UB judged the tiles, "ub_overflow_allowed": bool,
    "over_budget_rounds": [rounds whose tile overflows that UB], "best_ub_warning": str | None}``.
    ``allow_ub_overflow``: off-NPU, search tiles the UB model says overflow too (no effect on npu,
    where they would not compile). The workspace stays locked for the whole search: its rounds are
    one sequence.
    """
    with ws.lock():
        ctx = RoundContext.load(ws)
        if not ctx.is_kernel:
            raise UsageError("--auto searches a bundled kernel's tunables; own code is optimized by editing it")
        check_stop(ctx, force)
        return _search(ctx, hypothesis=hypothesis, budget=budget, pairs=pairs, step=step or (lambda text: None),
                       on_round=on_round, timer=timer, allow_ub_overflow=allow_ub_overflow, precheck=precheck,
                       ascend_python=ascend_python)


def ir_ub_prune(ctx: RoundContext, candidates: list, backend: str, start: dict[str, int], *, precheck: bool,
                ascend_python: str | None, step: Step) -> tuple[list, list]:
    """``(kept, pruned)``: where the spec models no UB stage (``"no UB stages modelled"``), each candidate but
    the start is lowered (``lint.precheck.loop_precheck``) and pruned when its IR UB estimate is over the
    default margin of the chip's UB. Nothing changes where a model exists, on npu, with ``--no-precheck`` or
    without a triton-ascend environment (a candidate whose check is not run, or does not lower, is kept: the
    gate judges it)."""
    from ascendopt.contract.frozen import project_root
    from ascendopt.device.ub import DEFAULT_MARGIN
    from ascendopt.lint.precheck import loop_precheck

    kept, pruned = [], []
    for cand in candidates:
        if cand.ub_detail != "no UB stages modelled" or tune.config_key(cand.config) == tune.config_key(start):
            kept.append(cand)
            continue
        step(f"auto: IR UB estimate of {tune.config_key(cand.config)} (the spec has no UB model)")
        record = loop_precheck(ctx.contract, backend, project_root(), config=cand.config, skip=not precheck,
                               ascend_python=ascend_python)
        share = (record or {}).get("ub_max_percent")
        if record and record["status"] == "lowers" and share is not None and share > 100 * DEFAULT_MARGIN:
            pruned.append(tune_space.Candidate(cand.config, False, share / 100,
                                               f"IR UB estimate {share:.0f}% of UB (no UB model)"))
        else:
            kept.append(cand)
    return kept, pruned


def _search(ctx: RoundContext, *, hypothesis: str, budget: int | None, pairs: int, step: Step,
            on_round: Callable[[RoundOutcome], None] | None, timer: Callable[[], float] | None,
            allow_ub_overflow: bool = False, precheck: bool = True,
            ascend_python: str | None = None) -> dict[str, Any]:
    from ascendopt import console
    from ascendopt.device import backends

    ws, contract, spec, records = ctx.ws, ctx.contract, ctx.spec, ctx.records
    info = backends.current().info()
    w = contract.workload
    case = w.shapes[0]
    baseline = ctx.baseline_config
    best_rec = ctx.best_round
    start = ctx.best_config
    if allow_ub_overflow and info.ub_enforced:
        console.warn("--allow-ub-overflow has no effect on npu: a tile over the UB does not compile there")
    # npu: the device's UB; elsewhere the model chip's, unless overflowing tiles are asked for
    enforce = info.ub_enforced or not allow_ub_overflow
    feasible, pruned = tune_space.enumerate_space(spec, case.dims, w.dtype, info.ub_bytes, enforce_ub=enforce,
                                                  mode=w.mode, around=start)
    # a candidate must fit every shape case of the contract, not only the first
    for other in w.shapes[1:]:
        ok = {tune.config_key(c.config) for c in tune_space.enumerate_space(spec, other.dims, w.dtype, info.ub_bytes,
                                                                            enforce_ub=enforce, mode=w.mode,
                                                                            around=start)[0]}
        pruned += [c for c in feasible if tune.config_key(c.config) not in ok]
        feasible = [c for c in feasible if tune.config_key(c.config) in ok]
    if tune.config_key(start) not in {tune.config_key(c.config) for c in feasible}:
        raise UsageError(f"the best configuration so far {tune.config_key(start)} is outside the UB-feasible space "
                         f"({info.chip or info.backend}, {info.ub_bytes} B UB)",
                         hint=None if info.ub_enforced else
                         "off-NPU, --allow-ub-overflow searches tiles over the model chip's UB (ASCENDOPT_CHIP)")
    distinct, _ = tune_space.dedupe(feasible, spec, [c.dims for c in w.shapes], w.dtype, w.mode, keep=start)
    if enforce:
        distinct, by_ir = ir_ub_prune(ctx, distinct, backends.current().name, start, precheck=precheck,
                                      ascend_python=ascend_python, step=step)
        pruned += by_ir
    space = [c.config for c in distinct]
    budget = budget if budget is not None else tune.default_budget(len(space))
    if budget < 1:
        raise UsageError(f"--budget {budget}: must be >= 1 evaluation")
    bound = None
    for r in reversed(records):
        if r.summary.get("bound"):
            bound = r.summary["bound"]
            break
    key = tune.cache_key(spec.name, case.dims, w.dtype, w.mode, info.name, tune.source_hash(spec),
                         ctx.contract_digest)
    cache = tune.TuneCache(ws.tune_cache_path, key)
    step(f"auto: {len(space)} distinct feasible configurations of {len(feasible)} ({len(pruned)} pruned by the UB "
         f"model of {info.chip or info.backend}), budget {budget}, "
         f"bound {bound or 'unknown'} -> "
         f"{'larger' if tune_space.preferred_direction(bound) > 0 else 'smaller'} tiles first")
    recorded: list[int] = []
    over_budget: list[int] = []  # rounds whose tile overflows the UB (only with allow_ub_overflow, off-NPU)
    start_ms = None
    if best_rec and best_rec.timing:
        start_ms = best_rec.candidate_ms
    elif records and records[-1].timing:
        start_ms = rounds.geomean([c["baseline"]["median_ms"] for c in records[-1].timing["cases"]])
    else:
        start_ms = rounds.geomean([b.median_ms for b in contract.baseline])

    def evaluate(cfg: dict[str, int], incumbent: dict[str, int]) -> tune.Trial:
        changed = {k: v for k, v in cfg.items() if incumbent.get(k) != v}
        plan = Plan(baseline, incumbent, cfg, changed)
        text = f"{hypothesis} [auto: " + ", ".join(f"{k} {incumbent[k]}->{v}" for k, v in changed.items()) + "]"
        try:
            # each candidate sees the rounds recorded before it (its number, the best so far)
            outcome = record_round(ctx.reloaded(), hypothesis=text, sets=changed, pairs=pairs, reprofile=False,
                                   step=step, timer=timer, plan=plan, precheck=precheck, ascend_python=ascend_python,
                                   command_text=command_line(hypothesis, {}, ["--auto", "--budget", str(budget)]
                                                             + (["--allow-ub-overflow"] if allow_ub_overflow else [])))
        except DeviceFault as exc:
            # The search cannot go on in this process; remember the configuration as failed so the
            # next --auto run (a fresh process) skips it instead of breaking the device again.
            cache.put(tune.Trial(cfg, None, note=f"device fault: {exc.message}"))
            raise
        recorded.append(outcome.record.number)
        if (outcome.record.ub or {}).get("warning"):
            over_budget.append(outcome.record.number)
        if on_round:
            on_round(outcome)
        rec = outcome.record
        if rec.verdict == "drop":
            return tune.Trial(cfg, None, note=f"gate red: {rec.gate.get('failed_stage')}")
        return tune.Trial(cfg, rec.candidate_ms, better=rec.verdict == "keep", note=rec.verdict)

    result = tune.search(space, start, evaluate, order=tune_space.order_tunables(spec, case.dims, w.dtype, bound),
                         direction=tune_space.preferred_direction(bound), budget=budget, cache=cache,
                         choices=tune_space.axes(spec), start_trial=tune.Trial(start, start_ms, note="start"),
                         probe=tune_space.probe_tunables(spec, case.dims, w.dtype))
    if result.best.cached and result.best.config != start:
        # A cache hit is a number from an earlier session; separate runs do not compose, so the
        # winner is measured again, interleaved with the best so far, before anything is claimed.
        step("auto: confirming the cached best against the best so far")
        evaluate(dict(result.best.config), dict(start))
    return {"search": result.to_dict(), "rounds": recorded, "pruned": len(pruned), "space": len(space),
            "feasible": len(feasible),
            "best": result.best.config, "budget": budget, "cache": str(cache.path),
            "ub_chip": info.chip, "ub_overflow_allowed": not enforce, "over_budget_rounds": over_budget,
            "best_ub_warning": ub_use(ctx, result.best.config, info)["warning"]}
