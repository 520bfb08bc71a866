"""`ascendopt demo`: the whole loop on a bundled kernel, in a temporary (or given) workspace.

freeze -> collect -> analyze -> optimize-round (one tunable change) -> gate -> reprofile -> report,
on the best backend present. The settings per backend and steps 1-6 are ``rounds.demo``; the
report is written by ``cli.report.write_report``, the code of ``ascendopt report``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import EventsOpt, JsonOpt, examples

DEFAULT_WORKSPACE = "ascendopt-demo"  # under the current directory


def _analysis_table(report: dict[str, Any]) -> None:
    from ascendopt import console

    rows = [(k.get("name"), f"{(k.get('share') or 0):.1%}", f"{(k.get('avg_us') or 0):.2f}", k.get("bound") or "-")
            for k in (report or {}).get("kernels", [])[:5]]
    console.table(["kernel", "share", "avg us", "bound"], rows, title="analyze: hot kernels")


def _round_result(record, hypothesis: str) -> None:
    """Step 4's result, printed as soon as the round is recorded."""
    from ascendopt import console
    from ascendopt.cli.render import render_round_summary

    console.out(f"round {record.number} hypothesis: {hypothesis}")
    render_round_summary(record.summary, f"round {record.number} ({record.direction})")


def _gate_result(gate) -> None:
    """Step 5's result, printed as soon as the gate has run."""
    from ascendopt import console

    state = "GREEN" if gate.passed else (f"RED at {gate.failed_stage.name}" if gate.failed_stage else
                                         f"INCONCLUSIVE at {gate.inconclusive_stage.name} (noise band too wide)")
    console.out(f"gate: {state}: " + "; ".join(f"{s.name} {s.status}" for s in gate.stages))
    for note in gate.notes:
        if note.startswith("candidate: "):
            console.out(f"gate {note}")


def demo(
    kernel: Annotated[str, typer.Option("--kernel", metavar="NAME",
        help="Bundled kernel to run the loop on.")] = "rms_norm",
    shape: Annotated[
        str | None, typer.Option("--shapes", "--shape", metavar="SHAPE",
                                 help="Shape preset (default: tiny on cpu, realistic on a device).")
    ] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", "-w", metavar="DIR",
            help=f"Workspace folder (default ./{DEFAULT_WORKSPACE}, "
                                 "replaced on each run; the previous one is archived in it).")
    ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the contract of an existing -w workspace (the old contract and its rounds are "
                        "archived, as freeze --force).")] = False,
    pairs: Annotated[
        int | None, typer.Option("--pairs", metavar="N",
            help="Interleaved timing pairs (default 16 on cpu, 30 on a device).")
    ] = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """The whole loop on a bundled kernel, in one command.

    Run the whole loop on a bundled kernel and print the round summary and where the files are."""
    from pathlib import Path

    from ascendopt.rounds import run as round_run

    round_run.prepare_backend()  # before anything imports the kernel registry
    from ascendopt import console
    from ascendopt.cli.next_steps import after_demo
    from ascendopt.cli.report import write_report
    from ascendopt.rounds import demo as round_demo
    from ascendopt.workspace import Workspace

    plan = round_demo.plan(kernel, shape=shape, pairs=pairs)
    # A folder the user can find and open (not a temporary one left behind in /tmp); the default one
    # is the demo's own, so a second run replaces its contract (archived) without asking.
    root = Path(workspace) if workspace else Path(DEFAULT_WORKSPACE)
    ws = Workspace(root.resolve())
    ws.check_writable()
    console.info(f"demo: {kernel} [{plan.preset}] on {plan.backend} ({plan.device_name}); workspace {ws.root}")
    round_demo.keep_out_of_git(ws)
    with console.progress("demo", total=len(round_demo.STEPS)) as bar:
        result = round_demo.run_demo(ws, plan, step=bar.update, advance=bar.advance,
                                     on_analysis=None if json else _analysis_table,
                                     on_round=None if json else _round_result,
                                     on_gate=None if json else _gate_result, force=force or workspace is None)
        bar.update("demo 7/7 report: markdown and plot")
        md, png = ws.root / "report.md", ws.root / "rounds.png"
        write_report(ws, md, png, check_digest=True)  # the demo froze this contract itself: it must verify
        bar.advance()
    out = {**result.data, "report": {"markdown": str(md), "plot": str(png)}}

    if json:
        console.print_json(out)
    else:
        console.out(f"stop criteria: {result.reprofile['stop']['reason']}")
        console.out("")
        console.out(f"files under {ws.root}:")
        for label, path in (("contract", ws.contract_path), ("round record", result.round_path),
                            ("profiles", ws.profiles_dir), ("report", md), ("plot", png)):
            console.out(f"  {label:<13} {path}")
    console.next_steps(after_demo(ws))
    if result.exit_code:
        raise typer.Exit(result.exit_code)


EXAMPLES = examples(
    "ascendopt demo",
    "ascendopt demo --kernel l2norm --shapes tiny --pairs 8 -w /tmp/demo --force",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(demo)
