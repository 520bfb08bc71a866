"""The tunable search: UB pruning, class-guided order, budget, cache, and quality vs exhaustive search."""

import itertools
import math

import pytest

from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage
from ascendopt.tune import search as tune
from ascendopt.tune import space as tune_space

UB = 196608  # Ascend 910B UB bytes


def _spec(multiplier=3.0):
    def ub_model(dims, cfg, dtype):
        # two fp32 [BT, BD] tiles and one output tile live at once
        return [UBStage("fwd", {"BT": cfg["BT"], "BD": cfg["BD"]}, "fp32", multiplier)]

    return KernelSpec(
        name="synthetic", description="", bound="vector", modes=("fwd",), dtypes=("fp32",),
        shapes={"tiny": ShapePreset("tiny", {"T": 64, "D": 64}),
                "realistic": ShapePreset("realistic", {"T": 8192, "D": 4096})},
        tunables={"BT": Tunable("BT", 16, (1, 2, 4, 8, 16, 32, 64, 128, 256), "rows per tile"),
                  "BD": Tunable("BD", 128, (32, 64, 128, 256, 512, 1024, 2048), "columns per tile"),
                  "SPLIT": Tunable("SPLIT", 1, (1, 2), "not a tile")},
        make_inputs=lambda *a, **k: {}, run=lambda i, c, m: {}, reference=lambda i, m: {},
        ub_model=ub_model, cost=lambda d, t, m: Cost(1, 1), supports=lambda d, t, m: None,
        kernel_names=("k",), tolerances={"fp32": 1e-5})


def test_ub_pruning_on_npu_and_prediction_elsewhere():
    spec = _spec()
    feas, pruned = tune_space.enumerate_space(spec, {"T": 8192, "D": 4096}, "fp32", UB, enforce_ub=True)
    assert len(feas) + len(pruned) == 9 * 7 * 2
    # budget floor(0.85 * 196608) = 167116 B; 3 x BT x BD x 4 B must fit: BT x BD <= 13926
    assert all(c.config["BT"] * c.config["BD"] <= 13926 for c in feas)
    assert all(c.config["BT"] * c.config["BD"] > 13926 for c in pruned)
    big = next(c for c in pruned if c.config == {"BT": 256, "BD": 2048, "SPLIT": 1})
    assert not big.ub_safe and big.ub_share == pytest.approx(3 * 256 * 2048 * 4 / UB, rel=1e-3)
    assert "OVERFLOWS" in big.ub_detail
    feas2, pruned2 = tune_space.enumerate_space(spec, {"T": 8192, "D": 4096}, "fp32", UB, enforce_ub=False)
    assert not pruned2 and len(feas2) == 126 and sum(not c.ub_safe for c in feas2) == len(pruned)


def test_a_space_over_the_limit_is_cut_to_the_start_neighbourhood():
    """126 raw configurations over a limit of 70: only those within two changed tunables of the start
    (all but the 8 x 6 x 1 changing all three; the 62 pairs fit the limit); without a start, a usage
    error."""
    from ascendopt.errors import UsageError

    spec = _spec()
    start = {"BT": 16, "BD": 128, "SPLIT": 1}
    feas, pruned = tune_space.enumerate_space(spec, {"T": 8192, "D": 4096}, "fp32", UB, enforce_ub=False,
                                              around=start, limit=70)
    configs = [c.config for c in feas + pruned]
    changed = [sum(c[n] != start[n] for n in start) for c in configs]
    assert start in configs and max(changed) == 2
    assert len(configs) == len({tuple(sorted(c.items())) for c in configs}) == 126 - 8 * 6 * 1
    assert tune_space.raw_size(spec) == 126 and tune_space.raw_size(spec, {"SPLIT": 1}) == 63
    # when even the 62 pairs exceed the limit, one changed tunable: 1 + 8 + 6 + 1
    feas1, _ = tune_space.enumerate_space(spec, {"T": 8192, "D": 4096}, "fp32", UB, enforce_ub=False,
                                          around=start, limit=20)
    assert len(feas1) == 16
    with pytest.raises(UsageError, match="126 raw configurations"):
        tune_space.enumerate_space(spec, {"T": 8192, "D": 4096}, "fp32", UB, enforce_ub=False, limit=50)


def test_the_end_to_end_gated_delta_rule_space_enumerates_in_seconds():
    import time

    from ascendopt import kernels

    spec = kernels.get("chunk_gated_delta_rule_fwd")
    assert tune_space.raw_size(spec) > 1e9
    start = spec.config({})
    t0 = time.perf_counter()
    feas, pruned = tune_space.enumerate_space(spec, spec.shape("tiny").dims, "fp32", UB, enforce_ub=True,
                                              around=start)
    assert time.perf_counter() - t0 < 30 and start in [c.config for c in feas]


def test_order_and_direction_follow_the_bottleneck_class():
    spec = _spec()
    assert tune_space.order_tunables(spec, {}, "fp32", "vector-bound") == ["BT", "BD", "SPLIT"]
    assert tune_space.preferred_direction("vector-bound") == 1
    assert tune_space.preferred_direction("core under-use") == -1
    feas, _ = tune_space.enumerate_space(spec, {}, "fp32", UB, enforce_ub=True)
    space = [c.config for c in feas]
    start = {"BT": 16, "BD": 128, "SPLIT": 1}
    for bound, want in (("vector-bound", 32), ("core under-use", 8)):
        seen = []

        def record(c, inc, seen=seen):
            seen.append(c)
            return tune.Trial(c, 1.0)

        tune.search(space, start, record, order=["BT", "BD", "SPLIT"], direction=tune_space.preferred_direction(bound),
                    budget=3)
        assert seen[1]["BT"] == want  # the first move: larger rows for vector-bound, smaller for under-use


def _landscapes():
    """Latency models in ms over (BT, BD, SPLIT) with different optima and interactions."""
    def streaming(c):  # per-tile overhead amortized by bigger tiles, waves quantized over 48 cores
        tiles = math.ceil(8192 / c["BT"]) * math.ceil(4096 / c["BD"])
        return 0.02 * math.ceil(tiles / 48) + 1e-6 * c["BT"] * c["BD"] + 0.05 * (c["SPLIT"] - 1) + 0.3

    def bowl(c):  # an interior optimum at BT=32, BD=256
        return 1 + (math.log2(c["BT"]) - 5) ** 2 * 0.07 + (math.log2(c["BD"]) - 8) ** 2 * 0.05 + 0.02 * c["SPLIT"]

    def ridge(c):  # BT and BD interact: the product matters most, then the aspect
        p = math.log2(c["BT"] * c["BD"])
        return 1 + 0.2 * abs(p - 12) + 0.03 * abs(math.log2(c["BT"]) - 4) + 0.01 * c["SPLIT"]

    return {"streaming": streaming, "bowl": bowl, "ridge": ridge}


@pytest.mark.parametrize("name", ["streaming", "bowl", "ridge"])
def test_search_reaches_exhaustive_best_within_3pct_in_a_quarter(name):
    f = _landscapes()[name]
    feas, _ = tune_space.enumerate_space(_spec(), {}, "fp32", UB, enforce_ub=True)
    space = [c.config for c in feas]
    exhaustive = min(t for _, t in tune.exhaustive(space, f))
    res = tune.search(space, {"BT": 16, "BD": 128, "SPLIT": 1}, lambda c, inc: tune.Trial(c, f(c)),
                      order=["BT", "BD", "SPLIT"], direction=1)
    assert res.evaluations <= math.ceil(0.25 * len(space))
    assert res.best.ms <= exhaustive * 1.03, (res.best.config, res.best.ms, exhaustive)
    assert res.best.ms <= res.start.ms


def test_budget_failures_and_evaluator_verdict():
    feas, _ = tune_space.enumerate_space(_spec(), {}, "fp32", UB, enforce_ub=True)
    space = [c.config for c in feas]
    calls = []

    def ev(c, inc):
        calls.append(c)
        if c["BT"] == 32:
            return tune.Trial(c, None, note="gate red")  # failed candidates never win
        # the evaluator's interleaved verdict wins over raw medians from separate samples
        return tune.Trial(c, 1.0 / c["BD"], better=c["BD"] > inc["BD"])

    res = tune.search(space, {"BT": 16, "BD": 128, "SPLIT": 1}, ev, order=["BT", "BD", "SPLIT"], budget=5)
    assert len(calls) == 5 and res.evaluations == 5 and res.stopped == "budget"
    assert res.best.config["BT"] == 16 and res.best.config["BD"] > 128


def test_cache_is_keyed_and_saves_evaluations(tmp_path):
    spec = _spec()
    key = tune.cache_key("synthetic", {"T": 64, "seqlens": (3, 5)}, "fp32", "fwd", "NVIDIA H200",
                         tune.source_hash(spec))
    assert "T=64,seqlens=3:5" in key and key.startswith("synthetic|") and "NVIDIA H200" in key
    feas, _ = tune_space.enumerate_space(spec, {}, "fp32", UB, enforce_ub=True)
    space = [c.config for c in feas]
    f = _landscapes()["bowl"]
    first = tune.search(space, {"BT": 16, "BD": 128, "SPLIT": 1}, lambda c, inc: tune.Trial(c, f(c)),
                        order=["BT", "BD", "SPLIT"], cache=tune.TuneCache(tmp_path / "c.json", key))
    assert first.evaluations > 3
    again = tune.search(space, {"BT": 16, "BD": 128, "SPLIT": 1},
                        lambda c, inc: pytest.fail("a cached configuration was measured again"),
                        order=["BT", "BD", "SPLIT"], cache=tune.TuneCache(tmp_path / "c.json", key))
    assert again.evaluations == 0 and again.best.config == first.best.config and again.best.cached
    other = tune.TuneCache(tmp_path / "c.json", key.replace("fp32", "bf16"))
    assert other.get({"BT": 16, "BD": 128, "SPLIT": 1}) is None  # another dtype is another key
    (tmp_path / "bad.json").write_text("{not json")
    assert tune.TuneCache(tmp_path / "bad.json", key).get({"BT": 1}) is None


def test_auto_zero_sits_above_explicit_tiles():
    spec = _spec()
    auto = Tunable("block_rows", 0, (0, 1, 2, 4, 8), "rows; 0 = the largest power of two the UB model allows")
    flag = Tunable("G_T_CONTIG", 1, (0, 1), "1: transposed; 0: gather")
    spec = KernelSpec(**{**spec.__dict__, "tunables": {"block_rows": auto, "G_T_CONTIG": flag}})
    assert tune_space.axes(spec) == {"block_rows": [1, 2, 4, 8, 0], "G_T_CONTIG": [0, 1]}
    space = [{"block_rows": r, "G_T_CONTIG": g} for r in (0, 1, 2, 4, 8) for g in (0, 1)]
    seen = []
    tune.search(space, {"block_rows": 0, "G_T_CONTIG": 1}, lambda c, inc: seen.append(c) or tune.Trial(c, 1.0),
                order=["block_rows", "G_T_CONTIG"], direction=1, budget=2, choices=tune_space.axes(spec))
    assert seen[1] == {"block_rows": 8, "G_T_CONTIG": 1}  # from auto, the first explicit try is the largest


def test_forward_workloads_ignore_backward_stages():
    spec = _spec()

    def ub_model(dims, cfg, dtype):
        return [UBStage("fwd", {"BT": cfg["BT"]}, "fp32", 1.0),
                UBStage("bwd", {"BT": cfg["BT"], "BD": 4096}, "fp32", 8)]

    spec = KernelSpec(**{**spec.__dict__, "ub_model": ub_model})
    cfg = {"BT": 64, "BD": 128, "SPLIT": 1}
    assert not tune_space.ub_prediction(spec, {}, cfg, "fp32", UB).ub_safe  # 8 x 64 x 4096 x 4 B overflows in bwd
    fwd = tune_space.ub_prediction(spec, {}, cfg, "fp32", UB, mode="fwd")
    assert fwd.ub_safe and fwd.ub_detail.startswith("fwd: peak 256 B")


def test_equivalent_configurations_are_measured_once():
    spec = _spec()

    def ub_model(dims, cfg, dtype):  # like the bundled kernels: auto 0 -> 64, tiles clamped to T=32
        bt = min(cfg["BT"] or 64, 32)
        return [UBStage("fwd", {"BT": bt, "BD": cfg["BD"]}, "fp32", 1.0),
                UBStage("bwd", {"BT": 8, "BD": cfg["BD"] // 2}, "fp32", 1.0)]

    tunables = {"BT": Tunable("BT", 0, (0, 8, 16, 32, 64), "rows; 0 = largest"),
                "BD": Tunable("BD", 64, (64, 128), "cols"), "FLAG": Tunable("FLAG", 1, (0, 1), "1: transposed")}
    spec = KernelSpec(**{**spec.__dict__, "ub_model": ub_model, "tunables": tunables})
    assert tune_space.untiled_tunables(spec, {}, "fp32") == ["FLAG"]
    feas, _ = tune_space.enumerate_space(spec, {}, "fp32", UB, enforce_ub=True)
    start = {"BT": 0, "BD": 64, "FLAG": 1}
    unique, alias = tune_space.dedupe(feas, spec, {}, "fp32", keep=start)
    # BT in {0, 32, 64} all run BT=32: 5 row values collapse to 3 (8, 16, 32), times BD x FLAG
    assert len(feas) == 20 and len(unique) == 12
    assert alias["BD=64,BT=64,FLAG=1"] == "BD=64,BT=0,FLAG=1"  # the start represents its group
    assert alias["BD=64,BT=32,FLAG=0"] == "BD=64,BT=0,FLAG=0"
    assert len({alias[k] for k in alias}) == 12


def test_backward_tiles_collapse_in_a_forward_workload():
    spec = _spec()

    def ub_model(dims, cfg, dtype):
        return [UBStage("fwd", {"BT": cfg["BT"]}, "fp32", 1.0), UBStage("bwd", {"BD": cfg["BD"]}, "fp32", 1.0)]

    tunables = {"BT": Tunable("BT", 8, (8, 16), "rows"), "BD": Tunable("BD", 64, (64, 128, 256), "bwd cols"),
                "FLAG": Tunable("FLAG", 1, (0, 1), "1: transposed")}
    spec = KernelSpec(**{**spec.__dict__, "ub_model": ub_model, "tunables": tunables})
    feas, _ = tune_space.enumerate_space(spec, {}, "fp32", UB, enforce_ub=True)
    assert len(tune_space.dedupe(feas, spec, {}, "fp32", "fwdbwd")[0]) == 12
    fwd, _ = tune_space.dedupe(feas, spec, {}, "fp32", "fwd", keep={"BT": 8, "BD": 64, "FLAG": 1})
    assert len(fwd) == 4 and {c.config["BD"] for c in fwd} == {64}  # BD only shapes the backward stage


def _layout_space():
    """gdn_kkt_solve-like: an auto tile, a 3-way FORM and a layout flag; the H200 optimum flipped both."""
    return [{"BK": bk, "FORM": f, "G_T_CONTIG": g} for bk in (16, 32, 64, 0) for f in (1, 2, 3) for g in (0, 1)]


def _layout_ms(c):  # FORM=2 and the gathered layout each save ~20 %; tile sizes matter a few %
    return 1.0 + 0.03 * (c["BK"] in (16, 32)) + 0.25 * (c["FORM"] != 2) + 0.2 * c["G_T_CONTIG"]


@pytest.mark.parametrize("probe", [(), ("FORM", "G_T_CONTIG")])
def test_layout_probe_reaches_the_flipped_flags_in_a_small_budget(probe):
    space = _layout_space()
    choices = {"BK": [16, 32, 64, 0], "FORM": [1, 2, 3], "G_T_CONTIG": [0, 1]}
    res = tune.search(space, {"BK": 0, "FORM": 1, "G_T_CONTIG": 1}, lambda c, inc: tune.Trial(c, _layout_ms(c)),
                      order=["BK", "FORM", "G_T_CONTIG"], direction=1, budget=len(space) // 8, choices=choices,
                      probe=probe)
    best = min(_layout_ms(c) for c in space)
    assert res.evaluations == 3
    if probe:  # start, FORM 1 -> 2 (wins), then G_T_CONTIG 1 -> 0 from there
        assert res.best.config == {"BK": 0, "FORM": 2, "G_T_CONTIG": 0} and res.best.ms == best
    else:  # the tile walk spends a move on BK first and the budget ends before the layout flag
        assert res.best.ms > best * 1.03 and [t.config["G_T_CONTIG"] for t in res.trials] == [1, 1, 1]


def test_probe_goes_first_and_stops_at_the_budget():
    flags = {f"F{i}": [0, 1, 2] for i in range(4)}  # from the middle value: 8 probe moves
    space = [{"BT": bt, **dict(zip(flags, vals, strict=True))} for bt in (8, 16, 32)
             for vals in itertools.product(*flags.values())]
    start = {"BT": 16, "F0": 1, "F1": 1, "F2": 1, "F3": 1}
    seen = []
    res = tune.search(space, start, lambda c, inc: seen.append(c) or tune.Trial(c, 1.0), order=["BT", *flags],
                      direction=1, budget=4, choices={"BT": [8, 16, 32], **flags}, probe=list(flags))
    # start, then the first flag both ways, then the second flag up: the budget ends inside the probe
    assert seen == [start, {**start, "F0": 2}, {**start, "F0": 0}, {**start, "F1": 2}]
    assert res.evaluations == 4 and res.stopped == "budget"


def test_probe_tunables_are_flags_layouts_and_algorithm_choices():
    spec = _spec()

    def ub_model(dims, cfg, dtype):  # FORM changes the tile (like gdn_kkt_solve), G_T_CONTIG does not
        return [UBStage("fwd", {"BT": cfg["BT"], "BD": cfg["BD"] * (2 if cfg["FORM"] == 3 else 1)}, "fp32", 1.0)]

    tunables = {"BT": Tunable("BT", 0, (0, 8, 16, 32), "rows; 0 = largest"),
                "BD": Tunable("BD", 64, (64, 128, 256), "cols"),
                "FORM": Tunable("FORM", 1, (1, 2, 3), "solve form"),
                "G_T_CONTIG": Tunable("G_T_CONTIG", 1, (0, 1), "1: transposed")}
    spec = KernelSpec(**{**spec.__dict__, "ub_model": ub_model, "tunables": tunables})
    assert tune_space.untiled_tunables(spec, {}, "fp32") == ["G_T_CONTIG"]
    assert tune_space.probe_tunables(spec, {}, "fp32") == ["FORM", "G_T_CONTIG"]


# -- tune.choose: the demo's one tunable change ------------------------------------------------------

def test_choose_change_takes_the_next_larger_tile_of_a_vector_bound_kernel():
    from ascendopt.tune.choose import choose_change

    spec = _spec()
    change, why = choose_change(spec, {"T": 8192, "D": 4096}, "fp32", "fwd", UB, "vector_bound", spec.config())
    assert change == {"BT": 32}  # BT is first in the class's order; vector-bound walks to larger tiles
    assert why == "vector_bound: try BT=32, the next UB-safe larger tile"


def test_choose_change_walks_from_an_infeasible_start_to_the_first_ub_safe_tile():
    from ascendopt.tune.choose import choose_change

    spec = _spec()
    dims = {"T": 8192, "D": 4096}
    start = {**spec.config(), "BT": 256, "BD": 2048}  # 3 x 256 x 2048 x 4 B: far over the UB budget
    change, _ = choose_change(spec, dims, "fp32", "fwd", UB, "vector_bound", start)
    assert list(change) == ["BT"] and change["BT"] < 256
    feasible, _ = tune_space.enumerate_space(spec, dims, "fp32", UB, enforce_ub=True, mode="fwd")
    assert {**start, **change} in [c.config for c in feasible]


def test_choose_change_without_a_feasible_neighbour_is_an_error():
    from ascendopt.tune.choose import choose_change

    spec = _spec(multiplier=1e6)  # not even the smallest tiles fit
    with pytest.raises(RuntimeError, match="no UB-safe tunable change"):
        choose_change(spec, {"T": 8192, "D": 4096}, "fp32", "fwd", UB, "vector_bound", spec.config())
