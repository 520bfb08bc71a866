"""Timing of one round: baseline, best so far and candidate measured interleaved in this process.

Samples are taken in a rotating order (ABC, CBA, ...) with one batch size for all sides, like
``bench.compare`` does for two; each side's samples are kept in the round record so the report can
give min/p10/p90. Verdicts come from ``bench.decide`` on the paired samples. Own code is timed by
the gate (frozen commit in a git worktree vs the working tree) and converted here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ascendopt.rounds import records as rounds
from ascendopt.rounds.records import RoundRecord

Step = Callable[[str], None]


def interleaved_samples(fns: Mapping[str, Callable[[Any], Any]], inputs: Sequence[tuple], backend, *, pairs: int,
                        max_pairs: int | None = None, warmup: int = 5, warmup_ms: float = 25.0,
                        min_sample_ms: float = 1.0, on_pair: Callable[[], None] | None = None
                        ) -> tuple[dict[str, list[float]], int]:
    """Samples (ms per call) of every side, by name, and the calls per sample they share.

    ``bench.Interleaved`` takes them: one batch size for all sides, order alternating
    forward/backward (ABC, CBA, ...) so no side always runs first. As in ``bench.compare``, while
    the ``candidate`` vs ``baseline`` or ``best`` verdict is undecided only because the noise band
    is wide (``bench.undecided``), ``pairs`` more rounds are taken, up to ``max_pairs`` in all
    (default ``3 * pairs``).
    """
    from ascendopt.gate import bench

    names = list(fns)
    taker = bench.Interleaved([bench.Sampler(fns[n], inputs, backend) for n in names], warmup=warmup,
                              warmup_ms=warmup_ms, min_sample_ms=min_sample_ms)
    limit = max(pairs, max_pairs if max_pairs is not None else 3 * pairs)
    while True:
        samples = dict(zip(names, taker.take(pairs, on_pair), strict=True))
        refs = [samples[n] for n in ("baseline", "best") if n in samples]
        if "candidate" not in samples or len(samples[names[0]]) + pairs > limit or not any(
                bench.undecided(bench.decide(ref, samples["candidate"], calls_per_sample=taker.calls))
                for ref in refs):
            return samples, taker.calls


def _comparison(ref: list[float], cand: list[float], calls: int) -> dict[str, Any]:
    from ascendopt.gate import bench

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


def measure_sides(spec, contract, sides: Mapping[str, Mapping[str, int]], *, pairs: int, backend=None,
                  step: Step | None = None, _recheck: bool = True) -> dict[str, Any]:
    """Time ``sides`` (``baseline``, optional ``best``, ``candidate`` -> config) interleaved per shape case.

    Returns the round's ``timing`` dict (see ``rounds.RoundRecord``); ``best`` defaults to the
    baseline while no round has been kept.
    """
    from ascendopt.device import backends
    from ascendopt.gate import bench
    from ascendopt.gate.stages import timing_inputs

    backend = backend or backends.current()
    w = contract.workload
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
    result = {"cases": cases, "ratio_vs_baseline": ratio_base,
              "ratio_vs_best": rounds.geomean([c["vs_best"]["ratio"] for c in cases]),
              "vs_baseline": _aggregate([c["vs_baseline"]["verdict"] for c in cases]),
              "vs_best": _aggregate([c["vs_best"]["verdict"] for c in cases])}
    if not (_recheck and bench.implausible(ratio_base)):
        return result
    # bench's rule for an implausible ratio: measure again, keep a verdict only if it reproduced
    if step:
        step(f"implausible {1 / ratio_base:.2f}x vs baseline: measuring again")
    again = measure_sides(spec, contract, sides, pairs=pairs, backend=backend, step=step, _recheck=False)
    again["rechecked"] = True
    if again["vs_baseline"] != result["vs_baseline"]:
        # as bench.after_recheck: not reproduced is "same", unless the second measurement could not tell
        undecided = again["vs_baseline"] == "inconclusive"
        again["vs_baseline"] = again["vs_best"] = "inconclusive" if undecided else "same"
        again["recheck"] = (f"implausible {ratio_base:.2f}x did not reproduce "
                            f"({again['ratio_vs_baseline']:.2f}x)")
    return again


def timing_from_gate(result, best: RoundRecord | None) -> dict[str, Any]:
    """Own code: the gate's frozen-commit vs working-tree comparisons as a round ``timing`` dict;
    ``best``: the best kept round so far (None: the baseline is the best)."""
    perf = next(s for s in result.stages if s.name == "performance")
    cases = []
    for c in perf.data.get("comparisons", []):
        cmp = {k: c[k] for k in ("verdict", "ratio", "threshold_rel", "noise_rel", "p_value", "reason")}
        cases.append({"case": c["case"], "baseline": c["baseline"], "best": c["baseline"], "candidate": c["candidate"],
                      "vs_baseline": cmp, "vs_best": dict(cmp)})
    ratio_base = rounds.geomean([c["vs_baseline"]["ratio"] for c in cases])
    best_ratio = best.timing["ratio_vs_baseline"] if best else 1.0
    # Separate runs do not compose exactly; the best's ratio vs the same frozen baseline is the fairest
    # reference there is without a second worktree. A gain must clear this round's noise band.
    threshold = max(c["vs_baseline"]["threshold_rel"] for c in cases)
    ratio_best = ratio_base / best_ratio
    vs_baseline = _aggregate([c["vs_baseline"]["verdict"] for c in cases])
    vs_best = "faster" if (ratio_best < 1 - threshold and vs_baseline == "faster") else (
        "slower" if ratio_best > 1 + threshold else "inconclusive" if vs_baseline == "inconclusive" else "same")
    return {"cases": cases, "ratio_vs_baseline": ratio_base, "ratio_vs_best": ratio_best,
            "vs_baseline": vs_baseline, "vs_best": vs_best}
