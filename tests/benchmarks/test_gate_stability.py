"""benchmarks/gate_stability.py's planted slowdown: the calibration math on simulated device curves
(the benchmark itself runs on the H200), and the pass running on both sides of the comparison."""

import dataclasses

import numpy as np
import pytest

import _benchmarks
from ascendopt import kernels

gs = _benchmarks.load("gate_stability")


def test_amount_for_interpolates_between_bracketing_points():
    line = [(a, a * 5e-6) for a in (3750.0, 7500.0, 15000.0)]  # 5 % at 10000 cycles
    assert gs.amount_for(line, 0.05) == pytest.approx(10000.0)
    # a noisy, non-monotone measurement: the bracketing neighbours decide
    assert gs.amount_for([(1000.0, 0.004), (2000.0, 0.002), (4000.0, 0.03), (8000.0, 0.07)], 0.05) \
        == pytest.approx(6000.0)


def test_amount_for_extrapolates_along_the_nearest_points():
    # a pass hidden in idle gaps up to 4000 cycles, then 5e-6 per cycle: the target lies beyond
    hinge = [(2000.0, 0.0), (4000.0, 0.0), (8000.0, 0.02)]
    assert gs.amount_for(hinge, 0.05) == pytest.approx(14000.0)
    assert gs.amount_for([(8000.0, 0.08), (16000.0, 0.16)], 0.05) == pytest.approx(5000.0)
    assert gs.amount_for([(5000.0, 0.01), (10000.0, 0.01)], 0.05) == pytest.approx(50000.0)  # flat: proportional
    assert gs.amount_for([(100.0, 0.5), (200.0, 0.9)], 0.05) == 1.0  # clamped


@pytest.mark.parametrize("curve", ["linear", "hinge"])
def test_search_lands_on_the_target_of_a_noisy_device_curve(curve):
    """H200-like numbers: a ~100 us kernel (the pass's launch paid on both sides), a spin at
    1.98 GHz while the first guess assumes 1.5 GHz, +-0.3 % measurement noise."""
    rng = np.random.default_rng(3)

    def true_slowdown(cycles):
        busy = cycles if curve == "linear" else max(0.0, cycles - 3000.0)
        return busy / 1980.0 / 100.0

    amount, points = gs.search(lambda c: true_slowdown(c) + rng.normal(0, 0.003), 0.05 * 0.1 * 1.5e6, 0.05)
    assert len(points) == len(gs.GUESS_FACTORS) + gs.REFINEMENTS
    assert abs(true_slowdown(amount) - 0.05) < 0.005


def test_planted_spec_runs_the_pass_on_both_sides():
    seen, configs = [], []
    base = dataclasses.replace(kernels.get("rms_norm"), run=lambda inputs, config, mode: configs.append(config))
    spec = gs.planted_spec(base, seen.append)
    spec.run({}, spec.config({"PLANT": 0}), "fwd")
    spec.run({}, spec.config({"PLANT": 1}), "fwd")
    assert seen == [False, True]  # the baseline side runs the smallest pass, not none
    assert all("PLANT" not in c for c in configs) and configs[0] == configs[1]
