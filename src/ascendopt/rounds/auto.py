"""``optimize-round --auto``: screen a bundled kernel's tunables fast, confirm the best with the gate.

Two stages:

1. *screening* (``tune.screen``): every candidate compiled once, smoke-checked on the contract's first
   shape case (NaN-poisoned outputs vs the oracle) and timed briefly with the bench core (device time,
   L2-rotated inputs), in the order the evidence suggests (``tune.search``: flags and layouts probed,
   then coordinate descent from the best so far, its auto tiles placed at their resolved value so the
   first moves are neighbours, larger tiles first unless the class is core under-use), then the rest of
   the space nearest first, until it is covered, ``budget`` screenings or the ``budget_s`` deadline.
   Results are cached by kernel, shape, dtype, mode, device and source hash (``screen-cache.json``).
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
             timeout: float | None = None, precheck: bool = True, ascend_python: str | None = None) -> dict[str, Any]:
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

    Returns ``{"screening": ScreenRun.to_dict() + {"budget", "budget_s", "cache", "start_ms"},
    "confirmed": [{"config", "round", "verdict", "screen_ms"}], "rounds": [numbers], "pruned": n,
    "space": n, "feasible": n, "best": config, "ub_chip", "ub_overflow_allowed", "over_budget_rounds",
    "best_ub_warning"}``. The workspace stays locked for the whole run: its rounds are one sequence.
    """
    check_auto_options(budget, budget_s, confirm)
    with ws.lock():
        ctx = RoundContext.load(ws)
        if not ctx.is_kernel:
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
                     timeout=timeout, force=force)


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
          timeout: float | None = None, force: bool = False) -> dict[str, Any]:
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

    try:
        run = tune_screen.run_screen(space, start, screen, order=plan.order, direction=direction, choices=plan.choices,
                                     probe=plan.probe, budget=budget,
                                     out_of_time=lambda: wall_clock() >= deadline, cache=cache,
                                     on_screened=on_screened)
    except ValueError as exc:  # the start itself failed its smoke check: nothing can be ranked against it
        raise CorrectnessError(f"screening: {exc}",
                               hint="the best configuration so far fails on this device: run `ascendopt gate`") from exc
    start_row = next(r for r in run.rows if tune.config_key(r.config) == start_key)
    step(f"auto: screened {run.covered} of {run.total} ({run.stopped}); confirming up to {confirm}")
    picks = [r for r in run.ranked() if tune.config_key(r.config) != start_key
             and r.ms <= start_row.ms * (1 + CONFIRM_SLACK)][:confirm]

    recorded: list[int] = []
    over_budget: list[int] = []  # rounds whose tile overflows the UB (only with allow_ub_overflow, off-NPU)
    confirmed: list[dict[str, Any]] = []
    best = dict(start)
    command = command_line(hypothesis, {}, ["--auto"] + (["--budget", str(budget)] if budget is not None else [])
                           + (["--budget-s", f"{budget_s:g}"] if budget_s != DEFAULT_BUDGET_S else [])
                           + (["--confirm", str(confirm)] if confirm != DEFAULT_CONFIRM else [])
                           + (["--allow-ub-overflow"] if allow_ub_overflow else []),
                           pairs=pairs, timeout=timeout, force=force, precheck=precheck, ascend_python=ascend_python)
    best_ms = start_row.ms
    for rank, row in enumerate(picks, 1):
        cfg = row.config
        changed = {k: v for k, v in cfg.items() if best.get(k) != v}
        if not changed or row.ms > best_ms * (1 + CONFIRM_SLACK):
            continue  # a confirmed keep screened faster than this one: it cannot be kept against it
        text = (f"{hypothesis} [auto: screened #{rank} of {run.covered} at {row.ms:.4g} ms; "
                + ", ".join(f"{k} {best[k]}->{v}" for k, v in changed.items()) + "]")
        # each candidate sees the rounds recorded before it (its number, the best so far)
        outcome = record_round(ctx.reloaded(), hypothesis=text, sets=changed, pairs=pairs, reprofile=False,
                               step=step, timer=timer, plan=Plan(baseline, dict(best), dict(cfg), changed),
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
            best, best_ms = dict(cfg), row.ms
    screening = {**run.to_dict(), "budget": budget, "budget_s": budget_s, "cache": str(cache.path),
                 "start_ms": start_row.ms, "case": case.name}
    return {"screening": screening, "confirmed": confirmed, "rounds": recorded, "pruned": len(pruned),
            "space": len(space), "feasible": len(feasible), "best": best, "bound": bound,
            "ub_chip": info.chip, "ub_overflow_allowed": not enforce, "over_budget_rounds": over_budget,
            "best_ub_warning": ub_use(ctx, best, info)["warning"]}


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
    first passing config's (``gate.equivalence``, the contract's tolerances; when ``workload()`` returns
    tensors), then ``bench.measure`` in the child. Nothing is recorded: the user freezes the fastest config
    into the launch (``pin``) and measures that edit with a plain ``optimize-round``. Screening stops at
    ``budget`` configs or ``budget_s`` seconds; results are cached by exec-file, device and the sources'
    hash. Returns ``{"own_code": True, "screening", "sites", "pin"}``.
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
    t0 = time.monotonic()
    step(f"auto: screening {len(candidates)} @triton.autotune config(s) of {len(screenable)} kernel(s), "
         f"each pinned in its own run of {exec_rel}, at most {budget_s:g} s")
    references: dict[str, Path] = {}
    run.stopped = "covered"
    with tempfile.TemporaryDirectory(prefix="ascendopt-autotune-") as tmp:
        for site, cfg in candidates:
            config = {"kernel": site.kernel, "config": cfg.index, **cfg.kwargs}
            entry = cache.entry(config)
            if entry is not None:
                row = tune_screen.Screened(config, entry.get("ms"), entry.get("p20_ms"), entry.get("p80_ms"),
                                           entry.get("smoke", "pass"), entry.get("note", ""), cached=True)
            elif budget is not None and run.fresh >= budget:
                run.stopped = "budget"
                break
            elif wall_clock() >= deadline:
                run.stopped = "time"
                break
            else:
                row = _screen_pinned(root, exec_rel, site, cfg, config, Path(tmp), references, tolerances,
                                     load_s=load_s, limit_s=contract.timeout("timing_s", timeout))
                run.fresh += 1
                cache.put(tune.Trial(config, row.ms, note=row.note), p20_ms=row.p20_ms, p80_ms=row.p80_ms,
                          smoke=row.smoke)
            run.rows.append(row)
            if on_screened:
                on_screened(row, run)
    run.searched = len(run.rows)
    run.seconds = time.monotonic() - t0
    pins = []
    for site in screenable:
        ranked = [r for r in run.ranked() if r.config["kernel"] == site.kernel]
        if ranked:
            best = ranked[0]
            pins.append({"kernel": site.kernel, "path": site.path, "line": site.line, "config": best.config["config"],
                         "kwargs": {k: v for k, v in best.config.items() if k not in ("kernel", "config")},
                         "ms": best.ms})
    return {"own_code": True, "screening": {**run.to_dict(), "budget": budget, "budget_s": budget_s,
                                            "cache": str(cache.path), "case": exec_rel, "start_ms": None},
            "sites": [s.to_dict() for s in sites], "pin": pins, "rounds": []}


def _screen_pinned(root: Path, exec_rel: str, site, cfg, config: dict[str, Any], tmp: Path,
                   references: dict[str, Path], tolerances, *, load_s: float, limit_s: float
                   ) -> tune_screen.Screened:
    """One autotune config: the workload with it pinned, its outputs vs the kernel's first passing config's,
    then ``bench.measure`` of ``workload()`` in the child."""
    from ascendopt.gate.equivalence import compare_outputs, load
    from ascendopt.gate.interleave import FAILURES, workload_process
    from ascendopt.tune import autotune

    t0 = time.monotonic()
    side = f"{site.kernel} config #{cfg.index}"
    out = tmp / f"{site.kernel}-{cfg.index}.pt"
    try:
        with workload_process(root, exec_rel, side, load_s=load_s, seed=True,
                              extra_env=autotune.pin_env(site.kernel, cfg.index, len(site.configs))) as child:
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
    except FAILURES as exc:
        return tune_screen.Screened(config, None, smoke="raised", note=str(exc).splitlines()[0][:300],
                                    seconds=time.monotonic() - t0)
    return tune_screen.Screened(config, timing.median_ms, timing.p20_ms, timing.p80_ms,
                                smoke="pass" if reply["outputs"] else "not compared (no tensors returned)",
                                seconds=time.monotonic() - t0)
