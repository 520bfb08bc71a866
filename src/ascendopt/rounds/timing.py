"""Timing of one round: baseline, best so far and candidate measured interleaved.

Samples are taken in a rotating order (ABC, CBA, ...) with one batch size for all sides, like
``bench.compare`` does for two; each side's samples are kept in the round record so the report can
give min/p10/p90. Verdicts come from ``bench.decide`` on the paired samples, so ``vs_best`` and
``ratio_vs_best`` are measured, never derived from another round's numbers. Bundled kernels run in
this process (three configurations); own code in three child processes (``measure_own``): the frozen
commit and the best kept round's snapshot, each read from git into a verified folder, and the working
tree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt.rounds import records as rounds

Step = Callable[[str], None]


def interleaved_samples(fns: Mapping[str, Callable[[Any], Any]], inputs: Sequence[tuple], backend, *, pairs: int,
                        max_pairs: int | None = None, warmup: int = 5, warmup_ms: float = 25.0,
                        min_sample_ms: float = 1.0, on_pair: Callable[[], None] | None = None
                        ) -> tuple[dict[str, list[float]], int]:
    """Samples (ms per call) of every side, by name, and the calls per sample they share.

    ``bench.Interleaved`` takes them: one batch size for all sides, order alternating
    forward/backward (ABC, CBA, ...) so no side always runs first; ``take_decided`` says how many.
    """
    from ascendopt.judge import bench

    names = list(fns)
    taker = bench.Interleaved([bench.Sampler(fns[n], inputs, backend) for n in names], warmup=warmup,
                              warmup_ms=warmup_ms, min_sample_ms=min_sample_ms)
    return take_decided(taker, names, pairs, max_pairs, on_pair), taker.calls


def take_decided(taker, names: Sequence[str], pairs: int, max_pairs: int | None = None,
                 on_pair: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """``pairs`` rounds of samples from ``taker`` (a ``bench.Interleaved`` over the sides ``names``), by
    name. As in ``bench.compare``, while the ``candidate`` vs ``baseline`` or ``best`` verdict is
    undecided only because the noise band is wide (``bench.undecided``), ``pairs`` more rounds are
    taken, up to ``max_pairs`` in all (default ``3 * pairs``)."""
    from ascendopt.judge import bench

    limit = max(pairs, max_pairs if max_pairs is not None else 3 * pairs)
    while True:
        samples = dict(zip(names, taker.take(pairs, on_pair), strict=True))
        refs = [samples[n] for n in ("baseline", "best") if n in samples]
        taken = len(samples[names[0]])
        if "candidate" not in samples or taken + pairs > limit or not any(
                bench.undecided(bench.decide(ref, samples["candidate"], calls_per_sample=taker.calls))
                for ref in refs):
            return samples
        # said, so that a sample count above --pairs in the record reads as what it is
        from ascendopt import console

        console.status(f"the noise band is too wide to decide after {taken} pairs: {pairs} more (at most {limit} "
                       f"in all, {max(pairs, 1)} at a time: --pairs)")


def _comparison(ref: list[float], cand: list[float], calls: int) -> dict[str, Any]:
    from ascendopt.judge import bench

    c = bench.decide(ref, cand, calls_per_sample=calls)
    return {"verdict": c.verdict, "ratio": c.ratio, "threshold_rel": c.threshold_rel, "noise_rel": c.noise_rel,
            "p_value": c.p_value, "reason": c.reason}


def _aggregate(verdicts: Sequence[str]) -> str:
    """slower if any case is; else inconclusive if any case could not tell (its noise band was wider
    than ``bench.DecisionRule.max_band``); else faster if some case is faster (no trading one shape
    for another); else same."""
    if "slower" in verdicts:
        return "slower"
    if "inconclusive" in verdicts:
        return "inconclusive"
    return "faster" if "faster" in verdicts else "same"


def _runner(spec, config: Mapping[str, int], mode: str) -> Callable[[Any], Any]:
    """``inputs -> spec.run(inputs, config, mode)`` with ``config`` bound now (not at call time)."""
    return lambda inputs: spec.run(inputs, dict(config), mode)


def case_timing(case: str, samples: Mapping[str, list[float]], calls: int, *, best_timed: bool = True
                ) -> dict[str, Any]:
    """One case of a round's ``timing``: each side's summary, ``vs_baseline``/``vs_best`` decided on the
    paired samples, the samples themselves. Without ``best`` samples the best is the baseline (no
    round kept yet), unless ``best_timed`` is False: a best exists but could not be timed, and its side
    and ``vs_best`` are None."""
    from ascendopt.judge import bench

    best = samples.get("best") or (samples["baseline"] if best_timed else None)
    entry: dict[str, Any] = {"case": case}
    for name, src in (("baseline", samples["baseline"]), ("best", best), ("candidate", samples["candidate"])):
        entry[name] = bench.summarize(src, calls).to_dict() if src is not None else None
    entry["vs_baseline"] = _comparison(samples["baseline"], samples["candidate"], calls)
    entry["vs_best"] = _comparison(best, samples["candidate"], calls) if best is not None else None
    entry["samples_ms"] = {k: [round(x, 7) for x in v] for k, v in samples.items()}
    return entry


def round_timing(cases: Sequence[dict[str, Any]], best: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A round's ``timing`` from its cases (``case_timing``): geomean ratios and aggregate verdicts;
    ``best``: which state the best side is (own code, ``measure_own``). A best that was not timed
    makes ``vs_best`` "inconclusive" and ``ratio_vs_best`` None: nothing can be kept on it."""
    timed = all(c["vs_best"] is not None for c in cases)
    result: dict[str, Any] = {
        "cases": list(cases), "ratio_vs_baseline": rounds.geomean([c["vs_baseline"]["ratio"] for c in cases]),
        "ratio_vs_best": rounds.geomean([c["vs_best"]["ratio"] for c in cases]) if timed else None,
        "vs_baseline": _aggregate([c["vs_baseline"]["verdict"] for c in cases]),
        "vs_best": _aggregate([c["vs_best"]["verdict"] for c in cases]) if timed else "inconclusive"}
    if best is not None:
        result["best"] = dict(best)
    return result


class _Side:
    """A side's median, as ``judge.weighted`` reads it off a ``bench.Comparison``."""

    def __init__(self, median_ms: float):
        self.median_ms = median_ms


class _Versus:
    """A round case's comparison with one reference (``case_timing``'s ``vs_baseline`` / ``vs_best`` and the two
    sides' summaries) in the shape ``judge.weighted`` reads: ``baseline`` is the reference."""

    def __init__(self, entry: Mapping[str, Any], reference: str):
        versus = entry[f"vs_{reference}"]
        self.baseline = _Side(entry[reference]["median_ms"])
        self.candidate = _Side(entry["candidate"]["median_ms"])
        self.ratio, self.threshold_rel = versus["ratio"], versus["threshold_rel"]
        self.verdict, self.reason = versus["verdict"], versus.get("reason", "")


def weigh_round(cases: Sequence[Mapping[str, Any]], weights: Mapping[str, float],
                shapes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A round over a shape mix (its ``cases`` are the timed buckets, ``weights[case]`` their shares) judged as the
    gate judges it (``judge.weighted.weigh``), against the baseline and against the best so far: ``{"vs_baseline",
    "vs_best"}`` (``WeightedVerdict.to_dict``; ``vs_best`` None when the best was not timed) and ``buckets`` /
    ``buckets_vs_best``, the per-bucket tables (``judge.weighted.bucket_rows``) against each. Pure."""
    from ascendopt.judge.weighted import BucketTiming, bucket_rows, weigh

    out: dict[str, Any] = {}
    for reference in ("baseline", "best"):
        if any(c.get(f"vs_{reference}") is None for c in cases):
            out[f"vs_{reference}"], out[f"buckets_vs_{reference}"] = None, []
            continue
        timings = [BucketTiming(c["case"], weights[c["case"]], _Versus(c, reference)) for c in cases]
        out[f"vs_{reference}"] = weigh(timings).to_dict()
        out[f"buckets_vs_{reference}"] = bucket_rows(timings, shapes)
    out["buckets"] = out.pop("buckets_vs_baseline")
    return out


def apply_weighted(result: dict[str, Any], weighted: Mapping[str, Any]) -> dict[str, Any]:
    """A round's ``timing`` over a shape mix decided by its weighted verdicts (``weigh_round``): ``vs_best`` is
    "faster" (a keep) only when the weighted speedup over the best is beyond its band and no bucket of weight
    >= ``judge.weighted.FLOOR_WEIGHT`` broke its floor (then it is "slower", naming the bucket in
    ``weighted["vs_best"]["reason"]``); the ratios are the weighted ones. A best that was not timed stays
    "inconclusive"."""
    result = {**result, "weighted": dict(weighted)}
    for reference in ("baseline", "best"):
        found = weighted.get(f"vs_{reference}")
        if found is not None:
            result[f"vs_{reference}"], result[f"ratio_vs_{reference}"] = found["verdict"], found["ratio"]
    return result


def reading(timing: Mapping[str, Any]) -> Any:
    """A timing's aggregate as ``rounds.decide.Reading`` (the decision's input)."""
    from ascendopt.rounds.decide import Reading

    return Reading(timing["vs_baseline"], timing["vs_best"], timing.get("ratio_vs_baseline"),
                   timing.get("ratio_vs_best"), rounds.inconclusive_why(timing))


def _reading_dict(r) -> dict[str, Any]:
    return {"vs_baseline": r.vs_baseline, "vs_best": r.vs_best, "ratio_vs_baseline": r.ratio_vs_baseline,
            "ratio_vs_best": r.ratio_vs_best, "why_inconclusive": r.why_inconclusive}


def _rechecked(once: Callable[[], dict[str, Any]], step: Step | None) -> dict[str, Any]:
    """``once()``, and by bench's rule for an implausible ratio vs the baseline: measured again (and a third
    time when the re-check could not tell a decisive first, ``rounds.decide.needs_third``), combined by
    ``rounds.decide.combine`` (reproduced | decided | not reproduced). The last measurement's timing is
    returned with ``first`` (and ``second`` after a third measurement: the aggregates of the earlier ones,
    kept so the record shows what was re-checked), ``recheck`` (one line), ``recheck_outcome`` and
    ``recheck_measured`` (the last measurement's own verdicts before combining); its ``vs_baseline``/``vs_best``
    are the combined ones, so everything that reads the record sees one story."""
    from ascendopt.judge import bench
    from ascendopt.rounds.decide import combine, needs_third

    result = once()
    ratio_base = result["ratio_vs_baseline"]
    if not bench.implausible(ratio_base):
        return result
    if step:
        step(f"implausible {1 / ratio_base:.2f}x vs baseline: measuring again")
    first = reading(result)
    again = once()
    second = reading(again)
    third = None
    if needs_third(first, second):
        if step:
            step("the re-check could not tell: measuring a third time")
        last = once()
        third = reading(last)
        last["second"] = _reading_dict(second)
    else:
        last = again
    check = combine(first, second, third)
    last["rechecked"] = True
    last["first"] = _reading_dict(first)
    last["recheck_measured"] = {"vs_baseline": last["vs_baseline"], "vs_best": last["vs_best"]}
    last["recheck"] = check.text
    last["recheck_outcome"] = check.outcome
    last["vs_baseline"], last["vs_best"] = check.vs_baseline, check.vs_best
    return last


def evidence(gate: Mapping[str, Any], timing: Mapping[str, Any] | None, floor=None,
             accepted: str | None = None) -> Any:
    """The round's measurements as ``rounds.decide.Evidence``: the gate summary (``gate_summary``), the
    round's ``timing`` (with its first measurement when it was re-checked, ``_rechecked``), the floor
    evidence and a person's acceptance of an implausible result."""
    from ascendopt.rounds.decide import Evidence, Reading

    if not gate.get("passed"):
        failure = f"{gate.get('failed_stage') or 'a stage'}: {gate.get('summary') or 'failed'}"
        return Evidence(False, gate_failure=failure)
    first = again = third = None
    if timing:
        if timing.get("first"):
            first = Reading(**timing["first"])
            measured = timing.get("recheck_measured") or {}
            last = Reading(measured.get("vs_baseline", timing["vs_baseline"]),
                           measured.get("vs_best", timing["vs_best"]), timing.get("ratio_vs_baseline"),
                           timing.get("ratio_vs_best"), rounds.inconclusive_why({**timing, **measured}))
            if timing.get("second"):  # measured three times: the second is the re-check, the last the third
                again, third = Reading(**timing["second"]), last
            else:
                again = last
        else:
            first = reading(timing)
    found = (timing or {}).get("implausible")
    why = f"{found['cases'][0]['case']}: {found['cases'][0]['reason']}" if found else None
    weighted = ((timing or {}).get("weighted") or {}).get("vs_best") or {}
    return Evidence(True, first=first, recheck=again, third=third, implausible=why, accepted=accepted,
                    floor=floor.detail if floor is not None else None, mix=rounds.mix_reason(timing),
                    mix_floor=bool(weighted.get("floors")) and (timing or {}).get("vs_best") == "slower")


def implausible_cases(timing: Mapping[str, Any], floors: Mapping[str, float | None] | None = None
                      ) -> list[dict[str, str]]:
    """The cases of a round's ``timing`` whose candidate is faster than the baseline beyond belief
    (``bench.implausible_reason``: the ratio bound after the re-check, or under ``floors[case]`` in ms):
    ``[{"case", "reason"}]``. A ratio that did not reproduce on the re-check is no finding (the round is
    inconclusive, and says so); one the re-check decided after an inconclusive first measurement says that,
    not "reproduced"."""
    from ascendopt.judge import bench

    outcome = timing.get("recheck_outcome")
    if outcome == "not-reproduced":
        return []
    how = ("decided on the re-check; the first measurement was inconclusive" if outcome == "decided" else
           "reproduced on a third measurement; the re-check could not tell" if timing.get("second") else
           "reproduced when measured again")
    found = []
    for case in timing.get("cases", []):
        versus = case["vs_baseline"]
        why = bench.implausible_reason(versus["verdict"], versus["ratio"], case["candidate"]["median_ms"],
                                       (floors or {}).get(case["case"]), rechecked=how)
        if why:
            found.append({"case": case["case"], "reason": why})
    return found


def measure_sides(spec, contract, sides: Mapping[str, Mapping[str, int]], *, pairs: int, backend=None,
                  step: Step | None = None, _recheck: bool = True) -> dict[str, Any]:
    """Time ``sides`` (``baseline``, optional ``best``, ``candidate`` -> config) interleaved per shape case.

    Returns the round's ``timing`` dict (see ``rounds.RoundRecord``); ``best`` defaults to the
    baseline while no round has been kept.
    """
    from ascendopt.device import backends
    from ascendopt.gate.stages import timing_inputs

    backend = backend or backends.current()
    w = contract.workload

    def once() -> dict[str, Any]:
        cases = []
        for case in w.shapes:
            if step:
                step(f"timing {case.name}: {', '.join(sides)} interleaved, {pairs} rounds")
            inputs = timing_inputs(spec, case.dims, w.dtype, w.mode, backend.torch_device())
            fns = {name: _runner(spec, cfg, w.mode) for name, cfg in sides.items()}
            samples, calls = interleaved_samples(fns, inputs, backend, pairs=pairs)
            cases.append(case_timing(case.name, samples, calls))
        return round_timing(cases)

    return _rechecked(once, step) if _recheck else once()


class OwnSides:
    """The warm workers of an own-code round, started once and used by its gate and its timing: the frozen
    commit's tree and the best kept round's (read from git into verified folders,
    ``judge.worktrees.checkout``; the best from its round snapshot, ``rounds.tree.best_checkout``) and the
    working tree ``root``, one ``judge.engine.Session``.

    ``open(tests)`` starts them, with the frozen tests ``tests`` running alongside when given (the gate's
    ``open_session``); a second call returns the same session. ``best``: ``{"round", "commit"}`` of the
    state the best side is (round None: no keep yet, the frozen commit is the best), with ``"unverified":
    why`` when no commit verifiably holds the best round's state (``note(why)`` is called; the best is not
    timed). ``close()`` (or leaving a ``with``) ends the workers and removes the folders.
    """

    def __init__(self, ctx, root: Path, *, timeout: float | None = None,
                 note: Callable[[str], None] | None = None):
        self.ctx, self.root, self.timeout, self.note = ctx, root, timeout, note
        self.stack = contextlib.ExitStack()
        self.session = None
        self.best: dict[str, Any] = {"round": None, "commit": None}

    def open(self, tests: Callable[[], Any] | None = None):
        from ascendopt.judge import engine
        from ascendopt.judge.worktrees import checkout, frozen_commit
        from ascendopt.rounds import tree as rtree

        if self.session is not None:
            return self.session
        contract, root = self.ctx.contract, self.root
        exec_rel = contract.workload.exec_file
        frozen = frozen_commit(contract, root)
        trees = {"baseline": self.stack.enter_context(checkout(root, frozen, exec_rel, label="baseline"))}
        self.best = {"round": None, "commit": frozen}
        kept = self.ctx.best_round
        if kept is not None:
            found = self.stack.enter_context(rtree.best_checkout(root, kept, exec_rel, self.ctx.ws.root))
            self.best = {"round": kept.number, "commit": found.commit}
            if found.tree is not None:
                trees["best"] = found.tree
            else:
                self.best["unverified"] = found.note
                if self.note:
                    self.note(found.note)
        trees["candidate"] = root
        engine.import_statistics()  # beside the tests: the round's verdict needs it
        self.session = self.stack.enter_context(engine.Session(
            exec_rel, trees, load_s=contract.timeout("workload_s", self.timeout), tests=tests))
        return self.session

    def close(self) -> None:
        self.stack.close()
        self.session = None

    def __enter__(self) -> OwnSides:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def measure_own(ctx, root: Path, *, pairs: int, timeout: float | None = None, step: Step | None = None,
                note: Callable[[str], None] | None = None, sides: OwnSides | None = None) -> dict[str, Any]:
    """Own code: baseline (the frozen commit), best (the best kept round's snapshot) and candidate (the
    working tree ``root``) timed interleaved, one warm worker each (``judge.engine``: the parent's clock,
    every timed output checked against the baseline's, the anchor). ``sides``: the round's workers, already
    warm from its gate (``OwnSides``); None: started here. A doubt of the judge
    (``engine.audit``, ``engine.anchor_problem``) makes both verdicts
    "inconclusive" (unless slower) and is listed in ``judge``; a wrong timed output raises ``WorkloadError``.
    Returns the round's ``timing``, with ``best`` as ``OwnSides.best`` (an unverified best is not timed, and
    ``vs_best`` is "inconclusive").

    ``workload_s`` limits each side's module code, ``timing_s`` the whole timing phase (``timeout``:
    ``--timeout`` for both). A side that raises, dies or outlives a limit raises one of
    ``judge.interleave.FAILURES`` naming the side.
    """
    from ascendopt.gate.stages import frozen_baseline, timed_cases
    from ascendopt.judge import engine
    from ascendopt.judge.interleave import WorkloadError, WorkloadTampering
    from ascendopt.judge.weighted import FLOOR_WEIGHT

    contract = ctx.contract
    exec_rel = contract.workload.exec_file
    timing_s = contract.timeout("timing_s", timeout)
    request = engine.Verdict(pairs=pairs, timeout=timeout)
    equivalence = contract.equivalence or {}
    tolerances = equivalence.get("tolerances") if equivalence.get("enabled") else None
    kept = ctx.best_round
    with contextlib.ExitStack() as stack:
        if sides is None:
            sides = stack.enter_context(OwnSides(ctx, root, timeout=timeout, note=note))
        session = sides.open()
        best = sides.best
        names = list(session.workers)
        trees = session.workers

        # with a shape mix the workload makes (inputs(seed, shape)), every bucket is timed on its own inputs, as
        # the gate times it; else the workload's own shape, one case
        cases = timed_cases(contract, session, pairs)
        mix = cases[0][1] is not None

        def time_case(case: str, shape, weight: float | None, case_pairs: int) -> tuple[dict[str, Any], list[str]]:
            label = exec_rel if shape is None else f"{exec_rel} {case}"
            if step:
                step(f"timing {label}: {', '.join(names)} interleaved in {len(names)} workers, {case_pairs} rounds "
                     f"(limit {timing_s:g} s)")
            for child in trees.values():
                child.readings.clear()  # each case's audit reads its own batches
            samples: dict[str, list[float]] = {}
            # a light bucket only feeds the weighted total: no pairs beyond its first ones
            most = case_pairs if weight is not None and weight < FLOOR_WEIGHT else None

            def decide(judged, on_pair):
                samples.update(take_decided(judged, names, case_pairs, most, on_pair))

            judged, _ = engine.time_sides(session, names, request, timing_s=timing_s, label=label, decide=decide,
                                          tolerances=tolerances, shape=shape)
            tampered = engine.trees_changed(session)
            if tampered:
                raise WorkloadTampering(f"the frozen commit's code was changed under the judge: {tampered[0]}")
            found = engine.audit(judged)
            if found.wrong:
                raise WorkloadError(f"a timed call's output is wrong: {found.wrong[0]}")
            frozen = frozen_baseline(contract, case if shape is not None else None)
            anchor = engine.anchor_problem(frozen.median_ms, samples["baseline"],
                                           judged.waits[judged.names.index("baseline")],
                                           frozen.waited_ms) if frozen else None
            doubts = found.doubts + ([f"{case}: {anchor}" if shape is not None else anchor] if anchor else [])
            entry = case_timing(case if shape is not None else exec_rel, samples, judged.calls,
                                best_timed=kept is None or "best" in trees)
            return entry, doubts

        def once() -> dict[str, Any]:
            timed = [time_case(*c) for c in cases]
            result = round_timing([entry for entry, _ in timed], best)
            if mix:
                shapes = {case: shape for case, shape, _, _ in cases}
                result = apply_weighted(result, weigh_round(result["cases"], {case: w for case, _, w, _ in cases},
                                                            shapes))
            doubts = [d for _, found in timed for d in found]
            if doubts:  # the timing is not evidence: nothing can be kept on it
                result["judge"] = doubts
                result["vs_baseline"] = "inconclusive" if result["vs_baseline"] != "slower" else "slower"
                result["vs_best"] = "inconclusive" if result["vs_best"] != "slower" else "slower"
            return result

        return _rechecked(once, step)
