"""`ascendopt optimize-round`: one recorded round (steps 4+5+6), or `--auto` search over the tunables."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import (
    AscendPythonOpt,
    DevicesOpt,
    EventsOpt,
    JsonOpt,
    NoPrecheckOpt,
    RayOpt,
    TimeoutOpt,
    WorkspaceOpt,
    examples,
)


def optimize_round(
    hypothesis: Annotated[str | None, typer.Option("--hypothesis", metavar="SENTENCE",
        help="One line: the change and why it should help (required, except with --auto: the search is "
             "the hypothesis).")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="NAME=VALUE",
            help="Bundled-kernel tunable NAME=VALUE (repeatable). Own code: edit the tree instead."),
    ] = None,
    direction: Annotated[
        str | None,
        typer.Option("--direction", metavar="NAME",
            help="The strategy this round belongs to, one word (tiling, vectorize, ...); "
                                         "default: own code the hypothesis's leading 'NAME:' tag, else 'code'; "
                                         "a bundled kernel the changed tunables."),
    ] = None,
    auto: Annotated[
        bool, typer.Option("--auto", help="Screen the bundled kernel's tunables fast (smoke check + short timing), "
                                          "then confirm the fastest as gated rounds. Own code: screen its "
                                          "@triton.autotune configs, each pinned, and name the one to pin.")
    ] = False,
    budget: Annotated[
        int | None, typer.Option("--budget", metavar="N",
            help="--auto: candidates screened at most (default: the whole space; "
                                                  "cached ones are free).")
    ] = None,
    budget_s: Annotated[
        float | None, typer.Option("--budget-s", metavar="SECONDS",
            help="--auto: screening's wall-time budget in seconds (default 240); "
                                                      "it stops there and says what it covered.")
    ] = None,
    confirm: Annotated[
        int | None, typer.Option("--confirm", metavar="N",
            help="--auto: the K fastest screened candidates become gated rounds "
                                                   "(default 2; 0 screens only).")
    ] = None,
    allow_ub_overflow: Annotated[bool, typer.Option(
        "--allow-ub-overflow", help="--auto off-NPU: also search tiles the UB model says overflow the model chip "
                                    "(ASCENDOPT_CHIP); such rounds are marked. Default: pruned, as on npu.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Run even though a stop criterion is reached.")] = False,
    target_metric: Annotated[
        str | None,
        typer.Option("--target-metric", metavar="METRIC",
            help="Metric the hypothesis should move (vec_ratio, MTE2, ...); "
                                             "default: from the hypothesis words, else the bottleneck class."),
    ] = None,
    pairs: Annotated[int, typer.Option("--pairs", metavar="N", help="Interleaved timing rounds per shape case.")] = 30,
    accept_implausible: Annotated[str | None, typer.Option(
        "--accept-implausible", metavar="REASON",
        help="Allow a keep on an implausible speedup (> 5x vs the baseline, or under the device's roofline "
             "floor), for the reason given; the reason is recorded in the round. Without it such a round is "
             "a revert.")] = None,
    no_reprofile: Annotated[bool, typer.Option(
        "--no-reprofile", help="Skip the profiles of the best so far and of the candidate: the round is gated "
                               "and timed as always, but records no pipe/UB metrics (said in the record).")] = False,
    timeout: TimeoutOpt = None,
    no_precheck: NoPrecheckOpt = False,
    ascend_python: AscendPythonOpt = None,
    devices: DevicesOpt = None,
    ray: RayOpt = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Steps 4-6: one recorded round: gate, timing, re-profile.

    Gate the change (red gate: verdict drop, no speed), time it interleaved with the baseline and the
    best so far, re-profile with the contract's metric groups, record rounds/NNNN.yaml and print the
    round summary with the verdict keep | revert | drop | floor and whether another round is warranted.

    Refuses to run past a stop criterion (stall, floor, max_rounds, directions) without --force. A
    candidate that raises, crashes or outlives its limit (--timeout) at the gate, while timed or while
    re-profiled is recorded as a drop with the error and exits 1 (after recording). Off-NPU, after a green
    gate, the candidate's kernels must lower for Ascend when a triton-ascend environment is present (else the
    round is a drop, red at correctness, with the compiler's message); --no-precheck skips it (recorded).
    """
    from ascendopt import console
    from ascendopt.cli import next_steps
    from ascendopt.cli.options import pool_options
    from ascendopt.cli.render import (
        format_config,
        pool_line,
        render_mix_screening,
        render_pool,
        render_round_summary,
        render_screening,
        speedup_text,
        ub_text,
    )
    from ascendopt.errors import UsageError
    from ascendopt.judge import bench
    from ascendopt.rounds import auto as round_auto
    from ascendopt.rounds import run as round_run
    from ascendopt.workspace import Workspace

    round_run.prepare_backend()
    ws = Workspace.resolve(workspace)
    ws.require_contract()
    ws.check_writable()
    bench.check_pairs(pairs)
    sets = round_run.parse_sets(set_)
    if auto and sets:
        raise UsageError("--auto and --set exclude each other: --auto chooses the values")
    for value, option in ((budget, "--budget"), (budget_s, "--budget-s"), (confirm, "--confirm")):
        if value is not None and not auto:
            raise UsageError(f"{option} applies to --auto only")
    if auto and direction is not None:
        raise UsageError("--auto and --direction exclude each other: each --auto round is named by the tunable "
                         "it changes")
    round_run.check_direction(direction)
    if hypothesis is None and not auto:
        raise UsageError("--hypothesis: required: one line, the change and why it should help",
                         hint='e.g. --hypothesis "tiling: larger row tile", or --auto to search the tunables')
    if accept_implausible is not None and (auto or not accept_implausible.strip()):
        raise UsageError("--accept-implausible: give the reason the speedup is real (one line); it applies to one "
                         "round, not to --auto")
    if allow_ub_overflow and not auto:
        raise UsageError("--allow-ub-overflow applies to --auto only (a --set tile over the UB is reported, "
                         "not refused, off-NPU)")
    if (devices is not None or ray is not None) and not auto:
        raise UsageError(f"{'--devices' if devices is not None else '--ray'} applies to --auto only: a pool screens "
                         "the candidates; one round is timed on one device")
    pool = pool_options(devices, ray)

    if auto:
        round_auto.check_auto_options(budget, budget_s, confirm)
        rows = []

        def on_round(outcome):
            r = outcome.record
            rows.append(r)
            console.info(f"round {r.number}: {format_config(r.change.get('set'))} -> {r.verdict}"
                         + (f" ({console.duration_text(r.candidate_ms * 1e3, digits=3)})" if r.candidate_ms else "")
                         + (f"; UB: {r.ub['warning']}" if (r.ub or {}).get("warning") else "")
                         + (f": {r.why}" if r.why else ""))

        with console.progress("optimize-round --auto: screening", total=0) as bar:
            def on_screened(row, run):
                bar.advance()
                best = run.best
                bar.update(f"screening: best {format_config(best.config)} {console.duration_text(best.ms * 1e3)}"
                           if best else
                           "screening: no candidate passed yet")

            def on_pool(progress):
                state = progress.to_dict()
                console.event("pool", phase="optimize-round --auto: screening", **state)
                bar.update(pool_line(state))

            result = round_auto.run_auto(ws, hypothesis=hypothesis, budget=budget, budget_s=budget_s,
                                        confirm=confirm, force=force, pairs=pairs, step=bar.update,
                                        on_round=on_round, on_screened=on_screened, on_space=bar.set_total,
                                        allow_ub_overflow=allow_ub_overflow, timeout=timeout,
                                        precheck=not no_precheck, ascend_python=ascend_python, pool=pool,
                                        on_pool=on_pool)
        console.next_steps(next_steps.after_auto(ws))
        if json:
            console.print_json(result)
            return
        render_screening(result["screening"])
        render_pool(result.get("pool"))
        render_mix_screening(result.get("mix"))
        if result.get("own_code"):
            for mix in (result.get("mixes") or {}).values():
                render_mix_screening(mix)
            for pin in result["pin"]:
                on_mix = pin["kernel"] in (result.get("mixes") or {})
                console.out(f"pin: {pin['path']}:{pin['line']} {pin['kernel']}: config #{pin['config']} "
                            f"({format_config(pin['kwargs'])}) screened fastest "
                            + ("weighted over the shape mix (" if on_mix else "at ")
                            + f"{console.duration_text(pin['ms'] * 1e3, digits=3)}"
                            + (" at the workload's own shape)" if on_mix else "") + "; replace "
                            "@triton.autotune with a launch passing these values, then run optimize-round (without "
                            "--auto): the gate measures that edit")
            if not result["pin"]:
                console.out("pin: no config passed the screening (see the table)")
            console.out(f"screening cache: {result['screening']['cache']}")
            return
        console.table(["round", "change", "gate", "median ms", "vs best", "verdict", "UB"],
                      [(r.number, format_config(r.change.get("set")),
                        "pass" if r.gate.get("passed") else "fail",
                        "-" if r.candidate_ms is None else f"{r.candidate_ms:.4f}",
                        speedup_text(r.ratio_vs_best), r.verdict, ub_text(r.ub)) for r in rows],
                      title=f"confirmation: {len(rows)} round(s), the fastest screened candidates gated and timed "
                            f"interleaved against the best; {result['space']} distinct of {result['feasible']} "
                            f"feasible configurations, {result['pruned']} pruned by the UB model of "
                            f"{result['ub_chip']}")
        if not rows:
            console.out("confirmation: no screened candidate was within "
                        f"{round_auto.CONFIRM_SLACK:.0%} of the best so far (or --confirm 0): nothing to confirm")
        if result["over_budget_rounds"]:
            console.out(f"UB over budget (--allow-ub-overflow) in round(s) "
                        f"{', '.join(map(str, result['over_budget_rounds']))}: those tiles would not compile on the "
                        f"NPU ({result['ub_chip']})")
        console.out(f"best configuration: {format_config(result['best'])}"
                    + (f" (UB: {result['best_ub_warning']})" if result["best_ub_warning"] else ""))
        console.out(f"screening cache: {result['screening']['cache']}")
        return

    with console.progress("optimize-round") as bar:
        outcome = round_run.run_round(ws, hypothesis=hypothesis, sets=sets, force=force, pairs=pairs,
                                      target_metric=target_metric, step=bar.update, direction=direction,
                                      timeout=timeout, precheck=not no_precheck, ascend_python=ascend_python,
                                      accept_implausible=accept_implausible, reprofile=not no_reprofile)
    record = outcome.record
    console.next_steps(next_steps.after_round(ws, record.summary, record))
    if json:
        console.print_json({**record.to_dict(), "path": str(outcome.path)})
    else:
        render_round_summary(record.summary, f"round {record.number} ({record.direction})", record.timing)
        if not record.gate.get("passed"):
            console.out(f"gate: RED at {record.gate.get('failed_stage')}: {record.gate.get('summary')}")
            error = record.gate.get("error")
            if error and error != record.gate.get("summary"):  # the failing tests' own error lines
                for line in str(error).splitlines():
                    console.out(f"  {line}")
        console.out(f"recorded: {outcome.path}")
    if outcome.exit_code:  # a drop exits with the gate's code (1 correctness, 3 integrity), after recording
        raise typer.Exit(outcome.exit_code)


EXAMPLES = examples(
    'ascendopt optimize-round --hypothesis "larger row tile" --set block_rows=16',
    'ascendopt optimize-round --hypothesis "search tiles" --auto --budget-s 120',
    "ascendopt optimize-round --auto --budget 8 --confirm 1",
    "# own code: edit the working tree first, then",
    'ascendopt optimize-round --hypothesis "tiling: larger blocks in my_kernel"',
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(optimize_round)
