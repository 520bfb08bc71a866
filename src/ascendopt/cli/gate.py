"""`ascendopt gate`: step 5 for CI — integrity, correctness, kernel hit, performance; one exit code."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt

_STATUS = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP", "not-run": "-"}


def _render(result) -> None:
    """Stage table, per-tensor report, verdict lines and the final line (stdout)."""
    from ascendopt import console
    from ascendopt.cli.render import tensor_report_lines
    from ascendopt.gate.correctness import TensorReport

    console.table(["stage", "status", "summary"],
                  [(s.name, _STATUS[s.status], s.summary) for s in result.stages], title="ascendopt gate")
    for stage in result.stages:
        tensors = stage.data.get("tensors")
        if tensors:
            for line in tensor_report_lines(TensorReport(**item) for item in tensors):
                console.out(line)
        if stage.name == "kernel_hit" and stage.status == "fail":
            console.out("kernels seen: " + ", ".join(stage.data.get("seen", [])[:15]))
        if stage.name == "correctness" and stage.status == "fail" and "output_tail" in stage.data:
            console.out(stage.data["output_tail"])
        if stage.name == "performance" and stage.status in ("pass", "fail"):
            for check in stage.checks:
                console.out(check.message)
    for note in result.notes:
        console.info(f"note: {note}")
    if result.passed:
        perf = next(s for s in result.stages if s.name == "performance")
        faster = [c for c in perf.data.get("comparisons", []) if c["verdict"] == "faster"]
        extra = "; ".join(f"{c['case']} {c['speedup']:.3f}x faster" for c in faster)
        console.out("gate: PASS" + (f" ({extra})" if extra else ""))
    else:
        console.out(f"gate: FAIL at {result.failed_stage.name} (exit {result.exit_code})")


def gate(
    skip_perf: Annotated[bool, typer.Option("--skip-perf", help="Skip the performance stage (CPU-only CI).")] = False,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Bundled kernel: candidate tunables NAME=VALUE (default: the frozen configuration).")] = None,
    pairs: Annotated[int, typer.Option(
        "--pairs", min=12, help="Interleaved sample pairs per timed case (>= 12: with fewer, the signed-rank "
                                "test cannot reach p < 0.002 and no regression could ever be called).")] = 30,
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write JUnit XML (one testcase per stage/tensor) to FILE.")
    ] = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Check the contract: integrity (exit 3), correctness (1), kernel hit (1), performance vs baseline (4).

    Stages run in that order and stop at the first red one. Correctness of a bundled kernel compares
    every output and gradient with the fp32 oracle over the frozen shape matrix with NaN-poisoned
    outputs; own code runs the frozen test command. Performance interleaves baseline and candidate
    (bundled: two configurations in this process; own code: the frozen commit in a temporary git
    worktree against the working tree). A speedup is only printed on a green gate.
    """
    from pathlib import Path

    from ascendopt import console
    from ascendopt.gate.stages import run_gate
    from ascendopt.kernels.spec import parse_assignments
    from ascendopt.workspace import Workspace, atomic_write_text

    ws = Workspace.resolve(workspace)
    result = run_gate(ws, skip_perf=skip_perf, config_override=parse_assignments(set_) or None, pairs=pairs)
    if junit:
        atomic_write_text(Path(junit), result.to_junit())
    if json:
        console.print_json(result.to_dict())
    else:
        _render(result)
    failed = result.failed_stage
    if failed is not None:
        raise failed.error()


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(gate)
