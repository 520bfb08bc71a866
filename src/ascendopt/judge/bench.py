"""Synchronized timing and the noise-aware A/B verdict.

Every number here is milliseconds of device time per call. A *sample* is the mean time of one
batch of calls, timed with device events (npu/cuda) or synchronize + ``perf_counter`` (cpu);
batching keeps event overhead and timer resolution out of short kernels. On cuda the device is
held busy while the host enqueues a batch (``Sampler``), so host launch time stays out of it.

The A/B rule (``decide``) works on paired, interleaved samples ``a_i, b_i`` (order alternates
ABBA so neither side always runs second):

* effect = median of ``ln(b_i / a_i)`` (pairing cancels slow drift of clocks and temperature);
* noise  = the A/A spread: ``z * 1.2533 * 1.4826 * MAD(ln-ratios) / sqrt(n)`` — the standard
  error of a median of normal data (1.2533·σ/√n, σ from the MAD) at the chosen confidence;
* a change is called only if |effect| exceeds ``max(min_rel, noise)``, the absolute difference
  of medians exceeds ``abs_floor_ms``, and the Wilcoxon signed-rank test rejects "no shift"
  at ``alpha``. Otherwise the verdict is "same" — but only while the band is narrow enough for
  "same" to mean something: a "same" whose band is wider than ``max_band`` (and, in ms, not below
  ``abs_floor_ms``) is "inconclusive" (the noise could hide a change the rule exists to catch).

An implausible result (> 5x either way) is measured again before it is reported; a faster one that
reproduces, or a candidate time under the device's roofline floor (``roofline_floor_ms``), is
*implausible* (``implausible_reason``): its own outcome, never a plain pass or a keep without an
explicit, recorded acceptance.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import numpy as np

# "If the number is too good, it is": a change beyond 5x either way is measured again before it is
# reported, and kept only if the second measurement says the same.
IMPLAUSIBLE_RATIO = 5.0


@dataclass(frozen=True)
class Timing:
    """Summary of per-call times in ms: median with p20/p80, coefficient of variation, n samples."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    mean_ms: float
    cv: float
    n: int
    calls_per_sample: int = 1
    host_ms: float | None = None  # host enqueue time per call (median over samples), where measured
    # ms per call the timed batches waited on a run queue (median over samples), where read (judge.engine)
    waited_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def spread_text(self) -> str:
        from ascendopt.console import spread_text

        return spread_text(self.median_ms * 1e3, self.p20_ms * 1e3, self.p80_ms * 1e3)


def summarize(samples_ms: Sequence[float], calls_per_sample: int = 1) -> Timing:
    x = np.asarray(samples_ms, dtype=float)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    mean = float(x.mean())
    cv = float(x.std(ddof=1) / mean) if x.size > 1 and mean > 0 else 0.0
    return Timing(
        median_ms=float(np.median(x)),
        p20_ms=float(np.percentile(x, 20)),
        p80_ms=float(np.percentile(x, 80)),
        mean_ms=mean,
        cv=cv,
        n=int(x.size),
        calls_per_sample=calls_per_sample,
    )


def _backend(backend):
    if backend is None:
        from ascendopt.device.backends import current

        return current()
    return backend


class Side(Protocol):
    """One side of an interleaved measurement: anything that can warm up and time a batch of calls
    (a ``Sampler`` in this process, or a proxy for one in a child process)."""

    def warmup(self, count: int, min_ms: float) -> float: ...

    def sample(self, calls: int) -> float: ...


class Sampler:
    """Timed batches of ``fn(*inputs[i % len(inputs)])``; input sets rotate from call to call so a
    cache-sized working set is not measured hot.

    Before each timed batch the device is held busy (``Backend.hold_device``, cuda only) for longer
    than the host needs to enqueue the batch, so the batch runs back to back on the device and the
    sample is device time even when launching a call costs the host more than running it.
    ``host_ms`` is the host's enqueue time per call of the last batch; ``exposed`` counts batches
    whose enqueue outlasted the hold (their samples include host gaps).
    """

    HOLD_MARGIN = 1.5  # hold = margin x the last batch's enqueue time + HOLD_EXTRA_MS
    HOLD_EXTRA_MS = 0.05
    HOLD_MAX_MS = 200.0

    def __init__(self, fn: Callable[..., Any], inputs: Sequence[Sequence[Any]] | None = None, backend=None):
        self.fn = fn
        self.inputs = list(inputs) if inputs else [()]
        self.backend = _backend(backend)
        self.i = 0
        self.host_ms: float | None = None
        self.exposed = 0

    def __call__(self) -> None:
        args = self.inputs[self.i % len(self.inputs)]
        self.i += 1
        self.fn(*args)

    def warmup(self, count: int, min_ms: float) -> float:
        """Run at least ``count`` calls and at least ``min_ms`` of wall time; return ms per call."""
        t0 = time.perf_counter()
        n = 0
        while n < count or (time.perf_counter() - t0) * 1e3 < min_ms:
            self()
            n += 1
            if n > 100_000:
                break
        # Enqueue time per call, an upper bound on the host's share (the queue may have been full).
        self.host_ms = (time.perf_counter() - t0) * 1e3 / max(n, 1)
        self.backend.synchronize()
        return (time.perf_counter() - t0) * 1e3 / max(n, 1)

    def _hold(self, calls: int) -> float:
        """Hold the device ahead of a batch of ``calls``; returns the ms held (0 if not possible)."""
        hold_device = getattr(self.backend, "hold_device", None)
        if hold_device is None or self.host_ms is None:
            return 0.0
        ms = min(self.HOLD_MAX_MS, self.HOLD_MARGIN * self.host_ms * calls + self.HOLD_EXTRA_MS)
        return ms if hold_device(ms) else 0.0

    def sample(self, calls: int) -> float:
        """Device time of ``calls`` back-to-back calls, in ms per call."""
        timer = self.backend.timer()
        self.backend.synchronize()
        held = self._hold(calls)
        t0 = time.perf_counter()
        timer.start()
        for _ in range(calls):
            self()
        enqueue_ms = (time.perf_counter() - t0) * 1e3
        ms = timer.stop() / calls
        self.host_ms = enqueue_ms / calls
        if held and enqueue_ms > held:
            self.exposed += 1
        return ms


def calls_per_sample(per_call_ms: float, min_sample_ms: float, max_calls: int = 200) -> int:
    """Calls batched into one sample so it lasts at least ``min_sample_ms`` (1 .. ``max_calls``)."""
    if per_call_ms <= 0:
        return max_calls
    return int(min(max_calls, max(1, math.ceil(min_sample_ms / per_call_ms))))


class Interleaved:
    """Samples of N sides taken in rotating order: forward on even rounds, backward on odd ones
    (AB BA for two, ABC CBA for three), so no side always runs first and slow drift of clocks and
    temperature hits all sides alike. All sides warm up first and share one batch size, the one
    the fastest side needs, so per-call overheads are comparable.

    ``samples[k]`` holds side k's samples (ms per call, at least 1e-9); ``take`` may be called again
    to extend them, the rotation continuing where it stopped.
    """

    def __init__(self, sides: Sequence[Side], *, warmup: int = 5, warmup_ms: float = 25.0,
                 min_sample_ms: float = 1.0):
        if not sides:
            raise ValueError("Interleaved needs at least one side")
        self.sides = list(sides)
        per_call = min(side.warmup(warmup, warmup_ms) for side in self.sides)
        self.calls = calls_per_sample(per_call, min_sample_ms)
        self.samples: list[list[float]] = [[] for _ in self.sides]

    def take(self, pairs: int, on_pair: Callable[[], None] | None = None) -> list[list[float]]:
        """Take ``pairs`` more rounds (one sample of every side each); returns ``samples``."""
        order = list(range(len(self.sides)))
        for _ in range(pairs):
            forward = len(self.samples[0]) % 2 == 0
            for k in (order if forward else order[::-1]):
                self.samples[k].append(max(self.sides[k].sample(self.calls), 1e-9))
            if on_pair:
                on_pair()
        return self.samples


def interleaved_samples(
    callables: Sequence[Callable[..., Any]],
    *,
    inputs: Sequence[Sequence[Any]] | None = None,
    backend=None,
    pairs: int,
    warmup: int = 5,
    warmup_ms: float = 25.0,
    min_sample_ms: float = 1.0,
    on_pair: Callable[[], None] | None = None,
) -> tuple[list[list[float]], int]:
    """Interleaved samples of N callables in this process (see ``Interleaved``).

    Every callable is called as ``fn(*inputs[i % len(inputs)])``. Returns ``(samples, calls)``:
    ``samples[k]`` are ``pairs`` samples of ``callables[k]`` in ms per call, ``calls`` the calls
    per sample (shared by all sides).
    """
    backend = _backend(backend)
    taker = Interleaved([Sampler(fn, inputs, backend) for fn in callables], warmup=warmup, warmup_ms=warmup_ms,
                        min_sample_ms=min_sample_ms)
    return taker.take(pairs, on_pair), taker.calls


# Samples of a bundled kernel's frozen baseline (``freeze``), and of its re-measure on each device of a pool (the
# anchor, ``tune.pooled``): the interpreter's wall time says nothing about device time, so 10 keep CPU freezes short.
BASELINE_REPEATS = {"cpu": 10, "default": 30}


@contextlib.contextmanager
def one_thread_on_cpu(backend_name: str) -> Iterator[None]:
    """On the cpu backend, torch computes on one thread inside (restored after), as the judge's workers do
    (``interleave.CPU_WORKER_THREADS``: a cpu verdict compares the sides, not the host's multi-core throughput).
    Freeze times a bundled kernel's baseline so, and so does every device of a pool (``pool.local``): the frozen
    anchor and a device's re-measure then run alike. Elsewhere the device's time does not depend on it: nothing
    changes."""
    if backend_name != "cpu":
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def baseline_repeats(backend_name: str) -> int:
    """Samples of a bundled kernel's frozen baseline on ``backend_name`` (``BASELINE_REPEATS``)."""
    return BASELINE_REPEATS.get(backend_name, BASELINE_REPEATS["default"])


def measure(
    fn: Callable[..., Any],
    *,
    inputs: Sequence[Sequence[Any]] | None = None,
    backend=None,
    warmup: int = 5,
    warmup_ms: float = 25.0,
    repeats: int = 30,
    min_sample_ms: float = 1.0,
    on_sample: Callable[[], None] | None = None,
    samples: list[float] | None = None,
    waits: list[float | None] | None = None,
) -> Timing:
    """Synchronized timing of ``fn(*inputs[i % len(inputs)])``: warmup, then ``repeats`` samples.
    ``samples``: a list that receives the samples themselves (ms per call), e.g. for ``engine.anchor_problem``;
    ``waits``: one that receives, per sample, the ms per call this process waited on a run queue meanwhile (None
    where unreadable; ``process.most_waited_ms``), and the timing's ``waited_ms`` is then their median: what a
    loaded host added, which the anchor may excuse (only where the samples are wall time: no injected clock)."""
    from ascendopt.process import most_waited_ms, schedstats

    run = Sampler(fn, inputs, backend)
    per_call = run.warmup(warmup, warmup_ms)
    calls = calls_per_sample(per_call, min_sample_ms)
    samples = [] if samples is None else samples
    host = []
    for _ in range(repeats):
        before = schedstats("self") if waits is not None else None
        samples.append(run.sample(calls))
        if waits is not None:
            waited = most_waited_ms(before, schedstats("self"))
            waits.append(waited / calls if waited is not None else None)
        host.append(run.host_ms)
        if on_sample:
            on_sample()
    timing = replace(summarize(samples, calls), host_ms=float(np.median(host)))
    if waits and all(w is not None for w in waits):
        timing = replace(timing, waited_ms=float(np.median(waits)))
    return timing


@dataclass(frozen=True)
class Comparison:
    """Candidate vs baseline. ``ratio`` = candidate time / baseline time (< 1 means faster)."""

    verdict: str  # "faster" | "slower" | "same" | "inconclusive" (band wider than DecisionRule.max_band)
    ratio: float
    threshold_rel: float  # relative change needed to call a difference
    noise_rel: float  # A/A spread of the paired log-ratios, relative
    p_value: float
    baseline: Timing
    candidate: Timing
    rechecked: bool = False
    reason: str = ""
    # the paired samples the verdict was decided on (ms per call, ``baseline[i]`` next to ``candidate[i]``):
    # the spread and histogram the CLI prints
    samples_ms: dict[str, list[float]] | None = None

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speedup"] = self.speedup
        return d


@dataclass(frozen=True)
class DecisionRule:
    """The A/B rule's constants (relative values are fractions: 0.015 = 1.5 %).

    ``max_band``: the widest noise band at which "same" still means "no change the rule should
    call"; a wider one makes the verdict "inconclusive". 5 %: the gate exists to catch the 5 %
    slowdown of the gate-stability target (benchmarks/RESULTS.md), and a "same" inside a wider band
    could be hiding it. It leaves room for honest noise: the H200 A/A bands sit at the 1.5 % floor
    (noise < min_rel), and paired samples with 2 % noise per side reach at most ~3.6 % at 30 pairs;
    the CPU interpreter's 2-14 % bands at 16 pairs mostly exceed it, as they should.
    """

    min_rel: float = 0.015  # smallest change we call at all (1.5 %)
    abs_floor_ms: float = 0.0005  # 0.5 us: below this, event resolution and launch jitter dominate
    alpha: float = 0.002  # significance level of the Wilcoxon signed-rank test
    z: float = 3.29  # two-sided 99.9 % for the noise band: a false alarm costs a wrong "keep"
    max_band: float = 0.05  # widest band at which "same" is a verdict (5 %); wider: "inconclusive"


def decide(
    baseline_ms: Sequence[float],
    candidate_ms: Sequence[float],
    rule: DecisionRule = DecisionRule(),
    calls_per_sample: int = 1,
) -> Comparison:
    """Verdict from paired samples (``baseline_ms[i]`` measured next to ``candidate_ms[i]``)."""
    from scipy.stats import wilcoxon

    a = np.asarray(baseline_ms, dtype=float)
    b = np.asarray(candidate_ms, dtype=float)
    if a.shape != b.shape or a.size < 6:
        raise ValueError("decide() needs two equally long sample lists of at least 6 pairs")
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("timings must be positive")
    r = np.log(b / a)
    effect = float(np.median(r))
    mad = float(np.median(np.abs(r - np.median(r))))
    noise = rule.z * 1.2533 * 1.4826 * mad / math.sqrt(r.size)
    threshold = max(rule.min_rel, math.expm1(noise))
    if np.allclose(r, 0.0):
        p = 1.0
    else:
        p = float(wilcoxon(r, zero_method="zsplit").pvalue)
    ta, tb = summarize(a, calls_per_sample), summarize(b, calls_per_sample)
    ratio = math.exp(effect)
    abs_diff = abs(tb.median_ms - ta.median_ms)
    if abs(math.expm1(effect)) <= threshold:
        verdict, why = "same", f"change {math.expm1(effect):+.2%} within ±{threshold:.2%} noise band"
    elif p >= rule.alpha:
        verdict, why = "same", f"change {math.expm1(effect):+.2%} not significant (p={p:.3g} >= {rule.alpha})"
    elif abs_diff < rule.abs_floor_ms:
        verdict, why = "same", f"difference {abs_diff * 1e3:.3f} us below the {rule.abs_floor_ms * 1e3:.3f} us floor"
    else:
        verdict = "slower" if effect > 0 else "faster"
        why = f"change {math.expm1(effect):+.2%} beyond ±{threshold:.2%}, p={p:.2g}"
    # A band narrower than the absolute floor in ms hides nothing the rule would call either.
    if verdict == "same" and threshold > rule.max_band and threshold * ta.median_ms >= rule.abs_floor_ms:
        verdict = "inconclusive"
        why = (f"change {math.expm1(effect):+.2%} within a ±{threshold:.2%} noise band, wider than the "
               f"±{rule.max_band:.0%} at which 'same' rules out a change")
    return Comparison(verdict, ratio, threshold, math.expm1(noise), p, ta, tb, reason=why,
                      samples_ms={"baseline": [round(float(x), 7) for x in a],
                                  "candidate": [round(float(x), 7) for x in b]})


def undecided(result: Comparison, rule: DecisionRule = DecisionRule()) -> bool:
    """True when more pairs could change ``result``: "same" or "inconclusive" only because the noise
    band is wider than ``rule.min_rel`` (the band shrinks as 1/sqrt(pairs))."""
    return result.verdict in ("same", "inconclusive") and result.noise_rel > rule.min_rel


def take_until_decided(taker: Interleaved, pairs: int, max_pairs: int | None, rule: DecisionRule = DecisionRule(),
                       on_pair: Callable[[], None] | None = None) -> Comparison:
    """``pairs`` interleaved pairs from ``taker`` (two sides), decided; while the verdict is
    ``undecided``, ``pairs`` more, up to ``max_pairs`` in all (default ``3 * pairs``)."""
    limit = max(pairs, max_pairs if max_pairs is not None else 3 * pairs)
    while True:
        a, b = taker.take(pairs, on_pair)
        result = decide(a, b, rule, taker.calls)
        if not undecided(result, rule) or len(a) + pairs > limit:
            return result


def compare(
    baseline: Callable[..., Any],
    candidate: Callable[..., Any],
    *,
    inputs: Sequence[Sequence[Any]] | None = None,
    candidate_inputs: Sequence[Sequence[Any]] | None = None,
    backend=None,
    pairs: int = 30,
    max_pairs: int | None = None,
    warmup: int = 5,
    warmup_ms: float = 25.0,
    min_sample_ms: float = 1.0,
    rule: DecisionRule = DecisionRule(),
    on_pair: Callable[[], None] | None = None,
    _recheck: bool = True,
) -> Comparison:
    """Interleaved A/B timing of two callables in this process, decided by ``decide``.

    If the first ``pairs`` end in "same" or "inconclusive" only because the noise band is wider
    than ``rule.min_rel`` (a noisy stretch on the device), sampling continues in steps of ``pairs``
    up to ``max_pairs`` (default ``3 * pairs``, ``take_until_decided``): more pairs narrow the band
    (it shrinks as 1/sqrt(n)) instead of letting noise hide a real change. A band still wider than
    ``rule.max_band`` after that is "inconclusive".
    """
    backend = _backend(backend)
    sides = [Sampler(baseline, inputs, backend),
             Sampler(candidate, candidate_inputs if candidate_inputs is not None else inputs, backend)]
    taker = Interleaved(sides, warmup=warmup, warmup_ms=warmup_ms, min_sample_ms=min_sample_ms)
    result = take_until_decided(taker, pairs, max_pairs, rule, on_pair)
    # The host's enqueue time per call, last batch of each side (device time hides it; show it).
    result = replace(result, baseline=replace(result.baseline, host_ms=getattr(sides[0], "host_ms", None)),
                     candidate=replace(result.candidate, host_ms=getattr(sides[1], "host_ms", None)))
    if _recheck and implausible(result.ratio):
        again = compare(baseline, candidate, inputs=inputs, candidate_inputs=candidate_inputs, backend=backend,
                        pairs=pairs, max_pairs=max_pairs, warmup=warmup, warmup_ms=warmup_ms,
                        min_sample_ms=min_sample_ms, rule=rule, _recheck=False)
        return after_recheck(result, again)
    return result


def implausible(ratio: float) -> bool:
    """True when a time ratio is beyond ``IMPLAUSIBLE_RATIO`` either way (measure it again)."""
    return not 1 / IMPLAUSIBLE_RATIO <= ratio <= IMPLAUSIBLE_RATIO


def roofline_floor_ms(bytes_moved: int | float | None, hbm_gbs: float | None) -> float | None:
    """The least time one call can take (ms) when it must move ``bytes_moved`` bytes through device memory
    at the chip's peak ``hbm_gbs`` GB/s (configs/chips.yaml); None when either is unknown. A measured
    time under it is physically impossible for a call whose inputs are not cache-resident (the gate and the
    rounds rotate input sets spanning 2 x 64 MiB: ``stages.timing_inputs``). FLOPs give no floor here:
    chips.yaml records no peak compute rate."""
    if not bytes_moved or not hbm_gbs:
        return None
    return float(bytes_moved) / (float(hbm_gbs) * 1e9) * 1e3


def implausible_reason(verdict: str, ratio: float, candidate_ms: float | None = None,
                       floor_ms: float | None = None, rechecked: str = "reproduced when measured again"
                       ) -> str | None:
    """Why a "faster" result cannot be taken at its word, or None: a speedup beyond ``IMPLAUSIBLE_RATIO``
    that survived the re-check (``after_recheck`` keeps "faster" only when it reproduced), or a candidate
    median under the roofline floor ``floor_ms``. KernelGuard (OpenReview K0dAC7UaXL) rejects
    "physics-impossible" scores with such floor checks; Wafer's reward-hack field guide: a 104x claim should
    make you suspicious, a 1000x one certain. ``rechecked``: how the re-check went, said after the ratio
    (a round whose first measurement was inconclusive says so instead of "reproduced")."""
    if verdict != "faster":
        return None
    if floor_ms is not None and candidate_ms is not None and candidate_ms < floor_ms:
        return (f"candidate {candidate_ms * 1e3:.3f} us per call is under the roofline floor {floor_ms * 1e3:.3f} us "
                "(the bytes it must move at the chip's peak bandwidth)")
    if ratio > 0 and 1.0 / ratio > IMPLAUSIBLE_RATIO:
        return f"{1.0 / ratio:.1f}x faster, beyond the {IMPLAUSIBLE_RATIO:g}x bound ({rechecked})"
    return None


def after_recheck(first: Comparison, again: Comparison) -> Comparison:
    """What to report once an implausible ``first`` was measured ``again``: the second measurement,
    with its verdict only if it reproduced the first one's, else "same" ("inconclusive" if the second
    measurement was)."""
    if again.verdict != first.verdict:
        return replace(again, verdict="inconclusive" if again.verdict == "inconclusive" else "same", rechecked=True,
                       reason=f"implausible {first.ratio:.2f}x did not reproduce ({again.ratio:.2f}x)")
    return replace(again, rechecked=True, reason=f"{again.reason} (re-checked: > {IMPLAUSIBLE_RATIO:g}x)")


def min_pairs(rule: DecisionRule = DecisionRule()) -> int:
    """Fewest interleaved pairs worth timing under ``rule``: the exact two-sided signed-rank test on n
    pairs reaches at best p = 2 / 2**n, which must fall below ``rule.alpha`` with room for two discordant
    pairs (+2). With alpha = 0.002 that is 12."""
    n = 1
    while 2.0 / 2**n >= rule.alpha:
        n += 1
    return n + 2


MIN_PAIRS = min_pairs()


def check_pairs(pairs: int, option: str = "--pairs") -> None:
    """Refuse a pair count below ``MIN_PAIRS`` (exit 2): no change could ever be called significant."""
    if pairs < MIN_PAIRS:
        from ascendopt.errors import UsageError

        raise UsageError(f"{option} {pairs}: at least {MIN_PAIRS} interleaved pairs are needed",
                         hint=f"with fewer, the signed-rank test cannot reach p < {DecisionRule().alpha}: "
                              "no change could ever be called")
