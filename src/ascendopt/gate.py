"""The gate (step 5): integrity, correctness, kernel hit, performance — in that order, stopping at
the first red stage.

| stage       | bundled kernel                                   | own code (exec-file)                          | red  |
|-------------|--------------------------------------------------|-----------------------------------------------|------|
| integrity   | contract digest; oracle/input-factory sources     | contract digest; frozen files' sha256         | 3    |
| correctness | every output/gradient vs fp32 oracle, NaN-poisoned | the frozen test command; failures listed      | 1    |
| kernel_hit  | ``expected_kernels`` seen in a profile of one call | ``kernel_filter`` seen in a profile of workload() | 1 |
| performance | baseline vs candidate config, interleaved in-process | frozen commit (git worktree) vs working tree, interleaved child processes | 4 |

``run_gate`` returns a ``GateResult`` (never prints data; status lines go to stderr). A speedup is
only ever reported on a green gate.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ascendopt import console
from ascendopt.contract import Contract, load_raw, verify_digest
from ascendopt.errors import EnvironmentProblem, ExitCode, IntegrityError, UsageError
from ascendopt.frozen import check_frozen_files, project_root, resolve_command
from ascendopt.workspace import Workspace

STAGES = ("integrity", "correctness", "kernel_hit", "performance")
# Exact two-sided signed-rank p of n all-positive pairs is 2 / 2^n: n >= 10 reaches bench's alpha
# 0.002 only if every pair agrees; 12 leaves room for one reversed pair on a noisy host.
MIN_PAIRS = 12
_STAGE_EXIT = {"integrity": ExitCode.INTEGRITY, "correctness": ExitCode.CORRECTNESS,
               "kernel_hit": ExitCode.CORRECTNESS, "performance": ExitCode.PERFORMANCE}


@dataclass
class Check:
    """One JUnit testcase: a frozen file, a tensor of a shape case, a test, a timed case."""

    name: str
    passed: bool
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageResult:
    name: str
    status: str  # "pass" | "fail" | "skipped" (asked for) | "not-run" (an earlier stage is red)
    summary: str
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return int(_STAGE_EXIT[self.name]) if self.status == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "exit_code": self.exit_code, "summary": self.summary,
                "checks": [c.to_dict() for c in self.checks], "data": self.data}


@dataclass
class GateResult:
    stages: list[StageResult]
    notes: list[str] = field(default_factory=list)

    @property
    def failed_stage(self) -> StageResult | None:
        return next((s for s in self.stages if s.status == "fail"), None)

    @property
    def exit_code(self) -> int:
        failed = self.failed_stage
        return failed.exit_code if failed else 0

    @property
    def passed(self) -> bool:
        return self.failed_stage is None

    def to_dict(self) -> dict[str, Any]:
        failed = self.failed_stage
        stages = [s.to_dict() for s in self.stages]
        if not self.passed:  # a speedup is never reported on a red gate
            for stage in stages:
                for comparison in stage["data"].get("comparisons", []):
                    comparison.pop("speedup", None)
        return {"schema": 1, "passed": self.passed, "exit_code": self.exit_code,
                "failed_stage": failed.name if failed else None, "stages": stages, "notes": self.notes}

    def to_junit(self) -> str:
        """JUnit XML: one testsuite, one testcase per check (stages without checks get one)."""
        suite = ET.Element("testsuite", name="ascendopt gate")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for stage in self.stages:
            checks = stage.checks or [Check(stage.name, stage.status != "fail", stage.summary)]
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=f"gate.{stage.name}", name=check.name)
                counts["tests"] += 1
                if stage.status in ("skipped", "not-run"):
                    ET.SubElement(case, "skipped", message=stage.summary)
                    counts["skipped"] += 1
                elif not check.passed:
                    failure = ET.SubElement(case, "failure", message=check.message.splitlines()[0][:200]
                                            if check.message else stage.summary)
                    failure.text = check.message
                    counts["failures"] += 1
                elif check.message:
                    ET.SubElement(case, "system-out").text = check.message
        for key, value in counts.items():
            suite.set(key, str(value))
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


class _ClockBackend:
    """The measurement core's backend interface over an injected clock (ms), for deterministic tests."""

    name = "clock"

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock

    def synchronize(self) -> None:
        pass

    def timer(self):
        clock = self.clock

        class _Timer:
            def start(self) -> None:
                self.t0 = clock()

            def stop(self) -> float:
                return clock() - self.t0

        return _Timer()


# -- kernel hit --------------------------------------------------------------------------------


def observed_kernels(fn: Callable[[], Any]) -> list[str]:
    """Names seen in a profile of one call of ``fn`` (after one warm call), longest total time first.

    npu: the device kernels of a torch_npu profile (via ``ascendopt.collect``); cuda: device
    kernels of a torch.profiler trace; cpu: every range of a CPU trace (interpreted Triton launches
    get a range named after the ``@triton.jit`` function: ``kernels.common.launch`` for bundled
    kernels, collect's interpreter hook for own code).
    """
    from ascendopt import backends

    backend = backends.current()
    fn()  # compile outside the profile
    backend.synchronize()
    if backend.name == "npu":
        return _observed_npu(fn)
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from ascendopt.collect.torch_profiler import name_interpreted_kernels

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if backend.name == "cuda" else [])
    # On cpu, own code launches kernel[grid](...) directly: collect's hook names those launches too.
    naming = name_interpreted_kernels() if backend.name == "cpu" else contextlib.nullcontext()
    with naming, profile(activities=activities) as prof:
        fn()
        backend.synchronize()
    totals: dict[str, float] = {}
    for event in prof.events():
        on_device = event.device_type == DeviceType.CUDA
        if backend.name == "cuda" and not on_device:
            continue
        duration = event.device_time_total if on_device else event.cpu_time_total
        totals[event.name] = totals.get(event.name, 0.0) + float(duration)
    return sorted(totals, key=lambda n: -totals[n])


def _observed_npu(fn: Callable[[], Any]) -> list[str]:
    try:
        from ascendopt.collect import profile_callable
        from ascendopt.traces import load_profile
    except ImportError as exc:
        raise EnvironmentProblem(f"kernel-hit check on npu needs ascendopt.collect and ascendopt.traces ({exc})") from None
    with tempfile.TemporaryDirectory(prefix="ascendopt-hit-") as tmp:
        path = profile_callable(fn, name="kernel_hit", out_dir=Path(tmp), aic_metrics="PipeUtilization")
        frame = load_profile(path).kernels
        totals = frame.groupby("name")["duration_us"].sum().sort_values(ascending=False)
        return [str(n) for n in totals.index]


def missing_kernels(expected: tuple[str, ...] | list[str], seen: list[str]) -> list[str]:
    """Expected names with no observed name containing them (device names may carry suffixes)."""
    return [name for name in expected if not any(name in s for s in seen)]


# -- stages ------------------------------------------------------------------------------------


def _integrity(ws: Workspace) -> tuple[StageResult, Contract | None]:
    data = load_raw(ws)
    source = ws.contract_path.name
    try:
        verify_digest(data, source)
    except IntegrityError as exc:
        return StageResult("integrity", "fail", str(exc), [Check(source, False, str(exc))]), None
    contract = Contract.from_dict(data, source)
    checks = [Check(source, True, "digest matches")]
    checks += [Check(*item) for item in check_frozen_files(contract, project_root())]
    bad = [c for c in checks if not c.passed]
    if bad:
        return StageResult("integrity", "fail", bad[0].message, checks), contract
    return StageResult("integrity", "pass", f"contract digest and {len(checks) - 1} frozen item(s) unchanged",
                       checks), contract


def _correctness_kernel(contract: Contract, config: dict[str, int]) -> StageResult:
    from ascendopt import kernels
    from ascendopt.correctness import check_kernel

    spec = kernels.get(contract.workload.kernel)
    w = contract.workload
    reports = []
    for case in w.shapes:
        console.status(f"gate: correctness {spec.name} {case.name} {w.dtype} {w.mode}")
        reports += check_kernel(spec, case.dims, w.dtype, w.mode, config, tolerances=contract.tolerances,
                                case=f"{case.name}/{w.mode}")
    checks = [Check(f"{r.case}:{r.name}", r.passed, r.line().strip()) for r in reports]
    failed = [r for r in reports if not r.passed]
    summary = (f"{len(failed)} of {len(reports)} tensors out of tolerance: "
               + ", ".join(f"{r.case}:{r.name} ({r.reason})" for r in failed[:4])) if failed else \
        f"{len(reports)} tensors within tolerance over {len(w.shapes)} shape case(s)"
    return StageResult("correctness", "fail" if failed else "pass", summary, checks,
                       {"tensors": [r.to_dict() for r in reports]})


_FAILED_LINE = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


def _correctness_tests(contract: Contract, root: Path) -> StageResult:
    argv = resolve_command(contract.commands["validation"])
    console.status(f"gate: running frozen tests: {' '.join(argv)}")
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    failures = [m for m in (_FAILED_LINE.match(line.strip()) for line in output.splitlines()) if m]
    tail = "\n".join(output.strip().splitlines()[-20:])
    if proc.returncode == 0:
        last = output.strip().splitlines()[-1] if output.strip() else "passed"
        return StageResult("correctness", "pass", f"frozen tests passed: {last.strip('= ')}",
                           [Check("frozen tests", True, last)], {"returncode": 0})
    checks = [Check(m.group(2), False, f"{m.group(1)} {m.group(2)}" + (f" - {m.group(3)}" if m.group(3) else ""))
              for m in failures] or [Check("frozen tests", False, tail)]
    names = ", ".join(c.name for c in checks[:5])
    return StageResult("correctness", "fail",
                       f"frozen tests failed (exit {proc.returncode}): {names}" if failures else
                       f"frozen test command exited {proc.returncode}", checks,
                       {"returncode": proc.returncode, "output_tail": tail})


def _kernel_hit(contract: Contract, config: dict[str, int], root: Path) -> StageResult:
    if contract.is_kernel:
        from ascendopt import backends, kernels

        spec = kernels.get(contract.workload.kernel)
        case = contract.workload.shapes[0]
        inputs = spec.make_inputs(dict(case.dims), contract.workload.dtype, backends.current().torch_device(), 0)
        seen = observed_kernels(lambda: spec.run(inputs, config, contract.workload.mode))
    else:
        from ascendopt.interleave import load_workload

        seen = observed_kernels(load_workload(root / contract.workload.exec_file))
    missing = missing_kernels(contract.expected_kernels, seen)
    checks = [Check(name, name not in missing, "seen" if name not in missing else "not in the profile")
              for name in contract.expected_kernels]
    if missing:
        return StageResult("kernel_hit", "fail",
                           f"expected kernel(s) {', '.join(missing)} did not run (torch fallback?); "
                           f"the profile shows: {', '.join(seen[:8]) or 'nothing'}", checks, {"seen": seen[:50]})
    return StageResult("kernel_hit", "pass", f"{', '.join(contract.expected_kernels)} ran", checks,
                       {"seen": seen[:50]})


def timing_inputs(spec, dims: Mapping[str, Any], dtype: str, mode: str, device) -> list[tuple[dict[str, Any]]]:
    """Seeded input sets to rotate through while timing, enough that the set is not cache-resident.

    Sets are added until they span 2 x 64 MiB (above the last-level cache of current devices: H200
    L2 50 MiB, Ascend A2 L2 192 MiB is bandwidth-close to HBM), capped at 8 sets.
    """
    per_set = max(1, spec.cost(dims, dtype, mode).bytes)
    count = max(1, min(8, -(-2 * 64 * 2**20 // per_set)))
    return [(spec.make_inputs(dict(dims), dtype, device, seed),) for seed in range(count)]


def _performance_kernel(contract: Contract, config: dict[str, int], timer, pairs: int) -> StageResult:
    from ascendopt import backends, bench, kernels

    spec = kernels.get(contract.workload.kernel)
    w = contract.workload
    backend = backends.current()
    measure_backend = _ClockBackend(timer) if timer is not None else backend
    baseline_cfg = spec.config(w.config)
    comparisons = []
    for case in w.shapes:
        console.status(f"gate: timing {spec.name} {case.name}: baseline {baseline_cfg} vs candidate {config}")
        inputs = timing_inputs(spec, case.dims, w.dtype, w.mode, backend.torch_device())
        result = bench.compare(lambda inp: spec.run(inp, baseline_cfg, w.mode),
                               lambda inp: spec.run(inp, config, w.mode),
                               inputs=inputs, backend=measure_backend, pairs=pairs)
        comparisons.append((f"{case.name}/{w.mode}", result))
    return _performance_result(comparisons)


def _performance_own(contract: Contract, root: Path, pairs: int) -> StageResult:
    from ascendopt.interleave import compare_trees

    commit = contract.git.get("commit")
    if not commit:
        raise EnvironmentProblem("contract.yaml: git.commit: none recorded (frozen outside a git repository); "
                                 "the own-code performance stage times the frozen commit in a git worktree",
                                 hint="freeze inside a git repository, or run `ascendopt gate --skip-perf`")
    tmp = Path(tempfile.mkdtemp(prefix="ascendopt-baseline-"))
    tree = tmp / "tree"
    _git(root, "worktree", "add", "--detach", str(tree), commit)
    try:
        # The workload file is frozen (integrity checked it); run the same file against both trees.
        exec_rel = contract.workload.exec_file
        (tree / exec_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / exec_rel, tree / exec_rel)
        console.status(f"gate: timing {exec_rel}: frozen commit {commit[:10]} vs working tree (interleaved)")
        result = compare_trees(exec_rel, tree, root, pairs=pairs)
    finally:
        _git(root, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        _git(root, "worktree", "prune", check=False)
    return _performance_result([(contract.workload.exec_file, result)])


def _git(root: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise EnvironmentProblem(f"git {' '.join(args[:2])} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip()


def verdict_line(case: str, c) -> str:
    """``case: baseline X us [p20, p80] | candidate Y us [p20, p80] | +n.n% verdict (reason)``."""
    change = c.ratio - 1.0
    return (f"{case}: baseline {c.baseline.spread_text()} | candidate {c.candidate.spread_text()} | "
            f"{change:+.1%} {c.verdict} ({c.reason})")


def _performance_result(comparisons) -> StageResult:
    checks, data = [], []
    for case, c in comparisons:
        checks.append(Check(case, c.verdict != "slower", verdict_line(case, c)))
        entry = {"case": case, **c.to_dict()}
        data.append(entry)
    slower = [c for c in checks if not c.passed]
    if slower:
        return StageResult("performance", "fail", "regression: " + slower[0].message, checks,
                           {"comparisons": data})
    return StageResult("performance", "pass", "; ".join(c.message for c in checks), checks, {"comparisons": data})


# -- the gate ----------------------------------------------------------------------------------


def run_gate(ws: Workspace, *, skip_perf: bool = False, config_override: Mapping[str, Any] | None = None,
             timer: Callable[[], float] | None = None, pairs: int = 30) -> GateResult:
    """Run the stages in order and stop at the first red one.

    ``config_override``: candidate tunables for a bundled kernel (default: the frozen config, an
    A/A check). ``timer``: a clock in ms replacing the device timer of the bundled-kernel
    performance stage (tests). ``pairs``: interleaved sample pairs per timed case.
    """
    if pairs < MIN_PAIRS:
        raise UsageError(f"pairs={pairs}: at least {MIN_PAIRS} interleaved pairs are needed",
                         hint="with fewer, the signed-rank test cannot reach p < 0.002: no regression could be called")
    started = time.monotonic()
    stages: list[StageResult] = []
    notes: list[str] = []
    integrity, contract = _integrity(ws)
    stages.append(integrity)
    config: dict[str, int] = {}
    root = project_root()
    if contract is not None and integrity.status == "pass":
        _fingerprint_notes(contract, notes)
        if contract.is_kernel:
            from ascendopt import kernels

            config = kernels.get(contract.workload.kernel).config({**contract.workload.config,
                                                                   **(config_override or {})})
        elif config_override:
            raise UsageError("--set applies to bundled kernels only; own code is measured as the working tree")
        runners = [
            lambda: _correctness_kernel(contract, config) if contract.is_kernel else _correctness_tests(contract, root),
            lambda: _kernel_hit(contract, config, root),
            lambda: (StageResult("performance", "skipped", "skipped (--skip-perf)") if skip_perf else
                     _performance_kernel(contract, config, timer, pairs) if contract.is_kernel else
                     _performance_own(contract, root, pairs)),
        ]
        for run in runners:
            stage = run()
            stages.append(stage)
            if stage.status == "fail":
                break
    red = next((s.name for s in stages if s.status == "fail"), None)
    for name in STAGES[len(stages):]:
        stages.append(StageResult(name, "not-run", f"not run: stage {red} is red"))
    notes.append(f"gate took {time.monotonic() - started:.2f} s")
    return GateResult(stages, notes)


def _fingerprint_notes(contract: Contract, notes: list[str]) -> None:
    """Say (not fail) when the gate runs on another backend/device than the one frozen."""
    from ascendopt import backends

    now = backends.describe(backends.current())
    frozen = contract.device
    for key in ("backend", "name"):
        if frozen.get(key) != now.get(key):
            notes.append(f"{key} differs from the contract: frozen {frozen.get(key)!r}, now {now.get(key)!r}")
    for key, value in (frozen.get("versions") or {}).items():
        if value != now["versions"].get(key):
            notes.append(f"{key} version differs: frozen {value}, now {now['versions'].get(key)}")

