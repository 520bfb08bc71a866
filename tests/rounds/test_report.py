"""The merge-request report: OPT_LOG rows, promotion stats from the raw samples, no-go bar, and a real PNG."""

import dataclasses

import numpy as np
import pytest

from ascendopt.rounds import report
from ascendopt.rounds.records import FloorEvidence, RoundRecord, StopDecision

CONTRACT = {
    "op": "rms_norm", "entry_point": "ascendopt.kernels.rms_norm:rms_norm", "backend": "cpu",
    "device": {"name": "cpu"},
    "workload": {"kind": "kernel", "kernel": "rms_norm", "dtype": "fp32", "mode": "fwd",
                 "shapes": [{"name": "tiny", "dims": {"N": 8, "D": 64}}], "config": {"BLOCK_N": 2}},
    "baseline": [{"case": "tiny", "median_ms": 2.0, "p20_ms": 1.9, "p80_ms": 2.1, "cv": 0.02, "n": 20}],
    "expected_kernels": ["_rms_norm_kernel"], "metric_groups": ["PipeUtilization"],
    "commands": {"freeze": ["ascendopt", "freeze", "--kernel", "rms_norm"]},
    "git": {"commit": "abc123"}, "created_at": "2026-12-01T00:00:00+00:00",
}


def _timing(base, cand, best=None, samples=None):
    def t(m):
        return {"median_ms": m, "p20_ms": m * 0.95, "p80_ms": m * 1.05, "mean_ms": m, "cv": 0.1, "n": 6}
    best = best or base
    case = {"case": "tiny", "baseline": t(base), "best": t(best), "candidate": t(cand)}
    if samples:
        case["samples_ms"] = samples
    return {"cases": [case], "ratio_vs_baseline": cand / base, "ratio_vs_best": cand / best,
            "vs_best": "faster" if cand < best else "same", "vs_baseline": "faster"}


def _rec(n, v, timing, **kw):
    passed = v != "drop"
    return RoundRecord(number=n, hypothesis=f"vector-bound: larger rows {n}", direction="BLOCK_N",
                       change={"kind": "tunables", "set": {"BLOCK_N": 2 ** (n + 1)},
                               "config": {"BLOCK_N": 2 ** (n + 1)}},
                       gate={"passed": passed, "exit_code": 0 if passed else 1,
                             "failed_stage": None if passed else "correctness"},
                       verdict=v, stop=StopDecision(False, None, "continue"), environment="Device: cpu | torch 2.13",
                       timing=timing, command=f"ascendopt optimize-round --hypothesis h --set BLOCK_N={2 ** (n + 1)}",
                       **kw)


def _records():
    samples = {"baseline": [2.0, 2.2, 1.8, 2.1, 1.9, 2.0], "candidate": [1.5, 1.6, 1.4, 1.5, 1.7, 1.3]}
    return [
        _rec(1, "keep", _timing(2.0, 1.5, samples=samples), summary={"bound": "vector-bound",
                                                                     "bound_evidence": "vec_ratio 0.91 >= 0.8"}),
        _rec(2, "drop", None),
        _rec(3, "revert", _timing(2.0, 1.6, best=1.5)),
    ]


def test_opt_log_rows_follow_fla_columns():
    rows = report.opt_log_rows(CONTRACT, _records())
    assert rows[0] == ("0", "baseline", "pass", "2.0000", "—", "base")
    assert rows[1][2:4] == ("pass", "1.5000") and rows[1][5] == "keep"
    assert rows[1][4].startswith("-25.0% time")  # 1.5 / 2.0 - 1: a quarter less time
    assert rows[2][2:] == ("fail (correctness)", "—", "—", "drop")  # a red gate is benchmarked nothing
    assert rows[3][3] == "1.6000" and rows[3][4].startswith("+6.7% time") and rows[3][5] == "revert"  # 1.6 / 1.5 - 1
    assert rows[1][1].startswith("BLOCK_N=4: vector-bound")


def test_an_own_code_rounds_direction_reads_as_the_console_names_it():
    """The console says the direction (``vectorize``); the report's direction cell leads with it too, not with the
    snapshot, and does not repeat the hypothesis's tag."""
    rec = dataclasses.replace(_records()[0], direction="vectorize", hypothesis="vectorize: one launch instead of 512",
                              change={"kind": "code", "snapshot": "b5a2673c22" + "0" * 30})
    (_, row) = report.opt_log_rows(CONTRACT, [rec])
    assert row[1] == "vectorize (code@b5a2673c22): one launch instead of 512"


def test_vs_best_reads_from_the_numbers_it_shows():
    """The % of a round's vs best agrees with the numbers in its row: the candidate's Bench median and the best
    as re-timed in the same round (shown in the cell), not the frozen row 0."""
    import re

    recs = _records() + [_rec(4, "revert", _timing(2.0, 1.8, best=1.2))]  # row 0 (2.0 ms) would give -10 %
    for row in report.opt_log_rows(CONTRACT, recs)[1:]:
        if row[3] == "—":
            continue
        found = re.fullmatch(r"([+-]\d+\.\d)% time \(best re-timed in this round: (\d+\.\d+)\)", row[4])
        assert found, row[4]
        change, best_ms = float(found[1]) / 100, float(found[2])
        assert change == pytest.approx(float(row[3]) / best_ms - 1, abs=0.001)
    assert report.OPT_LOG_NOTE in report.render_markdown(CONTRACT, recs)


def test_promotion_stats_from_raw_samples():
    rows, speedup = report.promotion_stats(_records()[0])
    x = np.array([1.5, 1.6, 1.4, 1.5, 1.7, 1.3])
    assert rows[1][:2] == ["tiny", "candidate"]
    assert rows[1][2:] == [f"{np.median(x):.4f}", f"{x.mean():.4f}", f"{x.std(ddof=1):.4f}", "1.3000",
                           f"{np.percentile(x, 10):.4f}", f"{np.percentile(x, 90):.4f}", "6"]
    assert speedup == pytest.approx(2.0 / 1.5)


def test_markdown_has_every_section(tmp_path):
    recs = _records()
    md = report.render_markdown(CONTRACT, recs, plot_name="rounds.png", max_rounds=10)
    for needle in ("## Task", "## Environment", "`Device: cpu | torch 2.13`", "## Baseline",
                   "| Iter | Direction (one line) | Gate | Bench (median ms) | vs best | Status |",
                   "Stop decision: continue", "![latency per round](rounds.png)", "**1.333x**",
                   "Baseline commit: abc123; candidate: BLOCK_N=4", "## No-go bar",
                   "| named active bound or blocker with its number | yes | vector-bound (vec_ratio 0.91 >= 0.8) |",
                   "ascendopt freeze --kernel rms_norm", "# round 3"):
        assert needle in md, needle
    assert "Device: Device:" not in md and "Env: Device" not in md
    # no rounds yet: nothing to promote, and the no-go bar says what is missing
    md0 = report.render_markdown(CONTRACT, [])
    assert "Nothing to promote" in md0 and "| at least one reasoned candidate attempt | NO | none |" in md0


def test_no_go_bar_prefers_floor_evidence():
    fl = FloorEvidence("hbm-bandwidth", 4300.0, 4800.0, "GB/s", "achieved 4300 GB/s = 90% of the 4800 GB/s peak")
    recs = _records() + [_rec(4, "floor", _timing(2.0, 1.5, best=1.5), floor=fl)]
    item = report.no_go_bar(CONTRACT, recs)[4]
    assert item[1] and "hbm-bandwidth: achieved 4300 GB/s" in item[2]


def test_plot_is_a_real_png(tmp_path):
    import matplotlib.image as mpimg

    path = report.plot_rounds(CONTRACT, _records(), tmp_path / "out" / "rounds.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.shape[0] > 300 and img.shape[1] > 600
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_the_report_status_and_round_give_one_number_for_one_comparison():
    """Issue 28: the round and status said 3.344x (median of the per-pair ratios), the report 3.282x (ratio of the
    two medians) for the same single case. One statistic everywhere, named in the report."""
    from ascendopt.rounds import status
    from ascendopt.rounds.records import SPEEDUP_STATISTIC

    timing = _timing(2.0, 0.6094)  # ratio of the medians: 3.282x
    timing["ratio_vs_baseline"] = 0.299  # the round's paired estimate: 3.344x
    timing["cases"][0]["vs_baseline"] = {"ratio": 0.299, "threshold_rel": 0.02, "verdict": "faster"}
    best = _rec(1, "keep", timing)
    _, speedup = report.promotion_stats(best)
    assert speedup == pytest.approx(1 / 0.299) == best.speedup_vs_baseline
    assert status._best(best)["speedup_vs_baseline"] == speedup
    md = report.render_markdown(CONTRACT, [best])
    assert f"**{1 / 0.299:.3f}x**" in md and "3.282x" not in md and SPEEDUP_STATISTIC in md
