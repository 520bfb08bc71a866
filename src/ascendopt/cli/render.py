"""Printed forms of data the step packages return: the round summary, per-tensor correctness lines,
configurations and speedups.

Rendering lives in ``cli`` only; the packages build plain data (``rounds.summary.build``,
``judge.correctness.TensorReport``) and never print it. Tables and result lines go to stdout
(``console.out``/``console.table``); status lines go to stderr.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ascendopt import console
from ascendopt.tune.space import config_text as format_config  # noqa: F401 - the renderers' name for it

if TYPE_CHECKING:
    from ascendopt.judge.correctness import TensorReport


def format_duration_us(value: float | None) -> str:
    """A duration given in microseconds, in the unit its size reads best in (``console.duration_text``, the one
    formatter); ``-`` when unknown."""
    if value is None or not math.isfinite(value):
        return "-"
    return console.duration_text(value)


def format_duration_ms(value: float | None) -> str:
    """``format_duration_us`` of a duration given in milliseconds."""
    return "-" if value is None else format_duration_us(value * 1e3)


SPARK_BLOCKS = " ▁▂▃▄▅▆▇█"
SPARK_ASCII = " .:-=+*#%@"  # NO_COLOR or a non-UTF-8 terminal: the same heights in ASCII
SPARK_BINS = 16


def sparkline(values: Iterable[float], lo: float, hi: float, bins: int = SPARK_BINS,
              *, ascii_only: bool | None = None) -> str:
    """A one-line histogram of ``values`` over ``bins`` equal bins from ``lo`` to ``hi``: one character per
    bin, its height the bin's count relative to the fullest bin (any non-empty bin shows at least the
    lowest mark). Block characters, or ASCII when ``ascii_only`` (default: ``not console.unicode_ok()``)."""
    marks = SPARK_ASCII if (not console.unicode_ok() if ascii_only is None else ascii_only) else SPARK_BLOCKS
    counts = [0] * bins
    width = (hi - lo) or 1.0
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / width * bins)))] += 1
    top = max(counts) or 1
    return "".join(marks[0] if c == 0 else marks[max(1, round(c / top * (len(marks) - 1)))] for c in counts)


def spread(samples_ms: Sequence[float]) -> dict[str, float]:
    """min, median, max and the interquartile range (p75 - p25) of timed samples, in ms."""
    import numpy as np

    x = np.asarray(samples_ms, dtype=float)
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    return {"n": int(x.size), "min": float(x.min()), "median": float(q50), "max": float(x.max()),
            "iqr": float(q75 - q25)}


def spread_lines(samples_ms: Mapping[str, Sequence[float]], indent: str = "  ", *,
                 ascii_only: bool | None = None) -> list[str]:
    """One line per timed side: ``baseline  n=30  min 10.21 us  median 10.40 us  max 11.02 us  IQR 0.18 us
    |▁▃█▅▂▁|``; the histograms of all sides share one range (min to max over every side), so they line up."""
    sides = {name: list(v) for name, v in samples_ms.items() if v}
    if not sides:
        return []
    lo = min(min(v) for v in sides.values())
    hi = max(max(v) for v in sides.values())
    width = max(len(name) for name in sides)
    lines = []
    for name, values in sides.items():
        s = spread(values)
        lines.append(f"{indent}{name:<{width}}  n={s['n']}  min {format_duration_ms(s['min'])}  median "
                     f"{format_duration_ms(s['median'])}  max {format_duration_ms(s['max'])}  IQR "
                     f"{format_duration_ms(s['iqr'])}  |{sparkline(values, lo, hi, ascii_only=ascii_only)}|")
    return lines


def speedup_text(ratio: float | None) -> str:
    """A time ratio candidate/reference as the speedup ``1.250x``; ``-`` when unknown or not a time ratio."""
    return "-" if ratio is None or not math.isfinite(ratio) or ratio <= 0 else f"{1 / ratio:.3f}x"


def ub_text(ub: Mapping[str, Any] | None) -> str:
    """A round's predicted UB use in a table cell: ``40%``, ``118% OVER`` (over budget), ``-`` if not modelled."""
    if not ub or ub.get("share") is None:
        return "-"
    return f"{ub['share']:.0%}" + ("" if ub.get("safe", True) else " OVER")


SCREEN_ROWS = 15  # screening table rows shown (fastest first; screened-out candidates after them)


def render_screening(screening: Mapping[str, Any]) -> None:
    """``optimize-round --auto``'s screening table: the fastest candidates first, then those screened out,
    with the coverage line (what was screened of the space, and why it stopped)."""
    rows = screening["rows"]
    start_ms = screening.get("start_ms")
    ok = sorted((r for r in rows if r["ms"] is not None), key=lambda r: r["ms"])
    out = [r for r in rows if r["ms"] is None]
    shown = (ok + out)[:SCREEN_ROWS]
    why = {"covered": "every candidate screened", "converged": "the search converged",
           "budget": "--budget reached", "time": f"--budget-s {screening.get('budget_s', 0):g} s reached"}
    # on a pool, which device screened each (its ratio to the start there is what ranks it)
    pooled = any(r.get("device") for r in rows)
    console.table(["#", "config", "median ms", "p20-p80 ms", "vs best so far", "smoke", "cached"]
                  + (["device"] if pooled else []),
                  [(i + 1, format_config(r["config"]), "-" if r["ms"] is None else f"{r['ms']:.4f}",
                    "-" if r.get("p20_ms") is None else f"{r['p20_ms']:.4f}-{r['p80_ms']:.4f}",
                    "-" if r["ms"] is None or not start_ms else speedup_text(r["ms"] / start_ms),
                    r["smoke"] if not r.get("note") else f"{r['smoke']}: {r['note']}",
                    "yes" if r.get("cached") else "") + ((r.get("device") or "-",) if pooled else ())
                   for i, r in enumerate(shown)],
                  title=f"screening on {screening.get('case', '?')}: {screening['covered']} of {screening['total']} "
                        f"candidates ({screening['fresh']} screened now, {screening['covered'] - screening['fresh']} "
                        f"cached) in {screening['seconds']:.1f} s; stopped: "
                        f"{why.get(screening['stopped'], screening['stopped'])}"
                        + (f"; {len(rows) - len(shown)} more not shown" if len(rows) > len(shown) else ""))


def pool_line(progress: Mapping[str, Any]) -> str:
    """One line of a pool's progress (``pool.core.Progress.to_dict``): devices busy / idle, done of total, the ETA,
    quarantined and lost devices."""
    eta = progress.get("eta_s")
    text = (f"pool: {len(progress['busy'])} busy, {len(progress['idle'])} idle; {progress['done']}/{progress['total']}"
            f" done" + (f", ETA {eta:.0f} s" if eta is not None else ""))
    if progress.get("quarantined"):
        text += "; quarantined: " + ", ".join(progress["quarantined"])
    if progress.get("lost"):
        text += "; lost: " + ", ".join(progress["lost"])
    return text


def render_pool(pool: Mapping[str, Any] | None) -> None:
    """A pool's devices (``pool.core.PoolRun.to_dict``): what each measured, its anchors (frozen baseline
    re-measured before and after its work), and a quarantined or lost device with the reason."""
    if not pool:
        return
    rows = []
    for device in pool["devices"]:
        anchors = pool.get("anchors", {}).get(device, [])
        medians = " / ".join(f"{a['median_ms']:.4f}" for a in anchors if a.get("median_ms") is not None) or "-"
        state = (f"quarantined: {pool['quarantined'][device]}" if device in pool["quarantined"] else
                 f"lost: {pool['lost'][device]}" if device in pool["lost"] else "ok")
        rows.append((device, len(pool["measured"].get(device, [])), medians, state))
    console.table(["device", "measured", "anchor ms (first / last)", "state"], rows,
                  title=f"pool of {len(pool['devices'])} device(s): {pool['seconds']:.1f} s"
                        + (f"; re-queued: {', '.join(pool['requeued'])}" if pool.get("requeued") else ""))


BUCKET_COLUMNS = ["bucket", "shape", "weight", "baseline", "candidate", "speedup", "noise band", "verdict", "floor"]


def bucket_table_rows(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """The per-bucket table's cells (``judge.weighted.bucket_rows`` data; ``BUCKET_COLUMNS``): one formatter for
    the gate, ``status --rounds`` and the report, so the table reads alike everywhere."""
    out = []
    for r in rows:
        speed = r.get("speedup")
        out.append((str(r["bucket"]).split(" [", 1)[0], "-" if r.get("shape") is None else str(r["shape"]),
                    f"{r['weight']:.1%}", format_duration_ms(r.get("baseline_ms")),
                    format_duration_ms(r.get("candidate_ms")), "-" if not speed else f"{speed:.3f}x",
                    f"±{r['noise_band']:.1%}", str(r["verdict"]), str(r["floor"])))
    return out


def render_bucket_table(rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """The per-bucket table on stdout (nothing for an empty one: a contract without a shape mix)."""
    if rows:
        console.table(BUCKET_COLUMNS, bucket_table_rows(rows), title=title)


def mix_screening_lines(mix: Mapping[str, Any]) -> list[str]:
    """What ``--auto``'s screening on a mix says (``rounds.auto.mix_winners`` data): the one configuration that
    wins on every shape case, or, where none does, which wins where and by how much (the evidence for a per-bucket
    dispatch, which the user decides on: nothing is applied)."""
    overall = mix.get("overall")
    if overall is None:
        return ["on the mix: no screened configuration passed on every shape case"]
    name = format_config(overall)
    if mix["one_wins_all"]:
        return [f"on the mix: {name} is the fastest on every shape case (weighted fastest too): no per-bucket "
                "dispatch is needed"]
    lines = [f"on the mix: no single configuration wins on every shape case; {name} is the weighted fastest. Where "
             "another wins (evidence for a per-bucket dispatch, your decision: nothing is applied):"]
    for x in mix["winners"]:
        if x["overall_wins"]:
            continue
        vs_start = f", {x['vs_start']:.3f}x the best so far's" if x.get("vs_start") else ""
        lines.append(f"  {x['case']} (weight {x['weight']:.0%}): {format_config(x['config'])} wins at "
                     f"{format_duration_ms(x['ms'])}, {x['vs_overall']:.3f}x the speed of {name} there{vs_start}")
    return lines


def render_mix_screening(mix: Mapping[str, Any] | None) -> None:
    """``--auto`` on a mix: the screened configurations' times per shape case and weighted, then
    ``mix_screening_lines``; nothing with one shape case."""
    if not mix:
        return
    cases = mix["cases"]
    console.table(["config", *cases, "weighted"],
                  [(format_config(row["config"]), *(format_duration_ms(row["ms"][c]) for c in cases),
                    format_duration_ms(row["weighted_ms"])) for row in mix["table"]],
                  title=f"the fastest screened on every shape case of the mix ({len(cases)} cases, weights "
                        + ", ".join(f"{c} {mix['weights'][c]:.0%}" for c in cases) + ")")
    for line in mix_screening_lines(mix):
        console.out(line)


def _fmt(v: float | None, column: str = "") -> str:
    """A summary value by the unit its column name ends in: ``_us`` microseconds, ``_gbs`` GB/s, else a ratio."""
    if v is None:
        return "not collected"  # never 0: a metric group that was not collected says so
    if column.endswith("_us"):
        return console.duration_text(v)
    if column.endswith("_gbs"):
        return f"{v:.1f}"
    return f"{v:.3f}"


def _per_call_rows(summary: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The target kernel's device time per call and launches per call, before and after. A per-launch
    average misleads when a change alters launches per call (512 -> 1 reads as a 73x "slower" kernel);
    a record written before issue 41 has only that average and prints it, named as what it is."""
    calls = summary.get("per_call")
    if not calls:
        d = summary["duration_us"]
        return [("Duration per launch (target kernel, average)", _fmt(d["before"], "_us"), _fmt(d["after"], "_us"))]

    def side(key: str, which: str) -> str:
        value = calls[key][which]
        if value is not None:
            return console.duration_text(value) if key == "device_us" else f"{value:g}"
        # the kernel is in the profile but the profile records no steps: the calls it covers are unknown
        return "calls not recorded" if summary["duration_us"][which] is not None else "not collected"

    return [("Device time per call (target kernel)", side("device_us", "before"), side("device_us", "after")),
            ("Launches per call (target kernel)", side("launches", "before"), side("launches", "after"))]


def render_round_summary(summary: Mapping[str, Any], title: str, timing: Mapping[str, Any] | None = None) -> None:
    """Print a round summary (``rounds.summary.build`` output): a before/after table on stdout, then
    the bound, targeted-metric, UB, speed, verdict and next-step lines.

    ``title`` heads the table (``"round 3 (block_rows=8)"``, ``"reprofile after: ..."``). A red gate
    (verdict ``drop``) was neither timed nor profiled, so it prints no table and no speed. The
    ``verdict_label`` key, when present, replaces the word "verdict" (reprofile judges nothing).
    ``timing``: the round's ``timing`` (``rounds.timing.round_timing``): the spread of its timed samples is
    printed after the speed line (``timing_spread_lines``).
    """
    lines = []
    if summary["verdict"] != "drop":  # a red gate is neither timed nor profiled: no before/after table
        rows = _per_call_rows(summary)
        rows += [(r["label"], _fmt(r["before"], r["column"]), _fmt(r["after"], r["column"]))
                 for r in summary["metrics"]]
        console.table(["metric", "before", "after"], rows,
                      title=f"{title}: {summary.get('target_kernel') or 'target kernel'}")
    else:
        lines.append(f"{title}: gate RED")
    if summary.get("bound") and summary["verdict"] != "drop":
        ev = f" ({summary['bound_evidence']})" if summary.get("bound_evidence") else ""
        lines.append(f"bound: {summary.get('bound_before') or '?'} -> {summary['bound']}{ev}")
    if summary["verdict"] != "drop":
        lines.append(target_metric_line(summary["target_metric"]))
    if summary.get("ub"):
        ub = summary["ub"]
        lines.append(f"UB use: {ub.get('detail')}" + ("" if ub.get("enforced") else " (predicted; not enforced here)"))
        if ub.get("warning"):
            lines.append(f"UB: {ub['warning']}")
    speed = summary.get("speed")  # (the speed line keeps ms: its number is compared across rounds and tools)
    if summary["verdict"] == "drop":
        lines.append("speed: not measured, not re-profiled (red gate: no speed is reported)")
    elif speed:
        # the ratios are candidate/reference times; their inverse is the speedup the line names
        # both references were re-timed in this round, interleaved with the candidate: the frozen baseline's
        # time (measured at freeze, under other conditions) is not what the speedups compare with
        candidate = console.duration_text(speed["candidate_ms"] * 1e3, digits=3)
        lines.append(f"speed: {candidate}; vs best {speedup_text(speed['ratio_vs_best'])}, "
                     f"vs baseline {speedup_text(speed['ratio_vs_baseline'])} (speedups against both re-timed "
                     "interleaved in this round)")
    if timing and summary["verdict"] != "drop":
        lines += timing_spread_lines(timing)
    for line in lines:
        console.out(line)
    weighted = (timing or {}).get("weighted") if summary["verdict"] != "drop" else None
    if weighted:  # over a shape mix: the buckets the verdict was weighed over, against each reference timed
        render_bucket_table(weighted.get("buckets") or [], "per bucket of the shape mix, vs baseline")
        if (timing.get("best") or {}).get("round") is not None:
            render_bucket_table(weighted.get("buckets_vs_best") or [],
                                f"per bucket of the shape mix, vs the best so far (round {timing['best']['round']})")
    reason = f" ({summary['verdict_reason']})" if summary.get("verdict_reason") else ""
    line = f"{summary.get('verdict_label', 'verdict')}: {summary['verdict']}{reason}"
    if "verdict_label" in summary:
        console.out(line)  # a label other than "verdict" (reprofile) judges nothing: not a verdict line
    else:
        console.verdict(line, summary["verdict"])
    console.out(("another round: warranted - " if summary["another_round"] else "another round: NOT warranted - ")
                + summary["stop_reason"])


def timing_spread_lines(timing: Mapping[str, Any]) -> list[str]:
    """The spread of a round's timed samples, per case: a ``timed pairs of CASE`` line, then one line per
    side (``spread_lines``). Cases without samples (an older record) print nothing."""
    lines = []
    for case in timing.get("cases") or []:
        samples = case.get("samples_ms") or {}
        if samples:
            lines.append(f"timed pairs of {case.get('case', '?')}, time per call:")
            lines += spread_lines(samples)
    return lines


def target_metric_line(tm: Mapping[str, Any]) -> str:
    """``targeted metric duration_us: 5052.99 us -> 6417.16 us: up 27.0% (+1364.17 us), beyond the noise of ...``:
    the direction and size of the change, then whether it is beyond noise (``rounds.summary.judge_target``)."""
    name = tm["name"]
    # duration_us is a kernel's average per launch: said, since the table beside it is per call
    label = f"{name} (average per launch)" if name == "duration_us" else name
    line = f"targeted metric {label}: {_fmt(tm['before'], name)} -> {_fmt(tm['after'], name)}"
    if tm.get("direction") is None:  # a record of an older ascendopt, or a side not collected
        old = {True: "moved", False: "did NOT move", None: "not collected on one or both sides"}[tm.get("moved")]
        return f"{line}: {tm.get('judgement') or old}"
    if tm["direction"] == "same":
        size = "unchanged"
    else:
        rel = f" {abs(tm['change_rel']):.1%}" if tm.get("change_rel") is not None else ""
        scale = max(abs(tm["before"] or 0), abs(tm["after"] or 0))  # the change in the unit of the values it joins
        change = (console.duration_text(tm["change_abs"], unit_of=scale, sign=True) if name.endswith("_us")
                  else f"{tm['change_abs']:+.{2 if name.endswith('_gbs') else 3}f}")
        size = f"{tm['direction']}{rel} ({change})"
    verdict = {True: "moved", False: "did NOT move (reclassify or switch metric groups)", None: "not judged"}
    judgement = tm.get("judgement") or verdict[tm.get("moved")]
    if tm.get("moved") is not None:
        judgement = f"{judgement}: {verdict[tm['moved']]}"
    return f"{line}: {size}; {judgement}"


def tensor_report_lines(reports: Iterable[TensorReport]) -> Iterator[str]:
    """fla-style per-tensor lines (``TensorReport.line``), a ``[case]`` header before each case's run."""
    last = None
    for report in reports:
        if report.case != last:
            yield f"[{report.case}]"
            last = report.case
        yield report.line()


def print_reports(reports: Iterable[TensorReport]) -> None:
    """Per-tensor lines on stderr, grouped by case (status output; ``--json`` carries the data)."""
    for line in tensor_report_lines(reports):
        console.info(line)
