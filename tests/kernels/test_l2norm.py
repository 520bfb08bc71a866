"""l2norm forward and backward under the Triton interpreter against the fp32 oracle."""

import pytest
import torch

from _numerics import TOL, rel_rms
from ascendopt.errors import UsageError
from ascendopt.kernels import get
from ascendopt.kernels._lib.common import nan_poisoning
from ascendopt.kernels.l2norm import l2norm, l2norm_bwd, l2norm_fwd, l2norm_reference


def _inputs(shape, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen) * 3 + 0.5).to(dtype)
    dy = torch.randn(shape, generator=gen).to(dtype)
    return x, dy


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", [{}, {"block_rows": 8, "block_rows_bwd": 4}])
def test_forward_and_backward_match_oracle_with_bulk_and_tail_tiles(dtype, config):
    # 2 x 37 = 74 rows: with 8-row tiles a bulk launch of 9 tiles plus a 2-row tail; D=80 pads to 128.
    x, dy = _inputs((2, 37, 80), dtype)
    with nan_poisoning():
        y, rstd = l2norm_fwd(x, config=config)
        dx = l2norm_bwd(y, rstd, dy, config=config)
    ref = l2norm_reference({"x": x, "dy": dy}, "fwdbwd")
    assert y.dtype == dtype and dx.dtype == dtype and rstd.dtype == torch.float32
    assert not torch.isnan(y).any() and not torch.isnan(dx).any() and not torch.isnan(rstd).any()
    assert rel_rms(y, ref["y"]) < TOL[dtype]
    assert rel_rms(dx, ref["dx"]) < TOL[dtype]
    expected_rstd = 1 / torch.sqrt(x.float().pow(2).sum(-1) + 1e-6)
    torch.testing.assert_close(rstd, expected_rstd, rtol=1e-5, atol=0)


def test_four_dim_input_and_rows_fewer_than_a_tile():
    x, _ = _inputs((1, 3, 2, 32), torch.float32)  # 6 rows: only a tail launch
    y = l2norm(x)
    assert y.shape == x.shape
    assert rel_rms(y, l2norm_reference({"x": x}, "fwd")["y"]) < 1e-5


def test_widest_supported_row_runs_and_wider_is_refused_with_a_reason():
    spec = get("l2norm")
    x, dy = _inputs((3, 8192), torch.float32)
    y, rstd = l2norm_fwd(x)
    dx = l2norm_bwd(y, rstd, dy)
    ref = l2norm_reference({"x": x, "dy": dy}, "fwdbwd")
    assert rel_rms(y, ref["y"]) < 1e-5 and rel_rms(dx, ref["dx"]) < 1e-5
    assert spec.supports({"B": 1, "T": 3, "D": 8192}, "fp32", "fwdbwd") is None
    reason = spec.supports({"B": 1, "T": 3, "D": 16384}, "fp32", "fwdbwd")
    assert reason and "D=16384" in reason and "UB" in reason


def test_spec_run_equals_launchers_and_gate_check_passes():
    from ascendopt.judge.correctness import check_kernel

    spec = get("l2norm")
    for dtype in ("fp32", "bf16"):
        reports = check_kernel(spec, spec.shape("tiny").dims, dtype, "fwdbwd", None)
        assert [r.name for r in reports] == ["y", "dx"]
        assert all(r.passed for r in reports), [r.line() for r in reports]


def test_bad_input_raises_usage_error():
    with pytest.raises(UsageError):
        l2norm(torch.randn(5))
    with pytest.raises(UsageError):
        l2norm(torch.randn(4, 16), config={"block_rows": 3})


def test_cuda_row_tile_is_capped_by_the_register_budget(monkeypatch):
    from ascendopt.kernels._lib import rowwise

    # D=128 with x2 live copies: the UB model allows 128 rows, 24576 live values only 64 (96 -> 64).
    monkeypatch.setattr(rowwise, "ub_context", lambda: (196608, "cpu", False))
    assert rowwise.block_rows(1 << 20, 128, 2.0, 0.85) == 128
    monkeypatch.setattr(rowwise, "ub_context", lambda: (196608, "cuda", False))
    assert rowwise.block_rows(1 << 20, 128, 2.0, 0.85) == 64
    assert rowwise.block_rows(1 << 20, 8192, 5.0, 0.85) == 1  # never below one row


def test_cuda_streaming_row_tile_is_short(monkeypatch):
    from ascendopt.kernels._lib import rowwise

    # one program per tile on CUDA: narrow rows take 16-row tiles; wide rows stay at the register cap
    monkeypatch.setattr(rowwise, "ub_context", lambda: (196608, "cuda", False))
    assert rowwise.block_rows(1 << 20, 128, 2.0, 0.85, streaming=True) == 16
    assert rowwise.block_rows(1 << 20, 4096, 2.0, 0.85, streaming=True) == 2
    assert rowwise.block_rows(1 << 20, 128, 2.0, 0.85, requested=64, streaming=True) == 64  # as asked
    monkeypatch.setattr(rowwise, "ub_context", lambda: (196608, "npu", True))
    assert rowwise.block_rows(1 << 20, 128, 2.0, 0.85, streaming=True) == 128  # Ascend: the UB model's tile
