"""CUDA readers on the REAL H200 files in tests/data/cuda/ (see its README): the torch.profiler
chrome trace and two `ncu --csv --page raw` captures. Expected values are read from the raw
files with the csv/json modules, independently of the readers.
"""

import csv
import json
import shutil

import pytest

from ascendopt.analyze.traces import load_profile
from ascendopt.analyze.traces.ncu import kernel_key, read_ncu_raw
from ascendopt.errors import ProfileError
from profile_variants import CUDA

PIPE, MEMORY, TRACE = CUDA / "ncu_raw_pipe.csv", CUDA / "ncu_raw_memory.csv", CUDA / "trace.json"


def ncu_rows(path):
    rows = [r for r in csv.reader(path.open()) if r and not r[0].startswith("==")]
    header, units, data = rows[0], rows[1], rows[2:]
    return [dict(zip(header, r, strict=True)) for r in data], dict(zip(header, units, strict=True))


def num(text):
    return float(text.replace(",", ""))


def test_ncu_raw_metrics_map_to_canonical_columns():
    frame, device, _ = read_ncu_raw(PIPE)
    rows, units = ncu_rows(PIPE)
    assert units["gpu__time_duration.sum"] == "ns"
    assert frame["duration_us"].tolist() == pytest.approx([num(r["gpu__time_duration.sum"]) / 1000 for r in rows])
    gemm = next(i for i, r in enumerate(rows) if r["Kernel Name"].startswith("nvjet"))
    raw = rows[gemm]
    assert frame["mac_ratio"][gemm] == pytest.approx(
        num(raw["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]) / 100)
    assert frame["vec_ratio"][gemm] == pytest.approx(max(
        num(raw["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"]),
        num(raw["sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"])) / 100)
    assert frame["dram_ratio"][gemm] == pytest.approx(
        num(raw["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]) / 100)
    assert frame["block_dim"][gemm] == num(raw["launch__grid_size"])
    assert device == {"chip": "NVIDIA H200", "cube_cores": 132, "vector_cores": 132, "clock_mhz": 1980}


def test_kernel_key_pairs_ncu_and_torch_names():
    trace_names = {e["name"] for e in json.loads(TRACE.read_text())["traceEvents"] if e.get("cat") == "kernel"}
    ncu_names = {r["Kernel Name"] for r in ncu_rows(PIPE)[0]}
    trace_keys, ncu_keys = {kernel_key(n) for n in trace_names}, {kernel_key(n) for n in ncu_names}
    # ncu writes at::reduce_kernel, torch at::native::reduce_kernel: both reduce to the function name
    assert trace_keys == {"_axpb_kernel", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "reduce_kernel"}
    assert trace_keys <= ncu_keys


def test_cuda_folder_trace_durations_with_ncu_counters():
    profile = load_profile(CUDA)
    assert profile.kind == "cuda" and profile.metric_groups == ["PipeUtilization", "Memory"]
    events = [e for e in json.loads(TRACE.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    k = profile.kernels
    assert sorted(k["duration_us"]) == sorted(float(e["dur"]) for e in events)  # timing from the trace
    axpb = k[k["name"] == "_axpb_kernel"].iloc[0]
    # l2_ratio: duration-weighted mean of the two profiled _axpb_kernel launches (memory file first)
    rows = [r for r in ncu_rows(MEMORY)[0] if r["Kernel Name"] == "_axpb_kernel"]
    w = [num(r["gpu__time_duration.sum"]) for r in rows]
    l2 = [num(r["lts__throughput.avg.pct_of_peak_sustained_elapsed"]) / 100 for r in rows]
    assert axpb["l2_ratio"] == pytest.approx(sum(a * b for a, b in zip(w, l2, strict=True)) / sum(w))
    # the "active" tensor metric of the pipe file beats the memory file's "elapsed" one
    gemm = k[k["name"].astype(str).str.startswith("nvjet")].iloc[0]
    pipe_gemm = next(r for r in ncu_rows(PIPE)[0] if r["Kernel Name"].startswith("nvjet"))
    assert gemm["mac_ratio"] == pytest.approx(
        num(pipe_gemm["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]) / 100)
    assert profile.device["chip"] == "NVIDIA H200"


def test_trace_only_folder_has_no_counters(tmp_path):
    shutil.copy(TRACE, tmp_path / "trace.json")
    profile = load_profile(tmp_path)
    assert profile.metric_groups == [] and profile.not_collected == ["PipeUtilization", "Memory"]
    assert "mac_ratio" not in profile.kernels.columns


def test_ncu_file_alone_and_kernels_csv_folder(tmp_path):
    alone = load_profile(PIPE)
    assert alone.kind == "cuda" and len(alone.kernels) == len(ncu_rows(PIPE)[0])
    # a collect-style folder: kernels.csv (canonical) written from the trace's rows
    events = [e for e in json.loads(TRACE.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    with (tmp_path / "kernels.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "core_type", "start_us", "duration_us", "step", "device", "block_dim"])
        for e in events:
            w.writerow([e["name"], "cuda", e["ts"], e["dur"], "", "cuda:0", 1])
    shutil.copy(PIPE, tmp_path / "ncu_raw.csv")
    (tmp_path / "ascendopt_profile.yaml").write_text(
        "schema: 1\nbackend: cuda\nset_id: s1\nmetric_group: PipeUtilization\n")
    profile = load_profile(tmp_path)
    assert profile.kind == "cuda" and profile.set_id == "s1"
    assert profile.kernels["mac_ratio"].notna().all()


def test_collect_set_runs_in_a_parent_are_merged(tmp_path):
    for group, ncu in (("PipeUtilization", PIPE), ("Memory", MEMORY)):
        folder = tmp_path / f"demo_20261201-07000{0 if group == 'Memory' else 1}_ascendopt_cuda"
        folder.mkdir()
        shutil.copy(TRACE, folder / "trace.json")
        shutil.copy(ncu, folder / "ncu_raw.csv")
        (folder / "ascendopt_profile.yaml").write_text(
            f"schema: 1\nbackend: cuda\nset_id: set7\nmetric_group: {group}\n")
    profile = load_profile(tmp_path)
    assert len(profile.runs) == 2 and any("collect set set7" in n for n in profile.notes)


def test_ncu_bad_file_is_a_profile_error(tmp_path):
    bad = tmp_path / "ncu_raw.csv"
    rows = PIPE.read_text().splitlines()
    header_at = next(i for i, line in enumerate(rows) if line.startswith('"ID"'))
    bad.write_text("\n".join(rows[: header_at + 2]) + "\n")  # header and units, no launches
    with pytest.raises(ProfileError, match="no profiled kernel rows"):
        read_ncu_raw(bad)
