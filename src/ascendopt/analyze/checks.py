"""Checks beyond one kernel's pipe class (issue 21, 5b), as pure functions over the canonical kernel table.

* ``launch_groups`` / ``shape_groups``: the launches of one aggregated kernel split by block dim (core-use is
  judged per group) and by input shape (a shape can be bound while the kernel's mean is not);
* ``shape_affinity``: matmul inner axes divisible by 256, attention head dim and sequence by 128
  (msprof-analyze AICorePerformanceChecker);
* ``ai_cpu_operators``: AI CPU tasks, their share of device kernel time and those >= 20 us (AicpuChecker);
* ``dynamic_shape``: launches whose ``OP State`` says dynamic, only when the file has that column;
* ``host_gaps``: runs of short consecutive kernels with the device idle between them (row order and start
  times), msprof-analyze's fusible-sequence "host bound" reading.

Every threshold comes from ``configs/rules.yaml`` with its origin; results are JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ascendopt.analyze.rules import KernelKind, RuleSet
from ascendopt.console import finite_or_none

SHAPE_COLUMN = "input_shapes"


def _threshold(rules: RuleSet, name: str) -> dict[str, Any]:
    thr = rules.thresholds[name]
    return {"threshold": thr.value, "threshold_name": thr.name, "origin": thr.origin}


def launch_groups(kernels, codes: np.ndarray, wanted: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Launch groups of the kernels ``wanted`` (group ids of ``codes``): ``{code: [{"block_dim",
    "mix_block_dim", "count"}]}``, most launches first. NaN block dims stay None."""
    import pandas as pd

    wanted = set(int(c) for c in wanted)
    rows = np.isin(codes, list(wanted))
    frame = pd.DataFrame({"code": codes[rows], "block_dim": kernels["block_dim"].to_numpy(float)[rows],
                          "mix_block_dim": kernels["mix_block_dim"].to_numpy(float)[rows]})
    counts = frame.groupby(["code", "block_dim", "mix_block_dim"], dropna=False).size().reset_index(name="count")
    counts = counts.sort_values(["code", "count"], ascending=[True, False], kind="stable")
    out: dict[int, list[dict[str, Any]]] = {c: [] for c in wanted}
    for code, blocks, mix, count in counts.itertuples(index=False):
        out[int(code)].append({"block_dim": finite_or_none(blocks), "mix_block_dim": finite_or_none(mix),
                               "count": int(count)})
    return out


def shape_groups(kernels, codes: np.ndarray, wanted: Iterable[int], metric_columns: list[str],
                 means) -> dict[int, list[dict[str, Any]]]:
    """Per-shape aggregates of the kernels ``wanted``: ``{code: [{"input_shapes", "input_dtypes", "count",
    "total_us", "avg_us", "metrics"}]}`` (most time first; one entry for a kernel launched with one shape).
    ``means(frame, codes, n, dur, columns)`` is the duration-weighted mean of the aggregate. Empty when the
    table has no input-shape column."""
    import pandas as pd

    if SHAPE_COLUMN not in kernels.columns:
        return {}
    wanted = set(int(c) for c in wanted)
    rows = np.flatnonzero(np.isin(codes, list(wanted)))
    if not len(rows):
        return {}
    part = kernels.iloc[rows]
    shape_codes, shape_values = _text_codes(part[SHAPE_COLUMN])
    frame = pd.DataFrame({"code": codes[rows], "shape": shape_codes})
    sub = frame.groupby(["code", "shape"], sort=False).ngroup().to_numpy()
    n = int(sub.max()) + 1
    dur = part["duration_us"].to_numpy(float)
    _, first = np.unique(sub, return_index=True)
    dtype_codes, dtype_values = (_text_codes(part["input_dtypes"]) if "input_dtypes" in part.columns
                                 else (np.full(len(part), -1), []))
    count = np.bincount(sub, minlength=n)
    total = np.bincount(sub, weights=dur, minlength=n)
    metric_means = means(part, sub, n, dur, metric_columns)
    out: dict[int, list[dict[str, Any]]] = {}
    for g, row in enumerate(first):
        code = int(frame["code"].iat[row])
        shape, dtype = shape_codes[row], dtype_codes[row]
        out.setdefault(code, []).append({
            "input_shapes": _unquote(shape_values[shape]) if shape >= 0 else "",
            "input_dtypes": _unquote(dtype_values[dtype]) if dtype >= 0 else "",
            "count": int(count[g]), "total_us": float(total[g]), "avg_us": float(total[g] / count[g]),
            "metrics": {c: finite_or_none(v[g]) for c, v in metric_means.items()},
        })
    for groups in out.values():
        groups.sort(key=lambda s: -s["total_us"])
    return out


def _unquote(text: str) -> str:
    """torch_npu writes shape cells with literal quotes (``"32,3,224,224"``); keep the content."""
    return text.strip().strip('"').strip()


def parse_shapes(text: str) -> list[list[int]] | None:
    """``"8,128;128,256"`` -> [[8, 128], [128, 256]]; empty slots give []; None when a dim is not a number."""
    text = _unquote(text)
    if not text or text.upper() == "N/A":
        return None
    out = []
    for tensor in text.split(";"):
        tensor = tensor.strip()
        if not tensor:
            out.append([])
            continue
        try:
            out.append([int(d) for d in tensor.split(",")])
        except ValueError:
            return None
    return out


def shape_affinity(kind: KernelKind, input_shapes: str, rules: RuleSet) -> dict[str, Any] | None:
    """An affinity warning for one (matmul or attention) shape, or None when aligned / not applicable.

    Matmul (ND, two 2-D inputs or more): the last axis of the first two inputs divisible by
    ``matmul_axis_align``. Attention: the first input's head dim (last axis; for a 3-D BSH / SBH / TND
    input the last axis) and sequence (axis -2 for 4-D BNSD, axis 0 for 3-D) divisible by
    ``attention_axis_align``. ascendopt's reading of the layouts; the advisor also derives D from the
    head count of the output shape where it has one.
    """
    tensors = parse_shapes(input_shapes)
    if tensors is None:
        return None
    if kind.family == "matmul":
        if len(tensors) < 2 or len(tensors[0]) < 2 or len(tensors[1]) < 2:
            return None
        align = rules.thresholds["matmul_axis_align"]
        axes = {"first input's inner axis": tensors[0][-1], "second input's inner axis": tensors[1][-1]}
    elif kind.family == "attention":
        q = tensors[0] if tensors else []
        if len(q) not in (3, 4):
            return None
        align = rules.thresholds["attention_axis_align"]
        axes = {"head dim": q[-1], "sequence": q[-2] if len(q) == 4 else q[0]}
    else:
        return None
    bad = {what: dim for what, dim in axes.items() if dim % int(align.value)}
    if not bad:
        return None
    text = ", ".join(f"{what} {dim}" for what, dim in bad.items())
    return {"input_shapes": _unquote(input_shapes), "unaligned": bad, **_threshold(rules, align.name),
            "text": f"{text} not divisible by {align.value:g}"}


def ai_cpu_operators(agg, totals: Mapping[str, float], rules: RuleSet) -> dict[str, Any]:
    """AI CPU tasks (not communication): count (= launches), kernels, names, time, share of device kernel time,
    those >= aicpu_long_us."""
    cpu = agg[agg["core_type"] == "ai_cpu"]
    total = float(sum(totals.values())) if totals else 0.0
    long_thr = rules.thresholds["aicpu_long_us"]
    cpu_long = cpu[cpu["avg_us"] >= long_thr.value].sort_values("total_us", ascending=False)
    return {
        "count": int(cpu["count"].sum()), "launches": int(cpu["count"].sum()), "kernels": len(cpu),
        "names": cpu["name"].astype(str).tolist()[:20], "total_us": float(cpu["total_us"].sum()),
        "share": float(cpu["total_us"].sum() / total) if total else 0.0,
        "long": [{"name": str(r["name"]), "op_type": str(r["op_type"]), "count": int(r["count"]),
                  "avg_us": float(r["avg_us"]), "total_us": float(r["total_us"])} for _, r in cpu_long.iterrows()],
        "long_rule": _threshold(rules, long_thr.name),
        "lever": "replace AI CPU operators by AI Core ones: avoid the dtype / op that falls back (e.g. double, int64 "
                 "casts) or move the op off the device loop",
        "lever_origin": "msprof-analyze aicpu_rules.yaml ('Modify code to avoid aicpu operator')",
    }


def _text_codes(column) -> tuple[np.ndarray, list[str]]:
    """(codes, distinct values) of a text column; -1 codes for missing cells. No per-row Python."""
    import pandas as pd

    cat = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
    return cat.cat.codes.to_numpy(), [str(v) for v in cat.cat.categories]


def dynamic_shape(kernels, comm_rows: np.ndarray, maker_of) -> dict[str, Any] | None:
    """Launches whose ``op_state`` is dynamic; None when the file has no OP State column (the advisor
    reports "all dynamic" on such files: not copied). Triton-style kernels are dynamic by design
    (docs/profiler-formats.md §8) and are counted apart. ``maker_of(name, op_type)`` -> vendor | triton | unknown.
    """
    if "op_state" not in kernels.columns:
        return None
    codes, values = _text_codes(kernels["op_state"])
    states = np.array([v.strip().lower() for v in values] + [""], dtype=object)
    state = states[np.where(codes < 0, len(values), codes)]
    known = ((state == "dynamic") | (state == "static")) & ~comm_rows
    dynamic = known & (state == "dynamic")
    import pandas as pd

    name_codes, names = _text_codes(kernels["name"])
    op_codes, ops = _text_codes(kernels["op_type"])
    names, ops = names + [""], ops + [""]  # code -1 (a missing cell) -> ""
    name_codes = np.where(name_codes < 0, len(names) - 1, name_codes)
    op_codes = np.where(op_codes < 0, len(ops) - 1, op_codes)
    pair = name_codes.astype(np.int64) * len(ops) + op_codes  # one id per (name, op type); hashed, not sorted
    triton_ids = [int(p) for p in pd.unique(pair[dynamic])
                  if maker_of(names[p // len(ops)], ops[p % len(ops)]) == "triton"]
    triton = dynamic & np.isin(pair, triton_ids)
    vendor_dynamic = dynamic & ~triton
    return {
        "launches": int(known.sum()), "dynamic": int(dynamic.sum()), "triton_dynamic": int(triton.sum()),
        "vendor_dynamic": int(vendor_dynamic.sum()),
        "share": float(dynamic.sum() / known.sum()) if known.sum() else 0.0,
        "lever": "vendor ops compiled per shape at run time: torch_npu.npu.set_compile_mode(jit_compile=False) "
                 "(binary kernels), and fixed / bucketed shapes" if vendor_dynamic.any() else None,
        "lever_origin": "msprof-analyze dynamic-shape advice (set_compile_mode(jit_compile=False))",
    }


def host_gaps(kernels, comm_rows: np.ndarray, rules: RuleSet, *, limit: int = 5) -> dict[str, Any] | None:
    """Fusion / host-gap view from row order and start times, per device.

    Idle time is the time no task (compute or communication) runs, between the first start and the last
    end. A run is >= ``fusion_min_kernels`` consecutive compute kernels, each shorter than
    ``short_kernel_us`` (communication and AI CPU tasks end a run, as in msprof-analyze's fusible-operator
    check); it is host-bound when its kernel time is below ``host_bound_busy_fraction`` of its wall time
    (first start to last end): the device idles between launches. Returns the idle time and the ``limit``
    host-bound runs with the most idle time; None without start times. ``first_row`` / ``last_row`` are
    0-based positions in the kernel table (file order).
    """
    if "start_us" not in kernels.columns or kernels["start_us"].isna().all():
        return None
    short = rules.thresholds["short_kernel_us"].value
    min_run = int(rules.thresholds["fusion_min_kernels"].value)
    busy_thr = rules.thresholds["host_bound_busy_fraction"]
    device_codes, device_names = _text_codes(kernels["device"])
    start_all = kernels["start_us"].to_numpy(float)
    dur_all = kernels["duration_us"].to_numpy(float)
    name_codes, names = _text_codes(kernels["name"])
    core_codes, cores = _text_codes(kernels["core_type"])
    breaks_all = comm_rows | (core_codes == (cores.index("ai_cpu") if "ai_cpu" in cores else -2))
    runs: list[dict[str, Any]] = []
    idle_total = span_total = 0.0
    for code, dev in enumerate(device_names):
        rows = np.flatnonzero((device_codes == code) & np.isfinite(start_all) & np.isfinite(dur_all))
        if len(rows) < 2:
            continue
        rows = rows[np.argsort(start_all[rows], kind="stable")]
        start, dur = start_all[rows], dur_all[rows]
        end = start + dur
        gaps = np.clip(start[1:] - np.maximum.accumulate(end)[:-1], 0.0, None)
        idle_total += float(gaps.sum())
        span_total += float(end.max() - start.min())
        is_short = ((dur < short) & ~breaks_all[rows]).astype(np.int8)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], is_short, [0]))))
        firsts, stops = edges[0::2], edges[1::2]  # each run of short kernels: [first, stop)
        keep = stops - firsts >= min_run
        firsts, stops = firsts[keep], stops[keep]
        if not len(firsts):
            continue
        busy = np.array([dur[a:b].sum() for a, b in zip(firsts, stops, strict=True)])
        wall = np.array([end[a:b].max() - start[a] for a, b in zip(firsts, stops, strict=True)])
        idle = np.array([gaps[a:b - 1].sum() for a, b in zip(firsts, stops, strict=True)])
        with np.errstate(invalid="ignore", divide="ignore"):
            host = (wall > 0) & (busy / wall < busy_thr.value)
        for a, b, bu, wa, idl in zip(firsts[host], stops[host], busy[host], wall[host], idle[host], strict=True):
            runs.append({"device": str(dev), "first_row": int(rows[a]), "last_row": int(rows[b - 1]),
                         "kernels": int(b - a), "busy_us": float(bu), "wall_us": float(wa), "idle_us": float(idl),
                         "busy_fraction": float(bu / wa),
                         "names": [names[c] for c in dict.fromkeys(name_codes[rows[a:b]].tolist())][:6]})
    runs.sort(key=lambda r: -r["idle_us"])
    return {
        "idle_us": idle_total, "span_us": span_total,
        "idle_share": idle_total / span_total if span_total else 0.0,
        "host_bound_runs": len(runs), "host_bound_idle_us": float(sum(r["idle_us"] for r in runs)),
        "runs": runs[:limit],
        "rule": {"short_kernel_us": short, "fusion_min_kernels": min_run, **_threshold(rules, busy_thr.name)},
        "lever": "short kernels launched back to back with the device idle between them: fuse them (one Triton "
                 "kernel or a fused CANN op), or cut host work between launches (graph mode, fewer syncs)",
        "lever_origin": "msprof-analyze fusible_operator.yaml ('Evaluate host bound', 'feasibility of fusion')",
    }
