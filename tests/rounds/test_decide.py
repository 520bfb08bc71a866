"""The round verdict as a table: measurements in, verdict and reason out (``rounds.decide``), every branch.

The first rows are issue 41's ``rounds/0002.yaml``: an own-code round measured 16x faster; the first
measurement was inconclusive (the baseline drifted under load), the re-check decisively faster, and the
user accepted the implausible speedup. It was recorded as a revert with no reason, saying both
"reproduced" and "did not reproduce"."""

import pytest

from ascendopt.rounds.decide import Decision, Evidence, Reading, combine, decide

R16 = 1 / 16  # candidate / reference time of a 16x speedup
DRIFT = "the re-measured baseline drifted 40% from the frozen one"
FIRST_INCONCLUSIVE = Reading("inconclusive", "inconclusive", R16, R16, DRIFT)
RECHECK_FASTER = Reading("faster", "faster", R16, R16)
IMPLAUSIBLE = "16.0x faster, beyond the 5x bound"
FAST = Reading("faster", "faster", 0.8, 0.8)
SAME = Reading("same", "same", 0.99, 0.99)
SLOWER = Reading("slower", "slower", 1.3, 1.3)
BAND = "the noise band ±9% stayed wider than ±5%"
UNDECIDED = Reading("faster", "inconclusive", 0.8, 0.95, BAND)
MIX_FLOOR = "shape mix: bucket 1 [[16, 64]] (weight 70.0%) is slower: 1.32x the baseline's time"
MIX_UNDECIDED = "shape mix: bucket 2 [[256, 64]] (weight 30.0%) could not be decided; nothing is kept"
MIX_SAME = "shape mix: weighted 0.99x: not faster than the best so far beyond the band"
FLOOR = "achieved 4210 GB/s = 88% of the 4800 GB/s peak (floor at 85%)"

# (id, evidence, verdict, words the reason must contain, words it must not contain)
CASES = [
    ("issue41-accepted-inconclusive-then-faster",
     Evidence(True, first=FIRST_INCONCLUSIVE, recheck=RECHECK_FASTER, implausible=IMPLAUSIBLE,
              accepted="vectorized: 512 launches -> 1"),
     "keep", ["faster than the best so far: 16.00x", "accepted: vectorized: 512 launches -> 1",
              "first measurement was inconclusive", DRIFT, "re-check decided: faster"], ["did not reproduce"]),
    ("issue41-not-accepted",
     Evidence(True, first=FIRST_INCONCLUSIVE, recheck=RECHECK_FASTER, implausible=IMPLAUSIBLE),
     "revert", ["implausible: 16.0x", "--accept-implausible", "re-check decided"], ["did not reproduce"]),
    ("reproduced-accepted",
     Evidence(True, first=RECHECK_FASTER, recheck=RECHECK_FASTER, implausible=IMPLAUSIBLE, accepted="fused"),
     "keep", ["faster than the best so far", "accepted: fused"], ["did not reproduce", "inconclusive"]),
    ("decisive-then-slower-did-not-reproduce",
     Evidence(True, first=RECHECK_FASTER, recheck=Reading("slower", "slower", 1.1, 1.1)),
     "revert", ["timing inconclusive", "did not reproduce", "slower 0.91x"], ["reproduced when"]),
    ("decisive-then-inconclusive-did-not-reproduce",
     Evidence(True, first=RECHECK_FASTER, recheck=Reading("inconclusive", "inconclusive", 0.5, 0.5, BAND)),
     "revert", ["timing inconclusive", "did not reproduce"], []),
    ("decisive-inconclusive-third-reproduces",
     Evidence(True, first=RECHECK_FASTER, recheck=Reading("inconclusive", "inconclusive", R16, R16, BAND),
              third=RECHECK_FASTER, implausible=IMPLAUSIBLE, accepted="fused"),
     "keep", ["faster than the best so far", "the re-check could not tell", BAND,
              "a third measurement reproduced it"], ["did not reproduce"]),
    ("decisive-inconclusive-third-contradicts",
     Evidence(True, first=RECHECK_FASTER, recheck=Reading("inconclusive", "inconclusive", R16, R16, BAND),
              third=SAME),
     "revert", ["timing inconclusive", "did not reproduce", "a third measurement: same"], ["reproduced it"]),
    ("decisive-inconclusive-third-inconclusive",
     Evidence(True, first=RECHECK_FASTER, recheck=Reading("inconclusive", "inconclusive", R16, R16, BAND),
              third=Reading("inconclusive", "inconclusive", R16, R16, BAND)),
     "revert", ["did not reproduce", "a third measurement: inconclusive"], []),
    ("inconclusive-twice",
     Evidence(True, first=FIRST_INCONCLUSIVE, recheck=Reading("inconclusive", "inconclusive", R16, R16, BAND)),
     "revert", ["timing inconclusive", BAND], ["did not reproduce"]),
    ("inconclusive-then-same",
     Evidence(True, first=FIRST_INCONCLUSIVE, recheck=SAME),
     "revert", ["no measurable gain", "re-check decided: same"], []),
    ("faster", Evidence(True, first=FAST), "keep", ["faster than the best so far: 1.25x"], ["accepted"]),
    ("same", Evidence(True, first=SAME), "revert", ["no measurable gain over the best so far (1.01x"], []),
    ("slower", Evidence(True, first=SLOWER), "revert", ["slower than the best so far: 0.77x"], []),
    ("inconclusive-vs-best", Evidence(True, first=UNDECIDED), "revert", ["timing inconclusive", BAND], []),
    ("inconclusive-without-why", Evidence(True, first=Reading("same", "inconclusive")), "revert",
     ["could not tell"], []),
    ("floor", Evidence(True, first=SAME, floor=FLOOR), "floor", ["hardware bound", FLOOR], []),
    ("slower-at-floor", Evidence(True, first=SLOWER, floor=FLOOR), "floor", [FLOOR], []),
    ("inconclusive-claims-no-floor", Evidence(True, first=UNDECIDED, floor=FLOOR), "revert", [BAND], [FLOOR]),
    ("faster-beats-floor", Evidence(True, first=FAST, floor=FLOOR), "keep", ["faster"], []),
    ("implausible-not-accepted-no-recheck", Evidence(True, first=FAST, implausible="under the roofline floor"),
     "revert", ["implausible: under the roofline floor"], []),
    ("implausible-accepted-but-same", Evidence(True, first=SAME, implausible="under the roofline floor",
                                               accepted="why not"),
     "revert", ["no measurable gain"], []),
    ("mix-floor-before-an-unaccepted-implausible-bucket",
     Evidence(True, first=SLOWER, implausible=IMPLAUSIBLE, mix=MIX_FLOOR, mix_floor=True),
     "revert", [MIX_FLOOR], ["implausible"]),
    ("mix-floor-even-when-accepted",
     Evidence(True, first=SLOWER, implausible=IMPLAUSIBLE, accepted="fused", mix=MIX_FLOOR, mix_floor=True),
     "revert", [MIX_FLOOR], []),
    ("mix-inconclusive", Evidence(True, first=UNDECIDED, mix=MIX_UNDECIDED), "revert", [MIX_UNDECIDED], []),
    ("mix-same", Evidence(True, first=SAME, mix=MIX_SAME), "revert", [MIX_SAME], []),
    ("mix-same-at-floor", Evidence(True, first=SAME, mix=MIX_SAME, floor=FLOOR), "floor", [FLOOR], []),
    ("red-gate", Evidence(False, gate_failure="correctness: 2 of 5 frozen tests failed"), "drop",
     ["gate red: correctness: 2 of 5 frozen tests failed", "nothing was timed"], []),
    ("red-gate-without-summary", Evidence(False), "drop", ["gate red"], []),
]


@pytest.mark.parametrize(("evidence", "verdict", "says", "never"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide_table(evidence, verdict, says, never):
    decision = decide(evidence)
    assert isinstance(decision, Decision)
    assert decision.verdict == verdict
    for words in says:
        assert words in decision.reason, decision.reason
    for words in never:
        assert words not in decision.reason, decision.reason


def test_a_green_gate_without_timing_is_refused():
    with pytest.raises(ValueError, match="timing"):
        decide(Evidence(True))


def test_combine_outcomes_are_exclusive():
    """One outcome per record: the text never says both "reproduced when" and "did not reproduce"."""
    pairs = [(FIRST_INCONCLUSIVE, RECHECK_FASTER, "decided", "faster"),
             (RECHECK_FASTER, RECHECK_FASTER, "reproduced", "faster"),
             (RECHECK_FASTER, SAME, "not-reproduced", "inconclusive"),
             (FIRST_INCONCLUSIVE, FIRST_INCONCLUSIVE, "reproduced", "inconclusive")]
    for first, again, outcome, vs_baseline in pairs:
        check = combine(first, again)
        assert (check.outcome, check.vs_baseline) == (outcome, vs_baseline)
        assert not ("reproduced when" in check.text and "did not reproduce" in check.text)


def test_the_drop_and_red_rows_leave_no_comparison():
    d = decide(Evidence(False, gate_failure="kernel-hit: fallback"))
    assert (d.vs_baseline, d.vs_best, d.recheck) == (None, None, None)


# -- the record of issue 41's round, through the round's own code (rounds.timing) -------------------------


def _timing(speedup: float, doubt: str | None = None):
    import numpy as np

    from ascendopt.rounds import timing as rt

    rng = np.random.default_rng(7)
    base = 16.0 * np.exp(rng.normal(0, 0.01, 30))
    case = rt.case_timing("bench.py", {"baseline": list(base), "candidate": list(base / speedup)}, 1)
    timing = rt.round_timing([case], {"round": None, "commit": "0" * 40})
    if doubt:  # as rounds.timing.measure_own marks a timing the judge doubts (the anchor: a drifted baseline)
        timing.update(judge=[doubt], vs_baseline="inconclusive", vs_best="inconclusive")
    return timing


def test_an_inconclusive_first_measurement_and_a_decisive_recheck_take_the_recheck():
    from ascendopt.rounds import timing as rt

    drift = "baseline moved from 16.00 ms (frozen) to 23.00 ms (+43.8%; allowed ±20% drift)"
    measured = iter([_timing(16.0, drift), _timing(16.0)])
    steps = []
    timing = rt._rechecked(lambda: next(measured), steps.append)
    assert steps and "measuring again" in steps[0]
    assert (timing["vs_baseline"], timing["vs_best"], timing["recheck_outcome"]) == ("faster", "faster", "decided")
    assert timing["first"]["vs_baseline"] == "inconclusive" and drift in timing["first"]["why_inconclusive"]
    found = rt.implausible_cases(timing)
    assert found and "the first measurement was inconclusive" in found[0]["reason"]
    timing["implausible"] = {"cases": found, "accepted": "one launch instead of 512"}
    decision = decide(rt.evidence({"passed": True}, timing, None, "one launch instead of 512"))
    assert decision.verdict == "keep" and "one launch instead of 512" in decision.reason
    # the record never says both
    text = repr(timing) + decision.reason
    assert "did not reproduce" not in text and "reproduced when measured again" not in text
    # without the acceptance: a revert, and why
    decision = decide(rt.evidence({"passed": True}, timing, None, None))
    assert decision.verdict == "revert" and "--accept-implausible" in decision.reason


def test_a_decisive_first_measurement_that_does_not_reproduce_is_inconclusive_and_says_so():
    from ascendopt.rounds import timing as rt

    measured = iter([_timing(16.0), _timing(1.0)])
    timing = rt._rechecked(lambda: next(measured), None)
    assert timing["recheck_outcome"] == "not-reproduced" and timing["vs_best"] == "inconclusive"
    assert rt.implausible_cases(timing) == []  # no "reproduced" claim beside "did not reproduce"
    decision = decide(rt.evidence({"passed": True}, timing))
    assert decision.verdict == "revert" and "did not reproduce" in decision.reason


def test_a_red_gate_from_the_round_is_a_drop_with_the_stage():
    from ascendopt.rounds import timing as rt

    gate = {"passed": False, "failed_stage": "kernel-hit", "summary": "torch fallback ran, not the kernel"}
    decision = decide(rt.evidence(gate, None))
    assert decision.verdict == "drop" and "kernel-hit: torch fallback ran" in decision.reason


def test_a_recheck_that_cannot_tell_a_decisive_first_measures_a_third_time_and_says_so():
    from ascendopt.rounds import timing as rt

    doubt = "baseline moved from 16.00 ms (frozen) to 23.00 ms (+43.8%; allowed ±20% drift)"
    measured = iter([_timing(16.0), _timing(16.0, doubt), _timing(16.0)])
    steps = []
    timing = rt._rechecked(lambda: next(measured), steps.append)
    assert any("third time" in s for s in steps)
    assert timing["recheck_outcome"] == "reproduced" and timing["vs_best"] == "faster"
    assert timing["second"]["vs_baseline"] == "inconclusive" and "third measurement reproduced" in timing["recheck"]
    found = rt.implausible_cases(timing)
    assert found and "third measurement" in found[0]["reason"]
    decision = decide(rt.evidence({"passed": True}, {**timing, "implausible": {"cases": found}}, None, "fused"))
    assert decision.verdict == "keep" and "third measurement" in decision.reason
