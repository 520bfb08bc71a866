"""Merge-request report: markdown (task, environment, baseline, OPT_LOG rows, promotion stats,
commands, no-go bar) and a PNG plot of latency per round.

Pure data in, text/PNG out: ``contract`` is ``Contract.to_dict()`` output and ``records`` are
``rounds.RoundRecord``s. ``workspace_report`` reads both from a workspace and builds the whole report
as data; ``cli.report.write_report`` (used by ``report`` and ``demo``) writes the files.

The OPT_LOG table keeps fla's columns
``| Iter | Direction (one line) | Gate | Bench (median ms) | vs best | Status |`` with row 0 the
baseline (docs/practice.md §10).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ascendopt.rounds.ledger_view import accepted_implausible
from ascendopt.rounds.records import (
    RoundRecord,
    StopDecision,
    best_round,
    geomean,
    should_stop,
    speedup_statistic,
)
from ascendopt.workspace import Workspace, writing

OPT_LOG_COLUMNS = ("Iter", "Direction (one line)", "Gate", "Bench (median ms)", "vs best", "Status")
STATS_COLUMNS = ("case", "side", "median ms", "mean ms", "std ms", "min ms", "p10 ms", "p90 ms", "n")
_DASH = "—"


def _ms(v: float | None) -> str:
    return _DASH if v is None else f"{v:.4f}"


def _one_line(text: str, limit: int = 90) -> str:
    line = " ".join(str(text).split()).replace("|", "/")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _change_text(rec: RoundRecord) -> str:
    ch = rec.change or {}
    if ch.get("kind") == "tunables" and ch.get("set"):
        return ",".join(f"{k}={v}" for k, v in ch["set"].items())
    if ch.get("kind") == "code":
        return f"code@{str(ch.get('snapshot') or ch.get('commit') or 'worktree')[:10]}"
    return rec.direction


def _direction_text(rec: RoundRecord) -> str:
    """The OPT_LOG's direction cell: a bundled kernel's change (``BLOCK=32: hypothesis``); own code's direction as
    the console names it, its snapshot beside it, then the hypothesis without the direction's tag repeated
    (``vectorize (code@b5a2673c22): one launch``)."""
    if (rec.change or {}).get("kind") != "code":
        return f"{_change_text(rec)}: {rec.hypothesis}"
    hypothesis = rec.hypothesis
    if rec.direction and hypothesis.startswith(f"{rec.direction}:"):
        hypothesis = hypothesis[len(rec.direction) + 1:].strip()
    return f"{rec.direction} ({_change_text(rec)}): {hypothesis}"


def _code_candidate(best: RoundRecord, user_commit: str | None) -> str:
    """The best code round's state: its snapshot commit, and the user's commit holding it (or where not)."""
    change = best.change or {}
    snap = change.get("snapshot")
    if not snap:  # a record of an older ascendopt: the user's HEAD the round started on
        return str(change.get("commit") or "working tree")
    mine = f"your commit {user_commit} holds the same files" if user_commit else \
        f"in none of your recent commits (restore it with `git checkout {snap[:12]} -- .`)"
    return f"snapshot {snap} (round {best.number}'s own ref); {mine}"


def _baseline_ms(contract: Mapping[str, Any]) -> float | None:
    base = contract.get("baseline") or []
    return geomean([b["median_ms"] for b in base]) if base else None


def opt_log_rows(contract: Mapping[str, Any], records: Sequence[RoundRecord]) -> list[tuple[str, ...]]:
    """OPT_LOG rows (strings): row 0 the baseline, then one per round."""
    rows = [("0", "baseline", "pass", _ms(_baseline_ms(contract)), _DASH, "base")]
    for r in records:
        gate = "pass" if r.gate.get("passed") else f"fail ({r.gate.get('failed_stage') or 'gate'})"
        ratio = r.ratio_vs_best
        # Change of the candidate's time against the best so far, from the round's interleaved
        # samples (not from the frozen baseline row, which was timed at freeze): +x % is slower. The
        # best's own median in that round is shown beside it, so the cell reads from its numbers.
        best_ms = _interleaved_best_ms(r)
        vs_best = _DASH if ratio is None else f"{ratio - 1:+.1%} time" + (
            f" (best re-timed in this round: {_ms(best_ms)})" if best_ms is not None else "")
        if r.timing and r.timing.get("vs_best") == "inconclusive":
            vs_best += " (inconclusive)"  # the noise band was too wide to call it: reverted
        rows.append((str(r.number), _one_line(_direction_text(r)), gate,
                     _ms(r.candidate_ms), vs_best, r.verdict))
    return rows


def _interleaved_best_ms(rec: RoundRecord) -> float | None:
    """Median ms of the best so far as the round re-timed it interleaved with the candidate (geomean over
    cases; the ``baseline`` side when the baseline was the best), None when the round timed no best."""
    if not rec.timing:
        return None
    sides = [c.get("best") or c.get("baseline") for c in rec.timing["cases"]]
    if not all(side and side.get("median_ms") for side in sides):
        return None
    return geomean([side["median_ms"] for side in sides])


OPT_LOG_NOTE = ("Bench is the candidate's median in its round. vs best compares it with the best so far re-timed "
                "interleaved in the same round (its median in brackets), not with row 0, which was timed at freeze; "
                "the % is the paired estimate over the interleaved pairs, so it can differ slightly from the "
                "ratio of the two medians.")


def ub_warnings(records: Sequence[RoundRecord]) -> list[str]:
    """One line per round whose tile overflows the UB model's budget (off-NPU, reported not refused)."""
    return [f"round {r.number} ({_change_text(r)}): UB {r.ub['warning']}" for r in records
            if (r.ub or {}).get("warning")]


def _stats(samples: Sequence[float] | None, timing: Mapping[str, Any]) -> list[str]:
    """median/mean/std/min/p10/p90/n from raw samples, else from the Timing summary (min/p10/p90 unknown)."""
    if samples:
        x = np.asarray(samples, dtype=float)
        std = float(x.std(ddof=1)) if x.size > 1 else 0.0
        vals = [np.median(x), x.mean(), std, x.min(), np.percentile(x, 10), np.percentile(x, 90)]
        return [_ms(float(v)) for v in vals] + [str(x.size)]
    mean = timing.get("mean_ms")
    std = timing["cv"] * mean if mean is not None and timing.get("cv") is not None else None
    return [_ms(timing.get("median_ms")), _ms(mean), _ms(std), _DASH, _DASH, _DASH, str(timing.get("n", _DASH))]


def promotion_stats(best: RoundRecord) -> tuple[list[list[str]], float]:
    """Rows of the promotion stats block for the best round and its speedup over the baseline: the
    round's own number (``RoundRecord.speedup_vs_baseline``, ``records.SPEEDUP_STATISTIC``), the one the
    round and ``status`` print."""
    rows = []
    for case in best.timing["cases"]:
        samples = case.get("samples_ms") or {}
        for side in ("baseline", "candidate"):
            rows.append([case["case"], side, *_stats(samples.get(side), case[side])])
    return rows, best.speedup_vs_baseline


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def no_go_bar(contract: Mapping[str, Any], records: Sequence[RoundRecord]) -> list[tuple[str, bool, str]]:
    """fla's five no-go items: (item, satisfied, evidence)."""
    base = _baseline_ms(contract)
    tried = [r for r in records if r.hypothesis.strip()]
    last = records[-1] if records else None
    gated = [r for r in records if "passed" in r.gate]
    benched = [r for r in records if r.timing]
    bound = None
    for r in reversed(records):
        if r.floor:
            bound = f"{r.floor.bound}: {r.floor.detail}"
            break
        if r.summary.get("bound") and r.summary.get("bound_evidence"):  # a class without numbers names nothing
            bound = f"{r.summary['bound']} ({r.summary['bound_evidence']})"
            break
    return [
        ("recorded baseline number", base is not None, f"{_ms(base)} ms" if base else "missing"),
        ("at least one reasoned candidate attempt", bool(tried), f"{len(tried)} round(s)" if tried else "none"),
        ("gate status", bool(gated), f"round {last.number}: {'pass' if last.gate.get('passed') else 'fail'}"
         if last else "no round"),
        ("bench evidence", bool(benched), f"{len(benched)} benchmarked round(s)" if benched else "none"),
        ("named active bound or blocker with its number", bound is not None, bound or "none recorded"),
    ]


def render_markdown(contract: Mapping[str, Any], records: Sequence[RoundRecord], *, plot_name: str | None = None,
                    max_rounds: int | None = None, best_user_commit: str | None = None) -> str:
    """The merge-request summary as markdown text. ``best_user_commit``: the user's commit that holds the
    best code round's snapshot, when one does (``rounds.tree.best_commits``)."""
    w = contract.get("workload", {})
    lines = [f"# ascendopt report: {contract.get('op')}", ""]
    lines += ["## Task", ""]
    shapes = ", ".join(f"{s['name']} ({', '.join(f'{k}={v}' for k, v in s['dims'].items())})"
                       for s in w.get("shapes") or []) or _DASH
    task = [("op", contract.get("op")), ("entry point", contract.get("entry_point")),
            ("workload", w.get("kind") + (f" {w.get('kernel')}" if w.get("kernel") else f" {w.get('exec_file')}")),
            ("shapes", shapes), ("dtype / mode", f"{w.get('dtype') or _DASH} / {w.get('mode') or _DASH}"),
            ("frozen config", ", ".join(f"{k}={v}" for k, v in (w.get("config") or {}).items()) or _DASH),
            ("expected kernels", ", ".join(contract.get("expected_kernels") or []) or _DASH),
            ("metric groups", ", ".join(contract.get("metric_groups") or []) or _DASH),
            ("frozen at",
             f"{contract.get('created_at')} (commit {(contract.get('git') or {}).get('commit') or 'none'})")]
    lines += _table(("field", "value"), [(k, _one_line(str(v), 200)) for k, v in task]) + [""]
    lines += ["## Environment", ""]
    env = records[-1].environment if records else None
    dev = contract.get("device") or {}
    # the environment line names its own fields ("Device: ... | torch ... | branch[sha]")
    lines.append(f"`{env}`" if env else f"`Device: {dev.get('name', contract.get('backend'))}`")
    lines += ["", "## Baseline", ""]
    lines += _table(("case", "median ms", "p20 ms", "p80 ms", "CV", "n"),
                    [(b["case"], _ms(b["median_ms"]), _ms(b["p20_ms"]), _ms(b["p80_ms"]), f"{b['cv']:.3f}",
                      str(b["n"])) for b in contract.get("baseline") or []])
    lines += ["", "## Rounds (OPT_LOG)", ""]
    lines += _table(OPT_LOG_COLUMNS, opt_log_rows(contract, records))
    if records:
        lines += ["", OPT_LOG_NOTE, "", "Verdicts, each with its reason:", ""]
        lines += [f"- round {r.number} **{r.verdict}**: {_one_line(r.why or _DASH, 400)}" for r in records]
    accepted = [(r, accepted_implausible(r)) for r in records if accepted_implausible(r)]
    if accepted:
        lines += ["", "## Accepted implausible results", "",
                  "Speedups beyond belief (> 5x vs the baseline, or under the roofline floor) that a person "
                  "accepted with `--accept-implausible`; review each reason:", ""]
        lines += [f"- round {r.number} ({r.verdict}): {_one_line(a['finding'], 200)}; accepted"
                  + (f" by {a['by']}" if a.get("by") else "") + (f" at {a['at']}" if a.get("at") else "")
                  + f": {_one_line(a['reason'], 300)}" for r, a in accepted]
    over = ub_warnings(records)
    if over:
        lines += ["", "UB over budget (predicted off-NPU for the model chip; these tiles would not compile on "
                      "the NPU):", ""] + [f"- {line}" for line in over]
    stop = should_stop(records, max_rounds=max_rounds)
    lines += ["", f"Stop decision: stop ({stop.criterion}): {stop.reason}" if stop.stop else
              f"Stop decision: {stop.reason}"]
    if plot_name:
        lines += ["", f"![latency per round]({plot_name})"]
    best = best_round(records)
    lines += ["", "## Promotion stats", ""]
    if best is None:
        lines.append("No round was kept: the baseline is still the best. Nothing to promote.")
    else:
        rows, speedup = promotion_stats(best)
        lines.append(f"Best: round {best.number} ({_change_text(best)}), measured interleaved with the baseline "
                     "in that round.")
        lines.append("")
        lines += _table(STATS_COLUMNS, rows)
        cases = len(best.timing["cases"])
        statistic = speedup_statistic(best.timing)
        lines += ["", f"Speedup vs baseline: **{speedup:.3f}x** over {cases} case(s) ({statistic}; the "
                      "number the round and `status` print)."]
        cfg = best.config
        lines.append(f"Baseline commit: {(contract.get('git') or {}).get('commit') or 'none'}; candidate: "
                     + (", ".join(f"{k}={v}" for k, v in cfg.items()) if cfg else
                        _code_candidate(best, best_user_commit)))
        lines.append(best.environment)  # "Device: ... | versions | branch[sha]"
        if (best.ub or {}).get("warning"):
            lines.append(f"**UB: {best.ub['warning']}**: do not promote this configuration to an NPU as it is.")
    lines += ["", "## No-go bar", ""]
    lines += _table(("item", "status", "evidence"),
                    [(item, "yes" if ok else "NO", _one_line(ev, 160))
                     for item, ok, ev in no_go_bar(contract, records)])
    lines += ["", "## Commands", "", "```"]
    for name, argv in (contract.get("commands") or {}).items():
        lines.append(f"# {name}")
        lines.append(shlex.join(argv))  # as a shell runs it: a -k "a or b" keeps its quotes
    for r in records:
        if r.command:
            lines.append(f"# round {r.number}")
            lines.append(r.command)
    lines += ["```", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class WorkspaceReport:
    """A workspace's merge-request report as data: the inputs of the plot, the markdown text, and the
    facts ``report --json`` prints beside the file paths."""

    contract: dict[str, Any]  # Contract.to_dict()
    records: tuple[RoundRecord, ...]  # oldest first
    markdown: str
    best_round: int | None  # number of the latest kept round; None while the baseline is the best
    stop: StopDecision  # the stop criteria over the recorded rounds, under the contract's max_rounds
    # own code: the best round's snapshot commit and the user's commit holding the same files (None: none)
    best_commit: str | None = None
    best_user_commit: str | None = None


def plot_link(md_path: Path, png_path: Path) -> str:
    """How the markdown names the plot: its file name when both files share a folder (the pair can be
    moved together, e.g. into a merge request), else the plot's absolute path."""
    return png_path.name if png_path.parent.resolve() == md_path.parent.resolve() else str(png_path.resolve())


def workspace_report(ws: Workspace, *, plot_name: str | None, check_digest: bool = False) -> WorkspaceReport:
    """Read the contract and the round records of ``ws`` and build the report.

    ``plot_name``: how the markdown links the plot (``plot_link``), None for no link. The digest is
    not checked by default: a report only reads, and judging integrity is the gate's job.
    """
    from ascendopt.rounds.context import RoundContext

    ctx = RoundContext.load(ws, check_digest=check_digest)
    data = ctx.contract.to_dict()
    best = ctx.best_round
    user_commit = None
    if best is not None and (best.change or {}).get("snapshot"):
        from ascendopt.contract.frozen import project_root
        from ascendopt.rounds.tree import best_commits

        user_commit = best_commits(project_root(), best, ws.root)["user_commit"]
    return WorkspaceReport(
        contract=data, records=ctx.records,
        markdown=render_markdown(data, ctx.records, plot_name=plot_name, max_rounds=ctx.contract.max_rounds,
                                 best_user_commit=user_commit),
        best_round=best.number if best else None,
        stop=ctx.stop_decision(),
        best_commit=(best.change or {}).get("snapshot") if best else None,
        best_user_commit=user_commit,
    )


def plot_rounds(contract: Mapping[str, Any], records: Sequence[RoundRecord], path: Path) -> Path:
    """PNG of each round's candidate time relative to the baseline, with the baseline and best-so-far lines.

    The y value is the round's own interleaved ratio candidate/baseline (geomean over cases), so rounds
    timed under different conditions stay comparable; the frozen baseline's absolute time (timed at
    freeze) is only named in the legend. Error bars: candidate p20/p80 over the round's baseline median.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    base = _baseline_ms(contract)
    colors = {"keep": "tab:green", "revert": "tab:orange", "floor": "tab:purple"}
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    best_x, best_y = [0], [1.0]
    best = 1.0
    for r in records:
        ratio = r.timing.get("ratio_vs_baseline") if r.timing else None
        if ratio is None:
            ax.scatter([r.number], [best], marker="x", color="tab:red", zorder=3,
                       label="drop (gate red)" if "drop (gate red)" not in ax.get_legend_handles_labels()[1] else None)
        else:
            lo, hi = _spread(r)
            ax.errorbar([r.number], [ratio], yerr=[[max(ratio - lo, 0.0)], [max(hi - ratio, 0.0)]], fmt="o",
                        color=colors[r.verdict], capsize=3, zorder=3,
                        label=r.verdict if r.verdict not in ax.get_legend_handles_labels()[1] else None)
            if r.verdict == "keep":
                best = min(best, ratio)
        best_x.append(r.number)
        best_y.append(best)
    base_label = "baseline" + (f" ({base:.4f} ms at freeze)" if base is not None else "")
    ax.axhline(1.0, color="gray", linestyle="--", label=base_label)
    ax.step(best_x, best_y, where="post", color="tab:blue", label="best so far")
    ax.set_xlabel("round")
    ax.set_ylabel("time / baseline (interleaved, geomean over cases)")
    ax.set_title(f"{contract.get('op')}: time per round relative to the baseline")
    ax.set_xticks(range((records[-1].number if records else 0) + 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with writing(path, name_it=True):  # a refusal names the plot, not its temp file
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(tmp, format="png")
            os.replace(tmp, path)  # a killed report leaves the previous plot, never half a PNG
    finally:
        plt.close(fig)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return path


def _spread(r: RoundRecord) -> tuple[float, float]:
    """Candidate p20/p80 over the same round's baseline median (geomean over cases)."""
    cases = r.timing["cases"]
    return (geomean([c["candidate"]["p20_ms"] / c["baseline"]["median_ms"] for c in cases]),
            geomean([c["candidate"]["p80_ms"] / c["baseline"]["median_ms"] for c in cases]))
