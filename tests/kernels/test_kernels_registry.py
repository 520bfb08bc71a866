"""Every registered KernelSpec is complete, and `ascendopt kernels` shows them."""

import math

import pytest
import torch

from _cli_json import json_payload
from ascendopt.device import ub
from ascendopt.kernels import all_specs, get
from ascendopt.kernels.spec import REQUIRED_PRESETS, Cost, KernelSpec, UBStage

MODEL_CHIP = "Ascend910B2"
MODEL_UB_BYTES = 196608  # configs/chips.yaml: Ascend910B2 ub_bytes


@pytest.fixture
def on_910b2(monkeypatch):
    """Resolve 'auto' tiles against Ascend910B2's UB (the cpu backend models that chip's UB)."""
    from ascendopt.device import backends

    monkeypatch.setenv("ASCENDOPT_CHIP", MODEL_CHIP)
    monkeypatch.delenv("ASCENDOPT_UB_BYTES", raising=False)
    backends.reset()
    assert backends.current().info().ub_bytes == MODEL_UB_BYTES
    yield


def _specs() -> list[KernelSpec]:
    return all_specs()


def test_registry_has_the_vector_kernels():
    names = {spec.name for spec in _specs()}
    assert {"chunk_local_cumsum", "l2norm", "rms_norm"} <= names


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_spec_fields_are_complete(spec):
    assert spec.name and spec.description and spec.bound in ("vector", "cube")
    assert spec.modes and set(spec.modes) <= {"fwd", "fwdbwd"}
    assert spec.dtypes and set(spec.dtypes) <= {"fp32", "bf16", "fp16"}
    for preset in REQUIRED_PRESETS:
        assert preset in spec.shapes, f"{spec.name} lacks the {preset} preset"
    for name, preset in spec.shapes.items():
        assert preset.name == name and preset.dims
    for name, tunable in spec.tunables.items():
        assert tunable.name == name and tunable.doc
        assert tunable.default in tunable.choices, f"{spec.name}.{name} default {tunable.default} not in choices"
    assert spec.kernel_names and all(k.isidentifier() for k in spec.kernel_names)
    for dtype in spec.dtypes:
        assert 0 < spec.tolerances[dtype] < 0.1, f"{spec.name}: tolerance for {dtype}"
    for fn in (spec.make_inputs, spec.run, spec.reference, spec.ub_model, spec.cost, spec.supports):
        assert callable(fn)
    if "peer" in spec.extras:
        assert callable(spec.extras["peer"])


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_oracle_is_named_after_the_spec(spec):
    """One naming rule for every op and stage: the fp32 oracle the gate compares with is ``<name>_reference``
    (what freeze pins as ``module:qualname``)."""
    assert spec.reference.__name__ == f"{spec.name}_reference", spec.reference.__qualname__
    assert spec.reference.__module__.startswith("ascendopt.kernels.")


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_ub_margins_are_the_default_or_the_named_gdn_ones(spec):
    from ascendopt.kernels.gdn import workload

    named = {ub.DEFAULT_MARGIN, workload.STATE_OUTPUT_MARGIN, workload.WY_MARGIN}
    for stage in spec.ub_model(spec.shape("tiny").dims, spec.config(), spec.dtypes[0]):
        assert stage.margin in named, f"{spec.name} stage {stage.stage}: margin {stage.margin}"
        if spec.bound == "vector":  # the vector kernels all budget fla's vector-kernel margin
            assert stage.margin == ub.DEFAULT_MARGIN, f"{spec.name} stage {stage.stage}: margin {stage.margin}"


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_realistic_preset_is_supported_costed_and_fits_ub_at_defaults(spec, on_910b2):
    dims = spec.shape("realistic").dims
    config = spec.config()
    for mode in spec.modes:
        for dtype in spec.dtypes:
            assert spec.supports(dims, dtype, mode) is None, f"{spec.name} {mode} {dtype}"
            cost = spec.cost(dims, dtype, mode)
            assert isinstance(cost, Cost) and cost.bytes > 0 and cost.flops > 0
        stages = spec.ub_model(dims, config, spec.dtypes[0])
        assert stages and all(isinstance(s, UBStage) for s in stages)
        for stage in stages:
            check = ub.check(stage.tile, stage.dtype, stage.multiplier, MODEL_UB_BYTES, stage.margin)
            assert check.safe, f"{spec.name} stage {stage.stage}: {check.describe()}"


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_tiny_inputs_are_seeded_random_and_never_zero(spec):
    dims = spec.shape("tiny").dims
    mode = spec.modes[-1]
    first = spec.make_inputs(dict(dims), spec.dtypes[0], torch.device("cpu"), 0)
    again = spec.make_inputs(dict(dims), spec.dtypes[0], torch.device("cpu"), 0)
    other = spec.make_inputs(dict(dims), spec.dtypes[0], torch.device("cpu"), 1)
    floats = [k for k, v in first.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    assert floats
    for key in floats:
        assert torch.equal(first[key], again[key]), f"{spec.name}.{key} not seeded"
        assert bool((first[key] != 0).any()), f"{spec.name}.{key} is all zeros"
        assert torch.isfinite(first[key]).all()
    assert any(not torch.equal(first[k], other[k]) for k in floats)
    assert spec.supports(dims, spec.dtypes[0], mode) is None


def test_cli_lists_every_kernel(cli):
    code, out, err = cli("kernels", "--json")
    assert code == 0, err
    data = json_payload(out)
    listed = {k["name"]: k for k in data["kernels"]}
    assert set(listed) == {s.name for s in _specs()}
    l2 = listed["l2norm"]
    assert l2["modes"] == ["fwd", "fwdbwd"] and "realistic" in l2["presets"]
    assert l2["tunables"]["block_rows"]["default"] == 0 and 8 in l2["tunables"]["block_rows"]["choices"]
    code, out, _ = cli("kernels")
    assert code == 0 and "chunk_local_cumsum" in out and "rms_norm" in out


def test_cli_detail_shows_support_ub_and_cost(cli, on_910b2):
    code, out, err = cli("kernels", "rms_norm", "--json")
    assert code == 0, err
    detail = json_payload(out)["kernels"][0]
    realistic = detail["presets"]["realistic"]
    assert realistic["modes"]["fwdbwd"]["bf16"] == "supported"
    assert all(stage["safe"] for stage in realistic["ub_model"]["stages"])
    n, d = 4 * 4096, 4096
    assert realistic["cost"]["fwd"]["bytes"] == 2 * n * d * 2 + d * 2 + 4 * n
    assert "D 1..8192" in detail["support"]
    code, out, _ = cli("kernels", "rms_norm")
    assert code == 0 and "block_rows_bwd" in out and "widest" in out


def test_cli_unknown_kernel_is_a_usage_error(cli):
    code, out, err = cli("kernels", "no_such_kernel")
    assert code == 2 and out == ""
    assert "unknown kernel" in err and "l2norm" in err


def test_auto_tiles_follow_the_ub_capacity(on_910b2, monkeypatch):
    from ascendopt.device import backends

    spec = get("rms_norm")
    dims = {"B": 1, "T": 64, "D": 1024}
    wide = spec.ub_model(dims, spec.config(), "bf16")[0].tile["BR"]
    monkeypatch.setenv("ASCENDOPT_UB_BYTES", str(MODEL_UB_BYTES // 4))
    backends.reset()
    narrow = spec.ub_model(dims, spec.config(), "bf16")[0].tile["BR"]
    assert narrow == wide // 4
    assert math.log2(narrow).is_integer()


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_every_configuration_the_tuner_may_try_has_a_ub_model(spec):
    # optimize-round --auto enumerates the space around the defaults and asks each configuration's UB model:
    # no combination of tunable choices may make that raise (e.g. one tile that must divide another)
    from ascendopt.tune import space as tune_space

    preset = next(name for name in spec.shapes if name.startswith("tiny"))
    feasible, pruned = tune_space.enumerate_space(spec, spec.shape(preset).dims, spec.dtypes[0], MODEL_UB_BYTES,
                                                  enforce_ub=True, around=spec.config())
    assert feasible and all(c.config.keys() == spec.tunables.keys() for c in feasible + pruned)
