"""rms_norm forward and backward (dx and the deterministic dweight reduction) under the interpreter."""

import pytest
import torch

from _numerics import TOL, rel_rms
from ascendopt.errors import UsageError
from ascendopt.kernels import get
from ascendopt.kernels._lib import rowwise
from ascendopt.kernels._lib.common import nan_poisoning, num_cores
from ascendopt.kernels.rms_norm import rms_norm, rms_norm_bwd, rms_norm_fwd, rms_norm_reference


def _inputs(shape, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen) * 2 + 0.3).to(dtype)
    weight = (1 + 0.2 * torch.randn(shape[-1], generator=gen)).to(dtype)
    dy = torch.randn(shape, generator=gen).to(dtype)
    return x, weight, dy


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("config", [{}, {"block_rows": 8, "block_rows_bwd": 4}])
def test_forward_and_backward_match_oracle_with_bulk_and_tail_tiles(dtype, config):
    # 74 rows (bulk tiles + a partial tail tile with 8- or 4-row tiles); D=96 pads to 128.
    x, w, dy = _inputs((2, 37, 96), dtype)
    with nan_poisoning():
        y, rstd = rms_norm_fwd(x, w, config=config)
        dx, dw = rms_norm_bwd(x, w, rstd, dy, config=config)
    ref = rms_norm_reference({"x": x, "weight": w, "dy": dy}, "fwdbwd")
    for name, value in (("y", y), ("dx", dx), ("dweight", dw)):
        assert value.dtype == dtype, name
        assert not torch.isnan(value).any(), name
        assert rel_rms(value, ref[name]) < TOL[dtype], name
    torch.testing.assert_close(rstd, torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6), rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reloaded_and_resident_weight_give_identical_forwards(dtype):
    # weight_mode 1 keeps the weight row across a program's tiles, 2 reloads it per tile (CUDA's auto):
    # the same products in the same order, so bit-identical y and rstd, in bulk and tail tiles.
    x, w, _ = _inputs((2, 37, 96), dtype, seed=3)
    kept = rms_norm_fwd(x, w, config={"block_rows": 8, "weight_mode": 1})
    reloaded = rms_norm_fwd(x, w, config={"block_rows": 8, "weight_mode": 2})
    for a, b in zip(kept, reloaded, strict=True):
        assert torch.equal(a, b)
    ref = rms_norm_reference({"x": x, "weight": w, "dy": x}, "fwd")["y"]
    assert rel_rms(reloaded[0], ref) < TOL[dtype]


def test_weight_gradient_is_deterministic_and_exact_in_fp32():
    x, w, dy = _inputs((3, 50, 64), torch.float32, seed=3)
    _, rstd = rms_norm_fwd(x, w, config={"block_rows": 4})
    first = rms_norm_bwd(x, w, rstd, dy, config={"block_rows_bwd": 4})[1]
    second = rms_norm_bwd(x, w, rstd, dy, config={"block_rows_bwd": 4})[1]
    assert torch.equal(first, second)
    ref = rms_norm_reference({"x": x, "weight": w, "dy": dy}, "fwdbwd")["dweight"]
    torch.testing.assert_close(first, ref, rtol=1e-5, atol=1e-5)


def test_widest_supported_row_and_refusal_beyond():
    spec = get("rms_norm")
    x, w, dy = _inputs((1, 2, 8192), torch.float32)
    y, rstd = rms_norm_fwd(x, w)
    dx, dw = rms_norm_bwd(x, w, rstd, dy)
    ref = rms_norm_reference({"x": x, "weight": w, "dy": dy}, "fwdbwd")
    assert rel_rms(y, ref["y"]) < 1e-5
    assert rel_rms(dx, ref["dx"]) < 1e-5 and rel_rms(dw, ref["dweight"]) < 1e-5
    reason = spec.supports({"B": 1, "T": 2, "D": 16384}, "bf16", "fwdbwd")
    assert reason and "D=16384" in reason


def test_gate_check_passes_for_both_dtypes():
    from ascendopt.judge.correctness import check_kernel

    spec = get("rms_norm")
    for dtype in ("fp32", "bf16"):
        reports = check_kernel(spec, spec.shape("tiny").dims, dtype, "fwdbwd", None)
        assert [r.name for r in reports] == ["y", "dx", "dweight"]
        assert all(r.passed for r in reports), [r.line() for r in reports]


def test_weight_shape_mismatch_is_a_usage_error():
    x, w, _ = _inputs((2, 4, 32), torch.float32)
    with pytest.raises(UsageError, match="weight"):
        rms_norm(x, w[:16])


def test_backward_grid_capped_at_residency_before_its_first_launch(monkeypatch):
    """On CUDA the backward's bulk grid is cut to the resident programs (learned by compiling, not
    launching), so the dw partials have one count, and one summation order, from the first call on.
    Here a plan of one program per task (as CUDA's 16 per SM gives wide rows) meets a residency of one
    program per core: fewer programs, more rows each, the tail's partial row right after them."""
    from ascendopt.kernels import rms_norm as mod

    x, w, dy = _inputs((1, 601, 64), torch.float32, seed=5)
    _, rstd = rms_norm_fwd(x, w)
    wide = rowwise.RowPlan(2, 64, (rowwise.Launch(0, 300, 300, False, 0), rowwise.Launch(600, 1, 1, True, 300)))
    monkeypatch.setattr(mod.rowwise, "row_plan", lambda *args, **kwargs: wide)
    residency = {"per_sm": 0}
    monkeypatch.setattr(mod.resident, "residency_before_launch",
                        lambda kernel, variant, compile_variant, default_on: residency["per_sm"])
    assert mod._bwd_launches(wide, x, w, rstd, dy, x, 64) == wide.launches  # unknown residency: as planned
    planned_dx, planned_dw = rms_norm_bwd(x, w, rstd, dy)
    residency["per_sm"] = 1
    bulk, tail = mod._bwd_launches(wide, x, w, rstd, dy, x, 64)
    cores = num_cores("vector")
    assert bulk.programs == -(-300 // -(-300 // cores)) < 300 and bulk.n_tasks == 300
    assert tail.first_program == bulk.programs and tail.tail and tail.programs == 1
    capped_dx, capped_dw = rms_norm_bwd(x, w, rstd, dy)
    ref = rms_norm_reference({"x": x, "weight": w, "dy": dy}, "fwdbwd")
    assert torch.equal(capped_dx, planned_dx)  # dx does not depend on the grid
    for dw in (planned_dw, capped_dw):  # the two sum the rows in different orders: each exact to fp32 rounding
        torch.testing.assert_close(dw, ref["dweight"], rtol=1e-5, atol=1e-5)


def test_backward_residency_is_compiled_not_launched_and_asked_once(monkeypatch):
    from types import SimpleNamespace

    from ascendopt.device import backends
    from ascendopt.kernels._lib import resident

    monkeypatch.setattr(resident, "_per_sm", {})
    monkeypatch.setattr(backends, "current", lambda: SimpleNamespace(name="cuda"))
    monkeypatch.setattr(resident, "_device_limits", lambda: (65536, 2048, 233472))  # sm_90
    monkeypatch.delenv("ASCENDOPT_CUDA_RESIDENT_GRID", raising=False)
    compiled = []

    def compile_variant():
        compiled.append(1)
        return SimpleNamespace(n_regs=255, metadata=SimpleNamespace(num_warps=4, shared=0))

    kernel = object()
    assert resident.residency_before_launch(kernel, ("v",), compile_variant, default_on=True) == 2
    assert resident.residency_before_launch(kernel, ("v",), compile_variant, default_on=True) == 2
    assert compiled == [1]
    monkeypatch.setenv("ASCENDOPT_CUDA_RESIDENT_GRID", "0")
    assert resident.residency_before_launch(kernel, ("w",), compile_variant, default_on=True) == 0
    assert compiled == [1]
