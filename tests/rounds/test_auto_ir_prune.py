"""``--auto``'s UB pruning falls back on precheck's IR estimate where a spec has no UB model of its own."""

from dataclasses import replace
from types import SimpleNamespace

from ascendopt import kernels
from ascendopt.rounds import auto
from ascendopt.tune import space

WIDE = {"B": 1, "T": 256, "D": 8192}  # one 8192-wide bf16 row per token


def _setup(model: bool):
    spec = kernels.get("l2norm")
    if not model:
        spec = replace(spec, ub_model=lambda dims, config, dtype: [])  # a spec without a hand UB model
    workload = SimpleNamespace(kernel="l2norm", shapes=[SimpleNamespace(dims=WIDE)], dtype="bf16", mode="fwd",
                               config={})
    ctx = SimpleNamespace(contract=SimpleNamespace(is_kernel=True, workload=workload))
    candidates = [space.ub_prediction(spec, WIDE, spec.config({"block_rows": rows}), "bf16", 196608, "fwd")
                  for rows in (1, 4, 128)]
    return ctx, candidates


def test_ir_estimate_prunes_the_overflowing_tile_where_there_is_no_model(ascend_python):
    ctx, candidates = _setup(model=False)
    assert {c.ub_detail for c in candidates} == {"no UB stages modelled"}
    start = candidates[0].config
    kept, pruned = auto.ir_ub_prune(ctx, candidates, "cpu", start, precheck=True, ascend_python=ascend_python,
                                    step=lambda text: None)
    # IR: one [rows, 8192] bf16 tile, double-buffered: 4 rows = 67 % of the UB (kept), 128 rows = 2133 % (pruned)
    assert [c.config["block_rows"] for c in kept] == [1, 4]
    (over,) = pruned
    assert over.config["block_rows"] == 128 and not over.ub_safe
    assert over.ub_detail.startswith("IR UB estimate 2133% of UB")


def test_a_spec_with_a_model_or_no_precheck_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CACHE", str(tmp_path))
    ctx, modelled = _setup(model=True)
    assert auto.ir_ub_prune(ctx, modelled, "cpu", modelled[0].config, precheck=True, ascend_python=None,
                            step=lambda text: None) == (modelled, [])
    ctx, unmodelled = _setup(model=False)
    assert auto.ir_ub_prune(ctx, unmodelled, "cpu", unmodelled[0].config, precheck=False, ascend_python=None,
                            step=lambda text: None) == (unmodelled, [])
