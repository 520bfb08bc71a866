"""configs/rules.yaml validation and classification of real fixture rows.

Kernel inputs are rows of the real fixtures (read through the readers); where a core-use case
has no real row, one field of a real row is changed and the test says so.
"""

import math

import pytest

from ascendopt.analyze.rules import classify, load_rules, parse_rules
from ascendopt.analyze.traces import load_profile
from ascendopt.analyze.traces.columns import ASCEND_COLUMNS, NCU_METRICS
from ascendopt.errors import UsageError
from profile_variants import ASCEND

A2 = {"cube_cores": 24, "vector_cores": 48, "sources": {"cube_cores": "test", "vector_cores": "test"}}


def kernel_of(fixture, name, **override):
    """The first row named ``name`` of a real fixture as classify() input."""
    profile = load_profile(ASCEND / fixture)
    row = profile.kernels[profile.kernels["name"].astype(str) == name].iloc[0]
    metrics = {c: (None if math.isnan(row[c]) else float(row[c])) for c in profile.metric_columns}
    kernel = {"core_type": str(row["core_type"]), "avg_us": float(row["duration_us"]),
              "block_dim": float(row["block_dim"]), "metrics": metrics}
    kernel.update(override)
    return kernel


def test_rules_yaml_is_complete_and_every_number_has_an_origin():
    rules = load_rules()
    assert all(t.origin and len(t.origin) > 10 for t in rules.thresholds.values())
    known = set(ASCEND_COLUMNS.values()) | set(NCU_METRICS) | {"ub_bw_vector_gbs", "vector_pipe_sum_ratio"}
    for rule in rules.pipe_rules:
        assert rule.levers and rule.checks
        assert {c.column for c in rule.checks} <= known, rule.name
    for rule in rules.derived.values():
        assert rule.levers


def test_bad_rules_yaml_names_the_field():
    good = {"schema": 1, "thresholds": {"x": {"value": 0.5, "origin": "o"}},
            "classes": {"c": {"checks": [{"column": "vec_ratio", "threshold": "nope"}], "levers": ["l"]}}}
    with pytest.raises(UsageError, match=r"classes -> c -> checks\[0\]: unknown threshold 'nope'"):
        parse_rules(good)
    with pytest.raises(UsageError, match="thresholds -> x: needs value and origin"):
        parse_rules({"schema": 1, "thresholds": {"x": {"value": 1}}})
    with pytest.raises(UsageError, match="schema"):
        parse_rules({"schema": 2})


def test_bad_levers_natures_and_patterns_name_the_field():
    import copy

    import yaml

    from ascendopt.device.config import config_dir

    base = yaml.safe_load((config_dir() / "rules.yaml").read_text())
    bad = copy.deepcopy(base)
    bad["classes"]["cube_bound"]["nature"] = "speed"
    with pytest.raises(UsageError, match="classes -> cube_bound -> nature: expected compute, memory or other"):
        parse_rules(bad)
    bad = copy.deepcopy(base)
    bad["classes"]["mte2_bound"]["levers"][0] = {"origin": "o"}
    with pytest.raises(UsageError, match=r"classes -> mte2_bound -> levers\[0\]: expected text"):
        parse_rules(bad)
    bad = copy.deepcopy(base)
    bad["communication"]["pattern"] = "(allreduce"
    with pytest.raises(UsageError, match="communication / kinds: bad pattern"):
        parse_rules(bad)
    bad = copy.deepcopy(base)
    del bad["thresholds"]["near_tie_margin"]
    with pytest.raises(UsageError, match="thresholds: missing near_tie_margin"):
        parse_rules(bad)


def test_mte2_bound_vector_kernel_from_level1():
    # raw row: aiv_mte2_ratio 0.98 on the first ForeachAddList launch, vec 0.06 (vector_operators 0.7)
    result = classify(kernel_of("level1_cnn", "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList"),
                      kind="npu", device=A2, rules=load_rules())
    assert result.bound == "mte2_bound"
    ev = result.findings[0].evidence[0]
    assert ev["column"] == "vector_mte2_ratio" and ev["value"] > 0.7 and ev["threshold"] == 0.7
    assert "msprof-analyze" in ev["origin"]
    assert any("reuse" in lever for lever in result.levers)


def test_cube_bound_matmul_from_advisor_and_core_underuse():
    # raw row: aic_mac_ratio 0.824 and aic_mte2_ratio 0.964, Block Dim 16 on a 20-core part (advisor_pipe,
    # back-solved 20 cores). Both pipes are past their bounds; the larger ratio (MTE2) is the primary class.
    device = {"cube_cores": 20, "vector_cores": 40}
    result = classify(kernel_of("advisor_pipe", "aclnnMatmul_MatMulCommon_MatMulV2"), kind="npu", device=device,
                      rules=load_rules())
    assert result.bound == "mte2_bound" and result.evidence["cube_mte2_ratio"] == pytest.approx(0.964)
    assert [f.cls for f in result.findings][:2] == ["mte2_bound", "cube_bound"]
    assert result.evidence["mac_ratio"] == pytest.approx(0.824)
    under = next(f for f in result.findings if f.cls == "core_underuse")
    assert under.evidence[0]["value"] == 16 and under.evidence[0]["threshold"] == 20


def test_scalar_bound_compiler_kernel_with_tail_wave():
    # raw: aiv_scalar_ratio 0.999, Block Dim 256 on 24 cube cores -> 11 waves, last one 16/24 full
    result = classify(kernel_of("msprof_op_summary", "main_kernel"), kind="msprof", device=A2, rules=load_rules())
    assert result.bound == "scalar_bound" and result.evidence["vector_scalar_ratio"] == pytest.approx(0.999)
    tail = next(f for f in result.findings if f.cls == "tail_wave").evidence[0]
    assert tail["waves"] == math.ceil(256 / 24)
    assert tail["last_wave_fill"] == pytest.approx((256 - 10 * 24) / 24, abs=1e-4)


def test_vector_kernel_on_cube_core_count():
    # real trans_TransData_0 row (Block Dim 32) with Block Dim changed to 24 = num_aicore
    result = classify(kernel_of("level1_cnn", "trans_TransData_0", block_dim=24.0), kind="npu", device=A2,
                      rules=load_rules())
    assert [f.cls for f in result.findings if f.cls == "vector_on_cube_cores"]
    assert any("num_vectorcore" in lever for lever in result.levers)


def test_grid_over_cap():
    # real main_kernel row with Block Dim changed to 70000
    result = classify(kernel_of("msprof_op_summary", "main_kernel", block_dim=70000.0), kind="msprof", device=A2,
                      rules=load_rules())
    cap = next(f for f in result.findings if f.cls == "grid_cap").evidence[0]
    assert cap["value"] == 70000 and cap["threshold"] == 65535


def test_short_kernel_without_busy_pipe_is_latency_bound():
    # trans_TransData_1: 6.54 us, highest ratio aiv_scalar 0.512 (< 0.8), below the 20 us floor
    result = classify(kernel_of("level1_cnn", "trans_TransData_1"), kind="npu", device=A2, rules=load_rules())
    assert result.bound == "latency_bound"
    assert result.findings[0].evidence[0] == {**result.findings[0].evidence[0], "column": "avg_us", "value": 6.54}


def test_no_counters_is_not_a_class_guess():
    result = classify(kernel_of("level0_cnn", "trans_TransData_0"), kind="npu", device=A2, rules=load_rules())
    assert result.bound == "no_counters" and result.evidence == {}


def test_null_threshold_is_not_evaluated():
    # MemoryUB vector block of the real msprof op file: ub bandwidth known, no UB peak set
    result = classify(kernel_of("msprof_op_memory_ub", "OPPROF_001", metrics={"ub_bw_vector_gbs": 1e9}),
                      kind="msprof-op", device=A2, rules=load_rules())
    assert "ub_bandwidth_bound" not in {f.cls for f in result.findings}


def test_cuda_classes_only_for_cuda():
    kernel = {"core_type": "cuda", "avg_us": 170.0, "block_dim": 132, "metrics": {"mac_ratio": 0.95}}
    assert classify(kernel, kind="cuda", device={}, rules=load_rules()).bound == "tensor_bound"
    assert classify(kernel, kind="npu", device=A2, rules=load_rules()).bound == "cube_bound"
