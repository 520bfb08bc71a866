"""The gate (step 5): integrity, correctness, kernel hit, performance — in that order, stopping at
the first red stage.

* integrity (red: exit 3): the contract digest; bundled kernels: the sources of the oracle and
  input factory; own code: the frozen files' sha256; the ledger: each round record against its own
  digest, and the contract, round records and tune cache against the audit log ``log.jsonl`` (a file
  edited, added or removed by hand, or a log line edited or removed, names the file);
* correctness (exit 1): bundled kernels: every output and gradient vs the fp32 oracle over the
  frozen shape matrix, NaN-poisoned; own code: the frozen test command, judged test by test
  against the frozen test set (``judge.testset``: what "passed" means; a run that cannot be trusted,
  or that used a file freeze neither pinned nor declared target code, ``judge.scope``, is red with
  exit 3 instead: ``StageResult.integrity_error``), then
  ``workload()`` loaded and called in a child process (a workload that raises, crashes or outlives
  its limit is red here, with ``file:line`` or the limit), and, when freeze recorded tensors it
  returns, its outputs compared with the frozen commit's (``judge.equivalence``);
* kernel_hit (exit 1): ``expected_kernels`` (own code: ``kernel_filter``) in a profile of one call
  (own code: the call the correctness stage's child profiled), and that call's kernel census against
  the frozen one (``judge.kernel_hit``): a token launch while the time goes elsewhere, or work moved to
  the host, is red; new kernels that take the time are reported;
* performance (exit 4): bundled kernels: baseline vs candidate configuration interleaved in this
  process; own code: the frozen commit (read from git into a folder, ``judge.worktrees``) vs the working tree,
  interleaved in two warm workers (``ascendopt.judge.engine``); a side whose workload
  raises, dies or outlives ``timing_s`` there turns the stage red with exit 1, not 4. A noise band
  that stays wider than ``bench.DecisionRule.max_band`` makes the stage ``inconclusive`` (exit 6,
  not a pass); a faster case beyond belief (``bench.implausible_reason``: > 5x reproduced, or under the
  roofline floor of a bundled kernel's bytes) makes it ``implausible`` (exit 6, not a pass) unless
  ``accept_implausible`` gives a reason.

``run_gate`` returns a ``GateResult`` (never prints data; status lines go to stderr). A speedup is
only ever reported on a green gate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt import console
from ascendopt.contract.frozen import check_frozen_files, project_root
from ascendopt.contract.model import Contract, load_raw, verify_digest
from ascendopt.contract.shapes import bucket_name
from ascendopt.device import backends
from ascendopt.errors import AscendoptError, DeviceFault, ExitCode, IntegrityError, UsageError
from ascendopt.gate.result import GateResult
from ascendopt.judge import bench
from ascendopt.judge.engine import Verdict
from ascendopt.judge.interleave import FAILURES as WORKLOAD_FAILURES
from ascendopt.judge.kernel_hit import kernel_census, kernel_hit_stage, missing_kernels, observed_kernels
from ascendopt.judge.result import STAGES, Check, StageResult
from ascendopt.judge.weighted import FLOOR_WEIGHT
from ascendopt.judge.worktrees import checkout, frozen_commit, frozen_commit_checks
from ascendopt.rounds.context import RoundContext
from ascendopt.tune.space import config_text
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


def _integrity(ws: Workspace, loaded: Contract | None = None,
               startup: Mapping[str, str] | None = None) -> tuple[StageResult, Contract | None]:
    """The contract's digest, the frozen files, the frozen commit, the ledger, and (own code) the
    environment's start-up files against those freeze recorded in this environment (``startup``: taken as
    the command started, ``judge.environment``). ``loaded``: a contract whose digest was checked when the
    caller's ``RoundContext`` loaded it (not read again)."""
    from ascendopt.judge import environment

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
    frozen = len(checks) - 1
    checks += frozen_commit_checks(contract, project_root())
    if startup is not None:
        checks += [Check(name, False, text) for name, text in environment.since_freeze(contract.environment, startup)]
    ledger, notes = _ledger_checks(ws)
    checks += ledger
    bad = [c for c in checks if not c.passed]
    data = {"notes": notes} if notes else {}
    if bad:
        return StageResult("integrity", "fail", bad[0].message, checks, data), contract
    return StageResult("integrity", "pass", f"contract digest, {frozen} frozen item(s) and the ledger "
                                            f"({len(ledger)} file(s) against {ws.log_path.name}) unchanged",
                       checks, data), contract


def _ledger_checks(ws: Workspace) -> tuple[list[Check], list[str]]:
    """The round records against their own digests and the ledger against the audit log: one failed
    check per file edited, added or removed by hand; passed checks for the files that match."""
    from ascendopt.rounds.records import tampered_rounds
    from ascendopt.workspace import check_ledger, ledger_files

    audit = check_ledger(ws)
    bad: dict[str, str] = {}
    for path, text in [*tampered_rounds(ws), *audit.problems]:
        bad.setdefault(path, text)  # one check per file: its own digest's word first
    checks = [Check(path, False, text) for path, text in bad.items()]
    checks += [Check(str(ws.root / rel), True, "as the audit log recorded it") for rel in ledger_files(ws)
               if str(ws.root / rel) not in bad and audit.checked]
    for note in audit.notes:
        console.status(f"gate: {note}")
    return checks, audit.notes


def kernel_raised(exc: Exception, kernel: str, config: Mapping[str, int]) -> str:
    """``Type: first line`` of what a bundled kernel raised at ``config``; raises DeviceFault (exit 5)
    instead when the error broke the device (nothing after it can be trusted in this process)."""
    what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if backends.sticky_device_fault(exc):
        raise DeviceFault(f"{kernel} at {dict(config)} broke the device ({what}); nothing more can run in this "
                          "process", config=dict(config),
                          hint="this configuration is unsafe: leave it out and run again") from exc
    return what


def _correctness_kernel(ctx: RoundContext, config: dict[str, int]) -> StageResult:
    from ascendopt.judge.correctness import check_kernel

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
            what = kernel_raised(exc, spec.name, config)
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


def _correctness_tests(contract: Contract, root: Path, timeout: float | None = None):
    """Own code: the frozen test command, judged test by test against the test set frozen with it
    (``judge.testset``: every test that passed at freeze must pass, none may fail); one check per test.
    ``timeout``: the command's ``--timeout`` (else the contract's ``tests_s``). -> ``(stage, run)``, ``run``
    the ``SuiteRun`` (None when the command outlived its limit), for ``_scope_check``."""
    from ascendopt.judge import environment
    from ascendopt.judge.testset import judge, run_tests
    from ascendopt.process import ProcessTimeout

    argv = contract.commands["validation"]
    limit = contract.timeout("tests_s", timeout)
    console.status(f"gate: running frozen tests: {shlex.join(argv)} (limit {limit:g} s)")
    try:
        # the frozen tests run on the backend this process selected (--backend), as they did at freeze
        run = run_tests(argv, root, timeout=limit, hash_also=_large_pins(contract, root),
                        plugins=(contract.test_set or {}).get("plugins"))
    except ProcessTimeout as exc:
        tail = "\n".join(exc.output.strip().splitlines()[-20:])
        return StageResult("correctness", "fail", str(exc), [Check("frozen tests", False, str(exc))],
                           {"output_tail": tail}), None
    if run.runner == "pytest" and run.used:  # what the tests loaded from the environment is what was installed
        run.integrity += environment.installed_problems(run.used.get("modules", []), root,
                                                        environment.modified_pins(contract.environment))
    run.integrity += _compiled_not_pinned(contract, root, run.loaded)
    results, summary = judge(contract.test_set, run)
    checks = [Check(*item) for item in results]
    data: dict[str, Any] = {"returncode": run.returncode, "counts": run.counts, "outcomes": run.outcomes}
    if run.problem and not run.outcomes:  # no test to show: the command's own last lines say why
        data["output_tail"] = run.output_tail
    if run.integrity:
        return _untrusted(list(run.integrity), checks, data), run
    return StageResult("correctness", "fail" if any(not c.passed for c in checks) else "pass", summary, checks,
                       data), run


def _large_pins(contract: Contract, root: Path) -> list[str]:
    """Real paths of the pinned files above the size the test run hashes unasked (``pytest_report.
    MAX_HASHED_BYTES``): it hashes these too as the tests read them, so no size escapes ``_compiled_not_pinned``."""
    from ascendopt.judge.pytest_report import MAX_HASHED_BYTES

    paths = []
    for frozen in contract.frozen_files:
        path = os.path.realpath(root / frozen.path)
        if "::" not in frozen.path and os.path.isfile(path) and os.path.getsize(path) > MAX_HASHED_BYTES:
            paths.append(path)
    return paths


def _compiled_not_pinned(contract: Contract, root: Path,
                         loaded: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """``(path, message)`` for each pinned file the test run compiled or read in another version than its pin
    (``loaded``: real path -> sha256 of each content compiled, ``judge.sources``, or read, the plugin's audit
    hook): changed while the tests used it, whatever it holds now."""
    problems = []
    for frozen in contract.frozen_files:
        if "::" in frozen.path:  # a section of a configuration file: its file holds more than the pin
            continue
        digests = loaded.get(os.path.realpath(root / frozen.path)) or []
        if any(digest != frozen.sha256 for digest in digests):
            problems.append((frozen.path, f"{frozen.path}: the test run used a version of this pinned file that is "
                                          "not the frozen one (it changed while the tests ran)"))
    return problems


def _untrusted(problems: Sequence[tuple[str, str]], checks: Sequence[Check], data: Mapping[str, Any]) -> StageResult:
    """The correctness stage red for the integrity of the test run (exit 3): one failed check per problem
    ``(file or name, message)`` before the tests' own checks."""
    message = problems[0][1] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
    return StageResult("correctness", "fail", f"integrity of the test run: {message}",
                       [*(Check(name, False, text) for name, text in problems), *checks], dict(data),
                       integrity_error=message)


def _scope_check(contract: Contract, root: Path, run, tests: StageResult,
                 imported: Callable[[], Sequence[str]]) -> StageResult:
    """``tests`` (the tests' stage), red for integrity when the run used a file that freeze neither pinned nor
    declared a target (``judge.scope.newcomers``). A module new since freeze that the working tree's
    ``workload()`` imports (``imported()``: absolute paths, the candidate worker's ``modules``) is target
    code (a round may split its code into a new module); one that only the test run imports is not. A
    contract frozen before ascendopt recorded the run's scope (``targets`` None) is not checked."""
    from ascendopt.judge import scope

    if contract.targets is None or run is None or run.runner != "pytest" or not run.used:
        return tests
    pinned = [f.path for f in contract.frozen_files]
    kinds = scope.used_files(run.used, root)
    new = scope.newcomers(kinds, pinned, contract.targets)
    if any(kinds[rel] == "module" for rel, _ in new):
        try:
            modules = scope.repository_files(imported(), root)
        except AscendoptError:  # a timeout too; the workload's own failure is reported by the stage
            modules = []
        new = scope.newcomers(kinds, pinned, [*contract.targets, *modules])
    return _untrusted(new, tests.checks, tests.data) if new else tests


def _worker_environment(contract: Contract, root: Path, run, tests: StageResult,
                        imported: Callable[[], Sequence[str]]) -> StageResult:
    """``tests``, red for integrity when an installed file the workers loaded (``imported()``: the working
    tree's and the frozen commit's) is not what its distribution installed (``judge.environment``; those the
    test run loaded were checked with its verdict, ascendopt's own are checked when the command's children
    have ended)."""
    from ascendopt.judge import environment

    try:
        files = list(imported())
    except AscendoptError:  # a worker that cannot answer: its own failure is reported by the stage
        files = []
    checked = set((run.used or {}).get("modules", [])) if run is not None else set()
    files = [f for f in files if f not in checked]
    problems = environment.installed_problems(files, root, environment.modified_pins(contract.environment))
    return _untrusted(problems, tests.checks, tests.data) if problems else tests


def _own_session(stack, ws: Workspace, contract: Contract, root: Path, request,
                 open_session: Callable[[Callable[[], Any]], Any] | None = None):
    """The processes of an own-code verdict (``judge.engine.Session``), started at once: the frozen tests,
    the working tree's worker, and the frozen commit's (its folder, ``judge.worktrees.checkout``): the trusted
    maker of the inputs and the other side of the differential check and the timing. Closed by ``stack``.

    ``open_session(tests)``: a caller that keeps the workers for more work after the gate (``optimize-round``
    times the same warm workers) starts the session itself, with the frozen tests ``tests``, and closes it."""
    from ascendopt.judge.engine import Session, import_statistics

    exec_rel = contract.workload.exec_file

    def tests():
        return _correctness_tests(contract, root, request.timeout)

    if open_session is not None:
        session = open_session(tests)
    else:
        if not request.skip_perf:
            import_statistics()  # beside the tests: the verdict needs it
        # the frozen commit's worker always: it makes the inputs and is the other side of the differential check
        trees = {"candidate": root}
        if contract.git.get("commit"):
            trees = {"baseline": stack.enter_context(checkout(root, frozen_commit(contract), exec_rel)), **trees}
        session = stack.enter_context(Session(exec_rel, trees, load_s=contract.timeout("workload_s",
                                                                                        request.timeout),
                                              tests=tests))
    console.status(f"gate: running the frozen tests while {len(session.workers)} worker(s) "
                   f"({', '.join(session.workers)}) load {exec_rel}")
    return session


def _correctness_own(contract: Contract, root: Path, timeout: float | None, session) -> StageResult:
    """Own code: the frozen tests (run concurrently with the workers' warm-up, ``session``) and, beside them,
    the judge's differential check (``judge.engine.differential``: the working tree against the frozen commit on
    trusted inputs at the workload's shape, every bucket of the contract's shape mix and hidden shapes; red
    whatever the tests said, naming the shape); once the tests have ended, as at freeze, the kernel census the
    kernel-hit stage judges (``data["census"]``): its device-time shares, taken while the tests compete for the
    host, are not comparable with freeze's. Then the frozen commit's folder is verified again
    (``engine.trees_changed``: exit 3 when it changed). A workload that raises, crashes or outlives
    ``workload_s`` is a red stage naming ``file:line`` or the limit, never an exception out of the gate. With
    output equivalence frozen off, only tensors the worker's reader refused fail the check."""
    from ascendopt.judge.engine import check_cases, differential, trees_changed

    exec_rel = contract.workload.exec_file
    limit = contract.timeout("workload_s", timeout)
    frozen = contract.equivalence or {}
    compare = bool(frozen.get("enabled"))
    failed: Exception | None = None
    found = None
    census = None
    # the workers' calls overlap with the tests still running; the tests' verdict is reported first
    try:
        child = session.worker("candidate")
        if "baseline" in session.workers:
            console.status(f"gate: the differential check of {exec_rel}: the working tree against the frozen commit "
                           f"on inputs the frozen commit's worker makes (limit {limit:g} s)")
            base = session.worker("baseline")
            cases = check_cases(contract.shapes, base.takes_shape)
            found = differential(session, frozen["tolerances"] if compare else None, limit, cases,
                                 contract.test_calls, probe=frozen.get("value_probe", True))
            if contract.shapes is not None and not base.takes_shape:
                found.checks.append(Check("shape mix", False, f"the contract's shape mix has "
                                          f"{len(contract.shapes.buckets)} bucket(s), but {exec_rel}'s inputs takes "
                                          "no shape: define inputs(seed, shape) to check them"))
    except WORKLOAD_FAILURES as exc:
        failed = exc
    tests, run = session.tests_result()
    if failed is None and tests.status == "pass":  # the census only once the tests have ended
        try:
            census = child.kernel_census(limit)
        except WORKLOAD_FAILURES as exc:
            failed = exc
    asked: list[Sequence[str]] = []

    def imported() -> Sequence[str]:  # what the working tree's worker loaded, asked once
        if not asked:
            asked.append(session.worker("candidate").modules(limit))
        return asked[0]

    # a worker that failed cannot list what it imported: then every new module the run used is a newcomer
    if not tests.integrity_error:
        tests = _scope_check(contract, root, run, tests, (lambda: []) if failed is not None else imported)
    def imported_by_both() -> Sequence[str]:
        # the frozen commit's worker too: an installed file only the baseline still loads, rewritten by the
        # candidate to slow it, is a changed environment, not a faster candidate
        try:
            baseline = session.worker("baseline").modules(limit) if "baseline" in session.workers else []
        except AscendoptError:
            baseline = []
        return [*imported(), *baseline]

    if not tests.integrity_error and failed is None:
        tests = _worker_environment(contract, root, run, tests, imported_by_both)
    if failed is not None:
        if tests.status != "pass":
            return tests
        return _workload_failed("correctness", str(failed), tests.checks, tests.data,
                                integrity=getattr(failed, "exit_code", None) == ExitCode.INTEGRITY)
    outputs = found.checks if found is not None else []
    bad = [c for c in outputs if not c.passed]
    data = {**tests.data, "census": census}
    if found is not None:
        data["differential"] = {"calls": found.calls, "inputs": found.inputs, "equivalence": compare,
                                "shapes": found.shapes, "test_calls": found.replayed, "value_probe": found.probe,
                                "outputs": [c.to_dict() for c in outputs],
                                "inputs_changed": found.writes}
    tampered = trees_changed(session)
    if tampered:
        return StageResult("correctness", "fail", "the frozen commit's code was changed under the judge: "
                           + tampered[0], [*tests.checks, *[Check("frozen tree", False, t) for t in tampered]], data,
                           integrity_error=tampered[0])
    if bad:  # red whatever the tests said: the tests ran in a process the code under test could reach
        more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
        found_text = "differential check against the frozen commit: " + "; ".join(c.message for c in bad[:3]) + more
        if tests.status != "pass" or tests.integrity_error:  # the tests' own verdict first, the check's beside it
            return dataclasses.replace(tests, status="fail", summary=f"{tests.summary}; and the {found_text}",
                                       checks=[*tests.checks, *outputs], data={**tests.data, **data})
        return StageResult("correctness", "fail", found_text, [*tests.checks, *outputs], data)
    if tests.status != "pass":
        return tests
    checks = [*tests.checks, Check("workload()", True, f"{exec_rel} workload() ran in a worker process")]
    if found is None:
        checks.append(Check("differential check", True, "not run: no frozen commit to compare against (frozen "
                                                        "outside git)"))
    elif not compare:
        why = frozen.get("reason") or "the contract has none (frozen by an older ascendopt); re-freeze to compare"
        checks.append(Check("output equivalence", True, f"values not compared: {why}"))
    checks += outputs
    same = f"; {differential_text(found)}" if found is not None and compare else ""
    if found is not None and found.doubts:  # outside the workload's range: a doubt a person resolves, not red
        checks += [Check("value probe", False, doubt) for doubt in found.doubts]
        return StageResult("correctness", "inconclusive", f"inconclusive: the differential check {found.doubts[0]}: "
                           "wrong outside the workload's range, or an honest change whose domain is that range "
                           "(then freeze with --no-value-probe)", checks, data)
    return StageResult("correctness", "pass", f"{tests.summary}; workload() ran{same}", checks, data)


def _workload_failed(stage: str, message: str, checks: Sequence[Check] = (),
                     data: Mapping[str, Any] | None = None, integrity: bool = False) -> StageResult:
    """A stage red because the workload raised, crashed or timed out: exit 1 whatever the stage; exit 3
    (``integrity``) when it undid a defence of the judge in its worker (``interleave.WorkloadTampering``)."""
    return StageResult(stage, "fail", message, [*checks, Check("workload()", False, message)],
                       {**(data or {}), "error": message}, workload_error=None if integrity else message,
                       integrity_error=message if integrity else None)


def _kernel_hit(ctx: RoundContext, config: dict[str, int], census: Mapping[str, Any] | None) -> StageResult:
    """``census``: own code, the census the correctness stage's workload child took; bundled kernels are
    profiled here, in this process (``kernel_hit.kernel_census``). Judged by ``kernel_hit.kernel_hit_stage``
    against the contract's frozen census: the expected kernels ran and did the work."""
    contract, spec = ctx.contract, ctx.spec
    if spec is not None:
        case = contract.workload.shapes[0]
        inputs = spec.make_inputs(dict(case.dims), contract.workload.dtype, backends.current().torch_device(), 0)
        census = kernel_census(lambda: spec.run(inputs, config, contract.workload.mode))
    return kernel_hit_stage(contract.expected_kernels, census or {"kernels": {}}, contract.kernel_census)


def timing_inputs(spec, dims: Mapping[str, Any], dtype: str, mode: str, device) -> list[tuple[dict[str, Any]]]:
    """Seeded input sets to rotate through while timing, enough that the set is not cache-resident.

    Sets are added until they span 2 x 64 MiB (above the last-level cache of current devices: H200
    L2 50 MiB, Ascend A2 L2 192 MiB is bandwidth-close to HBM), capped at 8 sets.
    """
    per_set = max(1, spec.cost(dims, dtype, mode).bytes)
    count = max(1, min(8, -(-2 * 64 * 2**20 // per_set)))
    return [(spec.make_inputs(dict(dims), dtype, device, seed),) for seed in range(count)]


def timing_line(kernel: str, case: str, baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                source: str) -> str:
    """The status line before a bundled kernel's case is timed: both configurations as NAME=VALUE, and
    what the candidate is (``source``); identical sides are said to be an A/A check."""
    if dict(baseline) == dict(candidate):
        return (f"gate: timing {kernel} {case}: candidate = baseline = {config_text(baseline)} ({source}): "
                "an A/A check of the frozen configuration against itself")
    return (f"gate: timing {kernel} {case}: baseline {config_text(baseline)} vs candidate "
            f"{config_text(candidate)} ({source})")


def _performance_kernel(ctx: RoundContext, config: dict[str, int], timer, pairs: int,
                        source: str = "candidate", accepted: str | None = None) -> StageResult:
    spec, w = ctx.spec, ctx.contract.workload
    backend = backends.current()
    floors = {}
    measure_backend = ClockBackend(backend, timer) if timer is not None else backend
    baseline_cfg = ctx.baseline_config
    comparisons = []
    for case in w.shapes:
        console.status(timing_line(spec.name, case.name, baseline_cfg or {}, config, source))
        inputs = timing_inputs(spec, case.dims, w.dtype, w.mode, backend.torch_device())
        result = bench.compare(lambda inp: spec.run(inp, baseline_cfg, w.mode),
                               lambda inp: spec.run(inp, config, w.mode),
                               inputs=inputs, backend=measure_backend, pairs=pairs)
        comparisons.append((f"{case.name}/{w.mode}", result))
        floors[f"{case.name}/{w.mode}"] = roofline_floor(spec, case.dims, w.dtype, w.mode, backend)
    return _performance_result(comparisons, floors, accepted)


def roofline_floor(spec, dims: Mapping[str, Any], dtype: str, mode: str, backend) -> float | None:
    """The least time (ms) a call of the bundled kernel ``spec`` can take on ``backend``: the bytes its cost
    model says it moves at the chip's peak bandwidth (``bench.roofline_floor_ms``); None on cpu (the
    interpreter has no device memory to bound it) and where the chip's bandwidth is unknown."""
    if backend.name == "cpu":
        return None
    return bench.roofline_floor_ms(spec.cost(dict(dims), dtype, mode).bytes, backend.info().hbm_gbs)


def _performance_own(contract: Contract, session, request, accepted: str | None = None) -> StageResult:
    """The frozen commit's worker vs the working tree's, interleaved batches timed by this process's clock
    (``judge.engine``), then audited: every timed output against the baseline's for the same inputs (a
    wrong one: red, exit 1), both clocks of each side, the idle side's CPU use, and the re-measured
    baseline against the frozen one (``engine.anchor_problem``); a doubt makes the stage inconclusive.

    A side that raises, dies or outlives its limit (``workload_s`` for the module code, ``timing_s``
    for the timing phase) makes this stage red with exit 1 (``workload_error``): the code under test
    failed, which is a correctness finding, not a regression; ``optimize-round`` records it as a drop.
    """
    from ascendopt.judge import engine

    commit = frozen_commit(contract)
    exec_rel = contract.workload.exec_file
    timing_s = contract.timeout("timing_s", request.timeout)
    rule = bench.DecisionRule()
    frozen = contract.equivalence or {}
    tolerances = frozen.get("tolerances") if frozen.get("enabled") else None
    console.status(f"gate: timing {exec_rel}: frozen commit {commit[:10]} vs working tree (interleaved, "
                   f"limit {timing_s:g} s)")
    cases = timed_cases(contract, session, request.pairs)
    results: list[tuple[str, Any, float | None]] = []  # (case, comparison, weight or None)
    doubts: list[str] = []
    not_checked: list[str] = []
    timed_calls = 0
    judged = None
    for case, shape, weight, pairs in cases:
        if judged is not None:
            for side in judged.sides:
                side.readings.clear()  # each case's audit reads its own batches
        label = exec_rel if shape is None else f"{exec_rel} {case}"
        extend = None if weight is None or weight >= FLOOR_WEIGHT else pairs  # a light bucket: no more pairs

        def once(shape=shape, pairs=pairs, extend=extend, label=label):
            return engine.time_sides(session, ["baseline", "candidate"], request, timing_s=timing_s, label=label,
                                     decide=lambda j, on: bench.take_until_decided(j, pairs, extend, rule, on),
                                     tolerances=tolerances, shape=shape)

        try:
            judged, result = once()
            if bench.implausible(result.ratio):
                judged, again = once()
                result = bench.after_recheck(result, again)
        except WORKLOAD_FAILURES as exc:
            return _workload_failed("performance", str(exc),
                                    integrity=getattr(exc, "exit_code", None) == ExitCode.INTEGRITY)
        tampered = engine.trees_changed(session)
        if tampered:
            why = f"the frozen commit's code was changed under the judge: {tampered[0]}"
            return StageResult("performance", "fail", why, [Check("frozen tree", False, t) for t in tampered],
                               integrity_error=tampered[0])
        found = engine.audit(judged)
        if found.wrong:
            return _workload_failed("performance", "a timed call's output is wrong: " + found.wrong[0])
        frozen_case = frozen_baseline(contract, case if shape is not None else None)
        anchor = engine.anchor_problem(frozen_case.median_ms, judged.samples[0], judged.waits[0],
                                       frozen_case.waited_ms) if frozen_case else None
        doubts += [d for d in found.doubts + ([f"{case}: {anchor}" if shape is not None else anchor]
                                               if anchor else []) if d not in doubts]
        not_checked += [n for n in found.not_checked if n not in not_checked]
        timed_calls += sum(r["calls"] for side in judged.sides for r in side.readings)
        results.append((case if shape is not None else exec_rel, result, weight))
    # own code: no cost model gives its bytes, so only the ratio bound applies
    if contract.shapes is not None and all(w is not None for _, _, w in results):
        stage = _weighted_result(contract, results, accepted)
    else:
        stage = _performance_result([(case, r) for case, r, _ in results], accepted=accepted)
    stage.data["audit"] = {"doubts": doubts, "timed_calls": timed_calls, "inputs": _inputs_source(judged.sides[0]),
                           "worker_clock": engine.second_reading(judged), "not_checked": not_checked}
    if not_checked:  # said beside the verdict: a pass here rests on less than on a Linux host
        stage.checks.append(Check("judge", True, "not checked on this host: " + "; ".join(not_checked)))
        stage.summary += "; not checked on this host: " + "; ".join(not_checked)
    if doubts and stage.status == "pass":
        checks = [*stage.checks, *[Check("judge", False, d) for d in doubts]]
        return StageResult("performance", "inconclusive", "inconclusive: " + doubts[0], checks, stage.data)
    return stage


MIN_PAIRS = 12  # the fewest pairs a light bucket is timed for (the CLI's --pairs floor)


def timed_cases(contract: Contract, session, pairs: int) -> list[tuple[str, Any, float | None, int]]:
    """What the performance stage times, as ``(case, shape, weight, pairs)``: with a shape mix whose workload makes
    any shape, every bucket of weight at least ``judge.weighted.TIMED_WEIGHT`` (``pairs`` scaled down for a light
    one, whose verdict only feeds the weighted total); else the workload's own shape (``shape`` None)."""
    from ascendopt.judge.weighted import timed

    mix = contract.shapes
    if mix is None or not session.worker("baseline").takes_shape:
        return [("the workload's shape", None, None, pairs)]
    flags = timed([b.weight for b in mix.buckets])
    return [(bucket_name(i, b), b.shape, b.weight, pairs if b.weight >= FLOOR_WEIGHT else max(MIN_PAIRS, pairs // 2))
            for i, (b, on) in enumerate(zip(mix.buckets, flags, strict=True)) if on]


def frozen_baseline(contract: Contract, case: str | None):
    """The frozen baseline timing of ``case`` (a bucket; None: the workload's own shape, the first), or None."""
    if not contract.baseline:
        return None
    if case is None:
        return contract.baseline[0]
    return next((b for b in contract.baseline if b.case == case), None)


def _weighted_result(contract: Contract, results, accepted: str | None) -> StageResult:
    """The performance stage over a shape mix (``judge.weighted.weigh``): one check per timed bucket, the weighted
    verdict as the stage's; a heavy bucket slower beyond its band is red (exit 4) naming it, even when the
    weighted total is faster; the buckets too light to time are listed."""
    from ascendopt.judge.weighted import BucketTiming, bucket_rows, weigh

    per_case = _performance_result([(case, r) for case, r, _ in results], accepted=accepted)
    timed_names = {case for case, _, _ in results}
    light = [(bucket_name(i, b), b.weight) for i, b in enumerate(contract.shapes.buckets)
             if bucket_name(i, b) not in timed_names]
    timings = [BucketTiming(case, w, r) for case, r, w in results]
    found = weigh(timings, light)
    shapes = {bucket_name(i, b): b.shape for i, b in enumerate(contract.shapes.buckets)}
    data = {**per_case.data, "weighted": found.to_dict(),
            "weights": {case: w for case, _, w in results},
            "buckets": bucket_rows(timings, shapes)}
    line = f"weighted over the shape mix: {time_change_text(found.ratio)}: {found.verdict} ({found.reason})"
    # each bucket's check (one JUnit testcase per bucket) says its weight and floor verdict after its name, where
    # a JUnit failure's one-line message (cut at 200 characters) still shows them
    floor_of = {row["bucket"]: row for row in data["buckets"]}
    checks = [Check(c.name, c.passed, c.message.replace(
        f"{c.name}: ", f"{c.name} (weight {floor_of[c.name]['weight']:.1%}, floor {floor_of[c.name]['floor']}): ", 1))
        if c.name in floor_of else c for c in per_case.checks]
    # a light bucket's own verdict does not decide the gate (it counts in the weighted total only); a heavy one's
    # check keeps its own outcome
    light_names = {row["bucket"] for row in data["buckets"] if row["floor"] == "no floor"}
    checks = [Check(c.name, True, c.message + " (a light bucket: counted in the weighted total only)")
              if not c.passed and c.name in light_names else c for c in checks]
    checks.append(Check("weighted", found.verdict not in ("slower", "inconclusive"), line))
    if found.verdict == "slower":
        return StageResult("performance", "fail", "regression: " + found.reason, checks, data)
    if found.verdict == "inconclusive":
        return StageResult("performance", "inconclusive", "inconclusive: " + found.reason, checks, data)
    if per_case.status == "implausible":
        return StageResult("performance", "implausible", per_case.summary, checks, data)
    return StageResult("performance", "pass", line, checks, data)




def differential_text(found) -> str:
    """``the differential check: 3 calls at 5 shapes on trusted inputs match the frozen commit``."""
    calls = f"{found.calls} call{'s' if found.calls != 1 else ''}"
    where = f" at {len(found.shapes)} shapes" if len(found.shapes) > 1 else ""
    source = "the workload's own inputs" if found.inputs == "workload's own" else "trusted inputs"
    replayed = sum(found.replayed.values())
    tests = (f" and {replayed} call{'s' if replayed != 1 else ''} the frozen tests made of "
             f"{', '.join(found.replayed)}, on their arguments," if replayed else "")
    verb = "match" if found.calls + replayed != 1 else "matches"
    return f"the differential check: {calls}{where} on {source}{tests} {verb} the frozen commit"


def _inputs_source(side) -> str:
    """Where a timing's inputs came from (the audit's ``inputs``): "trusted maker" (the frozen commit's worker
    made them with ``inputs(seed)`` from seeds drawn per batch from the OS random source), "own maker" (no frozen
    commit: each worker made its own), "seeds per batch" (the sets were too large to hand over, as large device
    tensors are: each worker made them from seeds it got with the batch; the outputs were still compared with the
    frozen commit's for the same seeds), or "workload's own" (no ``inputs(seed)``: every call reuses the same
    inputs, so a change that caches results across calls cannot be excluded)."""
    if not side.has_inputs:
        return "workload's own"
    if side.seeded_batches:
        return "seeds per batch (too large to hand over)"
    return "trusted maker" if side.maker is not None else "own maker"


def time_change_text(ratio: float) -> str:
    """A time ratio candidate/baseline in words whose sign and direction agree: ``87.5% less time``,
    ``12.0% more time``, ``same time`` (under 0.05 %)."""
    change = ratio - 1.0
    if abs(change) < 0.0005:
        return "same time"
    return f"{abs(change):.1%} {'less' if change < 0 else 'more'} time"


def verdict_line(case: str, c) -> str:
    """``case: baseline X us [p20, p80] | candidate Y us [p20, p80] | n.n% less time: faster (reason)``."""
    return (f"{case}: baseline {c.baseline.spread_text()} | candidate {c.candidate.spread_text()} | "
            f"{time_change_text(c.ratio)}: {c.verdict} ({c.reason})")


def _performance_result(comparisons, floors: Mapping[str, float | None] | None = None,
                        accepted: str | None = None) -> StageResult:
    """fail if any case is slower; else inconclusive if any case's band was too wide to tell
    (``bench.DecisionRule.max_band``: not a pass, exit 6); else implausible if a faster case is beyond
    belief (``bench.implausible_reason``: the ratio bound, reproduced, or under the roofline floor
    ``floors[case]`` in ms) and ``accepted`` (a person's reason, ``--accept-implausible``) is None: not a
    pass, exit 6; else pass (an accepted implausible case says so, with the reason)."""
    checks, data, implausible = [], [], []
    for case, c in comparisons:
        why = bench.implausible_reason(c.verdict, c.ratio, c.candidate.median_ms, (floors or {}).get(case))
        line = verdict_line(case, c)
        if why:
            implausible.append({"case": case, "reason": why})
            line += f"; implausible: {why}" + (f" (accepted: {accepted})" if accepted else "")
        checks.append(Check(case, c.verdict not in ("slower", "inconclusive") and not (why and not accepted), line))
        entry = {"case": case, **c.to_dict(), **({"implausible": why} if why else {})}
        data.append(entry)
        console.event("measurement", source="gate", case=case, sides={"baseline": c.baseline.to_dict(),
                                                                      "candidate": c.candidate.to_dict()},
                      ratio=c.ratio, verdict=c.verdict, noise_band=c.threshold_rel)
    slower = [ch for ch, (_, c) in zip(checks, comparisons, strict=True) if c.verdict == "slower"]
    if slower:
        return StageResult("performance", "fail", "regression: " + slower[0].message, checks,
                           {"comparisons": data})
    undecided = [ch for ch, (_, c) in zip(checks, comparisons, strict=True) if c.verdict == "inconclusive"]
    if undecided:
        return StageResult("performance", "inconclusive", "inconclusive: " + undecided[0].message, checks,
                           {"comparisons": data})
    extra = {"implausible": implausible, "accepted_implausible": accepted} if implausible else {}
    if implausible and not accepted:
        first = next(c for c in checks if not c.passed)
        return StageResult("performance", "implausible", "implausible: " + first.message, checks,
                           {"comparisons": data, **extra})
    return StageResult("performance", "pass", "; ".join(c.message for c in checks), checks,
                       {"comparisons": data, **extra})


# -- the gate ----------------------------------------------------------------------------------


def run_gate(ws: Workspace, *, context: RoundContext | None = None, skip_perf: bool = False,
             config_override: Mapping[str, Any] | None = None, timer: Callable[[], float] | None = None,
             pairs: int = 30, timeout: float | None = None, accept_implausible: str | None = None,
             open_session: Callable[[Callable[[], Any]], Any] | None = None) -> GateResult:
    """Run the stages in order and stop at the first red one.

    ``context``: the caller's already loaded contract and spec (``optimize-round``); without it the
    gate loads the contract itself and reports a hand edit as a red integrity stage.
    ``config_override``: candidate tunables for a bundled kernel, applied to the frozen configuration
    (default: the best kept round's configuration, said in a note; the frozen one, an A/A check,
    while no round was kept). ``timer``: a clock in ms replacing the device timer of the bundled-kernel
    performance stage (tests). ``pairs``: interleaved sample pairs per timed case. ``timeout``: a
    command's ``--timeout`` in seconds, replacing every frozen limit of the children it starts.
    ``accept_implausible``: a person's reason to take an implausible speedup as a pass (said in a note and
    in the stage's data); without it an implausible performance stage is not a pass (exit 6).
    ``open_session``: own code, the caller starts (and later closes) the verdict's workers and the frozen
    tests itself (``_own_session``), to use the same warm workers after the gate.

    A workload or frozen test that raises, crashes or times out is a red stage (exit 1) with the
    error in its summary; run_gate raises only for usage and environment problems.
    """
    from ascendopt.judge import environment
    from ascendopt.judge.environment import Startup

    bench.check_pairs(pairs)
    accepted_note: str | None = None  # set when the acceptance comes from the ledger, not the command line
    started = time.monotonic()
    startup = Startup()  # before any child: what the environment runs at interpreter start
    stages: list[StageResult] = []
    notes: list[str] = []
    integrity, contract = _integrity(ws, context.contract if context else None, startup.before)
    stages.append(integrity)
    _stage_event(integrity)
    root = project_root()
    if contract is not None and integrity.status == "pass":
        if not contract.is_kernel and config_override:
            raise UsageError("--set applies to bundled kernels only; own code is measured as the working tree")
        request = Verdict(pairs=pairs, timeout=timeout, skip_perf=skip_perf)
        with contextlib.ExitStack() as stack:
            # own code: the tests and the workers start first; the rest of the set-up overlaps with them
            session = None if contract.is_kernel else _own_session(stack, ws, contract, root, request,
                                                                    open_session)
            ctx = context or RoundContext.for_contract(ws, contract)
            _fingerprint_notes(contract, notes)
            config, source = _candidate(ctx, config_override)
            if ctx.is_kernel:
                notes.append(f"candidate: {source}: {config_text(config)}")
            if accept_implausible is None and not skip_perf:
                recorded = recorded_acceptance(ctx, config, root, ws.root)
                if recorded is not None:
                    accept_implausible, accepted_note = recorded
            runners = [
                lambda: (_correctness_kernel(ctx, config) if ctx.is_kernel else
                         _correctness_own(contract, root, timeout, session)),
                lambda: _kernel_hit(ctx, config, stages[-1].data.get("census")),  # own code: taken at correctness
                lambda: (StageResult("performance", "skipped", "skipped (--skip-perf)") if skip_perf else
                         _performance_kernel(ctx, config, timer, pairs, source, accept_implausible) if ctx.is_kernel
                         else _performance_own(contract, session, request, accept_implausible)),
            ]
            for run in runners:
                began = time.monotonic()
                stage = run()
                stage.data.setdefault("elapsed_s", round(time.monotonic() - began, 3))
                stages.append(stage)
                _stage_event(stage)
                if stage.status == "fail":
                    break
        # every child has ended (a round's workers end with the round, which checks this itself)
        changed = (environment.after_command(startup, root, contract.environment)
                   if session is not None and open_session is None else [])
        if changed:
            stages[1:] = [_untrusted(changed, [], {})]
            _stage_event(stages[1])
    red = next((s.name for s in stages if s.status == "fail"), None)
    for name in STAGES[len(stages):]:
        stages.append(StageResult(name, "not-run", f"not run: stage {red} is red"))
        _stage_event(stages[-1])
    perf = stages[-1]
    if perf.data.get("accepted_implausible"):
        notes.append(accepted_note or
                     f"implausible result accepted (--accept-implausible): {perf.data['accepted_implausible']}")
    notes.append(f"gate took {time.monotonic() - started:.2f} s")
    return GateResult(stages, notes)


def kept_rounds_of(ctx: RoundContext, config: Mapping[str, Any], root: Path, workspace: Path) -> list[Any]:
    """The kept rounds, oldest first, whose measured state is the one the gate judges: a bundled kernel's
    same configuration (``config``), or own code's working tree with the round's content digest."""
    kept = [r for r in ctx.records if r.verdict == "keep"]
    if not kept:
        return []
    if ctx.is_kernel:
        return [r for r in kept if r.config and (ctx.candidate_config(dict(r.config)) or {}) == dict(config)]
    from ascendopt.rounds.tree import tree_state

    digest = tree_state(root, [workspace]).digest
    return [r for r in kept if digest and (r.change or {}).get("tree_digest") == digest]


def judged_round(ws: Workspace, config_override: Mapping[str, Any] | None = None) -> int | None:
    """The number of the newest kept round that already records the state a gate judged (``kept_rounds_of``),
    None when it is a state no round holds (a change not yet recorded) or nothing can be read."""
    try:
        ctx = RoundContext.load(ws)
        config, _ = _candidate(ctx, config_override)
        same = kept_rounds_of(ctx, config, project_root(), ws.root)
    except AscendoptError:
        return None
    return same[-1].number if same else None


def recorded_acceptance(ctx: RoundContext, config: Mapping[str, Any], root: Path, workspace: Path
                        ) -> tuple[str, str] | None:
    """The acceptance of an implausible speedup recorded in the ledger for the state the gate judges:
    ``(reason, note)`` of the newest kept round whose measured state is the candidate (a bundled kernel: the
    same configuration; own code: the working tree's content digest is the round's ``tree_digest``, and the
    code files git ignores are as they were when accepted, ``vcs.ignored_code``) and whose ``timing["implausible"]``
    a person accepted (``optimize-round --accept-implausible``); None
    otherwise. The gate honours it as if ``--accept-implausible`` were given, and its note names who, when
    and why, from the round record. The record is the ledger's (its digest and the audit log are checked at
    the integrity stage first), so a hand-written acceptance is red there, never honoured here. A changed
    tree or another configuration is not the accepted state: the gate judges it without the acceptance."""
    same = kept_rounds_of(ctx, config, root, workspace)
    same = [r for r in same if ((r.timing or {}).get("implausible") or {}).get("accepted")]
    if same and not ctx.is_kernel:  # the code git ignores as it was when accepted: the tree's digest omits it
        from ascendopt import vcs

        ignored = vcs.ignored_code(root, [workspace])
        kept = [r for r in same if ignored is not None and r.timing["implausible"].get("ignored_code") == ignored]
        if not kept:
            then = same[-1].timing["implausible"].get("ignored_code") or {}
            differ = sorted(p for p in {*then, *(ignored or {})} if then.get(p) != (ignored or {}).get(p))
            console.warn(f"the acceptance of round {same[-1].number} is not honoured: code git ignores differs from "
                         f"when it was accepted ({', '.join(differ[:3]) or 'not recorded'}"
                         f"{' and more' if len(differ) > 3 else ''}); the gate judges this state without it")
        same = kept
    if not same:
        return None
    r = same[-1]
    found = r.timing["implausible"]
    who = found.get("by") or "(not recorded)"
    when = found.get("at") or r.created_at or "(not recorded)"
    return found["accepted"], (f"implausible result accepted in round {r.number} (rounds/{r.number:04d}.yaml) by "
                               f"{who} at {when}: {found['accepted']}")


def _candidate(ctx: RoundContext, override: Mapping[str, Any] | None) -> tuple[dict[str, int], str]:
    """The candidate configuration of a bundled kernel and where it comes from (own code: ``{}``)."""
    if not ctx.is_kernel:
        return {}, "working tree"
    if override is not None:  # optimize-round's candidate, or --set
        return ctx.candidate_config(dict(override)) or {}, "the given tunables over the frozen configuration"
    best = ctx.best_round
    if best is not None and best.config:
        return ctx.candidate_config(dict(best.config)) or {}, \
            f"best kept configuration, round {best.number} (--set overrides it)"
    return ctx.candidate_config({}) or {}, "the frozen configuration, no round was kept yet"


def _stage_event(stage: StageResult) -> None:
    console.event("stage_result", stage=stage.name, status=stage.status, exit_code=stage.exit_code,
                  summary=stage.summary, elapsed_s=stage.data.get("elapsed_s"))


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

