"""Issue 28 (diagnosis that says the wrong thing): which pipe dominates is named separately from whether it
reaches msprof-analyze's saturation bound; values are printed with enough digits to show which side of their
bound they are; levers are ones the profile's backend can follow; a bad ``ASCENDOPT_CHIP`` is exit 2.

Expected values are worked out from the raw CSV rows (csv module), never copied from ascendopt's output.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ascendopt.analyze.diagnosis import analyze
from ascendopt.analyze.rules import classify, decimals_against, load_rules, sentence, shown_against
from ascendopt.analyze.traces import load_profile
from profile_variants import ASCEND, LEVEL1, read_rows

PIPES = ("aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio")


def _rows(name):
    rows, _ = read_rows(LEVEL1)
    head = rows[0]
    return [dict(zip(head, r, strict=True)) for r in rows[1:] if len(r) == len(head) and r[head.index("Name")] == name]


def _weighted(rows, column):
    w = [float(r["Duration(us)"]) for r in rows]
    return sum(float(r[column]) * x for r, x in zip(rows, w, strict=True)) / sum(w)


@pytest.fixture(scope="module")
def level1():
    return {k["name"]: k for k in analyze(load_profile(ASCEND / "level1_cnn"), top=None)["kernels"]}


@pytest.mark.parametrize("name", ["aclnnMm_MatMulCommon_MatMulV2", "aclnnAddmm_MatMulCommon_MatMulV2"])
def test_a_matmul_whose_mte2_leads_below_the_bound_is_named_mte2(level1, name):
    """The real level1_cnn MatMulV2 kernels: MTE2 0.86 / 0.91 (below the matmul bound 0.95), every other pipe
    at most 0.32. Before: "No dominant pipe (all ratios below the bound)"."""
    rows = _rows(name)
    means = {c: _weighted(rows, c) for c in PIPES}
    others = [v for c, v in means.items() if c != "aic_mte2_ratio"]
    assert 0.83 <= means["aic_mte2_ratio"] < 0.95 and max(others) <= 0.33  # the pattern, in a real file
    k = level1[name]
    assert k["bound"] == "mte2_bound" and k["saturated"] is False
    assert "MTE2 leads" in k["bound_label"] and "not saturated" in k["bound_label"]
    dom = k["dominant_pipe"]
    assert dom["column"] == "cube_mte2_ratio" and dom["leads"] is True and dom["saturated"] is False
    assert dom["value"] == pytest.approx(means["aic_mte2_ratio"], abs=1e-6)
    assert dom["next_value"] == pytest.approx(max(others), abs=1e-6)
    assert dom["bound"] == 0.95
    texts = [e["text"] for f in k["findings"] if f["class"] == "mte2_bound" for e in f["evidence"]]
    assert any("leads" in t for t in texts) and any("below the bound 0.95" in t for t in texts)
    assert not any(f["class"] == "no_dominant_pipe" for f in k["findings"])


def test_a_saturated_pipe_says_so(level1):
    """Control: ForeachAddList's vector MTE2 reaches its bound 0.7: the same class, saturated."""
    name = "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList"
    k = next(v for n, v in level1.items() if n.startswith("aclnnForeachAddListV2"))
    rows = _rows(k["name"])
    assert _weighted(rows, "aiv_mte2_ratio") >= 0.7, name
    assert k["bound"] == "mte2_bound" and k["saturated"] is True and k["dominant_pipe"]["saturated"] is True
    assert k["bound_label"].startswith("MTE2-bound")


def test_no_clear_lead_stays_no_dominant_pipe(level1):
    """Control: Conv2DBackpropFilter10's MTE1 is under twice the next pipe: no pipe is named."""
    rows = _rows("Conv2DBackpropFilter10")
    means = sorted((_weighted(rows, c) for c in PIPES), reverse=True)
    assert means[0] < 2 * means[1] and means[0] < 0.8
    k = level1["Conv2DBackpropFilter10"]
    assert k["bound"] == "no_dominant_pipe" and k["saturated"] is None
    assert k["dominant_pipe"]["leads"] is False
    assert any("does not clearly lead" in e["text"] for f in k["findings"] for e in f["evidence"])


# -- one precision rule: printed values show which side of the bound they are on --------------------------

def test_a_value_just_below_its_bound_is_printed_with_the_digits_that_show_it():
    rules = load_rules()
    thr = rules.thresholds["matmul_mte2_bound"]
    text = sentence("cube_mte2_ratio", 0.9496, "<", thr)
    assert text == "cube MTE2 ratio 0.9496 is below the bound 0.95"
    assert sentence("cube_mte2_ratio", 0.95, ">=", thr) == "cube MTE2 ratio 0.950 reaches the bound 0.95"
    assert shown_against(0.94999999, 0.95).startswith("0.9499999") and decimals_against(0.8623, 0.95) == 3
    kernel = {"name": "aclnnMm_MatMulCommon_MatMulV2", "op_type": "MatMulV2", "core_type": "cube", "avg_us": 80.0,
              "metrics": {"cube_mte2_ratio": 0.9496, "mac_ratio": 0.7}}
    result = classify(kernel, kind="npu", device={}, rules=rules)
    texts = [e["text"] for f in result.findings for e in f.evidence]
    assert not any("0.950 is below" in t for t in texts) and any("0.9496 is below the bound 0.95" in t for t in texts)
    ev = next(e for f in result.findings for e in f.evidence if e["op"] == "<")
    assert ev["value"] < ev["threshold"]  # the JSON value, too, is on the side the comparison found


# -- levers the profile's backend can follow -----------------------------------------------------------------

def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ascendopt", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_a_cpu_profile_is_not_told_to_collect_pipeutilization(tmp_path):
    """A real CPU collect with ``--aic-metrics pipe,ub`` (two runs, as on the issue's machine), then analyze."""
    cpu = {"ASCENDOPT_BACKEND": "cpu"}
    proc = _run("collect", "--kernel", "chunk_local_cumsum", "--shapes", "tiny", "--aic-metrics", "pipe,ub",
                "--out-dir", str(tmp_path / "p"), env=cpu)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folders = sorted(str(p) for p in (tmp_path / "p").iterdir())
    assert len(folders) == 2
    proc = _run("analyze", *folders, env=cpu)
    assert proc.returncode == 0, proc.stderr
    assert "collect PipeUtilization first" not in proc.stdout
    assert "has no hardware counters" in proc.stdout and "npu or cuda profile" in proc.stdout


def test_an_npu_profile_without_counters_still_is():
    """Control: a Level0 capture (no PMU counters) on NPU keeps the NPU advice."""
    proc = _run("analyze", str(ASCEND / "level0_cnn"), "--top", "1")
    assert proc.returncode == 0, proc.stderr
    assert "collect PipeUtilization first" in proc.stdout and "has no hardware counters" not in proc.stdout


# -- one validation of the chip name -------------------------------------------------------------------------

def test_an_unknown_chip_in_the_environment_is_a_usage_error():
    proc = _run("analyze", str(ASCEND / "level1_cnn"), "--top", "1", env={"ASCENDOPT_CHIP": "bogus"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ASCENDOPT_CHIP='bogus': unknown chip") and "Traceback" not in proc.stderr
    assert "Ascend910B2" in proc.stderr and "device: chip bogus" not in proc.stdout


def test_a_known_chip_alias_in_the_environment_is_accepted():
    proc = _run("analyze", str(ASCEND / "level1_cnn"), "--top", "1", env={"ASCENDOPT_CHIP": "910b4"})
    assert proc.returncode == 0, proc.stderr
    assert "device: chip Ascend910B4" in proc.stdout


def test_a_cuda_profile_without_counters_gets_cuda_advice(tmp_path):
    """A CUDA trace without its Nsight Compute file: the advice names ncu, never MemoryUB (an Ascend group)."""
    import shutil

    from conftest import DATA

    shutil.copy(DATA / "cuda" / "trace.json", tmp_path / "trace.json")
    report = analyze(load_profile(tmp_path))
    levers = [lever for k in report["kernels"] for lever in k["levers"]]
    assert report["kind"] == "cuda" and levers
    assert all("Nsight Compute" in lever for lever in levers) and not any("MemoryUB" in lever for lever in levers)
