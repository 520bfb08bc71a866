"""Implausible is never a plain PASS (``bench.implausible_reason``).

A speedup beyond ``bench.IMPLAUSIBLE_RATIO`` that survives the re-check, or a time under the device's
roofline floor, is its own outcome: ``implausible`` in text, ``--json`` and JUnit, exit 6 for ``gate``
and never a ``keep`` for ``optimize-round`` unless a person's reason is recorded
(``--accept-implausible REASON``). Sources of the class: KernelGuard (OpenReview K0dAC7UaXL) rejects
"physics-impossible" scores with conservative floor checks; Wafer's reward-hack field guide
(wafer.ai/blog/reward-hacks-field-guide): a 104x claim should make you suspicious, 1000x certain, since
timer manipulation, work on side streams and cached results all show up as such numbers.

The too-fast timing is planted by construction on the tests' virtual clock (``_gate_kernels``): the
variant below charges one tenth of its work to the clock at ``BLOCK=128`` (what a candidate whose work
escapes the timer looks like). Controls: the honest change (dropping a planted 50 % extra pass, 1.5x)
passes and keeps; the A/A gate stays "same".
"""

import dataclasses
import functools
import xml.etree.ElementTree as ET

import pytest

import _gate_kernels as gk
from _cli_json import json_payload
from _own_code import frozen_kernel_workspace, kernel_round
from ascendopt.gate.stages import _performance_result, roofline_floor
from ascendopt.judge import bench


def _escapes_the_clock(inputs, config, mode):
    """t_scale, correct, whose work at BLOCK=128 is charged to the clock at one tenth."""
    before = gk.VIRTUAL["ms"]
    out = gk.t_scale(inputs, config, mode)
    if config["BLOCK"] == 128:
        gk.VIRTUAL["ms"] = before + (gk.VIRTUAL["ms"] - before) / 10
    return out


@pytest.fixture
def ws(tmp_path, monkeypatch):
    ws = frozen_kernel_workspace(tmp_path, monkeypatch, kernel="t_scale", mode="fwd", profile=False, precheck=False)
    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, run=_escapes_the_clock))
    return ws


@pytest.fixture
def clocked(monkeypatch):
    from ascendopt.gate import stages

    monkeypatch.setattr(stages, "run_gate", functools.partial(stages.run_gate, timer=gk.virtual_clock))


def test_gate_implausible_speedup_is_exit_6_in_text_json_and_junit(ws, cli, clocked, tmp_path):
    code, out, err = cli("gate", "-w", str(ws.root), "--set", "BLOCK=128", "--pairs", "12",
                         "--junit", str(tmp_path / "gate.xml"))
    assert code == 6, out + err
    assert "gate: IMPLAUSIBLE at performance (exit 6)" in out and "beyond the 5x bound" in out
    assert "gate: PASS" not in out
    assert "gate implausible at performance" in err and "--accept-implausible" in err and "Traceback" not in err
    suite = ET.parse(tmp_path / "gate.xml").getroot().find("testsuite")
    perf = [c for c in suite.findall("testcase") if c.get("classname") == "gate.performance"]
    assert perf and all(c.find("error") is not None and c.find("error").get("type") == "implausible" for c in perf)

    code, out, err = cli("gate", "-w", str(ws.root), "--set", "BLOCK=128", "--pairs", "12", "--json")
    assert code == 6
    result = json_payload(out)  # validated against the shipped schema
    assert (result["passed"], result["exit_code"], result["implausible_stage"], result["failed_stage"]) == \
        (False, 6, "performance", None)
    stage = result["stages"][3]
    assert stage["status"] == "implausible" and stage["exit_code"] == 6 and stage["data"]["implausible"]
    assert all("speedup" not in c and c["ratio"] < 0.2 and c["rechecked"] for c in stage["data"]["comparisons"])


def test_gate_accepts_an_implausible_speedup_only_with_a_reason(ws, cli, clocked):
    code, out, err = cli("gate", "-w", str(ws.root), "--set", "BLOCK=128", "--pairs", "12", "--accept-implausible",
                         "  ")
    assert code == 2 and "--accept-implausible" in err
    code, out, err = cli("gate", "-w", str(ws.root), "--set", "BLOCK=128", "--pairs", "12", "--json",
                         "--accept-implausible", "work moved to a precomputed table on purpose")
    assert code == 0, out + err
    result = json_payload(out)
    assert result["passed"] and result["implausible_stage"] is None
    assert result["stages"][3]["data"]["accepted_implausible"] == "work moved to a precomputed table on purpose"
    assert any("implausible result accepted" in n for n in result["notes"])


def test_round_never_keeps_an_implausible_speedup_without_a_recorded_acceptance(ws):
    from ascendopt.rounds import run as round_run

    record = kernel_round(ws, {"BLOCK": 128})
    assert record.verdict == "revert" and record.timing["vs_best"] == "faster"
    assert record.timing["implausible"]["accepted"] is None
    assert "implausible" in record.summary["verdict_reason"] and "--accept-implausible" in \
        record.summary["verdict_reason"]
    accepted = round_run.run_round(ws, hypothesis="tiling: BLOCK=128", sets={"BLOCK": 128}, pairs=12,
                                   reprofile=False, timer=gk.virtual_clock,
                                   accept_implausible="checked by hand: the table lookup is the point").record
    assert accepted.verdict == "keep"
    assert accepted.timing["implausible"]["accepted"] == "checked by hand: the table lookup is the point"
    assert any("implausible result accepted" in n for n in accepted.notes)


def test_honest_faster_change_passes_and_keeps(tmp_path, monkeypatch, cli, clocked):
    """Control: the baseline carries a planted 50 % extra pass; dropping it is 1.5x faster, plausibly."""
    ws = frozen_kernel_workspace(tmp_path, monkeypatch, kernel="t_scale", mode="fwd", profile=False, precheck=False,
                                 config={"EXTRA": 50})
    code, out, err = cli("gate", "-w", str(ws.root), "--set", "EXTRA=0", "--pairs", "12")
    assert code == 0, out + err
    assert "gate: PASS" in out and "implausible" not in out.lower()
    kept = kernel_round(ws, {"EXTRA": 0})
    assert kept.verdict == "keep", kept.gate


def test_a_time_under_the_roofline_floor_is_implausible():
    """KernelGuard's floor check: no call can move its bytes faster than the chip's peak bandwidth."""
    floor = bench.roofline_floor_ms(8 * 2**20, 1600)  # 8 MiB at 1600 GB/s: 5.24 us
    assert floor == pytest.approx(8 * 2**20 / 1.6e12 * 1e3)
    assert bench.roofline_floor_ms(None, 1600) is None and bench.roofline_floor_ms(8, None) is None
    assert "roofline floor" in bench.implausible_reason("faster", 0.8, candidate_ms=floor / 2, floor_ms=floor)
    assert bench.implausible_reason("faster", 0.8, candidate_ms=floor * 2, floor_ms=floor) is None
    assert bench.implausible_reason("same", 0.1, candidate_ms=floor / 2, floor_ms=floor) is None

    baseline = [0.010 * (1 + 0.001 * (i % 3)) for i in range(12)]
    candidate = [0.004 * (1 + 0.001 * (i % 2)) for i in range(12)]  # 2.5x: plausible by ratio alone
    comparison = bench.decide(baseline, candidate)
    assert comparison.verdict == "faster"
    assert _performance_result([("case", comparison)]).status == "pass"
    stage = _performance_result([("case", comparison)], {"case": 0.005})  # but under a 5 us floor
    assert stage.status == "implausible" and stage.exit_code == 6 and "roofline floor" in stage.summary

    class Chip:  # the backend's device facts (configs/chips.yaml): 1600 GB/s
        name = "cuda"

        def info(self):
            return type("Info", (), {"hbm_gbs": 1600.0})()

    dims = {"B": 4, "T": 64, "D": 64}
    assert roofline_floor(gk.SPEC, dims, "bf16", "fwd", Chip()) == pytest.approx(4 * 64 * 64 * 8 / 1.6e12 * 1e3)
    Chip.name = "cpu"
    assert roofline_floor(gk.SPEC, dims, "bf16", "fwd", Chip()) is None


def test_gate_prints_an_implausible_reason_once(ws, cli, clocked):
    # issue 41: the case line and the verdict line both ended in the same reason; the verdict line keeps it
    code, out, err = cli("gate", "-w", str(ws.root), "--set", "BLOCK=128", "--pairs", "12")
    assert code == 6, out + err
    reason = "10.0x faster, beyond the 5x bound (reproduced when measured again)"
    assert out.count(reason) == 1, out
    assert f"gate: IMPLAUSIBLE at performance (exit 6): tiny/fwd: {reason}; not a pass" in out
    case_line = next(line for line in out.splitlines() if line.startswith("tiny/fwd: baseline"))
    assert case_line.endswith("(re-checked: > 5x))")  # the measurement stays, the reason moves to the verdict



def test_a_round_prints_an_implausible_reason_once(ws, capsys):
    # issue 41: a warning on stderr and the verdict line on stdout both named the reason
    from ascendopt.cli.render import render_round_summary

    record = kernel_round(ws, {"BLOCK": 128})
    render_round_summary(record.summary, "round 1", record.timing)
    captured = capsys.readouterr()
    reason = "10.0x faster, beyond the 5x bound (reproduced when measured again)"
    assert (captured.out + captured.err).count(reason) == 1, captured
    assert reason in next(line for line in captured.out.splitlines() if line.startswith("verdict: revert"))
    assert any(reason in n for n in record.notes)  # the record still keeps it
