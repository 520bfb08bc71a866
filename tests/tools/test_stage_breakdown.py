"""tools/stage_breakdown.py's pure parts: variant parsing and the per-kernel table (the profiling
itself needs a CUDA device; its results are in benchmarks/RESULTS.md)."""

import sys

import pytest

import _benchmarks
from ascendopt.errors import UsageError


@pytest.fixture(scope="module")
def breakdown():
    return _benchmarks.load("stage_breakdown")


def test_variants_parse_to_tunable_overrides(breakdown):
    assert breakdown.parse_variant("default") == {} and breakdown.parse_variant(" ") == {}
    assert breakdown.parse_variant("fused_BV=64, fused_PIPELINE=1") == {"fused_BV": 64, "fused_PIPELINE": 1}
    with pytest.raises(UsageError, match="--variants 'BV': expected NAME=VALUE"):
        breakdown.parse_variant("BV")
    with pytest.raises(UsageError, match="--variants 'BV=wide': value must be an integer"):
        breakdown.parse_variant("BV=wide")


@pytest.mark.parametrize("argv, message", [
    (["--kernel", "nope"], "unknown kernel 'nope'"),
    (["--kernel", "rms_norm", "--preset", "huge"], "no shape preset 'huge'"),
    (["--kernel", "rms_norm", "--variants", "default;BVX=1"], "no tunable 'BVX'"),
    (["--kernel", "rms_norm", "--variants", "block_rows=3"], "block_rows=3: out of range"),
    (["--kernel", "gdn_kkt", "--variants", "peer"], "gdn_kkt has no peer"),
])
def test_bad_case_is_one_line_and_exit_2_before_any_device_work(breakdown, capsys, monkeypatch, argv, message):
    monkeypatch.setattr(sys, "argv", ["stage_breakdown.py", *argv, "--out", "/nonexistent/never-written.json"])
    assert breakdown.main() == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_table_sorts_kernels_by_time_and_totals_them(breakdown):
    text = breakdown.table("default", {"_small": {"launches": 2.0, "us": 10.0}, "_big": {"launches": 1.0, "us": 30.0}})
    lines = text.strip().splitlines()
    assert lines[0] == "default: 40.0 us device time per call"
    assert lines[4] == "| _big | 1 | 30.0 | 75 % |" and lines[5] == "| _small | 2 | 10.0 | 25 % |"


def test_per_launch_times_tell_a_bulk_and_a_tail_launch_of_one_kernel_apart(breakdown):
    # two calls of (bulk 70 us, tail 4 us), given out of order, plus a third call with other numbers
    launches = [(10.0, "_conv", 72.0), (0.0, "_conv", 70.0), (1.0, "_conv", 4.0), (11.0, "_conv", 6.0),
                (20.0, "_conv", 71.0), (21.0, "_conv", 5.0)]
    out = breakdown.by_launch(launches, 3)
    assert out == {"0:_conv": {"launches": 1.0, "us": 71.0}, "1:_conv": {"launches": 1.0, "us": 5.0}}
    with pytest.raises(ValueError, match="5 launches do not split into 3"):
        breakdown.by_launch(launches[:5], 3)
    with pytest.raises(ValueError, match="launch 1 of a call is not the same kernel"):
        breakdown.by_launch([(0.0, "a", 1.0), (1.0, "b", 1.0), (2.0, "a", 1.0), (3.0, "c", 1.0)], 2)
