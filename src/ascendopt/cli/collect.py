"""`ascendopt collect`: checklist step 2 — profile a workload file or a bundled kernel, ONE metric
group per run (`--aic-metrics pipe,ub` makes two runs recorded as one set for `analyze`)."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer

from ascendopt.analyze.traces.columns import COLLECT_GROUP_ORDER, METRIC_GROUP_TABLE
from ascendopt.cli.options import EventsOpt, JsonOpt, WorkspaceOpt, examples

# The short alias of every group (the first one the table lists), so the help cannot drift from the parser.
_GROUPS_HELP = ("Metric groups, comma-separated, one profiler run each: "
                + ", ".join(METRIC_GROUP_TABLE[group].aliases[0] for group in COLLECT_GROUP_ORDER)
                + " (or the full names, e.g. PipeUtilization).")


def _parse_sets(items: list[str]) -> dict[str, str]:
    from ascendopt.kernels.spec import parse_assignments

    return parse_assignments(items)


def _command_line(args: list[tuple[str, object]]) -> str:
    """The canonical command that reproduces this collection (recorded in the profile metadata)."""
    parts = ["ascendopt", "collect"]
    for flag, value in args:
        if value is None or value is False:
            continue
        parts += [flag] if value is True else [flag, str(value)]
    return shlex.join(parts)


def collect(
    exec_file: Annotated[str | None, typer.Option(
        "--exec-file", metavar="PATH", help="Workload file: module code runs once, workload() each step.")] = None,
    kernel: Annotated[str | None, typer.Option("--kernel", metavar="NAME",
        help="A bundled kernel (see `ascendopt kernels`).")] = None,
    shape: Annotated[str | None, typer.Option(
        "--shapes", "--shape", metavar="SHAPE", help="--kernel: preset (tiny, realistic, ...) or dims B=2,T=64,D=128. "
                        "Default: tiny on cpu, realistic elsewhere.")] = None,
    mode: Annotated[str | None, typer.Option(
        "--mode", metavar="MODE", help="--kernel: fwd or fwdbwd (default: the kernel's first).")] = None,
    dtype: Annotated[str | None, typer.Option(
        "--dtype", metavar="DTYPE", help="--kernel: fp32, bf16, ... (default: the kernel's first).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="NAME=VALUE",
        help="--kernel: tunable NAME=VALUE (repeatable).")] = None,
    aic_metrics: Annotated[str, typer.Option("--aic-metrics", metavar="GROUPS", help=_GROUPS_HELP)] = "PipeUtilization",
    level: Annotated[str, typer.Option(
        "--level", metavar="LEVEL", help="npu profiler level: Level0 (no counters), Level1, Level2.")] = "Level1",
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME",
        help="Profile name (default: file stem or kernel name); only [A-Za-z0-9._-] kept.")] = None,
    out_dir: Annotated[str | None, typer.Option(
        "--out-dir", metavar="DIR",
        help="Parent folder of the profile folders (default: the workspace's profiles/ when -w is "
                          "given or ./.ascendopt (or $ASCENDOPT_WORKSPACE) holds a contract, else npu_prof).")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", metavar="SECONDS",
        help="Seconds per profiler run: a workload process running N metric groups gets N x this; "
                          "each ncu replay on cuda gets this.")] = 600.0,
    wait: Annotated[int, typer.Option("--wait", metavar="N", help="Schedule: steps skipped per cycle.")] = 0,
    warmup: Annotated[int, typer.Option(
        "--warmup", metavar="N", help="Schedule: warm-up steps per cycle (the first, compiling call lands here).")] = 1,
    active: Annotated[int, typer.Option("--active", metavar="N", help="Schedule: recorded steps per cycle.")] = 1,
    repeat: Annotated[int, typer.Option("--repeat", metavar="N", help="Schedule: cycles.")] = 1,
    skip_first: Annotated[int, typer.Option("--skip-first", metavar="N",
        help="Schedule: steps skipped once at the start.")] = 0,
    steps: Annotated[int | None, typer.Option(
        "--steps", metavar="N",
        help="Workload calls (default: one full schedule, skip_first + (wait+warmup+active) x repeat)."
    )] = None,
    kernel_filter: Annotated[str | None, typer.Option(
        "--kernel-filter", metavar="SUBSTRING",
        help="Substring of the kernel name ('regex:EXPR' for a regex): ncu profiles only these "
                                "(cuda); passed on to --analyze.")] = None,
    analyze: Annotated[bool, typer.Option(
        "--analyze", help="Run `ascendopt analyze` on the new profiles afterwards.")] = False,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Step 2: profile a workload, one metric group per run.

    Profile a workload with the backend's profiler and print the profile folder(s).

    Inside a workspace (-w, or ./.ascendopt with a contract) the folders go to its profiles/, where
    optimize-round and reprofile find them; --out-dir still wins.

    npu: torch_npu.profiler (CPU+NPU, Level1, the asked AiCMetrics group); cuda: torch.profiler, plus
    an Nsight Compute replay for the counters; cpu: torch.profiler over the Triton interpreter (no
    counters). Exit 2 for a bad workload (syntax error, no workload(), raises, hangs past --timeout),
    5 when the backend or ncu is missing.
    """
    from ascendopt import console
    from ascendopt.cli import next_steps
    from ascendopt.collect import collect_exec_file, collect_kernel
    from ascendopt.collect.api import out_dir_for
    from ascendopt.device import backends
    from ascendopt.errors import UsageError

    if (exec_file is None) == (kernel is None):
        raise UsageError("collect needs exactly one of --exec-file FILE or --kernel NAME")
    if timeout <= 0:
        raise UsageError(f"--timeout {timeout:g}: must be > 0 seconds")
    target, in_workspace = out_dir_for(out_dir, workspace)
    from ascendopt.workspace import Workspace, check_output_folder

    if in_workspace:
        Workspace(target.parent).check_writable()
    else:
        check_output_folder(target, "--out-dir")
    if in_workspace:
        console.info(f"collect: writing into the workspace's {target} (the loop reads its profiles there; "
                     "--out-dir writes elsewhere)")
    out_dir = str(target)
    schedule = {"profiler_level": level, "wait": wait, "warmup": warmup, "active": active, "repeat": repeat,
                "skip_first": skip_first, "steps": steps}
    common = [("--aic-metrics", aic_metrics), ("--level", level), ("--name", name), ("--out-dir", out_dir),
              ("--wait", wait), ("--warmup", warmup), ("--active", active), ("--repeat", repeat),
              ("--skip-first", skip_first), ("--steps", steps), ("--kernel-filter", kernel_filter)]
    from contextlib import nullcontext

    # into a workspace's profiles/: a write of the workspace, under its lock and in its audit log
    with Workspace(target.parent).lock() if in_workspace else nullcontext():
        if exec_file is not None:
            command = _command_line([("--exec-file", exec_file)] + common)
            paths = collect_exec_file(exec_file, metric_groups=aic_metrics, out_dir=out_dir, name=name,
                                      timeout=timeout, kernel_filter=kernel_filter, command=command, **schedule)
        else:
            config = _parse_sets(set_ or [])
            sets = [("--set", f"{k}={v}") for k, v in config.items()]
            command = _command_line([("--kernel", kernel), ("--shapes", shape), ("--mode", mode), ("--dtype", dtype)]
                                    + sets + common)
            paths = collect_kernel(kernel, shape=shape, dtype=dtype, mode=mode, config=config,
                                   metric_groups=aic_metrics, out_dir=out_dir, name=name, timeout=timeout,
                                   kernel_filter=kernel_filter, command=command, **schedule)
    profiles = [_summary(p) for p in paths]
    if analyze:
        _chain_analyze(paths, kernel_filter, json)
        return
    if json:
        console.print_json({"schema": 1, "backend": backends.current().name, "profiles": profiles})
    else:
        for path in paths:
            console.out(str(path))
    console.next_steps(next_steps.after_collect(paths))


def _summary(path) -> dict[str, object]:
    from ascendopt.collect.metadata import FILENAME
    from ascendopt.workspace import read_yaml

    meta = read_yaml(path / FILENAME)
    return {"path": str(path), "metric_group": meta.get("metric_group"), "backend": meta.get("backend"),
            "hardware_counters": meta.get("hardware_counters"), "set_id": meta.get("set_id")}


def _chain_analyze(paths, kernel_filter: str | None, json: bool) -> None:
    """`--analyze`: the new folders analyzed as one set (metric-group runs merge kernel by kernel) and
    printed as `ascendopt analyze PATH... [--kernel-filter F] [--json]` prints them."""
    from ascendopt import console
    from ascendopt.analyze.diagnosis import analyze
    from ascendopt.analyze.traces import load_profiles
    from ascendopt.cli.analyze import DEFAULT_TOP, render_report

    if not json:
        for path in paths:
            console.status(f"profile: {path}")
    # an empty --kernel-filter is no filter: the report records None, as `analyze` without the option does
    report = analyze(load_profiles(paths), kernel_filter=kernel_filter or None, top=DEFAULT_TOP)
    if json:
        console.print_json(report)
        return
    render_report(report)


EXAMPLES = examples(
    "ascendopt collect --exec-file workload.py --aic-metrics pipe,ub",
    "ascendopt collect --kernel rms_norm --shapes realistic --set block_rows=8 --analyze",
    "ascendopt collect --exec-file bench.py --name after --timeout 900",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(collect)
