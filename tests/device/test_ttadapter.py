"""Reading local buffers and the core type from real triton-ascend 3.2 ``.ttadapter`` files
(tests/data/precheck/README.md says how they were made), the UB estimate and the grid findings."""

import pytest

from ascendopt.device import ttadapter
from ascendopt.errors import UsageError
from conftest import DATA

PRECHECK = DATA / "precheck"


def test_vector_kernel_buffers_and_core_type():
    kernel = ttadapter.read(PRECHECK / "add_kernel_block1024.ttadapter")
    assert kernel.name == "add_kernel"
    assert kernel.mix_mode == "aiv" and kernel.core_type == "vector"
    # add_kernel loads x and y as BLOCK=1024 fp32 tiles: two buffers of 1024 x 4 bytes
    assert [b.describe() for b in kernel.buffers] == ["1024xf32", "1024xf32"]
    assert kernel.alloc_bytes == 2 * 1024 * 4
    assert kernel.dynamic_buffers == 0


def test_dot_kernel_is_mixed_and_counts_fp16_tiles():
    kernel = ttadapter.read(PRECHECK / "matmul_kernel_64x64x32.ttadapter")
    assert kernel.core_type == "mixed"
    # a [M, K] = 64x32 and a [K, N] = 32x64 fp16 tile; the fp32 accumulator is not a memref.alloc here
    assert sorted(b.shape for b in kernel.buffers) == [(32, 64), (64, 32)]
    assert kernel.alloc_bytes == (64 * 32 + 32 * 64) * 2


def test_ub_estimate_applies_the_double_buffer_factor():
    kernel = ttadapter.read(PRECHECK / "add_kernel_block1024.ttadapter")
    single = ttadapter.ub_estimate(kernel, 196608, double_buffer_factor=1)
    double = ttadapter.ub_estimate(kernel, 196608)
    assert double.double_buffer_factor == 2
    assert double.estimate_bytes == 2 * single.estimate_bytes == 2 * kernel.alloc_bytes
    assert double.to_dict()["percent_of_ub"] == pytest.approx(100 * 16384 / 196608, abs=0.05)
    with pytest.raises(UsageError):
        ttadapter.ub_estimate(kernel, 0)


def test_dynamic_dims_and_other_element_types():
    text = ('func.func @k(%a: memref<?xf32>) attributes {mix_mode = "aiv"} {\n'
            "  %alloc = memref.alloc() : memref<16x8xbf16>\n"
            "  %alloc_1 = memref.alloc(%n) : memref<?x4xi64>\n"
            "  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<32xi1>\n}")
    kernel = ttadapter.parse(text)
    assert kernel.alloc_bytes == 16 * 8 * 2 + 32  # the dynamic i64 buffer has no static size
    assert kernel.dynamic_buffers == 1
    assert kernel.buffers[1].describe() == "?x4xi64"


@pytest.mark.parametrize("text, missing", [
    ("module {}", "func.func"),
    ("func.func @k() {\n}", "mix_mode"),
])
def test_not_a_ttadapter_names_what_is_missing(text, missing):
    with pytest.raises(UsageError, match=missing):
        ttadapter.parse(text, "x.ttadapter")


def test_unknown_element_type_and_unreadable_file(tmp_path):
    with pytest.raises(UsageError, match="unknown element type"):
        ttadapter.parse('func.func @k() attributes {mix_mode = "aiv"} {\n memref.alloc() : memref<4xf8E4M3>\n}')
    with pytest.raises(UsageError, match="cannot read"):
        ttadapter.read(tmp_path / "missing.ttadapter")


def test_grid_findings_follow_the_practice():
    # A2: 24 cube, 48 vector cores
    assert any("cube core count" in f for f in ttadapter.grid_findings("vector", [24], 24, 48))
    assert ttadapter.grid_findings("vector", [48], 24, 48) == []
    assert ttadapter.grid_findings("mixed", [24], 24, 48) == []
    assert any("vector core count" in f for f in ttadapter.grid_findings("mixed", [48], 24, 48))
    assert any("grid limit" in f for f in ttadapter.grid_findings("vector", [70000], 24, 48))
    assert ttadapter.grid_findings("vector", None, 24, 48) == []
    # a 2D grid of 24 programs is not a 1D core grid: nothing to say about the core count
    assert ttadapter.grid_findings("vector", [4, 6], 24, 48) == []
