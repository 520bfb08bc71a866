"""The weighted verdict over a served-shape mix (``judge.weighted``): every branch, from built comparisons."""

from types import SimpleNamespace

import pytest

from ascendopt.judge.weighted import (
    FLOOR_VERDICTS,
    FLOOR_WEIGHT,
    TIMED_WEIGHT,
    BucketTiming,
    bucket_rows,
    floor_verdict,
    timed,
    weigh,
)


def _cmp(base_ms: float, cand_ms: float, verdict: str, band: float = 0.02):
    return SimpleNamespace(baseline=SimpleNamespace(median_ms=base_ms), candidate=SimpleNamespace(median_ms=cand_ms),
                           ratio=cand_ms / base_ms, threshold_rel=band, verdict=verdict, reason="")


def test_faster_on_every_bucket_is_faster_with_the_weighted_speedup():
    found = weigh([BucketTiming("bucket 1", 0.9, _cmp(1.0, 0.5, "faster")),
                   BucketTiming("bucket 2", 0.1, _cmp(10.0, 8.0, "faster"))])
    # Σw·tb / Σw·tc = (0.9 + 1.0) / (0.45 + 0.8)
    assert found.verdict == "faster" and found.speedup == pytest.approx(1.9 / 1.25)
    assert found.timed_weight == 1.0 and found.floors == []


def test_a_heavy_bucket_slower_is_red_naming_it_even_when_the_total_is_faster():
    found = weigh([BucketTiming("bucket 1 [[64, 4096]]", 0.3, _cmp(10.0, 2.0, "faster")),
                   BucketTiming("bucket 2 [[1, 4096]]", 0.7, _cmp(0.5, 0.8, "slower"))])
    assert found.speedup > 1.0  # the total alone would say faster
    assert found.verdict == "slower" and found.floors == ["bucket 2 [[1, 4096]]"]
    assert found.reason.startswith("bucket 2 [[1, 4096]] (weight 70.0%) is slower")


def test_a_light_bucket_slower_does_not_break_a_floor_but_counts_in_the_total():
    light = FLOOR_WEIGHT / 2
    found = weigh([BucketTiming("heavy", 1 - light, _cmp(1.0, 0.5, "faster")),
                   BucketTiming("light", light, _cmp(1.0, 1.5, "slower"))])
    assert found.verdict == "faster" and found.floors == []
    assert found.ratio == pytest.approx(((1 - light) * 0.5 + light * 1.5) / 1.0)


def test_a_heavy_bucket_that_cannot_be_decided_makes_the_verdict_inconclusive():
    found = weigh([BucketTiming("heavy", 0.6, _cmp(1.0, 0.5, "faster")),
                   BucketTiming("noisy", 0.4, _cmp(1.0, 0.9, "inconclusive"))])
    assert found.verdict == "inconclusive" and found.undecided == ["noisy"] and "noisy" in found.reason


@pytest.mark.parametrize("cand, verdict", [(1.0, "same"), (1.005, "same"), (1.2, "slower"), (0.8, "faster")])
def test_the_total_is_judged_against_the_weighted_band(cand, verdict):
    found = weigh([BucketTiming("a", 0.5, _cmp(1.0, cand, "same", band=0.01)),
                   BucketTiming("b", 0.5, _cmp(1.0, cand, "same", band=0.03))])
    assert found.band == pytest.approx(0.02) and found.verdict == verdict


def test_every_bucket_is_timed_and_any_left_out_is_listed_with_the_timed_share_stated():
    assert timed([0.5, 0.01, 0.0001]) == [True, True, True] and TIMED_WEIGHT == 0.0
    found = weigh([BucketTiming("a", 0.995, _cmp(1.0, 1.0, "same"))], not_timed=[("tail", 0.005)])
    assert found.not_timed == ["tail"] and found.timed_weight == pytest.approx(0.995)
    with pytest.raises(ValueError):
        weigh([])


@pytest.mark.parametrize("weight, verdict, floor", [
    (FLOOR_WEIGHT, "slower", "broken"), (FLOOR_WEIGHT, "inconclusive", "undecided"), (0.5, "same", "held"),
    (0.5, "faster", "held"), (FLOOR_WEIGHT * 0.99, "slower", "no floor"), (0.0, "inconclusive", "no floor")])
def test_a_buckets_floor_verdict_comes_from_its_weight_and_its_own_verdict(weight, verdict, floor):
    assert floor_verdict(weight, verdict) == floor and floor in FLOOR_VERDICTS


def test_the_per_bucket_rows_are_in_the_mix_order_with_speedup_band_and_floor():
    rows = bucket_rows([BucketTiming("bucket 1", 0.7, _cmp(1.0, 2.0, "slower", band=0.04)),
                        BucketTiming("bucket 2", 0.3, _cmp(4.0, 1.0, "faster"))], {"bucket 1": [[1, 8]]})
    assert [r["bucket"] for r in rows] == ["bucket 1", "bucket 2"]
    assert rows[0] == {"bucket": "bucket 1", "shape": [[1, 8]], "weight": 0.7, "baseline_ms": 1.0, "candidate_ms": 2.0,
                       "speedup": 0.5, "noise_band": 0.04, "verdict": "slower", "floor": "broken"}
    assert rows[1]["shape"] is None and rows[1]["speedup"] == 4.0 and rows[1]["floor"] == "held"
