"""A round over a served-shape mix (issue 40 item 5), from constructed per-bucket timings: it is judged as the gate
judges a mix (weighted speedup, a floor per heavy bucket, the reason naming the bucket), and ``status --rounds``,
the round summary and the report show its per-bucket table; the report plots speedup against weight."""

import pytest

from ascendopt.cli import envelope
from ascendopt.rounds import records
from ascendopt.rounds.ledger_view import side_by_side
from ascendopt.rounds.records import RoundRecord, StopDecision
from ascendopt.rounds.timing import apply_weighted, round_timing, weigh_round

SMALL, LARGE = "bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"
WEIGHTS = {SMALL: 0.7, LARGE: 0.3}
SHAPES = {SMALL: [[16, 64]], LARGE: [[256, 64]]}


def _side(ms):
    return {"median_ms": ms, "p20_ms": ms * 0.98, "p80_ms": ms * 1.02, "mean_ms": ms, "cv": 0.01, "n": 12}


def _versus(ref_ms, cand_ms, band=0.03):
    ratio = cand_ms / ref_ms
    verdict = "faster" if ratio < 1 - band else "slower" if ratio > 1 + band else "same"
    return {"verdict": verdict, "ratio": ratio, "threshold_rel": band, "noise_rel": band / 3, "p_value": 0.001,
            "reason": ""}


def _case(case, base_ms, best_ms, cand_ms):
    return {"case": case, "baseline": _side(base_ms), "best": _side(best_ms), "candidate": _side(cand_ms),
            "vs_baseline": _versus(base_ms, cand_ms), "vs_best": _versus(best_ms, cand_ms), "samples_ms": {}}


def _timing(*cases):
    result = round_timing(list(cases))
    return apply_weighted(result, weigh_round(result["cases"], WEIGHTS, SHAPES))


def test_slower_on_the_heavy_bucket_is_a_revert_naming_it_though_the_weighted_total_is_faster():
    # the large bucket 10x faster, the heavy small one 1.5x slower: Σw·t goes 0.7 + 6 -> 1.05 + 0.6
    timing = _timing(_case(SMALL, 1.0, 1.0, 1.5), _case(LARGE, 20.0, 20.0, 2.0))
    weighted = timing["weighted"]["vs_best"]
    assert weighted["speedup"] == pytest.approx(6.7 / 1.65) and weighted["floors"] == [SMALL]
    assert timing["vs_best"] == "slower" and timing["ratio_vs_best"] == pytest.approx(1.65 / 6.7)
    assert records.verdict(True, timing["vs_best"]) == "revert"
    reason = records.verdict_reason(timing)
    assert reason.startswith(f"shape mix: {SMALL} (weight 70.0%) is slower"), reason
    rows = {r["bucket"]: r for r in timing["weighted"]["buckets"]}
    assert rows[SMALL]["floor"] == "broken" and rows[LARGE]["floor"] == "held" and rows[LARGE]["shape"] == [[256, 64]]


def test_faster_on_every_bucket_is_a_keep_on_the_weighted_speedup():
    timing = _timing(_case(SMALL, 1.0, 1.0, 0.5), _case(LARGE, 20.0, 20.0, 16.0))
    assert timing["vs_best"] == "faster" and records.verdict(True, timing["vs_best"]) == "keep"
    # weighted (0.7 + 6) / (0.35 + 4.8), not the equal-weight geomean of 2x and 1.25x
    assert 1 / timing["ratio_vs_best"] == pytest.approx(6.7 / 5.15)
    assert records.verdict_reason(timing) is None


def test_faster_than_the_baseline_but_not_than_the_best_is_a_revert_with_the_weighted_reason():
    timing = _timing(_case(SMALL, 1.0, 0.5, 0.5), _case(LARGE, 20.0, 16.0, 16.0))
    assert timing["vs_baseline"] == "faster" and timing["vs_best"] == "same"
    assert records.verdict(True, timing["vs_best"]) == "revert"
    assert records.verdict_reason(timing).endswith("not faster than the best so far beyond the band")


def test_a_best_that_was_not_timed_keeps_nothing():
    cases = [_case(SMALL, 1.0, 1.0, 0.5), _case(LARGE, 20.0, 20.0, 10.0)]
    for c in cases:
        c["best"] = c["vs_best"] = None
    result = round_timing(cases)
    timing = apply_weighted(result, weigh_round(result["cases"], WEIGHTS, SHAPES))
    assert timing["weighted"]["vs_best"] is None and timing["weighted"]["buckets_vs_best"] == []
    assert timing["vs_best"] == "inconclusive" and timing["vs_baseline"] == "faster"


def _record(n, timing, verdict):
    return RoundRecord(number=n, hypothesis="tiling: small rows", direction="tiling",
                       change={"kind": "code", "commit": "abc"}, gate={"passed": True, "exit_code": 0,
                                                                       "failed_stage": None},
                       verdict=verdict, stop=StopDecision(False, None, "continue"), environment="Device: cpu",
                       timing=timing, command="ascendopt optimize-round --hypothesis h")


def _records():
    return [_record(1, _timing(_case(SMALL, 1.0, 1.0, 1.5), _case(LARGE, 20.0, 20.0, 2.0)), "revert"),
            _record(2, _timing(_case(SMALL, 1.0, 1.0, 0.5), _case(LARGE, 20.0, 20.0, 16.0)), "keep")]


def test_status_rounds_carries_and_prints_the_per_bucket_table(capsys):
    from ascendopt.cli.status import render_ledger

    rows = side_by_side(_records())
    assert [r["bucket"] for r in rows[0]["buckets"]] == [SMALL, LARGE]
    assert rows[0]["buckets"][0]["floor"] == "broken"
    validator = envelope.schema("status")["properties"]["ledger"]
    import jsonschema

    jsonschema.Draft202012Validator(validator, registry=envelope._registry()).validate(rows)
    bad = [dict(rows[0], buckets=[{"bucket": SMALL}])]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(validator, registry=envelope._registry()).validate(bad)
    render_ledger(rows)
    out = capsys.readouterr().out
    assert "round 1 per bucket of the shape mix, vs baseline" in " ".join(out.split())
    broken = [line for line in out.splitlines() if "bucket 1" in line and "broken" in line]
    assert broken and "70.0%" in broken[0] and "0.667x" in broken[0]


def test_the_round_summary_prints_the_per_bucket_tables(capsys):
    from ascendopt.cli.render import render_round_summary
    from ascendopt.rounds import summary as round_summary

    timing = _records()[0].timing
    timing["best"] = {"round": 3, "commit": "abc"}
    summary = round_summary.build(kernel_names=["k"], before=None, after=None, verdict="revert", another_round=True,
                                  stop_reason="continue", target_metric="duration_us",
                                  verdict_reason=records.verdict_reason(timing))
    render_round_summary(summary, "round 4 (tiling)", timing)
    out = " ".join(capsys.readouterr().out.split())
    assert "per bucket of the shape mix, vs baseline" in out
    assert "per bucket of the shape mix, vs the best so far (round 3)" in out
    assert f"verdict: revert (shape mix: {SMALL} (weight 70.0%) is slower" in out


def test_the_report_has_the_shape_mix_section_and_the_plot_of_speedup_against_weight(tmp_path):
    from ascendopt.cli.report import shape_mix_section
    from ascendopt.rounds.buckets_plot import bucket_points, plot_buckets

    recs = _records()
    text = shape_mix_section(recs, "rounds-buckets.png")
    assert "## Shape mix" in text and "![speedup per bucket against its weight](rounds-buckets.png)" in text
    assert "Round 1 (revert): weighted speedup vs baseline 4.061x" in text
    assert "| bucket 1 | [[16, 64]] | 70.0% | 1.00 ms | 1.50 ms | 0.667x | ±3.0% | slower | broken |" in text
    assert [p["weight"] for p in bucket_points(recs[1])] == [0.7, 0.3]
    png = plot_buckets(recs, tmp_path / "rounds-buckets.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # rounds without a mix: no section, no plot
    plain = [_record(1, {**recs[0].timing, "weighted": None}, "revert")]
    assert shape_mix_section(plain, None) == "" and plot_buckets(plain, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_a_broken_floor_is_the_reason_even_beside_an_implausible_bucket():
    timing = _timing(_case(SMALL, 1.0, 1.0, 1.5), _case(LARGE, 20.0, 20.0, 2.0))
    timing["implausible"] = {"cases": [{"case": LARGE, "reason": "10.0x faster, beyond the 5x bound"}],
                             "accepted": None}
    assert records.verdict(True, timing["vs_best"], implausible=True) == "revert"
    assert records.verdict_reason(timing).startswith(f"shape mix: {SMALL} (weight 70.0%) is slower")
    del timing["weighted"]["vs_best"]["floors"][:]  # no floor broken: the implausible bucket is the reason
    assert records.verdict_reason(timing).startswith(f"implausible: {LARGE}")


def test_the_reports_speedup_of_a_round_over_a_mix_names_the_weighted_statistic():
    from ascendopt.rounds.report import render_markdown

    contract = {"op": "my_op", "workload": {"kind": "exec-file", "exec_file": "bench.py"}, "baseline": [],
                "git": {"commit": "abc"}}
    md = render_markdown(contract, _records())
    assert f"**{6.7 / 5.15:.3f}x**" in md and records.WEIGHTED_STATISTIC in md
    assert records.SPEEDUP_STATISTIC not in md


def test_a_broken_floor_is_the_reason_even_when_the_judge_doubted_the_timing():
    timing = _timing(_case(SMALL, 1.0, 1.0, 1.5), _case(LARGE, 20.0, 20.0, 2.0))
    timing["judge"] = ["the baseline moved: 1.30x its frozen time"]
    reason = records.verdict_reason(timing)
    assert reason.startswith(f"shape mix: {SMALL} (weight 70.0%) is slower")
    assert reason.endswith("; the judge also doubted the timing: the baseline moved: 1.30x its frozen time")
