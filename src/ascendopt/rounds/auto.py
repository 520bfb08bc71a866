"""``optimize-round --auto``: screen a bundled kernel's tunables fast, confirm the best with the gate.

Two stages:

1. *screening* (``tune.screen``): every candidate compiled once, smoke-checked on the contract's first
   shape case (NaN-poisoned outputs vs the oracle) and timed briefly with the bench core (device time,
   L2-rotated inputs), in the order the evidence suggests (``tune.search``: flags and layouts probed,
   then coordinate descent from the best so far, its auto tiles placed at their resolved value so the
   first moves are neighbours, larger tiles first unless the class is core under-use), then the rest of
   the space nearest first, until it is covered, ``budget`` screenings or the ``budget_s`` deadline.
   Results are cached by kernel, shape, dtype, mode, device and source hash (``screen-cache.json``).
   With several shape cases, the ``MIX_TOP`` fastest are screened on every case too (``screen_mix``): their
   weighted time ranks the confirmations, and ``mix_winners`` says which configuration wins where.
   Nothing is recorded and nothing can be kept on a screening number;
2. *confirmation*: the ``confirm`` fastest screened candidates (the best so far excluded, and none
   screened more than ``CONFIRM_SLACK`` slower than the best so far) become recorded rounds
   (``record_round``): the full gate, then baseline, best and candidate timed interleaved; a confirmed
   keep becomes the best the next one is timed against (and the slack is then measured from its
   screening time). Only these rounds can be ``keep``.

Tiles the UB model says overflow are pruned on every backend: on npu they would not compile, and
off-NPU the model chip's verdict (``ASCENDOPT_CHIP``) stands in for it, so a search on cuda or the
interpreter never keeps a tile the NPU would reject. ``allow_ub_overflow`` (``--allow-ub-overflow``)
keeps them searchable off-NPU; each such round's ``ub["warning"]`` then says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendopt.contract.shapes import bucket_name
from ascendopt.errors import CorrectnessError, UsageError
from ascendopt.rounds.context import RoundContext
from ascendopt.rounds.run import Plan, RoundOutcome, Step, check_stop, command_line, record_round, ub_use
from ascendopt.tune import screen as tune_screen
from ascendopt.tune import search as tune
from ascendopt.tune import space as tune_space
from ascendopt.workspace import Workspace

DEFAULT_BUDGET_S = 240.0  # screening's wall-time budget: a few minutes, like an autotuner's
DEFAULT_CONFIRM = 2  # screened candidates confirmed as gated rounds
# A candidate screened this much slower than the best so far is not confirmed: a short screening
# median is not a verdict, but one this far behind is not worth a gated round.
CONFIRM_SLACK = 0.03
# With several shape cases (the mix of a bundled kernel), the search runs on the first; this many of its fastest
# candidates (the best so far always among them) are then screened on every other case too, so the mix decides
# which are confirmed and which configuration wins where. Each costs one short screening per further case.
MIX_TOP = 8
# The hypothesis of an --auto run given none: the search itself (each confirmation round adds its change)
DEFAULT_HYPOTHESIS = "auto: search the tunables, confirm the fastest screened as rounds"


def check_auto_options(budget: int | None, budget_s: float | None, confirm: int | None) -> None:
    """``--budget``, ``--budget-s``, ``--confirm`` validated; UsageError (exit 2) naming the option."""
    if budget is not None and budget < 1:
        raise UsageError(f"--budget {budget}: must be >= 1 screened candidate")
    if budget_s is not None and not budget_s > 0:
        raise UsageError(f"--budget-s {budget_s:g}: must be > 0 seconds")
    if confirm is not None and confirm < 0:
        raise UsageError(f"--confirm {confirm}: must be >= 0 (0 screens only)")


def run_auto(ws: Workspace, *, hypothesis: str | None = None, budget: int | None = None, budget_s: float | None = None,
             confirm: int | None = None, force: bool = False, pairs: int = 20, step: Step | None = None,
             on_round: Callable[[RoundOutcome], None] | None = None,
             on_screened: Callable[[tune_screen.Screened, tune_screen.ScreenRun], None] | None = None,
             on_space: Callable[[int], None] | None = None, timer: Callable[[], float] | None = None,
             wall_clock: Callable[[], float] = time.monotonic, allow_ub_overflow: bool = False,
             timeout: float | None = None, precheck: bool = True, ascend_python: str | None = None,
             pool=None, on_pool: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """``--auto``: screen the bundled kernel's tunables, then confirm the fastest as recorded rounds.
    Own code: ``screen_autotune`` (``timeout``: ``--timeout``, its children's limits; a bundled kernel's
    confirmation rounds run under it too). ``hypothesis``: None is ``DEFAULT_HYPOTHESIS`` (``--auto``
    needs no ``--hypothesis``: the search is the hypothesis, and each round names its change).

    ``budget``: fresh screenings at most (default: the whole space); ``budget_s``: screening's wall
    seconds (default ``DEFAULT_BUDGET_S``; ``wall_clock`` reads them); ``confirm``: candidates confirmed
    (default ``DEFAULT_CONFIRM``, 0 screens only). ``on_space(total)`` once the space is known,
    ``on_screened(row, run)`` after each screened candidate, ``on_round(outcome)`` after each
    confirmation round. ``timer``: a clock in ms replacing the device timer (tests), for both stages.
    ``precheck`` / ``ascend_python``: off-NPU, lower each confirmed candidate for Ascend (``--no-precheck``,
    ``--ascend-python``), and prune by the IR UB estimate where the spec has no UB model (``ir_ub_prune``).
    ``pool``: ``pool.options.PoolOptions`` (``--devices`` / ``--ray``): the screening runs on a pool of devices
    (``tune.pooled``; bundled kernels), ``on_pool(pool.core.Progress)`` whenever its state changes; the result
    then has ``pool`` (``PoolRun.to_dict``) and each confirmation round records ``change["screened"]``.

    Returns ``{"screening": ScreenRun.to_dict() + {"budget", "budget_s", "cache", "start_ms"},
    "mix": mix_winners(...) over the shape cases (None with one case; ``screen_mix``),
    "confirmed": [{"config", "round", "verdict", "screen_ms"}], "rounds": [numbers], "pruned": n,
    "space": n, "feasible": n, "best": config, "ub_chip", "ub_overflow_allowed", "over_budget_rounds",
    "best_ub_warning", "finalists": [configs picked for confirmation, in order]}``. The workspace stays locked for
    the whole run: its rounds are one sequence.
    """
    check_auto_options(budget, budget_s, confirm)
    pooled = pool is not None and pool.wanted
    with ws.lock():
        ctx = RoundContext.load(ws)
        if not ctx.is_kernel:
            if pooled:
                raise UsageError(f"{pool.describe()}: a pool screens a bundled kernel's tunables; on own code --auto "
                                 "screens @triton.autotune configs on this device",
                                 hint="run without --devices/--ray")
            if confirm is not None:
                raise UsageError("--confirm applies to bundled kernels: on own code --auto screens @triton.autotune "
                                 "configs and records nothing", hint="pin the fastest config in the source, then a "
                                                                     "plain optimize-round gates and times that edit")
            return screen_autotune(ctx, budget=budget, budget_s=budget_s, step=step or (lambda text: None),
                                   on_screened=on_screened, on_space=on_space, wall_clock=wall_clock,
                                   timeout=timeout)
        check_stop(ctx, force)
        return _auto(ctx, hypothesis=hypothesis or DEFAULT_HYPOTHESIS, budget=budget, budget_s=budget_s,
                     confirm=confirm, pairs=pairs, step=step or (lambda text: None), on_round=on_round,
                     on_screened=on_screened, on_space=on_space, timer=timer, wall_clock=wall_clock,
                     allow_ub_overflow=allow_ub_overflow, precheck=precheck, ascend_python=ascend_python,
                     timeout=timeout, force=force, pool=pool if pooled else None, on_pool=on_pool)


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


@dataclass(frozen=True)
class AutoSpace:
    """What ``--auto`` screens: the distinct UB-feasible configurations and the search's parameters."""

    case: Any  # the contract's first shape case: screened (smoke check and timing) on it
    start: dict[str, int]  # the best configuration so far
    feasible: list  # tune.space.Candidate, UB-feasible on every shape case
    pruned: list  # tune.space.Candidate, pruned by the UB model
    space: list[dict[str, int]]  # distinct configurations (same launched tiles collapsed), the start among them
    choices: dict[str, list[int]]  # value orders, the start's auto 0s at their resolved tiles
    order: list[str]
    probe: list[str]
    bound: str
    direction: int
    enforce: bool  # UB overflow pruned

    @property
    def start_key(self) -> str:
        return tune.config_key(self.start)


def plan_space(ctx: RoundContext, info, allow_ub_overflow: bool = False, *, precheck: bool = False,
               ascend_python: str | None = None, step: Step | None = None) -> AutoSpace:
    """The space ``--auto`` screens for ``ctx``'s contract on a backend with ``info`` (``Backend.info()``).

    Configurations must fit the UB on every shape case (npu: the device's; elsewhere the model chip's,
    unless ``allow_ub_overflow``). In a forward-only workload the tunables of the backward (``bwd`` in the
    name) stay at the start's values: they never run. The bottleneck class is the latest round's, else the
    spec's. Where the spec has no UB model, ``precheck`` prunes by the IR UB estimate (``ir_ub_prune``).
    Raises UsageError when the best so far itself is outside the feasible space.
    """
    contract, spec, records = ctx.contract, ctx.spec, ctx.records
    w = contract.workload
    case = w.shapes[0]
    start = ctx.best_config
    # npu: the device's UB; elsewhere the model chip's, unless overflowing tiles are asked for
    enforce = info.ub_enforced or not allow_ub_overflow
    fixed = {n: start[n] for n in spec.tunables if w.mode == "fwd" and "bwd" in n.lower()}
    feasible, pruned = tune_space.enumerate_space(spec, case.dims, w.dtype, info.ub_bytes, enforce_ub=enforce,
                                                  mode=w.mode, around=start, fixed=fixed)
    # a candidate must fit every shape case of the contract, not only the first
    for other in w.shapes[1:]:
        ok = {tune.config_key(c.config) for c in tune_space.enumerate_space(
            spec, other.dims, w.dtype, info.ub_bytes, enforce_ub=enforce, mode=w.mode, around=start, fixed=fixed)[0]}
        pruned += [c for c in feasible if tune.config_key(c.config) not in ok]
        feasible = [c for c in feasible if tune.config_key(c.config) in ok]
    start_key = tune.config_key(start)
    if start_key not in {tune.config_key(c.config) for c in feasible}:
        raise UsageError(f"the best configuration so far {start_key} is outside the UB-feasible space "
                         f"({info.chip or info.backend}, {info.ub_bytes} B UB)",
                         hint=None if info.ub_enforced else
                         "off-NPU, --allow-ub-overflow searches tiles over the model chip's UB (ASCENDOPT_CHIP)")
    distinct, alias = tune_space.dedupe(feasible, spec, [c.dims for c in w.shapes], w.dtype, w.mode, keep=start)
    if enforce:
        from ascendopt.device import backends

        distinct, by_ir = ir_ub_prune(ctx, distinct, backends.current().name, start, precheck=precheck,
                                      ascend_python=ascend_python, step=step or (lambda text: None))
        pruned = pruned + by_ir
    choices = tune_space.place_auto(tune_space.axes(spec), start,
                                    lambda name, v: alias.get(tune.config_key({**start, name: v})) == start_key)
    bound = next((r.summary["bound"] for r in reversed(records) if r.summary.get("bound")), None) \
        or f"{spec.bound}_bound"
    return AutoSpace(case, dict(start), feasible, pruned, [c.config for c in distinct], choices,
                     tune_space.order_tunables(spec, case.dims, w.dtype, bound),
                     [n for n in tune_space.probe_tunables(spec, case.dims, w.dtype) if n not in fixed], bound,
                     tune_space.preferred_direction(bound), enforce)


def _auto(ctx: RoundContext, *, hypothesis: str, budget: int | None, budget_s: float | None, confirm: int | None,
          pairs: int, step: Step, on_round, on_screened, on_space, timer, wall_clock,
          allow_ub_overflow: bool, precheck: bool = True, ascend_python: str | None = None,
          timeout: float | None = None, force: bool = False, pool=None, on_pool=None) -> dict[str, Any]:
    from ascendopt import console
    from ascendopt.device import backends
    from ascendopt.gate.stages import ClockBackend, timing_inputs

    ws, contract, spec = ctx.ws, ctx.contract, ctx.spec
    backend = backends.current()
    info = backend.info()
    w = contract.workload
    baseline = ctx.baseline_config
    if allow_ub_overflow and info.ub_enforced:
        console.warn("--allow-ub-overflow has no effect on npu: a tile over the UB does not compile there")
    plan = plan_space(ctx, info, allow_ub_overflow, precheck=precheck, ascend_python=ascend_python, step=step)
    case, start, start_key, space, bound, direction = (plan.case, plan.start, plan.start_key, plan.space, plan.bound,
                                                       plan.direction)
    feasible, pruned, enforce = plan.feasible, plan.pruned, plan.enforce
    confirm = DEFAULT_CONFIRM if confirm is None else confirm
    budget_s = DEFAULT_BUDGET_S if budget_s is None else budget_s
    cache = tune.TuneCache(ws.screen_cache_path, tune_screen.screen_key(
        spec.name, case.dims, w.dtype, w.mode, info.name, tune.source_hash(spec)))
    clocked = ClockBackend(backend, timer) if timer is not None else backend
    step(f"auto: screening {len(space)} distinct feasible configurations of {len(feasible)} ({len(pruned)} pruned "
         f"by the UB model of {info.chip or info.backend}) on {case.name}, at most {budget_s:g} s; "
         f"bound {bound} -> {'larger' if direction > 0 else 'smaller'} tiles first from the best so far")
    if on_space:
        on_space(len(space))
    inputs = timing_inputs(spec, case.dims, w.dtype, w.mode, backend.torch_device())
    deadline = wall_clock() + budget_s

    def screen(cfg: dict[str, int]) -> tune_screen.Screened:
        return tune_screen.screen_config(spec, case.dims, w.dtype, w.mode, cfg, inputs, clocked,
                                         tolerances=contract.tolerances or None)

    pool_run = None
    if pool is not None:
        run, pool_run = screen_on_pool(ctx, pool, plan, cache, budget=budget, deadline=deadline,
                                       wall_clock=wall_clock, timer=timer, timeout=timeout, backend=backend.name,
                                       on_screened=on_screened, on_pool=on_pool, step=step)
    else:
        try:
            run = tune_screen.run_screen(space, start, screen, order=plan.order, direction=direction,
                                         choices=plan.choices, probe=plan.probe, budget=budget,
                                         out_of_time=lambda: wall_clock() >= deadline, cache=cache,
                                         on_screened=on_screened)
        except ValueError as exc:  # the start itself failed its smoke check: nothing can be ranked against it
            raise CorrectnessError(f"screening: {exc}", hint="the best configuration so far fails on this device: "
                                                             "run `ascendopt gate`") from exc
    start_row = next(r for r in run.rows if tune.config_key(r.config) == start_key)
    mix = None
    if len(w.shapes) > 1:
        mix = screen_mix(ctx, run, start, clocked, info, step)
        # on a mix, a candidate's screening time is its weighted time over the cases (None: failed on one)
        by_key = {row["key"]: row for row in mix["table"]}
        ranked = sorted((r for r in run.ranked() if (by_key.get(tune.config_key(r.config)) or {}).get("weighted_ms")),
                        key=lambda r: by_key[tune.config_key(r.config)]["weighted_ms"])
        ms_of = {tune.config_key(r.config): by_key[tune.config_key(r.config)]["weighted_ms"] for r in ranked}
    else:
        ranked = run.ranked()
        ms_of = {tune.config_key(r.config): r.ms for r in ranked}
    start_ms = ms_of.get(start_key, start_row.ms)
    step(f"auto: screened {run.covered} of {run.total} ({run.stopped}); confirming up to {confirm}")
    picks = [r for r in ranked if tune.config_key(r.config) != start_key
             and ms_of[tune.config_key(r.config)] <= start_ms * (1 + CONFIRM_SLACK)][:confirm]

    recorded: list[int] = []
    over_budget: list[int] = []  # rounds whose tile overflows the UB (only with allow_ub_overflow, off-NPU)
    confirmed: list[dict[str, Any]] = []
    best = dict(start)
    command = command_line(hypothesis, {}, ["--auto"] + (["--budget", str(budget)] if budget is not None else [])
                           + (["--budget-s", f"{budget_s:g}"] if budget_s != DEFAULT_BUDGET_S else [])
                           + (["--confirm", str(confirm)] if confirm != DEFAULT_CONFIRM else [])
                           + (["--allow-ub-overflow"] if allow_ub_overflow else []),
                           pairs=pairs, timeout=timeout, force=force, precheck=precheck, ascend_python=ascend_python)
    best_ms = start_ms
    for rank, row in enumerate(picks, 1):
        cfg = row.config
        row_ms = ms_of[tune.config_key(cfg)]
        changed = {k: v for k, v in cfg.items() if best.get(k) != v}
        if not changed or row_ms > best_ms * (1 + CONFIRM_SLACK):
            continue  # a confirmed keep screened faster than this one: it cannot be kept against it
        on = "weighted over the mix " if mix else ""
        text = (f"{hypothesis} [auto: screened #{rank} of {run.covered} at {on}{row_ms:.4g} ms; "
                + ", ".join(f"{k} {best[k]}->{v}" for k, v in changed.items()) + "]")
        # each candidate sees the rounds recorded before it (its number, the best so far)
        screened = None if pool_run is None else {
            "device": row.device, "vs_start": row.vs_start, "start": dict(start),
            "pool": {k: v for k, v in pool_run.to_dict().items() if k != "anchors"}}
        outcome = record_round(ctx.reloaded(), hypothesis=text, sets=changed, pairs=pairs, reprofile=False,
                               step=step, timer=timer, plan=Plan(baseline, dict(best), dict(cfg), changed, screened),
                               precheck=precheck, ascend_python=ascend_python, command_text=command,
                               timeout=timeout)
        rec = outcome.record
        recorded.append(rec.number)
        if (rec.ub or {}).get("warning"):
            over_budget.append(rec.number)
        confirmed.append({"config": dict(cfg), "round": rec.number, "verdict": rec.verdict, "screen_ms": row.ms,
                          "ratio_vs_best": rec.ratio_vs_best})
        if on_round:
            on_round(outcome)
        if rec.verdict == "keep":
            best, best_ms = dict(cfg), row_ms
    screening = {**run.to_dict(), "budget": budget, "budget_s": budget_s, "cache": str(cache.path),
                 "start_ms": start_row.ms, "case": case.name}
    return {"screening": screening, "mix": mix, "confirmed": confirmed, "rounds": recorded, "pruned": len(pruned),
            "space": len(space), "feasible": len(feasible), "best": best, "bound": bound,
            "ub_chip": info.chip, "ub_overflow_allowed": not enforce, "over_budget_rounds": over_budget,
            "best_ub_warning": ub_use(ctx, best, info)["warning"], "finalists": [dict(r.config) for r in picks],
            **({"pool": pool_run.to_dict()} if pool_run is not None else {})}


def screen_on_pool(ctx: RoundContext, pool, plan: AutoSpace, cache, *, budget: int | None, deadline: float,
                   wall_clock: Callable[[], float], timer, timeout: float | None, backend: str, on_screened, on_pool,
                   step: Step) -> tuple[tune_screen.ScreenRun, Any]:
    """The screening of ``plan`` on the pool ``pool`` (``pool.options.PoolOptions``): cache hits first (free, as on
    one device), then the rest nearest to the start first (``tune.pooled.order``), at most ``budget`` fresh ones,
    none dispatched after ``deadline`` (``wall_clock``), each screened on one device interleaved with the start and
    ranked by that ratio (``tune.pooled``). Every device anchors on the frozen baseline first and last; one off it
    is quarantined (``pool.core``). -> ``(ScreenRun, PoolRun)``. A candidate that broke a device is cached as failed
    and raised (``DeviceFault``, exit 5), as on one device."""
    from ascendopt.errors import DeviceFault
    from ascendopt.gate.stages import frozen_baseline
    from ascendopt.pool.core import run_pool
    from ascendopt.pool.options import open_pool
    from ascendopt.tune import pooled

    contract, spec = ctx.contract, ctx.spec
    w = contract.workload
    frozen = frozen_baseline(contract, None)
    job = pooled.ScreenJob(spec, dict(plan.case.dims), w.dtype, w.mode, dict(plan.start), dict(ctx.baseline_config),
                           frozen.median_ms if frozen else None, getattr(frozen, "waited_ms", None),
                           contract.tolerances or None, timer)
    run = tune_screen.ScreenRun(total=len(plan.space))
    fresh = []
    for cfg in pooled.order(plan.space, plan.start, plan.choices):
        entry = cache.entry(cfg)
        if entry is None:
            fresh.append(cfg)
            continue
        row = tune_screen.Screened(dict(cfg), entry.get("ms"), entry.get("p20_ms"), entry.get("p80_ms"),
                                   entry.get("smoke", "pass"), entry.get("note", ""), cached=True,
                                   device=entry.get("device"))
        run.rows.append(row)
        if on_screened:
            on_screened(row, run)
    cached_start = next((r.ms for r in run.rows if tune.config_key(r.config) == plan.start_key), None)
    if budget is not None and len(fresh) > budget:
        fresh, run.stopped = fresh[:budget], "budget"
    item_s = contract.timeout("timing_s", timeout)
    step(f"auto: screening {len(fresh)} configuration(s) on {pool.describe()}, each interleaved with the start on "
         f"one device; every device re-measures the frozen baseline first and last")
    seen: list[dict[str, Any]] = []

    def on_result(result, progress) -> None:
        seen.append(result)
        if on_screened and result.get("config") is not None:
            rows = pooled.rows_of([result], cached_start or result.get("start_ms"))
            run.rows.append(rows[0])
            on_screened(rows[0], run)
            run.rows.pop()

    with open_pool(pool, job, backend) as devices:
        done = run_pool(devices, job, fresh, item_s=item_s, anchor_s=item_s,
                        total_s=max(0.0, deadline - wall_clock()) + 4 * item_s,
                        stop=lambda: wall_clock() >= deadline, on_result=on_result, on_progress=on_pool)
    results = [r for r in done.results.values() if r.get("config") is not None]
    own = next((r for r in results if tune.config_key(r["config"]) == plan.start_key), None)
    reference = cached_start if cached_start is not None else (own or {}).get("start_ms")
    for row in pooled.rows_of(results, reference):
        run.rows.append(row)
        run.fresh += 1
        cache.put(tune.Trial(row.config, row.ms, note=row.note), p20_ms=row.p20_ms, p80_ms=row.p80_ms,
                  smoke=row.smoke, device=row.device)
        if row.smoke == "device fault":
            raise DeviceFault(f"screening {tune.config_key(row.config)} on {row.device}: {row.note}",
                              hint="the configuration is cached as failed: the next --auto skips it")
    failed = [r for r in done.results.values() if r.get("config") is None]
    if failed:
        step(f"auto: {len(failed)} configuration(s) not screened: {failed[0].get('error')}")
    start_row = next((r for r in run.rows if tune.config_key(r.config) == plan.start_key), None)
    if start_row is None or start_row.ms is None:
        raise CorrectnessError(f"screening: the start {plan.start_key} "
                               + (f"failed its smoke check: {start_row.note}" if start_row else "was not screened"),
                               hint="the best configuration so far fails on this device: run `ascendopt gate`")
    run.searched = 0
    if done.stopped == "stopped":
        run.stopped = "time"
    elif not run.stopped:
        run.stopped = "covered" if len(run.rows) == run.total else "budget"
    run.seconds = done.seconds
    return run, done


# -- the mix: the fastest screened candidates on every shape case ---------------------------------------------


def screen_mix(ctx: RoundContext, run: tune_screen.ScreenRun, start: dict[str, int], backend, info,
               step: Step) -> dict[str, Any]:
    """Screen the ``MIX_TOP`` fastest candidates of ``run`` (screened on the first shape case) and the best so far
    ``start`` on every other shape case of the contract, each case with its own inputs and cache entry; then
    ``mix_winners`` over them. The shape cases of a bundled kernel carry no profiled weights: each weighs
    the same (``1 / cases``)."""
    from ascendopt.gate.stages import timing_inputs

    contract, spec = ctx.contract, ctx.spec
    w = contract.workload
    first = w.shapes[0]
    start_key = tune.config_key(start)
    top = [r for r in run.ranked() if tune.config_key(r.config) != start_key][:MIX_TOP - 1]
    rows = [next(r for r in run.rows if tune.config_key(r.config) == start_key), *top]
    times: dict[str, dict[str, float | None]] = {tune.config_key(r.config): {first.name: r.ms} for r in rows}
    for other in w.shapes[1:]:
        step(f"auto: screening the {len(rows)} fastest on {other.name} too (the mix: {len(w.shapes)} shape cases)")
        cache = tune.TuneCache(ctx.ws.screen_cache_path, tune_screen.screen_key(
            spec.name, other.dims, w.dtype, w.mode, info.name, tune.source_hash(spec)))
        inputs = timing_inputs(spec, other.dims, w.dtype, w.mode, backend.torch_device())
        for r in rows:
            entry = cache.entry(r.config)
            if entry is not None:
                ms = entry.get("ms")
            else:
                found = tune_screen.screen_config(spec, other.dims, w.dtype, w.mode, r.config, inputs, backend,
                                                  tolerances=contract.tolerances or None)
                cache.put(tune.Trial(found.config, found.ms, note=found.note), p20_ms=found.p20_ms,
                          p80_ms=found.p80_ms, smoke=found.smoke)
                ms = found.ms
            times[tune.config_key(r.config)][other.name] = ms
    weights = {c.name: 1.0 / len(w.shapes) for c in w.shapes}
    return mix_winners([(r.config, times[tune.config_key(r.config)]) for r in rows], weights, start)


def mix_winners(screened: list[tuple[dict[str, int], dict[str, float | None]]], weights: dict[str, float],
                start: dict[str, int]) -> dict[str, Any]:
    """Which configuration wins where on a mix, from screening times (pure). ``screened``: ``(config, {case: ms
    or None (screened out there)})``; ``weights``: each case's share; ``start``: the best so far.

    ``table``: per configuration ``{"config", "key", "ms": {case: ms}, "weighted_ms"}`` (``Σ w·ms``; None when it
    failed on a case), the weighted fastest first. ``overall``: the weighted fastest configuration. ``winners``:
    per case ``{"case", "weight", "config", "ms", "vs_start"}`` (the start's time there / the winner's: > 1 is
    faster), ``vs_overall`` (the overall's time there / the winner's) and ``overall_wins``. ``one_wins_all``: the
    overall is the fastest on every case; when not, the per-case winners are the evidence for a per-bucket
    dispatch (which configuration wins where, and by how much): the user's decision, never applied here."""
    cases = list(weights)
    start_key = tune.config_key(start)
    table = []
    for config, ms in screened:
        complete = all(ms.get(c) is not None for c in cases)
        table.append({"config": dict(config), "key": tune.config_key(config), "ms": {c: ms.get(c) for c in cases},
                      "weighted_ms": sum(weights[c] * ms[c] for c in cases) if complete else None})
    table.sort(key=lambda row: (row["weighted_ms"] is None, row["weighted_ms"] or 0.0))
    overall = table[0] if table and table[0]["weighted_ms"] is not None else None
    start_row = next((row for row in table if row["key"] == start_key), None)
    winners = []
    for c in cases:
        timed = [row for row in table if row["ms"][c] is not None]
        if not timed:
            continue
        win = min(timed, key=lambda row: row["ms"][c])
        ref = (start_row or {}).get("ms", {}).get(c)
        there = overall["ms"][c] if overall else None
        winners.append({"case": c, "weight": weights[c], "config": win["config"], "ms": win["ms"][c],
                        "vs_start": ref / win["ms"][c] if ref else None,
                        "vs_overall": there / win["ms"][c] if there else None})
    for x in winners:
        x["overall_wins"] = overall is not None and tune.config_key(x["config"]) == overall["key"]
    return {"cases": cases, "weights": dict(weights), "table": table,
            "overall": overall["config"] if overall else None, "winners": winners,
            "one_wins_all": bool(winners) and all(x["overall_wins"] for x in winners)}


# -- own code: @triton.autotune configs ------------------------------------------------------------


def screen_autotune(ctx: RoundContext, *, budget: int | None = None, budget_s: float | None = None,
                    step: Step | None = None,
                    on_screened: Callable[[tune_screen.Screened, tune_screen.ScreenRun], None] | None = None,
                    on_space: Callable[[int], None] | None = None, wall_clock: Callable[[], float] = time.monotonic,
                    timeout: float | None = None) -> dict[str, Any]:
    """``--auto`` on own code: screen the ``@triton.autotune`` configs of the project's kernels.

    The kernels are found in the project's tracked Python files and the exec-file (``tune.autotune``);
    a config carrying num_warps/num_stages is refused (UsageError, exit 2) with lint rule AO101's
    findings. Each config of each kernel is screened alone: the frozen workload runs in a child process
    with that config pinned (the kernel's other configs removed), its outputs compared with the kernel's
    first passing config's (``judge.equivalence``, the contract's tolerances; when ``workload()`` returns
    tensors), then ``bench.measure`` in the child. Nothing is recorded: the user freezes the fastest config
    into the launch (``pin``) and measures that edit with a plain ``optimize-round``. Screening stops at
    ``budget`` configs or ``budget_s`` seconds; results are cached by exec-file, device and the sources'
    hash. With a shape mix each config is also timed on every bucket (``inputs(seed, shape)``) and the pin is the
    weighted fastest (``mix_winners`` per kernel, in ``mixes``). Returns ``{"own_code": True, "screening",
    "sites", "pin", "mixes"}``.
    """
    import tempfile

    from ascendopt import process
    from ascendopt.contract.frozen import project_root
    from ascendopt.device import backends
    from ascendopt.tune import autotune

    step = step or (lambda text: None)
    root = project_root()
    contract = ctx.contract
    exec_rel = contract.workload.exec_file
    files = sorted({*(process.git("ls-files", "*.py", cwd=root) or "").splitlines(), exec_rel})
    sites = autotune.find_sites(root, files)
    if not sites:
        raise UsageError(f"--auto on own code screens @triton.autotune configs: none in the {len(files)} Python "
                         f"file(s) of {root}", hint="own code is otherwise optimized by editing it, then a plain "
                                                    "optimize-round")
    refused = autotune.refusals(root, sites)
    if refused:
        from ascendopt.lint.registry import get_rule

        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UsageError(f"{refused[0]}{more}", hint=get_rule(autotune.CUDA_ONLY_RULE).fix)
    screenable = [site for site in sites if site.configs]
    if not screenable:
        raise UsageError("; ".join(f"{s.path}:{s.line}: @triton.autotune of {s.kernel}: {s.why_not}" for s in sites))
    candidates = [(site, cfg) for site in screenable for cfg in site.configs]
    if on_space:
        on_space(len(candidates))
    info = backends.current().info()
    digest = tune.source_digest(root, sorted({exec_rel, *(s.path for s in sites)}))
    cache = tune.TuneCache(ctx.ws.screen_cache_path, f"screen|own|{exec_rel}|{info.name}|{digest}")
    budget_s = DEFAULT_BUDGET_S if budget_s is None else budget_s
    deadline = wall_clock() + budget_s
    load_s = contract.timeout("workload_s", timeout)
    tolerances = (contract.equivalence or {}).get("tolerances") or {}
    run = tune_screen.ScreenRun(total=len(candidates))
    # a shape mix: every config is also timed on each bucket (inputs(seed, shape)), so the mix picks the pin
    buckets = [(bucket_name(i, b), b.shape, b.weight) for i, b in enumerate(contract.shapes.buckets)] \
        if contract.shapes is not None else []
    bucket_ms: dict[str, dict[str, float | None]] = {}
    t0 = time.monotonic()
    step(f"auto: screening {len(candidates)} @triton.autotune config(s) of {len(screenable)} kernel(s), "
         f"each pinned in its own run of {exec_rel}, at most {budget_s:g} s")
    references: dict[str, Path] = {}
    run.stopped = "covered"
    with tempfile.TemporaryDirectory(prefix="ascendopt-autotune-") as tmp:
        for site, cfg in candidates:
            config = {"kernel": site.kernel, "config": cfg.index, **cfg.kwargs}
            entry = cache.entry(config)
            if entry is not None and (not buckets or entry.get("buckets") is not None or entry.get("ms") is None):
                row = tune_screen.Screened(config, entry.get("ms"), entry.get("p20_ms"), entry.get("p80_ms"),
                                           entry.get("smoke", "pass"), entry.get("note", ""), cached=True)
                bucket_ms[tune.config_key(config)] = entry.get("buckets") or {}
            elif budget is not None and run.fresh >= budget:
                run.stopped = "budget"
                break
            elif wall_clock() >= deadline:
                run.stopped = "time"
                break
            else:
                times: dict[str, float | None] = {}
                row = _screen_pinned(root, exec_rel, site, cfg, config, Path(tmp), references, tolerances,
                                     load_s=load_s, limit_s=contract.timeout("timing_s", timeout),
                                     buckets=[(name, shape) for name, shape, _ in buckets], bucket_ms=times)
                run.fresh += 1
                bucket_ms[tune.config_key(config)] = times
                cache.put(tune.Trial(config, row.ms, note=row.note), p20_ms=row.p20_ms, p80_ms=row.p80_ms,
                          smoke=row.smoke, **({"buckets": times} if buckets else {}))
            run.rows.append(row)
            if on_screened:
                on_screened(row, run)
    run.searched = len(run.rows)
    run.seconds = time.monotonic() - t0
    pins = []
    mixes = {}
    weights = {name: weight for name, _, weight in buckets}
    for site in screenable:
        ranked = [r for r in run.ranked() if r.config["kernel"] == site.kernel]
        if ranked and buckets:
            # the mix decides: the weighted fastest over the buckets is pinned, and where another config wins a
            # bucket, that is said (a per-bucket dispatch is the user's decision)
            mix = mix_winners([(r.config, bucket_ms.get(tune.config_key(r.config)) or {}) for r in ranked], weights,
                              {})
            mixes[site.kernel] = mix
            if mix["overall"] is not None:
                ranked = sorted(ranked, key=lambda r: tune.config_key(r.config) != tune.config_key(mix["overall"]))
        if ranked:
            best = ranked[0]
            pins.append({"kernel": site.kernel, "path": site.path, "line": site.line, "config": best.config["config"],
                         "kwargs": {k: v for k, v in best.config.items() if k not in ("kernel", "config")},
                         "ms": best.ms})
    return {"own_code": True, "screening": {**run.to_dict(), "budget": budget, "budget_s": budget_s,
                                            "cache": str(cache.path), "case": exec_rel, "start_ms": None},
            "sites": [s.to_dict() for s in sites], "pin": pins, "rounds": [], "mixes": mixes}


def _screen_pinned(root: Path, exec_rel: str, site, cfg, config: dict[str, Any], tmp: Path,
                   references: dict[str, Path], tolerances, *, load_s: float, limit_s: float,
                   buckets: list[tuple[str, Any]] = (), bucket_ms: dict[str, float | None] | None = None
                   ) -> tune_screen.Screened:
    """One autotune config: the workload with it pinned, its outputs vs the kernel's first passing config's,
    then ``bench.measure`` of ``workload()`` in the child; then, for each of ``buckets`` (``(name, shape)`` of
    the shape mix), ``bench.measure`` on ``inputs(seed, shape)``, its median put into ``bucket_ms[name]``."""
    from ascendopt.judge.autotune_pin import pin_env
    from ascendopt.judge.equivalence import compare_outputs, load
    from ascendopt.judge.interleave import FAILURES, workload_process

    t0 = time.monotonic()
    side = f"{site.kernel} config #{cfg.index}"
    out = tmp / f"{site.kernel}-{cfg.index}.pt"
    try:
        with workload_process(root, exec_rel, side, load_s=load_s, seed=True,
                              extra_env=pin_env(site.kernel, cfg.index, len(site.configs))) as child:
            reply = child.outputs(out, limit_s)
            if reply["outputs"]:
                ref = references.get(site.kernel)
                if ref is None:
                    references[site.kernel] = out  # the reference of the kernel's later configs
                else:
                    bad = [c for c in compare_outputs(load(ref), load(out), tolerances) if not c.passed]
                    if bad:
                        return tune_screen.Screened(config, None, smoke="fail",
                                                    note="outputs differ from the first config's: "
                                                         + "; ".join(c.message for c in bad[:2]),
                                                    seconds=time.monotonic() - t0)
            timing = child.measure(limit_s, repeats=tune_screen.SCREEN_REPEATS)
            if child.takes_shape:
                for name, shape in buckets:
                    bucket_ms[name] = child.measure(limit_s, repeats=tune_screen.SCREEN_REPEATS,
                                                    shape=shape).median_ms
    except FAILURES as exc:
        return tune_screen.Screened(config, None, smoke="raised", note=str(exc).splitlines()[0][:300],
                                    seconds=time.monotonic() - t0)
    return tune_screen.Screened(config, timing.median_ms, timing.p20_ms, timing.p80_ms,
                                smoke="pass" if reply["outputs"] else "not compared (no tensors returned)",
                                seconds=time.monotonic() - t0)
