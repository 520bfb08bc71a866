"""Printed forms of data the step packages return: the round summary, per-tensor correctness lines,
configurations and speedups.

Rendering lives in ``cli`` only; the packages build plain data (``rounds.summary.build``,
``gate.correctness.TensorReport``) and never print it. Tables and result lines go to stdout
(``console.out``/``console.table``); status lines go to stderr.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ascendopt import console
from ascendopt.tune.space import config_text as format_config  # noqa: F401 - the renderers' name for it

if TYPE_CHECKING:
    from ascendopt.gate.correctness import TensorReport


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
    console.table(["#", "config", "median ms", "p20-p80 ms", "vs best so far", "smoke", "cached"],
                  [(i + 1, format_config(r["config"]), "-" if r["ms"] is None else f"{r['ms']:.4f}",
                    "-" if r.get("p20_ms") is None else f"{r['p20_ms']:.4f}-{r['p80_ms']:.4f}",
                    "-" if r["ms"] is None or not start_ms else speedup_text(r["ms"] / start_ms),
                    r["smoke"] if not r.get("note") else f"{r['smoke']}: {r['note']}",
                    "yes" if r.get("cached") else "") for i, r in enumerate(shown)],
                  title=f"screening on {screening.get('case', '?')}: {screening['covered']} of {screening['total']} "
                        f"candidates ({screening['fresh']} screened now, {screening['covered'] - screening['fresh']} "
                        f"cached) in {screening['seconds']:.1f} s; stopped: "
                        f"{why.get(screening['stopped'], screening['stopped'])}"
                        + (f"; {len(rows) - len(shown)} more not shown" if len(rows) > len(shown) else ""))


def _fmt(v: float | None, column: str = "") -> str:
    """A summary value by the unit its column name ends in: ``_us`` microseconds, ``_gbs`` GB/s, else a ratio."""
    if v is None:
        return "not collected"  # never 0: a metric group that was not collected says so
    if column.endswith("_us"):
        return console.duration_text(v)
    if column.endswith("_gbs"):
        return f"{v:.1f}"
    return f"{v:.3f}"


def render_round_summary(summary: Mapping[str, Any], title: str) -> None:
    """Print a round summary (``rounds.summary.build`` output): a before/after table on stdout, then
    the bound, targeted-metric, UB, speed, verdict and next-step lines.

    ``title`` heads the table (``"round 3 (block_rows=8)"``, ``"reprofile after: ..."``). A red gate
    (verdict ``drop``) was neither timed nor profiled, so it prints no table and no speed. The
    ``verdict_label`` key, when present, replaces the word "verdict" (reprofile judges nothing).
    """
    lines = []
    if summary["verdict"] != "drop":  # a red gate is neither timed nor profiled: no before/after table
        d = summary["duration_us"]
        rows = [("Duration (target kernel)", _fmt(d["before"], "_us"), _fmt(d["after"], "_us"))]
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
    speed = summary.get("speed")
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
    reason = f" ({summary['verdict_reason']})" if summary.get("verdict_reason") else ""
    lines.append(f"{summary.get('verdict_label', 'verdict')}: {summary['verdict']}{reason}")
    lines.append(("another round: warranted - " if summary["another_round"] else "another round: NOT warranted - ")
                 + summary["stop_reason"])
    for line in lines:
        console.out(line)


def target_metric_line(tm: Mapping[str, Any]) -> str:
    """``targeted metric duration_us: 5052.99 us -> 6417.16 us: up 27.0% (+1364.17 us), beyond the noise of ...``:
    the direction and size of the change, then whether it is beyond noise (``rounds.summary.judge_target``)."""
    name = tm["name"]
    line = f"targeted metric {name}: {_fmt(tm['before'], name)} -> {_fmt(tm['after'], name)}"
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
