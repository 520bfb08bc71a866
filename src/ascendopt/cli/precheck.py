"""`ascendopt precheck`: does a user's kernel lower for Ascend, how much UB, which cores, what lint says."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ascendopt.cli.options import AscendPythonOpt, JsonOpt, TimeoutOpt, examples


def precheck(
    target: Annotated[str, typer.Argument(metavar="PATH",
        hidden=True, help="A Python file (or module path) with @triton.jit kernels.")],
    exec_file: Annotated[
        str | None, typer.Option("--exec-file", metavar="PATH",
            help="A workload that launches the kernels (run with every "
                                 "kernel[grid](...) recorded, never executed).")] = None,
    launches: Annotated[
        str | None, typer.Option("--launches", metavar="PATH",
            help="A YAML launch description: kernel, signature, constexprs, "
                                 "grid per launch (docs/lowering.md).")] = None,
    chip: Annotated[
        str | None, typer.Option("--chip", metavar="CHIP",
            help="Judge UB and core counts against this chip (configs/chips.yaml; "
                                 "default the launch file's, else the model chip Ascend910B2).")] = None,
    ascend_python: AscendPythonOpt = None,
    no_lint: Annotated[bool, typer.Option("--no-lint", help="Leave out the lint findings of the file.")] = False,
    timeout: TimeoutOpt = None,
    json: JsonOpt = False,
) -> None:
    """Does a kernel lower for Ascend? UB, cores, lint; no NPU.

    Lower a file's Triton kernels through triton-ascend's front end on this CPU and report, per launch:
    lowers or not (the compiler's message at your source line), a static UB estimate from the lowered IR's
    local buffers (an estimate: bishengir-compile decides), the core type against the grid, and lint findings.

    PATH: a Python file (or module path) with @triton.jit kernels.

    Without --ascend-python or $ASCENDOPT_ASCEND_PYTHON, the first run builds a triton-ascend environment under
    ~/.cache/ascendopt/ascend-venv (pinned versions, a few minutes, ~1.2 GB; $ASCENDOPT_CACHE moves it).
    Exit 0 every launch lowers (UB, grid and lint notes do not change it), 1 a launch does not lower or none
    was recorded, 2 bad input, 5 no triton-ascend environment.
    """
    from ascendopt import console
    from ascendopt.lint.precheck import precheck as run_precheck

    with _InstallProgress() as progress:
        report = run_precheck(target, exec_file=exec_file, launch_file=launches, chip=chip,
                              ascend_python=ascend_python, install=True, timeout=timeout, with_lint=not no_lint,
                              on_install_step=progress.step)
    code = 0 if report["lowered"] else 1
    if json:
        console.print_json(report)
    else:
        _render(report)
    raise typer.Exit(code)


class _InstallProgress:
    """A progress bar on stderr, shown only if the managed environment has to be built."""

    def __init__(self):
        self._context = None
        self._bar = None

    def step(self, description: str, done: int, total: int) -> None:
        from ascendopt import console

        if self._bar is None:
            console.status("building the triton-ascend environment (once; a few minutes, ~1.2 GB)")
            self._context = console.progress("triton-ascend environment", total=total)
            self._bar = self._context.__enter__()
        self._bar.update(description)
        if done:
            self._bar.advance(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)


def _render(report: dict) -> None:
    from ascendopt import console

    console.out(f"precheck {report['target']}: triton-ascend {report['triton']}, chip {report['chip']} "
                f"(UB {report['ub_bytes']} bytes; estimate = {report['double_buffer_factor']} x local buffers, "
                "double-buffering assumed; bishengir-compile decides)")
    rows = []
    for entry in report["launches"]:
        constexprs = " ".join(f"{k}={v}" for k, v in (entry.get("constexprs") or {}).items())
        grid = "x".join(str(g) for g in entry["grid"]) if entry.get("grid") else "?"
        ub = entry.get("ub")
        ub_text = f"{ub['estimate_bytes']} ({ub['percent_of_ub']:.0f}%)" if ub else ""
        rows.append([entry["kernel"], constexprs, grid, entry["status"], entry.get("core_type", ""), ub_text])
    console.table(["kernel", "constexprs", "grid", "lowers", "cores", "UB est. B (%)"], rows,
                  justify=["left", "left", "right", "left", "left", "right"])
    for entry in report["launches"]:
        if entry.get("error"):
            console.out(f"  {entry['kernel']}: {entry['error']}")
        for finding in entry.get("findings") or []:
            console.out(f"  {entry['kernel']} (grid {entry.get('grid')}): {finding}")
    for problem in report["problems"]:
        console.out(f"  note: {problem}")
    if report.get("other_launches"):
        console.out(f"  note: {report['other_launches']} launch(es) of kernels defined in other files left out")
    if report.get("lint") is not None:
        findings = report["lint"]["findings"] + report["lint"]["errors"]
        console.out(f"lint: {len(findings)} finding(s)")
        for f in findings:
            console.out(f"  {f['path']}:{f['line']}:{f['col']}: {f['rule']} {f['message']}")
    sys.stdout.flush()


EXAMPLES = examples(
    "ascendopt precheck my_ops/norm.py --exec-file bench_norm.py",
    "ascendopt precheck my_ops/norm.py --launches launches.yaml --json",
    "ascendopt precheck my_ops/norm.py --ascend-python /opt/venv-ascend/bin/python",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(precheck)
