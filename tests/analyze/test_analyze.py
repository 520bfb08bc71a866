"""`analysis.analyze` / `compare` and `ascendopt analyze` on the real fixtures.

Shares and metrics are spot-checked against numbers computed here by hand from the raw CSV rows
(csv module) and against the profiler's own op_statistic.csv.
"""

import json

import pytest

from _cli_json import json_payload
from ascendopt.analyze.diagnosis import analyze, compare
from ascendopt.analyze.traces import load_profile
from ascendopt.errors import UsageError
from profile_variants import ASCEND, CUDA, LEVEL1, read_rows

FOREACH = "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList"


def raw_records(path):
    rows, _ = read_rows(path)
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:] if len(r) == len(rows[0])]


def test_shares_match_raw_durations_and_op_statistic():
    report = analyze(load_profile(ASCEND / "level1_cnn"))
    recs = raw_records(LEVEL1)
    compute = [r for r in recs if r["Accelerator Core"] != "HCCL"]
    total = sum(float(r["Duration(us)"]) for r in compute)
    assert report["total_us"]["npu:0"] == pytest.approx(total)
    assert total == pytest.approx(8873.75, abs=0.02)  # op_statistic's Total Time(us) sums to 8873.75
    foreach = [r for r in compute if r["Name"] == FOREACH]
    top = report["kernels"][0]
    assert top["name"] == FOREACH and top["count"] == len(foreach) == 3
    assert top["total_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in foreach))
    assert top["share"] == pytest.approx(top["total_us"] / total)
    # op_statistic.csv: ForeachAddList, AI_VECTOR_CORE, Ratio(%) 22.077
    op_statistic = ASCEND / "level1_cnn" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    stats = {r["OP Type"]: r for r in raw_records(op_statistic)}
    assert 100 * top["share"] == pytest.approx(float(stats["ForeachAddList"]["Ratio(%)"]), abs=0.01)
    assert sum(k["share"] for k in report["kernels"]) == pytest.approx(1.0)
    kernel_totals = [k["total_us"] for k in report["kernels"]]
    assert kernel_totals == sorted(kernel_totals, reverse=True)
    assert report["communication"]["count"] == 4
    assert report["op_types"][0]["source"] == "op_statistic.csv"
    assert report["op_types"][0]["op_type"] == "ForeachAddList"


def test_metrics_are_duration_weighted_means_of_raw_rows():
    report = analyze(load_profile(ASCEND / "level1_cnn"), kernel_filter=FOREACH)
    rows = [r for r in raw_records(LEVEL1) if r["Name"] == FOREACH]
    w = [float(r["Duration(us)"]) for r in rows]
    mte2 = sum(float(r["aiv_mte2_ratio"]) * x for r, x in zip(rows, w, strict=True)) / sum(w)
    (k,) = report["kernels"]
    assert k["metrics"]["vector_mte2_ratio"] == pytest.approx(mte2)
    assert k["metrics"]["mac_ratio"] is None  # aic_* is 0 on a vector kernel: not applicable, not 0
    assert k["bound"] == "mte2_bound" and k["evidence"]["vector_mte2_ratio"] == pytest.approx(mte2)
    assert mte2 > 0.7  # the vector_operators mte2 threshold, by hand


def test_json_shape_keys():
    report = analyze(load_profile(ASCEND / "advisor_pipe"), top=3)
    assert report["schema"] == 1
    assert set(report) >= {"profile", "device", "metric_groups", "not_collected", "kernels"}
    for k in report["kernels"]:
        assert set(k) >= {"name", "core_type", "count", "total_us", "avg_us", "share", "bound", "evidence",
                          "metrics", "levers"}
        assert 0 < k["share"] <= 1 and k["levers"]
    assert "source" in report["device"]


def test_level0_reports_metrics_as_not_collected():
    report = analyze(load_profile(ASCEND / "level0_cnn"), top=2)
    assert report["metric_groups"] == [] and "PipeUtilization" in report["not_collected"]
    assert all(k["metrics"] == {} and k["bound"] == "no_counters" for k in report["kernels"])


def test_compiler_kernel_share_and_scalar_class():
    report = analyze(load_profile(ASCEND / "msprof_op_summary"))
    (k,) = report["kernels"]
    assert k["share"] == 1.0 and k["count"] == 3 and k["bound"] == "scalar_bound"
    assert k["avg_us"] == pytest.approx((87139.38 + 86808.42 + 86846.72) / 3)


def test_cuda_report_classes():
    report = analyze(load_profile(CUDA))
    by_name = {k["name"]: k for k in report["kernels"]}
    assert by_name["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]["bound"] == "tensor_bound"
    assert by_name["_axpb_kernel"]["bound"] == "memory_bound"  # L2 throughput ~87 % of peak


def test_filter_substring_regex_and_no_match():
    profile = load_profile(ASCEND / "level1_cnn")
    assert {k["name"] for k in analyze(profile, kernel_filter="MatMul")["kernels"]} == \
        {k["name"] for k in analyze(profile)["kernels"] if "MatMul" in k["name"] or "MatMul" in k["op_type"]}
    regex = analyze(profile, kernel_filter="regex:^trans_TransData_\\d+$")["kernels"]
    assert regex and all(k["name"].startswith("trans_TransData_") for k in regex)
    with pytest.raises(UsageError, match="closest names: .*ForeachAddList"):
        analyze(profile, kernel_filter="ForeachAdList")  # typo
    with pytest.raises(UsageError, match="not a valid regular expression"):
        analyze(profile, kernel_filter="regex:(")


def test_fallback_finding_when_target_owns_little_time():
    # trans_TransData_1: one 6.54 us launch of 8873 us; level1 has many other short kernels
    report = analyze(load_profile(ASCEND / "level1_cnn"), kernel_filter="regex:^trans_TransData_1$")
    (finding,) = report["findings"]
    assert finding["class"] == "fallback_unfused"
    assert finding["evidence"][0]["value"] == pytest.approx(6.54 / report["total_us"]["npu:0"], rel=1e-4)


def test_compare_two_real_profiles_level0_vs_level1():
    before = analyze(load_profile(ASCEND / "level0_cnn"))
    after = analyze(load_profile(ASCEND / "level1_cnn"))
    # the same CNN step at Level0 (no core types, no counters) and Level1: paired by name
    diff = compare(before, after)
    assert len(diff["kernels"]) == before["kernel_count"] == after["kernel_count"] and not diff["only_in_a"]
    foreach = next(k for k in diff["kernels"] if k["name"] == FOREACH)
    assert foreach["avg_us_delta"] == pytest.approx(after["kernels"][0]["avg_us"] - before["kernels"][0]["avg_us"])
    assert foreach["metrics"] == {} and "vec_ratio" in foreach["not_comparable"]  # one side has no counters
    same = compare(after, analyze(load_profile(ASCEND / "level1_cnn")))
    assert all(k["avg_us_delta"] == 0 and k["avg_us_ratio"] == 1 for k in same["kernels"])
    assert all(m["delta"] == 0 for k in same["kernels"] for m in k["metrics"].values())


def test_compare_merged_metric_run_shows_metric_delta(tmp_path):
    from profile_variants import derive, set_cell

    rows, _ = read_rows(LEVEL1)
    i = next(j for j, r in enumerate(rows) if r[rows[0].index("Name")] == FOREACH)
    # the same real file with one launch's aiv_mte2_ratio lowered: did the metric move?
    run = derive(LEVEL1, tmp_path / "after", set_cell(i, "aiv_mte2_ratio", "0.5"))
    before = analyze(load_profile(ASCEND / "level1_cnn"), kernel_filter=FOREACH)
    after = analyze(load_profile(run.parent.parent), kernel_filter=FOREACH)
    (k,) = compare(before, after)["kernels"]
    assert k["metrics"]["vector_mte2_ratio"]["delta"] < 0 and k["avg_us_delta"] == 0


# -- the command ------------------------------------------------------------------------------------

def test_cli_table_output(cli):
    code, out, err = cli("analyze", str(ASCEND / "level1_cnn"), "--top", "3")
    assert code == 0, err
    assert "hotspots" in out and FOREACH[:30] in out and "22.1%" in out
    # ForeachAddList is a CANN op (Type ForeachAddList, aclnn name): vendor-op levers, not Triton-source ones
    assert "mte2_bound" in out and "lever [mte2_bound]: a vendor op waiting on memory" in out
    assert "more reuse of loaded tiles" not in out
    assert "not collected: ArithmeticUtilization" in out


def test_nan_and_numpy_scalars_become_plain_json_values():
    import math

    import numpy as np

    from ascendopt.console import dumps_json, finite_or_none

    values = [np.float64("nan"), math.inf, -math.inf, np.float32(0.5), np.int64(3), 2.5, None, "x"]
    assert [finite_or_none(v) for v in values] == [None, None, None, 0.5, 3, 2.5, None, "x"]
    assert type(finite_or_none(np.int64(3))) is int and type(finite_or_none(np.float32(0.5))) is float
    assert json.loads(dumps_json({"m": [np.float64("nan"), np.float32(-np.inf), 1.5]})) == {"m": [None, None, 1.5]}


def test_metric_labels_are_defined_once_for_both_views():
    from ascendopt.analyze.traces.columns import ANALYZE_TABLE_METRICS, METRIC_LABELS, SUMMARY_METRICS
    from ascendopt.rounds import summary

    assert summary.SUMMARY_METRICS is SUMMARY_METRICS
    assert {label for label, _ in SUMMARY_METRICS} <= {m.long for m in METRIC_LABELS.values()}
    assert dict(SUMMARY_METRICS)["MTE2"] == ("vector_mte2_ratio", "cube_mte2_ratio", "mte2_ratio")
    assert dict(SUMMARY_METRICS)["Cube/MAC"] == ("mac_ratio", "cube_utilization_pct")
    assert [h for h, _ in ANALYZE_TABLE_METRICS] == ["mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe",
                                                     "ub GB/s", "dram", "l2"]
    assert all(METRIC_LABELS[c].short == h for h, c in ANALYZE_TABLE_METRICS)


def test_cli_json_is_the_report(cli):
    code, out, _ = cli("analyze", str(ASCEND / "advisor_pipe"), "--json", "--top", "2")
    data = json_payload(out)
    assert code == 0 and data["schema"] == 1 and len(data["kernels"]) == 2


def test_cli_filter_no_match_exits_2_with_closest_names(cli):
    code, out, err = cli("analyze", str(ASCEND / "level1_cnn"), "--kernel-filter", "Conv2DX")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "closest names:" in err and "Conv2D" in err


def test_cli_compare(cli):
    code, out, err = cli("analyze", str(ASCEND / "advisor_pipe"), "--compare", str(ASCEND / "advisor_pipe"), "--json")
    data = json_payload(out)
    assert code == 0, err
    assert data["compare"]["kernels"] and all(k["avg_us_ratio"] == 1 for k in data["compare"]["kernels"])
    code, out, _ = cli("analyze", str(CUDA), "--compare", str(CUDA))
    assert code == 0 and "per-kernel diff" in out


def test_cli_list_runs(cli, tmp_path):
    import shutil

    shutil.copytree(ASCEND / "level0_cnn", tmp_path / "h_1_20250101000000000_ascend_pt")
    shutil.copytree(ASCEND / "level1_cnn", tmp_path / "h_1_20250102000000000_ascend_pt")
    code, out, _ = cli("analyze", str(tmp_path), "--list", "--json")
    runs = json_payload(out)
    assert code == 0 and [r["path"].rsplit("/", 1)[-1] for r in runs] == [
        "h_1_20250101000000000_ascend_pt", "h_1_20250102000000000_ascend_pt"]
    code, _, err = cli("analyze", str(tmp_path), "--top", "1")
    assert code == 0 and "reading the newest, h_1_20250102000000000_ascend_pt" in err


def test_multi_device_shares_are_per_device(tmp_path):
    from ascendopt.analyze.traces import load_profiles
    from profile_variants import derive, insert_column

    rank1 = derive(LEVEL1, tmp_path / "rank1", insert_column("Device_id", "1"))
    report = analyze(load_profiles([ASCEND / "level1_cnn", rank1.parent.parent]))
    assert set(report["total_us"]) == {"npu:0", "npu:1"}
    for device in ("npu:0", "npu:1"):
        assert sum(k["share"] for k in report["kernels"] if k["device"] == device) == pytest.approx(1.0)


# -- issue 21: per-kernel context (shapes, AI_CPU, achieved bandwidth) and output ------------------------

ADVISOR_KD = ASCEND / "advisor_pipe" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
ADD = "aclnnAdd_AddAiCore_Add"


def test_by_shape_splits_same_named_kernels_by_their_input_shapes():
    recs = [dict(r, **{"Input Shapes": r["Input Shapes"].strip('"'), "Input Data Types": r["Input Data Types"]
                       .strip('"')}) for r in raw_records(ADVISOR_KD) if r["Name"] == ADD]  # cells carry literal quotes
    shapes = {r["Input Shapes"] for r in recs}
    assert len(shapes) == 2  # the real file launches Add with two shapes
    by_name = [k for k in analyze(load_profile(ASCEND / "advisor_pipe"))["kernels"] if k["name"] == ADD]
    by_shape = [k for k in analyze(load_profile(ASCEND / "advisor_pipe"), by="shape")["kernels"] if k["name"] == ADD]
    assert len(by_name) == 1 and by_name[0]["shape_count"] == 2 and by_name[0]["count"] == len(recs)
    assert {k["input_shapes"] for k in by_shape} == shapes
    for k in by_shape:
        same = [r for r in recs if r["Input Shapes"] == k["input_shapes"]]
        assert k["count"] == len(same)
        assert k["total_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in same))
        assert k["input_dtypes"] == same[0]["Input Data Types"] and k["task_type"] == "AI_VECTOR_CORE"


def test_by_shape_without_shapes_says_so_and_stays_per_name():
    report = analyze(load_profile(ASCEND / "msprof_op_summary"), by="shape")  # Triton-like: shapes N/A
    assert len(report["kernels"]) == 1 and any("no input shapes" in n for n in report["notes"])
    with pytest.raises(UsageError, match="--by"):
        analyze(load_profile(ASCEND / "msprof_op_summary"), by="size")


def test_ai_cpu_operators_flagged_with_their_share():
    report = analyze(load_profile(ASCEND / "memory_l0"))
    recs = raw_records(ASCEND / "memory_l0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    ai_cpu = [r for r in recs if r["Accelerator Core"] == "AI_CPU"]
    compute = [r for r in recs if r["Accelerator Core"] != "HCCL"]
    assert report["ai_cpu"]["launches"] == len(ai_cpu) == 2
    assert report["ai_cpu"]["total_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in ai_cpu))
    assert report["ai_cpu"]["share"] == pytest.approx(
        report["ai_cpu"]["total_us"] / sum(float(r["Duration(us)"]) for r in compute))
    flagged = {k["name"] for k in report["kernels"] if k["ai_cpu"]}
    assert flagged == {r["Name"] for r in ai_cpu} and all(k["task_type"] == "AI_CPU" for k in report["kernels"]
                                                          if k["ai_cpu"])


def test_achieved_bandwidth_from_memory_volumes_against_the_hbm_peak(tmp_path):
    import shutil

    run = tmp_path / "OPPROF_001"
    shutil.copytree(ASCEND / "msprof_op_real_cann_minimal" / "OPPROF_001", run)
    (run / "HardwareInfo.jsonl").write_text(  # SYNTHETIC device record naming a chips.yaml chip (HBM 1600 GB/s)
        '{"category":"Device Info","chip info":"Ascend910B2 V1"}\n{"category":"AI Core Information"}\n')
    report = analyze(load_profile(run))
    rows = {r["sub_block_id"]: r for r in raw_records(run / "Memory.csv")}
    vector = next(k for k in report["kernels"] if k["core_type"] == "vector")
    vec = rows["vector0"]
    moved = float(vec["read_main_memory_datas(KB)"]) + float(vec["write_main_memory_datas(KB)"])
    expected_gbs = moved * 1024 / (float(rows["vector0"]["aiv_time(us)"]) * 1e-6) / 2**30
    assert vector["achieved_bw_gbs"] == pytest.approx(expected_gbs)
    assert vector["hbm_peak_gbs"] == 1600
    assert vector["hbm_peak_ratio"] == pytest.approx(expected_gbs * 2**30 / 1600e9)
    assert "read_main_memory_kb" in vector["achieved_bw_source"]
    assert analyze(load_profile(ASCEND / "advisor_pipe"))["kernels"][0]["achieved_bw_gbs"] is None  # no Memory


def test_full_kernel_names_never_printed_alike_and_tables_use_the_width(cli, monkeypatch):
    """Names that differ only at the end (…FlashAttentionScore / …_varlen) stay distinct at any width, and a
    wide terminal prints them whole (the old table cut every name at 48 characters)."""
    long_names = [k["name"] for k in analyze(load_profile(ASCEND / "advisor_pipe"))["kernels"]]
    varlen = next(n for n in long_names if n.endswith("_varlen"))
    from ascendopt import console

    for columns, whole in (("80", False), ("200", True)):
        monkeypatch.setenv("COLUMNS", columns)
        monkeypatch.setattr(console, "_stdout", None)  # a fresh console reads $COLUMNS
        code, out, err = cli("analyze", str(ASCEND / "advisor_pipe"), "-n", "10")
        assert code == 0 and "Traceback" not in err and "Warning" not in err
        table = out.split("hotspots", 1)[1].split("bottlenecks", 1)[0]
        cells = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
        named = [c for c in cells if c]
        assert len(set(named)) == len(named)  # never two rows printed alike
        assert (varlen in table) is whole
        table_lines = [line for line in out.splitlines() if line[:1] in "│┏┃┡└"]
        assert max(len(line.rstrip()) for line in table_lines) <= int(columns)
        assert f"{varlen}: " in out  # the per-kernel lines always print the full name


def test_report_says_which_files_it_read_and_the_msprof_op_operator(cli):
    code, out, _ = cli("analyze", str(ASCEND / "msprof_op_real_cann_minimal" / "OPPROF_001"))
    assert code == 0
    assert "read: " in out and "OpBasicInfo.csv" in out.split("read: ", 1)[1].splitlines()[0]
    assert "operator: sanitized_operator_kernel (mix), task duration 5.740459 us, block dim 1, mix block dim 2" in out
    assert "OPPROF_001:" not in out.split("hotspots", 1)[1]  # the kernel is not named after its folder


@pytest.mark.parametrize("fixture", ["level1_cnn", "level0_cnn", "memory_l0", "advisor_pipe", "msprof_op_summary",
                                     "msprof_op_memory_ub", "msprof_op_real_cann_minimal"])
@pytest.mark.parametrize("by", ["name", "shape"])
def test_every_fixture_prints_without_warnings_or_tracebacks(cli, fixture, by):
    """memory_l0 has kernels whose shapes are all N/A (AI_CPU, DSA): --by shape once crashed on them."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = cli("analyze", str(ASCEND / fixture), "--by", by)
    assert code == 0, err
    assert "Traceback" not in err and "Warning" not in err and "nan" not in out.replace("dominant", "")


def test_compare_by_shape_pairs_per_shape_and_prints_each_row_distinct(cli):
    path = str(ASCEND / "advisor_pipe")
    code, out, err = cli("analyze", path, "--compare", path, "--by", "shape")
    assert code == 0, err
    table = out.split("per-kernel diff", 1)[1]
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    adds = [r for r in rows if r.startswith(ADD)]
    assert len(adds) == 2 and len(set(adds)) == 2  # Add launched with two shapes: two rows, told apart


def test_memory_l0_bandwidths_are_in_the_text_output_as_in_the_json(cli, monkeypatch):
    """MemoryL0's L0A/L0B/L0C bandwidths: every value --json carries for a kernel is printed for it too."""
    import re

    from _cli_json import json_payload

    path = str(ASCEND / "memory_l0")
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = cli("analyze", path, "--json")
    assert code == 0, err
    kernel = json_payload(out)["kernels"][0]
    expected = {c: v for c, v in kernel["metrics"].items() if c.endswith("_gbs") and v is not None}
    assert {"l0a_read_bw_gbs", "l0b_read_bw_gbs", "l0c_write_bw_gbs"} <= set(expected)
    code, out, err = cli("analyze", path)
    assert code == 0, err
    lines = out.splitlines()
    line = lines[lines.index(next(ln for ln in lines if ln.startswith(f"{kernel['name']}:"))) + 1]
    assert line.startswith("  bandwidth GB/s: ")
    printed = dict(re.findall(r"(\w+) (\d+\.\d)", line))
    assert len(printed) == len(expected)
    for column, value in expected.items():
        name = column.removesuffix("_gbs").removesuffix("_bw").replace("_bw_", "_")
        assert float(printed[name]) == pytest.approx(value, abs=0.05), column
