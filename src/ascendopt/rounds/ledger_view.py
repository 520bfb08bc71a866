"""All rounds of the ledger side by side, as data (``ascendopt status --rounds`` prints it as a table).

One row per recorded round, in order: what changed, the gate, the candidate's time, its speedups against
the baseline and the best so far (both re-timed interleaved in that round), the widest noise band of its
cases, the verdict and, over a shape mix, the per-bucket table. Times in ms per call; a speedup is reference
time / candidate time (> 1 is faster); a noise band is relative (0.015 = ±1.5 %) on the time ratio.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ascendopt.rounds.records import RoundRecord


def _speedup(ratio: float | None) -> float | None:
    return 1.0 / ratio if ratio else None


def round_row(record: RoundRecord) -> dict[str, Any]:
    """One round's row (``side_by_side``)."""
    timing = record.timing or {}
    cases = timing.get("cases") or []
    bands = [c["vs_baseline"]["threshold_rel"] for c in cases
             if (c.get("vs_baseline") or {}).get("threshold_rel") is not None]
    change = record.change or {}
    return {
        "number": record.number,
        "direction": record.direction,
        "hypothesis": record.hypothesis,
        "change": change.get("set") if change.get("kind") == "tunables" else change.get("commit"),
        "gate": "pass" if record.gate.get("passed") else "fail",
        "failed_stage": record.gate.get("failed_stage"),
        "candidate_ms": record.candidate_ms,
        "speedup_vs_baseline": _speedup(timing.get("ratio_vs_baseline")),
        "speedup_vs_best": _speedup(timing.get("ratio_vs_best")),
        "vs_baseline": timing.get("vs_baseline"),
        "vs_best": timing.get("vs_best"),
        "noise_band": max(bands) if bands else None,
        "verdict": record.verdict,
        "reason": record.why,  # why the verdict is what it is (issue 41: never a bare revert or drop)
        "accepted": accepted_implausible(record),
        "created_at": record.created_at,
        # over a shape mix: the per-bucket table against the baseline (``rounds.timing.weigh_round``); [] otherwise
        "buckets": list((timing.get("weighted") or {}).get("buckets") or []),
    }


def accepted_implausible(record: RoundRecord) -> dict[str, Any] | None:
    """The implausible result a person accepted in ``record`` (``--accept-implausible``): ``{"reason", "by",
    "at", "finding"}``, None when the round accepted none. ``by``/``at`` are None in a record of an older
    ascendopt (it kept the reason only)."""
    found = (record.timing or {}).get("implausible") or {}
    if not found.get("accepted"):
        return None
    first = (found.get("cases") or [{}])[0]
    return {"reason": found["accepted"], "by": found.get("by"), "at": found.get("at") or record.created_at or None,
            "finding": f"{first.get('case')}: {first.get('reason')}"}


def side_by_side(records: Iterable[RoundRecord]) -> list[dict[str, Any]]:
    """Every round of ``records`` as a row (``round_row``), in round order."""
    return [round_row(r) for r in sorted(records, key=lambda r: r.number)]
