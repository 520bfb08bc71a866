"""The printed forms in ``cli.render``: the round summary (green and red gate) and per-tensor lines."""

from ascendopt.cli.render import print_reports, render_round_summary, tensor_report_lines
from ascendopt.judge.correctness import TensorReport
from ascendopt.rounds import summary as round_summary


def _report(us, vec, launches=1, kind="npu"):
    """One profiled call of the workload in which ``_k_fwd`` ran ``launches`` times, ``us`` per launch."""
    return {"kind": kind, "profiled_calls": 1, "not_collected": [],
            "kernels": [{"name": "_k_fwd", "avg_us": us, "count": launches, "total_us": us * launches,
                         "bound": "vector_bound", "evidence": {"vec_ratio": vec}, "metrics": {"vec_ratio": vec}}]}


def _summary(verdict, speed=None):
    return round_summary.build(kernel_names=["_k"], before=_report(10.0, 0.8), after=_report(8.0, 0.9),
                               verdict=verdict, another_round=verdict != "drop", stop_reason="2 round(s) left",
                               target_metric="vec_ratio", speed=speed)


def test_round_summary_of_a_green_round_prints_the_table_and_the_lines(capsys):
    render_round_summary(_summary("keep", {"candidate_ms": 0.5, "ratio_vs_best": 0.8, "ratio_vs_baseline": 0.5}),
                         "round 1 (BT=32)")
    out = capsys.readouterr().out
    assert "round 1 (BT=32): _k_fwd" in out and "10.00 us" in out and "8.00 us" in out
    assert "MTE1" in out and "not collected" in out  # a metric without a value is never printed as 0
    assert "bound: vector_bound -> vector_bound (vec_ratio 0.9)" in out
    targeted = next(line for line in out.splitlines() if line.startswith("targeted metric"))
    assert targeted.startswith("targeted metric vec_ratio: 0.800 -> 0.900: up 12.5% (+0.100); beyond a fixed")
    assert targeted.endswith(": moved")
    assert "speed: 500.000 us; vs best 1.250x, vs baseline 2.000x (speedups against both re-timed interleaved" in out
    assert out.rstrip().splitlines()[-2:] == ["verdict: keep", "another round: warranted - 2 round(s) left"]


def test_round_summary_of_a_red_gate_prints_no_table_and_no_speed(capsys):
    render_round_summary(_summary("drop"), "round 2 (BT=64)")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["round 2 (BT=64): gate RED",
                     "speed: not measured, not re-profiled (red gate: no speed is reported)",
                     "verdict: drop", "another round: NOT warranted - 2 round(s) left"]


def _tensor(case, name, passed=True):
    return TensorReport(case, name, "output", "float32", 0.0, 0.0, None, 1e-5, 0, passed,
                        "" if passed else "ratio 1 > rtol 1e-05")


def test_tensor_lines_head_each_case_once(capsys):
    reports = [_tensor("tiny/fwd", "y"), _tensor("tiny/fwd", "rstd"), _tensor("wide/fwd", "y", passed=False)]
    lines = list(tensor_report_lines(reports))
    assert [ln for ln in lines if ln.startswith("[")] == ["[tiny/fwd]", "[wide/fwd]"]
    assert len(lines) == 5 and lines[1] == reports[0].line() and lines[-1].endswith("FAIL (ratio 1 > rtol 1e-05)")
    print_reports(reports)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == lines  # status output: stderr only


def _row(out, label):
    line = next(line for line in out.splitlines() if label in line)
    return [cell.strip() for cell in line.strip("│").split("│")[1:]]


def test_round_table_shows_device_time_and_launches_per_call_before_and_after(capsys):
    # issue 41: 512 launches of 217 us fused into 1 launch of 15.94 ms read as a 73x slower kernel per launch;
    # per call it is 111.10 ms -> 15.94 ms, in 512 -> 1 launches
    summary = round_summary.build(kernel_names=["_k"], before=_report(217.0, 0.8, launches=512),
                                  after=_report(15940.0, 0.9), verdict="keep", another_round=True,
                                  stop_reason="", target_metric="vec_ratio")
    assert summary["per_call"]["launches"] == {"before": 512.0, "after": 1.0}
    render_round_summary(summary, "round 2 (fuse)")
    out = capsys.readouterr().out
    assert "Duration (target kernel)" not in out and "217.00 us" not in out
    assert _row(out, "Device time per call (target kernel)") == ["111.10 ms", "15.94 ms"]
    assert _row(out, "Launches per call (target kernel)") == ["512", "1"]


def test_round_table_on_cpu_lists_no_counter_rows(capsys):
    # the interpreter has no counters to request: six "not collected" rows said nothing true
    summary = round_summary.build(kernel_names=["_k"], before=_report(10.0, None, kind="cpu"),
                                  after=_report(8.0, None, kind="cpu"), verdict="revert", another_round=True,
                                  stop_reason="", target_metric="duration_us")
    render_round_summary(summary, "round 1 (BT=32)")
    out = capsys.readouterr().out
    assert "not collected" not in out and "MTE2" not in out and "Cube/MAC" not in out
    assert _row(out, "Device time per call (target kernel)") == ["10.00 us", "8.00 us"]
    assert "targeted metric duration_us (average per launch): 10.00 us -> 8.00 us" in out


def test_round_table_without_step_ids_says_the_calls_are_not_recorded(capsys):
    before, after = _report(10.0, 0.8), _report(8.0, 0.9)
    before["profiled_calls"] = after["profiled_calls"] = None
    summary = round_summary.build(kernel_names=["_k"], before=before, after=after, verdict="keep",
                                  another_round=True, stop_reason="", target_metric="vec_ratio")
    render_round_summary(summary, "round 1")
    out = capsys.readouterr().out
    assert _row(out, "Device time per call (target kernel)") == ["calls not recorded", "calls not recorded"]
