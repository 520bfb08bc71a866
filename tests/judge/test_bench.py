"""The A/B rule on synthetic distributions, and the synchronized timer on the cpu backend."""

import numpy as np
import pytest

from ascendopt.device.backends import Backend
from ascendopt.judge import bench


class VirtualBackend:
    """A backend whose timer reads ``clock["t"]`` (ms): a sample is exactly what the timed call adds to it."""

    name = "cpu"

    def __init__(self, clock: dict):
        self.clock = clock

    def synchronize(self):
        pass

    def timer(self):
        return VirtualTimer(self.clock)


class VirtualTimer:
    def __init__(self, clock: dict):
        self.clock = clock

    def start(self):
        self.t0 = self.clock["t"]

    def stop(self):
        return self.clock["t"] - self.t0


def _pairs(shift: float, n: int, seed: int, noise: float = 0.02, base: float = 0.1):
    rng = np.random.default_rng(seed)
    drift = 1 + 0.01 * np.sin(np.arange(n) / 5)  # slow drift both sides share
    a = base * drift * np.exp(rng.normal(0, noise, n))
    b = base * (1 + shift) * drift * np.exp(rng.normal(0, noise, n))
    return a, b


def test_aa_says_same_across_many_seeds():
    verdicts = [bench.decide(*_pairs(0.0, 30, seed)).verdict for seed in range(200)]
    assert verdicts.count("same") == 200


def test_planted_5_percent_slowdown_is_slower():
    results = [bench.decide(*_pairs(0.05, 30, seed)) for seed in range(100)]
    detected = sum(r.verdict == "slower" for r in results)
    assert detected >= 95
    assert all(r.verdict != "faster" for r in results)
    assert 1.03 < float(np.median([r.ratio for r in results])) < 1.07


def test_planted_speedup_is_faster():
    r = bench.decide(*_pairs(-0.10, 30, 1))
    assert r.verdict == "faster" and r.speedup > 1.05


def test_absolute_floor_blocks_tiny_differences():
    a, b = _pairs(0.10, 30, 2, base=1e-6)  # 1 ns kernels: 10 % is far below the 0.5 us floor
    assert bench.decide(a, b).verdict == "same"


def test_a_band_wider_than_max_band_is_inconclusive_not_same():
    """The CPU case of issue 19: a noise band of hundreds of percent used to say "same" (and pass)."""
    rule = bench.DecisionRule()
    for seed in range(20):
        r = bench.decide(*_pairs(0.0, 30, seed, noise=0.5))
        assert r.verdict == "inconclusive" and r.threshold_rel > rule.max_band
        assert f"wider than the ±{rule.max_band:.0%}" in r.reason
    # even a real -60 % change inside a band that wide is no verdict
    r = bench.decide(*_pairs(-0.6, 30, 3, noise=1.5))
    assert r.verdict == "inconclusive" and r.threshold_rel > 1.0


def test_a_wide_band_below_the_absolute_floor_still_says_same():
    """A 1 ns kernel with 50 % noise: the band is wide in percent but far below the 0.5 us the rule
    calls at all, so nothing the rule would call can hide in it."""
    r = bench.decide(*_pairs(0.0, 30, 4, noise=0.5, base=1e-6))
    assert r.threshold_rel > bench.DecisionRule().max_band and r.verdict == "same"


def test_max_band_bounds_what_same_can_hide():
    """Just over the limit is inconclusive; the same data with a wider limit is "same"."""
    a, b = _pairs(0.0, 30, 5, noise=0.06)
    r = bench.decide(a, b)
    assert r.verdict == "inconclusive" and 0.05 < r.threshold_rel < 0.2
    assert bench.decide(a, b, bench.DecisionRule(max_band=r.threshold_rel + 0.01)).verdict == "same"


def test_decide_rejects_bad_input():
    with pytest.raises(ValueError):
        bench.decide([1.0] * 3, [1.0] * 3)
    with pytest.raises(ValueError):
        bench.decide([1.0] * 10, [0.0] * 10)


def test_summarize_percentiles():
    t = bench.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (t.median_ms, t.n) == (3.0, 5)
    assert t.p20_ms == pytest.approx(1.8) and t.p80_ms == pytest.approx(4.2)


def test_measure_rotates_inputs_and_times_on_cpu():
    import time

    seen = []

    def fn(x):
        seen.append(x)
        time.sleep(0.0005)

    t = bench.measure(fn, inputs=[(1,), (2,), (3,)], backend=Backend("cpu", "test"), warmup=2, warmup_ms=0,
                      repeats=6, min_sample_ms=1.0)
    assert set(seen) == {1, 2, 3}
    assert t.n == 6 and t.median_ms >= 0.5


def test_compare_detects_real_sleep_slowdown_on_cpu():
    """A real 60 % slowdown of a sleeping call. Sleeps of a few ms: a loaded host wakes a sleeper up to a
    millisecond or more late, which at 1 ms sleeps made both sides look alike (a flaky "same" under CI)."""
    import time

    def fast():
        time.sleep(0.004)

    def slow():
        time.sleep(0.0064)

    r = bench.compare(fast, slow, backend=Backend("cpu", "test"), pairs=12, warmup=1, warmup_ms=0, min_sample_ms=8)
    assert r.verdict == "slower" and r.ratio > 1.2


def _noisy_clock(seed: int, sigma: float):
    """A virtual clock and a call that advances it by ``ms`` times a log-normal noise factor (``sigma``, seeded):
    ``(backend, call(ms))``."""
    import itertools

    noise = itertools.cycle(np.exp(np.random.default_rng(seed).normal(0, sigma, 4000)))
    clock = {"t": 0.0}

    def call(ms: float) -> None:
        clock["t"] += ms * next(noise)

    return VirtualBackend(clock), call


def test_noisy_stretch_extends_sampling_instead_of_hiding_a_change():
    """A real 8 % slowdown under heavy noise: 12 pairs cannot call it (their band is far wider than
    max_band: inconclusive, not "same"), more pairs can."""
    backend, call = _noisy_clock(7, 0.08)

    def fast():
        call(1.0)

    def slow():
        call(1.08)

    short = bench.compare(fast, slow, backend=backend, pairs=12, max_pairs=12, warmup=1, warmup_ms=0,
                          min_sample_ms=0)
    extended = bench.compare(fast, slow, backend=backend, pairs=12, max_pairs=120, warmup=1, warmup_ms=0,
                             min_sample_ms=0)
    assert short.verdict == "inconclusive" and short.threshold_rel > bench.DecisionRule().max_band
    assert extended.verdict == "slower" and extended.baseline.n > 12


def test_more_pairs_turn_an_inconclusive_band_into_a_verdict():
    """No change under 4 % noise per sample: 12 pairs leave the band above max_band (inconclusive);
    compare keeps sampling and the narrower band says "same"."""
    backend, call = _noisy_clock(11, 0.04)

    def side():
        call(1.0)

    kw = dict(backend=backend, pairs=12, warmup=1, warmup_ms=0, min_sample_ms=0)
    short = bench.compare(side, side, max_pairs=12, **kw)
    extended = bench.compare(side, side, max_pairs=120, **kw)
    assert short.verdict == "inconclusive" and short.baseline.n == 12
    assert extended.verdict == "same" and extended.threshold_rel <= bench.DecisionRule().max_band
    assert extended.baseline.n > 12


def test_a_recheck_that_cannot_tell_stays_inconclusive():
    base = [1.0 + 0.001 * (i % 3) for i in range(20)]
    first = bench.decide(base, [b * 0.1 for b in base])  # an implausible 10x faster
    again = bench.decide(*_pairs(0.0, 30, 1, noise=0.5))
    assert first.verdict == "faster" and again.verdict == "inconclusive"
    assert bench.after_recheck(first, again).verdict == "inconclusive"
    quiet = bench.decide(*_pairs(0.0, 30, 1))
    assert bench.after_recheck(first, quiet).verdict == "same"


def test_interleaved_samples_rotate_the_order_and_share_one_batch_size():
    """N sides: all warm up first, then ABC CBA ABC ...; extending continues the rotation."""
    clock = {"t": 0.0}
    backend = VirtualBackend(clock)
    order = []

    def side(name, ms):
        def fn(x):
            order.append((name, x))
            clock["t"] += ms * x

        return fn

    fns = [side("a", 1.0), side("b", 2.0), side("c", 4.0)]
    samples, calls = bench.interleaved_samples(fns, inputs=[(1,)], backend=backend, pairs=4, warmup=2,
                                               warmup_ms=0, min_sample_ms=0)
    assert calls == 1 and samples == [[1.0] * 4, [2.0] * 4, [4.0] * 4]
    names = "".join(name for name, _ in order)
    assert names == "aabbcc" + "abc" + "cba" + "abc" + "cba"

    order.clear()
    taker = bench.Interleaved([bench.Sampler(fn, [(1,)], backend) for fn in fns[:2]], warmup=1, warmup_ms=0,
                              min_sample_ms=0)
    taker.take(1)
    a, b = taker.take(2)
    assert "".join(name for name, _ in order) == "ab" + "ab" + "ba" + "ab" and len(a) == len(b) == 3


class QueueBackend:
    """A device with a launch queue, on virtual clocks (ms): the host spends ``host_ms`` per call
    enqueuing ``device_ms`` of work; the device runs queued work in order and never before it was
    enqueued. Events read the device clock when the device reaches them."""

    name = "cuda"

    def __init__(self, host_ms: float, device_ms: float, can_hold: bool = True):
        self.host, self.device = 0.0, 0.0
        self.host_ms, self.device_ms, self.can_hold = host_ms, device_ms, can_hold
        self.holds: list[float] = []

    def perf_counter(self) -> float:  # stands in for time.perf_counter (seconds)
        return self.host / 1e3

    def launch(self, ms: float) -> None:
        self.host += self.host_ms
        self.device = max(self.device, self.host) + ms

    def event(self) -> float:
        self.device = max(self.device, self.host)
        return self.device

    def synchronize(self):
        self.host = max(self.host, self.device)

    def hold_device(self, ms: float) -> bool:
        if self.can_hold:
            self.holds.append(ms)
            self.device = max(self.device, self.host) + ms
        return self.can_hold

    def timer(self):
        backend = self

        class _Timer:
            def start(self):
                self.t0 = backend.event()

            def stop(self):
                t1 = backend.event()
                backend.synchronize()
                return t1 - self.t0

        return _Timer()


# Not held, a 2-call batch lasts 2 launches + the last call's run: (2 * 3 + 1) / 2 = 3.5 ms per call.
@pytest.mark.parametrize("can_hold, expected_ms", [(True, 1.0), (False, 3.5)])
def test_holding_the_device_measures_device_time_when_the_host_is_slower(monkeypatch, can_hold, expected_ms):
    """Launching costs the host 3 ms, running 1 ms: held, samples are the device's 1 ms; not held,
    they are mostly the host's launch time (what this test would see if the hold did nothing)."""
    backend = QueueBackend(host_ms=3.0, device_ms=1.0, can_hold=can_hold)
    monkeypatch.setattr(bench.time, "perf_counter", backend.perf_counter)
    t = bench.measure(lambda: backend.launch(backend.device_ms), backend=backend, warmup=3, warmup_ms=0,
                      repeats=8, min_sample_ms=4.0)
    assert t.calls_per_sample == 2
    assert t.median_ms == pytest.approx(expected_ms)
    assert t.host_ms == pytest.approx(3.0)
    if can_hold:
        # margin x the host's enqueue time of the batch + the extra, and it was always enough
        assert backend.holds[-1] == pytest.approx(bench.Sampler.HOLD_MARGIN * 3.0 * 2 + bench.Sampler.HOLD_EXTRA_MS)
        assert len(backend.holds) == 8


def test_a_hold_shorter_than_the_enqueue_is_counted_as_exposed(monkeypatch):
    backend = QueueBackend(host_ms=3.0, device_ms=1.0)
    monkeypatch.setattr(bench.time, "perf_counter", backend.perf_counter)
    run = bench.Sampler(lambda: backend.launch(1.0), backend=backend)
    run.warmup(2, 0)
    run.host_ms = 0.1  # as if the warmup had seen a fast host: the first hold is too short
    first = run.sample(4)
    second = run.sample(4)
    assert run.exposed == 1 and first > 1.0 and second == pytest.approx(1.0)


def test_hold_device_is_a_no_op_off_cuda_and_when_disabled(monkeypatch):
    assert Backend("cpu", "test").hold_device(1.0) is False
    monkeypatch.setenv("ASCENDOPT_HOLD_DEVICE", "0")
    assert Backend("cuda", "test").hold_device(1.0) is False  # returns before touching torch.cuda
