"""`ascendopt optimize-round`: one recorded round (steps 4+5+6), or `--auto` search over the tunables."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, TimeoutOpt, WorkspaceOpt


def optimize_round(
    hypothesis: Annotated[str, typer.Option("--hypothesis", help="One line: the change and why it should help.")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Bundled-kernel tunable NAME=VALUE (repeatable). Own code: edit the tree instead."),
    ] = None,
    direction: Annotated[
        str | None,
        typer.Option("--direction", help="The strategy this round belongs to, one word (tiling, vectorize, ...); "
                                         "default: own code the hypothesis's leading 'NAME:' tag, else 'code'; "
                                         "a bundled kernel the changed tunables."),
    ] = None,
    auto: Annotated[
        bool, typer.Option("--auto", help="Search the bundled kernel's tunables; each candidate is a round.")
    ] = False,
    budget: Annotated[
        int | None, typer.Option("--budget", help="--auto: fresh evaluations at most (default 25% of the space).")
    ] = None,
    allow_ub_overflow: Annotated[bool, typer.Option(
        "--allow-ub-overflow", help="--auto off-NPU: also search tiles the UB model says overflow the model chip "
                                    "(ASCENDOPT_CHIP); such rounds are marked. Default: pruned, as on npu.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Run even though a stop criterion is reached.")] = False,
    target_metric: Annotated[
        str | None,
        typer.Option("--target-metric", help="Metric the hypothesis should move (vec_ratio, MTE2, ...); "
                                             "default: from the hypothesis words, else the bottleneck class."),
    ] = None,
    pairs: Annotated[int, typer.Option("--pairs", help="Interleaved timing rounds per shape case.")] = 30,
    timeout: TimeoutOpt = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Gate the change (red gate: verdict drop, no speed), time it interleaved with the baseline and the
    best so far, re-profile with the contract's metric groups, record rounds/NNNN.yaml and print the
    round summary with the verdict keep | revert | drop | floor and whether another round is warranted.

    Refuses to run past a stop criterion (stall, floor, max_rounds, directions) without --force. A
    candidate that raises, crashes or outlives its limit (--timeout) at the gate, while timed or while
    re-profiled is recorded as a drop with the error and exits 1 (after recording).
    """
    from ascendopt import console
    from ascendopt.cli import next_steps
    from ascendopt.cli.render import format_config, render_round_summary, speedup_text, ub_text
    from ascendopt.errors import UsageError
    from ascendopt.gate import bench
    from ascendopt.rounds import auto as round_auto
    from ascendopt.rounds import run as round_run
    from ascendopt.workspace import Workspace

    round_run.prepare_backend()
    ws = Workspace.resolve(workspace)
    ws.require_contract()
    bench.check_pairs(pairs)
    sets = round_run.parse_sets(set_)
    if auto and sets:
        raise UsageError("--auto and --set exclude each other: --auto chooses the values")
    if budget is not None and not auto:
        raise UsageError("--budget applies to --auto only")
    if auto and direction is not None:
        raise UsageError("--auto and --direction exclude each other: each --auto round is named by the tunable "
                         "it changes")
    round_run.check_direction(direction)
    if allow_ub_overflow and not auto:
        raise UsageError("--allow-ub-overflow applies to --auto only (a --set tile over the UB is reported, "
                         "not refused, off-NPU)")

    if auto:
        rows = []

        def on_round(outcome):
            r = outcome.record
            rows.append(r)
            console.info(f"round {r.number}: {format_config(r.change.get('set'))} -> {r.verdict}"
                         + (f" ({r.candidate_ms:.4f} ms)" if r.candidate_ms else "")
                         + (f"; UB: {r.ub['warning']}" if (r.ub or {}).get("warning") else ""))

        with console.progress("optimize-round --auto") as bar:
            result = round_auto.run_auto(ws, hypothesis=hypothesis, budget=budget, force=force, pairs=pairs,
                                        step=bar.update, on_round=on_round, allow_ub_overflow=allow_ub_overflow)
        console.next_steps(next_steps.after_auto(ws))
        if json:
            console.print_json(result)
            return
        console.table(["round", "change", "gate", "median ms", "vs best", "verdict", "UB"],
                      [(r.number, format_config(r.change.get("set")),
                        "pass" if r.gate.get("passed") else "fail",
                        "-" if r.candidate_ms is None else f"{r.candidate_ms:.4f}",
                        speedup_text(r.ratio_vs_best), r.verdict, ub_text(r.ub)) for r in rows],
                      title=f"auto search: {len(rows)} round(s); {result['space']} distinct of "
                            f"{result['feasible']} feasible configurations, {result['pruned']} pruned by the UB model "
                            f"of {result['ub_chip']}; budget {result['budget']}")
        if result["over_budget_rounds"]:
            console.out(f"UB over budget (--allow-ub-overflow) in round(s) "
                        f"{', '.join(map(str, result['over_budget_rounds']))}: those tiles would not compile on the "
                        f"NPU ({result['ub_chip']})")
        console.out(f"best configuration: {format_config(result['best'])}"
                    + (f" (UB: {result['best_ub_warning']})" if result["best_ub_warning"] else ""))
        console.out(f"cache: {result['cache']}")
        return

    with console.progress("optimize-round") as bar:
        outcome = round_run.run_round(ws, hypothesis=hypothesis, sets=sets, force=force, pairs=pairs,
                                      target_metric=target_metric, step=bar.update, direction=direction,
                                      timeout=timeout)
    record = outcome.record
    console.next_steps(next_steps.after_round(ws, record.summary))
    if json:
        console.print_json({**record.to_dict(), "path": str(outcome.path)})
    else:
        render_round_summary(record.summary, f"round {record.number} ({record.direction})")
        if not record.gate.get("passed"):
            console.out(f"gate: RED at {record.gate.get('failed_stage')}: {record.gate.get('summary')}")
        console.out(f"recorded: {outcome.path}")
    if outcome.exit_code:  # a drop exits with the gate's code (1 correctness, 3 integrity), after recording
        raise typer.Exit(outcome.exit_code)


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(optimize_round)
