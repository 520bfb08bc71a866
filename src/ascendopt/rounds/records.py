"""Round records, verdicts and stop criteria: the loop's discipline as code.

One round = one hypothesis and one change, then the gate, then an interleaved benchmark, then a
re-profile (docs/practice.md §10). Each round is written to
``.ascendopt/rounds/NNNN.yaml`` (schema 1, atomic write) and never edited afterwards.

Verdicts (fla's OPT_LOG ``Status``):

* ``drop``   - the gate was red; nothing was benchmarked ("a fail row is benchmarked nothing");
* ``keep``   - gate green and measurably faster than the best so far (``bench.decide``: beyond the
  noise band, significant); the change becomes the new best;
* ``floor``  - gate green, no gain, and a hardware bound is reached (named bound with its number);
* ``revert`` - gate green and no measurable gain: the change is undone. An *inconclusive* timing
  (the noise band stayed wider than ``bench.DecisionRule.max_band``) is always a revert: nothing is
  kept, and no floor claimed, on a measurement that cannot tell (the record's ``reason`` says so).

The verdict and its one-line reason come from one pure function of the measurements, ``rounds.decide.decide``
(the gate, the first timing, its re-check, implausibility and acceptance, the floor); every record keeps the
reason (``RoundRecord.reason``), so no ``revert`` or ``drop`` stands without its why.

Stop criteria (``should_stop``), checked in this order: floor evidence on the last round; the
iteration cap ``max_rounds`` from the contract; stall = 3 consecutive non-keep rounds (drops included);
>= 3 distinct directions tried with evidence (a measured round: dropped rounds are not counted, see
``directions_tried``) while the last round brought no gain. The message names the rounds counted.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ascendopt.contract.model import DEFAULT_MAX_ROUNDS
from ascendopt.errors import ContractError
from ascendopt.workspace import Workspace, read_yaml, write_yaml

VERDICTS = ("keep", "revert", "drop", "floor")
STOP_CRITERIA = ("floor", "max_rounds", "stall", "directions")

# The one statistic for "how much faster than the baseline" (the round's speed line, ``status``, the report):
# per shape case the median of the per-pair time ratios of the round's interleaved pairs (``bench.decide``'s
# ``ratio``: a drift of the device hits both sides of a pair and cancels), then the equal-weight geometric
# mean over shape cases. Never the ratio of the two sides' medians, which can differ from it.
SPEEDUP_STATISTIC = ("median of the per-pair time ratios of the round's interleaved pairs, equal-weight geomean "
                     "over shape cases")
# With a served-shape mix the round is judged as the gate judges it: the weighted speedup over the timed buckets,
# Σ w·t_reference / Σ w·t_candidate of each bucket's median time (``judge.weighted``), with a floor per heavy
# bucket; equal weights would let a light bucket buy a heavy one's regression.
WEIGHTED_STATISTIC = "weighted over the shape mix's buckets: Σ w·t_reference / Σ w·t_candidate of their medians"


def speedup_statistic(timing: Mapping[str, Any] | None) -> str:
    """The statistic a round's ``ratio_vs_*`` were computed by: ``WEIGHTED_STATISTIC`` over a shape mix
    (``timing["weighted"]``), else ``SPEEDUP_STATISTIC``."""
    return WEIGHTED_STATISTIC if (timing or {}).get("weighted") else SPEEDUP_STATISTIC

STALL_ROUNDS = 3  # docs/practice.md §10: after 3 consecutive rounds without a keep, stop and re-assess
MIN_DIRECTIONS = 3  # docs/practice.md §10: stop once >= 3 distinct directions were tried with evidence

# Floor thresholds. 0.85 of the data-sheet HBM peak: well-written streaming copies reach ~85-92 % of
# peak on HBM parts (our own H200 copy measurement is in benchmarks/RESULTS.md), so a kernel at 85 %
# has no memory headroom left worth a round.
BANDWIDTH_FLOOR_FRACTION = 0.85
# Launch-overhead floor: when the device kernel covers at most half of the measured per-call latency
# the rest is launch/dispatch cost that no tile change can remove.
LAUNCH_FLOOR_SHARE = 0.5


@dataclass(frozen=True)
class FloorEvidence:
    """A named hardware bound with its number, e.g. ``hbm-bandwidth 4210 GB/s of 4800 GB/s``."""

    bound: str  # "hbm-bandwidth" | "launch-overhead"
    value: float
    limit: float
    unit: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StopDecision:
    """Whether the loop should stop after the rounds so far, which criterion, and why (one line)."""

    stop: bool
    criterion: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoundRecord:
    """One optimize-round as recorded in ``rounds/NNNN.yaml``.

    ``change``: ``{"kind": "tunables", "set": {name: value}, "config": {all tunables}}`` for a bundled
    kernel, or ``{"kind": "code", "commit": sha, "diff_stat": text}`` for own code.
    ``gate``: ``{"passed": bool, "exit_code": int, "failed_stage": str | None, "summary": str}``.
    ``timing``: None on a red gate; else ``{"cases": [per shape case: {"case", "baseline", "best",
    "candidate" (bench.Timing dicts, ms), "vs_baseline", "vs_best" (comparison dicts, ``ratio`` =
    candidate / reference time), "samples_ms"}], "ratio_vs_baseline", "ratio_vs_best" (geomeans),
    "vs_best", "vs_baseline" (faster|same|slower over all cases)}``. Over a shape mix the cases are its timed
    buckets and ``weighted`` holds ``{"vs_baseline", "vs_best"}`` (``judge.weighted.WeightedVerdict.to_dict``),
    ``buckets`` and ``buckets_vs_best`` (the per-bucket tables); ``vs_*`` and ``ratio_vs_*`` are then the weighted
    ones (``rounds.timing.apply_weighted``).
    ``metrics``: the re-profile diff per hot kernel (``analysis.compare`` output, trimmed).
    Own code's ``change`` also has ``tree_digest`` (``rounds.tree.TreeState.digest``: the measured
    working tree's content) and ``committed`` (whether that tree is exactly ``commit``); its ``timing``
    has ``best``: ``{"round", "commit"}`` of the state timed as the best (round None: the baseline), or
    with ``"unverified": why`` when no commit holds it (then the cases' ``best`` and ``vs_best`` and
    ``ratio_vs_best`` are None and ``vs_best`` is "inconclusive").
    A timing re-checked for an implausible ratio (``rounds.timing._rechecked``) also has ``first`` (and
    ``second`` after a third measurement), ``recheck`` (one line), ``recheck_outcome`` (reproduced | decided |
    not-reproduced) and ``recheck_measured``; ``implausible``: ``{"cases", "accepted", "by", "at",
    "ignored_code"}`` (own code: ``{path: token}`` of the code files git ignores, as accepted).
    """

    number: int
    hypothesis: str
    direction: str  # the axis this round moves along: the tunables ("BLOCK_D"), a name ("tiling") or "code"
    change: dict[str, Any]
    gate: dict[str, Any]
    verdict: str
    stop: StopDecision
    environment: str
    created_at: str = ""
    timing: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)  # the printed round summary, as data
    ub: dict[str, Any] | None = None
    target_metric: str | None = None
    floor: FloorEvidence | None = None
    profiles: list[str] = field(default_factory=list)  # folders of this round's re-profile (one per group)
    profiles_before: list[str] = field(default_factory=list)  # the best-so-far profile it was compared with
    command: str = ""
    # ``integrity.digest`` of the contract this round was recorded under ("": recorded before rounds
    # carried it); rounds of another contract are not this contract's ledger (``belongs_to``)
    contract_digest: str = ""
    notes: list[str] = field(default_factory=list)  # the warnings printed while the round ran
    # why the verdict is what it is, one line (``rounds.decide.decide``); "": recorded before rounds carried
    # it (``why`` derives one from the record then)
    reason: str = ""
    # sha256 of the record's own content (``record_digest``), written by ``save_round``; "": recorded
    # before rounds carried it. The gate's integrity stage recomputes it (a hand edit is exit 3).
    digest: str = ""

    def __post_init__(self) -> None:
        where = f"rounds/{self.number:04d}.yaml" if isinstance(self.number, int) else "round"
        if not isinstance(self.number, int) or self.number < 1:
            raise ContractError(f"{where}: number: must be an integer >= 1, found {self.number!r}")
        if self.verdict not in VERDICTS:
            raise ContractError(f"{where}: verdict: must be one of {'|'.join(VERDICTS)}, found {self.verdict!r}")
        if not str(self.hypothesis).strip():
            raise ContractError(f"{where}: hypothesis: must not be empty")
        if "passed" not in self.gate:
            raise ContractError(f"{where}: gate -> passed: missing")
        if self.verdict == "drop" and self.gate["passed"]:
            raise ContractError(f"{where}: verdict: drop needs a red gate (gate -> passed is true)")
        if self.verdict != "drop" and not self.gate["passed"]:
            raise ContractError(f"{where}: verdict: {self.verdict} on a red gate; a red gate is always drop")
        if self.verdict != "drop" and self.timing is None:
            raise ContractError(f"{where}: timing: missing for a {self.verdict} round")
        if self.timing is not None and not (isinstance(self.timing, dict) and self.timing.get("cases")):
            raise ContractError(f"{where}: timing -> cases: missing or empty")
        if self.verdict == "floor" and self.floor is None:
            raise ContractError(f"{where}: floor: a floor verdict needs the floor evidence")

    # -- YAML ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = self.stop.to_dict()
        d["floor"] = self.floor.to_dict() if self.floor else None
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "round") -> RoundRecord:
        body = {k: v for k, v in data.items() if k != "schema"}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(body) - known)
        if unknown:
            raise ContractError(f"{where}: unknown field {unknown[0]!r}")
        for name in ("number", "hypothesis", "direction", "change", "gate", "verdict", "stop", "environment"):
            if name not in body:
                raise ContractError(f"{where}: {name}: missing")
        for name in ("change", "gate", "stop"):
            if not isinstance(body[name], dict):
                raise ContractError(f"{where}: {name}: expected a mapping")
        stop = body["stop"]
        try:
            body["stop"] = StopDecision(bool(stop["stop"]), stop.get("criterion"), str(stop.get("reason", "")))
        except KeyError:
            raise ContractError(f"{where}: stop -> stop: missing") from None
        if body.get("floor") is not None:
            try:
                body["floor"] = FloorEvidence(**body["floor"])
            except TypeError:
                raise ContractError(f"{where}: floor: expected bound, value, limit, unit, detail") from None
        try:
            return cls(**body)
        except ContractError as exc:
            raise ContractError(f"{where}: {str(exc).split(': ', 1)[-1]}") from None

    @property
    def why(self) -> str:
        """The verdict's reason: the recorded one, else (an older record) the summary's or the red gate's."""
        if self.reason:
            return self.reason
        if self.verdict == "drop":
            return f"gate red: {self.gate.get('failed_stage') or 'a stage'}: {self.gate.get('summary') or 'failed'}"
        return (self.summary or {}).get("verdict_reason") or verdict_reason(self.timing) or ""

    @property
    def candidate_ms(self) -> float | None:
        """Candidate median latency in ms, geometric mean over shape cases (None on a red gate)."""
        if not self.timing:
            return None
        return geomean([c["candidate"]["median_ms"] for c in self.timing["cases"]])

    @property
    def ratio_vs_best(self) -> float | None:
        """Candidate / best-so-far time (< 1 is faster), geometric mean over cases; None on a red gate."""
        return self.timing.get("ratio_vs_best") if self.timing else None

    @property
    def speedup_vs_baseline(self) -> float | None:
        """Baseline time / candidate time (> 1 is faster) by ``SPEEDUP_STATISTIC``; None on a red gate."""
        ratio = self.timing.get("ratio_vs_baseline") if self.timing else None
        return 1 / ratio if ratio else None

    @property
    def config(self) -> dict[str, int] | None:
        return self.change.get("config") if self.change.get("kind") == "tunables" else None


# -- verdicts and stop criteria ----------------------------------------------------------------


def verdict(gate_passed: bool, vs_best: str | None, floor: FloorEvidence | None = None,
            implausible: bool = False) -> str:
    """keep | revert | drop | floor from the gate and the interleaved comparison with the best so far
    (``rounds.decide.decide``, the one place the verdict is decided, given only these inputs).

    ``vs_best`` is ``bench.Comparison.verdict`` ("faster" | "same" | "slower" | "inconclusive"), None
    on a red gate. Inconclusive is a revert: neither a gain nor "no gain at a bound" can be claimed.
    ``implausible``: the timing is too good to believe (``bench.implausible_reason``) and no acceptance
    was recorded: a revert, never a keep.
    """
    from ascendopt.rounds.decide import Evidence, Reading, decide

    first = Reading(vs_best or "inconclusive", vs_best or "inconclusive") if gate_passed else None
    return decide(Evidence(gate_passed, first=first, implausible="implausible" if implausible else None,
                           floor=floor.detail if floor else None)).verdict


def inconclusive_why(timing: Mapping[str, Any] | None) -> str | None:
    """Why a timing could not tell (None when it could): own code's best that could not be timed, the
    judge's first doubt about the timing, else the widest noise band of an inconclusive comparison."""
    from ascendopt.judge.bench import DecisionRule

    if not timing or "inconclusive" not in (timing.get("vs_best"), timing.get("vs_baseline")):
        return None
    unverified = (timing.get("best") or {}).get("unverified")
    if unverified:  # own code: the best kept state is in no commit, so it was not timed
        return unverified
    if timing.get("judge"):  # own code: the judge's audit doubted timing that could tell (judge.engine)
        return f"timing is not evidence: {timing['judge'][0]}"
    undecided = [c["vs_best"] for c in timing["cases"] if (c.get("vs_best") or {}).get("verdict") == "inconclusive"] \
        or [c["vs_baseline"] for c in timing["cases"] if c["vs_baseline"]["verdict"] == "inconclusive"]
    band = max((c["threshold_rel"] for c in undecided), default=None)
    return (f"the noise band ±{band:.2%} stayed wider than ±{DecisionRule().max_band:.0%} (quieter device, more "
            "--pairs)" if band is not None else "the noise band stayed too wide (quieter device, more --pairs)")


def verdict_reason(timing: Mapping[str, Any] | None) -> str | None:
    """Why a round was reverted without a verdict on its speed: an implausible timing nobody accepted, why an
    inconclusive comparison with the best so far could not tell, or over a shape mix the weighted verdict's
    reason (``mix_reason``); None when the timing could tell. The round's full reason, for every verdict, is
    ``rounds.decide.decide``'s (older records without one fall back to this)."""
    mix = mix_reason(timing)
    if mix and ((timing or {}).get("weighted") or {}).get("vs_best", {}).get("floors"):
        return mix  # a bucket that broke its floor decides first
    found = (timing or {}).get("implausible")
    if found and not found.get("accepted"):
        return (f"implausible: {found['cases'][0]['case']}: {found['cases'][0]['reason']}; not kept without an "
                "explicit acceptance (optimize-round --accept-implausible REASON, recorded in the round)")
    if mix:
        return mix
    if not timing or timing.get("vs_best") != "inconclusive":
        return None
    why = inconclusive_why(timing)
    if why == (timing.get("best") or {}).get("unverified"):
        return why
    if timing.get("judge"):
        return f"{why}; nothing is kept on it"
    return f"timing inconclusive: {why}; nothing is kept on a measurement that cannot tell"


def mix_reason(timing: Mapping[str, Any] | None) -> str | None:
    """Over a shape mix (``timing["weighted"]``, ``rounds.timing.apply_weighted``), why the round is not a keep
    in the weighted verdict's own words: a bucket that broke its floor (named), a heavy bucket too noisy to tell,
    or the weighted total not faster than the best so far; None for a keep or a round over one shape."""
    weighted = ((timing or {}).get("weighted") or {}).get("vs_best")
    if not weighted:
        return None
    vs_best = timing.get("vs_best")
    if weighted["floors"] and vs_best == "slower":
        # no acceptance of an implausible bucket elsewhere could make the round a keep; a doubt of the judge
        # leaves a slower verdict slower (said)
        doubt = f"; the judge also doubted the timing: {timing['judge'][0]}" if timing.get("judge") else ""
        return f"shape mix: {weighted['reason']}{doubt}"
    if vs_best in ("slower", "same") and not timing.get("judge"):
        return f"shape mix: {weighted['reason']}" + ("" if vs_best == "slower" else
                                                     ": not faster than the best so far beyond the band")
    if vs_best == "inconclusive" and weighted.get("undecided") and not timing.get("judge") \
            and not (timing.get("best") or {}).get("unverified"):
        return f"shape mix: {weighted['reason']}; nothing is kept on a measurement that cannot tell"
    return None


def detect_floor(
    *,
    device_us: float | None,
    latency_us: float | None,
    bytes_moved: int | None,
    hbm_gbs: float | None,
    backend: str,
    bandwidth_fraction: float = BANDWIDTH_FLOOR_FRACTION,
    launch_share: float = LAUNCH_FLOOR_SHARE,
) -> FloorEvidence | None:
    """Evidence that a hardware bound is reached, or None.

    ``device_us``: device time of the target kernels in one call (profile); ``latency_us``: the
    benchmark's median per-call latency; ``bytes_moved``: minimum HBM traffic per call
    (``KernelSpec.cost``); ``hbm_gbs``: the chip's peak (configs/chips.yaml). Bandwidth is taken
    over the whole measured call (launches included), so it never overstates what was achieved.
    The CPU interpreter has neither HBM nor a meaningful launch cost: it never reports a floor.
    """
    if backend == "cpu":
        return None
    if latency_us and bytes_moved and hbm_gbs:
        achieved = bytes_moved / (latency_us * 1e-6) / 1e9
        if achieved >= bandwidth_fraction * hbm_gbs:
            return FloorEvidence(
                "hbm-bandwidth", round(achieved, 1), float(hbm_gbs), "GB/s",
                f"achieved {achieved:.0f} GB/s = {achieved / hbm_gbs:.0%} of the {hbm_gbs:.0f} GB/s peak "
                f"(floor at {bandwidth_fraction:.0%})")
    if device_us and latency_us and device_us <= launch_share * latency_us:
        return FloorEvidence(
            "launch-overhead", round(device_us, 3), round(latency_us, 3), "us",
            f"kernel {device_us:.2f} us of a {latency_us:.2f} us call ({device_us / latency_us:.0%}); "
            f"the rest is launch/dispatch cost (floor at <= {launch_share:.0%})")
    return None


def geomean(values: Sequence[float]) -> float:
    """Equal-weight geometric mean of positive numbers."""
    vals = [float(v) for v in values]
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _trailing_non_keep(records: Sequence[RoundRecord]) -> int:
    n = 0
    for r in reversed(records):
        if r.verdict == "keep":
            break
        n += 1
    return n


def directions_tried(records: Sequence[RoundRecord]) -> list[str]:
    """Distinct directions tried with evidence, in first-tried order.

    The rule: a direction counts once one of its rounds was *measured* (gate green, then timed: keep,
    revert or floor). A dropped round (red gate) applied nothing and timed nothing, so it says nothing
    about whether its direction can make the kernel faster (a typo and a dead end look the same); it is
    left out here, and counted by the stall criterion instead (3 rounds in a row without a keep, drops
    included). ``direction_rounds`` says which rounds were counted and which were not.
    """
    return list(direction_rounds(records)[0])


def direction_rounds(records: Sequence[RoundRecord]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """``(counted, not_counted)``: direction -> its round numbers, for the directions with a measured round
    (``directions_tried``'s rule) and for those whose every round was dropped, each in first-tried order."""
    counted: dict[str, list[int]] = {}
    dropped: dict[str, list[int]] = {}
    for r in records:
        if r.verdict != "drop":
            counted.setdefault(r.direction, []).append(r.number)
    for r in records:
        if r.direction not in counted:
            dropped.setdefault(r.direction, []).append(r.number)
    return counted, dropped


def _rounds_text(groups: Mapping[str, list[int]]) -> str:
    """``{"tiling": [1, 4], "math": [2]}`` -> "tiling: rounds 1, 4; math: round 2"."""
    return "; ".join(f"{name}: round{'s' if len(nums) > 1 else ''} {', '.join(map(str, nums))}"
                     for name, nums in groups.items())


def directions_text(records: Sequence[RoundRecord]) -> str:
    """The directions part of a stop message: which rounds were counted, and which were not and why."""
    counted, dropped = direction_rounds(records)
    text = f"{len(counted)} direction(s) tried with evidence" + (f" ({_rounds_text(counted)})" if counted else "")
    if dropped:
        text += f"; not counted, dropped at a red gate and never measured: {_rounds_text(dropped)}"
    return text


def should_stop(
    records: Sequence[RoundRecord],
    *,
    max_rounds: int | None = None,
    stall_rounds: int = STALL_ROUNDS,
    min_directions: int = MIN_DIRECTIONS,
) -> StopDecision:
    """Apply the stop criteria to the rounds so far (oldest first)."""
    if not records:
        return StopDecision(False, None, "no rounds yet")
    cap = max_rounds or DEFAULT_MAX_ROUNDS
    last = records[-1]
    if last.floor is not None and last.verdict != "drop":
        return StopDecision(True, "floor", f"round {last.number}: {last.floor.bound} floor: {last.floor.detail}")
    if len(records) >= cap:
        return StopDecision(True, "max_rounds", f"{len(records)} rounds reached the iteration cap max_rounds={cap}")
    stalled = _trailing_non_keep(records)
    if stalled >= stall_rounds:
        return StopDecision(True, "stall",
                            f"{stalled} consecutive rounds without a keep (stall after {stall_rounds}): "
                            "re-profile, re-read the rounds for untried axes")
    tried = directions_tried(records)
    if len(tried) >= min_directions and last.verdict != "keep":
        return StopDecision(True, "directions", f"{directions_text(records)}, and the last round brought no gain")
    left = cap - len(records)
    return StopDecision(False, None, f"continue: {stalled} non-keep in a row, {directions_text(records)}; "
                                     f"{left} round(s) left of max_rounds={cap}")


# -- storage -----------------------------------------------------------------------------------


def load_rounds(ws: Workspace) -> list[RoundRecord]:
    """All round records of the workspace, oldest first; a bad file raises naming the file."""
    out = []
    for n in ws.round_numbers():
        path = ws.round_path(n)
        rec = RoundRecord.from_dict(read_yaml(path), where=str(path))
        if rec.number != n:
            raise ContractError(f"{path}: number: {rec.number} does not match the file name")
        out.append(rec)
    return out


def belongs_to(record: RoundRecord, digest: str, frozen_at: str) -> bool:
    """Whether ``record`` is a round of the contract with ``digest`` frozen at ``frozen_at`` (ISO time).

    A round without ``contract_digest`` was recorded before rounds carried it: it is the contract's
    when recorded at or after the freeze (an older one belongs to an earlier contract, e.g. copied
    back from an archive); a time that does not parse gives it the benefit of the doubt.
    """
    if record.contract_digest:
        return record.contract_digest == digest
    try:
        recorded, frozen = _dt.datetime.fromisoformat(record.created_at), _dt.datetime.fromisoformat(frozen_at)
        return recorded >= frozen
    except (TypeError, ValueError):
        return True


def next_number(ws: Workspace) -> int:
    nums = ws.round_numbers()
    return (nums[-1] + 1) if nums else 1


def record_digest(data: Mapping[str, Any]) -> str:
    """sha256 of a round record's content as read from its YAML (``schema`` and ``digest`` left out),
    over canonical JSON (sorted keys), so the same content always gives the same digest."""
    import hashlib
    import json

    body = {k: v for k, v in data.items() if k not in ("schema", "digest")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_round(ws: Workspace, record: RoundRecord) -> Path:
    """Write ``rounds/NNNN.yaml`` atomically with its ``digest``; refuses to overwrite an existing round.
    A caller that does not hold the workspace lock gets it for this write (and its audit log entry)."""
    if ws.held_by_this_process() is None:
        with ws.lock():
            return save_round(ws, record)
    import yaml

    from ascendopt.workspace import dump_yaml

    path = ws.round_path(record.number)
    if path.exists():
        raise ContractError(f"{path}: round {record.number} already recorded; rounds are never rewritten")
    if not record.created_at:
        record = replace(record, created_at=now_iso())
    body = {k: v for k, v in record.to_dict().items() if k != "digest"}
    # digest what a reader will load (the YAML round trip), not the Python objects
    write_yaml(path, {**body, "digest": record_digest(yaml.safe_load(dump_yaml(body)))})
    return path


def tampered_rounds(ws: Workspace) -> list[tuple[str, str]]:
    """``(path, one line)`` for each round file whose content no longer matches its own ``digest``
    (edited by hand); a record without a digest (an older ascendopt) is not judged here."""
    out = []
    for n in ws.round_numbers():
        path = ws.round_path(n)
        try:
            data = read_yaml(path)
        except ContractError as exc:
            out.append((str(path), str(exc)))
            continue
        stored = data.get("digest")
        if stored and stored != record_digest(data):
            out.append((str(path), f"{path}: edited by hand (its content no longer matches its digest)"))
    return out


def best_round(records: Sequence[RoundRecord]) -> RoundRecord | None:
    """The latest keep (the best so far); None while the baseline is still the best."""
    for r in reversed(records):
        if r.verdict == "keep":
            return r
    return None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def environment_line(facts: Mapping[str, Any], cwd: str | Path | None = None) -> str:
    """One line like fla's verify.py machine line: device | backend | versions | branch[sha].

    ``facts`` is ``backends.describe(...)`` output.
    """
    v = facts.get("versions", {}) or {}
    parts = [f"Device: {facts.get('name')} ({facts.get('backend')})"]
    if v.get("cann"):
        parts.append(f"CANN {v['cann']}")
    for mod in ("torch", "torch_npu", "triton"):
        if v.get(mod):
            parts.append(f"{mod} {v[mod]}")
    git = git_head(cwd)
    if git:
        parts.append(git)
    return " | ".join(parts)


def git_head(cwd: str | Path | None = None) -> str | None:
    """``branch[sha12]`` of the git checkout at ``cwd`` (default: the current directory), or None outside git."""
    from ascendopt.process import git

    where = cwd or Path.cwd()
    sha = git("rev-parse", "--short=12", "HEAD", cwd=where)
    if sha is None:
        return None
    return f"{git('rev-parse', '--abbrev-ref', 'HEAD', cwd=where) or ''}[{sha}]"
