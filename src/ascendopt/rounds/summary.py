"""The round summary (fla's Ascend template) as data; ``cli.render.render_round_summary`` prints it.

Template (docs/practice.md §10): target kernel device time per call and launches per call, before -> after; pipe
ratios Cube/MAC, Vector, scalar, MTE1, MTE2, MTE3; UB bandwidth when a MemoryUB run was collected;
whether another round is warranted (stop criteria). ascendopt adds the bench verdict (never on a
red gate), the UB use of the candidate's tiles and whether the metric the hypothesis targeted moved.

Inputs are ``analysis.analyze`` reports (``{"kernels": [{"name", "avg_us", "bound", "evidence",
"findings": [{"class", "evidence": [{"column", "value", "op", "threshold", "threshold_name"}]}],
"metrics": {canonical column: value | None}}], "not_collected": [...]}``). A metric that was not
collected is ``None`` and printed as "not collected", never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ascendopt.analyze.matching import matches_any

# The summary's rows, (label, canonical columns in preference order): defined with the other metric
# labels in ``analyze.traces.columns``.
from ascendopt.analyze.traces.columns import SUMMARY_METRICS
from ascendopt.judge.bench import DecisionRule

# Rows of metric groups that are often not collected: shown only when collected on either side.
_OPTIONAL_ROWS = frozenset(label for label, _ in SUMMARY_METRICS if "GB/s" in label or "(ncu)" in label)

# Bottleneck class (rules.yaml id, Ascend and CUDA) -> the metric a round against it should move.
# Scalar and MTE2 use analysis' max over both core halves (the half a kernel does not use reads 0).
# Classes without a dominant pipe are judged on duration.
CLASS_METRIC: dict[str, str] = {
    "cube_bound": "mac_ratio", "vector_bound": "vec_ratio", "scalar_bound": "scalar_ratio",
    "mte2_bound": "mte2_ratio", "mte3_bound": "mte3_ratio", "mte1_fixpipe_bound": "mte1_ratio",
    "ub_bandwidth_bound": "ub_bw_vector_gbs",
    "tensor_bound": "mac_ratio", "simt_bound": "vec_ratio", "memory_bound": "dram_ratio",
    "latency_bound": "duration_us", "no_dominant_pipe": "duration_us", "no_counters": "duration_us",
    # issue 21: the advisor's vec + MTE2 + MTE3 sum; a compute / memory tie has no single pipe to move
    "memory_combined_bound": "vector_pipe_sum_ratio", "compute_memory_tie": "duration_us",
}
# Hypothesis keywords -> metric. Checked before the class so an explicit word wins.
_WORD_METRIC = (("mte1", "mte1_ratio"), ("mte2", "mte2_ratio"), ("mte3", "mte3_ratio"),
                ("scalar", "scalar_ratio"), ("ub bandwidth", "ub_bw_vector_gbs"), ("vector", "vec_ratio"),
                ("vec", "vec_ratio"), ("cube", "mac_ratio"), ("mac", "mac_ratio"), ("dram", "dram_ratio"))

MOVED_REL = 0.05  # a relative change of 5 % is beyond run-to-run profiler noise on one kernel
MOVED_ABS_RATIO = 0.03  # pipe ratios near 0 move in absolute terms: 3 points of the core's cycles


def target_kernel(report: Mapping[str, Any] | None, names: Sequence[str]) -> dict[str, Any] | None:
    """The hottest kernel of ``report`` whose name contains one of ``names`` (else the hottest)."""
    if not report or not report.get("kernels"):
        return None
    kernels = report["kernels"]
    for k in kernels:  # analysis ranks kernels by total time
        if matches_any(str(k.get("name", "")), names):
            return k
    return kernels[0]


def _metric(kernel: Mapping[str, Any] | None, columns: Sequence[str]) -> tuple[str | None, float | None]:
    if not kernel:
        return None, None
    metrics = kernel.get("metrics") or {}
    for col in columns:
        value = metrics.get(col)
        if isinstance(value, Mapping):  # tolerate {"value": x, ...} cells
            value = value.get("value")
        if value is not None:
            return col, float(value)
    return None, None


def _duration(kernel: Mapping[str, Any] | None) -> float | None:
    if not kernel:
        return None
    for key in ("avg_us", "duration_us"):
        if kernel.get(key) is not None:
            return float(kernel[key])
    return None


def per_call(kernel: Mapping[str, Any] | None, report: Mapping[str, Any] | None) -> dict[str, Any]:
    """What one call of the workload costs in ``kernel``: its device time per call (``device_us``) and its
    launches per call (``launches``), over the ``calls`` the profile covers (analyze's ``profiled_calls``).

    A per-launch average reads 217 us, then 15.94 ms for code that fuses 512 launches into 1: per call,
    the same work compares with itself. None where the kernel or the profile's call count is unknown."""
    calls = (report or {}).get("profiled_calls")
    total, count = (kernel or {}).get("total_us"), (kernel or {}).get("count")
    if not calls or total is None or count is None:
        return {"device_us": None, "launches": None, "calls": calls or None}
    return {"device_us": float(total) / calls, "launches": float(count) / calls, "calls": int(calls)}


def resolve_target_metric(explicit: str | None, hypothesis: str, bound: str | None) -> str:
    """The metric the round aims to move: ``--target-metric``, else a hypothesis keyword, else the class."""
    if explicit:
        for label, cols in SUMMARY_METRICS:
            if explicit.lower() in (label.lower(), *cols):
                return cols[0]
        return explicit
    text = hypothesis.lower()
    for word, col in _WORD_METRIC:
        if word in text:
            return col
    return CLASS_METRIC.get(bound or "", "duration_us")


def moved(before: float | None, after: float | None, column: str) -> bool | None:
    """True/False if the change is/is not beyond noise; None if either side was not collected."""
    if before is None or after is None:
        return None
    if column.endswith("_ratio") and abs(after - before) >= MOVED_ABS_RATIO:
        return True
    base = abs(before) if before else 0.0
    return abs(after - before) > MOVED_REL * base if base else after != before


NOISE_Z = DecisionRule.z  # the noise band of a duration difference: two-sided 99.9 %, the timing rule's
MIN_LAUNCHES = 3  # fewer profiled launches per side give no usable estimate of their spread


def judge_target(before: float | None, after: float | None, column: str, *, kind: str | None,
                 kernel_before: Mapping[str, Any] | None = None,
                 kernel_after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """How the targeted metric moved: direction (``up``/``down``/``same``), by how much (``change_abs`` in
    the metric's unit, ``change_rel`` a fraction of before), and whether that is beyond noise (``moved``:
    True/False, None when it cannot be judged; ``judgement`` says which and why).

    ``kind``: the profile kind (``analysis["kind"]``); on ``cpu`` the hardware counters do not exist and
    the durations are the interpreter's host time, so nothing is judged. A duration is judged against the
    launch-to-launch spread of the profiled launches on both sides (``std_us``, ``count``): beyond
    ``NOISE_Z`` standard errors of the difference, with at least ``MIN_LAUNCHES`` launches per side. A
    counter is a mean over the launches whose spread is not recorded, so it is judged against fixed
    thresholds (``MOVED_REL``, ``MOVED_ABS_RATIO``) and says so.
    """
    out: dict[str, Any] = {"direction": None, "change_abs": None, "change_rel": None, "noise_abs": None,
                           "launches": {"before": (kernel_before or {}).get("count"),
                                        "after": (kernel_after or {}).get("count")}}
    if before is None or after is None:
        return {**out, "moved": None, "judgement": "not collected on one or both sides"}
    delta = after - before
    out.update(direction="up" if delta > 0 else "down" if delta < 0 else "same", change_abs=delta,
               change_rel=delta / abs(before) if before else None)
    if kind == "cpu":
        return {**out, "moved": None,
                "judgement": "not judged: the CPU interpreter has no hardware counters, and its durations are "
                             "host time of the interpreter (the timed verdict is the speed line)"}
    launches = out["launches"]
    if column == "duration_us":
        stds = ((kernel_before or {}).get("std_us"), (kernel_after or {}).get("std_us"))
        counts = (launches["before"] or 0, launches["after"] or 0)
        if min(counts) < MIN_LAUNCHES or None in stds:
            return {**out, "moved": None,
                    "judgement": f"not judged: {counts[0]} and {counts[1]} profiled launch(es), too few to know "
                                 f"their noise (profile more steps, e.g. collect --active 5)"}
        noise = NOISE_Z * math.sqrt(stds[0] ** 2 / counts[0] + stds[1] ** 2 / counts[1])
        out["noise_abs"] = noise
        where = "beyond" if abs(delta) > noise else "within"
        return {**out, "moved": abs(delta) > noise,
                "judgement": f"{where} the noise of {counts[0]} and {counts[1]} profiled launches "
                             f"(±{noise:.2f} us)"}
    changed = moved(before, after, column)
    rule = (f"{MOVED_REL:.0%} relative or {MOVED_ABS_RATIO:g} absolute" if column.endswith("_ratio")
            else f"{MOVED_REL:.0%} relative")
    return {**out, "moved": changed,
            "judgement": f"{'beyond' if changed else 'within'} a fixed threshold of {rule} (a mean over the "
                         "profiled launches; their counter spread is not recorded)"}


def _column_group(column: str) -> tuple[str, ...]:
    """``column`` first, then the other columns of its summary row (the same quantity in another view)."""
    for _label, cols in SUMMARY_METRICS:
        if column in cols:
            return (column, *(c for c in cols if c != column))
    return (column,)


def build(
    *,
    kernel_names: Sequence[str],
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    verdict: str,
    another_round: bool,
    stop_reason: str,
    target_metric: str,
    ub: Mapping[str, Any] | None = None,
    speed: Mapping[str, Any] | None = None,
    verdict_reason: str | None = None,
) -> dict[str, Any]:
    """The round summary as a plain dict (stored in the round record, printed by
    ``cli.render.render_round_summary``).

    ``speed``: ``{"ratio_vs_best", "ratio_vs_baseline", "candidate_ms"}``, None on a red gate.
    ``verdict_reason``: why the verdict is not what the speed suggests (``records.verdict_reason``:
    an inconclusive timing), else None.
    """
    kb, ka = target_kernel(before, kernel_names), target_kernel(after, kernel_names)
    call_b, call_a = per_call(kb, before), per_call(ka, after)
    rows = []
    kind = (after or before or {}).get("kind")
    # on cpu no hardware counter exists to request: rows of counters would only read "not collected"
    for label, cols in ([] if kind == "cpu" else SUMMARY_METRICS):
        col_b, vb = _metric(kb, cols)
        col_a, va = _metric(ka, cols)
        if vb is None and va is None and label in _OPTIONAL_ROWS:
            continue
        rows.append({"label": label, "column": col_a or col_b or cols[0], "before": vb, "after": va})
    if target_metric == "duration_us":
        t_before, t_after = _duration(kb), _duration(ka)
    else:
        t_before, t_after = _metric(kb, _column_group(target_metric))[1], _metric(ka, _column_group(target_metric))[1]
    return {
        "target_kernel": (ka or kb or {}).get("name"),
        "duration_us": {"before": _duration(kb), "after": _duration(ka)},  # per launch: records before issue 41
        # what the table prints: per call of the workload, so that a change of launches per call cannot mislead
        "per_call": {key: {"before": call_b[key], "after": call_a[key]} for key in ("device_us", "launches", "calls")},
        "metrics": rows,
        "bound": (ka or kb or {}).get("bound"),
        "bound_before": (kb or {}).get("bound"),
        "bound_evidence": bound_evidence(ka or kb),
        "not_collected": sorted(set((after or before or {}).get("not_collected") or [])),
        "target_metric": {"name": target_metric, "before": t_before, "after": t_after,
                          **judge_target(t_before, t_after, target_metric, kind=kind,
                                         kernel_before=kb, kernel_after=ka)},
        "ub": dict(ub) if ub else None,
        "speed": dict(speed) if speed else None,
        "verdict": verdict,
        "verdict_reason": verdict_reason,
        "another_round": another_round,
        "stop_reason": stop_reason,
    }


def bound_evidence(kernel: Mapping[str, Any] | None) -> str | None:
    """The checks that put ``kernel`` in its class, e.g. ``"vec_ratio 0.912 >= 0.7 (vec_bound)"``.

    From analyze's ``findings`` (the finding of the kernel's ``bound`` class carries column, value,
    op, threshold and threshold name); a kernel without findings falls back to its ``evidence``
    ``{column: value}``. None when the class rests on no numbers (no counters collected).
    """
    if not kernel:
        return None
    bound = kernel.get("bound")
    own = [f for f in kernel.get("findings") or [] if isinstance(f, Mapping) and f.get("class") == bound]
    details = [e for f in own for e in f.get("evidence") or []]
    return _evidence_text(details) or _evidence_text(kernel.get("evidence"))


def _number(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _evidence_text(evidence: Any) -> str | None:
    """Text of analyze evidence: a ``{column: value}`` mapping or a list of finding checks
    (``{"column", "value", "op", "threshold", "threshold_name"}``)."""
    if not evidence:
        return None
    if isinstance(evidence, str):
        return evidence
    if isinstance(evidence, Mapping) and "column" not in evidence:  # analyze's {column: value}
        return "; ".join(f"{k} {_number(v)}" for k, v in evidence.items())
    parts = []
    for e in evidence if isinstance(evidence, list) else [evidence]:
        if not isinstance(e, Mapping):
            parts.append(str(e))
            continue
        if e.get("column") is None or e.get("value") is None:
            continue  # a check without a reading says nothing
        text = f"{e['column']} {_number(e['value'])}"
        if e.get("threshold") is not None:
            text += f" {e.get('op', '>=')} {_number(e['threshold'])}"
            if e.get("threshold_name"):
                text += f" ({e['threshold_name']})"
        parts.append(text)
    return "; ".join(parts) or None

