"""`ascendopt reprofile`: collect again, diff, reclassify, did the targeted metric move, stop criteria."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import EventsOpt, JsonOpt, TimeoutOpt, WorkspaceOpt, examples


def reprofile(
    target_metric: Annotated[
        str | None, typer.Option("--target-metric", metavar="METRIC",
            help="Metric to judge (default: the last round's).")
    ] = None,
    timeout: TimeoutOpt = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Step 6: profile the best again, apply the stop criteria.

    Profile the best configuration so far with the contract's metric groups, compare it with the
    profile before the last change, reclassify the hot kernel, say whether the metric the last
    hypothesis targeted moved, and apply the stop criteria (stall, floor, max_rounds, directions)."""
    from ascendopt import console
    from ascendopt.cli.next_steps import after_reprofile
    from ascendopt.rounds import run as round_run

    round_run.prepare_backend()
    from ascendopt.rounds import reprofile as rp
    from ascendopt.rounds.context import RoundContext
    from ascendopt.workspace import Workspace

    ws = Workspace.resolve(workspace)
    ws.require_contract()
    ws.check_writable()
    with ws.lock(), console.progress("reprofile") as bar:
        result = rp.reprofile(RoundContext.load(ws), target_metric=target_metric, step=bar.update, timeout=timeout)
    console.next_steps(after_reprofile(ws, result["summary"]))
    if json:
        console.print_json(result)
        return
    print_result(result)


def print_result(result: dict) -> None:
    """The round summary of a reprofile (its last line applies the stop criteria) and the folders compared."""
    from pathlib import Path

    from ascendopt import console
    from ascendopt.cli.render import render_round_summary

    profiled = result.get("profiled") or {}
    title = "reprofile of " + profiled["text"] if profiled.get("text") else "reprofile"
    render_round_summary(result["summary"], title)
    for note in result.get("notes") or []:
        console.info(f"note: {note}")
    console.out(f"previous: {', '.join(Path(p).name for p in result['previous'])}")
    console.out(f"profile: {', '.join(result['profiles'])}")


EXAMPLES = examples(
    "ascendopt reprofile",
    "ascendopt reprofile --target-metric mte2_ratio --json",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(reprofile)
