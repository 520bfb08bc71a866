"""`ascendopt gate`: step 5 for CI — integrity, correctness, kernel hit, performance; one exit code."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import (
    CsvOpt,
    DevicesOpt,
    EventsOpt,
    JsonOpt,
    RayOpt,
    TimeoutOpt,
    WorkspaceOpt,
    examples,
)

_STATUS = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP", "not-run": "-", "inconclusive": "INCONCLUSIVE",
           "implausible": "IMPLAUSIBLE"}


def _stage_summary(stage) -> str:
    """A stage's table cell. The performance stage's per-case lines are printed under the table (with their
    spread), so its cell says only how many cases were timed and how many passed: printed once, not twice."""
    if stage.name == "performance" and stage.status in ("pass", "fail", "inconclusive", "implausible") and stage.checks:
        passed = sum(1 for c in stage.checks if c.passed)
        return f"{passed} of {len(stage.checks)} timed case(s) pass; per case below"
    return stage.summary


def _render(result) -> None:
    """Stage table, per-tensor report, per-case timing with the spread of its pairs, the verdict line (stdout)."""
    from ascendopt import console
    from ascendopt.cli.render import render_bucket_table, spread_lines, tensor_report_lines
    from ascendopt.judge.bench import DecisionRule
    from ascendopt.judge.correctness import TensorReport
    from ascendopt.judge.result import IMPLAUSIBLE_ADVICE, INCONCLUSIVE_ADVICE

    console.table(["stage", "status", "summary"],
                  [(s.name, console.styled(_STATUS[s.status], s.status), _stage_summary(s)) for s in result.stages],
                  title="ascendopt gate")
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
            comparisons = stage.data.get("comparisons", [])
            # an implausible case's reason ends its line; when it is not accepted, the verdict line below names
            # it: printed once, there (the check keeps it for --json and JUnit)
            held = {} if stage.status != "implausible" else {
                i["case"]: f"; implausible: {i['reason']}" for i in stage.data.get("implausible", [])}
            for i, check in enumerate(stage.checks):
                console.out(check.message.removesuffix(held.get(check.name, "")))
                samples = comparisons[i].get("samples_ms") if i < len(comparisons) else None
                for line in spread_lines(samples or {}):
                    console.out(line)
            weighted = stage.data.get("weighted")
            render_bucket_table(stage.data.get("buckets") or [],
                                "per bucket of the shape mix" + (f": weighted speedup {weighted['speedup']:.3f}x, "
                                                                 f"{weighted['verdict']}" if weighted else ""))
    for note in result.notes:
        console.info(f"note: {note}")
    if result.passed:
        perf = next(s for s in result.stages if s.name == "performance")
        faster = [c for c in perf.data.get("comparisons", []) if c["verdict"] == "faster"]
        extra = "; ".join(f"{c['case']} {c['speedup']:.3f}x faster" for c in faster)
        console.verdict("gate: PASS" + (f" ({extra})" if extra else ""), "pass")
    elif result.failed_stage is not None:
        console.verdict(f"gate: FAIL at {result.failed_stage.name} (exit {result.exit_code})", "fail")
    elif result.inconclusive_stage is None:
        stage = result.implausible_stage
        console.verdict(f"gate: IMPLAUSIBLE at {stage.name} (exit {result.exit_code}): "
                        + "; ".join(f"{i['case']}: {i['reason']}" for i in stage.data.get("implausible", []))
                        + "; not a pass", "implausible")
        console.out(f"advice: {IMPLAUSIBLE_ADVICE}")
    else:
        stage = result.inconclusive_stage
        bands = [c["threshold_rel"] for c in stage.data.get("comparisons", []) if c["verdict"] == "inconclusive"]
        # a band too wide to tell, or (own code) a doubt of the judge about timing that could tell: the
        # stage's summary names it (the clocks disagree, the baseline moved, a side was not idle)
        why = (f"noise band ±{max(bands):.2%} stayed wider than ±{DecisionRule().max_band:.0%}" if bands
               else stage.summary.removeprefix("inconclusive: "))
        console.verdict(f"gate: INCONCLUSIVE at {stage.name} (exit {result.exit_code}): {why}; not a pass",
                        "inconclusive")
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
    all_: Annotated[bool, typer.Option(
        "--all", help="Gate every workspace (.ascendopt/ with a contract) under --root: one exit code for the "
                      "lot (the worst: 3 > 1 > 2 > 5 > 4 > 6 > 0), one --junit file; spread over --devices / "
                      "--ray.")] = False,
    root: Annotated[str | None, typer.Option(
        "--root", metavar="DIR", help="--all: the folder searched for workspaces (default: the project root).")] = None,
    devices: DevicesOpt = None,
    ray: RayOpt = None,
    timeout: TimeoutOpt = None,
    workspace: WorkspaceOpt = None,
    csv: CsvOpt = False,
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
    code: the frozen commit, its files read from git and verified, against the working tree). A workload or
    test that raises, crashes or outlives its limit is a red stage (exit 1) naming file:line or the limit;
    the table, --json and --junit are written all the same. A speedup is only printed on a green gate.
    """
    from pathlib import Path

    from ascendopt import console
    from ascendopt.cli.next_steps import after_gate
    from ascendopt.contract.frozen import project_root
    from ascendopt.gate.stages import judged_round, run_gate
    from ascendopt.kernels.spec import parse_assignments
    from ascendopt.workspace import Workspace, atomic_write_text, check_output_path

    if junit:  # before the gate runs: a verdict must never be lost to an unwritable report path
        check_output_path(junit, "--junit")
    if csv:
        console.configure(csv=True)
    if all_ or root is not None or devices is not None or ray is not None:
        _gate_all(all_, root, devices, ray, workspace=workspace, sets=set_, skip_perf=skip_perf, pairs=pairs,
                  timeout=timeout, accept_implausible=_reason(accept_implausible), junit=junit, json=json)
        return
    ws = Workspace.resolve(workspace)
    result = run_gate(ws, skip_perf=skip_perf, config_override=parse_assignments(set_) or None, pairs=pairs,
                      timeout=timeout, accept_implausible=_reason(accept_implausible))
    if junit:
        atomic_write_text(Path(junit), result.to_junit(str(project_root())))
    console.next_steps(after_gate(ws, result.passed, judged_round(ws, parse_assignments(set_) or None)
                                  if result.passed else None))
    if json:
        console.print_json(result.to_dict())
    else:
        _render(result)
    blocking = result.blocking_stage  # red, else inconclusive: either way not a pass
    if blocking is not None:
        raise blocking.error()


def _gate_all(all_: bool, root: str | None, devices: str | None, ray: str | None, *, workspace: str | None,
              sets: list[str] | None, skip_perf: bool, pairs: int, timeout: float | None,
              accept_implausible: str | None, junit: str | None, json: bool) -> None:
    """``gate --all``: every workspace under ``root``, on a pool where given (``gate.many``); a table of them (or
    --json), one JUnit file, and the lot's exit code."""
    from pathlib import Path

    from ascendopt import console
    from ascendopt.cli.options import pool_options
    from ascendopt.cli.render import pool_line, render_pool
    from ascendopt.contract.frozen import project_root
    from ascendopt.errors import AscendoptError, ExitCode, UsageError
    from ascendopt.gate.many import gate_all
    from ascendopt.gate.many import junit as junit_xml
    from ascendopt.workspace import atomic_write_text

    if not all_:
        given = "--root" if root is not None else "--devices" if devices is not None else "--ray"
        raise UsageError(f"{given} applies to gate --all (every workspace of the repository)")
    if workspace is not None or sets:
        raise UsageError(f"gate --all and {'--workspace' if workspace is not None else '--set'} exclude each other: "
                         "--all gates every workspace as frozen")
    folder = Path(root).expanduser().resolve() if root is not None else project_root()
    if not folder.is_dir():
        raise UsageError(f"--root {root}: not a folder")
    pool = pool_options(devices, ray)
    with console.progress("gate --all", total=0) as bar:
        def on_result(r):
            bar.advance()
            console.status(f"gate --all: {r['workspace']}: exit {r['exit_code']}"
                           + (f" on {r['device']}" if r.get("device") else ""))

        def on_pool(progress):
            state = progress.to_dict()
            console.event("pool", phase="gate --all", **state)
            bar.set_total(state["total"])
            bar.update(pool_line(state))

        result = gate_all(folder, pool=pool, skip_perf=skip_perf, pairs=pairs, timeout=timeout,
                          accept_implausible=accept_implausible, on_result=on_result, on_pool=on_pool)
    if junit:
        atomic_write_text(Path(junit), junit_xml(result))
    code = result["exit_code"]
    worst = [r["workspace"] for r in result["workspaces"] if r["exit_code"] == code]
    if json:
        first = next((r["result"] for r in result["workspaces"] if r["exit_code"] == code and r.get("result")), None)
        console.print_json({"schema": 1, "passed": result["passed"], "exit_code": code,
                            "failed_stage": (first or {}).get("failed_stage"),
                            "inconclusive_stage": (first or {}).get("inconclusive_stage"),
                            "implausible_stage": (first or {}).get("implausible_stage"), "stages": [],
                            "notes": [f"{r['workspace']}: exit {r['exit_code']}" for r in result["workspaces"]],
                            "root": result["root"], "workspaces": [{k: v for k, v in r.items() if k != "junit"}
                                                                   for r in result["workspaces"]],
                            "pool": result["pool"]})
    else:
        console.table(["workspace", "device", "exit", "verdict"],
                      [(r["workspace"], r.get("device") or "-", r["exit_code"],
                        console.styled("PASS", "pass") if r["exit_code"] == 0 else
                        (r.get("error") or _failed_text(r.get("result")))) for r in result["workspaces"]],
                      title=f"ascendopt gate --all: {len(result['workspaces'])} workspace(s) under {result['root']}")
        render_pool(result["pool"])
        console.verdict(f"gate --all: {'PASS' if code == 0 else f'exit {code}'} over {len(result['workspaces'])} "
                        "workspace(s)" + (f" (worst: {', '.join(worst)})" if code else ""),
                        "pass" if code == 0 else "fail")
    if code:
        error = AscendoptError(f"gate --all: exit {code} from {', '.join(worst)} (of {len(result['workspaces'])} "
                               "workspaces; each one's code in the table, --json and --junit)")
        error.exit_code = ExitCode(code)
        raise error


def _failed_text(result) -> str:
    """A gated workspace's verdict in a few words: the blocking stage and its status."""
    if not result:
        return "-"
    for key, word in (("failed_stage", "FAIL"), ("inconclusive_stage", "INCONCLUSIVE"),
                      ("implausible_stage", "IMPLAUSIBLE")):
        if result.get(key):
            return f"{word} at {result[key]}"
    return "PASS"


EXAMPLES = examples(
    "ascendopt gate",
    "ascendopt gate --junit gate.xml --json",
    "ascendopt --backend cpu gate --skip-perf --junit gate-cpu.xml",
    "ascendopt gate --set block_rows=16 --pairs 60",
    "ascendopt gate --all --devices 8 --junit gates.xml",
    "ascendopt gate --all --ray --skip-perf",
)


def _reason(text: str | None) -> str | None:
    """``--accept-implausible``: a reason, not an empty string (exit 2)."""
    from ascendopt.errors import UsageError

    if text is not None and not text.strip():
        raise UsageError("--accept-implausible: give the reason the speedup is real (one line)")
    return text.strip() if text is not None else None


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(gate)
