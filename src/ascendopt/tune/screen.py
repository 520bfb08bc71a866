"""Screening: stage 1 of ``optimize-round --auto`` (stage 2, confirmation, is ``rounds.auto``).

Every candidate configuration is compiled once and judged briefly, so tens of configurations fit in a
few minutes where a gated round costs minutes each:

* a correctness smoke check on one shape case (the contract's first): one call with NaN-poisoned
  outputs compared with the fp32 oracle (``judge.correctness.check_kernel``, the gate's own check, at
  the contract's tolerances). It is also the call that compiles the candidate. A candidate that is
  wrong or raises is screened out with the reason; one that breaks the device raises ``DeviceFault``
  (exit 5) after its entry is cached as failed, so the next run skips it;
* a short synchronized timing of the same case: ``judge.bench.measure`` (the bench core: device time,
  batched calls, cuda's device hold) over the gate's L2-rotated input sets (``gate.stages.timing_inputs``),
  ``SCREEN_REPEATS`` samples of at least ``SCREEN_MIN_SAMPLE_MS`` each. The median orders the
  candidates; nothing is kept on it (only a confirmed round can be ``keep``).

Order and coverage (``run_screen``): first the search of ``tune.search`` with the screening as its
evaluator (the probe of flags and layouts, then coordinate descent from the start in the direction the
bottleneck class suggests, the start's auto tiles placed at their resolved value so its first moves
are its neighbours: ``tune.space.place_auto``). When the descent converges with budget left, the
candidates not yet screened follow, nearest to the best so far first (fewest steps along the value
orders), so a budget large enough makes the screening exhaustive. Screening stops when every
candidate is screened, at ``budget`` fresh screenings, or when ``out_of_time()`` says so (the
``--budget-s`` deadline); ``ScreenRun.stopped`` and ``covered`` say which and how far it got.

Results are cached (``tune.search.TuneCache`` in ``screen-cache.json``) by kernel, shape, dtype, mode,
device and kernel source hash (``screen_key``), not by contract: a screening number does not depend on
the baseline, so it survives a re-freeze; an edit of the kernel source invalidates it. Cache hits cost
no budget and no time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ascendopt.tune import search as tune
from ascendopt.tune.space import config_key

SCREEN_REPEATS = 7  # samples per candidate: a median, not a verdict (confirmation decides)
SCREEN_MIN_SAMPLE_MS = 0.5  # each sample batches calls up to this much device time
SCREEN_WARMUP = 2  # calls after the smoke check compiled the candidate
SCREEN_WARMUP_MS = 5.0


@dataclass
class Screened:
    """One candidate's screening. ``ms``: median ms per call on the screened case (None: screened out)."""

    config: dict[str, int]
    ms: float | None
    p20_ms: float | None = None
    p80_ms: float | None = None
    smoke: str = "pass"  # "pass" | "fail" (wrong or unwritten outputs) | "raised" | "device fault"
    note: str = ""  # why it was screened out, in words
    cached: bool = False
    seconds: float = 0.0  # wall time this screening took (0 for a cache hit)
    # on a pool (``tune.pooled``): the device that screened it, and its time / the start's, timed interleaved there
    device: str | None = None
    vs_start: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScreenRun:
    """What the screening covered: ``rows`` in screening order (cache hits included)."""

    rows: list[Screened] = field(default_factory=list)
    total: int = 0  # distinct candidates in the space
    fresh: int = 0  # candidates screened in this run (not from the cache)
    searched: int = 0  # rows[:searched] came from the search, the rest from the nearest-first fill
    stopped: str = ""  # "covered" | "converged" | "budget" | "time"
    seconds: float = 0.0

    @property
    def covered(self) -> int:
        return len(self.rows)

    def ranked(self) -> list[Screened]:
        """Candidates that passed, fastest first."""
        return sorted((r for r in self.rows if r.ms is not None), key=lambda r: r.ms)

    @property
    def best(self) -> Screened | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "total": self.total, "covered": self.covered,
                "fresh": self.fresh, "searched": self.searched, "stopped": self.stopped,
                "seconds": round(self.seconds, 3),
                "best": self.best.to_dict() if self.best else None}


def screen_key(kernel: str, dims: Mapping[str, Any], dtype: str, mode: str, device: str, src_hash: str) -> str:
    """The screening cache's key: ``tune.cache_key`` without the contract's digest, marked ``screen``."""
    return "screen|" + tune.cache_key(kernel, dims, dtype, mode, device, src_hash)


def screen_config(spec, dims: Mapping[str, Any], dtype: str, mode: str, config: Mapping[str, int], inputs,
                  backend, *, tolerances=None, repeats: int = SCREEN_REPEATS) -> Screened:
    """Smoke-check then time one configuration on one shape case (see the module docstring).

    ``inputs``: the timing input sets (``gate.stages.timing_inputs``), rotated call to call;
    ``backend``: what times it (the device's, or a ``ClockBackend`` in tests); ``tolerances``: the
    contract's (default: the spec's). Raises ``DeviceFault`` when the candidate broke the device.
    """
    from ascendopt.errors import AscendoptError
    from ascendopt.gate.stages import kernel_raised
    from ascendopt.judge import bench

    cfg = dict(config)
    t0 = time.monotonic()
    out = smoke_check(spec, dims, dtype, mode, cfg, tolerances=tolerances)
    if out is not None:
        return out
    try:
        timing = bench.measure(lambda inp: spec.run(inp, cfg, mode), inputs=inputs, backend=backend,
                               warmup=SCREEN_WARMUP, warmup_ms=SCREEN_WARMUP_MS, repeats=repeats,
                               min_sample_ms=SCREEN_MIN_SAMPLE_MS)
    except AscendoptError:
        raise
    except Exception as exc:  # noqa: BLE001 - passed the smoke check, then raised while timed
        return Screened(cfg, None, smoke="raised", note=f"raised while timed: {kernel_raised(exc, spec.name, cfg)}",
                        seconds=time.monotonic() - t0)
    return Screened(cfg, timing.median_ms, timing.p20_ms, timing.p80_ms, seconds=time.monotonic() - t0)


def smoke_check(spec, dims: Mapping[str, Any], dtype: str, mode: str, config: Mapping[str, int], *,
                tolerances=None) -> Screened | None:
    """The screening's smoke check of one configuration (see the module docstring): None when it passes, else
    the candidate's row, screened out with the reason. Raises ``DeviceFault`` when the candidate broke the device."""
    from ascendopt.errors import AscendoptError
    from ascendopt.gate.stages import kernel_raised
    from ascendopt.judge.correctness import check_kernel

    cfg = dict(config)
    t0 = time.monotonic()
    try:
        reports = check_kernel(spec, dims, dtype, mode, cfg, tolerances=tolerances)
    except AscendoptError:
        raise
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is screened out, with the reason
        return Screened(cfg, None, smoke="raised", note=f"raised {kernel_raised(exc, spec.name, cfg)}",
                        seconds=time.monotonic() - t0)
    failed = [r for r in reports if not r.passed]
    if failed:
        note = "wrong: " + ", ".join(f"{r.name} ({r.reason})" for r in failed[:3])
        return Screened(cfg, None, smoke="fail", note=note, seconds=time.monotonic() - t0)
    return None


def _steps_apart(a: Mapping[str, int], b: Mapping[str, int], choices: Mapping[str, Sequence[int]]) -> int:
    """Moves along the value orders between two configurations (the search's notion of distance)."""
    total = 0
    for name, vals in choices.items():
        if a.get(name) != b.get(name) and a.get(name) in vals and b.get(name) in vals:
            total += abs(list(vals).index(a[name]) - list(vals).index(b[name]))
        elif a.get(name) != b.get(name):
            total += 1
    return total


class _CacheView:
    """``tune.search``'s view of the screening cache: a hit is a Trial for the search and a covered row
    (``on_hit``); entries are written by ``run_screen`` itself, with the screening's fields."""

    def __init__(self, cache: tune.TuneCache | None, on_hit: Callable[[Screened], None]):
        self.cache, self.on_hit = cache, on_hit

    def get(self, config: Mapping[str, int]) -> tune.Trial | None:
        entry = self.cache.entry(config) if self.cache else None
        if entry is None:
            return None
        row = Screened(dict(config), entry.get("ms"), entry.get("p20_ms"), entry.get("p80_ms"),
                       entry.get("smoke", "pass"), entry.get("note", ""), cached=True)
        self.on_hit(row)
        return tune.Trial(dict(config), row.ms, note=row.note, cached=True)

    def put(self, trial: tune.Trial) -> None:
        return None


def run_screen(space: Sequence[Mapping[str, int]], start: Mapping[str, int],
               screen: Callable[[dict[str, int]], Screened], *, order: Sequence[str], direction: int,
               choices: Mapping[str, Sequence[int]], probe: Sequence[str] = (), budget: int | None = None,
               out_of_time: Callable[[], bool] | None = None, cache: tune.TuneCache | None = None,
               on_screened: Callable[[Screened, ScreenRun], None] | None = None) -> ScreenRun:
    """Screen ``space`` from ``start`` (see the module docstring): the search first, then the rest nearest
    to the best first. ``screen(config)`` screens one candidate; ``budget``: fresh screenings at most
    (None: the whole space); ``on_screened(row, run)`` after each candidate (progress)."""
    t0 = time.monotonic()
    run = ScreenRun(total=len(space))
    rows: dict[str, Screened] = {}
    budget = len(space) if budget is None else budget

    def record(row: Screened) -> None:
        rows[config_key(row.config)] = row
        run.rows.append(row)
        if on_screened:
            on_screened(row, run)

    def fresh(cfg: Mapping[str, int]) -> Screened:
        from ascendopt.errors import DeviceFault

        try:
            row = screen(dict(cfg))
        except DeviceFault as exc:
            # nothing more runs in this process; the next run (a fresh one) skips this configuration
            if cache:
                cache.put(tune.Trial(dict(cfg), None, note=f"device fault: {exc.message}"), smoke="device fault")
            raise
        run.fresh += 1
        if cache:
            cache.put(tune.Trial(row.config, row.ms, note=row.note), p20_ms=row.p20_ms, p80_ms=row.p80_ms,
                      smoke=row.smoke)
        return row

    def evaluate(cfg: dict[str, int], incumbent: dict[str, int]) -> tune.Trial:
        row = fresh(cfg)
        record(row)
        return tune.Trial(row.config, row.ms, note=row.note)

    view = _CacheView(cache, record)
    result = tune.search(space, start, evaluate, order=order, direction=direction, budget=budget, cache=view,
                         choices=choices, probe=probe, out_of_time=out_of_time)
    run.stopped = result.stopped
    run.searched = len(run.rows)
    if result.stopped == "converged":
        # budget left: the candidates the descent did not reach, nearest to the best so far first
        best = run.best.config if run.best else dict(start)
        rest = sorted((dict(c) for c in space if config_key(c) not in rows),
                      key=lambda c: _steps_apart(c, best, choices))
        for cfg in rest:
            if view.get(cfg) is not None:
                continue  # a cache hit: recorded by the view
            if run.fresh >= budget:
                run.stopped = "budget"
                break
            if out_of_time is not None and out_of_time():
                run.stopped = "time"
                break
            record(fresh(cfg))
        else:
            run.stopped = "covered"
    run.seconds = time.monotonic() - t0
    return run
