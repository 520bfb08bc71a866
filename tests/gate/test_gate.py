"""The gate on a bundled kernel (test-only ``t_scale``, Triton interpreter) and on own code (a git repo).

Each planted defect must turn the gate red at the right stage with the right exit code: a hand-edited
tolerance or oracle -> 3, a wrong or partially written kernel -> 1 (with the per-tensor diff), a torch
fallback -> 1 at kernel hit, a planted 5 % slowdown -> 4 (timed on a deterministic virtual clock).
"""

import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
import torch

import _gate_kernels as gk
from _cli_json import json_payload
from ascendopt.contract.model import Tolerance
from ascendopt.errors import UsageError
from ascendopt.gate.stages import run_gate
from ascendopt.judge.correctness import compare_tensor
from ascendopt.workspace import Workspace


@pytest.fixture(scope="module")
def frozen_ws(tmp_path_factory):
    """One freeze of t_scale (bf16, fwd, tiny + varlen twin), copied for each test."""
    from ascendopt import kernels
    from conftest import run_cli

    root = tmp_path_factory.mktemp("frozen")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        mp.setattr(kernels, "_registry", {"t_scale": gk.SPEC})
        mp.chdir(root)
        code, out, err = run_cli("freeze", "--kernel", "t_scale", "--mode", "fwd", "--varlen", "-w", str(root / "ws"))
    assert code == 0, err
    return root / "ws"


@pytest.fixture
def ws(frozen_ws, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(frozen_ws, tmp_path / "ws")
    gk.install(monkeypatch)
    return tmp_path / "ws"


def test_freeze_then_gate_passes_with_json_and_junit(ws, cli, monkeypatch):
    import functools

    from ascendopt.gate import stages

    # The virtual clock (+-0.3 % jitter): on this machine's wall clock the interpreter's band is often
    # far wider than max_band, and the stage then is rightly inconclusive (exit 6), not a pass.
    monkeypatch.setattr(stages, "run_gate", functools.partial(stages.run_gate, timer=gk.virtual_clock))
    code, out, err = cli("gate", "-w", str(ws), "--json", "--junit", str(ws.parent / "gate.xml"), "--pairs", "12")
    assert code == 0, err
    result = json_payload(out)
    assert result["passed"] and [s["status"] for s in result["stages"]] == ["pass"] * 4
    assert result["inconclusive_stage"] is None and result["failed_stage"] is None
    tensors = result["stages"][1]["data"]["tensors"]
    assert [(t["case"], t["name"], t["passed"]) for t in tensors] == [("tiny/fwd", "y", True),
                                                                     ("tiny_varlen/fwd", "y", True)]
    perf = result["stages"][3]["data"]["comparisons"][0]
    # 12 pairs, extended in steps of 12 (at most 3x) only while noise alone hides a change (bench.compare)
    assert perf["verdict"] == "same" and perf["baseline"]["n"] in (12, 24, 36)
    assert perf["candidate"]["n"] == perf["baseline"]["n"]
    suite = ET.parse(ws.parent / "gate.xml").getroot().find("testsuite")
    names = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]
    assert ("gate.correctness", "tiny_varlen/fwd:y") in names and ("gate.kernel_hit", "_t_scale_kernel") in names
    assert suite.get("failures") == "0" and suite.get("errors") == "0" and suite.get("tests") == str(len(names))


def test_edited_tolerance_is_exit_3_naming_the_field(ws, cli):
    path = ws / "contract.yaml"
    path.write_text(path.read_text().replace("rtol: 0.01\n", "rtol: 0.1\n", 1))
    code, out, err = cli("gate", "-w", str(ws), "--skip-perf", "--json")
    assert code == 3
    assert "contract.yaml: tolerances: changed after freeze" in err
    result = json_payload(out)
    assert [s["status"] for s in result["stages"]] == ["fail", "not-run", "not-run", "not-run"]


def test_changed_oracle_source_is_exit_3(ws, monkeypatch):
    def t_scale_reference(inputs, mode):  # the oracle "edited in place": same module and name, new source
        return {"y": inputs["x"].float() * 2.0 + 0.0}

    t_scale_reference.__module__, t_scale_reference.__qualname__ = "_gate_kernels", "t_scale_reference"
    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, reference=t_scale_reference))
    result = run_gate(Workspace(ws), skip_perf=True)
    assert result.exit_code == 3
    assert "_gate_kernels:t_scale_reference: source changed since freeze" in result.stages[0].summary

    def other_reference(inputs, mode):  # the spec pointed at another oracle
        return {"y": inputs["x"].float() * 2.0}

    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, reference=other_reference))
    result = run_gate(Workspace(ws), skip_perf=True)
    assert result.exit_code == 3 and "no longer the kernel's oracle" in result.stages[0].summary


def test_wrong_kernel_is_exit_1_with_per_tensor_diff(ws, cli, monkeypatch):
    gk.install(monkeypatch, gk.variant("wrong"))
    code, out, err = cli("gate", "-w", str(ws))
    assert code == 1
    # 2.5x vs 2x: |err| / |ref| = 0.25 (bf16 casts round to nearest even, as compiled kernels do: conftest)
    assert "               y diff: 1.406250 ratio: 0.249919" in out
    assert "FAIL (ratio 0.25 > rtol 0.01)" in out
    assert "gate: FAIL at correctness (exit 1)" in out and "faster" not in out


def test_unwritten_region_fails_through_nan_poisoning(ws, monkeypatch):
    gk.install(monkeypatch, gk.variant("unwritten"))
    result = run_gate(Workspace(ws))
    assert result.exit_code == 1 and result.failed_stage.name == "correctness"
    tensor = result.stages[1].data["tensors"][0]
    # tiny: 2*10*32 = 640 elements, BLOCK 64: the last 64 are never stored and stay NaN-poisoned.
    assert tensor["nan_count"] == 64 and "64 of 640 elements NaN/inf" in tensor["reason"]
    assert [s.status for s in result.stages] == ["pass", "fail", "not-run", "not-run"]


def test_a_kernel_that_raises_is_a_red_correctness_stage(ws, cli, monkeypatch):
    """A configuration that cannot run (e.g. a tile over the shared-memory limit) is exit 1, named."""
    gk.install(monkeypatch, gk.variant("raises"))
    code, out, err = cli("gate", "-w", str(ws))
    assert code == 1 and "gate: FAIL at correctness (exit 1)" in out
    assert "the kernel raised RuntimeError: out of resource: shared memory" in out


def test_a_device_fault_stops_with_exit_5_naming_the_configuration(ws, cli, monkeypatch):
    """An illegal memory access poisons the context: nothing after it can be trusted, so no verdict."""
    gk.install(monkeypatch, gk.variant("faults"))
    code, out, err = cli("gate", "-w", str(ws))
    assert code == 5 and "Traceback" not in err
    assert "t_scale at {" in err and "broke the device" in err and "illegal memory access" in err


def test_torch_fallback_is_exit_1_at_kernel_hit(ws, monkeypatch):
    gk.install(monkeypatch, gk.variant("fallback"))
    result = run_gate(Workspace(ws))
    assert [s.status for s in result.stages] == ["pass", "pass", "fail", "not-run"]
    assert result.exit_code == 1
    summary = result.stages[2].summary
    assert "_t_scale_kernel did not run" in summary and "aten::mul" in summary


def test_planted_5_percent_slowdown_is_exit_4_and_aa_passes(ws):
    same = run_gate(Workspace(ws), timer=gk.virtual_clock)
    assert same.exit_code == 0
    assert all(c["verdict"] == "same" for c in same.to_dict()["stages"][3]["data"]["comparisons"])
    slow = run_gate(Workspace(ws), timer=gk.virtual_clock, config_override={"EXTRA": 5})
    assert slow.exit_code == 4 and slow.failed_stage.name == "performance"
    comparisons = slow.to_dict()["stages"][3]["data"]["comparisons"]
    assert all(c["verdict"] == "slower" and 1.04 < c["ratio"] < 1.06 for c in comparisons)
    assert all("speedup" not in c for c in comparisons)  # never a speedup on a red gate
    line = slow.stages[3].checks[0].message
    assert line.startswith("tiny/fwd: baseline ") and "| candidate " in line and "[p20 " in line and "slower" in line


def test_a_noisy_device_makes_the_performance_stage_inconclusive_exit_6(ws, cli, monkeypatch, tmp_path):
    """A band that stays wider than max_band after the extra pairs is no pass: exit 6, INCONCLUSIVE in
    the text, status "inconclusive" in --json, an error element of type inconclusive in JUnit."""
    import functools

    from ascendopt.gate import stages

    gk.noisy_device(monkeypatch)  # +-15 % per launch on the virtual clock
    monkeypatch.setattr(stages, "run_gate", functools.partial(stages.run_gate, timer=gk.virtual_clock))
    code, out, err = cli("gate", "-w", str(ws), "--pairs", "12", "--junit", str(tmp_path / "gate.xml"))
    assert code == 6, out + err
    assert "gate: INCONCLUSIVE at performance (exit 6): noise band ±" in out and "not a pass" in out
    assert "gate: PASS" not in out and "GREEN" not in out and "faster" not in out
    assert "advice: " in out and "--skip-perf" in out
    assert "gate inconclusive at performance" in err and "Traceback" not in err
    suite = ET.parse(tmp_path / "gate.xml").getroot().find("testsuite")
    perf = [c for c in suite.findall("testcase") if c.get("classname") == "gate.performance"]
    assert perf and all(c.find("error") is not None and c.find("error").get("type") == "inconclusive" for c in perf)
    assert suite.get("errors") == str(len(perf)) and suite.get("failures") == "0"

    code, out, err = cli("gate", "-w", str(ws), "--pairs", "12", "--json")
    assert code == 6
    result = json_payload(out)
    assert (result["passed"], result["exit_code"], result["failed_stage"], result["inconclusive_stage"]) == \
        (False, 6, None, "performance")
    stage = result["stages"][3]
    assert stage["status"] == "inconclusive" and stage["exit_code"] == 6
    assert [s["status"] for s in result["stages"][:3]] == ["pass"] * 3
    rule = __import__("ascendopt.judge.bench", fromlist=["DecisionRule"]).DecisionRule()
    for c in stage["data"]["comparisons"]:
        assert c["verdict"] == "inconclusive" and c["threshold_rel"] > rule.max_band and "speedup" not in c
        assert c["baseline"]["n"] == 36  # extended to 3 x 12 pairs before giving up


def test_bad_candidate_tunable_or_too_few_pairs_is_a_usage_error(ws, cli):
    code, out, err = cli("gate", "-w", str(ws), "--set", "BLOCK=48", "--skip-perf")
    assert code == 2 and "tunable BLOCK=48: out of range" in err
    code, out, err = cli("gate", "-w", str(ws), "--pairs", "8")
    assert code == 2 and "--pairs" in err
    with pytest.raises(UsageError, match="at least 12 interleaved pairs"):
        run_gate(Workspace(ws), pairs=10)


def test_low_precision_rule_against_torch_bf16():
    ref = torch.linspace(1.0, 2.0, 256, dtype=torch.float64)
    tol = Tolerance(rtol=0.05)
    torch_bf16 = ref.to(torch.bfloat16)  # torch's own bf16 result: one rounding
    honest = compare_tensor("o", "output", ref.to(torch.bfloat16), ref, torch_bf16, tol, "c")
    assert honest.passed and honest.torch_ratio == pytest.approx(honest.err_ratio)
    # 1 % off: far inside rtol=5 %, but > 2x torch's bf16 distance -> fails on the low-precision rule.
    sloppy = compare_tensor("o", "output", (ref * 1.01).to(torch.bfloat16), ref, torch_bf16, tol, "c")
    assert not sloppy.passed and "2 x torch-bfloat16" in sloppy.reason
    assert sloppy.err_ratio < tol.rtol


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture(scope="module")
def own_repo(tmp_path_factory):
    """A tiny own-code repository (op + test + workload), committed and frozen once."""
    from conftest import run_cli

    root = tmp_path_factory.mktemp("own") / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "op.py").write_text(textwrap.dedent("""\
        import time

        DELAY_S = 0.002  # stands in for the kernel's device time


        def my_op(x):
            time.sleep(DELAY_S)
            return x * 2
        """))
    (root / "naive.py").write_text("def my_op_reference(x):\n    return x * 2\n")
    (root / "tests" / "test_op.py").write_text(textwrap.dedent("""\
        import torch
        from naive import my_op_reference
        from op import my_op


        def test_doubles():
            x = torch.ones(3)
            assert my_op(x).tolist() == my_op_reference(x).tolist()
        """))
    (root / "bench.py").write_text(textwrap.dedent("""\
        import torch
        from op import my_op

        x = torch.ones(8)


        def workload():
            with torch.profiler.record_function("my_op_kernel"):
                my_op(x)
        """))
    _git(root, "init", "-q")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "baseline")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        mp.chdir(root)
        code, out, err = run_cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                                 "--kernel-filter", "my_op_kernel", "--reference", "naive.py")
    assert code == 0, err
    return root


@pytest.fixture
def repo(own_repo, tmp_path, monkeypatch):
    copy = tmp_path / "repo"
    shutil.copytree(own_repo, copy)
    monkeypatch.chdir(copy)
    return copy


def test_own_code_gate_passes_against_its_frozen_commit(repo, cli):
    code, out, err = cli("gate", "--json")
    assert code == 0, err
    result = json_payload(out)
    perf = result["stages"][3]["data"]["comparisons"][0]
    assert perf["case"] == "bench.py" and perf["verdict"] != "slower"
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # the temporary baseline worktree was removed


def test_own_code_edited_frozen_test_is_exit_3(repo, cli):
    test = repo / "tests" / "test_op.py"
    test.write_text(test.read_text().replace("== my_op_reference(x).tolist()", "is not None"))
    code, out, err = cli("gate", "--skip-perf")
    assert code == 3 and "tests/test_op.py: frozen test file changed since freeze" in err


def test_own_code_edited_reference_is_exit_3(repo, cli):
    (repo / "naive.py").write_text("def my_op_reference(x):\n    return x * 3\n")
    code, out, err = cli("gate", "--skip-perf")
    assert code == 3 and "naive.py: frozen reference file changed since freeze" in err


def test_own_code_failing_test_is_exit_1_and_listed(repo, cli):
    op = repo / "op.py"
    op.write_text(op.read_text().replace("return x * 2", "return x * 3"))
    code, out, err = cli("gate", "--skip-perf")
    assert code == 1
    assert ("tests/test_op.py::test_doubles: failed (passed at freeze)\n    at tests/test_op.py:8\n"
            "    E       assert [3.0, 3.0, 3.0] == [2.0, 2.0, 2.0]") in out  # the test's own error lines
    assert "1 frozen test(s) not passing: tests/test_op.py::test_doubles (failed)" in err


def test_own_code_planted_slowdown_is_exit_4(repo, cli):
    op = repo / "op.py"
    op.write_text(op.read_text().replace("DELAY_S = 0.002", "DELAY_S = 0.004"))  # 2x the "kernel" time
    code, out, err = cli("gate")  # 30 pairs: 10 cannot reach p < 0.002 once a loaded host swaps one pair
    assert code == 4, out + err
    assert "bench.py: baseline " in out and "slower" in out and "speedup" not in out
    assert "gate: FAIL at performance (exit 4)" in out


def test_worker_protocol_keeps_workload_prints_out_of_the_pipe(tmp_path):
    (tmp_path / "w.py").write_text("print('noise from module code')\ndef workload():\n    print('noise')\n")
    proc = subprocess.run([sys.executable, "-I", "-m", "ascendopt.judge.worker", str(tmp_path / "w.py"), "--path",
                           str(tmp_path)],
                          input=b'{"cmd": "null"}\n{"cmd": "prepare", "calls": 3}\n{"cmd": "go"}\n'
                                b'{"cmd": "check", "full": true, "audit": 0}\n{"cmd": "exit"}\n', capture_output=True,
                          cwd=tmp_path, timeout=120)
    replies, data = [], proc.stdout
    while data:  # one JSON line a reply, then the bytes it announces (``nbytes``)
        line, _, data = data.partition(b"\n")
        reply = json.loads(line)
        data = data[int(reply.get("nbytes", 0)):]
        replies.append(reply)
    assert [sorted(r) for r in replies] == [["bound", "reader"], ["inputs", "ready", "shapes"], [], [],
                                            ["in", "ms", "out"], ["nbytes", "outputs"]]
    assert replies[4]["out"]["tree"] == {"l": [{"v": None}] * 3}  # three calls, each returned None
    assert b"noise" in proc.stderr


def test_end_to_end_on_bundled_rms_norm(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("freeze", "--kernel", "rms_norm", "--shapes", "tiny", "--mode", "fwd", "-w", "ws")
    assert code == 0, err
    code, out, err = cli("gate", "-w", "ws", "--skip-perf", "--json")
    assert code == 0, err
    result = json_payload(out)
    assert [s["status"] for s in result["stages"]] == ["pass", "pass", "pass", "skipped"]
    (tensor,) = result["stages"][1]["data"]["tensors"]
    assert tensor["name"] == "y" and tensor["passed"] and tensor["torch_ratio"] > 0
    checks = result["stages"][2]["checks"]
    assert checks[0] == {"name": "_rms_norm_fwd_kernel", "passed": True, "message": "seen"}
    # and the census of the call against the frozen one (judge.kernel_hit.judge_census)
    assert [c["name"] for c in checks[1:3]] == ["expected share", "host time"] and all(c["passed"] for c in checks)
    assert result["stages"][2]["data"]["census"]["kernels"]["_rms_norm_fwd_kernel"]["calls"] >= 1
    assert "launch counts" not in [c["name"] for c in checks]  # as many launches per call as at freeze


def test_kernel_hit_on_npu_reads_the_torch_npu_profile(fake_torch_npu, monkeypatch):
    from ascendopt.gate.stages import missing_kernels, observed_kernels

    monkeypatch.setenv("ASCENDOPT_BACKEND", "npu")
    seen = observed_kernels(lambda: None)  # the fake writes real kernel_details.csv rows from an A2 capture
    assert "aclnnMm_MatMulCommon_MatMulV2" in seen
    # substring match: device names carry op-type suffixes; a name absent from the profile is reported
    assert missing_kernels(("MatMulV2", "_rms_norm_fwd_kernel"), seen) == ["_rms_norm_fwd_kernel"]


def test_speedup_only_for_a_measured_faster_on_a_green_gate():
    from ascendopt.gate.result import GateResult
    from ascendopt.gate.stages import _performance_result
    from ascendopt.judge import bench
    from ascendopt.judge.result import StageResult

    base = [1.0 + 0.001 * (i % 3) for i in range(20)]
    faster = bench.decide(base, [b * 0.8 for b in base])
    same = bench.decide(base, list(base))
    perf = _performance_result([("a", faster), ("b", same)])
    green = GateResult([StageResult("integrity", "pass", ""), perf]).to_dict()
    reported = {c["case"]: c for c in green["stages"][1]["data"]["comparisons"]}
    assert reported["a"]["speedup"] == pytest.approx(1.25) and "speedup" not in reported["b"]
    red = GateResult([StageResult("integrity", "fail", "x"), perf]).to_dict()
    assert all("speedup" not in c for c in red["stages"][1]["data"]["comparisons"])


def _keep_round(ws, config):
    """Record round 1 as a kept round at ``config`` (what optimize-round writes after a keep)."""
    from ascendopt.rounds.context import RoundContext
    from ascendopt.rounds.records import RoundRecord, StopDecision, save_round

    side = {"median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0, "mean_ms": 1.0, "cv": 0.01, "n": 12}
    record = RoundRecord(number=1, hypothesis="kept for the test", direction="EXTRA",
                         change={"kind": "tunables", "set": dict(config), "config": dict(config)},
                         gate={"passed": True, "exit_code": 0, "failed_stage": None}, verdict="keep",
                         stop=StopDecision(False, None, "continue"), environment="Device: cpu",
                         timing={"cases": [{"case": "tiny", "baseline": side, "best": side, "candidate": side}],
                                 "ratio_vs_baseline": 0.9, "ratio_vs_best": 0.9},
                         contract_digest=RoundContext.load(Workspace(ws)).contract_digest)
    save_round(Workspace(ws), record)


def test_plain_gate_times_the_best_kept_configuration_and_set_overrides_it(ws, cli, monkeypatch):
    """After a keep, plain `gate` times the kept tunables (and says so); `--set` replaces them. The status line
    prints NAME=VALUE, never a Python dict, and the verdict's words agree with its sign."""
    import functools
    import re

    from ascendopt.gate import stages

    monkeypatch.setattr(stages, "run_gate", functools.partial(stages.run_gate, timer=gk.virtual_clock))
    code, out, err = cli("gate", "-w", str(ws))  # no round yet: the frozen configuration against itself
    assert code == 0, err
    assert "candidate = baseline = BLOCK=64, EXTRA=0 (the frozen configuration, no round was kept" in err
    assert "A/A check" in err
    _keep_round(ws, {"BLOCK": 64, "EXTRA": 5})  # the kept configuration is the planted 5 % slowdown
    code, out, err = cli("gate", "-w", str(ws))
    assert code == 4, err  # so timing it is red: the gate timed the kept tunables, not the frozen ones
    assert "{'" not in err and "{'" not in out
    assert "baseline BLOCK=64, EXTRA=0 vs candidate BLOCK=64, EXTRA=5 (best kept configuration, round 1" in err
    assert "note: candidate: best kept configuration, round 1 (--set overrides it): BLOCK=64, EXTRA=5" in err
    verdicts = re.findall(r"\| (\d+\.\d)% (less|more) time: (faster|slower|same) \(change ([+-]\d+\.\d+)%", out)
    assert verdicts, out
    for percent, word, verdict, signed in verdicts:
        assert (word == "more") == (float(signed) > 0) and abs(float(percent) - abs(float(signed))) < 0.06
        assert verdict != {"more": "faster", "less": "slower"}[word]  # "more time" is never called faster
    assert {v[2] for v in verdicts} == {"slower"}
    code, out, err = cli("gate", "-w", str(ws), "--set", "EXTRA=0")
    assert code == 0, err
    assert "candidate = baseline = BLOCK=64, EXTRA=0 (the given tunables over the frozen configuration)" in err
