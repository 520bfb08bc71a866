"""Step 3 as pure functions: rank kernels by duration share, classify them, diff two reports.

``analyze(profile)`` aggregates the canonical kernel table per (device, name, core type):
count, total and average duration, share of the device's total kernel time (communication tasks
excluded, as op_statistic.csv does), duration-weighted mean metrics, then classifies each listed
kernel with ``rules.classify``. ``compare(before, after)`` diffs two such reports per kernel.
Both return JSON-ready dicts; rendering lives in ``cli/analyze.py``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ascendopt.analyze.matching import name_matcher
from ascendopt.analyze.rules import RuleSet, classify, load_rules
from ascendopt.analyze.traces import Profile
from ascendopt.analyze.traces.columns import NON_COMPUTE_CORE_TYPES
from ascendopt.console import finite_or_none
from ascendopt.errors import UsageError

SCHEMA = 1
KEYS = ["device", "name", "core_type"]
# Canonical columns derived per kernel: max over the two core halves, and UB vector traffic.
DERIVED = {"scalar_ratio": ("cube_scalar_ratio", "vector_scalar_ratio"),
           "mte2_ratio": ("cube_mte2_ratio", "vector_mte2_ratio")}
UB_VECTOR = ("ub_read_bw_vector_gbs", "ub_write_bw_vector_gbs")


def _group_codes(compute):
    """Group id per row for (device, name, core_type), group count, and each group's first row."""
    codes = compute.groupby(KEYS, observed=True, sort=False).ngroup().to_numpy()
    _, first = np.unique(codes, return_index=True)
    return codes, len(first), first


def aggregate(profile: Profile):
    """Per-kernel aggregate of the compute rows -> (frame, device totals Series, communication dict).

    Frame columns: device, name, core_type, op_type, count, total_us, avg_us, share, block_dim,
    block_dim_min, mix_block_dim, then the duration-weighted mean of every metric column.
    Vectorised with one group id per row and ``np.bincount`` per column: no per-row Python and
    no row-by-metric temporaries (a 10^6-row table stays within a few column-sized buffers).
    """
    import pandas as pd

    # Communication rows form groups of their own, dropped at the end: filtering rows first
    # would copy every column of a big table.
    compute = profile.kernels
    is_comm = compute["core_type"].isin(list(NON_COMPUTE_CORE_TYPES)).to_numpy()
    comm = {"count": int(is_comm.sum()), "total_us": float(compute["duration_us"].to_numpy()[is_comm].sum())}
    codes, n, first = _group_codes(compute)
    dur = compute["duration_us"].to_numpy(float)
    agg = compute.iloc[first][KEYS + ["op_type"]].reset_index(drop=True)
    for col in ("device", "name", "core_type", "op_type"):
        agg[col] = agg[col].astype(str)
    agg["count"] = np.bincount(codes, minlength=n).astype(float)
    agg["total_us"] = np.bincount(codes, weights=dur, minlength=n)
    sum_sq = np.bincount(codes, weights=dur * dur, minlength=n)  # for the launch-to-launch spread (std_us)
    blocks = pd.DataFrame({"block_dim": compute["block_dim"].to_numpy(float),
                           "mix_block_dim": compute["mix_block_dim"].to_numpy(float)}).groupby(codes)
    agg["block_dim"] = blocks["block_dim"].max().reindex(range(n)).to_numpy()
    agg["block_dim_min"] = blocks["block_dim"].min().reindex(range(n)).to_numpy()
    agg["mix_block_dim"] = blocks["mix_block_dim"].max().reindex(range(n)).to_numpy()
    for col in profile.metric_columns:
        if col not in compute.columns:
            continue
        values = compute[col].to_numpy(float)
        present = ~np.isnan(values)
        if not present.any():
            agg[col] = np.nan
            continue
        filled = np.where(present, values, 0.0)
        num = np.bincount(codes, weights=filled * dur, minlength=n)
        den = np.bincount(codes, weights=np.where(present, dur, 0.0), minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = num / den
            if (den == 0).any():  # a kernel whose durations are all 0 still has metrics: plain mean
                plain = np.bincount(codes, weights=filled, minlength=n) / np.bincount(codes, weights=present,
                                                                                       minlength=n)
                mean = np.where(den > 0, mean, plain)
        agg[col] = mean
    for name, (a, b) in DERIVED.items():
        if a in agg.columns or b in agg.columns:
            agg[name] = np.fmax(agg.get(a, np.nan), agg.get(b, np.nan))
    if all(c in agg.columns for c in UB_VECTOR):
        agg["ub_bw_vector_gbs"] = agg[UB_VECTOR[0]] + agg[UB_VECTOR[1]]
    # op_statistic.csv leaves communication out of its Ratio(%); shares here do the same
    agg = agg[~agg["core_type"].isin(NON_COMPUTE_CORE_TYPES)]
    totals = agg.groupby("device")["total_us"].sum()
    agg["avg_us"] = agg["total_us"] / agg["count"]
    # sample standard deviation of one kernel's launch durations (NaN below 2 launches): how much a
    # before/after difference of avg_us can be noise
    with np.errstate(invalid="ignore", divide="ignore"):
        count = agg["count"].to_numpy(float)
        var = (sum_sq[agg.index.to_numpy()] - count * agg["avg_us"].to_numpy(float) ** 2) / (count - 1)
    agg["std_us"] = np.where(count > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
    agg["share"] = agg["total_us"] / agg["device"].map(totals).astype(float)
    agg = agg.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return agg, totals, comm


def match_filter(names: list[str], op_types: list[str], pattern: str) -> np.ndarray:
    """Boolean mask of kernels whose name or op type matches ``pattern``.

    Plain text is a substring test; ``regex:EXPR`` a regular-expression search (like Nsight
    Compute's ``-k regex:``). A bad regex is a UsageError.
    """
    matches = name_matcher(pattern)
    return np.array([matches(n) or matches(t) for n, t in zip(names, op_types, strict=True)], dtype=bool)


def _no_match(pattern: str, names: list[str], path: Any) -> UsageError:
    needle = pattern.removeprefix("regex:")
    unique = list(dict.fromkeys(names))
    close = difflib.get_close_matches(needle, unique, n=5, cutoff=0.3)
    if not close:  # short needles against long names: rank by similarity anyway
        close = sorted(unique, key=lambda n: -difflib.SequenceMatcher(None, needle, n).ratio())[:5]
    return UsageError(f"--kernel-filter {pattern!r} matches no kernel in {path}; closest names: {', '.join(close)}",
                      hint="use a substring of a name above, or regex:EXPR")


def _kernel_entry(row: Mapping[str, Any], metric_cols: list[str], profile: Profile, rules: RuleSet) -> dict[str, Any]:
    metrics = {c: finite_or_none(row.get(c)) for c in metric_cols}
    kernel = {"core_type": row["core_type"], "avg_us": float(row["avg_us"]),
              "block_dim": finite_or_none(row["block_dim"]), "metrics": metrics}
    result = classify(kernel, kind=profile.kind, device=profile.device, rules=rules)
    primary = rules.rule(result.bound)
    return {
        "name": str(row["name"]),
        "device": str(row["device"]),
        "core_type": str(row["core_type"]),
        "op_type": str(row["op_type"]),
        "count": int(row["count"]),
        "total_us": float(row["total_us"]),
        "avg_us": float(row["avg_us"]),
        "std_us": finite_or_none(row.get("std_us")),  # launch-to-launch spread; None below 2 launches
        "share": float(row["share"]),
        "block_dim": finite_or_none(row["block_dim"]),
        "block_dim_min": finite_or_none(row["block_dim_min"]),
        "mix_block_dim": finite_or_none(row["mix_block_dim"]),
        "bound": result.bound,
        "bound_label": primary.label,
        "evidence": result.evidence,
        "findings": [f.to_dict() for f in result.findings],
        "metrics": metrics,
        "levers": result.levers,
    }


def _op_types(profile: Profile, agg, limit: int = 15) -> list[dict[str, Any]]:
    """Ranking per op type: op_statistic.csv when the profile has it, else from the kernel table."""
    stats = profile.op_statistic
    if stats is not None and len(stats):
        s = stats.sort_values("total_us", ascending=False).head(limit)
        return [{"op_type": str(r["op_type"]), "core_type": str(r.get("core_type")),
                 "count": finite_or_none(r.get("count")), "total_us": finite_or_none(r["total_us"]),
                 "share": finite_or_none(r.get("ratio_pct", float("nan")) / 100.0), "source": "op_statistic.csv"}
                for _, r in s.iterrows()]
    g = agg.groupby(["op_type", "core_type"], observed=True, sort=False)[["count", "total_us", "share"]].sum()
    g = g.sort_values("total_us", ascending=False).head(limit).reset_index()
    return [{"op_type": str(r["op_type"]), "core_type": str(r["core_type"]), "count": int(r["count"]),
             "total_us": float(r["total_us"]), "share": float(r["share"]), "source": "kernel table"}
            for _, r in g.iterrows()]


def _fallback_finding(agg, mask, rules: RuleSet) -> list[dict[str, Any]]:
    """Profile-level "unfused / fallback" finding for a filtered target (seed diagnosis table)."""
    share_thr, count_thr = rules.thresholds["fallback_target_share"], rules.thresholds["fallback_min_small_kernels"]
    short = rules.thresholds["short_kernel_us"]
    target_share = float(agg.loc[mask, "total_us"].sum() / agg["total_us"].sum()) if agg["total_us"].sum() else 0.0
    small = int(((~mask) & (agg["avg_us"] < short.value)).sum())
    if target_share >= share_thr.value or small < count_thr.value:
        return []
    rule = rules.rule("fallback_unfused")
    ev = [{"column": "target_share", "value": round(target_share, 6), "op": "<", "threshold": share_thr.value,
           "threshold_name": share_thr.name, "origin": share_thr.origin},
          {"column": "small_kernels", "value": small, "op": ">=", "threshold": count_thr.value,
           "threshold_name": count_thr.name, "origin": count_thr.origin}]
    return [{"class": rule.name, "label": rule.label, "evidence": ev, "levers": list(rule.levers)}]


def analyze(profile: Profile, *, kernel_filter: str | None = None, top: int | None = None,
            rules: RuleSet | None = None) -> dict[str, Any]:
    """The analysis report of issue 3 (JSON shape ``schema: 1``), kernels sorted by total_us descending.

    ``kernel_filter``: substring of a kernel name or op type, or ``regex:EXPR``; matching nothing
    raises UsageError naming the closest kernels. ``top``: keep the N kernels with most time.
    """
    rules = rules or load_rules()
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: must be at least 1")
    agg, totals, comm = aggregate(profile)
    names = agg["name"].astype(str).tolist()
    profile_findings: list[dict[str, Any]] = []
    selected = agg
    if kernel_filter:
        mask = match_filter(names, agg["op_type"].astype(str).tolist(), kernel_filter)
        if not mask.any():
            raise _no_match(kernel_filter, names, profile.path)
        selected = agg[mask]
        profile_findings = _fallback_finding(agg, mask, rules)
    if top is not None:
        selected = selected.head(top)
    metric_cols = [c for c in agg.columns if c not in
                   ("device", "name", "core_type", "op_type", "count", "total_us", "avg_us", "std_us", "share",
                    "block_dim", "block_dim_min", "mix_block_dim")]
    kernels = [_kernel_entry(row, metric_cols, profile, rules) for row in selected.to_dict("records")]
    return {
        "schema": SCHEMA,
        "profile": str(profile.path),
        "kind": profile.kind,
        "runs": [str(p) for p in profile.runs],
        "device": profile.device,
        "metric_groups": list(profile.metric_groups),
        "not_collected": list(profile.not_collected),
        "notes": list(profile.notes),
        "kernel_filter": kernel_filter,
        "total_us": {str(k): float(v) for k, v in totals.items()},
        "communication": comm,
        "kernel_count": len(agg),
        "kernels": kernels,
        "op_types": _op_types(profile, agg),
        "findings": profile_findings,
    }


def _key(k: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(k.get("device")), str(k.get("name")), str(k.get("core_type")))


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def compare(report_a: Mapping[str, Any], report_b: Mapping[str, Any]) -> dict[str, Any]:
    """Per-kernel diff of two ``analyze`` reports: ``a`` = before (baseline), ``b`` = after.

    For each kernel in both: count / total / average / share before and after, ``avg_us_delta``
    (after - before, us), ``avg_us_ratio`` (after / before), the bound before and after, and for
    every metric collected on both sides ``{"a", "b", "delta"}``. Metrics collected on one side
    only are listed under ``not_comparable`` (never compared with 0).
    """
    ka = {_key(k): k for k in report_a.get("kernels", [])}
    kb = {_key(k): k for k in report_b.get("kernels", [])}
    pairs = {key: key for key in ka if key in kb}
    # a Level0 profile has no core types: pair the rest by (device, name) when that is unambiguous
    loose_b: dict[tuple[str, str], list] = {}
    for key in kb:
        if key not in pairs.values():
            loose_b.setdefault(key[:2], []).append(key)
    for key in ka:
        if key not in pairs and len(loose_b.get(key[:2], [])) == 1:
            pairs[key] = loose_b[key[:2]][0]
    rows = []
    for key, a in ka.items():
        if key not in pairs:
            continue
        b = kb[pairs[key]]
        metrics, one_sided = {}, []
        for col in sorted(set(a.get("metrics") or {}) | set(b.get("metrics") or {})):
            va, vb = (a.get("metrics") or {}).get(col), (b.get("metrics") or {}).get(col)
            if va is None and vb is None:
                continue
            if va is None or vb is None:
                one_sided.append(col)
                continue
            metrics[col] = {"a": va, "b": vb, "delta": vb - va}
        rows.append({
            "name": a["name"], "device": a.get("device"), "core_type": a.get("core_type"),
            "a": {k: a.get(k) for k in ("count", "total_us", "avg_us", "share", "bound", "block_dim")},
            "b": {k: b.get(k) for k in ("count", "total_us", "avg_us", "share", "bound", "block_dim")},
            "avg_us_delta": b["avg_us"] - a["avg_us"],
            "avg_us_ratio": _ratio(a["avg_us"], b["avg_us"]),
            "total_us_delta": b["total_us"] - a["total_us"],
            "share_delta": b["share"] - a["share"],
            "bound_a": a.get("bound"), "bound_b": b.get("bound"),
            "metrics": metrics, "not_comparable": one_sided,
        })
    return {
        "schema": SCHEMA,
        "a": report_a.get("profile"), "b": report_b.get("profile"),
        "metric_groups_a": report_a.get("metric_groups"), "metric_groups_b": report_b.get("metric_groups"),
        "kernels": rows,
        "only_in_a": [k["name"] for key, k in ka.items() if key not in pairs],
        "only_in_b": [k["name"] for key, k in kb.items() if key not in set(pairs.values())],
    }
