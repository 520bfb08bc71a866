"""`ascendopt report`: markdown for a merge request and a PNG of latency per round."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt


def report(
    out: Annotated[
        str | None, typer.Option("--out", help="Markdown file to write (default <workspace>/report.md).")
    ] = None,
    plot: Annotated[
        str | None, typer.Option("--plot", help="PNG file to write (default next to the markdown: rounds.png).")
    ] = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Write the contract and rounds as a merge-request summary: task, environment, baseline, one OPT_LOG
    row per round, promotion stats, no-go bar, exact commands; and a plot of the rounds."""
    from pathlib import Path

    from ascendopt import console
    from ascendopt.contract import model as contract_mod
    from ascendopt.rounds import records as rounds
    from ascendopt.rounds import report as rep
    from ascendopt.rounds import run as round_run
    from ascendopt.workspace import Workspace, atomic_write_text

    ws = Workspace.resolve(workspace)
    contract = contract_mod.load(ws, check_digest=False)  # a report reads; the gate judges integrity
    records = rounds.load_rounds(ws)
    md_path = Path(out) if out else ws.root / "report.md"
    png_path = Path(plot) if plot else md_path.with_name("rounds.png")
    data = contract.to_dict()
    rep.plot_rounds(data, records, png_path)
    rel = png_path.name if png_path.parent.resolve() == md_path.parent.resolve() else str(png_path.resolve())
    text = rep.render_markdown(data, records, plot_name=rel, max_rounds=round_run.max_rounds(contract))
    atomic_write_text(md_path, text)
    if json:
        best = rounds.best_round(records)
        console.print_json({"markdown": str(md_path), "plot": str(png_path), "rounds": len(records),
                            "best_round": best.number if best else None,
                            "stop": rounds.should_stop(records, max_rounds=round_run.max_rounds(contract)).to_dict()})
        return
    console.out(text)
    console.info(f"report written to {md_path} and {png_path}")


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(report)
