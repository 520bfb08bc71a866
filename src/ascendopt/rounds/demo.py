"""The whole loop on a bundled kernel, as ``ascendopt demo`` runs it: the settings it picks for the
backend present and steps 1-6 (freeze -> collect -> analyze -> one round -> gate -> reprofile).

Step 7 (the report files) is written by ``cli.report.write_report``, the same code as ``ascendopt
report``; ``cli.demo`` runs it after ``run_demo`` and prints the result.

On the CPU interpreter the demo uses the kernel's ``tiny`` preset in fp32, forward only, and fewer
timing pairs, so it ends in a few minutes on a small machine; on a device it uses the ``realistic``
preset with the kernel's default dtype and mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendopt.workspace import Workspace

STEPS = ("freeze", "collect", "analyze", "optimize-round", "gate", "reprofile", "report")
CPU_PAIRS = 16  # above judge.bench.MIN_PAIRS (12) with margin, and cheap on the interpreter
DEVICE_PAIRS = 30  # optimize-round's default


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs: the kernel, its shape preset, dtype and mode (None: freeze's default for
    the kernel), timing pairs per case, and the backend's facts it needs (UB bytes per vector core)."""

    kernel: str
    preset: str
    dtype: str | None
    mode: str | None
    pairs: int
    backend: str  # "npu" | "cuda" | "cpu"
    device_name: str
    ub_bytes: int


def plan(kernel: str, *, shape: str | None = None, pairs: int | None = None) -> DemoPlan:
    """The demo's settings on the backend of this process (``backends.current()``).

    ``shape``/``pairs`` given by the user win; an unknown kernel or preset, or fewer pairs than the
    signed-rank test needs, raise UsageError (exit 2) before anything is written.
    """
    from ascendopt import kernels
    from ascendopt.device import backends
    from ascendopt.judge import bench

    backend = backends.current()
    info = backend.info()
    on_cpu = backend.name == "cpu"
    spec = kernels.get(kernel)
    preset = shape or ("tiny" if on_cpu else "realistic")
    spec.shape(preset)  # an unknown preset is a usage error now, not after the workspace exists
    dtype = "fp32" if on_cpu and "fp32" in spec.dtypes else None
    mode = "fwd" if on_cpu and "fwd" in spec.modes else None
    pairs = pairs or (CPU_PAIRS if on_cpu else DEVICE_PAIRS)
    bench.check_pairs(pairs)
    return DemoPlan(kernel, preset, dtype, mode, pairs, backend.name, info.name, info.ub_bytes)


@dataclass(frozen=True)
class DemoResult:
    """What steps 1-6 produced. ``data`` is the ``demo --json`` object so far (the report's paths are
    added by the caller); ``gate`` is the ``gate.result.GateResult`` of the best configuration."""

    data: dict[str, Any]
    hypothesis: str
    record: Any  # rounds.records.RoundRecord of the demo's round
    round_path: Path
    gate: Any
    reprofile: dict[str, Any]  # rounds.reprofile.reprofile's result

    @property
    def exit_code(self) -> int:
        """The gate's code when it is red at correctness (1) or integrity (3), else 0.

        A performance red (4) is a measurement the demo reports: its one tunable change may well be
        slower, and that is an answer, not a failure. Red correctness or integrity means the loop
        itself produced a wrong kernel or a broken contract, so the demo fails with that code.
        """
        return self.gate.exit_code if not self.gate.passed and self.gate.exit_code in (1, 3) else 0


# A demo workspace is the tool's scratch space, not the user's work: like a virtualenv or pytest's cache it ignores
# itself, so the quick start run inside a repository leaves nothing untracked (``git status`` stays clean).
GITIGNORE = "# written by `ascendopt demo`: a demo workspace is scratch space, not part of any repository\n*\n"


def keep_out_of_git(ws: Workspace) -> Path:
    """Write ``<workspace>/.gitignore`` ignoring everything in it (``GITIGNORE``), under the workspace's lock (so
    the audit log records it); an existing ``.gitignore`` is left as it is (the user's own). Returns its path."""
    from ascendopt.workspace import atomic_write_text

    path = ws.root / ".gitignore"
    if not path.exists():
        with ws.lock():
            atomic_write_text(path, GITIGNORE)
    return path


def run_demo(ws: Workspace, plan: DemoPlan, *, step: Callable[[str], None], advance: Callable[[], None],
             on_analysis: Callable[[dict[str, Any]], None] | None = None,
             on_round: Callable[[Any, str], None] | None = None, on_gate: Callable[[Any], None] | None = None,
             force: bool = False) -> DemoResult:
    """Steps 1-6 of the demo in ``ws``; ``step(text)`` reports progress, ``advance()`` ends a step.

    ``on_analysis`` receives the analyze report of the baseline profile as soon as it exists (the
    CLI prints its hot-kernel table there); ``on_round(record, hypothesis)`` the round's record as
    soon as it is recorded, ``on_gate(result)`` the gate's result as soon as it is known, so each
    step's result is printed after that step, not all after the last one. ``force``: replace a
    contract already in ``ws`` (archived, as ``freeze --force``). Call ``rounds.run.prepare_backend``
    first.
    """
    import shutil

    from ascendopt import console, kernels
    from ascendopt.collect import collect_kernel
    from ascendopt.freeze.task import freeze_kernel
    from ascendopt.gate import stages as gate_stages
    from ascendopt.kernels.spec import dims_text
    from ascendopt.rounds import profiles as round_profiles
    from ascendopt.rounds import reprofile as rp
    from ascendopt.rounds import run as round_run
    from ascendopt.rounds import summary as round_summary
    from ascendopt.rounds.context import RoundContext, kernel_names
    from ascendopt.tune.choose import choose_change

    spec = kernels.get(plan.kernel)
    out: dict[str, Any] = {"workspace": str(ws.root), "backend": plan.backend, "kernel": plan.kernel,
                           "shape": plan.preset}
    step("demo 1/7 freeze: contract, oracle check, kernel hit, baseline latency")
    groups = None  # the contract's default (PipeUtilization)
    if plan.backend == "cuda" and shutil.which("ncu") is None:
        console.warn("ncu (Nsight Compute) is not on PATH: the demo collects durations only (metric group none)")
        groups = ["none"]
    # profile=False: step 2 collects the baseline profile itself, as its own step of the loop
    contract = freeze_kernel(ws, kernel=plan.kernel, shapes=[plan.preset], dtype=plan.dtype, mode=plan.mode,
                             metric_groups=groups, profile=False, force=force)
    w = contract.workload
    out["baseline_ms"] = contract.baseline[0].median_ms
    advance()

    step(f"demo 2/7 collect: {', '.join(contract.metric_groups)}")
    with ws.lock():  # a write of the workspace (its audit log names the profile), like `collect -w`
        profiles = [str(p) for p in collect_kernel(plan.kernel, shape=dims_text(w.shapes[0].dims),
                                                   dtype=w.dtype, mode=w.mode, config=dict(w.config),
                                                   metric_groups=list(contract.metric_groups),
                                                   out_dir=ws.profiles_dir, name="baseline")]
    out["profiles"] = profiles
    advance()

    step("demo 3/7 analyze: rank kernels, classify the bottleneck")
    analysis = round_profiles.analyze_paths(profiles)
    hot = round_summary.target_kernel(analysis, kernel_names(contract)) or {}
    advance()
    if on_analysis is not None:
        on_analysis(analysis)

    step("demo 4/7 optimize-round: one tunable change, gate, interleaved bench, re-profile")
    change, hypothesis = choose_change(spec, w.shapes[0].dims, w.dtype, w.mode, plan.ub_bytes, hot.get("bound"),
                                       spec.config(w.config))
    outcome = round_run.run_round(ws, hypothesis=hypothesis, sets=change, pairs=plan.pairs, step=step,
                                  before_profiles=profiles)
    record = outcome.record
    out["round"] = {"number": record.number, "change": change, "verdict": record.verdict,
                    "reason": record.why, "path": str(outcome.path)}
    advance()
    if on_round is not None:
        on_round(record, hypothesis)

    step("demo 5/7 gate: integrity, correctness, kernel hit, performance of the best so far")
    gate = gate_stages.run_gate(ws, pairs=plan.pairs)  # the gate's own default: the best kept configuration
    # not green: red (failed_stage) or inconclusive (the CPU interpreter's noise band is often too wide)
    blocking = gate.blocking_stage
    out["gate"] = {"passed": gate.passed, "exit_code": gate.exit_code,
                   "failed_stage": gate.failed_stage.name if gate.failed_stage else None,
                   "why": blocking.summary if blocking else None}
    advance()
    if on_gate is not None:
        on_gate(gate)

    step("demo 6/7 reprofile: collect again, diff, reclassify")
    with ws.lock():
        again = rp.reprofile(RoundContext.load(ws), step=step)
    out["reprofile"] = {"profiles": again["profiles"], "stop": again["stop"]}
    advance()
    return DemoResult(out, hypothesis, record, outcome.path, gate, again)
