"""Step 1: freeze semantics, workload, tolerances and the baseline into the task contract.

``freeze_kernel`` (a bundled kernel) and ``freeze_exec_file`` (own code) each:

1. refuse to overwrite an existing contract unless ``force``;
2. check the baseline is correct (bundled: every output/gradient vs the fp32 oracle over the shape
   matrix, NaN-poisoned; own code: the frozen test command passes) — a wrong baseline is refused;
3. prove the target kernel runs: a profile of one call must show the expected kernel names; a torch
   fallback (none of them) is refused with the names the profile did show; that profile's census
   (``judge.kernel_hit.kernel_census``: launches and device time per kernel, the call's device, wall and
   host time) goes into the contract, for the gate to see where a candidate's time goes;
4. measure the baseline latency with the measurement core (synchronized, median/p20/p80/CV); own
   code's ``workload()`` runs (steps 3 and 4) in a child process under the contract's time limits,
   so a hanging baseline ends freeze (exit 1, naming the limit) instead of hanging it; its first call
   records the tensors it returns, for the gate's output equivalence (``judge.equivalence``);
5. record the device fingerprint, git commit and frozen files, and write the contract atomically
   under the workspace lock (an interrupted freeze leaves the previous contract intact); a previous
   contract's ledger (its rounds, tune cache, report) is archived under ``archive/<UTC stamp>/`` first
   (``Workspace.archive_ledger``), so a re-freeze starts a new ledger;
6. profile the baseline with the contract's metric groups into ``profiles/`` (``profile=False``:
   skipped), so the first round has a "before"; a failure only warns.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt import console
from ascendopt.contract.frozen import file_entry, git_state, oracle_entries, project_root, pytest_config_entries
from ascendopt.contract.model import (
    DEFAULT_MAX_ROUNDS,
    EQUIVALENCE_TOLERANCES,
    BaselineTiming,
    Contract,
    ShapeCase,
    Workload,
    frozen_timeouts,
    save,
)
from ascendopt.contract.shapes import ShapeMix
from ascendopt.errors import CorrectnessError, EnvironmentProblem, IntegrityError, UsageError
from ascendopt.workspace import Workspace, ensure_space, write_gitignore

DEFAULT_METRIC_GROUPS = ("PipeUtilization",)


def _refuse_overwrite(ws: Workspace, force: bool) -> None:
    if ws.contract_path.exists() and not force:
        raise UsageError(f"{ws.contract_path}: a contract already exists",
                         hint="pass --force to replace it (the old contract and its rounds are archived)")


def _save(ws: Workspace, contract: Contract, force: bool, *, profile: bool = False,
          timeout: float | None = None) -> None:
    """Write the new contract under the workspace lock; a previous ledger (contract, rounds, tune cache,
    report) is archived first, so the new contract's rounds, stop criteria and report start over at
    round 1. Profiles stay in ``profiles/`` as evidence (the archived rounds name them by path).
    ``profile``: then profile the baseline (``_profile_baseline``) under the same lock, so freeze's one
    audit log entry names everything it wrote."""
    with ws.lock() as session:
        _refuse_overwrite(ws, force)  # re-checked under the lock: another freeze may have won
        archive = ws.archive_ledger()
        save(ws, contract)
        session.event = "freeze"  # the log's entry of this write is the contract's origin (workspace.check_ledger)
        write_gitignore(ws)
        if archive is not None:
            ws.drop_archived(archive)
            kept = len(list((archive / "rounds").glob("*.yaml")))
            names = ", ".join(sorted(p.name for p in archive.iterdir()))
            console.info(f"freeze: the previous ledger is archived in {archive} ({names}; {kept} round(s)); "
                         "rounds, stop criteria and the report start over at round 1")
        if profile:
            _profile_baseline(ws, contract, timeout)


def _profile_baseline(ws: Workspace, contract: Contract, timeout: float | None) -> None:
    """Step 6 (``profile``, the default; ``freeze --no-profile`` skips it): the baseline profiled with the
    contract's metric groups into the workspace's ``profiles/`` as ``rounds.profiles.BASELINE``, so the
    first round has a "before". Each metric group within ``profile_s`` (``timeout``: ``--timeout``). The
    contract is saved by now: a failure warns and freeze still succeeds."""
    from ascendopt.rounds import profiles as rp
    from ascendopt.rounds.context import RoundContext

    ctx = RoundContext.for_contract(ws, contract)
    console.status(f"freeze: profiling the baseline with {', '.join(contract.metric_groups)} into {ws.profiles_dir} "
                   f"(limit {contract.timeout('profile_s', timeout):g} s per metric group)")
    try:
        paths = rp.collect_profiles(ctx, ctx.baseline_config, rp.BASELINE, timeout)
    except Exception as exc:  # noqa: BLE001 - a profile is evidence, not a precondition: the contract stands
        console.warn(f"freeze: the baseline profile was not collected ({exc}); round 1 has no 'before' profile "
                     f"unless one is collected: `{rp.collect_command(ctx)}`")
        return
    console.info(f"freeze: baseline profile: {', '.join(paths)}")


def _metric_groups(groups: str | Sequence[str] | None) -> tuple[str, ...]:
    """The contract's metric groups, canonical (``"pipe,ub"`` -> PipeUtilization, MemoryUB)."""
    from ascendopt.collect.metrics import parse_metric_groups

    return tuple(parse_metric_groups(groups or DEFAULT_METRIC_GROUPS))


def _with_precheck(contract: Contract, precheck: bool, ascend_python: str | None,
                   timeout: float | None) -> Contract:
    """Off-NPU, the baseline's kernels must lower for Ascend (``lint.precheck.loop_precheck``): the verdict
    goes into the contract; a kernel that does not lower refuses the freeze (exit 1), like a wrong baseline. A
    workload that launches no Triton kernel of the target has nothing to lower: recorded, never refused."""
    from dataclasses import replace

    from ascendopt.lint.precheck import loop_precheck

    if contract.backend != "npu" and precheck:
        console.status("freeze: checking that the baseline's kernels lower for Ascend (precheck)")
    record = loop_precheck(contract, contract.backend, project_root(), skip=not precheck,
                           ascend_python=ascend_python, timeout=timeout)
    if record and record["status"] == "fails":
        raise CorrectnessError(f"baseline does not lower for Ascend, refusing to freeze: {record['verdict']}",
                               hint="fix the kernel (ascendopt precheck shows every launch), or --no-precheck")
    if record and record["status"] in ("unavailable", "nothing"):
        console.info(f"note: freeze: Ascend precheck {record['verdict']}")  # recorded; nothing is wrong
    return replace(contract, precheck=record)


def _fingerprint() -> tuple[str, dict[str, Any]]:
    from ascendopt.device import backends

    facts = backends.describe(backends.current())
    keep = ("backend", "device", "name", "chip_model", "cube_cores", "vector_cores", "ub_bytes", "versions")
    return facts["backend"], {k: facts[k] for k in keep}


def _timing(case: str, t) -> BaselineTiming:
    console.event("measurement", source="freeze", case=case, sides={"baseline": t.to_dict()})
    return BaselineTiming(case=case, median_ms=t.median_ms, p20_ms=t.p20_ms, p80_ms=t.p80_ms, cv=t.cv, n=t.n,
                          calls_per_sample=t.calls_per_sample, waited_ms=t.waited_ms)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def varlen_dims(dims: Mapping[str, Any]) -> dict[str, Any]:
    """Fixed-length ``dims`` repacked as ``B`` uneven sequences (``seqlens``, packed with cu_seqlens).

    Lengths grow 1:2:...:B and do not align to power-of-two tiles, so tile tails and sequence
    boundaries inside a tile are exercised; the total token count stays ``B * T``. The result
    follows the bundled kernels' varlen convention: ``seqlens`` replaces ``B`` and ``T``.
    """
    batch, tokens = int(dims.get("B", 1)), int(dims["T"])
    total = batch * tokens
    count = max(2, batch)
    weights = list(range(1, count + 1))
    lengths = [max(1, total * w // sum(weights)) for w in weights]
    lengths[-1] += total - sum(lengths)
    if lengths[-1] < 1:
        raise UsageError(f"shape {dict(dims)}: too few tokens to split into {count} sequences")
    return {**{k: v for k, v in dims.items() if k not in ("B", "T")}, "seqlens": tuple(lengths)}


def _varlen_twin(spec, case: ShapeCase) -> ShapeCase:
    """The spec's varlen preset for ``case`` (``<name>_varlen``; ``varlen`` for ``realistic``), else derived."""
    for name in (f"{case.name}_varlen", "varlen" if case.name == "realistic" else None):
        if name and name in spec.shapes and spec.shapes[name].varlen:
            return ShapeCase(name, dict(spec.shapes[name].dims))
    return ShapeCase(f"{case.name}_varlen", varlen_dims(case.dims))


def shape_cases(spec, shapes: Sequence[str], varlen: bool) -> list[ShapeCase]:
    """Presets or ``B=..,T=..`` strings -> the frozen shape matrix (with a varlen twin per case)."""
    from ascendopt.kernels.spec import parse_dims

    if varlen and not any(p.varlen for p in spec.shapes.values()):
        raise UsageError(f"--varlen: kernel {spec.name} has no variable-length (seqlens) support",
                         hint="freeze without --varlen")
    cases = []
    for text in shapes:
        if text in spec.shapes:
            case = ShapeCase(text, dict(spec.shapes[text].dims))
        elif "=" in text:
            case = ShapeCase(text.replace(" ", ""), parse_dims(text))
        else:
            case = ShapeCase(text, dict(spec.shape(text).dims))  # unknown preset: raises, listing presets
        cases.append(case)
        if varlen and not case.varlen:
            cases.append(_varlen_twin(spec, case))
    return cases


def freeze_kernel(ws: Workspace, *, kernel: str, shapes: Sequence[str] | None = None, dtype: str | None = None,
                  mode: str | None = None, varlen: bool = False, config: Mapping[str, Any] | None = None,
                  metric_groups: Sequence[str] | None = None, max_rounds: int = DEFAULT_MAX_ROUNDS,
                  force: bool = False, timeout: float | None = None, profile: bool = True,
                  precheck: bool = True, ascend_python: str | None = None,
                  timer: Callable[[], float] | None = None) -> Contract:
    """Freeze a bundled kernel; defaults: dtype bf16 (else the spec's first), mode fwdbwd (else fwd),
    shapes ``tiny`` on the cpu backend and ``realistic`` elsewhere. The kernel runs in this process;
    ``timeout`` (``--timeout``) becomes the contract's frozen limits (``frozen_timeouts``). ``timer``: a clock in
    ms replacing the device timer of the baseline's timing (tests, as ``optimize-round``'s)."""
    from ascendopt import kernels
    from ascendopt.device import backends
    from ascendopt.gate.stages import ClockBackend, missing_kernels, timing_inputs
    from ascendopt.judge import bench
    from ascendopt.judge.correctness import check_kernel, default_tolerances
    from ascendopt.judge.kernel_hit import census_names, kernel_census

    _refuse_overwrite(ws, force)
    spec = kernels.get(kernel)
    backend = backends.current()
    dtype = dtype or ("bf16" if "bf16" in spec.dtypes else spec.dtypes[0])
    mode = mode or ("fwdbwd" if "fwdbwd" in spec.modes else "fwd")
    shapes = list(shapes or (["tiny"] if backend.name == "cpu" else ["realistic"]))
    cfg = spec.config(config)
    cases = shape_cases(spec, shapes, varlen)
    for case in cases:
        spec.check_supported(case.dims, dtype, mode)
    tolerances = default_tolerances(spec, dtype, mode)

    reports = []
    for case in cases:
        console.status(f"freeze: checking the baseline {kernel} {case.name} {dtype} {mode} against the fp32 oracle")
        reports += check_kernel(spec, case.dims, dtype, mode, cfg, tolerances=tolerances, case=f"{case.name}/{mode}")
    failed = [r for r in reports if not r.passed]
    if failed:
        raise CorrectnessError(f"baseline {kernel} is not correct, refusing to freeze: "
                               + "; ".join(f"{r.case}:{r.name} {r.reason}" for r in failed[:4]))

    device = backend.torch_device()
    first = spec.make_inputs(dict(cases[0].dims), dtype, device, 0)
    census = kernel_census(lambda: spec.run(first, cfg, mode))
    seen = census_names(census)
    expected = tuple(n for n in spec.kernel_names if not missing_kernels([n], seen))
    if not expected:
        raise CorrectnessError(f"none of {kernel}'s kernels ({', '.join(spec.kernel_names)}) ran "
                               f"(torch fallback?); the profile shows: {', '.join(seen[:10]) or 'nothing'}",
                               hint="make the Triton kernel run before freezing")

    baseline = []
    for case in cases:
        console.status(f"freeze: measuring the baseline {kernel} {case.name} (synchronized)")
        inputs = timing_inputs(spec, case.dims, dtype, mode, device)
        # on cpu on one thread, as every device of a pool re-measures it (the anchor compares like with like)
        with bench.one_thread_on_cpu(backend.name):
            timing = bench.measure(lambda inp: spec.run(inp, cfg, mode), inputs=inputs,
                                   backend=ClockBackend(backend, timer) if timer is not None else backend,
                                   repeats=bench.baseline_repeats(backend.name),
                                   waits=[] if timer is None else None)
        baseline.append(_timing(f"{case.name}/{mode}", timing))

    backend_name, fingerprint = _fingerprint()
    root = project_root()
    contract = Contract(
        op=kernel,
        entry_point=f"{spec.run.__module__}:{spec.run.__qualname__}",
        backend=backend_name,
        device=fingerprint,
        workload=Workload(kind="kernel", kernel=kernel, dtype=dtype, mode=mode, shapes=tuple(cases), varlen=varlen,
                          config=dict(cfg)),
        tolerances=tolerances,
        frozen_files=tuple(oracle_entries(spec)),
        commands={"validation": ("ascendopt", "gate", "--skip-perf"), "benchmark": ("ascendopt", "gate")},
        baseline=tuple(baseline),
        expected_kernels=expected,
        kernels_seen=tuple(seen[:20]),
        metric_groups=_metric_groups(metric_groups),
        git=git_state(root),
        created_at=_now(),
        max_rounds=max_rounds,
        timeouts=frozen_timeouts(timeout),
        kernel_census=census,
    )
    contract = _with_precheck(contract, precheck, ascend_python, timeout)
    _save(ws, contract, force, profile=profile, timeout=timeout)
    return contract


def freeze_exec_file(ws: Workspace, *, exec_file: str, tests: Sequence[str], kernel_filter: str,
                     test_cmd: str | None = None, references: Sequence[str] = (),
                     metric_groups: Sequence[str] | None = None, max_rounds: int = DEFAULT_MAX_ROUNDS,
                     force: bool = False, timeout: float | None = None, equivalence: bool = True,
                     equivalence_tol: Mapping[str, Mapping[str, float]] | None = None,
                     profile: bool = True, precheck: bool = True, ascend_python: str | None = None,
                     targets: Sequence[str] | None = None, shapes: ShapeMix | None = None,
                     value_probe: bool = True) -> Contract:
    """Freeze own code: ``exec_file`` defines ``workload()``; ``tests`` (and ``references``) are pinned.

    What the baseline's test run used besides them (conftests and the configuration file wherever they
    are, the repository's modules and data files it imported or read) is pinned too, except the target
    code (``targets``, ``--target``: files or folders; default: what ``workload()`` imports from the
    repository, ``judge.scope``). A test run that cannot be trusted (its report does not verify, the
    runner came from the repository, a comparison function was replaced) is refused (IntegrityError, exit 3).

    ``workload()`` is called in a child process (``judge.interleave.workload_process``): its kernel-hit
    calls within ``workload_s``, the baseline measurement within ``timing_s``. A workload that raises,
    crashes or outlives a limit is refused like a failing test (CorrectnessError, exit 1), naming
    ``file:line`` or the limit. ``timeout`` (``--timeout``): every limit of this freeze, and the
    contract's frozen limits (``frozen_timeouts``).

    Output equivalence (``judge.equivalence``; ``equivalence=False``: off, said in the contract): the
    child's first call saves what ``workload()`` returned; with tensors, a second seeded child repeats the
    call and both must agree within the tolerances (``EQUIVALENCE_TOLERANCES`` updated by
    ``equivalence_tol``), else the check is stored off with the reason (``_equivalence_record``).

    ``shapes``: the served-shape mix (``contract.shapes``; ``freeze --shapes-from`` / ``--shapes-file``), stored
    as the contract's ``shapes``; None: the contract judges one shape.

    ``value_probe=False`` (``--no-value-probe``): the gate's differential check does not call both sides on the
    workload's inputs scaled beyond their range (``judge.engine.value_probe``); stored as
    ``equivalence.value_probe: false``.
    """
    import tempfile

    from ascendopt import vcs
    from ascendopt.device import backends
    from ascendopt.gate.stages import missing_kernels
    from ascendopt.judge import environment, scope, testcalls
    from ascendopt.judge.engine import Session, Verdict, time_baseline
    from ascendopt.judge.interleave import FAILURES
    from ascendopt.judge.kernel_hit import census_names
    from ascendopt.judge.testset import baseline_refusal, run_tests
    from ascendopt.process import ProcessTimeout

    _refuse_overwrite(ws, force)
    timeouts = frozen_timeouts(timeout)
    if not tests:
        raise UsageError("--test: at least one frozen test file is needed for own code")
    if not kernel_filter:
        raise UsageError("--kernel-filter: needed for own code (a substring of the target kernel's name)")
    root = project_root()
    files = [file_entry(exec_file, "workload", root)]
    files += [file_entry(t, "test", root) for t in tests]
    files += [file_entry(r, "reference", root) for r in references]
    argv = shlex.split(test_cmd) if test_cmd else ["python", "-m", "pytest", "-q", *[f.path for f in files
                                                                                   if f.role == "test"]]
    backends.current()  # an unavailable --backend fails here (exit 5), before any test starts
    git = git_state(root)
    if git["commit"] is None:  # the gate times and checks against the frozen commit: without one, nothing can
        raise EnvironmentProblem(f"{root}: {'not a git repository' if vcs.toplevel(root) is None else 'no commit yet'}"
                                 ": the gate judges the working tree against the frozen commit",
                                 hint="commit first: " + ("git init && " if vcs.toplevel(root) is None else "")
                                 + "git add -A && git commit -m baseline")
    declared = _targets(targets, root) if targets else None
    # the pytest configuration that decides which tests run, and how, is frozen with the tests
    files += pytest_config_entries([f.path for f in files if f.role == "test"], root, argv)
    exec_rel = files[0].path
    console.status(f"freeze: running the tests on the baseline: {shlex.join(argv)} "
                   f"(limit {timeouts['tests_s']:g} s), while workload() of {exec_rel} loads in a worker")
    startup = environment.Startup()  # the environment's start-up files, before any child runs
    tmp = Path(tempfile.mkdtemp(prefix="ascendopt-outputs-"))
    calls_dir = tmp / "test-calls"  # the tests' own calls of the repository's functions (judge.testcalls)
    calls_dir.mkdir()
    # a second worker of the same tree repeats the first call, to check the outputs are deterministic
    # (judge.equivalence), and is timed interleaved with the baseline's, as a gate times two sides
    trees = {"baseline": root, **({"repeat": root} if git["commit"] else {})}
    try:
        # the tests run on the backend this process selected (--backend), as the gate will run them
        with Session(exec_rel, trees, load_s=timeouts["workload_s"],
                     tests=lambda: run_tests(argv, root, timeout=timeouts["tests_s"],
                                             record_calls=calls_dir)) as session:
            try:
                test_run = session.tests_result()
            except ProcessTimeout as exc:
                raise CorrectnessError(f"freeze: {exc}; refusing to freeze", hint="fix the hanging test, or give "
                                       "it more time with --timeout SECONDS") from None
            if test_run.integrity:
                raise IntegrityError("freeze: the baseline's test run cannot be trusted: "
                                     + "; ".join(message for _, message in test_run.integrity[:3]),
                                     hint="remove what replaces the runner, its report or the comparison functions")
            refusal = baseline_refusal(test_run)
            if refusal:
                raise CorrectnessError(refusal)
            console.status(f"freeze: calling workload() of {exec_rel} in a worker (limit {timeouts['workload_s']:g} s)")
            try:
                child = session.worker("baseline")
                if shapes is not None:
                    _check_mix(child, shapes, exec_rel, timeouts["workload_s"])
                first = child.outputs(tmp / "first.pt", timeouts["workload_s"]) if equivalence else None
                census = child.kernel_census(timeouts["workload_s"])
                seen = census_names(census)
                if missing_kernels([kernel_filter], seen):
                    raise CorrectnessError(f"no kernel matching --kernel-filter {kernel_filter!r} ran (torch "
                                           f"fallback?); the profile shows: {', '.join(seen[:10]) or 'nothing'}")
                # before the timing: the repeated call is the second worker's first, as the baseline's was
                outputs = _equivalence_record(exec_rel, first, tmp, {**EQUIVALENCE_TOLERANCES,
                                                                     **(equivalence_tol or {})},
                                              git["commit"], timeouts["workload_s"], session)
                if not value_probe:
                    outputs["value_probe"] = False
                console.status(f"freeze: measuring the baseline workload() of {exec_rel} (timed by this process, "
                               f"limit {timeouts['timing_s']:g} s)")
                timing = time_baseline(session, Verdict(), timing_s=timeouts["timing_s"], label=exec_rel,
                                       partner="repeat" if "repeat" in trees else None)
                buckets = _time_buckets(session, shapes, exec_rel, timeouts["timing_s"]) \
                    if shapes is not None and "repeat" in trees else []
                if child.has_inputs and shapes is None:
                    console.info(f"freeze: the contract judges one shape, {exec_rel}'s own: the gate's differential "
                                 "check compares the working tree with the frozen commit there and on the arguments "
                                 "the frozen tests pass to the target code (replayed), and correctness at other "
                                 "shapes rests on the frozen tests, which run where the code under test can reach "
                                 "them (freeze a shape mix, --shapes-from PROFILE, to check every served shape and "
                                 "hidden ones)")
                if not child.has_inputs:
                    console.info(f"freeze: {exec_rel} defines no inputs(seed): every timed call reuses the "
                                 "workload's own inputs, so a change that caches results across calls cannot be "
                                 "told from a faster one (define inputs(seed) and workload(*inputs) to check it)")
                known = [f.path for f in files]
                worker_files = child.modules(timeouts["workload_s"])
                chosen = declared if declared is not None else [
                    rel for rel in scope.repository_files(worker_files, root) if rel not in known]
                # with output equivalence switched off, the user has said the outputs may change: none replayed
                test_calls, dropped = testcalls.freeze_entry(
                    session, testcalls.recorded(calls_dir), chosen, timeouts["workload_s"],
                    {**EQUIVALENCE_TOLERANCES, **(equivalence_tol or {})}) if equivalence else (None, [])
            except FAILURES as exc:
                if getattr(exc, "exit_code", None) == IntegrityError.exit_code:  # a defence of the judge undone
                    raise IntegrityError(f"freeze: {exc}; refusing to freeze") from None
                ensure_space(tmp, "the baseline's saved outputs")  # a worker that died writing them to a full disk
                # more time is a cure only for a workload that ran out of it
                more = ", or give it more time with --timeout SECONDS" if isinstance(exc, ProcessTimeout) else ""
                raise CorrectnessError(f"freeze: {exc}; refusing to freeze", hint=f"fix the workload{more}") from None
        if outputs["enabled"]:
            if first and first["inputs_changed"]:
                outputs["inputs_changed"] = dict(first["inputs_changed"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    changed = startup.changes()
    if changed:
        raise IntegrityError(f"freeze: {changed[0][1]}", hint="something this freeze ran wrote into the installed "
                             "environment; find it in the workload or the tests, remove it, then freeze again")
    env = environment.record([*(test_run.used or {}).get("modules", []), *worker_files, *environment.harness_files()],
                             root)
    if env["modified"]:
        console.info(f"freeze: {len(env['modified'])} installed file(s) the tests load differ from what their "
                     f"distribution installed; pinned as they are: {', '.join(list(env['modified'])[:4])}")
    if test_calls is not None:
        console.info(f"freeze: the gate replays {sum(test_calls['functions'].values())} call(s) the tests made of "
                     f"{', '.join(test_calls['functions'])} in both workers (their outputs compared with the frozen "
                     "commit's where no test is the caller)")
    for line in dropped[:6]:
        console.info(f"freeze: not replayed: {line}")
    if len(dropped) > 6:
        console.info(f"freeze: not replayed: {len(dropped) - 6} more call(s) of the tests")
    support = scope.pins(scope.used_files(test_run.used, root), root, known, chosen)
    files += support
    console.info(f"freeze: target code ({'--target' if declared is not None else 'what workload() imports'}): "
                 f"{', '.join(chosen) or 'none'}; pinned {len(support)} more file(s) the test run used"
                 + (f": {', '.join(f.path for f in support[:6])}" + (' ...' if len(support) > 6 else '')
                    if support else ""))
    if git["dirty"]:
        console.warn(f"uncommitted changes in {root}: the gate's baseline is commit {git['commit'][:10]} "
                     "without them; commit first for an exact baseline")
    backend_name, fingerprint = _fingerprint()
    contract = Contract(
        op=Path(files[0].path).stem,
        entry_point=files[0].path + ":workload",
        backend=backend_name,
        device=fingerprint,
        workload=Workload(kind="exec-file", exec_file=files[0].path, kernel_filter=kernel_filter),
        tolerances={},
        frozen_files=tuple(files),
        commands={"validation": tuple(argv), "benchmark": ("ascendopt", "gate")},
        baseline=(_timing(files[0].path, timing), *[_timing(case, t) for case, t in buckets]),
        expected_kernels=(kernel_filter,),
        kernels_seen=tuple(seen[:20]),
        metric_groups=_metric_groups(metric_groups),
        git=git,
        created_at=_now(),
        max_rounds=max_rounds,
        timeouts=timeouts,
        test_set=test_run.test_set(),
        equivalence=outputs,
        kernel_census=census,
        targets=tuple(chosen),
        environment=env,
        shapes=shapes,
        test_calls=test_calls,
    )
    contract = _with_precheck(contract, precheck, ascend_python, timeout)
    _save(ws, contract, force, profile=profile, timeout=timeout)
    return contract


def _targets(paths: Sequence[str], root: Path) -> list[str]:
    """``--target`` paths (files or folders of the repository) relative to ``root``."""
    chosen = []
    for path in paths:
        full = (Path.cwd() / path).resolve()
        if not full.exists():
            raise UsageError(f"--target {path}: no such file or folder")
        try:
            chosen.append(full.relative_to(root).as_posix())
        except ValueError:
            raise UsageError(f"--target {path}: outside the project root {root}",
                             hint="the target code is code of the repository being optimized") from None
    return sorted(set(chosen))


def _time_buckets(session, mix: ShapeMix, exec_rel: str, timing_s: float) -> list[tuple[str, Any]]:
    """The baseline of every bucket the gate times (``judge.weighted.TIMED_WEIGHT``), as a gate times it (the
    frozen commit's worker interleaved with a second one): ``(bucket name, bench.Timing)``, the anchor of each
    bucket's timing in a gate."""
    from ascendopt.contract.shapes import bucket_name
    from ascendopt.judge.engine import Verdict, time_baseline
    from ascendopt.judge.weighted import timed

    out = []
    for i, (bucket, on) in enumerate(zip(mix.buckets, timed([b.weight for b in mix.buckets]), strict=True)):
        if on:
            console.status(f"freeze: measuring the baseline at {bucket_name(i, bucket)} (weight {bucket.weight:.1%})")
            out.append((bucket_name(i, bucket), time_baseline(session, Verdict(), timing_s=timing_s, label=exec_rel,
                                                              partner="repeat", shape=bucket.shape)))
    return out


def _check_mix(child, mix: ShapeMix, exec_rel: str, limit_s: float) -> None:
    """Refuse (exit 2) a shape mix whose buckets the workload's ``inputs(seed, shape)`` cannot make, naming them:
    the gate checks and times every bucket on inputs the frozen commit's worker makes."""
    errors = child.probe([b.shape for b in mix.buckets], limit_s)
    bad = [f"bucket {i + 1} {b.shape}: {e}" for i, (b, e) in enumerate(zip(mix.buckets, errors, strict=True)) if e]
    if bad:
        more = f" (and {len(bad) - 2} more)" if len(bad) > 2 else ""
        raise UsageError(f"freeze: {exec_rel}: inputs(seed, shape) cannot make {len(bad)} of {len(mix.buckets)} "
                         f"bucket(s) of the shape mix: {'; '.join(bad[:2])}{more}",
                         hint="make inputs(seed, shape) accept every bucket's shape, or drop those buckets from a "
                              "hand-written mix (--shapes-file)")


def _equivalence_record(exec_rel: str, first: Mapping[str, Any] | None, tmp: Path,
                        tolerances: Mapping[str, Mapping[str, float]], commit: str | None,
                        limit_s: float, session) -> dict[str, Any]:
    """The contract's ``equivalence``: on when the baseline's first call (``first``, saved as
    ``tmp/first.pt``; None: switched off) returned tensors, a frozen commit exists to compare against,
    and a second run in another worker (``session``'s "repeat"; ``limit_s`` seconds) gives the same
    outputs within ``tolerances``;
    else off with the reason. A raising second run raises (``interleave.FAILURES``)."""
    from ascendopt.judge.equivalence import compare_outputs, load

    names = list(first["outputs"]) if first else []
    if first is None:
        reason = "switched off at freeze (--no-equivalence)"
    elif not names:
        reason = f"workload() returned {first['returned']}: no tensors to compare"
    elif commit is None:
        reason = "frozen outside a git repository: no frozen commit to compare against"
    else:
        console.status(f"freeze: calling workload() of {exec_rel} again, to check that its {len(names)} output(s) "
                       f"repeat within the frozen tolerances (limit {limit_s:g} s)")
        session.worker("repeat").outputs(tmp / "second.pt", limit_s)
        differ = [c for c in compare_outputs(load(tmp / "first.pt"), load(tmp / "second.pt"), tolerances)
                  if not c.passed]
        reason = (f"the baseline is not deterministic within the tolerances (two runs differ): {differ[0].message}"
                  if differ else None)
        if reason:
            console.warn(f"freeze: output equivalence is off: {reason}; seed the workload's randomness, or loosen "
                         "the limit with --equivalence-tol DTYPE=RTOL[:ATOL]")
    return {"enabled": reason is None, "reason": reason, "outputs": names,
            "tolerances": {k: dict(v) for k, v in tolerances.items()}}
