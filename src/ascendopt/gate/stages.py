"""The gate (step 5): integrity, correctness, kernel hit, performance — in that order, stopping at
the first red stage.

* integrity (red: exit 3): the contract digest; bundled kernels: the sources of the oracle and
  input factory; own code: the frozen files' sha256;
* correctness (exit 1): bundled kernels: every output and gradient vs the fp32 oracle over the
  frozen shape matrix, NaN-poisoned; own code: the frozen test command, failures listed;
* kernel_hit (exit 1): ``expected_kernels`` (own code: ``kernel_filter``) in a profile of one call;
* performance (exit 4): bundled kernels: baseline vs candidate configuration interleaved in this
  process; own code: the frozen commit (a temporary git worktree) vs the working tree,
  interleaved in two child processes (``ascendopt.gate.interleave``).

``run_gate`` returns a ``GateResult`` (never prints data; status lines go to stderr). A speedup is
only ever reported on a green gate.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ascendopt import console
from ascendopt.contract.frozen import check_frozen_files, project_root, resolve_command
from ascendopt.contract.model import Contract, load_raw, verify_digest
from ascendopt.device import backends
from ascendopt.errors import AscendoptError, DeviceFault, EnvironmentProblem, IntegrityError, UsageError
from ascendopt.gate import bench
from ascendopt.gate.kernel_hit import missing_kernels, observed_kernels
from ascendopt.gate.result import STAGES, Check, GateResult, StageResult
from ascendopt.rounds.context import RoundContext
from ascendopt.workspace import Workspace

__all__ = ["Check", "GateResult", "StageResult", "missing_kernels", "observed_kernels", "run_gate",
           "timing_inputs"]


class ClockBackend:
    """The real backend (device, synchronize) timed by an injected clock in ms (deterministic tests)."""

    def __init__(self, backend, clock: Callable[[], float]):
        self.backend = backend
        self.name = backend.name
        self.clock = clock

    def torch_device(self):
        return self.backend.torch_device()

    def synchronize(self) -> None:
        self.backend.synchronize()

    def timer(self):
        clock = self.clock

        class _Timer:
            def start(self) -> None:
                self.t0 = clock()

            def stop(self) -> float:
                return clock() - self.t0

        return _Timer()


# -- stages ------------------------------------------------------------------------------------


def _integrity(ws: Workspace, loaded: Contract | None = None) -> tuple[StageResult, Contract | None]:
    """The contract's digest and the frozen files. ``loaded``: a contract whose digest was checked
    when the caller's ``RoundContext`` loaded it (not read again)."""
    source = ws.contract_path.name
    if loaded is None:
        data = load_raw(ws)
        try:
            verify_digest(data, source)
        except IntegrityError as exc:
            return StageResult("integrity", "fail", str(exc), [Check(source, False, str(exc))]), None
        contract = Contract.from_dict(data, source)
    else:
        contract = loaded
    checks = [Check(source, True, "digest matches")]
    checks += [Check(*item) for item in check_frozen_files(contract, project_root())]
    bad = [c for c in checks if not c.passed]
    if bad:
        return StageResult("integrity", "fail", bad[0].message, checks), contract
    return StageResult("integrity", "pass", f"contract digest and {len(checks) - 1} frozen item(s) unchanged",
                       checks), contract


def _correctness_kernel(ctx: RoundContext, config: dict[str, int]) -> StageResult:
    from ascendopt.gate.correctness import check_kernel

    contract, spec = ctx.contract, ctx.spec
    w = contract.workload
    reports = []
    for case in w.shapes:
        console.status(f"gate: correctness {spec.name} {case.name} {w.dtype} {w.mode}")
        try:
            reports += check_kernel(spec, case.dims, w.dtype, w.mode, config, tolerances=contract.tolerances,
                                    case=f"{case.name}/{w.mode}")
        except AscendoptError:
            raise
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot run at this configuration is a red gate
            what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if backends.sticky_device_fault(exc):
                raise DeviceFault(
                    f"{spec.name} at {config} broke the device ({what}); nothing more can run in this process",
                    config=config, hint="this configuration is unsafe: leave it out and run again") from exc
            summary = f"{case.name}/{w.mode}: the kernel raised {what}"
            return StageResult("correctness", "fail", summary, [Check(f"{case.name}/{w.mode}", False, what)],
                               {"tensors": [r.to_dict() for r in reports], "raised": what})
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
    # the frozen tests run on the backend this process selected (--backend), as they did at freeze
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, env=backends.child_env())
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


def _kernel_hit(ctx: RoundContext, config: dict[str, int], root: Path) -> StageResult:
    contract, spec = ctx.contract, ctx.spec
    if spec is not None:
        case = contract.workload.shapes[0]
        inputs = spec.make_inputs(dict(case.dims), contract.workload.dtype, backends.current().torch_device(), 0)
        seen = observed_kernels(lambda: spec.run(inputs, config, contract.workload.mode))
    else:
        from ascendopt.gate.interleave import load_workload

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


def _performance_kernel(ctx: RoundContext, config: dict[str, int], timer, pairs: int) -> StageResult:
    spec, w = ctx.spec, ctx.contract.workload
    backend = backends.current()
    measure_backend = ClockBackend(backend, timer) if timer is not None else backend
    baseline_cfg = ctx.baseline_config
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
    from ascendopt.gate.interleave import compare_trees

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
        if bench.implausible(result.ratio):
            result = bench.after_recheck(result, compare_trees(exec_rel, tree, root, pairs=pairs))
    finally:
        _git(root, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        _git(root, "worktree", "prune", check=False)
    return _performance_result([(contract.workload.exec_file, result)])


def _git(root: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise EnvironmentProblem(f"git {' '.join(args[:2])} failed in {root}: {last}",
                                 hint="the frozen commit must be reachable (CI: fetch the full history)")
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


def run_gate(ws: Workspace, *, context: RoundContext | None = None, skip_perf: bool = False,
             config_override: Mapping[str, Any] | None = None, timer: Callable[[], float] | None = None,
             pairs: int = 30) -> GateResult:
    """Run the stages in order and stop at the first red one.

    ``context``: the caller's already loaded contract and spec (``optimize-round``); without it the
    gate loads the contract itself and reports a hand edit as a red integrity stage.
    ``config_override``: candidate tunables for a bundled kernel (default: the frozen config, an
    A/A check). ``timer``: a clock in ms replacing the device timer of the bundled-kernel
    performance stage (tests). ``pairs``: interleaved sample pairs per timed case.
    """
    bench.check_pairs(pairs)
    started = time.monotonic()
    stages: list[StageResult] = []
    notes: list[str] = []
    integrity, contract = _integrity(ws, context.contract if context else None)
    stages.append(integrity)
    root = project_root()
    if contract is not None and integrity.status == "pass":
        ctx = context or RoundContext.for_contract(ws, contract)
        _fingerprint_notes(contract, notes)
        if not ctx.is_kernel and config_override:
            raise UsageError("--set applies to bundled kernels only; own code is measured as the working tree")
        config = ctx.candidate_config(dict(config_override or {})) or {}
        runners = [
            lambda: (_correctness_kernel(ctx, config) if ctx.is_kernel else _correctness_tests(contract, root)),
            lambda: _kernel_hit(ctx, config, root),
            lambda: (StageResult("performance", "skipped", "skipped (--skip-perf)") if skip_perf else
                     _performance_kernel(ctx, config, timer, pairs) if ctx.is_kernel else
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
    now = backends.describe(backends.current())
    frozen = contract.device
    for key in ("backend", "name"):
        if frozen.get(key) != now.get(key):
            notes.append(f"{key} differs from the contract: frozen {frozen.get(key)!r}, now {now.get(key)!r}")
    for key, value in (frozen.get("versions") or {}).items():
        if value != now["versions"].get(key):
            notes.append(f"{key} version differs: frozen {value}, now {now['versions'].get(key)}")

