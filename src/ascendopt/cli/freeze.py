"""`ascendopt freeze`: step 1, write the task contract (workload, tolerances, frozen files, baseline)."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendopt.cli.options import AscendPythonOpt, EventsOpt, JsonOpt, NoPrecheckOpt, TimeoutOpt, WorkspaceOpt, examples
from ascendopt.contract.model import DEFAULT_MAX_ROUNDS, EQUIVALENCE_TOLERANCES

Str = str | None
Strs = list[str] | None
KernelOpt = Annotated[Str, typer.Option("--kernel", metavar="NAME",
    help="Bundled kernel to freeze (see `ascendopt kernels`).")]
ShapesOpt = Annotated[Strs, typer.Option(
    "--shapes", "--shape", metavar="SHAPE",
    help="Shape preset (tiny, realistic, ...) or dims like B=2,T=64,D=128; repeat for a matrix. "
                     "Default: tiny on cpu, realistic elsewhere.")]
DtypeOpt = Annotated[Str, typer.Option("--dtype", metavar="DTYPE",
    help="fp32 | bf16 | fp16 (default bf16 if supported).")]
ModeOpt = Annotated[Str, typer.Option("--mode", metavar="MODE", help="fwd | fwdbwd (default fwdbwd if supported).")]
VarlenOpt = Annotated[bool, typer.Option("--varlen", help="Add a variable-length (cu_seqlens) twin of every shape.")]
SetOpt = Annotated[Strs, typer.Option("--set", metavar="NAME=VALUE",
    help="Baseline tunables NAME=VALUE (default: the spec's).")]
ExecFileOpt = Annotated[Str, typer.Option("--exec-file", metavar="PATH",
    help="Own code: a Python file defining workload().")]
TestOpt = Annotated[Strs, typer.Option("--test", metavar="PATH", help="Own code: frozen test file(s); repeat.")]
TestCmdOpt = Annotated[Str, typer.Option(
    "--test-cmd", metavar="COMMAND",
    help="Own code: validation command (default: python -m pytest -q TESTS); not pytest: it must "
                       "exit 0 and print a summary line 'N passed' (N >= 1, no failures).")]
ReferenceOpt = Annotated[Strs, typer.Option("--reference", metavar="PATH",
    help="Own code: frozen reference/oracle file(s).")]
TargetOpt = Annotated[Strs, typer.Option(
    "--target", metavar="PATH",
    help="Own code: the target code a round is meant to change (file or folder; repeat). Everything "
         "else the frozen tests load from the repository is pinned. Default: what workload() "
         "imports from the repository.")]
KernelFilterOpt = Annotated[Str, typer.Option(
    "--kernel-filter", metavar="SUBSTRING",
    help="Own code: substring of the target kernel's name that must appear in the profile; for torch-only code, "
         "of a torch op's name (aten::addmm) or of a torch.profiler.record_function range around the work.")]
EquivTolOpt = Annotated[Strs, typer.Option(
    "--equivalence-tol", metavar="DTYPE=RTOL[:ATOL]",
    help="Own code: tolerance of the output equivalence check for one output dtype (fp32, bf16, fp16, fp64), "
         "e.g. bf16=2e-2 or fp32=1e-4:1e-5; repeat. Defaults: "
         + ", ".join(f"{k}={t['rtol']:g}:{t['atol']:g}" for k, t in EQUIVALENCE_TOLERANCES.items()) + ".")]
NoEquivOpt = Annotated[bool, typer.Option(
    "--no-equivalence", help="Own code: do not compare workload() outputs with the frozen commit's (the contract "
                             "says it is off).")]
NoValueProbeOpt = Annotated[bool, typer.Option(
    "--no-value-probe", help="Own code: the gate does not compare workload() with the frozen commit's on the "
                             "workload's inputs scaled beyond their range (for code whose domain is exactly that "
                             "range; the contract says so).")]
MetricsOpt = Annotated[str, typer.Option("--aic-metrics", metavar="GROUPS",
    help="Metric groups for collect/reprofile, comma-separated.")]
MaxRoundsOpt = Annotated[int, typer.Option("--max-rounds", metavar="N", min=1, help="Iteration cap of the loop.")]
NoProfileOpt = Annotated[bool, typer.Option(
    "--no-profile", help="Do not profile the baseline into the workspace's profiles/ (round 1 then has no "
                         "'before' profile unless `ascendopt collect -w WS` makes one).")]
ShapesFromOpt = Annotated[Str, typer.Option(
    "--shapes-from", metavar="PROFILE",
    help="Own code: freeze the served-shape mix of the --kernel-filter kernel from the model's profile "
         "(kernel_details.csv, op_summary, a torch.profiler trace recorded with record_shapes=True); "
         "see docs/shapes.md.")]
ShapesFileOpt = Annotated[Str, typer.Option(
    "--shapes-file", metavar="MIX",
    help="Own code: freeze a hand-written served-shape mix, a YAML file (docs/shapes.md).")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Replace an existing contract; its rounds, tune cache and report move to .ascendopt/archive/.")]


def freeze(
    kernel: KernelOpt = None,
    shapes: ShapesOpt = None,
    dtype: DtypeOpt = None,
    mode: ModeOpt = None,
    varlen: VarlenOpt = False,
    set_: SetOpt = None,
    exec_file: ExecFileOpt = None,
    test: TestOpt = None,
    test_cmd: TestCmdOpt = None,
    reference: ReferenceOpt = None,
    target: TargetOpt = None,
    kernel_filter: KernelFilterOpt = None,
    equivalence_tol: EquivTolOpt = None,
    no_equivalence: NoEquivOpt = False,
    no_value_probe: NoValueProbeOpt = False,
    shapes_from: ShapesFromOpt = None,
    shapes_file: ShapesFileOpt = None,
    aic_metrics: MetricsOpt = "PipeUtilization",
    max_rounds: MaxRoundsOpt = DEFAULT_MAX_ROUNDS,
    force: ForceOpt = False,
    no_profile: NoProfileOpt = False,
    timeout: TimeoutOpt = None,
    no_precheck: NoPrecheckOpt = False,
    ascend_python: AscendPythonOpt = None,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Step 1: freeze the task contract and measure the baseline.

    Freeze the task contract: workload, tolerances, frozen files (sha256), baseline, expected kernels.

    Bundled kernel: --kernel NAME [--shapes ...] [--dtype] [--mode] [--varlen] [--set K=V].
    Own code: --exec-file bench.py --test PATH... --kernel-filter S [--test-cmd "..."] [--reference PATH...]
    [--target PATH...] [--equivalence-tol DTYPE=RTOL[:ATOL]] [--no-equivalence] [--no-value-probe]
    [--shapes-from PROFILE | --shapes-file MIX.yaml] (the served-shape mix, docs/shapes.md).
    Refuses a wrong baseline (exit 1), a torch fallback (exit 1, listing the kernels seen), an own-code
    workload that raises, crashes or outlives its limit (exit 1, naming file:line or the limit) and an
    existing contract without --force (exit 2). --timeout limits freeze's child processes and is stored
    as the contract's frozen limits (default: {timeouts}). Then the baseline is
    profiled into the workspace's profiles/ (a failure only warns; --no-profile skips it). Off-NPU the
    baseline's kernels must lower for Ascend when a triton-ascend environment is present (`ascendopt precheck`;
    exit 1 if one does not; --no-precheck skips; the contract records the verdict).
    """
    from ascendopt import console
    from ascendopt.cli import next_steps
    from ascendopt.errors import UsageError
    from ascendopt.freeze.task import freeze_exec_file, freeze_kernel
    from ascendopt.kernels.spec import parse_assignments
    from ascendopt.workspace import Workspace

    ws = Workspace.resolve(workspace)
    ws.check_writable()  # a damaged or unwritable workspace: one line before any measurement
    groups = aic_metrics  # freeze parses and checks the names (collect.metrics)
    if bool(kernel) == bool(exec_file):
        raise UsageError("give exactly one of --kernel NAME (bundled kernel) or --exec-file FILE (own code)")
    if kernel:
        own_only = {"--test": test, "--test-cmd": test_cmd, "--reference": reference, "--target": target,
                    "--kernel-filter": kernel_filter, "--shapes-from": shapes_from, "--shapes-file": shapes_file,
                    "--equivalence-tol": equivalence_tol, "--no-equivalence": no_equivalence,
                    "--no-value-probe": no_value_probe}
        given = [k for k, v in own_only.items() if v]
        if given:
            raise UsageError(f"{', '.join(given)}: only for own code (--exec-file)")
        contract = freeze_kernel(ws, kernel=kernel, shapes=shapes, dtype=dtype, mode=mode, varlen=varlen,
                                 config=parse_assignments(set_), metric_groups=groups, max_rounds=max_rounds,
                                 force=force, timeout=timeout, profile=not no_profile, precheck=not no_precheck,
                                 ascend_python=ascend_python)
    else:
        from ascendopt.judge.equivalence import parse_tolerances

        if equivalence_tol and no_equivalence:
            raise UsageError("--equivalence-tol and --no-equivalence: give one (the tolerances of a check that is off)")
        given = [k for k, v in {"--shapes": shapes, "--dtype": dtype, "--mode": mode, "--varlen": varlen,
                                "--set": set_}.items() if v]
        if given:
            raise UsageError(f"{', '.join(given)}: only for bundled kernels (--kernel)")
        mix = None
        if shapes_from or shapes_file:  # read before the baseline runs: a bad profile or file fails fast
            from ascendopt.analyze.shapes import served_mix

            if not kernel_filter:
                raise UsageError("--kernel-filter: needed for own code (a substring of the target kernel's name)")
            mix, lines = served_mix(kernel_filter, profile=shapes_from, mix_file=shapes_file)
            for line in lines:
                console.info(line)
        contract = freeze_exec_file(ws, exec_file=exec_file, tests=test or [], kernel_filter=kernel_filter or "",
                                    test_cmd=test_cmd, references=reference or [], metric_groups=groups,
                                    max_rounds=max_rounds, force=force, timeout=timeout, profile=not no_profile,
                                    equivalence=not no_equivalence, equivalence_tol=parse_tolerances(equivalence_tol),
                                    precheck=not no_precheck, ascend_python=ascend_python, targets=target,
                                    shapes=mix, value_probe=not no_value_probe)
    if json:
        console.print_json({"contract": str(ws.contract_path), **contract.to_dict()})
    else:
        _render(ws, contract)
    console.next_steps(next_steps.after_freeze(ws, contract))


def _render(ws, contract) -> None:
    """The contract as a table of fields (stdout)."""
    from ascendopt import console

    w = contract.workload
    rows = [("contract", str(ws.contract_path)), ("op", contract.op), ("entry point", contract.entry_point),
            ("backend", f"{contract.backend} ({contract.device.get('name')})")]
    if contract.is_kernel:
        rows += [("workload", f"{w.dtype} {w.mode}, config {w.config}"),
                 ("shapes", "; ".join(f"{s.name} {s.dims}" for s in w.shapes)),
                 ("tolerances", ", ".join(f"{k}: rtol {t.rtol:g}, {t.lowp_factor:g}x torch low-precision"
                                          for k, t in contract.tolerances.items()))]
    eq = contract.equivalence
    if eq:
        rows.append(("output equivalence",
                     f"on: {', '.join(eq['outputs'][:6])}{' ...' if len(eq['outputs']) > 6 else ''}; "
                     + ", ".join(f"{k} rtol {t['rtol']:g} atol {t['atol']:g}" for k, t in eq["tolerances"].items())
                     if eq["enabled"] else f"off: {eq['reason']}"))
    rows += [(f"frozen {f.role}", f"{f.path} {f.sha256[:12]}") for f in contract.frozen_files]
    if contract.targets is not None:
        rows.append(("target code", ", ".join(contract.targets) or "none (every file the tests use is pinned)"))
    rows += [(f"baseline {b.case}", f"{console.spread_text(b.median_ms * 1e3, b.p20_ms * 1e3, b.p80_ms * 1e3)} "
              f"CV {b.cv:.1%} n={b.n}") for b in contract.baseline]
    if contract.precheck:
        rows.append(("Ascend precheck", contract.precheck["verdict"]))
    if contract.shapes is not None:
        from ascendopt.contract.shapes import describe

        rows.append(("served shapes", describe(contract.shapes)))
        rows += [(f"  bucket {i}" + (" (tail)" if b.tail else ""),
                  f"{b.shape} {'/'.join(b.dtypes)} weight {b.weight:.3f}, {b.launches} launch(es), "
                  f"{len(b.members)} shape(s)") for i, b in enumerate(contract.shapes.buckets, 1)]
    rows += [("kernels expected", ", ".join(contract.expected_kernels)),
             ("git commit",
              (contract.git.get("commit") or "none")[:12] + (" (dirty)" if contract.git.get("dirty") else ""))]
    console.table(["field", "value"], rows, title="ascendopt freeze")


EXAMPLES = examples(
    "ascendopt freeze --kernel rms_norm --shapes realistic --dtype bf16",
    'ascendopt freeze --exec-file bench.py --test tests/test_op.py \\',
    "    --kernel-filter my_kernel",
    'ascendopt freeze --exec-file bench.py --test tests/test_op.py \\',
    "    --kernel-filter my_kernel --shapes-from model_prof/",
    "ascendopt --backend cpu freeze --kernel rms_norm --shapes tiny -w .ascendopt-cpu",
)


def _limits_text() -> str:
    """The frozen limits' defaults as --help says them (the values, not the setting's name)."""
    from ascendopt.contract.model import DEFAULT_TIMEOUTS

    what = {"tests_s": "the tests", "workload_s": "each workload call", "timing_s": "each timing phase",
            "profile_s": "each profile"}
    return ", ".join(f"{what.get(k, k)} {v:g} s" for k, v in DEFAULT_TIMEOUTS.items())


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES, help=freeze.__doc__.replace("{timeouts}", _limits_text()))(freeze)
