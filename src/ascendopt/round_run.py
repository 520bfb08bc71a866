"""One optimize-round, end to end: stop check -> change -> gate -> interleaved bench -> re-profile -> record.

The CLI (``cli/optimize_round.py``) and the demo call ``run_round`` / ``run_auto``; tests call them
with a tiny contract on the CPU interpreter. Order follows the loop (optimization-loop.md §1, §10):

1. refuse to run past a stop criterion unless ``force`` (and say which one);
2. the candidate = the best configuration so far + this round's ``--set`` change (one change);
   the UB model checks its tiles (on npu an overflow is refused with the numbers);
3. the gate without its performance stage, on the candidate (red -> ``drop``; nothing is timed);
4. baseline, best and candidate timed interleaved in this process (``bench``), per shape case;
5. the candidate re-profiled with the contract's metric groups and compared with the best's profile;
6. verdict, stop decision, round record, round summary.

Own code (``workload.kind == "exec-file"``): the gate's own performance stage times the frozen
commit against the working tree; "vs best" then compares that ratio with the best round's ratio.
"""

from __future__ import annotations

import math
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ascendopt import console, round_summary, rounds, tune
from ascendopt.errors import AscendoptError, UsageError
from ascendopt.rounds import RoundRecord, StopDecision
from ascendopt.workspace import Workspace

Step = Callable[[str], None]
IMPLAUSIBLE = 5.0  # bench.IMPLAUSIBLE_RATIO: a > 5x change is measured again before it is reported


def prepare_backend() -> None:
    """Arrange the backend before the kernel registry is imported (cpu: ``TRITON_INTERPRET=1``).

    ``import ascendopt.kernels`` loads ``kernels.spec``, after which the backend's own late check
    refuses to switch the interpreter on; calling this first keeps a plain shell (no
    TRITON_INTERPRET in the environment) working.
    """
    import sys

    from ascendopt import backends

    if "ascendopt.kernels" not in sys.modules:
        backends.current().prepare_kernels()


def parse_sets(items: Sequence[str] | None) -> dict[str, str]:
    """``["BT=64", "BD=128"]`` -> ``{"BT": "64", "BD": "128"}``; values are validated by the spec."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in filter(None, (p.strip() for p in item.split(","))):
            if "=" not in part:
                raise UsageError(f"--set {part!r}: expected NAME=VALUE (e.g. --set block_rows=16)")
            name, value = (s.strip() for s in part.split("=", 1))
            if name in out:
                raise UsageError(f"--set {name} given twice: one change per round")
            out[name] = value
    return out


def max_rounds(contract) -> int | None:
    """The iteration cap frozen in the contract (``max_rounds``), if the contract carries one."""
    value = getattr(contract, "max_rounds", None)
    return int(value) if value else None


def check_stop(records: Sequence[RoundRecord], contract, force: bool) -> StopDecision:
    """The stop decision so far; raises UsageError (exit 2) past a stop unless ``force``."""
    decision = rounds.should_stop(records, max_rounds=max_rounds(contract))
    if decision.stop and not force:
        raise UsageError(f"stop criterion '{decision.criterion}' reached: {decision.reason}",
                         hint="re-assess (reprofile, report) or pass --force to run another round anyway")
    return decision


def dims_text(dims: Mapping[str, Any]) -> str:
    """Dims as the ``B=2,T=64`` string ``collect_kernel`` accepts (``seqlens=3:17``)."""
    return ",".join(f"{k}={':'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in dims.items())


# -- the candidate -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one round will run: the configurations by role and the change between best and candidate."""

    baseline: dict[str, int]
    best: dict[str, int]
    candidate: dict[str, int]
    changed: dict[str, int]

    @property
    def direction(self) -> str:
        return "+".join(sorted(self.changed)) or "none"


def plan_change(spec, contract, records: Sequence[RoundRecord], sets: Mapping[str, Any]) -> Plan:
    """Best-so-far config + ``sets``; unknown tunables / bad values raise listing the valid ones."""
    baseline = spec.config(contract.workload.config)
    best_rec = rounds.best_round(records)
    best = dict(best_rec.config) if best_rec and best_rec.config else dict(baseline)
    candidate = spec.config({**best, **sets})
    changed = {k: v for k, v in candidate.items() if best.get(k) != v}
    if not changed:
        now = ", ".join(f"{k}={v}" for k, v in best.items())
        raise UsageError(f"--set changes nothing: the best configuration so far already is {now}",
                         hint="set a different value; one change per round")
    return Plan(baseline, best, candidate, changed)


def ub_use(spec, contract, config: Mapping[str, int], info) -> dict[str, Any]:
    """UB use of ``config`` over the contract's shape cases (worst case); raises on npu if it overflows."""
    worst = None
    for case in contract.workload.shapes:
        cand = tune.ub_prediction(spec, case.dims, config, contract.workload.dtype, info.ub_bytes)
        if worst is None or (not cand.ub_safe and worst.ub_safe) or cand.ub_share > worst.ub_share:
            worst = cand
    out = {"ub_bytes": info.ub_bytes, "enforced": bool(info.ub_enforced), "safe": worst.ub_safe,
           "share": worst.ub_share, "detail": worst.ub_detail, "source": info.ub_source}
    if info.ub_enforced and not worst.ub_safe:
        raise UsageError(f"config {tune.config_key(config)} is refused by the UB model: {worst.ub_detail}",
                         hint="pick smaller tiles (`ascendopt ub` shows the largest safe tile)")
    return out


# -- the gate ----------------------------------------------------------------------------------


def gate_summary(result) -> dict[str, Any]:
    """The part of a GateResult a round record keeps (never a speed on a red gate)."""
    failed = result.failed_stage
    return {"passed": bool(result.passed), "exit_code": int(result.exit_code),
            "failed_stage": failed.name if failed else None,
            "summary": failed.summary if failed else "; ".join(
                f"{s.name}: {s.status}" for s in result.stages)}


# -- timing ------------------------------------------------------------------------------------


def interleaved_samples(fns: Mapping[str, Callable[[Any], Any]], inputs: Sequence[tuple], backend, *, pairs: int,
                        warmup: int = 5, warmup_ms: float = 25.0, min_sample_ms: float = 1.0,
                        on_pair: Callable[[], None] | None = None) -> tuple[dict[str, list[float]], int]:
    """Samples (ms per call) of every side, taken in rotating order so drift hits all sides alike.

    The sides share one batch size (calls per sample), like ``bench.compare``; order alternates
    forward/backward (ABC, CBA, ...) so no side always runs first.
    """
    from ascendopt import bench

    runners = {name: bench._Runner(fn, inputs) for name, fn in fns.items()}
    per_call = min(bench._warmup(r, backend, warmup, warmup_ms) for r in runners.values())
    calls = bench._calls_per_sample(per_call, min_sample_ms)
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for i in range(pairs):
        for name in (names if i % 2 == 0 else names[::-1]):
            samples[name].append(max(bench._sample(runners[name], backend, calls), 1e-9))
        if on_pair:
            on_pair()
    return samples, calls


def _comparison(ref: list[float], cand: list[float], calls: int) -> dict[str, Any]:
    from ascendopt import bench

    c = bench.decide(ref, cand, calls_per_sample=calls)
    return {"verdict": c.verdict, "ratio": c.ratio, "threshold_rel": c.threshold_rel, "noise_rel": c.noise_rel,
            "p_value": c.p_value, "reason": c.reason}


def _aggregate(verdicts: Sequence[str]) -> str:
    """faster if some case is faster and none slower (no trading one shape for another), slower if any is."""
    if "slower" in verdicts:
        return "slower"
    return "faster" if "faster" in verdicts else "same"


class ClockBackend:
    """The real backend (device, synchronize) timed by an injected clock in ms (deterministic tests)."""

    def __init__(self, backend, clock: Callable[[], float]):
        self.backend = backend
        self.name = backend.name
        self.clock = clock

    def torch_device(self):
        return self.backend.torch_device()

    def synchronize(self) -> None:
        self.backend.synchronize()

    def timer(self):
        clock = self.clock

        class _Timer:
            def start(self) -> None:
                self.t0 = clock()

            def stop(self) -> float:
                return clock() - self.t0

        return _Timer()


def _runner(spec, config: Mapping[str, int], mode: str) -> Callable[[Any], Any]:
    """``inputs -> spec.run(inputs, config, mode)`` with ``config`` bound now (not at call time)."""
    return lambda inputs: spec.run(inputs, dict(config), mode)


def measure_plan(spec, contract, plan: Plan, *, pairs: int, backend=None, step: Step | None = None,
                 _recheck: bool = True) -> dict[str, Any]:
    """Time baseline, best (if it differs) and candidate interleaved, per shape case -> ``timing`` dict."""
    from ascendopt import backends, bench
    from ascendopt.gate import timing_inputs

    backend = backend or backends.current()
    w = contract.workload
    sides = {"baseline": plan.baseline, "candidate": plan.candidate}
    if plan.best != plan.baseline:
        sides = {"baseline": plan.baseline, "best": plan.best, "candidate": plan.candidate}
    cases = []
    for case in w.shapes:
        if step:
            step(f"timing {case.name}: {', '.join(sides)} interleaved, {pairs} rounds")
        inputs = timing_inputs(spec, case.dims, w.dtype, w.mode, backend.torch_device())
        fns = {name: _runner(spec, cfg, w.mode) for name, cfg in sides.items()}
        samples, calls = interleaved_samples(fns, inputs, backend, pairs=pairs)
        entry: dict[str, Any] = {"case": case.name}
        for name in ("baseline", "best", "candidate"):
            src = samples.get(name) or samples["baseline"]  # best == baseline until a round is kept
            entry[name] = bench.summarize(src, calls).to_dict()
        entry["vs_baseline"] = _comparison(samples["baseline"], samples["candidate"], calls)
        entry["vs_best"] = _comparison(samples.get("best") or samples["baseline"], samples["candidate"], calls)
        entry["samples_ms"] = {k: [round(x, 7) for x in v] for k, v in samples.items()}
        cases.append(entry)
    ratio_base = rounds.geomean([c["vs_baseline"]["ratio"] for c in cases])
    if _recheck and (ratio_base > IMPLAUSIBLE or ratio_base < 1 / IMPLAUSIBLE):
        if step:
            step(f"implausible {1 / ratio_base:.2f}x vs baseline: measuring again")
        again = measure_plan(spec, contract, plan, pairs=pairs, backend=backend, step=step, _recheck=False)
        again["rechecked"] = True
        return again
    return {"cases": cases, "ratio_vs_baseline": ratio_base,
            "ratio_vs_best": rounds.geomean([c["vs_best"]["ratio"] for c in cases]),
            "vs_baseline": _aggregate([c["vs_baseline"]["verdict"] for c in cases]),
            "vs_best": _aggregate([c["vs_best"]["verdict"] for c in cases])}


def timing_from_gate(result, records: Sequence[RoundRecord]) -> dict[str, Any]:
    """Own code: the gate's frozen-commit vs working-tree comparisons as a round ``timing`` dict."""
    perf = next(s for s in result.stages if s.name == "performance")
    cases = []
    for c in perf.data.get("comparisons", []):
        cmp = {k: c[k] for k in ("verdict", "ratio", "threshold_rel", "noise_rel", "p_value", "reason")}
        cases.append({"case": c["case"], "baseline": c["baseline"], "best": c["baseline"], "candidate": c["candidate"],
                      "vs_baseline": cmp, "vs_best": dict(cmp)})
    ratio_base = rounds.geomean([c["vs_baseline"]["ratio"] for c in cases])
    best = rounds.best_round(records)
    best_ratio = best.timing["ratio_vs_baseline"] if best else 1.0
    # Separate runs do not compose exactly; the best's ratio vs the same frozen baseline is the fairest
    # reference there is without a second worktree. A gain must clear this round's noise band.
    threshold = max(c["vs_baseline"]["threshold_rel"] for c in cases)
    ratio_best = ratio_base / best_ratio
    vs_best = "faster" if (ratio_best < 1 - threshold and _aggregate([c["vs_baseline"]["verdict"] for c in cases])
                           == "faster") else ("slower" if ratio_best > 1 + threshold else "same")
    return {"cases": cases, "ratio_vs_baseline": ratio_base, "ratio_vs_best": ratio_best,
            "vs_baseline": _aggregate([c["vs_baseline"]["verdict"] for c in cases]), "vs_best": vs_best}


# -- profiles ----------------------------------------------------------------------------------


def profile_kernel_config(ws: Workspace, contract, config: Mapping[str, int], name: str) -> list[str]:
    """Collect the first shape case with ``config`` under each of the contract's metric groups."""
    from ascendopt.collect import collect_kernel

    w = contract.workload
    case = w.shapes[0]
    paths = collect_kernel(w.kernel, shape=dims_text(case.dims), dtype=w.dtype, mode=w.mode, config=dict(config),
                           metric_groups=list(contract.metric_groups), out_dir=ws.profiles_dir, name=name)
    return [str(p) for p in paths]


def profile_own_code(ws: Workspace, contract, name: str) -> list[str]:
    """Profile the working tree's ``workload()`` once per metric group."""
    from ascendopt.collect import profile_callable
    from ascendopt.frozen import project_root
    from ascendopt.interleave import load_workload

    fn = load_workload(project_root() / contract.workload.exec_file)
    return [str(profile_callable(fn, name=name, out_dir=ws.profiles_dir, aic_metrics=group))
            for group in contract.metric_groups]


def analyze_paths(paths: Sequence[str] | None, kernel_filter: str | None = None) -> dict[str, Any] | None:
    """``analysis.analyze`` of the merged profile folders (None if there are none)."""
    if not paths:
        return None
    from ascendopt.analysis import analyze
    from ascendopt.traces import load_profiles

    return analyze(load_profiles([Path(p) for p in paths]), kernel_filter=kernel_filter)


def collect_profiles(ws: Workspace, contract, config: Mapping[str, int] | None, name: str) -> list[str]:
    if contract.is_kernel:
        return profile_kernel_config(ws, contract, config or {}, name)
    return profile_own_code(ws, contract, name)


def reference_profiles(ws: Workspace, contract, records: Sequence[RoundRecord], plan_best: Mapping[str, int] | None,
                       step: Step | None = None) -> list[str]:
    """The best-so-far profile: the best round's, else the baseline's (collected once, then reused)."""
    best = rounds.best_round(records)
    if best and best.profiles:
        return list(best.profiles)
    for r in records:
        if r.profiles_before:
            return list(r.profiles_before)
    if not contract.is_kernel:
        # Own code: the working tree already holds the candidate, so only a profile collected
        # before the edit (``ascendopt collect`` into the workspace) can stand for "before".
        from ascendopt.reprofile import newest_profiles

        return newest_profiles(ws)
    if step:
        step("profiling the baseline configuration (first round)")
    return collect_profiles(ws, contract, plan_best, "baseline")


def _kernel_names(contract) -> list[str]:
    return list(contract.expected_kernels) or ([contract.workload.kernel_filter] if contract.workload.kernel_filter
                                               else [])


# -- the round ---------------------------------------------------------------------------------


@dataclass
class RoundOutcome:
    record: RoundRecord
    path: Path
    exit_code: int  # 0, or the gate's exit code on a drop


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _command(hypothesis: str, sets: Mapping[str, Any], extra: Sequence[str] = ()) -> str:
    argv = ["ascendopt", "optimize-round", "--hypothesis", hypothesis]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    return " ".join(shlex.quote(a) for a in [*argv, *extra])


def run_round(ws: Workspace, *, hypothesis: str, sets: Mapping[str, Any] | None = None, force: bool = False,
              pairs: int = 30, target_metric: str | None = None, reprofile: bool = True,
              before_profiles: Sequence[str] | None = None, step: Step | None = None,
              timer: Callable[[], float] | None = None, _plan: Plan | None = None, _command_text: str | None = None) -> RoundOutcome:
    """Run and record one round. Returns the record, its path and the exit code for the CLI.

    ``before_profiles``: the best-so-far profile when the caller has one (else found or collected).
    ``reprofile=False`` skips both profiles (``--auto`` candidates: timing decides). ``timer``: a
    clock in ms replacing the device timer (tests, like ``gate.run_gate``).
    """
    from ascendopt import backends
    from ascendopt import contract as contract_mod
    from ascendopt.gate import run_gate

    step = step or (lambda text: None)
    if not hypothesis or not hypothesis.strip():
        raise UsageError("--hypothesis: must say what this round changes and why (one line)")
    sets = dict(sets or {})
    with ws.lock():
        contract = contract_mod.load(ws)
        records = rounds.load_rounds(ws)
        check_stop(records, contract, force)
        backend = backends.current()
        info = backend.info()
        facts = backends.describe(backend)
        number = rounds.next_number(ws)
        spec = plan = ub = None
        if contract.is_kernel:
            from ascendopt import kernels

            spec = kernels.get(contract.workload.kernel)
            plan = _plan or plan_change(spec, contract, records, sets)
            ub = ub_use(spec, contract, plan.candidate, info)
            change = {"kind": "tunables", "set": dict(plan.changed), "config": dict(plan.candidate)}
            direction = plan.direction
        else:
            if sets:
                raise UsageError("--set applies to bundled kernels only; for own code edit the working tree")
            change = {"kind": "code", "commit": _git("rev-parse", "HEAD") or None,
                      "diff_stat": _git("diff", "--stat", "HEAD")[-2000:]}
            direction = "code"
        command = _command_text or _command(hypothesis, sets)

        before_paths: list[str] = []
        before_report = None
        if reprofile:
            try:
                before_paths = list(before_profiles or []) or reference_profiles(
                    ws, contract, records, plan.best if plan else None, step)
                before_report = analyze_paths(before_paths)
            except AscendoptError as exc:
                console.warn(f"profile of the best so far unavailable: {exc}")
        bound_before = (round_summary.target_kernel(before_report, _kernel_names(contract)) or {}).get("bound")
        target = round_summary.resolve_target_metric(target_metric, hypothesis, bound_before)

        step(f"round {number}: gate on the candidate")
        gate = run_gate(ws, skip_perf=contract.is_kernel, config_override=plan.candidate if plan else None)
        gsum = gate_summary(gate)
        timing = None
        if gate.passed:
            if contract.is_kernel:
                clocked = ClockBackend(backend, timer) if timer is not None else backend
                timing = measure_plan(spec, contract, plan, pairs=pairs, backend=clocked, step=step)
            else:
                timing = timing_from_gate(gate, records)

        after_paths: list[str] = []
        after_report = None
        if gate.passed and reprofile:
            step(f"round {number}: re-profiling with {', '.join(contract.metric_groups)}")
            try:
                after_paths = collect_profiles(ws, contract, plan.candidate if plan else None, f"round-{number:04d}")
                after_report = analyze_paths(after_paths)
            except AscendoptError as exc:
                console.warn(f"re-profile failed: {exc}")
        floor = None
        if timing:
            tk = round_summary.target_kernel(after_report, _kernel_names(contract))
            cost = spec.cost(contract.workload.shapes[0].dims, contract.workload.dtype, contract.workload.mode) \
                if spec else None
            floor = rounds.detect_floor(device_us=(tk or {}).get("avg_us"),
                                        latency_us=timing["cases"][0]["candidate"]["median_ms"] * 1e3,
                                        bytes_moved=cost.bytes if cost else None, hbm_gbs=info.hbm_gbs,
                                        backend=backend.name)
        verdict = rounds.verdict(gate.passed, timing["vs_best"] if timing else None, floor)
        metrics = {}
        if before_report and after_report:
            from ascendopt.analysis import compare

            metrics = compare(before_report, after_report)
        draft = RoundRecord(number=number, hypothesis=hypothesis.strip(), direction=direction, change=change,
                            gate=gsum, verdict=verdict, stop=StopDecision(False, None, ""),
                            environment=rounds.environment_line(facts), timing=timing, metrics=metrics, ub=ub,
                            target_metric=target, floor=floor if verdict != "drop" else None,
                            profiles=after_paths, profiles_before=before_paths, command=command)
        stop = rounds.should_stop([*records, draft], max_rounds=max_rounds(contract))
        speed = None
        if timing:
            speed = {"candidate_ms": timing["cases"][0]["candidate"]["median_ms"],
                     "ratio_vs_best": timing["ratio_vs_best"], "ratio_vs_baseline": timing["ratio_vs_baseline"]}
        summary = round_summary.build(kernel_names=_kernel_names(contract), before=before_report, after=after_report,
                                      verdict=verdict, another_round=not stop.stop, stop_reason=stop.reason,
                                      target_metric=target, ub=ub, speed=speed)
        record = replace(draft, stop=stop, summary=summary)
        path = rounds.save_round(ws, record)
    return RoundOutcome(rounds.load_rounds(ws)[-1], path, 0 if gate.passed else int(gate.exit_code))


def run_auto(ws: Workspace, *, hypothesis: str, budget: int | None = None, force: bool = False, pairs: int = 20,
             step: Step | None = None, on_round: Callable[[RoundOutcome], None] | None = None,
             timer: Callable[[], float] | None = None) -> dict[str, Any]:
    """``--auto``: search the bundled kernel's tunables; each fresh candidate is a recorded round.

    Returns ``{"search": SearchResult.to_dict(), "rounds": [numbers], "pruned": n, "best": config}``.
    """
    from ascendopt import backends, kernels
    from ascendopt import contract as contract_mod

    step = step or (lambda text: None)
    contract = contract_mod.load(ws)
    if not contract.is_kernel:
        raise UsageError("--auto searches a bundled kernel's tunables; own code is optimized by editing it")
    records = rounds.load_rounds(ws)
    check_stop(records, contract, force)
    spec = kernels.get(contract.workload.kernel)
    backend = backends.current()
    info = backend.info()
    w = contract.workload
    case = w.shapes[0]
    feasible, pruned = tune.enumerate_space(spec, case.dims, w.dtype, info.ub_bytes, enforce_ub=info.ub_enforced)
    # a candidate must fit every shape case of the contract, not only the first
    for other in w.shapes[1:]:
        ok = {tune.config_key(c.config) for c in tune.enumerate_space(spec, other.dims, w.dtype, info.ub_bytes,
                                                                      enforce_ub=info.ub_enforced)[0]}
        pruned += [c for c in feasible if tune.config_key(c.config) not in ok]
        feasible = [c for c in feasible if tune.config_key(c.config) in ok]
    space = [c.config for c in feasible]
    baseline = spec.config(w.config)
    best_rec = rounds.best_round(records)
    start = dict(best_rec.config) if best_rec and best_rec.config else dict(baseline)
    if tune.config_key(start) not in {tune.config_key(c) for c in space}:
        raise UsageError(f"the best configuration so far {tune.config_key(start)} is outside the UB-feasible space")
    budget = budget if budget is not None else tune.default_budget(len(space))
    if budget < 1:
        raise UsageError(f"--budget {budget}: must be >= 1 evaluation")
    bound = None
    for r in reversed(records):
        if r.summary.get("bound"):
            bound = r.summary["bound"]
            break
    key = tune.cache_key(spec.name, case.dims, w.dtype, w.mode, info.name, tune.source_hash(spec))
    cache = tune.TuneCache(ws.root / "tune-cache.json", key)
    step(f"auto: {len(space)} feasible configurations ({len(pruned)} pruned by the UB model), budget {budget}, "
         f"bound {bound or 'unknown'} -> {'larger' if tune.preferred_direction(bound) > 0 else 'smaller'} tiles first")
    recorded: list[int] = []
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
        outcome = run_round(ws, hypothesis=text, sets=changed, force=True, pairs=pairs, reprofile=False,
                            step=step, timer=timer, _plan=plan,
                            _command_text=_command(hypothesis, {}, ["--auto", "--budget", str(budget)]))
        recorded.append(outcome.record.number)
        if on_round:
            on_round(outcome)
        rec = outcome.record
        if rec.verdict == "drop":
            return tune.Trial(cfg, None, note=f"gate red: {rec.gate.get('failed_stage')}")
        return tune.Trial(cfg, rec.candidate_ms, better=rec.verdict == "keep", note=rec.verdict)

    result = tune.search(space, start, evaluate, order=tune.order_tunables(spec, case.dims, w.dtype, bound),
                         direction=tune.preferred_direction(bound), budget=budget, cache=cache,
                         choices=tune.axes(spec), start_trial=tune.Trial(start, start_ms, note="start"))
    if result.best.cached and result.best.config != start:
        # A cache hit is a number from an earlier session; separate runs do not compose, so the
        # winner is measured again, interleaved with the best so far, before anything is claimed.
        step("auto: confirming the cached best against the best so far")
        evaluate(dict(result.best.config), dict(start))
    return {"search": result.to_dict(), "rounds": recorded, "pruned": len(pruned), "space": len(space),
            "best": result.best.config, "budget": budget, "cache": str(cache.path)}


def format_config(config: Mapping[str, int] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (config or {}).items()) or "-"


def speedup_text(ratio: float | None) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) or ratio <= 0 else f"{1 / ratio:.3f}x"
