"""Step 3 as pure functions: rank kernels by duration share, classify them, diff two reports.

``analyze(profile)`` aggregates the canonical kernel table per (device, name, core type):
count, total and average duration, share of the device's total kernel time (communication tasks
excluded, as op_statistic.csv does, and collectives on any core with them), duration-weighted mean
metrics, then classifies each listed kernel with ``rules.classify``, per launch group (block dims) and
per input shape, and adds the profile-wide checks of ``analyze.checks`` (AI CPU operators, dynamic
shape, host gaps). ``compare(before, after)`` diffs two such reports per kernel.
Both return JSON-ready dicts; rendering lives in ``cli/analyze.py``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ascendopt.analyze import checks
from ascendopt.analyze.matching import name_matcher
from ascendopt.analyze.rules import VECTOR_PIPE_SUM, RuleSet, classify, kernel_kind, load_rules
from ascendopt.analyze.traces import Profile
from ascendopt.analyze.traces.columns import CONTEXT_COLUMNS as CONTEXT
from ascendopt.analyze.traces.columns import NON_COMPUTE_CORE_TYPES
from ascendopt.console import finite_or_none
from ascendopt.errors import UsageError

SCHEMA = 1
KEYS = ["device", "name", "core_type"]
BY = ("name", "shape")  # `analyze --by`: one row per kernel name, or per kernel name and input shapes
# Bytes moved to / from device memory: data volumes (MemoryAccess; msprof op's Memory.csv) first, else the
# Memory group's bandwidth columns times the duration. Canonical units: KB = 1024 B, GB/s with GB = 2**30 B.
VOLUME_KB = ("cube_read_main_memory_kb", "cube_write_main_memory_kb", "vector_read_main_memory_kb",
             "vector_write_main_memory_kb", "read_main_memory_kb", "write_main_memory_kb")
MAIN_MEMORY_BW = ("cube_main_mem_read_bw_gbs", "cube_main_mem_write_bw_gbs", "vector_main_mem_read_bw_gbs",
                  "vector_main_mem_write_bw_gbs")
NOT_METRICS = ("device", "name", "core_type", "op_type", "code", "count", "total_us", "avg_us", "std_us", "share",
               "block_dim", "block_dim_min", "mix_block_dim", "shape_count", "moved_bytes", "achieved_bw_gbs",
               "achieved_bw_source", *CONTEXT)
# Canonical columns derived per kernel: max over the two core halves, and UB vector traffic.
DERIVED = {"scalar_ratio": ("cube_scalar_ratio", "vector_scalar_ratio"),
           "mte2_ratio": ("cube_mte2_ratio", "vector_mte2_ratio")}
UB_VECTOR = ("ub_read_bw_vector_gbs", "ub_write_bw_vector_gbs")


def _group_codes(compute, keys):
    """Group id per row for ``keys`` (missing values form their own group), group count, each group's first row.

    Ids are numbered in order of first appearance (as pandas' ``groupby(sort=False).ngroup()`` numbers them),
    from the keys' category codes: one hash pass per key, no groupby.
    """
    import pandas as pd

    codes = np.zeros(len(compute), dtype=np.int64)
    for key in keys:
        column = compute[key]
        if isinstance(column.dtype, pd.CategoricalDtype):
            part, width = column.cat.codes.to_numpy().astype(np.int64), len(column.cat.categories)
        else:
            part, uniques = pd.factorize(column)
            width = len(uniques)
        # renumbered after each key, so the combined id stays below the row count (no overflow)
        codes, _ = pd.factorize(codes * (width + 1) + part + 1)  # + 1: a missing value (-1) is a group too
    codes = codes.astype(np.int64)
    if not len(codes):
        return codes, 0, np.zeros(0, dtype=np.int64)
    # ids count up in order of appearance: a row opens a group where its id exceeds every id before it
    before = np.maximum.accumulate(np.concatenate(([-1], codes[:-1])))
    first = np.flatnonzero(codes > before)
    return codes, len(first), first


def _weighted_means(frame, codes, n: int, dur, columns) -> dict[str, np.ndarray]:
    """Duration-weighted mean per group of every column in ``columns`` (NaN cells left out).

    A group whose durations are all 0 still has metrics: it takes the plain mean.
    The per-group weight sums depend only on which cells are present; columns present in the same rows (every
    column of one core half after ``blank_other_side``) share them instead of summing them again.
    """
    out: dict[str, np.ndarray] = {}
    weights: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]] = []  # (present rows, den, cells) per mask

    def sums(present):
        """(duration sum, present-cell count) per group over the ``present`` rows (None: every row)."""
        for mask, den, cells in weights:
            if (mask is None and present is None) or (
                    mask is not None and present is not None and np.array_equal(mask, present)):
                return den, cells
        if present is None:
            den, cells = np.bincount(codes, weights=dur, minlength=n), np.bincount(codes, minlength=n)
        else:
            den = np.bincount(codes, weights=np.where(present, dur, 0.0), minlength=n)
            cells = np.bincount(codes, weights=present, minlength=n)
        weights.append((present, den, cells))
        return den, cells

    for col in columns:
        if col not in frame.columns:
            continue
        values = frame[col].to_numpy(float)
        missing = np.isnan(values)
        if missing.all():
            out[col] = np.full(n, np.nan)
            continue
        present = ~missing if missing.any() else None
        filled = values if present is None else np.where(present, values, 0.0)
        num = np.bincount(codes, weights=filled * dur, minlength=n)
        den, cells = sums(present)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = num / den
            if (den == 0).any():
                plain = np.bincount(codes, weights=filled, minlength=n) / cells
                mean = np.where(den > 0, mean, plain)
        out[col] = mean
    return out


def _add_derived(means: dict[str, np.ndarray], n: int) -> None:
    """Derived metric columns (in place, on a column -> per-group array dict): max of the two core halves,
    UB vector traffic, and the vector side's vec + MTE2 + MTE3 sum (msprof-analyze's combined-pipe total)."""
    for name, (a, b) in DERIVED.items():
        if a in means or b in means:
            means[name] = np.fmax(means.get(a, np.full(n, np.nan)), means.get(b, np.full(n, np.nan)))
    if all(c in means for c in UB_VECTOR):
        means["ub_bw_vector_gbs"] = means[UB_VECTOR[0]] + means[UB_VECTOR[1]]
    parts = [means[c] for c in VECTOR_PIPE_SUM if c in means]
    if parts:
        values = np.column_stack(parts)
        with np.errstate(invalid="ignore"):
            means["vector_pipe_sum_ratio"] = np.where(np.isnan(values).all(axis=1), np.nan, np.nansum(values, axis=1))

def communication_mask(names, op_types, core_types, rules: RuleSet) -> np.ndarray:
    """True where a task is communication: its core type says so, or its name / op type is a collective
    (``rules.communication``), whatever core it ran on (AI_CPU ``allreduce`` tasks included)."""
    names, op_types = np.asarray(names, dtype=object), np.asarray(op_types, dtype=object)
    by_core = np.isin(np.asarray(core_types, dtype=object), list(NON_COMPUTE_CORE_TYPES))
    pattern = rules.communication
    named = np.array([bool(pattern.search(str(a)) or pattern.search(str(b))) for a, b in zip(names, op_types,
                                                                                        strict=True)], dtype=bool)
    return by_core | named


def _moved_bytes(compute, dur):
    """Bytes each row moved to / from device memory and where that came from, or (None, None)."""
    volumes = [c for c in VOLUME_KB if c in compute.columns]
    if volumes:
        kb = compute[volumes].to_numpy(float)
        present = ~np.isnan(kb).all(axis=1)
        return np.where(present, np.nansum(kb, axis=1) * 1024.0, np.nan), "data volumes (" + ", ".join(volumes) + ")"
    rates = [c for c in MAIN_MEMORY_BW if c in compute.columns]
    if rates:
        gbs = compute[rates].to_numpy(float)
        present = ~np.isnan(gbs).all(axis=1)
        moved = np.nansum(gbs, axis=1) * 2.0**30 * dur * 1e-6
        return np.where(present, moved, np.nan), "Memory group bandwidth x duration (" + ", ".join(rates) + ")"
    return None, None


def _distinct_per_group(codes, n, values) -> np.ndarray:
    """How many distinct categorical ``values`` (missing counted as one) each group holds."""
    cat = values.astype("category")
    vcodes = cat.cat.codes.to_numpy().astype(np.int64) + 1
    pairs = np.unique(codes.astype(np.int64) * (len(cat.cat.categories) + 1) + vcodes)
    return np.bincount(pairs // (len(cat.cat.categories) + 1), minlength=n)


def aggregate(profile: Profile, rules: RuleSet | None = None, by: str = "name"):
    """Per-kernel aggregate of the compute rows -> (frame, device totals Series, communication dict).

    See ``_aggregate``; this form drops the per-row group ids.
    """
    agg, totals, comm, _, _ = _aggregate(profile, rules or load_rules(), by)
    return agg, totals, comm


def _aggregate(profile: Profile, rules: RuleSet, by: str = "name"):
    """Per-kernel aggregate -> (frame, device totals Series, communication dict, per-row group ids,
    per-row communication mask).

    One row per (device, name, core_type), or per (device, name, core_type, input_shapes) with
    ``by="shape"`` when the table has shapes. Frame columns: device, name, core_type, op_type, the context
    columns of ``CONTEXT`` the table has (first launch), code (the group id), shape_count (distinct input
    shapes), count, total_us, avg_us, share, block_dim, block_dim_min, mix_block_dim, moved_bytes /
    achieved_bw_gbs (device memory traffic over the kernel's total time, GB = 2**30 B) where the Memory
    counters allow, then the duration-weighted mean of every metric column.
    Vectorised with one group id per row and ``np.bincount`` per column: no per-row Python and
    no row-by-metric temporaries (a 10^6-row table stays within a few column-sized buffers).
    Communication (by core type, or by a collective's name on any core) is left out of the frame and
    the totals and summed in the communication dict: ``count``, ``total_us``, ``by_core`` (core type ->
    us) and ``kernels`` (the largest communication tasks by name).
    """
    import pandas as pd

    # Communication rows form groups of their own, dropped at the end: filtering rows first
    # would copy every column of a big table.
    compute = profile.kernels
    keys = KEYS + (["input_shapes"] if by == "shape" and "input_shapes" in compute.columns else [])
    codes, n, first = _group_codes(compute, keys)
    dur = compute["duration_us"].to_numpy(float)
    context = [c for c in CONTEXT if c in compute.columns]
    agg = compute.iloc[first][KEYS + ["op_type"] + context].reset_index(drop=True)
    for col in ("device", "name", "core_type", "op_type"):
        agg[col] = agg[col].astype(str)
    agg["code"] = np.arange(n)
    for col in context:  # one value per kernel (not per row): a missing cell becomes None, never NaN
        agg[col] = pd.Series([None if pd.isna(v) else str(v) for v in agg[col].tolist()], index=agg.index,
                             dtype=object)
    if "input_shapes" in compute.columns:
        agg["shape_count"] = _distinct_per_group(codes, n, compute["input_shapes"])
    agg["count"] = np.bincount(codes, minlength=n).astype(float)
    agg["total_us"] = np.bincount(codes, weights=dur, minlength=n)
    sum_sq = np.bincount(codes, weights=dur * dur, minlength=n)  # for the launch-to-launch spread (std_us)
    moved, moved_source = _moved_bytes(compute, dur)
    if moved is not None:
        has = ~np.isnan(moved)
        agg["moved_bytes"] = np.where(np.bincount(codes, weights=has, minlength=n) > 0,
                                      np.bincount(codes, weights=np.where(has, moved, 0.0), minlength=n), np.nan)
        timed = np.bincount(codes, weights=np.where(has, dur, 0.0), minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            agg["achieved_bw_gbs"] = np.where(timed > 0, agg["moved_bytes"] / (timed * 1e-6) / 2.0**30, np.nan)
        agg["achieved_bw_source"] = moved_source
    blocks = pd.DataFrame({"block_dim": compute["block_dim"].to_numpy(float),
                           "mix_block_dim": compute["mix_block_dim"].to_numpy(float)}).groupby(codes)
    agg["block_dim"] = blocks["block_dim"].max().reindex(range(n)).to_numpy()
    agg["block_dim_min"] = blocks["block_dim"].min().reindex(range(n)).to_numpy()
    agg["mix_block_dim"] = blocks["mix_block_dim"].max().reindex(range(n)).to_numpy()
    means = _weighted_means(compute, codes, n, dur, profile.metric_columns)
    _add_derived(means, n)
    if means:  # joined in one step: column-by-column inserts fragment a wide frame
        agg = pd.concat([agg, pd.DataFrame(means, index=agg.index)], axis=1)
    is_comm = communication_mask(agg["name"], agg["op_type"], agg["core_type"], rules)
    comm_groups = agg[is_comm]
    by_core = comm_groups.groupby("core_type")["total_us"].sum()
    by_name = comm_groups.groupby("name")["total_us"].sum().sort_values(ascending=False).head(5)
    comm = {"count": int(comm_groups["count"].sum()), "total_us": float(comm_groups["total_us"].sum()),
            "by_core": {str(k): float(v) for k, v in by_core.items()},
            "kernels": [{"name": str(k), "total_us": float(v)} for k, v in by_name.items()],
            "rule": {"pattern": rules.communication.pattern, "origin": rules.communication_origin}}
    # op_statistic.csv leaves communication out of its Ratio(%); shares here do the same
    agg = agg[~is_comm].copy()
    totals = agg.groupby("device")["total_us"].sum()
    agg["avg_us"] = agg["total_us"] / agg["count"]
    # sample standard deviation of one kernel's launch durations (NaN below 2 launches): how much a
    # before/after difference of avg_us can be noise
    with np.errstate(invalid="ignore", divide="ignore"):
        count = agg["count"].to_numpy(float)
        var = (sum_sq[agg["code"].to_numpy(int)] - count * agg["avg_us"].to_numpy(float) ** 2) / (count - 1)
    agg["std_us"] = np.where(count > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
    device_total = agg["device"].map(totals).astype(float).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):  # a device whose kernels all took 0 us: shares 0
        agg["share"] = np.where(device_total > 0, agg["total_us"].to_numpy() / device_total, 0.0)
    agg = agg.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return agg, totals, comm, codes, is_comm[codes]


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


def _classify_shapes(kernel: dict[str, Any], shapes: list[dict[str, Any]], profile: Profile,
                     rules: RuleSet) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-shape verdicts of one kernel and the shape_bound evidence (shapes bound while the mean is not)."""
    out, bound_ev = [], []
    # "bound" here means saturated: a shape whose pipe only leads (below its bound) is not a bound shape
    kernel_pipe = kernel["saturated"] is True or kernel["bound"] == "compute_memory_tie"
    for shape in shapes:
        metrics = {**shape["metrics"]}
        shape_kernel = {"name": kernel["name"], "op_type": kernel["op_type"], "core_type": kernel["core_type"],
                        "avg_us": shape["avg_us"], "metrics": metrics, "launch_groups": [{"block_dim": None}]}
        result = classify(shape_kernel, kind=profile.kind, device={}, rules=rules)
        pipe = [f for f in result.findings if f.cls == result.bound and f.evidence]
        entry = {k: shape[k] for k in ("input_shapes", "input_dtypes", "count", "total_us", "avg_us")}
        entry.update({"bound": result.bound, "bound_label": result.label or rules.rule(result.bound).label,
                      "saturated": result.saturated, "evidence": [e for f in pipe for e in f.evidence]})
        affinity = checks.shape_affinity(result.kind, shape["input_shapes"], rules) if result.kind else None
        if affinity:
            entry["affinity"] = affinity
        out.append(entry)
        is_pipe = result.saturated is True or result.bound == "compute_memory_tie"
        if is_pipe and not kernel_pipe:
            first = entry["evidence"][0] if entry["evidence"] else {}
            bound_ev.append({"column": "input_shapes", "value": entry["input_shapes"], "op": "bound",
                             "threshold": first.get("threshold"), "threshold_name": first.get("threshold_name", ""),
                             "origin": first.get("origin", ""), "launches": entry["count"],
                             "text": f"shape {entry['input_shapes']} ({entry['count']} "
                                     f"launch{'es' if entry['count'] != 1 else ''}, "
                                     f"{entry['total_us']:.1f} us) is {entry['bound_label']}: "
                                     f"{first.get('text', '')}; the kernel's mean is {kernel['bound_label']}"})
    return out, bound_ev


def _kernel_entry(row: Mapping[str, Any], metric_cols: list[str], profile: Profile, rules: RuleSet,
                  groups: list[dict[str, Any]] | None = None,
                  shapes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    metrics = {c: finite_or_none(row.get(c)) for c in metric_cols}
    kernel = {"name": str(row["name"]), "op_type": str(row["op_type"]), "core_type": row["core_type"],
              "avg_us": float(row["avg_us"]), "block_dim": finite_or_none(row["block_dim"]),
              "mix_block_dim": finite_or_none(row["mix_block_dim"]), "metrics": metrics}
    if groups:
        kernel["launch_groups"] = groups
    result = classify(kernel, kind=profile.kind, device=profile.device, rules=rules)
    primary = rules.rule(result.bound)
    entry = {
        "name": str(row["name"]),
        "device": str(row["device"]),
        "core_type": str(row["core_type"]),
        "op_type": str(row["op_type"]),
        "kind": result.kind.to_dict() if result.kind else None,
        "count": int(row["count"]),
        "total_us": float(row["total_us"]),
        "avg_us": float(row["avg_us"]),
        "std_us": finite_or_none(row.get("std_us")),  # launch-to-launch spread; None below 2 launches
        "share": float(row["share"]),
        "block_dim": finite_or_none(row["block_dim"]),
        "block_dim_min": finite_or_none(row["block_dim_min"]),
        "mix_block_dim": finite_or_none(row["mix_block_dim"]),
        "launch_groups": groups or [],
        "bound": result.bound,
        "bound_label": result.label or primary.label,
        # which pipe dominates, and separately whether it reaches its saturation bound (rules.dominant_pipe)
        "saturated": result.saturated,
        "dominant_pipe": result.dominant,
        "evidence": result.evidence,
        "findings": [f.to_dict() for f in result.findings],
        "metrics": metrics,
        "levers": result.levers,
        "shapes": [],
        "affinity": [],
        **_context_fields(row, profile.device),
    }
    if shapes:
        # one shape: the kernel's own verdict is the shape's; its affinity still counts
        entry["shapes"], bound_ev = _classify_shapes(entry, shapes, profile, rules)
        entry["affinity"] = [s["affinity"] for s in entry["shapes"] if s.get("affinity")]
        if len(shapes) == 1:
            entry["shapes"], bound_ev = [], []
        if bound_ev:
            rule = rules.rule("shape_bound")
            entry["findings"].append({"class": rule.name, "label": rule.label, "evidence": bound_ev,
                                      "levers": [lv.text for lv in rule.levers],
                                      "lever_origins": [lv.origin for lv in rule.levers]})
            entry["levers"] = list(dict.fromkeys(entry["levers"] + [lv.text for lv in rule.levers]))
    return entry


def _context_fields(row: Mapping[str, Any], device: Mapping[str, Any]) -> dict[str, Any]:
    """Per-kernel context of issue 21: task type as the file says it, shapes / dtypes / op state of the first
    launch, distinct shapes, the AI_CPU flag, and achieved device-memory bandwidth against the chip's peak."""
    out: dict[str, Any] = {c: row.get(c) for c in CONTEXT}
    count = row.get("shape_count")
    out["shape_count"] = int(count) if count is not None and count == count else None
    out["ai_cpu"] = str(row.get("core_type")) == "ai_cpu"
    achieved = finite_or_none(row.get("achieved_bw_gbs"))
    peak = device.get("hbm_gbs")
    out["achieved_bw_gbs"] = achieved
    out["achieved_bw_source"] = row.get("achieved_bw_source") if achieved is not None else None
    # chips.yaml peaks are decimal GB/s (data sheets); achieved is GB = 2**30 B: compare in bytes per second
    out["hbm_peak_gbs"] = peak
    out["hbm_peak_ratio"] = achieved * 2.0**30 / (float(peak) * 1e9) if achieved is not None and peak else None
    return out


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
    return [{"class": rule.name, "label": rule.label, "evidence": ev, "levers": [lv.text for lv in rule.levers],
             "lever_origins": [lv.origin for lv in rule.levers]}]


def profiled_calls(profile: Profile) -> int | None:
    """How many calls of the workload the profile covers: its distinct step ids (one profiler step per
    call); where the table records none, the calls ascendopt's profiler schedule recorded; else None. A
    kernel's per-launch average depends on how many launches a call makes (512 short ones or 1 long one),
    so what a call costs is total / calls."""
    frame = profile.kernels
    steps = int(frame["step"].dropna().nunique()) if "step" in frame.columns else 0
    return steps or profile.scheduled_calls


def analyze(profile: Profile, *, kernel_filter: str | None = None, top: int | None = None,
            rules: RuleSet | None = None, by: str = "name") -> dict[str, Any]:
    """The analysis report of issue 3 (JSON shape ``schema: 1``), kernels sorted by total_us descending.

    Per kernel: ``kind`` (core / family / maker), ``launch_groups``, ``shapes`` (per-shape verdicts when it
    ran with several input shapes), ``affinity`` (shape-affinity warnings), ``findings`` with evidence
    sentences and lever origins. Profile-wide: ``communication`` (``by_core``, ``kernels``), ``ai_cpu``,
    ``dynamic_shape`` (None without an OP State column) and ``host_gaps`` (None without start times).

    ``kernel_filter``: substring of a kernel name or op type, or ``regex:EXPR``; matching nothing
    raises UsageError naming the closest kernels. ``top``: keep the N kernels with most time.
    ``by``: ``name`` (one entry per kernel) or ``shape`` (one per kernel and input shapes, where the table
    records shapes; otherwise a note says so and entries stay per name).
    """
    rules = rules or load_rules()
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: must be at least 1")
    if by not in BY:
        raise UsageError(f"--by {by!r}: expected one of {', '.join(BY)}")
    notes = list(profile.notes)
    kernels_table = profile.kernels
    if by == "shape" and ("input_shapes" not in kernels_table.columns or kernels_table["input_shapes"].isna().all()):
        notes.append("--by shape: this profile records no input shapes (torch_npu records them with "
                     "record_shapes=True; Triton kernels write N/A); one entry per kernel name")
    agg, totals, comm, codes, comm_rows = _aggregate(profile, rules, by)
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
    metric_cols = [c for c in agg.columns if c not in NOT_METRICS]
    wanted = selected["code"].astype(int).tolist()
    groups = checks.launch_groups(profile.kernels, codes, wanted)
    shapes = checks.shape_groups(profile.kernels, codes, wanted, profile.metric_columns, _shape_means)
    kernels = [_kernel_entry(row, metric_cols, profile, rules, groups.get(int(row["code"])),
                             shapes.get(int(row["code"]))) for row in selected.to_dict("records")]
    if by == "shape":
        for k in kernels:
            k["shape_key"] = k["input_shapes"]  # part of the compare key: same name, other shapes = other entry

    def maker_of(name: str, op_type: str) -> str:
        return kernel_kind(name, op_type, "", rules).maker

    return {
        "schema": SCHEMA,
        "profile": str(profile.path),
        "kind": profile.kind,
        "runs": [str(p) for p in profile.runs],
        "files": [str(p) for p in (profile.files or [profile.path])],  # what the readers read, kernel table first
        "op_info": profile.op_info,  # msprof op: OpBasicInfo.csv / summary.jsonl, else None
        "device": profile.device,
        "metric_groups": list(profile.metric_groups),
        "not_collected": list(profile.not_collected),
        "notes": notes,
        "kernel_filter": kernel_filter,
        "by": by,
        "total_us": {str(k): float(v) for k, v in totals.items()},
        "communication": comm,
        "kernel_count": len(agg),
        "profiled_calls": profiled_calls(profile),
        "kernels": kernels,
        "op_types": _op_types(profile, agg),
        "findings": profile_findings,
        "ai_cpu": checks.ai_cpu_operators(agg, {str(k): float(v) for k, v in totals.items()}, rules),
        "dynamic_shape": checks.dynamic_shape(profile.kernels, comm_rows, maker_of),
        "host_gaps": checks.host_gaps(profile.kernels, comm_rows, rules),
    }


def _shape_means(frame, codes, n, dur, columns):
    """Per-shape means: the aggregate's weighted means plus its derived columns (combined-pipe sum, ...)."""
    means = _weighted_means(frame, codes, n, dur, columns)
    _add_derived(means, n)
    return means


def _key(k: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    return (str(k.get("device")), str(k.get("name")), str(k.get("core_type")), k.get("shape_key"))


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
            "shape_key": a.get("shape_key"),
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
