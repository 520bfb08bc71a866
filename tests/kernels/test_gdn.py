"""Gated delta rule forward: every stage kernel and the whole forward against the fp32 oracles.

Runs under Triton's interpreter (tests/conftest.py), fp32 unless stated: the interpreter's bf16
``tl.dot`` is wrong and its fp32 -> bf16 cast truncates (see the bf16 test's fixture).
"""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from ascendopt.errors import UsageError
from ascendopt.judge.correctness import check_kernel
from ascendopt.kernels import get
from ascendopt.kernels._lib.common import nan_poisoning
from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.forward import chunk_gated_delta_rule_fwd
from ascendopt.kernels.gdn.workload import make_base_inputs

STAGES = ("gdn_kkt", "gdn_solve_tril", "gdn_kkt_solve", "gdn_kkt_solve_wy", "gdn_wy", "gdn_state", "gdn_output")


def _inputs(seed=0, dtype="fp32", **dims):
    if "seqlens" in dims:
        dims = {"B": 1, "T": sum(dims["seqlens"]), **dims}
    return make_base_inputs(dims, dtype, torch.device("cpu"), seed)


def _ratio(result, expected) -> float:
    """Relative RMS error, the gate's metric."""
    return float((result.double() - expected.double()).pow(2).mean().sqrt() / expected.double().pow(2).mean().sqrt())


@pytest.mark.parametrize("dims", [
    {"B": 2, "T": 100, "H": 1, "HV": 2, "K": 16, "V": 32},
    {"seqlens": (30, 0, 130), "H": 2, "HV": 4, "K": 32, "V": 16},
], ids=["fixed", "varlen"])
def test_chunked_reference_equals_the_recurrence(dims):
    x = _inputs(**dims)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    kw = {"initial_state": x["initial_state"], "cu_seqlens": x.get("cu_seqlens")}
    o, final = ref.chunk_gated_delta_rule_reference(*args, **kw)
    o_chunked, final_chunked = ref.chunked_reference(*args, **kw)
    assert _ratio(o_chunked, o) < 1e-5 and _ratio(final_chunked, final) < 1e-5
    # the state really carries across chunks: without it the second chunk's output changes
    o_cold, _ = ref.chunk_gated_delta_rule_reference(*args, cu_seqlens=x.get("cu_seqlens"))
    assert _ratio(o_cold, o) > 1e-2


@pytest.mark.parametrize("preset", ["tiny", "tiny_varlen"])
@pytest.mark.parametrize("stage", STAGES)
def test_stage_matches_its_oracle_with_poisoned_outputs(stage, preset):
    spec = get(stage)
    reports = check_kernel(spec, spec.shape(preset).dims, "fp32", "fwd", None)
    assert reports and all(r.passed for r in reports), [r.line() for r in reports]
    assert all(r.err_ratio < 1e-6 for r in reports), [r.line() for r in reports]


@pytest.mark.parametrize("form", [0, 2, 3])
def test_kkt_solve_forms_match_the_oracle(form):
    spec = get("gdn_kkt_solve")  # the default (dense, fp32 products) runs in the stage test above
    reports = check_kernel(spec, spec.shape("tiny_varlen").dims, "fp32", "fwd", {"FORM": form})
    assert reports and all(r.passed and r.err_ratio < 1e-6 for r in reports), [r.line() for r in reports]


@pytest.mark.parametrize("dims, with_state", [
    ({"B": 2, "T": 100, "H": 1, "HV": 2, "K": 32, "V": 32}, True),
    ({"seqlens": (30, 0, 70), "H": 2, "HV": 4, "K": 16, "V": 32}, True),
    ({"B": 1, "T": 64, "H": 2, "HV": 2, "K": 16, "V": 16}, False),
], ids=["fixed-grouped", "varlen-empty-seq", "one-chunk-no-state"])
def test_forward_matches_the_recurrence(dims, with_state):
    x = _inputs(**dims)
    cu = x.get("cu_seqlens")
    if cu is not None:
        cu = cu.to(torch.int32)  # kernels load cu_seqlens as int64 whatever the host dtype
    h0 = x["initial_state"] if with_state else None
    with nan_poisoning():
        o, final = chunk_gated_delta_rule_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=h0,
                                              output_final_state=with_state, cu_seqlens=cu)
    o_ref, final_ref = ref.chunk_gated_delta_rule_reference(x["q"], x["k"], x["v"], x["g"], x["beta"],
                                                            initial_state=h0, cu_seqlens=cu)
    assert o.shape == o_ref.shape and torch.isfinite(o).all()
    assert _ratio(o, o_ref) < 2e-6
    if with_state:
        assert _ratio(final, final_ref) < 2e-6
        if dims.get("seqlens"):  # the empty sequence hands its initial state straight through
            assert torch.equal(final[1], h0[1])
    else:
        assert final is None


@pytest.mark.parametrize("config", [{"G_T_CONTIG": 0}, {"fuse_state_output": 0, "fuse_kkt_solve": 0},
                                    {"fused_PIPELINE": 2},
                                    {"fuse_state_output": 0, "fuse_kkt_solve": 0, "state_PIPELINE": 2}],
                         ids=["gather-gate", "unfused", "while-chunk-loop", "unfused-while-state-loop"])
def test_gate_layout_and_fusion_do_not_change_results(config):
    x = _inputs(B=1, T=70, H=1, HV=2, K=16, V=16)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    base = {"kkt_solve_FORM": 0}  # the block form, the same arithmetic as the separate solve stage
    o_default, f_default = chunk_gated_delta_rule_fwd(*args, initial_state=x["initial_state"], output_final_state=True,
                                                      config=base)
    o_other, f_other = chunk_gated_delta_rule_fwd(*args, initial_state=x["initial_state"], output_final_state=True,
                                                  config={**base, **config})
    if "fuse_kkt_solve" in config:
        # Separate stages multiply tiles of other shapes: numpy's BLAS may block (and so round) those dots
        # differently (it does with OPENBLAS_CORETYPE=Haswell), so the same arithmetic agrees to fp32 rounding.
        assert _ratio(o_other, o_default) < 1e-6 and _ratio(f_other, f_default) < 1e-6
    else:  # the same kernels and tiles, another layout or loop form: bit for bit
        assert torch.equal(o_default, o_other) and torch.equal(f_default, f_other)


def test_fused_wy_matches_the_separate_stages():
    x = _inputs(seqlens=(40, 90), H=1, HV=2, K=16, V=32)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    kw = {"initial_state": x["initial_state"], "output_final_state": True, "cu_seqlens": x["cu_seqlens"]}
    o_fused, f_fused = chunk_gated_delta_rule_fwd(*args, **kw)  # the default: kkt + solve + wy in one kernel
    o_split, f_split = chunk_gated_delta_rule_fwd(*args, **kw, config={"fuse_wy": 0})
    assert _ratio(o_fused, o_split) < 1e-6 and _ratio(f_fused, f_split) < 1e-6
    flipped = {"hoist_scores": 1 - get("chunk_gated_delta_rule_fwd").config()["hoist_scores"]}
    o_other, f_other = chunk_gated_delta_rule_fwd(*args, **kw, config=flipped)  # scores made apart or in place
    assert _ratio(o_other, o_fused) < 1e-6 and _ratio(f_other, f_fused) < 1e-6


@pytest.fixture
def clobbering_dot(monkeypatch):
    """Make the interpreter behave like Ascend's tl.dot at its worst: the left operand is destroyed
    (filled with NaN) by every dot, so any later read of it shows up as NaN in the outputs."""
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, *args, **kwargs):
        result = original(self, a, b, d, *args, **kwargs)
        a.data[...] = np.nan
        return result

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", create_dot)


@triton.jit
def _reads_lhs_after_dot(x, y, N: tl.constexpr):
    o = tl.arange(0, N)
    b_x = tl.load(x + o[:, None] * N + o[None, :])
    b_y = tl.dot(b_x, b_x) + b_x  # the lhs read after its dot: the pattern the seed forbids
    tl.store(y + o[:, None] * N + o[None, :], b_y)


def test_clobbering_dot_catches_a_left_operand_read(clobbering_dot):
    x = torch.randn(16, 16)
    y = torch.empty(16, 16)
    _reads_lhs_after_dot[(1,)](x, y, N=16)
    assert torch.isnan(y).all()


def test_forward_never_reads_a_dot_left_operand_after_the_dot(clobbering_dot):
    x = _inputs(seqlens=(40, 90), H=1, HV=2, K=16, V=16)
    o, final = chunk_gated_delta_rule_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["initial_state"],
                                          output_final_state=True, cu_seqlens=x["cu_seqlens"])
    o_ref, final_ref = ref.chunk_gated_delta_rule_reference(x["q"], x["k"], x["v"], x["g"], x["beta"],
                                                            initial_state=x["initial_state"],
                                                            cu_seqlens=x["cu_seqlens"])
    assert _ratio(o, o_ref) < 2e-6 and _ratio(final, final_ref) < 2e-6


@pytest.mark.parametrize("name, preset", [("chunk_gated_delta_rule_fwd", "tiny_varlen"),
                                          ("gdn_state_output", "tiny"), ("gdn_state_output", "tiny_varlen")])
def test_bf16_passes_both_gate_limits(name, preset):  # conftest rounds bf16 casts like hardware
    spec = get(name)  # gdn_state_output is bf16-only: its fp32 live set overflows UB at K = 128
    reports = check_kernel(spec, spec.shape(preset).dims, "bf16", "fwd", None)
    assert all(r.passed for r in reports), [r.line() for r in reports]
    o = next(r for r in reports if r.name == "o")
    assert o.dtype == "bfloat16" and o.torch_ratio is not None and o.err_ratio <= o.limit


@pytest.mark.parametrize("config", [{"SCORES": 0, "G_T_CONTIG": 1, "PIPELINE": 2, "BV": 32},
                                    {"SCORES": 0, "G_T_CONTIG": 0, "PIPELINE": 1, "BV": 16}])
def test_state_output_computing_its_own_scores(config):
    """SCORES=0: the scores made inside the kernel. BV=32 with the while loop is the configuration that
    hit an illegal memory access on the H200 (benchmarks/RESULTS.md, gated delta rule); here it passes the gate."""
    spec = get("gdn_state_output")
    reports = check_kernel(spec, spec.shape("tiny_varlen").dims, "bf16", "fwd", config)
    assert all(r.passed for r in reports), [r.line() for r in reports]


@pytest.fixture
def bf16_dot_operands(monkeypatch):
    """Feed tl.dot bf16 operands as on hardware (the interpreter's bf16 dot is made exact by
    tests/conftest.py), so the roundings the kernels take before each dot are exercised too."""
    from ascendopt.kernels import gdn

    def hardware_dot_dtype(dtype):
        return tl.bfloat16 if dtype == torch.bfloat16 else tl.float32

    for module in (gdn.kkt, gdn.kkt_solve, gdn.kkt_solve_wy, gdn.wy, gdn.state, gdn.output, gdn.state_output):
        monkeypatch.setattr(module, "dot_dtype", hardware_dot_dtype)


@pytest.mark.parametrize("config", [{}, {"fuse_state_output": 0, "fuse_kkt_solve": 0}, {"fuse_wy": 0},
                                    {"kkt_solve_FORM": 2}, {"kkt_solve_FORM": 3},
                                    {"hoist_scores": 0}],
                         ids=["fused", "separate", "wy-apart", "dense-bf16", "dense-8-row-blocks", "scores-in-place"])
def test_bf16_dot_operands_pass_both_gate_limits(bf16_dot_operands, config):
    spec = get("chunk_gated_delta_rule_fwd")
    reports = check_kernel(spec, spec.shape("tiny").dims, "bf16", "fwd", config)
    assert all(r.passed for r in reports), [r.line() for r in reports]


@pytest.mark.parametrize("dims, h0_shape, message", [
    ({"H": 2, "HV": 3, "K": 16}, None, "multiple of"),
    ({"H": 1, "HV": 1, "K": 48}, None, "head dim K=48"),
    ({"H": 1, "HV": 2, "K": 16}, (1, 2, 16, 16), r"initial_state \(1, 2, 16, 16\)"),
], ids=["heads", "head-dim", "state-shape"])
def test_bad_inputs_are_usage_errors(dims, h0_shape, message):
    x = _inputs(B=2, T=64, V=16, **dims)
    h0 = None if h0_shape is None else torch.zeros(h0_shape)
    with pytest.raises(UsageError, match=message):
        chunk_gated_delta_rule_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=h0)


def test_varlen_needs_a_packed_batch():
    x = _inputs(B=2, T=64, H=1, HV=1, K=16, V=16)
    with pytest.raises(UsageError, match="B=1"):
        chunk_gated_delta_rule_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=torch.tensor([0, 64, 128]))


def test_ub_model_picks_tiles_and_follows_the_capacity(monkeypatch):
    from ascendopt.device import backends, ub

    monkeypatch.setenv("ASCENDOPT_CHIP", "Ascend910B2")
    spec = get("chunk_gated_delta_rule_fwd")

    def tiles(dims, dtype="bf16"):
        backends.reset()
        return {s.stage: s for s in spec.ub_model(dims, spec.config(), dtype)}

    realistic = dict(spec.shape("realistic").dims)
    fused, separate = tiles(realistic), tiles(realistic, "fp32")  # fp32 operand tiles do not fit fused
    assert fused["state_output"].tile["BV"] == 16 and "state" not in fused
    assert separate["state"].tile["BV"] == 32 and separate["output.o"].tile["BV"] == 64
    assert "state_output" not in separate
    assert fused["kkt_solve.kkt"].tile["BK"] == 128 and "kkt" not in fused
    for stage in [*fused.values(), *separate.values()]:
        assert ub.check(stage.tile, stage.dtype, stage.multiplier, 196608, stage.margin).safe, stage
    wide = {**realistic, "K": 256, "V": 256}
    assert tiles(wide)["state"].tile["BV"] == 16 and spec.supports(wide, "bf16", "fwd") is None
    monkeypatch.setenv("ASCENDOPT_UB_BYTES", str(196608 // 2))
    assert tiles(realistic, "fp32")["state"].tile["BV"] == 16
    backends.reset()


def test_varlen_packing_is_reused_until_cu_seqlens_changes():
    from ascendopt.kernels.gdn.layout import pack

    cu = torch.tensor([0, 30, 30, 130])
    first = pack(1, 130, cu)
    assert pack(1, 130, cu) is first  # no second device sync for the same tensor
    assert first.chunk_indices.tolist() == [[0, 0], [2, 0], [2, 1]] and first.chunk_offsets.tolist() == [0, 1, 1, 3]
    cu[1:3] = 100  # in place: the version counter moves, the maps are rebuilt
    again = pack(1, 130, cu)
    assert again is not first and again.chunk_indices.tolist() == [[0, 0], [0, 1], [2, 0]]


def test_strided_inputs_are_accepted():
    x = _inputs(B=1, T=64, H=1, HV=1, K=16, V=16)
    qk = torch.cat([x["q"], x["k"]], dim=-1)  # a fused projection: q and k are strided views
    o, _ = chunk_gated_delta_rule_fwd(qk[..., :16], qk[..., 16:], x["v"], x["g"], x["beta"])
    o_ref, _ = ref.chunk_gated_delta_rule_reference(x["q"], x["k"], x["v"], x["g"], x["beta"])
    assert _ratio(o, o_ref) < 2e-6


def test_cuda_serial_kernels_take_wide_pipelined_slabs_that_still_fill_the_device(monkeypatch):
    """On CUDA the chunk-recurrent kernels take BV = 64 with the counted (software-pipelined) chunk loop
    at K <= 128 (H200: 143 us against 277 us for the fused kernel), narrower slabs only when a small
    batch would leave more than half the SMs idle, and K = 256 keeps the while loop; npu/cpu never see
    any of it."""
    from types import SimpleNamespace

    from ascendopt.device import backends
    from ascendopt.kernels.gdn import state, state_output
    from ascendopt.kernels.gdn.workload import cuda_serial_tile

    assert cuda_serial_tile(128, 128, 64) is None  # the cpu backend of the tests
    assert state_output.counted_chunk_loop(0, 256) is True
    h200 = SimpleNamespace(name="cuda", info=lambda: SimpleNamespace(cores_for=lambda bound: 132))
    monkeypatch.setattr(backends, "current", lambda: h200)
    assert cuda_serial_tile(128, 128, None) == 64
    assert cuda_serial_tile(128, 128, 64) == 64  # B4 x H16: 128 tasks on 132 SMs, one round
    assert cuda_serial_tile(128, 128, 16) == 16  # 16 rows: 128 tasks at BV = 16, not 32 at BV = 64
    assert cuda_serial_tile(64, 32, 4) == 16 and cuda_serial_tile(256, 256, 64) is None
    assert state._tiles(128, 128, {"BV": 0}, 64) == 64 and state._tiles(128, 128, {"BV": 32}, 64) == 32
    assert state_output.fused_tile(128, 128, "bf16", 0, 64) == 64
    assert state_output.fused_tile(256, 256, "bf16", 0, 64) == 16  # registers: CUDA_TILE_ELEMENTS // K
    assert [state_output.counted_chunk_loop(choice, 128) for choice in (0, 1, 2)] == [True, True, False]
    assert [state_output.counted_chunk_loop(choice, 256) for choice in (0, 1, 2)] == [False, True, False]
