"""A small PNG of the timed pairs of each round: the distribution behind the round's verdict.

Each timed pair gives one ratio, candidate time / baseline time, measured next to each other
(``samples_ms`` of a round's timing cases, ``rounds.timing.case_timing``). One horizontal box per round
(the middle half, whiskers to 1.5 IQR) with every pair drawn as a dot over it, on a log axis around 1.0:
left of 1.0 is faster than the baseline. Rounds without samples (a red gate) have no row.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ascendopt.rounds.records import RoundRecord

MAX_ROUNDS = 20  # the latest rounds drawn: the plot stays small enough to read in a merge request


def pair_ratios(record: RoundRecord) -> list[float]:
    """Candidate / baseline time of every timed pair of ``record``, over all its cases (empty: not timed)."""
    ratios = []
    for case in (record.timing or {}).get("cases") or []:
        samples = case.get("samples_ms") or {}
        base, cand = samples.get("baseline") or [], samples.get("candidate") or []
        ratios += [c / b for b, c in zip(base, cand, strict=False) if b > 0 and c > 0]
    return ratios


def plot_pairs(records: Sequence[RoundRecord], path: Path) -> Path | None:
    """Write the plot to ``path`` (PNG, replaced whole); None and no file when no round has timed pairs."""
    rows = [(r.number, r.verdict, pair_ratios(r)) for r in records][-MAX_ROUNDS:]
    rows = [row for row in rows if row[2]]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt
    import numpy as np

    colors = {"keep": "tab:green", "revert": "tab:orange", "floor": "tab:purple"}
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.35 * len(rows)), dpi=110)
    data = [ratios for _, _, ratios in rows]
    try:  # matplotlib >= 3.10 names the orientation; its older ``vert=False`` is deprecated there
        ax.boxplot(data, orientation="horizontal", widths=0.6, showfliers=False)
    except TypeError:
        ax.boxplot(data, vert=False, widths=0.6, showfliers=False)
    ax.set_yticks(range(1, len(rows) + 1), [f"round {n}" for n, _, _ in rows])
    jitter = np.random.default_rng(0)  # fixed: the same records give the same picture
    for i, (_, verdict, ratios) in enumerate(rows, start=1):
        ax.scatter(ratios, i + jitter.uniform(-0.15, 0.15, len(ratios)), s=6, alpha=0.6,
                   color=colors.get(verdict, "tab:gray"), zorder=3)
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("candidate / baseline time of each timed pair (< 1: faster)")
    ax.set_title("timed pairs per round", fontsize=10)
    return save_png(fig, path)


def save_png(fig, path: Path) -> Path:
    """Write the matplotlib figure ``fig`` as a PNG at ``path`` (folders made) and close it: written whole or not
    at all, so a killed report leaves the previous plot, never half a PNG."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
