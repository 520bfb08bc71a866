"""benchmarks/advisor_compare.py without the advisor: reading its workbook lines and judging ascendopt's verdicts.

The workbook rows below are lines msprof-analyze 26.2.0 wrote for tests/data/ascend/advisor_pipe and level1_cnn
(its "set of bound operators" / "set of unaffine operators" cells, one line each); the full comparison runs the
advisor itself (benchmarks/RESULTS.md).
"""

import _benchmarks
from ascendopt.analyze.diagnosis import analyze
from ascendopt.analyze.traces import load_profile
from profile_variants import ASCEND

ac = _benchmarks.load("advisor_compare")

BOOK = {
    "problems": [["category"], ["Cube Operator Perf Analysis"], ["Vector Operator Perf Analysis"]],
    "Cube Operator Perf Analysis": [
        ["Type", "Description"],
        ["set of bound operators", "aclnnMatmul_MatMulCommon_MatMulV2 Op shape: 81920,4096;8192,512 dtype: "
                                   "DT_BF16;DT_BF16 bound type: mac_and_mte2_bound bound\n"],
        ["set of unaffine operators", "aclnnMatmul_MatMulV3Common_MatMulV5 Op shape: 8192,15365;8192,4096 dtype: "
                                      "DT_BF16;DT_BF16 with disaffection characteristics: Then inner axis is not "
                                      "divisible by 256\n"],
    ],
    "Vector Operator Perf Analysis": [
        ["Type", "Description"],
        ["set of bound operators", "trans_TransData_0 Op shape: 32,3,224,224 dtype: FLOAT bound type: "
                                   "vec_mte2_mte3 bound\n"],
    ],
}


def test_workbook_lines_are_read():
    found = ac.advisor_findings(BOOK)
    assert [(b["name"], b["bound"], b["shape"]) for b in found["bound"]] == [
        ("aclnnMatmul_MatMulCommon_MatMulV2", "mac_and_mte2", "81920,4096;8192,512"),
        ("trans_TransData_0", "vec_mte2_mte3", "32,3,224,224")]
    assert [(u["name"], u["shape"]) for u in found["unaffine"]] == [
        ("aclnnMatmul_MatMulV3Common_MatMulV5", "8192,15365;8192,4096")]
    assert found["problems"] == ["Cube Operator Perf Analysis", "Vector Operator Perf Analysis"]


def test_verdicts_on_real_reports():
    found = ac.advisor_findings(BOOK)
    advisor = analyze(load_profile(ASCEND / "advisor_pipe"), top=None)
    assert ac.verdict(found["bound"][0], advisor)["status"] == "same class"  # compute_memory_tie
    level1 = analyze(load_profile(ASCEND / "level1_cnn"), top=None)
    assert ac.verdict(found["bound"][1], level1)["status"] == "same class"  # memory_combined_bound
    # a kernel ascendopt leaves without a pipe class and without a reason is what the check fails on
    no_class = {"kernels": [dict(k, bound="no_dominant_pipe", findings=[], shapes=[])
                            for k in level1["kernels"] if k["name"] == "trans_TransData_0"]}
    assert ac.verdict(found["bound"][1], no_class)["status"] == "UNCLASSIFIED"
    assert ac.verdict({**found["bound"][1], "name": "not_there"}, level1)["status"] == "MISSING"
