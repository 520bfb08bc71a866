"""Unit tests of ascendopt.collect: metric names, names, settings, the kernel table from a REAL
CUDA trace (tests/data/cuda/trace.json, captured on the H200), and the Nsight Compute command."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from ascendopt.collect import kernel_table, ncu
from ascendopt.collect.metrics import normalize_level, normalize_metric_group, parse_metric_groups
from ascendopt.collect.names import profile_folder, sanitize_name
from ascendopt.collect.settings import ProfileSettings
from ascendopt.errors import EnvironmentProblem, UsageError

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    "alias, canonical",
    [("pipe", "PipeUtilization"), ("PIPE", "PipeUtilization"), ("Pipe_Utilization", "PipeUtilization"),
     ("ub", "MemoryUB"), ("memory-ub", "MemoryUB"), ("MemoryUB", "MemoryUB"), ("memory", "Memory"),
     ("l2", "L2Cache"), ("L2Cache", "L2Cache"), ("arith", "ArithmeticUtilization"),
     ("ArithmeticUtilization", "ArithmeticUtilization"), ("memaccess", "MemoryAccess"),
     ("MemoryAccess", "MemoryAccess"), ("memoryl0", "MemoryL0"), ("Memory_L0", "MemoryL0"),
     ("conflict", "ResourceConflictRatio"), ("ResourceConflictRatio", "ResourceConflictRatio"),
     ("none", "none"), ("AiCoreNone", "none"), ("NONE", "none")],
)
def test_metric_aliases_are_case_and_underscore_insensitive(alias, canonical):
    assert normalize_metric_group(alias) == canonical


def test_unknown_metric_group_lists_every_valid_name():
    with pytest.raises(UsageError) as exc:
        normalize_metric_group("bandwidth")
    text = str(exc.value)
    assert "'bandwidth'" in text
    for name in ("PipeUtilization", "MemoryUB", "Memory", "L2Cache", "ArithmeticUtilization", "MemoryAccess",
                 "MemoryL0", "ResourceConflictRatio", "none", "pipe", "ub", "l2", "arith", "conflict"):
        assert name in text


def test_metric_group_list_keeps_order_and_drops_duplicates():
    assert parse_metric_groups("ub, pipe,PipeUtilization,,l2") == ["MemoryUB", "PipeUtilization", "L2Cache"]
    with pytest.raises(UsageError, match="no metric group"):
        parse_metric_groups(" , ")


def test_metric_groups_come_from_the_one_table_in_analyze():
    from ascendopt.analyze.traces.columns import ACL_METRIC_GROUPS, METRIC_GROUP_TABLE, METRIC_GROUPS
    from ascendopt.cli.collect import _GROUPS_HELP
    from ascendopt.collect.metrics import METRIC_GROUPS as COLLECT_GROUPS

    # collect lists every group of the table once (its own order), and analyze finds the same groups
    assert sorted(COLLECT_GROUPS) == sorted(METRIC_GROUP_TABLE)
    assert set(METRIC_GROUPS) == set(METRIC_GROUP_TABLE) - {"none"}
    for group, spec in METRIC_GROUP_TABLE.items():
        assert all(normalize_metric_group(alias) == group for alias in (group, *spec.aliases))
        assert ACL_METRIC_GROUPS[spec.acl] == (None if group == "none" else group)
    assert ("one profiler run each: pipe, ub, memory, l2, arith, memaccess, memoryl0, conflict, none "
            "(or the full names") in _GROUPS_HELP


def test_profiler_levels():
    assert normalize_level("level1") == "Level1" and normalize_level("2") == "Level2"
    assert normalize_level("Level_none") == "Level_none"
    with pytest.raises(UsageError, match="Level0, Level1, Level2, Level_none"):
        normalize_level("Level9")


@pytest.mark.parametrize(
    "raw, safe",
    [("../../etc/passwd", "etc_passwd"), ("my op;rm -rf ~", "my_op_rm_-rf_"), ("$(whoami)", "whoami_"),
     ("ok.name-1", "ok.name-1"), ("a/../b", "a___b")],
)
def test_names_are_sanitized(raw, safe):
    assert sanitize_name(raw) == safe
    assert "/" not in safe and ".." not in safe


def test_name_without_usable_characters_is_rejected():
    with pytest.raises(UsageError, match="no usable characters"):
        sanitize_name("../..//")


def test_schedule_defaults_and_validation():
    s = ProfileSettings.build(name="x")
    assert (s.wait, s.warmup, s.active, s.repeat, s.skip_first, s.steps) == (0, 1, 1, 1, 0, 2)
    assert ProfileSettings.build(name="x", skip_first=3, wait=1, warmup=1, active=2, repeat=2).steps == 3 + 4 * 2
    with pytest.raises(UsageError, match=r"steps=1: must be >= .* = 2"):
        ProfileSettings.build(name="x", steps=1)
    with pytest.raises(UsageError, match="repeat=0"):
        ProfileSettings.build(name="x", repeat=0)
    with pytest.raises(UsageError, match="active=0"):
        ProfileSettings.build(name="x", active=0)


def test_profile_folder_names_are_unique_across_staging_and_out_dir(tmp_path):
    stage, out = tmp_path / "stage", tmp_path / "out"
    stage.mkdir(), out.mkdir()
    first = profile_folder([stage, out], "op", "cpu")
    assert first.parent == stage and first.name.startswith("op_") and first.name.endswith("_ascendopt_cpu")
    (out / first.name).mkdir()  # an earlier run of the same second already published
    second = profile_folder([stage, out], "op", "cpu")
    assert second.name != first.name and second.name.endswith("_ascendopt_cpu")


def test_cuda_kernel_table_from_real_trace(tmp_path):
    frame = kernel_table.build([DATA / "cuda" / "trace.json"], "cuda")
    assert list(frame.columns) == ["name", "core_type", "start_us", "duration_us", "step", "device", "block_dim"]
    kernels = frame[frame["core_type"] == "cuda"]
    assert len(kernels) == 6 and (frame["core_type"] == "memset").sum() == 4
    axpb = frame[frame["name"] == "_axpb_kernel"]
    assert len(axpb) == 2 and set(axpb["block_dim"]) == {4096} and set(axpb["device"]) == {"cuda:0"}
    assert axpb["duration_us"].iloc[0] == 32.0
    assert frame["start_us"].is_monotonic_increasing
    path = kernel_table.write([DATA / "cuda" / "trace.json"], tmp_path, "cuda")
    assert pd.read_csv(path)["name"].tolist() == frame["name"].tolist()


def test_cpu_kernel_table_counts_nested_same_name_range_once(tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "_k", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "user_annotation", "name": "_k", "pid": 1, "tid": 1, "ts": 11, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 12, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 70, "dur": 9},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 71, "dur": 1},
    ]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    frame = kernel_table.build([trace], "cpu")
    assert frame[["name", "core_type", "step"]].values.tolist() == [["_k", "cpu", 1], ["aten::mul", "torch_op", 1]]
    assert "block_dim" not in frame.columns


@pytest.mark.parametrize("text, why", [("{not json", "not a readable chrome trace"),
                                       ('{"traceEvents": 3}', "no traceEvents list")])
def test_kernel_table_reads_traces_with_the_analyze_reader(tmp_path, text, why):
    from ascendopt.errors import ProfileError

    trace = tmp_path / "trace.json"
    trace.write_text(text)
    with pytest.raises(ProfileError, match=why):
        kernel_table.build([trace], "cuda")
    # events without a start time are not placed (the reader keeps them: they have a dur)
    trace.write_text(json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "dur": 5},
                                 {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 5, "args": {"grid": [2]}}]))
    frame = kernel_table.build([trace], "cuda")
    assert frame[["name", "start_us", "block_dim"]].values.tolist() == [["k", 1.0, 2]]


def test_ncu_filter_and_command_from_real_trace(tmp_path):
    kernel_table.write([DATA / "cuda" / "trace.json"], tmp_path, "cuda")
    regex = ncu.kernel_regex(tmp_path / "kernels.csv", None)
    # plain-identifier kernels only (Triton, cuBLAS nvjet); the templated at::native kernel is left out
    assert regex.startswith("^(") and "_axpb_kernel" in regex and "nvjet_sm90" in regex and "reduce_kernel" not in regex
    assert ncu.kernel_regex(tmp_path / "kernels.csv", "a.b") == r"a\.b"
    assert ncu.kernel_regex(tmp_path / "kernels.csv", "regex:^_ax.*") == "^_ax.*"
    cmd = ncu.command("/usr/bin/ncu", "PipeUtilization", regex, tmp_path / "rep")
    assert cmd[:5] == ["/usr/bin/ncu", "--target-processes", "all", "--launch-count", str(ncu.MAX_LAUNCHES)]
    assert cmd[cmd.index("-k") + 1] == f"regex:{regex}"
    sections = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"]
    assert sections == ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "LaunchStats"]
    mem = ncu.command("ncu", "MemoryUB", None, tmp_path / "rep")
    assert "-k" not in mem and [mem[i + 1] for i, a in enumerate(mem) if a == "--section"] == [
        "SpeedOfLight", "MemoryWorkloadAnalysis", "LaunchStats"]
    assert cmd[-3:] == ["-o", str(tmp_path / "rep"), "-f"]


def test_no_ncu_on_path_is_environment_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvironmentProblem) as exc:
        ncu.require()
    assert exc.value.exit_code == 5 and "ncu (Nsight Compute) is not on PATH" in str(exc.value)


def test_out_dir_problems_are_usage_errors(tmp_path):
    from ascendopt.collect.staging import prepare_out_dir, staging

    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="exists and is not a folder"):
        prepare_out_dir(tmp_path / "file")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root ignores permissions: use a path under a file instead
        locked = tmp_path / "file"
    with pytest.raises(UsageError, match="cannot write there"), staging(locked):
        pass


def test_an_interrupted_collect_child_leaves_no_temporary_folder(tmp_path, monkeypatch):
    """Ctrl-C while the workload process runs: the process group is killed and its /tmp folder removed (only a
    failure whose message names the folder's log keeps it)."""
    import signal
    import tempfile

    from ascendopt.collect.child import run_child

    hangs = tmp_path / "hangs.py"
    hangs.write_text("import time\ntime.sleep(60)\n\n\ndef workload():\n    pass\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(3)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_child({"workload": {"exec_file": str(hangs)}, "mode": "replay", "settings": []}, label="hangs.py",
                      timeout=60, backend="cpu")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert list(scratch.iterdir()) == []
