"""Rounds that must not claim what they cannot know: an inconclusive timing is never a keep, and a tile
the UB model says overflows the model chip's UB is never searched silently off-NPU.

``t_scale`` on the virtual clock (``tests/_gate_kernels.py``); ``noisy_device`` widens its per-launch
jitter to +-15 %. The UB twin models one stage of ``BLOCK`` fp32 elements x 400 live copies against
Ascend910B2's 196608 B UB (budget 0.85 x UB = 167116 B): BLOCK=128 is 204800 B = 104 % (over),
BLOCK=64 52 %, BLOCK=32 26 %; BLOCK=128 also runs 30 % faster, so a search that may try it keeps it.
"""

import dataclasses

import pytest

import _gate_kernels as gk
from ascendopt.cli.render import render_round_summary
from ascendopt.freeze.task import freeze_kernel
from ascendopt.kernels.spec import UBStage
from ascendopt.rounds import auto as round_auto
from ascendopt.rounds import records as rounds
from ascendopt.rounds import report as round_report
from ascendopt.rounds import run as round_run
from ascendopt.workspace import Workspace

OVER = "104% of Ascend910B2's UB (over budget: would not compile on the NPU)"


def _ub_model(dims, config, dtype):
    return [UBStage("fwd", {"BLOCK": config["BLOCK"]}, "fp32", 400)]


def _run(inputs, config, mode):
    start = gk.VIRTUAL["ms"]
    out = gk._run(inputs, config, mode)
    if config["BLOCK"] == 128:  # the overflowing tile is the fast one
        gk.VIRTUAL["ms"] -= 0.3 * (gk.VIRTUAL["ms"] - start)
    return out


UB_SPEC = dataclasses.replace(gk.SPEC, ub_model=_ub_model, run=_run)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.delenv("ASCENDOPT_CHIP", raising=False)
    monkeypatch.delenv("ASCENDOPT_UB_BYTES", raising=False)
    gk.install(monkeypatch, UB_SPEC)
    w = Workspace(tmp_path / ".ascendopt")
    freeze_kernel(w, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", max_rounds=10)
    return w


def _round(ws, sets, hypothesis="tile change"):
    return round_run.run_round(ws, hypothesis=hypothesis, sets=sets, pairs=12, reprofile=False,
                               timer=gk.virtual_clock)


# -- inconclusive timing -------------------------------------------------------------------------


def test_verdict_is_revert_on_an_inconclusive_timing_even_with_floor_evidence():
    fl = rounds.FloorEvidence("hbm-bandwidth", 4000.0, 4800.0, "GB/s", "x")
    assert rounds.verdict(True, "inconclusive") == "revert"
    assert rounds.verdict(True, "inconclusive", fl) == "revert"  # no "no gain at a bound" on a blind measurement
    assert rounds.verdict(True, "faster", fl) == "keep" and rounds.verdict(True, "same", fl) == "floor"


def test_a_round_timed_on_a_noisy_device_is_reverted_and_says_why(ws, monkeypatch, capsys):
    gk.noisy_device(monkeypatch)
    rec = _round(ws, {"BLOCK": "32"}).record  # same virtual work: only the noise speaks
    assert rec.timing["vs_best"] == "inconclusive" and rec.verdict == "revert" and rec.floor is None
    case = rec.timing["cases"][0]
    assert case["vs_best"]["verdict"] == "inconclusive" and case["baseline"]["n"] == 36  # 3 x 12 pairs first
    reason = rec.summary["verdict_reason"]
    assert reason.startswith("timing inconclusive: the noise band ±") and "stayed wider than ±5%" in reason
    render_round_summary(rec.summary, "round 1")
    assert f"verdict: revert ({reason})" in " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    row = round_report.opt_log_rows({"baseline": []}, [rec])[1]
    assert row[4].endswith("(inconclusive)") and row[5] == "revert"


def test_a_quiet_revert_says_why_in_the_record(ws):
    """Issue 41: every revert carries its reason (no gain is a reason too), in the record and its summary."""
    rec = _round(ws, {"BLOCK": "32"}).record
    assert rec.timing["vs_best"] == "same" and rec.verdict == "revert"
    assert rec.reason.startswith("no measurable gain over the best so far")
    assert rec.summary["verdict_reason"] == rec.reason
    assert rounds.load_rounds(ws)[-1].reason == rec.reason  # as saved in rounds/NNNN.yaml


def test_own_code_timing_on_inconclusive_samples_is_inconclusive():
    import numpy as np

    from ascendopt.gate.result import GateResult
    from ascendopt.gate.stages import _performance_result
    from ascendopt.judge import bench
    from ascendopt.judge.result import StageResult
    from ascendopt.rounds import timing as rt

    rng = np.random.default_rng(1)
    a, b = np.exp(rng.normal(0, 0.3, 30)), np.exp(rng.normal(0, 0.3, 30))
    perf = _performance_result([("bench.py", bench.decide(a, b))])
    assert perf.status == "inconclusive" and perf.exit_code == 6
    gate = GateResult([StageResult("integrity", "pass", ""), perf])
    assert not gate.passed and gate.exit_code == 6 and round_run.gate_passed(gate)  # green for a round
    # a round times own code itself (rt.measure_own): no keep yet, so the best is the baseline
    case = rt.case_timing("bench.py", {"baseline": list(a), "candidate": list(b)}, 1)
    timing = rt.round_timing([case], {"round": None, "commit": "0" * 40})
    assert timing["vs_baseline"] == timing["vs_best"] == "inconclusive"
    assert case["best"] == case["baseline"] and timing["ratio_vs_best"] == timing["ratio_vs_baseline"]
    assert rounds.verdict(round_run.gate_passed(gate), timing["vs_best"]) == "revert"
    assert rounds.verdict_reason(timing).startswith("timing inconclusive")



def test_a_round_reverted_on_the_judges_doubt_says_the_doubt_not_a_noise_band():
    """Timing that could tell ("faster", band well under 5 %) but that the judge doubted (the anchor, the
    clocks, an idle side: ``rounds.timing`` marks both verdicts inconclusive) is reverted for that reason."""
    import numpy as np

    from ascendopt.rounds import timing as rt

    rng = np.random.default_rng(2)
    base = np.exp(rng.normal(0, 0.01, 30))
    case = rt.case_timing("bench.py", {"baseline": list(2 * base), "candidate": list(base)}, 1)
    timing = rt.round_timing([case], {"round": None, "commit": "0" * 40})
    assert timing["vs_best"] == "faster"
    moved = "baseline moved from 1000.00 us (frozen) to 2000.00 us (+100.0%; allowed ±20% drift + 0.4% noise)"
    timing.update(judge=[moved], vs_baseline="inconclusive", vs_best="inconclusive")
    reason = rounds.verdict_reason(timing)
    assert reason.startswith("timing is not evidence: baseline moved from 1000.00 us") and "noise band" not in reason

# -- UB overflow off-NPU ---------------------------------------------------------------------------


def test_auto_off_npu_prunes_tiles_over_the_model_chips_ub_by_default(ws):
    result = round_auto.run_auto(ws, hypothesis="auto", budget=6, pairs=12, timer=gk.virtual_clock)
    recs = rounds.load_rounds(ws)
    assert recs and all(r.config["BLOCK"] != 128 for r in recs)
    assert all(r.ub["safe"] and r.ub["warning"] is None for r in recs)
    assert result["pruned"] > 0 and result["best"]["BLOCK"] != 128
    assert (result["ub_chip"], result["ub_overflow_allowed"], result["over_budget_rounds"]) == \
        ("Ascend910B2", False, [])


def test_allow_ub_overflow_searches_them_and_marks_every_such_round(ws, capsys):
    result = round_auto.run_auto(ws, hypothesis="auto", budget=6, pairs=12, timer=gk.virtual_clock,
                                 allow_ub_overflow=True)
    recs = rounds.load_rounds(ws)
    over = [r for r in recs if r.config["BLOCK"] == 128]
    assert over and result["pruned"] == 0 and result["ub_overflow_allowed"]
    assert result["over_budget_rounds"] == [r.number for r in over]
    for r in over:
        assert r.ub["safe"] is False and r.ub["warning"] == OVER and r.summary["ub"]["warning"] == OVER
        assert r.command.endswith("--auto --budget 6 --allow-ub-overflow")
    assert all(r.ub["warning"] is None for r in recs if r not in over)
    # the overflowing tile is the fast one: kept, and the best says what it would do on the NPU
    assert result["best"]["BLOCK"] == 128 and result["best_ub_warning"] == OVER
    render_round_summary(over[0].summary, f"round {over[0].number}")
    assert f"UB: {OVER}" in " ".join(capsys.readouterr().out.split())
    md = round_report.render_markdown(rounds_contract(ws), recs)
    assert f"- round {over[0].number} (BLOCK=128): UB {OVER}" in md
    assert f"**UB: {OVER}**: do not promote this configuration to an NPU as it is." in md


def rounds_contract(ws):
    from ascendopt.rounds.context import RoundContext

    return RoundContext.load(ws).contract.to_dict()


def test_a_manual_set_over_the_ub_is_recorded_and_marked_not_refused(ws, capsys):
    rec = _round(ws, {"BLOCK": "128"}).record
    assert rec.verdict == "keep" and rec.ub["warning"] == OVER and rec.summary["ub"]["warning"] == OVER
    render_round_summary(rec.summary, "round 1")
    assert f"UB: {OVER}" in " ".join(capsys.readouterr().out.split())
    assert f"UB {OVER}" in round_report.render_markdown(rounds_contract(ws), [rec])
    fits = _round(ws, {"BLOCK": "64"}, hypothesis="back to 64").record
    assert fits.ub["safe"] and fits.ub["warning"] is None


def test_allow_ub_overflow_is_for_auto_only(ws, cli):
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "BLOCK=32",
                       "--allow-ub-overflow")
    assert code == 2 and "--allow-ub-overflow applies to --auto only" in err
