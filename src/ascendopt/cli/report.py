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
            help="PNG file to write (default next to the markdown: rounds.png).")
    ] = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Markdown and a plot of the rounds for a merge request.

    Write the contract and rounds as a merge-request summary: task, environment, baseline, one OPT_LOG
    row per round, promotion stats, no-go bar, exact commands; and a plot of the rounds. Both paths are checked
    before anything is written (a folder or an unwritable place: exit 2, nothing written); `--out -` only reads,
    so it works on a workspace this user cannot write."""
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
        console.print_json({"markdown": None if md_path is None else str(md_path),
                            "plot": None if png_path is None else str(png_path), "rounds": len(result.records),
                            "best_round": result.best_round, "stop": result.stop.to_dict()})
        return
    console.out(result.markdown.removesuffix("\n"))  # out() ends the line: stdout is the file, byte for byte
    written = [str(p) for p in (md_path, png_path) if p is not None]
    if written:
        console.info(f"report written to {' and '.join(written)}")


def write_report(ws, md_path, png_path, *, check_digest: bool = False):
    """Write the report of workspace ``ws``: the plot to ``png_path`` (PNG), then the markdown to
    ``md_path`` (either None: not written); returns the ``rounds.report.WorkspaceReport`` both were made from.
    Used by ``report`` and by ``demo``."""
    from contextlib import nullcontext
    from pathlib import Path

    from ascendopt.rounds import report as rep
    from ascendopt.workspace import atomic_write_text

    link = None if png_path is None else rep.plot_link(md_path or Path.cwd() / "report.md", png_path)
    result = rep.workspace_report(ws, plot_name=link, check_digest=check_digest)
    paths = [Path(p).resolve() for p in (md_path, png_path) if p is not None]
    # a report written into the workspace is a write of it: under its lock, in its audit log (elsewhere, or
    # to stdout only, a report only reads the workspace: no lock, so a read-only workspace can be reported)
    into = any(ws.root.resolve() in p.parents for p in paths)
    with ws.lock() if into and ws.contract_path.is_file() and ws.held_by_this_process() is None else nullcontext():
        if png_path is not None:
            rep.plot_rounds(result.contract, result.records, png_path)
        if md_path is not None:
            atomic_write_text(md_path, result.markdown)
    return result


EXAMPLES = examples(
    "ascendopt report",
    "ascendopt report --out mr.md --plot mr.png",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(report)
