"""`ascendopt gate`: step 5 for CI — integrity, correctness, kernel hit, performance; one exit code."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import EventsOpt, JsonOpt, TimeoutOpt, WorkspaceOpt, examples

_STATUS = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP", "not-run": "-", "inconclusive": "INCONCLUSIVE",
           "implausible": "IMPLAUSIBLE"}


def _render(result) -> None:
    """Stage table, per-tensor report, verdict lines and the final line (stdout)."""
    from ascendopt import console
    from ascendopt.cli.render import tensor_report_lines
    from ascendopt.gate.bench import DecisionRule
    from ascendopt.gate.correctness import TensorReport
    from ascendopt.gate.result import IMPLAUSIBLE_ADVICE, INCONCLUSIVE_ADVICE

    console.table(["stage", "status", "summary"],
                  [(s.name, _STATUS[s.status], s.summary) for s in result.stages], title="ascendopt gate")
    for stage in result.stages:
        tensors = stage.data.get("tensors")
        if tensors:
            for line in tensor_report_lines(TensorReport(**item) for item in tensors):
                console.out(line)
        if stage.name == "kernel_hit" and stage.status == "fail":
            console.out("kernels seen: " + ", ".join(stage.data.get("seen", [])[:15]))
        if stage.name == "correctness" and stage.status == "fail" and "equivalence" in stage.data:
            for check in stage.checks:  # own code: each output (or input) that differs from the frozen commit's
                if not check.passed:
                    console.out(check.message)
        elif stage.name == "correctness" and stage.status == "fail" and "outcomes" in stage.data:
            for line in stage.failure_lines(tail=False):  # own code: each frozen test that does not pass
                console.out(line)
        if stage.name == "correctness" and stage.status == "fail" and "output_tail" in stage.data:
            console.out(stage.data["output_tail"])
        if stage.name == "performance" and stage.status in ("pass", "fail", "inconclusive", "implausible"):
            for check in stage.checks:
                console.out(check.message)
    for note in result.notes:
        console.info(f"note: {note}")
    if result.passed:
        perf = next(s for s in result.stages if s.name == "performance")
        faster = [c for c in perf.data.get("comparisons", []) if c["verdict"] == "faster"]
        extra = "; ".join(f"{c['case']} {c['speedup']:.3f}x faster" for c in faster)
        console.out("gate: PASS" + (f" ({extra})" if extra else ""))
    elif result.failed_stage is not None:
        console.out(f"gate: FAIL at {result.failed_stage.name} (exit {result.exit_code})")
    elif result.inconclusive_stage is None:
        stage = result.implausible_stage
        console.out(f"gate: IMPLAUSIBLE at {stage.name} (exit {result.exit_code}): "
                    + "; ".join(f"{i['case']}: {i['reason']}" for i in stage.data.get("implausible", []))
                    + "; not a pass")
        console.out(f"advice: {IMPLAUSIBLE_ADVICE}")
    else:
        stage = result.inconclusive_stage
        bands = [c["threshold_rel"] for c in stage.data.get("comparisons", []) if c["verdict"] == "inconclusive"]
        console.out(f"gate: INCONCLUSIVE at {stage.name} (exit {result.exit_code}): noise band "
                    f"±{max(bands):.2%} stayed wider than ±{DecisionRule().max_band:.0%}; not a pass")
        console.out(f"advice: {INCONCLUSIVE_ADVICE}")


def gate(
    skip_perf: Annotated[bool, typer.Option("--skip-perf", help="Skip the performance stage (CPU-only CI).")] = False,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="NAME=VALUE",
        help="Bundled kernel: candidate tunables NAME=VALUE over the frozen configuration (default: the "
                      "best kept round's configuration, else the frozen one).")] = None,
    pairs: Annotated[int, typer.Option(
        "--pairs", metavar="N",
        min=12, help="Interleaved sample pairs per timed case (>= 12: with fewer, the signed-rank "
                                "test cannot reach p < 0.002 and no regression could ever be called).")] = 30,
    junit: Annotated[
        str | None, typer.Option("--junit", metavar="PATH",
            help="Write JUnit XML (one testcase per stage/tensor) to PATH.")
    ] = None,
    accept_implausible: Annotated[str | None, typer.Option(
        "--accept-implausible", metavar="REASON",
        help="Take an implausible speedup (> 5x, or under the device's roofline floor) as a pass, for the reason "
             "given (printed and in --json). Without it such a gate exits 6.")] = None,
    timeout: TimeoutOpt = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Step 5: integrity, correctness, kernel hit, performance.

    Check the contract: integrity (exit 3), correctness (1), kernel hit (1), performance vs baseline (4;
    6 when the noise band is too wide to tell or the speedup is implausible).

    Stages run in that order and stop at the first red one. Correctness of a bundled kernel compares
    every output and gradient with the fp32 oracle over the frozen shape matrix with NaN-poisoned
    outputs; own code runs the frozen test command, then calls workload() in a child process and
    compares what it returns with the frozen commit's (tolerances frozen at freeze).
    Performance interleaves baseline and candidate (bundled: two configurations in this process; own
    code: the frozen commit in a temporary git worktree against the working tree). A workload or test
    that raises, crashes or outlives its limit is a red stage (exit 1) naming file:line or the limit;
    the table, --json and --junit are written all the same. A speedup is only printed on a green gate.
    """
    from pathlib import Path

    from ascendopt import console
    from ascendopt.cli.next_steps import after_gate
    from ascendopt.contract.frozen import project_root
    from ascendopt.gate.stages import run_gate
    from ascendopt.kernels.spec import parse_assignments
    from ascendopt.workspace import Workspace, atomic_write_text, check_output_path

    if junit:  # before the gate runs: a verdict must never be lost to an unwritable report path
        check_output_path(junit, "--junit")
    ws = Workspace.resolve(workspace)
    result = run_gate(ws, skip_perf=skip_perf, config_override=parse_assignments(set_) or None, pairs=pairs,
                      timeout=timeout, accept_implausible=_reason(accept_implausible))
    if junit:
        atomic_write_text(Path(junit), result.to_junit(str(project_root())))
    console.next_steps(after_gate(ws, result.passed))
    if json:
        console.print_json(result.to_dict())
    else:
        _render(result)
    blocking = result.blocking_stage  # red, else inconclusive: either way not a pass
    if blocking is not None:
        raise blocking.error()


EXAMPLES = examples(
    "ascendopt gate",
    "ascendopt gate --junit gate.xml --json",
    "ascendopt --backend cpu gate --skip-perf --junit gate-cpu.xml",
    "ascendopt gate --set block_rows=16 --pairs 60",
)


def _reason(text: str | None) -> str | None:
    """``--accept-implausible``: a reason, not an empty string (exit 2)."""
    from ascendopt.errors import UsageError

    if text is not None and not text.strip():
        raise UsageError("--accept-implausible: give the reason the speedup is real (one line)")
    return text.strip() if text is not None else None


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(gate)
