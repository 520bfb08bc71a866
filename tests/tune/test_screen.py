"""tune.screen: stage 1 of `optimize-round --auto` (order, coverage, time budget, cache) and
tune.space.place_auto (an auto start's first moves are its neighbours)."""

import pytest

from ascendopt.errors import DeviceFault
from ascendopt.tune import screen as tune_screen
from ascendopt.tune import search as tune
from ascendopt.tune import space as tune_space

BR = [1, 2, 4, 8, 16, 32, 64, 128, 0]  # axes(): the auto 0 last
RESOLVED = 16  # what block_rows=0 resolves to in this made-up landscape


def _ms(cfg):
    """A memory-bound-like landscape: fastest at 32 rows, flag F=1 a little slower."""
    rows = RESOLVED if cfg["BR"] == 0 else cfg["BR"]
    return 1.0 + 0.1 * abs((rows.bit_length() - 1) - 5) + 0.02 * cfg["F"]


SPACE = [{"BR": r, "F": f} for r in BR if r != RESOLVED for f in (0, 1)]  # 16 collapsed into the auto 0
START = {"BR": 0, "F": 0}


def _choices():
    return tune_space.place_auto({"BR": BR, "F": [0, 1]}, START, lambda name, v: name == "BR" and v == RESOLVED)


def _screen(log):
    def screen(cfg):
        log.append(tune.config_key(cfg))
        return tune_screen.Screened(cfg, _ms(cfg), _ms(cfg) * 0.99, _ms(cfg) * 1.01)
    return screen


def _run(log, **kw):
    return tune_screen.run_screen(SPACE, START, _screen(log), order=["BR", "F"], direction=+1, choices=_choices(),
                                  probe=["F"], **kw)


def test_place_auto_puts_the_auto_where_its_tile_resolves():
    assert _choices() == {"BR": [1, 2, 4, 8, 0, 32, 64, 128], "F": [0, 1]}
    # several explicit values launching the start's tiles (clamped to the extent): the smallest one's place
    clamped = tune_space.place_auto({"BK": [16, 32, 64, 128, 0]}, {"BK": 0}, lambda n, v: v >= 64)
    assert clamped == {"BK": [16, 32, 0]}
    # a start that is not auto, or an auto that no explicit value matches, keeps the order
    assert tune_space.place_auto({"BR": BR}, {"BR": 8}, lambda n, v: True) == {"BR": BR}
    assert tune_space.place_auto({"BR": BR}, {"BR": 0}, lambda n, v: False) == {"BR": BR}


def test_screening_starts_at_the_neighbours_of_the_auto_tile_and_covers_the_space():
    log = []
    run = _run(log)
    # the start, the flag probe, then the next larger tile (direction +1) from the resolved 16 -- not 128
    assert log[:4] == ["BR=0,F=0", "BR=0,F=1", "BR=32,F=0", "BR=64,F=0"]
    assert run.stopped == "covered" and run.covered == run.total == len(SPACE) == run.fresh
    assert sorted(log) == sorted(tune.config_key(c) for c in SPACE)  # each candidate screened once
    assert run.best.config == {"BR": 32, "F": 0}
    assert [r.ms for r in run.ranked()] == sorted(_ms(c) for c in SPACE)


def test_after_the_descent_the_rest_goes_nearest_to_the_best_first():
    run = _run([])
    assert 0 < run.searched < run.total
    rest = [r.config for r in run.rows[run.searched:]]
    steps = [tune_screen._steps_apart(c, run.best.config, _choices()) for c in rest]
    assert steps == sorted(steps) and steps[-1] >= 4  # BR=1 is four moves from 32 rows


def test_the_count_budget_and_the_time_budget_stop_the_screening():
    log = []
    run = _run(log, budget=3)
    assert run.stopped == "budget" and run.fresh == run.covered == 3 and len(log) == 3
    ticks = iter(range(1000))
    log = []
    run = _run(log, out_of_time=lambda: next(ticks) >= 5)  # the deadline passes after 5 screenings
    assert run.stopped == "time" and run.covered == 5 == len(log) < run.total
    assert run.to_dict()["covered"] == 5 and run.to_dict()["best"]["config"] == run.best.config


def test_cached_candidates_cost_no_budget_and_are_marked(tmp_path):
    cache = tune.TuneCache(tmp_path / "screen-cache.json", tune_screen.screen_key("k", {"T": 8}, "bf16", "fwd",
                                                                                   "cpu", "abc"))
    log = []
    first = _run(log, budget=4, cache=cache)
    assert first.fresh == 4 and not any(r.cached for r in first.rows)
    log = []
    again = _run(log, budget=4, cache=tune.TuneCache(cache.path, cache.key))
    assert [r.cached for r in again.rows[:4]] == [True] * 4 and again.fresh == 4 and len(log) == 4
    assert not set(log) & {tune.config_key(r.config) for r in first.rows}
    hit = again.rows[0]
    assert (hit.ms, hit.p20_ms, hit.p80_ms) == (first.rows[0].ms, first.rows[0].p20_ms, first.rows[0].p80_ms)
    other = tune.TuneCache(cache.path, tune_screen.screen_key("k", {"T": 8}, "bf16", "fwd", "cpu", "edited"))
    assert other.entries() == {}  # another source hash: nothing reused


def test_a_device_fault_is_cached_as_failed_and_raised(tmp_path):
    cache = tune.TuneCache(tmp_path / "c.json", "k")

    def screen(cfg):
        if cfg == {"BR": 0, "F": 1}:
            raise DeviceFault("broke the device", config=cfg)
        return tune_screen.Screened(cfg, _ms(cfg))

    with pytest.raises(DeviceFault):
        tune_screen.run_screen(SPACE, START, screen, order=["BR", "F"], direction=+1, choices=_choices(),
                               probe=["F"], cache=cache)
    entry = tune.TuneCache(cache.path, "k").entry({"BR": 0, "F": 1})
    assert entry["ms"] is None and entry["smoke"] == "device fault" and "broke the device" in entry["note"]
