"""A round's verdict as one pure function of its measurements: ``decide(Evidence) -> Decision``.

The inputs are what the round measured, nothing else: the gate's result, the first timing (vs the
baseline and vs the best so far), the re-check the first one triggered (a ratio beyond
``bench.IMPLAUSIBLE_RATIO`` is measured again), the implausibility found after the re-check and a person's
acceptance of it, and the floor evidence. The output is the verdict (keep | revert | drop | floor) and
its reason in one line; every verdict has one, so a ``revert`` or a ``drop`` never stands without its why
(the record, the console, ``status --rounds`` and the report all print ``Decision.reason``).

How a re-check combines with the first measurement (``combine``), decided here once:

* the re-check agrees with the first (same verdict vs the baseline): "reproduced", the re-check's
  numbers stand;
* the first could not tell (inconclusive: a drifting baseline, a wide noise band, a doubt of the judge)
  and the re-check could: "decided", the re-check stands. The first measurement is no evidence either
  way, so it cannot veto the second; the record says the first was inconclusive. (Before issue 41 this
  combination came out "same", and the record said both "reproduced" and "did not reproduce".)
* the first was decisive and the re-check could not tell: it neither confirms nor contradicts, so the
  round measures a third time (``needs_third``) and says so: the third agreeing with the first is
  "reproduced" (on the third measurement), anything else is "not reproduced";
* the first was decisive and the re-check (or the third measurement) disagrees: "not reproduced", both
  comparisons are inconclusive (measurements that disagree cannot tell; the gate's ``bench.after_recheck``
  calls a decisive disagreement "same", but for a round both are a revert and "inconclusive" says why
  without claiming "no gain").

The record holds exactly one of these outcomes, so it cannot say "reproduced" and "did not reproduce"
at once.
"""

from __future__ import annotations

from dataclasses import dataclass

# bench.Comparison verdicts; "inconclusive": the measurement could not tell
DECISIVE = ("faster", "same", "slower")
OUTCOMES = ("reproduced", "decided", "not-reproduced")
ACCEPT_HINT = "optimize-round --accept-implausible REASON"


@dataclass(frozen=True)
class Reading:
    """One timing of the round, aggregated over its shape cases: the verdicts vs the baseline and vs the
    best so far, the time ratios (candidate / reference, < 1 is faster; None where not timed), and why it
    could not tell when a verdict is "inconclusive" (noise band, judge's doubt, untimed best)."""

    vs_baseline: str
    vs_best: str
    ratio_vs_baseline: float | None = None
    ratio_vs_best: float | None = None
    why_inconclusive: str | None = None


@dataclass(frozen=True)
class Recheck:
    """What the first timing and its re-check say together (``combine``)."""

    outcome: str  # one of OUTCOMES
    vs_baseline: str
    vs_best: str
    text: str  # one line for the record and the console


@dataclass(frozen=True)
class Evidence:
    """The inputs of ``decide``. ``gate_failure``: the red stage and its summary (``gate_passed`` False).
    ``first``: the first timing (None only on a red gate); ``recheck``: its re-measurement, when the first
    was implausible. ``implausible``: why the (combined) result is too good to believe (after the re-check,
    ``rounds.timing.implausible_cases``), None when it is not; ``accepted``: a person's reason to accept it.
    ``floor``: the floor evidence's one line (``FloorEvidence.detail``), None when no bound is reached."""

    gate_passed: bool
    gate_failure: str | None = None
    first: Reading | None = None
    recheck: Reading | None = None
    third: Reading | None = None  # taken when the re-check could not tell a decisive first (``needs_third``)
    implausible: str | None = None
    accepted: str | None = None
    floor: str | None = None
    # over a shape mix: why the weighted verdict is not a keep (``records.mix_reason``: a bucket named), and
    # whether a bucket broke its floor (that decides before anything else: no acceptance elsewhere undoes it)
    mix: str | None = None
    mix_floor: bool = False


@dataclass(frozen=True)
class Decision:
    verdict: str  # keep | revert | drop | floor
    reason: str
    vs_baseline: str | None  # the comparisons the verdict rests on (after the re-check); None on a red gate
    vs_best: str | None
    recheck: Recheck | None = None


def _speedup(ratio: float | None) -> str:
    return f"{1.0 / ratio:.2f}x" if ratio else "?x"


def needs_third(first: Reading, again: Reading) -> bool:
    """A decisive first measurement whose re-check could not tell: a third measurement decides."""
    return first.vs_baseline != "inconclusive" and again.vs_baseline == "inconclusive"


def combine(first: Reading, again: Reading, third: Reading | None = None) -> Recheck:
    """The first timing, its re-check and (``needs_third``) a third measurement as one result (module
    docstring: reproduced | decided | not reproduced)."""
    told = f"{again.vs_baseline} {_speedup(again.ratio_vs_baseline)}"
    claimed = f"{first.vs_baseline} {_speedup(first.ratio_vs_baseline)} vs the baseline"
    if again.vs_baseline == first.vs_baseline:
        return Recheck("reproduced", again.vs_baseline, again.vs_best,
                       f"{claimed} reproduced when measured again ({told})")
    if first.vs_baseline == "inconclusive":
        why = f" ({first.why_inconclusive})" if first.why_inconclusive else ""
        return Recheck("decided", again.vs_baseline, again.vs_best,
                       f"the first measurement was inconclusive{why}; the re-check decided: {told} vs the "
                       "baseline")
    if third is not None and needs_third(first, again):
        third_told = f"{third.vs_baseline} {_speedup(third.ratio_vs_baseline)}"
        doubt = f"; {again.why_inconclusive}" if again.why_inconclusive else ""
        could_not = f"the re-check could not tell ({told}{doubt})"
        if third.vs_baseline == first.vs_baseline:
            return Recheck("reproduced", third.vs_baseline, third.vs_best,
                           f"{claimed}: {could_not}; a third measurement reproduced it ({third_told})")
        return Recheck("not-reproduced", "inconclusive", "inconclusive",
                       f"{claimed} did not reproduce: {could_not}; a third measurement: {third_told}")
    return Recheck("not-reproduced", "inconclusive", "inconclusive",
                   f"{claimed} did not reproduce when measured again ({told})")


def decide(evidence: Evidence) -> Decision:
    """The round's verdict and its reason from ``evidence`` (see ``Evidence``). Order: a red gate is a
    drop (nothing timed); an implausible result nobody accepted is a revert; faster than the best so far is a
    keep; a result that cannot tell is a revert (no gain and no floor claimed on it); no gain at a named
    hardware bound is a floor; else (same or slower) a revert. Raises ValueError for a green gate without a
    timing (a round always times a green candidate)."""
    if not evidence.gate_passed:
        return Decision("drop", f"gate red: {evidence.gate_failure or 'a stage failed'}; nothing was timed",
                        None, None)
    first = evidence.first
    if first is None:
        raise ValueError("a green gate needs the round's timing")
    check = combine(first, evidence.recheck, evidence.third) if evidence.recheck is not None else None
    vs_baseline = check.vs_baseline if check else first.vs_baseline
    vs_best = check.vs_best if check else first.vs_best
    # the numbers quoted are the last measurement's, the one the combined verdict stands on
    measured = evidence.third or evidence.recheck or first

    def made(verdict: str, reason: str) -> Decision:
        # the re-check's outcome leads the reason wherever it changed what was measured
        if check is not None and (check.outcome != "reproduced" or evidence.third is not None):
            reason = f"{reason} ({check.text})"
        return Decision(verdict, reason, vs_baseline, vs_best, check)

    if evidence.mix and evidence.mix_floor:
        return made("revert", evidence.mix)
    if evidence.implausible and not evidence.accepted:
        return made("revert", f"implausible: {evidence.implausible}; not kept without an explicit acceptance "
                              f"({ACCEPT_HINT}, recorded in the round)")
    if vs_best == "faster":
        reason = f"faster than the best so far: {_speedup(measured.ratio_vs_best)}"
        if evidence.implausible:
            reason += f"; implausible result accepted: {evidence.accepted} ({evidence.implausible})"
        return made("keep", reason)
    if vs_best == "inconclusive" and evidence.mix:
        return Decision("revert", evidence.mix, vs_baseline, vs_best, check)
    if vs_best == "inconclusive":
        why = (check.text if check is not None and check.outcome == "not-reproduced"
               else measured.why_inconclusive or "the comparison with the best so far could not tell")
        return Decision("revert", f"timing inconclusive: {why}; nothing is kept on a measurement that cannot tell",
                        vs_baseline, vs_best, check)
    if evidence.mix and not evidence.floor:
        return made("revert", evidence.mix)
    if evidence.floor:
        return made("floor", f"no gain over the best so far ({vs_best}) at a hardware bound: {evidence.floor}")
    if vs_best == "slower":
        return made("revert", f"slower than the best so far: {_speedup(measured.ratio_vs_best)}")
    return made("revert", f"no measurable gain over the best so far ({_speedup(measured.ratio_vs_best)}, within "
                          "the noise band)")
