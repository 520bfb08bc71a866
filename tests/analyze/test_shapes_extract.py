"""Extraction of a kernel's launches with their input shapes (``analyze.shapes``) from real profiler files:
torch_npu kernel_details.csv (tests/data/ascend, provenance in its README), msprof op_summary, a
torch.profiler trace recorded here with ``record_shapes=True``, and Nsight Compute (no shapes: said)."""

import csv
import hashlib
import json
from pathlib import Path

import pytest

from ascendopt.analyze.shapes import mix_from_profile, parse_ascend_shapes, read_shapes
from ascendopt.errors import ProfileError, UsageError

DATA = Path(__file__).resolve().parents[1] / "data"
ADVISOR = DATA / "ascend/advisor_pipe/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
LEVEL1 = DATA / "ascend/level1_cnn/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
LEVEL0 = DATA / "ascend/level0_cnn/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
OP_SUMMARY = DATA / "ascend/msprof_op_summary"
NCU = DATA / "cuda/ncu_raw_pipe.csv"


def _rows(path: Path, needle: str) -> list[dict]:
    """The file's rows whose Name or Type holds ``needle``, read with the csv module (an independent check)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [r for r in csv.DictReader(f) if needle in r["Name"] or needle in r["Type"]]


def test_kernel_details_shapes_match_the_file_row_by_row():
    found = read_shapes(ADVISOR, "FlashAttentionScore")
    rows = _rows(ADVISOR, "FlashAttentionScore")
    assert found.source == "kernel_details" and found.files == [ADVISOR]
    assert found.sha256 == hashlib.sha256(ADVISOR.read_bytes()).hexdigest()
    assert sum(k.launches for k in found.kernels) == len(rows) == 9
    by_name = {k.name: k for k in found.kernels}
    for name in {r["Name"] for r in rows}:
        mine = [r for r in rows if r["Name"] == name]
        k = by_name[name]
        assert k.device_us == pytest.approx(sum(float(r["Duration(us)"]) for r in mine))
        assert k.shaped_us == pytest.approx(k.device_us)  # every row records its shapes
    varlen = by_name["aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen"].records
    # the raw cell is "4096,2,511;4096,2,512;4096,2,512;;;;4096,4096;;;;;": empty entries are inputs without dims
    assert varlen[0].shapes == ((4096, 2, 511), (4096, 2, 512), (4096, 2, 512), (), (), (), (4096, 4096),
                                (), (), (), (), ())
    assert varlen[0].dtypes[:3] == ("DT_BF16",) * 3 and varlen[0].dtypes[6] == "BOOL" and len(varlen[0].dtypes) == 12


def test_quoted_shape_cells_of_an_older_export_parse_and_bucket():
    # level1_cnn writes the cells with literal quotes ("""32,3,224,224""") and CRLF line ends
    found = read_shapes(LEVEL1, "TransData")
    rows = _rows(LEVEL1, "TransData")
    distinct = {r["Input Shapes"].strip('"') for r in rows}
    assert sum(len(k.records) for k in found.kernels) >= len(distinct) == 30
    mix, _ = mix_from_profile(LEVEL1, "TransData")
    assert len(mix.buckets) <= 16 and mix.tail is not None and mix.buckets[-1].tail
    assert mix.main_share >= 0.95 and sum(b.weight for b in mix.buckets) == pytest.approx(1.0, abs=1e-5)
    assert mix.coverage == 1.0 and mix.kernel_us == pytest.approx(sum(float(r["Duration(us)"]) for r in rows), abs=1e-3)
    members = [m for b in mix.buckets for m in b.members]
    assert len(members) == len(set(members)) == len({parse_ascend_shapes(s) for s in distinct})


def test_msprof_op_summary_of_a_triton_kernel_has_launches_but_no_shapes():
    found = read_shapes(OP_SUMMARY, "main_kernel")
    assert found.source == "op_summary" and [(k.name, k.launches, k.records) for k in found.kernels] == [
        ("main_kernel", 3, [])]
    assert found.kernels[0].device_us == pytest.approx(87139.380 + 86808.420 + 86846.720)
    with pytest.raises(UsageError, match=r"3 launch\(es\) of main_kernel record no input shapes.*N/A"):
        mix_from_profile(OP_SUMMARY, "main_kernel")


def test_a_table_without_input_shapes_and_a_filter_matching_nothing_are_one_line_errors():
    with pytest.raises(ProfileError, match="no 'Input Shapes' column"):
        read_shapes(LEVEL0)
    with pytest.raises(UsageError, match="--kernel-filter 'NoSuchKernel' matches no kernel"):
        read_shapes(ADVISOR, "NoSuchKernel")


def test_ncu_has_launch_sizes_and_no_tensor_shapes():
    found = read_shapes(NCU, "_axpb_kernel")
    (k,) = found.kernels
    assert k.records == [] and k.launch_configs == {"grid 4096, block 128": 2}
    assert any("records launches, not tensors" in n for n in found.notes)


def _record_trace(path: Path) -> dict[tuple, int]:
    """A real torch.profiler trace (CPU, record_shapes=True) of aten::mm at a few shapes; returns the calls
    made per shape."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ascendopt.collect.kineto import silence_kineto_log

    silence_kineto_log()
    calls = {((8, 64), (64, 16)): 3, ((8, 96), (96, 16)): 2, ((8, 200), (200, 16)): 1}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for (a, b), n in calls.items():
            for _ in range(n):
                torch.mm(torch.ones(*a), torch.ones(*b))
    prof.export_chrome_trace(str(path))
    return calls


def test_torch_profiler_trace_with_record_shapes(tmp_path):
    trace = tmp_path / "trace.json"
    calls = _record_trace(trace)
    found = read_shapes(trace, "aten::mm")
    assert found.source == "torch.profiler trace" and [k.name for k in found.kernels] == ["aten::mm"]
    (k,) = found.kernels
    assert {r.shapes: r.launches for r in k.records} == calls
    assert {r.dtypes for r in k.records} == {("float", "float")}
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "aten::mm"]
    assert k.device_us == pytest.approx(sum(e["dur"] for e in events))
    assert any("host time" in n for n in found.notes)  # a CPU trace times ops on the host: said
    mix, _ = mix_from_profile(trace, "aten::mm")
    assert len(mix.buckets) == 3 and not mix.tail and mix.source["sha256"] == found.sha256
