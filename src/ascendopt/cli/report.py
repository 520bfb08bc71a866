"""`ascendopt report`: markdown for a merge request and a PNG of latency per round."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt, examples


def report(
    out: Annotated[
        str | None, typer.Option("--out", metavar="PATH",
            help="Markdown file to write (default WORKSPACE/report.md); '-': print the markdown only, write no "
                 "file (no plot unless --plot is given).")
    ] = None,
    plot: Annotated[
        str | None, typer.Option("--plot", metavar="PATH",
            help="PNG file to write (default next to the markdown: rounds.png); beside it, when there is something to "
                 "draw, rounds-pairs.png (the timed pairs) and rounds-buckets.png (over a shape mix: each bucket's "
                 "speedup against its weight).")
    ] = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Markdown and a plot of the rounds for a merge request.

    Write the contract and rounds as a merge-request summary: task, environment, baseline, one OPT_LOG
    row per round, promotion stats, no-go bar, exact commands; and a plot of the rounds. Without --out the
    markdown is also printed on stdout; with --out PATH only the path of the file is. Both paths are checked
    before anything is written (a folder or an unwritable place: exit 2, nothing written); `--out -` prints the
    markdown and writes nothing, so it works on a workspace this user cannot write."""
    from pathlib import Path

    from ascendopt import console
    from ascendopt.workspace import Workspace, check_output_path

    ws = Workspace.resolve(workspace)
    to_stdout = out == "-"
    md_path = None if to_stdout else Path(out) if out else ws.root / "report.md"
    png_path = Path(plot) if plot else None if md_path is None else md_path.with_name("rounds.png")
    for path, option in ((md_path, "--out"), (png_path, "--plot")):
        if path is not None:
            check_output_path(path, option)
    result = write_report(ws, md_path, png_path)  # a report reads; the gate judges integrity
    if json:
        pairs = None if png_path is None else pairs_plot_path(png_path)
        buckets = None if png_path is None else buckets_plot_path(png_path)
        console.print_json({"markdown": None if md_path is None else str(md_path),
                            "plot": None if png_path is None else str(png_path),
                            "pairs_plot": str(pairs) if pairs is not None and pairs.is_file() else None,
                            "buckets_plot": str(buckets) if buckets is not None and buckets.is_file() else None,
                            "rounds": len(result.records), "best_round": result.best_round,
                            "best_commit": result.best_commit, "best_user_commit": result.best_user_commit,
                            "stop": result.stop.to_dict()})
        return
    if out and not to_stdout:  # the markdown went where it was asked for: stdout says where, not the file again
        console.out(str(md_path))
        console.info(f"plot written to {png_path}")
        return
    console.out(result.markdown.removesuffix("\n"))  # out() ends the line: stdout is the file, byte for byte
    written = [str(p) for p in (md_path, png_path) if p is not None]
    if written:
        console.info(f"report written to {' and '.join(written)}")


def write_report(ws, md_path, png_path, *, check_digest: bool = False):
    """Write the report of workspace ``ws``: the plot to ``png_path`` (PNG), then the markdown to
    ``md_path`` (either None: not written); returns the ``rounds.report.WorkspaceReport`` both were made from.
    Used by ``report`` and by ``demo``. When some round has timed pairs and a plot is written, their
    distribution is plotted beside the rounds plot (``pairs_plot_path``) and linked from a last "Timed pairs"
    section."""
    from contextlib import nullcontext
    from dataclasses import replace
    from pathlib import Path

    from ascendopt.rounds import report as rep
    from ascendopt.rounds.buckets_plot import plot_buckets
    from ascendopt.rounds.pairs_plot import plot_pairs
    from ascendopt.workspace import atomic_write_text

    md_for_links = md_path or Path.cwd() / "report.md"
    link = None if png_path is None else rep.plot_link(md_for_links, png_path)
    result = rep.workspace_report(ws, plot_name=link, check_digest=check_digest)
    paths = [Path(p).resolve() for p in (md_path, png_path) if p is not None]
    # a report written into the workspace is a write of it: under its lock, in its audit log (elsewhere, or
    # to stdout only, a report only reads the workspace: no lock, so a read-only workspace can be reported)
    into = any(ws.root.resolve() in p.parents for p in paths)
    with ws.lock() if into and ws.contract_path.is_file() and ws.held_by_this_process() is None else nullcontext():
        if png_path is not None:
            rep.plot_rounds(result.contract, result.records, png_path)
            pairs_path = pairs_plot_path(png_path)
            if plot_pairs(result.records, pairs_path) is not None:
                section = ("\n## Timed pairs\n\nEach dot is one timed pair (candidate / baseline time, measured next "
                           "to each other); the box holds the middle half.\n\n![timed pairs per round]"
                           f"({rep.plot_link(md_for_links, pairs_path)})\n")
                result = replace(result, markdown=result.markdown.rstrip("\n") + "\n" + section)
        plotted = png_path is not None and plot_buckets(result.records, buckets_plot_path(png_path)) is not None
        section = shape_mix_section(result.records, rep.plot_link(md_for_links, buckets_plot_path(png_path))
                                    if plotted else None)
        if section:
            result = replace(result, markdown=result.markdown.rstrip("\n") + "\n" + section)
        if md_path is not None:
            atomic_write_text(md_path, result.markdown)
    return result


def shape_mix_section(records, plot_link: str | None) -> str:
    """The report's "Shape mix" section: per round timed over a served-shape mix, its weighted verdict and its
    per-bucket table against the baseline (``cli.render.bucket_table_rows``, the table the gate and ``status
    --rounds`` print), then the plot of speedup against weight (``plot_link``; None: not drawn). "" when no round
    was timed over a mix."""
    from ascendopt.cli.render import BUCKET_COLUMNS, bucket_table_rows

    lines = []
    for r in records:
        weighted = (r.timing or {}).get("weighted") or {}
        if not weighted.get("buckets"):
            continue
        versus = weighted.get("vs_baseline") or {}
        lines += ["", f"Round {r.number} ({r.verdict}): weighted speedup vs baseline "
                      f"{versus.get('speedup', 0):.3f}x, {versus.get('verdict')} ({versus.get('reason')})", ""]
        lines += ["| " + " | ".join(BUCKET_COLUMNS) + " |", "|" + "|".join("---" for _ in BUCKET_COLUMNS) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in bucket_table_rows(weighted["buckets"])]
    if not lines:
        return ""
    head = ["", "## Shape mix", "", "Each round over the served-shape mix is judged on every bucket: the weighted "
            "speedup, and a floor per bucket of weight >= 5 % (broken: slower there beyond its band, which no "
            "faster total can buy back)."]
    tail = ["", f"![speedup per bucket against its weight]({plot_link})"] if plot_link else []
    return "\n".join([*head, *lines, *tail]) + "\n"


def buckets_plot_path(png_path):
    """The per-bucket plot beside the rounds plot: ``rounds.png`` -> ``rounds-buckets.png``."""
    return png_path.with_name(f"{png_path.stem}-buckets{png_path.suffix or '.png'}")


def pairs_plot_path(png_path):
    """The pair-distribution plot beside the rounds plot: ``rounds.png`` -> ``rounds-pairs.png``."""
    return png_path.with_name(f"{png_path.stem}-pairs{png_path.suffix or '.png'}")


EXAMPLES = examples(
    "ascendopt report",
    "ascendopt report --out mr.md --plot mr.png",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(report)
