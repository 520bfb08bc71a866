"""``optimize-round --auto``'s screening on a pool of devices (``ascendopt.pool``): the same candidates, the same
smoke check, each timed on one device interleaved with the start there.

On one device the screening follows the search (``tune.search``: each move depends on the last result). A pool
screens many candidates at once, so there the candidates go out nearest to the start first (``order``: the
search's own notion of distance, the start first), up to ``--budget`` fresh ones or the ``--budget-s`` deadline,
which covers what the search would reach first and, with budget enough, the whole space, as it does.

The judge's rules per device (``ScreenJob``):

* **anchor**: before its first candidate and after its last, a device times the frozen configuration exactly as
  freeze did (``bench.measure``, ``bench.baseline_repeats`` samples) and compares it with the frozen baseline
  (``judge.engine.anchor_problem``: its own noise band plus ``ANCHOR_DRIFT``); a device off it is quarantined by the
  pool (``pool.core``) and its screenings are dropped and re-screened elsewhere;
* **ratios only**: a candidate is timed interleaved with the start (the best so far) on the same device
  (``bench.Interleaved``, ``SCREEN_REPEATS`` pairs), and only the ratio ``vs_start`` (candidate / start, medians)
  leaves the device. The row's ``ms`` is that ratio times the start's own screened time (``start_ms``), one number
  for the whole pool, so candidates from different devices rank by their ratios alone;
* every row names its ``device``; the pool's record (``PoolRun.to_dict``) lists what each device measured.
"""

from __future__ import annotations

import dataclasses
import socket
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ascendopt.tune import screen as tune_screen
from ascendopt.tune.space import config_key


@dataclass
class ScreenJob:
    """The screening of one shape case, shipped to every device of a pool (``pool.core.Job``).

    ``spec``: the bundled kernel (its registry name after ``portable``); ``start``: the configuration every
    candidate is timed against (the best so far); ``baseline``: the frozen one, whose frozen median ``frozen_ms`` (ms
    per call; None: not frozen, no anchor) each device must reproduce; ``frozen_waited_ms``: what the host made the
    frozen baseline wait (``anchor_problem``); ``timer``: a clock in ms replacing the device timer (tests)."""

    spec: Any
    dims: dict[str, Any]
    dtype: str
    mode: str
    start: dict[str, int]
    baseline: dict[str, int]
    frozen_ms: float | None
    frozen_waited_ms: float | None = None
    tolerances: Any = None
    timer: Callable[[], float] | None = None
    label: str = "configuration"

    def portable(self) -> ScreenJob:
        """The job as a spawned process receives it: the kernel by its registry name."""
        return dataclasses.replace(self, spec=self.spec if isinstance(self.spec, str) else self.spec.name)

    def key(self, item: Mapping[str, int]) -> str:
        return config_key(item)

    # -- on the device ---------------------------------------------------------------------------

    def _kernel(self):
        if isinstance(self.spec, str):
            from ascendopt import kernels

            self.spec = kernels.get(self.spec)
        return self.spec

    def _device(self) -> tuple[Any, Any, list]:
        """This device's backend, the one that times (``timer``'s where given) and the timing inputs, made once."""
        cached = getattr(self, "_made", None)
        if cached is None:
            from ascendopt.device import backends
            from ascendopt.gate.stages import ClockBackend, timing_inputs

            backend = backends.current()
            clocked = ClockBackend(backend, self.timer) if self.timer is not None else backend
            inputs = timing_inputs(self._kernel(), self.dims, self.dtype, self.mode, backend.torch_device())
            cached = self._made = (backend, clocked, inputs)
        return cached

    def anchor(self) -> dict[str, Any]:
        """The frozen configuration timed as freeze timed it, against the frozen median (``anchor_problem``)."""
        from ascendopt.judge import bench, engine
        from ascendopt.pool.devices import current

        spec = self._kernel()
        backend, clocked, inputs = self._device()
        samples: list[float] = []
        # what a loaded host made it wait is read where the samples are wall time (no injected clock)
        waits: list[float | None] | None = [] if self.timer is None else None
        timing = bench.measure(lambda inp: spec.run(inp, self.baseline, self.mode), inputs=inputs, backend=clocked,
                               repeats=bench.baseline_repeats(backend.name), samples=samples, waits=waits)
        problem = (engine.anchor_problem(self.frozen_ms, samples, waits or (), self.frozen_waited_ms)
                   if self.frozen_ms else None)
        return {"device": current(), "host": socket.gethostname(), "median_ms": timing.median_ms,
                "waited_ms": timing.waited_ms, "frozen_ms": self.frozen_ms, "problem": problem}

    def run(self, config: Mapping[str, int]) -> dict[str, Any]:
        """One candidate: the smoke check, then ``SCREEN_REPEATS`` pairs interleaved with the start on this device.
        A candidate that breaks the device ends the pool's dispatch (``stop``): the caller caches and raises it."""
        from ascendopt.errors import DeviceFault
        from ascendopt.gate.stages import kernel_raised
        from ascendopt.judge import bench

        spec = self._kernel()
        cfg = dict(config)
        _, clocked, inputs = self._device()
        try:
            out = tune_screen.smoke_check(spec, self.dims, self.dtype, self.mode, cfg, tolerances=self.tolerances)
            if out is not None:
                return out.to_dict()
            taker = bench.Interleaved(
                [bench.Sampler(lambda inp: spec.run(inp, self.start, self.mode), inputs, clocked),
                 bench.Sampler(lambda inp: spec.run(inp, cfg, self.mode), inputs, clocked)],
                warmup=tune_screen.SCREEN_WARMUP, warmup_ms=tune_screen.SCREEN_WARMUP_MS,
                min_sample_ms=tune_screen.SCREEN_MIN_SAMPLE_MS)
            start, cand = taker.take(tune_screen.SCREEN_REPEATS)
        except DeviceFault as exc:
            return {**tune_screen.Screened(cfg, None, smoke="device fault", note=exc.message).to_dict(), "stop": True}
        except Exception as exc:  # noqa: BLE001 - passed the smoke check, then raised while timed
            return tune_screen.Screened(cfg, None, smoke="raised",
                                        note=f"raised while timed: {kernel_raised(exc, spec.name, cfg)}").to_dict()
        timing = bench.summarize(cand, taker.calls)
        return {**tune_screen.Screened(cfg, timing.median_ms, timing.p20_ms, timing.p80_ms).to_dict(),
                "vs_start": statistics.median(cand) / statistics.median(start), "start_ms": statistics.median(start)}


def order(space: Sequence[Mapping[str, int]], start: Mapping[str, int],
          choices: Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    """The candidates in the order a pool screens them: the start, then nearest to it first (the search's distance,
    ``tune.screen._steps_apart``), ties in the space's order."""
    key = config_key(start)
    rest = [dict(c) for c in space if config_key(c) != key]
    return [dict(start)] + sorted(rest, key=lambda c: tune_screen._steps_apart(c, start, choices))


def rows_of(results: Sequence[Mapping[str, Any]], reference: float | None) -> list[tune_screen.Screened]:
    """The pool's results as screening rows, in the order they completed: each row's ``ms`` is its ratio to the
    start times ``reference`` (ms: the start's own screened time, one reference for the whole pool; see the module
    docstring; None: the device's own times)."""
    fields = {f.name for f in dataclasses.fields(tune_screen.Screened)}
    rows = []
    for r in results:
        row = tune_screen.Screened(**{k: v for k, v in r.items() if k in fields})
        if row.ms is not None and r.get("start_ms") and reference is not None:
            # the device's times scaled so that its start reads as the reference: ms is then vs_start x reference
            scale = reference / r["start_ms"]
            row.ms, row.p20_ms, row.p80_ms = (x * scale if x is not None else None
                                              for x in (row.ms, row.p20_ms, row.p80_ms))
        rows.append(row)
    return rows
