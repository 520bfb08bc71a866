"""Search over a bundled kernel's tunables (``optimize-round --auto``), and its cache.

The space comes from ``ascendopt.tune.space`` (UB-pruned, equivalent launches collapsed). ``--auto``
runs this search with a cheap evaluator, the screening of ``tune.screen`` (compile once, smoke check,
short timing), and confirms only its fastest candidates as gated rounds (``rounds.auto``).

Where it starts, and which way it goes, follow the evidence, not "largest first": the start is the best
so far (the frozen configuration, whose auto tiles the UB model resolves); ``tune.space.place_auto``
puts each auto 0 at the value it resolves to, so the first moves from an auto start are its neighbours
(the next smaller and larger explicit tiles), whereas with the 0 above every explicit value the first
move was the largest tile (on the H200, l2norm's --auto spent its two rounds on ``block_rows=128`` and
``block_rows_bwd=128``). The direction tried first comes from the bottleneck class
(``tune.space.preferred_direction``).

Strategy: first a probe of each layout/flag tunable (``probe``: tunables that change no tile, such
as G_T_CONTIG or FORM), one step each way from the best so far, even when the probe takes the whole
budget: on the H200 landscapes (benchmarks/RESULTS.md) these choices moved the gated delta rule's
stages by 20-45 % while the tiles' auto values were already best or within 3 %, and in small spaces
the tile walk would otherwise spend the budget before reaching them (an earlier rule that probed only
when the moves fit half the remaining budget missed FORM=2 on both gdn_kkt_solve shapes). Then greedy coordinate descent
from the incumbent, one tunable changed per step (the loop's "one change per round"), walking each
tunable in the direction the bottleneck class suggests first (vector/memory/UB/scalar/latency-bound
-> larger tiles first; core under-use -> smaller tiles, more tasks) and continuing while it
improves. When no single move helps, "trade" moves change two tile sizes in opposite directions (a
UB budget often fixes their product). The search stops at the evaluation budget or when no
neighbour improves. Compare kernel_tuner's greedy_mls and Triton's exhaustive autotune
(docs/peers.md §2.4-2.5); the H200 study in benchmarks/tune_quality.py measures the
distance to the exhaustive best (``--replay`` re-runs it offline over a recorded landscape).

Measured configurations are cached (JSON) keyed by kernel, shape, dtype, mode, device, the
kernel source hash and the contract's digest, so an edit of the kernel or a re-freeze invalidates
its entries.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ascendopt.tune.space import Candidate, config_key
from ascendopt.workspace import atomic_write_text

DEFAULT_BUDGET_FRACTION = 0.25  # the study's target: within 3 % of the exhaustive best in <= 25 % of the space


@dataclass
class Trial:
    """The result of evaluating one configuration. ``ms`` None = failed (gate red, compile error)."""

    config: dict[str, int]
    ms: float | None
    better: bool | None = None  # the evaluator's own interleaved verdict vs the incumbent, if any
    note: str = ""
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    best: Trial
    start: Trial
    trials: list[Trial] = field(default_factory=list)  # in evaluation order, start first
    evaluations: int = 0  # fresh evaluations (cache hits excluded)
    space: int = 0  # feasible candidates
    pruned: list[Candidate] = field(default_factory=list)
    stopped: str = ""  # "budget" | "time" | "converged"

    def to_dict(self) -> dict[str, Any]:
        return {"best": self.best.to_dict(), "start": self.start.to_dict(),
                "trials": [t.to_dict() for t in self.trials], "evaluations": self.evaluations,
                "space": self.space, "pruned": [c.to_dict() for c in self.pruned], "stopped": self.stopped}


# -- the search --------------------------------------------------------------------------------

Evaluate = Callable[[dict[str, int], dict[str, int]], Trial]  # (candidate, incumbent) -> Trial


def default_budget(space: int) -> int:
    return max(3, math.ceil(DEFAULT_BUDGET_FRACTION * space))


def search(
    space: Sequence[Mapping[str, int]],
    start: Mapping[str, int],
    evaluate: Evaluate,
    *,
    order: Sequence[str],
    direction: int = +1,
    budget: int | None = None,
    cache: TuneCache | None = None,
    choices: Mapping[str, Sequence[int]] | None = None,
    on_trial: Callable[[Trial, Trial], None] | None = None,
    start_trial: Trial | None = None,
    probe: Sequence[str] = (),
    out_of_time: Callable[[], bool] | None = None,
) -> SearchResult:
    """Greedy coordinate descent over ``space`` (the feasible configurations) from ``start``.

    ``evaluate(candidate, incumbent)`` measures one configuration; ``budget`` caps fresh
    evaluations (the start counts unless ``start_trial`` is given, e.g. the measured baseline).
    ``on_trial(trial, best_after)`` is called after each trial. Cache hits do not use budget.
    ``probe`` names tunables (flags, layouts) tried one step each way before the descent, in order,
    as far as the budget goes. ``out_of_time()`` (e.g. a deadline of ``--budget-s``), when given, is
    asked before each fresh evaluation; True ends the search like a spent budget, ``stopped`` "time".
    """
    allowed = {config_key(c) for c in space}
    if config_key(start) not in allowed:
        raise ValueError(f"start configuration {config_key(start)} is not in the feasible space")
    budget = budget if budget is not None else default_budget(len(space))
    if choices is None:  # plain ascending order; pass ``axes(spec)`` for kernels with an auto 0
        choices = {n: sorted({c[n] for c in space}) for n in order}
    seen: dict[str, Trial] = {}
    timed_out: list[bool] = []
    result = SearchResult(best=None, start=None, space=len(space))  # type: ignore[arg-type]

    def run(cfg: dict[str, int], incumbent: dict[str, int]) -> Trial | None:
        key = config_key(cfg)
        if key in seen:
            return seen[key]
        hit = cache.get(cfg) if cache else None
        if hit is not None:
            trial = hit
        else:
            if result.evaluations >= budget:
                return None
            if out_of_time is not None and out_of_time():
                timed_out.append(True)
                return None
            trial = evaluate(dict(cfg), dict(incumbent))
            result.evaluations += 1
            if cache:
                cache.put(trial)
        seen[key] = trial
        result.trials.append(trial)
        return trial

    if start_trial is not None:
        first = start_trial
        seen[config_key(start)] = first
        result.trials.append(first)
    else:
        first = run(dict(start), dict(start))
        if first is None:
            raise ValueError("budget 0 leaves nothing to evaluate")
    if first.ms is None:
        raise ValueError(f"the start configuration {config_key(start)} failed: {first.note}")
    result.start = result.best = first

    def better(trial: Trial, best: Trial) -> bool:
        if trial.ms is None:
            return False
        if trial.better is not None and not trial.cached:
            return trial.better
        return trial.ms < best.ms

    def step(cfg: Mapping[str, int] | None, name: str, d: int, *, feasible_only: bool = True
             ) -> dict[str, int] | None:
        """The next value of ``name`` in direction ``d``; with ``feasible_only`` skip pruned ones."""
        if cfg is None:
            return None
        vals = list(choices[name])
        i = vals.index(cfg[name]) + d
        while 0 <= i < len(vals):
            nxt = {**cfg, name: vals[i]}
            if not feasible_only or config_key(nxt) in allowed:
                return nxt
            i += d
        return None

    def consider(cfg: dict[str, int] | None) -> bool | None:
        """Evaluate ``cfg`` against the best; True if it became the best, None if out of budget."""
        if cfg is None or config_key(cfg) not in allowed:
            return False
        if config_key(cfg) in seen:
            return False  # measured already and it did not win then
        before = result.best
        trial = run(cfg, before.config)
        if trial is None:
            return None
        won = better(trial, before)
        if won:
            result.best = trial
        if on_trial:
            on_trial(trial, result.best)
        return won

    names = [n for n in order if len(choices.get(n, ())) > 1]
    out_of_budget = False
    probed = [n for n in probe if len(choices.get(n, ())) > 1]
    # cheapest first: a tunable with one move from the start (a flag, a value at the end of its range)
    # before one with two (stable sort keeps the given order among equals)
    probed.sort(key=lambda n: sum(step(first.config, n, d) is not None for d in (+1, -1)))
    if probed:
        for name in probed:
            for d in (+1, -1):
                won = consider(step(result.best.config, name, d))
                if won is None:
                    out_of_budget = True
                if won or out_of_budget:
                    break
            if out_of_budget:
                break
    improved = not out_of_budget
    while improved and not out_of_budget:
        improved = False
        for name in names:
            for d in (direction, -direction):
                moved = False
                while True:
                    won = consider(step(result.best.config, name, d))
                    if won is None:
                        out_of_budget = True
                    if not won:
                        break
                    moved = improved = True
                if moved or out_of_budget:
                    break  # the preferred direction paid off (or budget spent): skip the other way
            if out_of_budget:
                break
        if not improved and not out_of_budget:
            # Trade moves: one tile up, another down (keeps their product, e.g. under a UB budget).
            for a, b in itertools.permutations(names, 2):
                up = step(result.best.config, a, +1, feasible_only=False)
                won = consider(step(up, b, -1, feasible_only=False))
                if won is None:
                    out_of_budget = True
                    break
                if won:
                    improved = True
                    break
    result.stopped = ("time" if timed_out else "budget") if out_of_budget else "converged"
    return result


# -- the cache ---------------------------------------------------------------------------------


def source_hash(spec) -> str:
    """sha256 (16 hex) of the source file that defines the kernel's launcher."""
    try:
        path = inspect.getsourcefile(spec.run)
        data = Path(path).read_bytes() if path else b""
    except (OSError, TypeError):
        data = b""
    return hashlib.sha256(data).hexdigest()[:16]


def source_digest(root: Path, files: Iterable[str]) -> str:
    """sha256 (16 hex) over the named files' paths and bytes (own code's screening cache key)."""
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0")
        try:
            h.update((Path(root) / rel).read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:16]


def cache_key(kernel: str, dims: Mapping[str, Any], dtype: str, mode: str, device: str, src_hash: str,
              contract_digest: str = "") -> str:
    """The cache entry of one search setting. ``contract_digest``: the frozen contract's digest, so a
    re-freeze (a new baseline, a new ledger) never reuses the numbers measured under another contract."""
    shape = ",".join(f"{k}={':'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in dims.items())
    key = f"{kernel}|{shape}|{dtype}|{mode}|{device}|{src_hash}"
    return f"{key}|{contract_digest[:16]}" if contract_digest else key


class TuneCache:
    """Measured configurations of one (kernel, shape, dtype, mode, device, source, contract) key, in a JSON file.

    File layout: ``{"schema": 1, "entries": {key: {config_key: {"ms": float|null, "note": str}}}}``.
    Every ``put`` rewrites the file atomically, so a killed search keeps what it measured.
    """

    def __init__(self, path: Path, key: str):
        self.path = Path(path)
        self.key = key
        self._data = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return {"schema": 1, "entries": {}}  # a damaged cache is only a lost speed-up
        if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
            return {"schema": 1, "entries": {}}
        return data

    def entries(self) -> dict[str, Any]:
        return self._data["entries"].get(self.key, {})

    def entry(self, config: Mapping[str, int]) -> dict[str, Any] | None:
        """The stored entry of ``config`` (``ms``, ``note`` and whatever ``put`` was given), or None."""
        return self.entries().get(config_key(config))

    def get(self, config: Mapping[str, int]) -> Trial | None:
        hit = self.entry(config)
        if hit is None:
            return None
        return Trial(dict(config), hit.get("ms"), None, hit.get("note", ""), cached=True)

    def put(self, trial: Trial, **extra: Any) -> None:
        """Store ``trial`` (``extra``: more JSON fields of its entry, e.g. screening's p20/p80)."""
        self._data["entries"].setdefault(self.key, {})[config_key(trial.config)] = {"ms": trial.ms,
                                                                                  "note": trial.note, **extra}
        atomic_write_text(self.path, json.dumps(self._data, indent=1, sort_keys=True))


def exhaustive(space: Iterable[Mapping[str, int]], measure: Callable[[dict[str, int]], float | None]
               ) -> list[tuple[dict[str, int], float | None]]:
    """Measure every configuration (the reference the search is judged against)."""
    return [(dict(c), measure(dict(c))) for c in space]
