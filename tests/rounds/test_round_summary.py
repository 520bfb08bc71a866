"""The round summary against real analyze reports: the bound's evidence with its thresholds, the UB
rows of a MemoryUB run, and the metric each bottleneck class (Ascend and CUDA) aims to move."""

from pathlib import Path

import pytest

from ascendopt.analyze.diagnosis import DERIVED, analyze
from ascendopt.analyze.rules import load_rules
from ascendopt.analyze.traces import load_profile
from ascendopt.rounds import summary as round_summary

DATA = Path(__file__).resolve().parents[1] / "data" / "ascend"


def _summary(before, after, names, target="duration_us"):
    return round_summary.build(kernel_names=names, before=before, after=after, verdict="same", another_round=True,
                               stop_reason="", target_metric=target)


def test_bound_evidence_names_values_and_thresholds_from_the_findings():
    report = analyze(load_profile(DATA / "level1_cnn"))
    summary = _summary(report, report, ["Conv2D1"])
    # Conv2D1 (raw row: aic_mte2_ratio 0.913, aic_mte1_ratio 0.883) is MTE2-bound; the mte1 check
    # belongs to another class and the block-dim finding is core use, not the bound's evidence
    assert summary["bound"] == "mte2_bound"
    assert summary["bound_evidence"] == "cube_mte2_ratio 0.913 >= 0.8 (cube_mte2_bound)"


def test_bound_evidence_without_numbers_is_none():
    report = analyze(load_profile(DATA / "msprof_op_memory_ub"))  # MemoryUB only: no pipe counters
    assert round_summary.bound_evidence(report["kernels"][0]) is None
    old_style = {"bound": "vector_bound", "evidence": {"vec_ratio": 0.91}}  # a record without findings
    assert round_summary.bound_evidence(old_style) == "vec_ratio 0.91"


def test_memory_ub_run_fills_the_ub_rows_and_the_ub_class_metric():
    report = analyze(load_profile(DATA / "msprof_op_memory_ub"))
    summary = _summary(report, report, ["OPPROF_001"], target="ub_bw_vector_gbs")
    rows = {r["label"]: r for r in summary["metrics"]}
    # raw MemoryUB.csv, vector0 row: aiv_ub_read_bw_vector 7.5, aiv_ub_write_bw_vector 0.664528 GB/s
    assert rows["UB read GB/s"]["column"] == "ub_read_bw_vector_gbs" and rows["UB read GB/s"]["after"] == 7.5
    assert rows["UB write GB/s"]["after"] == pytest.approx(0.664528)
    assert rows["UB vector GB/s (read+write)"]["after"] == pytest.approx(8.164528)
    assert summary["target_metric"]["before"] == pytest.approx(8.164528)
    assert "DRAM (ncu)" not in rows and "L2 (ncu)" not in rows  # not collected on either side


def test_every_bound_class_maps_to_a_metric_it_checks():
    rules = load_rules()
    for rule in rules.pipe_rules:
        checked = {c.column for c in rule.checks}
        checked |= {name for name, halves in DERIVED.items() if set(halves) <= checked}
        assert round_summary.resolve_target_metric(None, "", rule.name) in checked, rule.name
    for name in ("latency_bound", "no_dominant_pipe", "no_counters"):
        assert round_summary.resolve_target_metric(None, "", name) == "duration_us"
    assert [round_summary.resolve_target_metric(None, "", c) for c in ("tensor_bound", "simt_bound", "memory_bound")] \
        == ["mac_ratio", "vec_ratio", "dram_ratio"]


def _kernel(bound, **metrics):
    return {"kernels": [{"name": "k", "avg_us": 10.0, "bound": bound, "metrics": metrics}], "not_collected": []}


def test_targeted_metric_moves_for_cuda_memory_and_cube_side_scalar():
    target = round_summary.resolve_target_metric(None, "fewer loads", "memory_bound")
    moved = _summary(_kernel("memory_bound", dram_ratio=0.9), _kernel("memory_bound", dram_ratio=0.6), ["k"], target)
    tm = moved["target_metric"]
    assert (tm["name"], tm["before"], tm["after"], tm["moved"]) == ("dram_ratio", 0.9, 0.6, True)
    assert tm["direction"] == "down" and "fixed threshold" in tm["judgement"]
    # a cube kernel reads 0 on the vector half: the class metric is the max of both halves
    target = round_summary.resolve_target_metric(None, "", "scalar_bound")
    before = _kernel("scalar_bound", vector_scalar_ratio=0.0, cube_scalar_ratio=0.85, scalar_ratio=0.85)
    after = _kernel("scalar_bound", vector_scalar_ratio=0.0, cube_scalar_ratio=0.84, scalar_ratio=0.84)
    tm = _summary(before, after, ["k"], target)["target_metric"]
    assert (tm["name"], tm["before"], tm["after"], tm["moved"]) == ("scalar_ratio", 0.85, 0.84, False)


def test_std_us_is_the_launch_to_launch_spread_of_the_real_rows():
    import numpy as np

    profile = load_profile(DATA / "level1_cnn")
    report = analyze(profile)
    for kernel in report["kernels"]:
        durations = profile.kernels.loc[profile.kernels["name"] == kernel["name"], "duration_us"].to_numpy(float)
        if len(durations) < 2:
            assert kernel["std_us"] is None  # one launch has no spread
        else:
            assert kernel["std_us"] == pytest.approx(np.std(durations, ddof=1), rel=1e-6), kernel["name"]


def _timed(avg, std, count, kind="npu"):
    return {"kind": kind, "not_collected": [],
            "kernels": [{"name": "k", "avg_us": avg, "std_us": std, "count": count, "bound": "latency_bound",
                         "metrics": {}}]}


def test_targeted_duration_says_up_or_down_by_how_much_and_judges_against_launch_noise():
    # 10 launches per side, std 1 us: the difference's noise band is 3.29 * sqrt(0.1 + 0.1) = 1.47 us
    tm = _summary(_timed(100.0, 1.0, 10), _timed(95.0, 1.0, 10), ["k"])["target_metric"]
    assert tm["direction"] == "down" and tm["change_abs"] == pytest.approx(-5.0)
    assert tm["change_rel"] == pytest.approx(-0.05) and tm["moved"] is True
    assert tm["noise_abs"] == pytest.approx(3.29 * (0.2 ** 0.5)) and "beyond the noise of 10 and 10" in tm["judgement"]
    tm = _summary(_timed(100.0, 1.0, 10), _timed(101.0, 1.0, 10), ["k"])["target_metric"]
    assert tm["direction"] == "up" and tm["moved"] is False and tm["judgement"].startswith("within the noise")
    # one launch per side (one profiled call): no noise estimate, so no judgement either way
    tm = _summary(_timed(9575.0, None, 1), _timed(13774.0, None, 1), ["k"])["target_metric"]
    assert tm["direction"] == "up" and tm["moved"] is None and "too few" in tm["judgement"]


def test_on_cpu_the_target_metric_is_not_judged_and_says_why():
    tm = _summary(_timed(9575.0, 50.0, 10, "cpu"), _timed(13774.0, 50.0, 10, "cpu"), ["k"])["target_metric"]
    assert tm["direction"] == "up" and tm["moved"] is None
    assert "no hardware counters" in tm["judgement"]


def test_the_printed_line_has_the_direction_the_size_and_the_judgement(capsys):
    from ascendopt.cli.render import target_metric_line

    for before, after, word in ((100.0, 95.0, "down"), (100.0, 120.0, "up")):
        tm = _summary(_timed(before, 1.0, 10), _timed(after, 1.0, 10), ["k"])["target_metric"]
        line = target_metric_line(tm)
        assert f": {word} {abs(after - before) / before:.1%} ({after - before:+.2f} us);" in line
        assert line.endswith(": moved")
    on_cpu = _summary(_timed(1.0, 1.0, 10, "cpu"), _timed(2.0, 1.0, 10, "cpu"), ["k"])["target_metric"]
    line = target_metric_line(on_cpu)
    assert "no hardware counters" in line and "moved" not in line
