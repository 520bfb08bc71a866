"""A small PNG of a shape-mix verdict: each bucket's speedup against its weight, per round.

A round over a served-shape mix times every bucket (``rounds.timing.weigh_round``); its per-bucket table against
the baseline is ``timing["weighted"]["buckets"]``. Here each bucket is one point: its weight (share of the kernel's
device time) across, its speedup (baseline / candidate time) up, on a log axis around 1.0. The dashed vertical line
is ``judge.weighted.FLOOR_WEIGHT``: a point right of it and below 1.0 beyond its band broke its floor (drawn as an
x), which makes the verdict red whatever the weighted total says. Rounds without a mix (or not timed) have no
points; the latest ``MAX_ROUNDS`` rounds with a mix are drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascendopt.rounds.pairs_plot import save_png
from ascendopt.rounds.records import RoundRecord

MAX_ROUNDS = 6  # rounds drawn, the latest: more colours than this stop being told apart in a merge request


def bucket_points(record: RoundRecord) -> list[dict[str, Any]]:
    """The per-bucket rows of ``record`` against the baseline that have a speedup (empty: no mix, not timed)."""
    rows = ((record.timing or {}).get("weighted") or {}).get("buckets") or []
    return [r for r in rows if r.get("speedup")]


def plot_buckets(records: Sequence[RoundRecord], path: Path) -> Path | None:
    """Write the plot to ``path`` (PNG, replaced whole); None and no file when no round was timed over a mix."""
    from ascendopt.judge.weighted import FLOOR_WEIGHT

    rounds = [(r.number, r.verdict, bucket_points(r)) for r in records]
    rounds = [row for row in rounds if row[2]][-MAX_ROUNDS:]
    if not rounds:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for i, (number, verdict, rows) in enumerate(rounds):
        color = f"C{i % 10}"
        for marker, broken in (("o", False), ("x", True)):
            pts = [r for r in rows if (r["floor"] == "broken") == broken]
            if pts:
                ax.scatter([100 * r["weight"] for r in pts], [r["speedup"] for r in pts], marker=marker, s=40,
                           color=color, zorder=3, label=f"round {number} ({verdict})" if not broken or
                           len(pts) == len(rows) else None)
        for r in rows:  # the bucket's number beside its point: the table names it the same way
            ax.annotate(str(r["bucket"]).split(" [", 1)[0].removeprefix("bucket "), (100 * r["weight"], r["speedup"]),
                        textcoords="offset points", xytext=(4, 3), fontsize=7, color=color)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="baseline")
    ax.axvline(100 * FLOOR_WEIGHT, color="tab:red", linestyle=":", linewidth=1,
               label=f"floor from {FLOOR_WEIGHT:.0%} weight (x: floor broken)")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    # speedups read as "0.5x", "2x" rather than powers of ten
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}x" if f"{v:.1e}"[0] in "235" else ""))
    ax.set_xlim(left=0)
    ax.set_xlabel("bucket weight (% of the kernel's device time)")
    ax.set_ylabel("speedup vs baseline (> 1: faster)")
    ax.set_title("speedup per bucket of the shape mix against its weight", fontsize=10)
    ax.legend(fontsize=7)
    return save_png(fig, path)
