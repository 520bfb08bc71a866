"""Profile readers on the real Ascend fixtures and on header variants derived from them.

Variants are built by transforming the real files (tests/profile_variants.py); the expected
values are read from the same real rows with the csv module, independently of the reader.
"""

import math

import numpy as np
import pytest

from ascendopt.analyze.traces import ALL_GROUPS, list_runs, load_profile, load_profiles
from ascendopt.analyze.traces.columns import ASCEND_COLUMNS, METRIC_GROUPS
from ascendopt.errors import ProfileError
from profile_variants import (
    ADVISOR,
    ASCEND,
    LEVEL0,
    LEVEL1,
    MEMORY_L0,
    OP_SUMMARY,
    copy_fixture,
    derive,
    drop,
    insert_column,
    read_rows,
    rename,
    reverse_columns,
    set_cell,
    write_rows,
)

RAW_NAMES = set(ASCEND_COLUMNS) - set(ASCEND_COLUMNS.values())


def raw_column(path, name, where=None):
    """Values of one column of a real CSV, as floats where possible (cells stripped)."""
    rows, _ = read_rows(path)
    i = rows[0].index(name)
    out = []
    for r in rows[1:]:
        if len(r) != len(rows[0]) or (where and not where(dict(zip(rows[0], r, strict=True)))):
            continue
        cell = r[i].strip()
        try:
            out.append(float(cell))
        except ValueError:
            out.append(cell)
    return out


@pytest.mark.parametrize("fixture,kind,rows", [
    ("level1_cnn", "npu", 191), ("level0_cnn", "npu", 191), ("memory_l0", "npu", 20),
    ("advisor_pipe", "npu", 29), ("msprof_op_summary", "msprof", 3), ("msprof_op_memory_ub", "msprof-op", 2),
])
def test_every_fixture_loads_into_canonical_columns(fixture, kind, rows):
    profile = load_profile(ASCEND / fixture)
    assert profile.kind == kind
    assert len(profile.kernels) == rows
    assert not RAW_NAMES & set(profile.kernels.columns)  # no raw header leaks out of traces/
    assert profile.kernels["duration_us"].notna().all()
    assert set(profile.not_collected) == set(ALL_GROUPS) - set(profile.metric_groups)


def test_level1_durations_and_start_tab_quirk_match_raw_rows():
    profile = load_profile(ASCEND / "level1_cnn")
    assert profile.kernels["duration_us"].tolist() == raw_column(LEVEL1, "Duration(us)")
    # "1736408883704643.212<TAB>" -> a float, not an error and not NaN
    assert profile.kernels["start_us"].iloc[0] == pytest.approx(1736408883704643.212)
    assert profile.metric_groups == ["PipeUtilization"]


def test_other_core_half_is_not_applicable_not_zero():
    k = load_profile(ASCEND / "level1_cnn").kernels
    vector = k[k["core_type"] == "vector"]
    cube = k[k["core_type"] == "cube"]
    # the raw file has 0 in aic_* of vector rows; the reader reports "not applicable" (NaN)
    assert raw_column(LEVEL1, "aic_mac_ratio", lambda r: r["Accelerator Core"] == "AI_VECTOR_CORE")[0] == 0.0
    assert vector["mac_ratio"].isna().all() and vector["vec_ratio"].notna().all()
    assert cube["vec_ratio"].isna().all() and cube["mac_ratio"].notna().all()


def test_na_cells_are_nan_never_zero():
    k = load_profile(ASCEND / "level1_cnn").kernels
    comm = k[k["core_type"] == "communication"]
    assert len(comm) == 4  # the 4 HCCL rows, all PMU cells N/A
    assert comm["vector_time_us"].isna().all() and comm["mix_block_dim"].isna().all()


def test_level0_has_no_metric_columns():
    profile = load_profile(ASCEND / "level0_cnn")
    assert profile.metric_groups == [] and profile.metric_columns == []
    assert profile.not_collected == list(ALL_GROUPS)
    # Type is N/A on every Level0 row: the op type falls back to the kernel name
    assert (profile.kernels["op_type"].astype(str) == profile.kernels["name"].astype(str)).all()


def test_memory_l0_ragged_row_is_skipped_and_reported():
    profile = load_profile(ASCEND / "memory_l0")
    rows, _ = read_rows(MEMORY_L0)
    assert sum(len(r) != len(rows[0]) for r in rows[1:]) == 1
    assert len(profile.kernels) == len(rows) - 2
    assert any("field count differs" in n for n in profile.notes)
    assert profile.metric_groups == ["MemoryL0"]
    # the 48-block ZerosLike row: aic_total_cycles 0 -> its cube half is not applicable
    zeros = profile.kernels[profile.kernels["name"] == "ZerosLike"].iloc[0]
    assert math.isnan(zeros["cube_time_us"]) and zeros["vector_cycles"] == 43632970


def test_msprof_op_summary_pre_rename_headers():
    profile = load_profile(ASCEND / "msprof_op_summary")
    k = profile.kernels
    assert k["name"].astype(str).tolist() == ["main_kernel"] * 3
    assert k["duration_us"].tolist() == raw_column(OP_SUMMARY, "Task Duration(us)")
    assert k["wait_us"].tolist() == [0.0, 6958.62, 6560.58]  # "0" and six-decimal cells
    assert set(k["core_type"].astype(str)) == {"mix_aic"} and k["block_dim"].tolist() == [256.0] * 3
    assert k["device"].astype(str).tolist() == ["npu:0"] * 3  # Device_id column


def test_msprof_op_per_block_trailing_comma_and_na():
    profile = load_profile(ASCEND / "msprof_op_memory_ub")
    k = profile.kernels.set_index("sub_block")
    assert profile.metric_groups == ["MemoryUB"]
    assert k.loc["vector0", "ub_read_bw_vector_gbs"] == 7.5
    assert math.isnan(k.loc["cube0", "ub_read_bw_vector_gbs"])  # "NA" cell
    assert k.loc["cube0", "duration_us"] == pytest.approx(2.288333)
    assert "" not in k.columns


def test_device_facts_back_solved_from_level1_and_advisor():
    level1 = load_profile(ASCEND / "level1_cnn").device
    assert (level1["clock_mhz"], level1["cube_cores"], level1["vector_cores"]) == (1800, 24, 48)
    assert level1["sources"]["cube_cores"].startswith("derived")
    advisor = load_profile(ASCEND / "advisor_pipe").device
    assert (advisor["clock_mhz"], advisor["cube_cores"]) == (1800, 20)


def test_unknown_chip_stays_unknown_never_a_model_chip(monkeypatch):
    """Issue 21: nothing measured -> chip and cores are unknown and a note says so (no 910B2 stand-in)."""
    monkeypatch.delenv("ASCENDOPT_CHIP", raising=False)
    profile = load_profile(ASCEND / "level0_cnn")  # no cycles, no info.json: nothing to derive
    assert (profile.device["chip"], profile.device["cube_cores"], profile.device["vector_cores"]) == (None,) * 3
    assert "assumed" not in profile.device["source"] and "910B2" not in profile.device["source"]
    assert any("not in the capture" in n and "ASCENDOPT_CHIP" in n for n in profile.notes)


def test_user_named_chip_fills_facts_from_chips_yaml(monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CHIP", "Ascend910B4")
    device = load_profile(ASCEND / "level0_cnn").device
    assert (device["chip"], device["cube_cores"], device["vector_cores"]) == ("Ascend910B4", 20, 40)
    assert device["sources"]["chip"] == "$ASCENDOPT_CHIP"


# -- header variants of docs/profiler-formats.md §4.2, built from real files -------------------------------

def _nan(x):
    return isinstance(x, float) and math.isnan(x)


def _same_frames(a, b, columns=("name", "duration_us", "block_dim", "vec_ratio", "mac_ratio", "vector_mte2_ratio")):
    for col in columns:
        left, right = a[col].astype(object).tolist(), b[col].astype(object).tolist()
        assert [None if _nan(x) else x for x in left] == [None if _nan(x) else x for x in right], col


def test_skipped_columns_are_read_on_request():
    """The kernel-table read skips long text columns the analysis does not use, and reads them when asked
    (issue 41: readers such as shape extraction need more columns than the analysis)."""
    from ascendopt.analyze.traces.ascend import read_kernel_table

    path = ADVISOR
    plain, _ = read_kernel_table(path)
    assert "input_formats" not in plain.columns and "output_dtypes" not in plain.columns
    wide, _ = read_kernel_table(path, extra_columns=("input_formats", "output_dtypes", "model_name"))
    assert wide["input_formats"].astype(str).tolist() == raw_column(path, "Input Formats")
    assert wide["output_dtypes"].astype(str).tolist() == raw_column(path, "Output Data Types")
    assert "model_name" not in wide.columns  # not in this file: absent, not an error
    _same_frames(plain, wide)


def test_block_num_rename_loads_the_same(tmp_path):
    run = derive(LEVEL1, tmp_path / "run", rename({"Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num"}))
    _same_frames(load_profile(run.parent.parent).kernels, load_profile(ASCEND / "level1_cnn").kernels)


def test_columns_matched_by_name_not_position(tmp_path):
    run = derive(LEVEL1, tmp_path / "run", reverse_columns)
    _same_frames(load_profile(run.parent.parent).kernels, load_profile(ASCEND / "level1_cnn").kernels)


def test_device_id_column_2025_builds(tmp_path):
    run = derive(LEVEL1, tmp_path / "run", insert_column("Device_id", "3", at=1))
    k = load_profile(run.parent.parent).kernels
    assert set(k["device"].astype(str)) == {"npu:3"}


def test_cann70_header_without_op_state_and_hf32(tmp_path):
    run = derive(LEVEL1, tmp_path / "run", drop("OP State", "HF32 Eligible"))
    _same_frames(load_profile(run.parent.parent).kernels, load_profile(ASCEND / "level1_cnn").kernels)


def test_current_level0_header_device_id_block_num_no_step(tmp_path):
    def change(rows):
        return insert_column("Device_id", "0")(rename({"Block Dim": "Block Num"})(drop("Step Id")(rows)))

    run = derive(LEVEL0, tmp_path / "run", change)
    k = load_profile(run.parent.parent).kernels
    assert k["step"].isna().all() and k["duration_us"].tolist() == raw_column(LEVEL0, "Duration(us)")


def test_kernel_details_with_msprof_names_is_read_as_op_summary(tmp_path):
    names = {"Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type",
             "Start Time(us)": "Task Start Time(us)", "Duration(us)": "Task Duration(us)",
             "Wait Time(us)": "Task Wait Time(us)"}
    path = derive(LEVEL1, tmp_path / "PROF_000001_20250101000000000_ABC", lambda r: drop("Step Id")(rename(names)(r)),
                  name="op_summary_1.csv")
    profile = load_profile(path)
    assert profile.kind == "msprof"
    _same_frames(profile.kernels, load_profile(ASCEND / "level1_cnn").kernels)


def test_start_time_tab_inside_quotes_and_crlf_to_lf(tmp_path):
    rows, _ = read_rows(LEVEL1)
    path = write_rows(tmp_path / "r" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", rows, "\n")
    _same_frames(load_profile(path).kernels, load_profile(ASCEND / "level1_cnn").kernels, ("start_us", "duration_us"))
    advisor = load_profile(ASCEND / "advisor_pipe").kernels  # raw "1736413971558972.912<TAB>" quoted
    assert advisor["start_us"].iloc[0] == pytest.approx(1736413971558972.912)


def test_na_and_empty_pmu_cells_become_nan(tmp_path):
    def change(rows):
        return set_cell(2, "aiv_vec_ratio", "")(set_cell(1, "aiv_vec_ratio", "N/A")(rows))

    run = derive(LEVEL1, tmp_path / "run", change)
    k = load_profile(run.parent.parent).kernels
    assert math.isnan(k["vec_ratio"].iloc[0]) and math.isnan(k["vec_ratio"].iloc[1])
    later = next(i for i in range(2, len(k)) if str(k["core_type"].iloc[i]) == "vector")
    assert k["vec_ratio"].iloc[later] == raw_column(LEVEL1, "aiv_vec_ratio")[later]


def test_communication_label_of_newer_builds(tmp_path):
    rows, ending = read_rows(LEVEL1)
    i = rows[0].index("Accelerator Core")
    rows = [rows[0]] + [[("COMMUNICATION" if c == "HCCL" and j == i else c) for j, c in enumerate(r)] for r in rows[1:]]
    path = write_rows(tmp_path / "r" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", rows, ending)
    assert (load_profile(path).kernels["core_type"].astype(str) == "communication").sum() == 4


@pytest.mark.parametrize("group", [g for g in METRIC_GROUPS if g != "PipeUtilization"])
def test_every_metric_group_header_is_recognised(tmp_path, group):
    """level1's PMU cells under each group's §5 column names (values re-labelled, rows real)."""
    from ascendopt.analyze.traces.columns import canonical

    # one raw name per canonical column (several CANN spellings of one counter never share a file)
    raw_names = list({c: r for r, c in reversed(ASCEND_COLUMNS.items()) if c in METRIC_GROUPS[group]
                      or (group == "MemoryAccess" and r.startswith(("aic_", "aiv_")) and r.endswith("(KB)"))}
                     .values())[::-1]
    rows, ending = read_rows(LEVEL1)
    pmu = [i for i, h in enumerate(rows[0]) if h.startswith(("aic_", "aiv_")) and "total_cycles" not in h]
    header = list(rows[0])
    for i, raw in zip(pmu, raw_names, strict=False):  # a group has fewer names than level1 has PMU columns
        header[i] = raw.lower() if group == "MemoryAccess" else raw  # MemoryAccess: case-insensitive
    path = write_rows(tmp_path / "r" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", [header] + rows[1:], ending)
    profile = load_profile(path)
    assert group in profile.metric_groups
    assert canonical(raw_names[0]) in profile.kernels.columns


# -- discovery, runs, merge ------------------------------------------------------------------------

def test_parent_with_several_runs_reads_the_newest_by_name_stamp(tmp_path):
    newer = copy_fixture("level1_cnn", tmp_path / "host_1_20250102000000000_ascend_pt")
    older = copy_fixture("level0_cnn", tmp_path / "host_2_20250101000000000_ascend_pt")
    older.touch()  # newest by mtime, oldest by the timestamp in its name: the name wins
    runs = list_runs(tmp_path)
    assert [r.path.name for r in runs] == [older.name, newer.name]
    profile = load_profile(tmp_path)
    assert profile.path == newer and profile.metric_groups == ["PipeUtilization"]
    assert any("reading the newest" in n for n in profile.notes)


def test_prof_folder_layout_of_msprof(tmp_path):
    prof = tmp_path / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
    copy_fixture("msprof_op_summary", prof)
    for path in (tmp_path, prof, prof / "mindstudio_profiler_output", OP_SUMMARY):
        assert load_profile(path).kind == "msprof"


def test_ascend_profiler_output_folder_and_single_files():
    out = ASCEND / "level1_cnn" / "ASCEND_PROFILER_OUTPUT"
    assert len(load_profile(out).kernels) == 191
    assert len(load_profile(LEVEL1).kernels) == 191
    via_stats = load_profile(out / "op_statistic.csv")  # op_statistic alone -> its kernel_details
    assert len(via_stats.kernels) == 191 and via_stats.op_statistic is not None


def test_merge_metric_group_runs_pairs_by_name_and_occurrence():
    merged = load_profiles([ASCEND / "level0_cnn", ASCEND / "level1_cnn"])  # same CNN step, two levels
    level1 = load_profile(ASCEND / "level1_cnn").kernels
    assert merged.metric_groups == ["PipeUtilization"]
    assert merged.kernels["duration_us"].tolist() == raw_column(LEVEL0, "Duration(us)")  # timing: first run
    mine = merged.kernels.set_index(["name"]).loc["trans_TransData_0", "vec_ratio"]
    assert float(np.atleast_1d(mine)[0]) == level1.set_index("name").loc["trans_TransData_0", "vec_ratio"]


def test_merge_refuses_runs_of_different_workloads():
    with pytest.raises(ProfileError, match="runs do not match"):
        load_profiles([ASCEND / "level1_cnn", ASCEND / "advisor_pipe"])


def test_advisor_duplicate_task_ids_are_kept():
    k = load_profile(ASCEND / "advisor_pipe").kernels
    rows = raw_column(ADVISOR, "Name")
    assert len(k) == len(rows) and (k["name"].astype(str) == "aclnnMatmul_MatMulV3Common_MatMulV5").sum() == 4


def test_runs_of_different_devices_are_stacked_per_device(tmp_path):
    # the real level1 file as rank 0 and, with a Device_id column of 1, as rank 1
    rank1 = derive(LEVEL1, tmp_path / "rank1", insert_column("Device_id", "1"))
    profile = load_profiles([ASCEND / "level1_cnn", rank1.parent.parent])
    k = profile.kernels
    assert sorted(set(k["device"].astype(str))) == ["npu:0", "npu:1"] and len(k) == 2 * 191
    assert any("stacked 2 runs" in n for n in profile.notes)


def test_parent_of_rank_folders_of_one_collection_is_stacked_per_device(tmp_path):
    # derived: the real level1 run as rank0_ascend_pt (rank from the folder name, as the upstream
    # msinsight layout names it) and the same file with a Device_id column of 1 as rank1_ascend_pt;
    # both cover the same device time span, as the ranks of one job do
    copy_fixture("level1_cnn", tmp_path / "rank0_ascend_pt")
    derive(LEVEL1, tmp_path / "rank1_ascend_pt", insert_column("Device_id", "1"))
    profile = load_profile(tmp_path)
    k = profile.kernels
    assert k.groupby(k["device"].astype(str), observed=True).size().to_dict() == {"npu:0": 191, "npu:1": 191}
    assert sorted(p.name for p in profile.runs) == ["rank0_ascend_pt", "rank1_ascend_pt"]
    assert any("reading the newest collection, 2 runs" in n for n in profile.notes)
    from ascendopt.analyze.diagnosis import analyze

    shares: dict[str, float] = {}
    for kernel in analyze(profile)["kernels"]:  # shares are of each device's own kernel time
        shares[kernel["device"]] = shares.get(kernel["device"], 0.0) + kernel["share"]
    assert shares == pytest.approx({"npu:0": 1.0, "npu:1": 1.0})


def test_rank_from_profiler_info_stacks_runs_of_one_collection(tmp_path):
    # derived: two copies of the real level1 run, each with a profiler_info_<rank>.json carrying
    # only rank_id (the upstream file has it; the copy in tests/data has no profiler_info)
    for rank, stamp in ((0, "20250109074803000"), (1, "20250109074803100")):
        run = copy_fixture("level1_cnn", tmp_path / f"host_{100 + rank}_{stamp}_ascend_pt")
        (run / f"profiler_info_{rank}.json").write_text(f'{{"rank_id": {rank}}}')
    k = load_profile(tmp_path).kernels
    assert sorted(set(k["device"].astype(str))) == ["npu:0", "npu:1"] and len(k) == 2 * 191


def test_runs_of_different_collections_on_other_devices_read_the_newest(tmp_path):
    # level1 (device time 2025-01-09 07:48 UTC, npu:0) and advisor_pipe (09:12 UTC the same day)
    # with a derived Device_id of 1: different devices, but not at the same time -> newest only
    copy_fixture("level1_cnn", tmp_path / "host_1_20250109074800000_ascend_pt")
    newest = derive(ADVISOR, tmp_path / "host_2_20250109091200000_ascend_pt", insert_column("Device_id", "1"))
    profile = load_profile(tmp_path)
    assert profile.path == newest.parent.parent and len(profile.kernels) == 29
    assert set(profile.kernels["device"].astype(str)) == {"npu:1"}
    assert any("reading the newest, host_2_" in n for n in profile.notes)


def test_fixture_bytes_match_the_blobs_in_their_readme():
    """tests/data/ascend/ are byte-exact copies: git blob ids recomputed here match the README table."""
    import hashlib
    import re

    readme = (ASCEND / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+)/` \| `([^`]+)` \|.*\| `([0-9a-f]{40})` \|$", readme, flags=re.M)
    assert len(rows) == 15
    for folder, name, blob in rows:
        data = (ASCEND / folder / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, f"{folder}/{name}"


def test_context_columns_task_type_shapes_dtypes_op_state_from_real_rows():
    """The canonical context columns the rules read: task_type as the file says it, shapes without the
    literal quotes of the level1 export, op_state only when the file has the column."""
    k = load_profile(ASCEND / "level1_cnn").kernels
    assert k["task_type"].astype(str).tolist() == raw_column(LEVEL1, "Accelerator Core")
    expected_shapes = [s.strip('"') if s != "N/A" else None for s in raw_column(LEVEL1, "Input Shapes")]
    got = [None if isinstance(v, float) else v for v in k["input_shapes"].astype(object).tolist()]
    assert got == expected_shapes and got[0] == "32,3,224,224"
    assert k["input_dtypes"].iloc[0] == "FLOAT" and k["output_shapes"].notna().any()
    assert set(k["op_state"].dropna().astype(str)) <= {"static", "dynamic"}
    memory_l0 = load_profile(ASCEND / "memory_l0").kernels  # no OP State column: none invented
    assert "op_state" not in memory_l0.columns
    assert (memory_l0["task_type"].astype(str) == "AI_CPU").sum() == 2
    assert set(load_profile(ASCEND / "level0_cnn").kernels["task_type"].astype(str)) == {"N/A", "HCCL"}


# -- msprof op folders: OpBasicInfo.csv, summary.jsonl, HardwareInfo.jsonl ---------------------------------

MSPROF_OP = ASCEND / "msprof_op_real_cann_minimal" / "OPPROF_001"


def test_msprof_op_kernel_named_by_op_basic_info_with_block_dims_and_measured_clock():
    profile = load_profile(MSPROF_OP)
    rows, _ = read_rows(MSPROF_OP / "OpBasicInfo.csv")
    basic = dict(zip(rows[0], rows[1], strict=True))
    k = profile.kernels
    assert set(k["name"].astype(str)) == {basic["Op Name"]} != {"OPPROF_001"}
    assert set(k["task_type"].astype(str)) == {basic["Op Type"]}
    assert k["block_dim"].tolist() == [float(basic["Block Dim"])] * 2
    assert k["mix_block_dim"].tolist() == [float(basic["Mix Block Dim"])] * 2
    assert profile.device["clock_mhz"] == int(basic["Current Freq"])
    assert profile.device["sources"]["clock_mhz"].startswith("measured from the capture (OpBasicInfo.csv")
    assert profile.op_info["task_duration_us"] == float(basic["Task Duration(us)"])


def test_msprof_op_newer_column_names_map_to_the_canonical_table():
    """CANN 8.5 msprof op names (aic_cube_ratio, cube-side MTE3, unprefixed Memory volumes) -> canonical."""
    profile = load_profile(MSPROF_OP)
    k = profile.kernels.set_index("sub_block")
    pipe = {r[1]: dict(zip(read_rows(MSPROF_OP / "PipeUtilization.csv")[0][0], r, strict=True))
            for r in read_rows(MSPROF_OP / "PipeUtilization.csv")[0][1:]}
    assert k.loc["cube0", "mac_ratio"] == float(pipe["cube0"]["aic_cube_ratio"])
    assert k.loc["cube0", "cube_mte3_ratio"] == float(pipe["cube0"]["aic_mte3_ratio"])
    assert k.loc["vector0", "vector_mte2_active_bw_gbs"] == float(pipe["vector0"]["aiv_mte2_active_bw(GB/s)"])
    assert k.loc["vector0", "gm_to_ub_kb"] == 4.0 and k.loc["cube0", "read_main_memory_kb"] == 2.875
    assert k.loc["vector0", "vec_wait_ratio"] == pytest.approx(0.196222)
    # unprefixed *_kb volumes belong to Memory, never a phantom MemoryAccess group
    assert set(profile.metric_groups) == {"PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0",
                                          "MemoryUB", "ResourceConflictRatio"}
    assert not any(c.startswith(("aic_", "aiv_")) for c in profile.kernels.columns)


HARDWARE_INFO_950 = (  # SYNTHETIC: the five records in the layout msprof op's HardwareInfo docs describe
    '{"category":"Host Info","cpu physical count":2,"cpu logical count":46}\n'
    '{"category":"Device Info","npu count":1,"chip info":"Ascend950PR_9599 V100","arch info":"3510"}\n'
    '{"category":"CPU Information","control cpu count":1,"ai cpu count":6,"ai cpu frequency(MHZ)":1500}\n'
    '{"category":"AI Core Information","ai core count":36,"ai cube count":36,"ai vector count":72,'
    '"ai cube frequency(MHZ)":1650,"ai vector frequency(MHZ)":1650}\n'
    '{"category":"Memory Information","hbm total(MB)":131072,"hbm used(MB)":5190.55,"hbm frequency(MHZ)":3200}\n'
)


@pytest.mark.parametrize("spelling", ["spaces", "underscores"])
def test_hardware_info_gives_chip_cores_and_clock_measured_from_the_capture(tmp_path, spelling):
    """The real OPPROF folder plus a synthetic HardwareInfo.jsonl (both key spellings seen in releases)."""
    import shutil

    run = tmp_path / "OPPROF_002"
    shutil.copytree(MSPROF_OP, run)
    text = HARDWARE_INFO_950
    if spelling == "underscores":
        text = text.replace('"chip info"', '"chip_info"').replace('"ai cube count"', '"ai_cube_count"') \
            .replace('"ai vector count"', '"ai_vector_count"').replace('"ai cube frequency(MHZ)":1650', '"x":0') \
            .replace('"ai core count":36', '"ai_core_count":36,"ai_core_frequency_MHZ":[1650,1650]')
        text = text.replace('"Ascend950PR_9599 V100"', '"Ascend 950PR_9599 V100"')
    (run / "HardwareInfo.jsonl").write_text(text)
    (run / "OpBasicInfo.csv").unlink()  # its Current Freq would win the clock; this test is about HardwareInfo
    device = load_profile(run).device
    assert (device["chip"], device["cube_cores"], device["vector_cores"], device["clock_mhz"]) == \
        ("Ascend950PR_9599", 36, 72, 1650)
    assert device["sources"]["cube_cores"] == "measured from the capture (HardwareInfo.jsonl)"
    assert device["sources"]["chip"] == "measured from the capture (HardwareInfo.jsonl)"


def test_summary_jsonl_op_info_when_there_is_no_op_basic_info(tmp_path):
    import json
    import shutil

    run = tmp_path / "OPPROF_003"
    shutil.copytree(MSPROF_OP, run)
    (run / "OpBasicInfo.csv").unlink()
    record = {"category": "OpInfoSummary", "Op Name": "add_kernel_mix_aiv", "Op Type": "vector",  # SYNTHETIC
              "Task Duration(us)": 12.5, "Block Dim": 40, "Mix Block Dim": None, "Device Id": 3, "Pid": 1,
              "Current Freq": 1650, "Rated Freq": 1650}
    (run / "summary.jsonl").write_text('{"category":"Memory"}\n' + json.dumps(record) + "\n")
    profile = load_profile(run)
    assert set(profile.kernels["name"].astype(str)) == {"add_kernel_mix_aiv"}
    assert set(profile.kernels["device"].astype(str)) == {"npu:3"}
    assert profile.kernels["block_dim"].tolist() == [40.0, 40.0] and profile.device["clock_mhz"] == 1650


def test_op_basic_info_alone_is_a_one_row_profile_and_a_file_path_reads_its_folder(tmp_path):
    import shutil

    run = tmp_path / "OPPROF_004"
    run.mkdir()
    shutil.copy(MSPROF_OP / "OpBasicInfo.csv", run)
    for path in (run, run / "OpBasicInfo.csv"):
        profile = load_profile(path)
        assert profile.kind == "msprof-op" and len(profile.kernels) == 1
        assert profile.kernels["duration_us"].iloc[0] == pytest.approx(5.740459)
        assert profile.kernels["core_type"].iloc[0] == "mix_aic"


def test_readers_raise_no_pandas_performance_warning():
    """A wide msprof op folder (six groups joined) used to flood stderr with 'highly fragmented'."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("msprof_op_real_cann_minimal/OPPROF_001", "level1_cnn", "memory_l0", "advisor_pipe"):
            load_profile(ASCEND / name)


@pytest.mark.parametrize("reported,key", [
    ("Ascend910B1", "Ascend910B1"), ("Ascend910B2", "Ascend910B2"), ("Ascend910B3", "Ascend910B3"),
    ("Ascend910B4", "Ascend910B4"), ("Ascend910_9391", "Ascend910_93"), ("Ascend910_9392", "Ascend910_9392"),
    ("Ascend950PR_9599", "Ascend950PR_9599"), ("Ascend950PR_9589", "Ascend950PR"), ("Ascend950DT_9582", "Ascend950DT"),
    ("Ascend310P3", "Ascend310P3"), ("Ascend310P1", "Ascend310P"),
])
def test_chips_yaml_covers_the_chips_users_have_each_with_a_source(reported, key):
    from ascendopt.device.config import chip_facts, chip_key

    assert chip_key(reported) == key
    chip = chip_facts(reported)
    assert chip["ub_bytes"] and chip["source"] and chip["kind"] == "npu"
    assert "hbm_gbs" in chip and "clock_mhz" in chip and "cube_cores" in chip


def test_chip_named_in_the_capture_but_not_in_chips_yaml_is_named_never_replaced(tmp_path, monkeypatch):
    import shutil

    monkeypatch.delenv("ASCENDOPT_CHIP", raising=False)
    run = tmp_path / "OPPROF_005"
    shutil.copytree(MSPROF_OP, run)
    (run / "HardwareInfo.jsonl").write_text(  # SYNTHETIC record, a chip name no table lists
        '{"category":"Device Info","chip info":"Ascend999X_0001 V100"}\n{"category":"AI Core Information"}\n')
    device = load_profile(run).device
    assert device["chip"] == "Ascend999X_0001" and device["cube_cores"] is None and device["hbm_gbs"] is None


def test_chip_from_the_capture_brings_its_hbm_peak_from_chips_yaml(tmp_path):
    import shutil

    run = tmp_path / "OPPROF_006"
    shutil.copytree(MSPROF_OP, run)
    (run / "HardwareInfo.jsonl").write_text(HARDWARE_INFO_950)
    device = load_profile(run).device
    assert device["hbm_gbs"] == 1600 and device["sources"]["hbm_gbs"] == "configs/chips.yaml (Ascend950PR_9599)"
    assert device["clock_mhz"] == 1650  # HardwareInfo (measured) before OpBasicInfo's Current Freq 1800


# -- discovery: a plain folder holding a known file directly --------------------------------------------

@pytest.mark.parametrize("source,name,kind", [
    (OP_SUMMARY, "op_summary_20260605161737.csv", "msprof"),
    (OP_SUMMARY, "op_summary.csv", "msprof"),  # renamed copy
    (LEVEL1, "kernel_details.csv", "npu"),
    (LEVEL1, "kernel_details_rank0.csv", "npu"),  # renamed copy
    (MSPROF_OP / "OpBasicInfo.csv", "OpBasicInfo.csv", "msprof-op"),
])
def test_plain_folder_with_a_known_file_is_a_profile_and_says_which_file(tmp_path, source, name, kind):
    import shutil

    folder = tmp_path / "copied_here"
    folder.mkdir()
    shutil.copy(source, folder / name)
    for where in (folder, tmp_path):  # the folder itself, and its parent (one level down)
        profile = load_profile(where)
        assert profile.kind == kind
        assert [p.name for p in profile.files][:1] == [name]


def test_folder_with_two_kernel_tables_reads_one_and_names_both(tmp_path):
    import shutil

    shutil.copy(LEVEL1, tmp_path / "kernel_details.csv")
    shutil.copy(ADVISOR, tmp_path / "kernel_details_other.csv")
    profile = load_profile(tmp_path)
    assert [p.name for p in profile.files] == ["kernel_details.csv"]
    assert any("kernel_details_other.csv" in n for n in profile.notes)


def test_no_profile_error_lists_what_it_looked_for(tmp_path):
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ProfileError, match="kernel_details.*op_summary.*OpBasicInfo"):
        load_profile(tmp_path)


def test_summary_jsonl_section_averages_stand_in_when_no_block_csv(tmp_path):
    """SYNTHETIC summary.jsonl in the layout the msprof op docs give (section records, then OpInfoSummary)."""
    import json

    run = tmp_path / "OPPROF_007"
    run.mkdir()
    records = [{"category": "PipeUtilization", "aic_time(us)": 2.3, "aic_cube_ratio": 0.61, "aiv_vec_ratio": 0.2,
                "aiv_mte2_ratio": 0.35, "aiv_mte3_active_bw(GB/s)": None},
               {"category": "OpInfoSummary", "Op Name": "matmul_kernel_mix_aic", "Op Type": "mix",
                "Task Duration(us)": 40.0, "Block Dim": 36, "Mix Block Dim": None, "Device Id": 0, "Pid": 7,
                "Current Freq": 1650, "Rated Freq": 1650}]
    (run / "summary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    profile = load_profile(run)
    row = profile.kernels.iloc[0]
    assert len(profile.kernels) == 1 and row["name"] == "matmul_kernel_mix_aic" and row["duration_us"] == 40.0
    assert (row["mac_ratio"], row["vec_ratio"], row["vector_mte2_ratio"]) == (0.61, 0.2, 0.35)
    assert "PipeUtilization" in profile.metric_groups and row["core_type"] == "mix_aic"
