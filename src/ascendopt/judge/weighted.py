"""The timed verdict over a served-shape mix: one comparison per bucket, weighed by the buckets' shares of the
kernel's device time, with a floor per heavy bucket.

Inputs are the per-bucket comparisons (``judge.bench.Comparison``: candidate / baseline time, the noise band,
the bucket's verdict) and the buckets' weights (``contract.shapes``: shares of the profiled device time, summing
to 1). Pure: no process, no clock.

* Timed: every bucket of weight at least ``TIMED_WEIGHT``; the lighter ones are listed as not timed, with the
  share of the weight they hold, and the weights of the timed ones are taken as they are (the verdict speaks for
  the timed share, which it states).
* The weighted speedup is ``Σ w·t_baseline / Σ w·t_candidate`` over the timed buckets, each ``t`` the median ms
  per call of that bucket: what the served mix of calls costs before and after.
* Its noise band is the weight-averaged band of the buckets (``Σ w·band / Σ w``): a bucket's band is its own
  measured A/A spread, and a weighted sum of independent ratios is no noisier than its noisiest part.
* A floor: a bucket of weight at least ``FLOOR_WEIGHT`` whose own verdict is "slower" makes the whole verdict
  "slower" (exit 4) and is named, even when the weighted total is faster; one that is "inconclusive" makes the
  verdict inconclusive (exit 6), named.
* Otherwise the verdict is "faster" when the weighted ratio is below ``1 - band``, "slower" above ``1 + band``,
  else "same".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A bucket must hold this share of the kernel's device time to be timed: every bucket is, since a light bucket
# made many times slower moves the served total as much as a heavy one made a little slower (a bucket below
# ``FLOOR_WEIGHT`` is timed with fewer pairs and counts in the weighted total only).
TIMED_WEIGHT = 0.0
# A bucket this heavy has a floor: slower there is red whatever the total says. A 5 % bucket 20 % slower costs
# the served mix 1 %: the size of a regression a user would chase, and decode-like buckets are often heavier.
FLOOR_WEIGHT = 0.05
# A bucket's floor verdict in the per-bucket table (``bucket_rows``): "broken" (weight >= FLOOR_WEIGHT and
# slower beyond its band: red), "undecided" (heavy, but its band was too wide to tell), "held" (heavy, not
# slower), "no floor" (lighter than FLOOR_WEIGHT: it counts in the weighted total only).
FLOOR_VERDICTS = ("broken", "undecided", "held", "no floor")


@dataclass(frozen=True)
class BucketTiming:
    """One bucket's timing: ``label`` ("bucket 2 [[1, 4096]]"), ``weight`` (share of device time, 0..1) and its
    comparison (a ``judge.bench.Comparison``: ``ratio``, ``threshold_rel``, ``verdict``, ``baseline``,
    ``candidate``)."""

    label: str
    weight: float
    comparison: Any


@dataclass
class WeightedVerdict:
    """``verdict`` ("faster" | "slower" | "same" | "inconclusive"), ``ratio`` (weighted candidate / baseline
    time), ``band`` (relative), ``timed_weight`` (share of the mix timed), ``reason`` (one line, naming a bucket
    that decided it), ``floors`` (labels of heavy buckets that were slower), ``not_timed`` (labels below
    ``TIMED_WEIGHT``)."""

    verdict: str
    ratio: float
    band: float
    timed_weight: float
    reason: str
    floors: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    not_timed: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The verdict as the gate's stage data and a round's ``timing["weighted"]`` store it."""
        return {"verdict": self.verdict, "ratio": self.ratio, "speedup": self.speedup, "noise_band": self.band,
                "timed_weight": self.timed_weight, "floors": list(self.floors), "undecided": list(self.undecided),
                "not_timed": list(self.not_timed), "reason": self.reason}


def timed(weights: Sequence[float]) -> list[bool]:
    """Which buckets are timed (weight at least ``TIMED_WEIGHT``)."""
    return [w >= TIMED_WEIGHT for w in weights]


def weigh(buckets: Sequence[BucketTiming], not_timed: Sequence[tuple[str, float]] = ()) -> WeightedVerdict:
    """The verdict over ``buckets`` (the timed ones), ``not_timed``: ``(label, weight)`` of the buckets too light
    to time. ValueError without a timed bucket."""
    if not buckets:
        raise ValueError("a weighted verdict needs at least one timed bucket")
    total = sum(b.weight for b in buckets)
    before = sum(b.weight * b.comparison.baseline.median_ms for b in buckets)
    after = sum(b.weight * b.comparison.candidate.median_ms for b in buckets)
    ratio = after / before if before > 0 else float("inf")
    band = sum(b.weight * b.comparison.threshold_rel for b in buckets) / total if total > 0 else 0.0
    floors = [b for b in buckets if floor_verdict(b.weight, b.comparison.verdict) == "broken"]
    undecided = [b for b in buckets if floor_verdict(b.weight, b.comparison.verdict) == "undecided"]
    left_out = [label for label, _ in not_timed]
    share = total + sum(w for _, w in not_timed)
    timed_share = total / share if share > 0 else 1.0
    change = f"weighted {ratio:.3f}x the baseline's time ({1 / ratio:.3f}x speed) over {timed_share:.0%} of the mix"
    if floors:
        worst = max(floors, key=lambda b: b.weight * b.comparison.ratio)
        return WeightedVerdict("slower", ratio, band, timed_share,
                               f"{worst.label} (weight {worst.weight:.1%}) is slower: {worst.comparison.ratio:.3f}x "
                               f"its baseline time, beyond its ±{worst.comparison.threshold_rel:.1%} band; {change}",
                               [b.label for b in floors], [b.label for b in undecided], left_out)
    if undecided:
        first = max(undecided, key=lambda b: b.weight)
        return WeightedVerdict("inconclusive", ratio, band, timed_share,
                               f"{first.label} (weight {first.weight:.1%}) could not be decided "
                               f"({first.comparison.reason or 'noise band too wide'}); {change}",
                               [], [b.label for b in undecided], left_out)
    if ratio < 1.0 - band:
        verdict = "faster"
    elif ratio > 1.0 + band:
        verdict = "slower"
    else:
        verdict = "same"
    return WeightedVerdict(verdict, ratio, band, timed_share, f"{change}, band ±{band:.1%}", [], [], left_out)


def floor_verdict(weight: float, verdict: str) -> str:
    """A bucket's floor verdict (``FLOOR_VERDICTS``) from its weight and its own comparison's verdict."""
    if weight < FLOOR_WEIGHT:
        return "no floor"
    return {"slower": "broken", "inconclusive": "undecided"}.get(verdict, "held")


def bucket_rows(buckets: Sequence[BucketTiming], shapes: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The per-bucket table every output shows (gate text, ``--json``, JUnit, ``status --rounds``, the report),
    as plain data, one row per timed bucket in the mix's order: ``bucket`` (label), ``shape`` (``shapes[label]``,
    the representative's dims; None when not given), ``weight``, ``baseline_ms`` and ``candidate_ms`` (median per
    call), ``speedup`` (baseline / candidate time), ``noise_band`` (relative), ``verdict`` (the bucket's own:
    faster | same | slower | inconclusive) and ``floor`` (``floor_verdict``)."""
    rows = []
    for b in buckets:
        c = b.comparison
        rows.append({"bucket": b.label, "shape": (shapes or {}).get(b.label), "weight": b.weight,
                     "baseline_ms": c.baseline.median_ms, "candidate_ms": c.candidate.median_ms,
                     "speedup": 1.0 / c.ratio if c.ratio > 0 else None, "noise_band": c.threshold_rel,
                     "verdict": c.verdict, "floor": floor_verdict(b.weight, c.verdict)})
    return rows
