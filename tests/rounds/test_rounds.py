"""Round records round-trip to YAML, verdicts follow the loop's rules, stop criteria fire when they must."""

import pytest

from ascendopt.errors import ContractError
from ascendopt.rounds import records as rounds
from ascendopt.rounds.records import FloorEvidence, RoundRecord, StopDecision, detect_floor, should_stop, verdict
from ascendopt.workspace import Workspace, read_yaml

TIMING = {"cases": [{"case": "tiny", "candidate": {"median_ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1, "mean_ms": 1.0,
                                                   "cv": 0.01, "n": 10}},
                    {"case": "realistic", "candidate": {"median_ms": 4.0, "p20_ms": 3.9, "p80_ms": 4.1,
                                                        "mean_ms": 4.0, "cv": 0.01, "n": 10}}],
          "ratio_vs_best": 0.9, "ratio_vs_baseline": 0.8, "vs_best": "faster", "vs_baseline": "faster"}
GO = StopDecision(False, None, "continue")


def rec(n, v, direction="BT", floor=None):
    passed = v != "drop"
    return RoundRecord(number=n, hypothesis=f"h{n}", direction=direction,
                       change={"kind": "tunables", "set": {direction: 64}, "config": {direction: 64}},
                       gate={"passed": passed, "exit_code": 0 if passed else 1}, verdict=v, stop=GO,
                       environment="Device: cpu", timing=None if v == "drop" else TIMING, floor=floor)


def test_verdict_rules():
    assert verdict(False, None) == "drop"
    assert verdict(False, "faster") == "drop"  # a red gate is never a keep
    assert verdict(True, "faster") == "keep"
    assert verdict(True, "same") == "revert"
    assert verdict(True, "slower") == "revert"
    fl = FloorEvidence("hbm-bandwidth", 4300.0, 4800.0, "GB/s", "x")
    assert verdict(True, "same", fl) == "floor"
    assert verdict(True, "faster", fl) == "keep"


def test_stall_after_three_non_keep_rounds():
    rs = [rec(1, "keep"), rec(2, "revert"), rec(3, "drop")]
    assert not should_stop(rs, max_rounds=10).stop
    rs.append(rec(4, "revert"))
    d = should_stop(rs, max_rounds=10)
    assert d.stop and d.criterion == "stall" and "3 consecutive" in d.reason


def test_iteration_cap_from_contract():
    rs = [rec(1, "keep"), rec(2, "keep")]
    assert not should_stop(rs, max_rounds=3).stop
    d = should_stop(rs, max_rounds=2)
    assert d.stop and d.criterion == "max_rounds" and "max_rounds=2" in d.reason


def test_three_directions_with_evidence():
    rs = [rec(1, "revert", "BT"), rec(2, "keep", "BD"), rec(3, "drop", "BK")]
    assert not should_stop(rs, max_rounds=10).stop  # a drop is no evidence: BK is not a direction tried yet
    assert rounds.directions_tried(rs) == ["BT", "BD"]
    rs = [rec(1, "revert", "BT"), rec(2, "keep", "BD"), rec(3, "revert", "NUM_TILES")]
    d = should_stop(rs, max_rounds=10)
    assert d.stop and d.criterion == "directions" and "(BT: round 1; BD: round 2; NUM_TILES: round 3)" in d.reason
    rs[-1] = rec(3, "keep", "NUM_TILES")  # still improving: keep going
    assert not should_stop(rs, max_rounds=10).stop


def test_the_stop_message_names_the_rounds_it_counted_and_those_it_did_not():
    """Issue 28: after tiling (measured), math and precision (both dropped), "1 direction(s) tried" alone read as a
    bug; the message says which rounds were counted and why the others were not."""
    rs = [rec(1, "revert", "tiling"), rec(2, "drop", "math"), rec(3, "drop", "precision"), rec(4, "keep", "tiling")]
    d = should_stop(rs, max_rounds=10)
    assert not d.stop
    assert "1 direction(s) tried with evidence (tiling: rounds 1, 4)" in d.reason
    assert "not counted, dropped at a red gate and never measured: math: round 2; precision: round 3" in d.reason
    # a direction measured once counts, even when another of its rounds was dropped
    rs = [rec(1, "drop", "math"), rec(2, "revert", "math")]
    assert rounds.direction_rounds(rs) == ({"math": [2]}, {}) and "not counted" not in should_stop(rs).reason


def test_floor_stops_with_the_number():
    fl = FloorEvidence("hbm-bandwidth", 4300.0, 4800.0, "GB/s", "achieved 4300 GB/s = 90% of the 4800 GB/s peak")
    d = should_stop([rec(1, "floor", floor=fl)], max_rounds=10)
    assert d.stop and d.criterion == "floor" and "4300 GB/s" in d.reason


def test_detect_floor_bandwidth_and_launch():
    # 1 GB per 260 us call = 3846 GB/s of a 4800 GB/s part: 80 % < 85 %, not a floor
    assert detect_floor(device_us=250, latency_us=260, bytes_moved=10**9, hbm_gbs=4800, backend="cuda") is None
    f = detect_floor(device_us=230, latency_us=240, bytes_moved=10**9, hbm_gbs=4800, backend="cuda")
    assert f.bound == "hbm-bandwidth" and f.value == pytest.approx(4166.7, abs=0.1) and f.unit == "GB/s"
    assert "87% of the 4800 GB/s peak" in f.detail
    f = detect_floor(device_us=3.0, latency_us=9.0, bytes_moved=10**4, hbm_gbs=4800, backend="npu")
    assert f.bound == "launch-overhead" and "33%" in f.detail
    assert detect_floor(device_us=3.0, latency_us=9.0, bytes_moved=10**4, hbm_gbs=None, backend="cpu") is None


def test_record_roundtrip_and_storage(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    assert rounds.next_number(ws) == 1
    fl = FloorEvidence("launch-overhead", 3.0, 9.0, "us", "kernel 3 us of 9 us")
    r = rec(1, "floor", floor=fl)
    path = rounds.save_round(ws, r)
    assert path.name == "0001.yaml" and read_yaml(path)["verdict"] == "floor"
    back = rounds.load_rounds(ws)
    assert back[0].floor == fl and back[0].stop == GO and back[0].created_at
    assert back[0].candidate_ms == pytest.approx(2.0)  # geomean of 1 ms and 4 ms
    assert rounds.next_number(ws) == 2
    with pytest.raises(ContractError, match="already recorded"):
        rounds.save_round(ws, r)


def test_bad_records_name_file_and_field(tmp_path):
    ws = Workspace(tmp_path)
    ws.rounds_dir.mkdir()
    good = rec(1, "keep").to_dict()
    ws.round_path(1).write_text("schema: 1\n" + __import__("yaml").safe_dump({**good, "verdict": "maybe"}))
    with pytest.raises(ContractError, match=r"0001.yaml: verdict: must be one of keep\|revert\|drop\|floor"):
        rounds.load_rounds(ws)
    ws.round_path(1).write_text("schema: 1\n" + __import__("yaml").safe_dump({**good, "gate": {"passed": False}}))
    with pytest.raises(ContractError, match=r"0001.yaml: verdict: keep on a red gate"):
        rounds.load_rounds(ws)
    ws.round_path(1).write_text("schema: 1\n" + __import__("yaml").safe_dump({**good, "bogus": 1}))
    with pytest.raises(ContractError, match="unknown field 'bogus'"):
        rounds.load_rounds(ws)


def test_drop_round_has_no_timing_and_best_round():
    with pytest.raises(ContractError, match="timing: missing"):
        RoundRecord(number=1, hypothesis="h", direction="BT", change={}, gate={"passed": True}, verdict="keep",
                    stop=GO, environment="e")
    rs = [rec(1, "keep"), rec(2, "revert"), rec(3, "drop")]
    assert rounds.best_round(rs).number == 1
    assert rounds.directions_tried(rs) == ["BT"]


def test_environment_line_has_versions_and_git(tmp_path):
    facts = {"name": "cpu (Triton interpreter)", "backend": "cpu", "versions": {"torch": "2.13", "triton": "3.7"}}
    line = rounds.environment_line(facts)
    assert line.startswith("Device: cpu (Triton interpreter) (cpu) | torch 2.13 | triton 3.7")
    assert "[" in line  # the repository's branch[sha]
    assert rounds.git_head(tmp_path) is None
