"""`ascendopt report`: markdown for a merge request and a PNG of latency per round."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt, examples


def report(
    out: Annotated[
        str | None, typer.Option("--out", metavar="PATH",
            help="Markdown file to write (default WORKSPACE/report.md).")
    ] = None,
    plot: Annotated[
        str | None, typer.Option("--plot", metavar="PATH",
            help="PNG file to write (default next to the markdown: rounds.png).")
    ] = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Markdown and a plot of the rounds for a merge request.

    Write the contract and rounds as a merge-request summary: task, environment, baseline, one OPT_LOG
    row per round, promotion stats, no-go bar, exact commands; and a plot of the rounds. Without --out the
    markdown is also printed on stdout; with --out only the path of the file is."""
    from pathlib import Path

    from ascendopt import console
    from ascendopt.workspace import Workspace

    ws = Workspace.resolve(workspace)
    md_path = Path(out) if out else ws.root / "report.md"
    png_path = Path(plot) if plot else md_path.with_name("rounds.png")
    result = write_report(ws, md_path, png_path)  # a report reads; the gate judges integrity
    if json:
        pairs = pairs_plot_path(png_path)
        console.print_json({"markdown": str(md_path), "plot": str(png_path),
                            "pairs_plot": str(pairs) if pairs.is_file() else None, "rounds": len(result.records),
                            "best_round": result.best_round, "stop": result.stop.to_dict()})
        return
    if out:  # the markdown went where it was asked for: stdout says where, not the whole file again
        console.out(str(md_path))
        console.info(f"plot written to {png_path}")
        return
    console.out(result.markdown.removesuffix("\n"))  # out() ends the line: stdout is the file, byte for byte
    console.info(f"report written to {md_path} and {png_path}")


def write_report(ws, md_path, png_path, *, check_digest: bool = False):
    """Write the report of workspace ``ws``: the plot to ``png_path`` (PNG), then the markdown to
    ``md_path``; returns the ``rounds.report.WorkspaceReport`` both were made from. Used by
    ``report`` and by ``demo``. When some round has timed pairs, their distribution is plotted beside the
    rounds plot (``pairs_plot_path``) and linked from a last "Timed pairs" section."""
    from contextlib import nullcontext
    from dataclasses import replace

    from ascendopt.rounds import report as rep
    from ascendopt.rounds.pairs_plot import plot_pairs
    from ascendopt.workspace import atomic_write_text

    result = rep.workspace_report(ws, plot_name=rep.plot_link(md_path, png_path), check_digest=check_digest)
    pairs_path = pairs_plot_path(png_path)
    # a report written into the workspace is a write of it: under its lock, in its audit log
    with ws.lock() if ws.contract_path.is_file() and ws.held_by_this_process() is None else nullcontext():
        rep.plot_rounds(result.contract, result.records, png_path)
        if plot_pairs(result.records, pairs_path) is not None:
            section = (f"\n## Timed pairs\n\nEach dot is one timed pair (candidate / baseline time, measured next to "
                       f"each other); the box holds the middle half.\n\n![timed pairs per round]"
                       f"({rep.plot_link(md_path, pairs_path)})\n")
            result = replace(result, markdown=result.markdown.rstrip("\n") + "\n" + section)
        atomic_write_text(md_path, result.markdown)
    return result


def pairs_plot_path(png_path):
    """The pair-distribution plot beside the rounds plot: ``rounds.png`` -> ``rounds-pairs.png``."""
    return png_path.with_name(f"{png_path.stem}-pairs{png_path.suffix or '.png'}")


EXAMPLES = examples(
    "ascendopt report",
    "ascendopt report --out mr.md --plot mr.png",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(report)
