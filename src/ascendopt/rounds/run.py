"""One optimize-round, end to end: stop check -> change -> gate -> interleaved bench -> re-profile -> record.

The CLI (``cli/optimize_round.py``) and the demo call ``run_round``, which takes the workspace lock,
loads the ``RoundContext`` once and hands it to ``record_round`` (``rounds.auto.run_auto`` calls
``record_round`` once per confirmed candidate under one lock); tests call them with a tiny contract on the CPU
interpreter. Order follows the loop (docs/practice.md §1, §10):

1. refuse to run past a stop criterion unless ``force`` (and say which one);
2. the candidate = the best configuration so far + this round's ``--set`` change (one change);
   the UB model checks its tiles (on npu an overflow is refused with the numbers);
3. the gate without its performance stage, on the candidate (red -> ``drop``; nothing is timed);
4. baseline, best and candidate timed interleaved (``bench``), per shape case;
5. the best so far and the candidate profiled with the contract's metric groups and compared;
6. verdict, stop decision, round record, round summary.

Own code (``workload.kind == "exec-file"``): the round first stores the working tree as its snapshot
commit (``rounds.tree.round_snapshot``, a private ref; the user's branch and index untouched); steps 3 and
4 share three warm worker processes (``rounds.timing.OwnSides``): the frozen commit and the best kept
round's snapshot, each read from git into a verified folder, and the working tree; they load while the
frozen tests run, serve the gate's output and kernel checks, then are timed (``rounds.timing.measure_own``)
and end before step 5's profiles. A best whose snapshot is gone is
not timed, and the round cannot keep. ``--set`` is refused first (own code changes by editing the tree).
The round's direction is ``--direction NAME``, else the hypothesis's leading ``NAME:`` tag (``tiling:
larger row tile``), else "code" (all such rounds are one direction to the stop criteria). The round
warns, and keeps in its ``notes``, when the working tree is unchanged since an earlier round of the
ledger (``rounds.tree``); a keep needs no commit (the next rounds time the best from its snapshot).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ascendopt import console, vcs
from ascendopt.analyze.matching import matches_any
from ascendopt.collect.workload import WorkloadFailure
from ascendopt.errors import AscendoptError, ExitCode, UsageError
from ascendopt.gate.stages import ClockBackend, kernel_raised, roofline_floor
from ascendopt.rounds import profiles as rp
from ascendopt.rounds import records as rounds
from ascendopt.rounds import summary as round_summary
from ascendopt.rounds import timing as rt
from ascendopt.rounds import tree as rtree
from ascendopt.rounds.context import RoundContext
from ascendopt.rounds.decide import decide
from ascendopt.rounds.records import RoundRecord, StopDecision
from ascendopt.tune import search as tune
from ascendopt.tune import space as tune_space
from ascendopt.workspace import Workspace

Step = Callable[[str], None]


def prepare_backend() -> None:
    """Arrange the backend before the kernel registry is imported (cpu: ``TRITON_INTERPRET=1``).

    The flag must be set before ``triton`` itself is imported, and reading the device facts
    (``backend.info()``, e.g. for the UB size) imports triton for its version; calling this first
    keeps a plain shell (no TRITON_INTERPRET in the environment) working.
    """
    import sys

    from ascendopt.device import backends

    if "ascendopt.kernels" not in sys.modules:
        backends.current().prepare_kernels()


def parse_sets(items: Sequence[str] | None) -> dict[str, str]:
    """``["BT=64", "BD=128"]`` -> ``{"BT": "64", "BD": "128"}``; values are validated by the spec."""
    from ascendopt.kernels.spec import parse_assignments

    return parse_assignments(items, unique=True, unique_why="one change per round")


def check_stop(ctx: RoundContext, force: bool) -> StopDecision:
    """The stop decision so far; raises UsageError (exit 2) past a stop unless ``force``."""
    decision = ctx.stop_decision()
    if decision.stop and not force:
        raise UsageError(f"stop criterion '{decision.criterion}' reached: {decision.reason}",
                         hint="re-assess (reprofile, report) or pass --force to run another round anyway")
    return decision


# -- the candidate -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one round will run: the configurations by role and the change between best and candidate."""

    baseline: dict[str, int]
    best: dict[str, int]
    candidate: dict[str, int]
    changed: dict[str, int]
    # ``--auto`` on a pool: which device screened the candidate, its ratio to the start there, and what every
    # device of the pool measured (recorded in the round's ``change["screened"]``); None: no pool
    screened: dict[str, Any] | None = None

    @property
    def sides(self) -> dict[str, dict[str, int]]:
        """The configurations to time: the best only while it differs from the baseline."""
        if self.best == self.baseline:
            return {"baseline": self.baseline, "candidate": self.candidate}
        return {"baseline": self.baseline, "best": self.best, "candidate": self.candidate}

    @property
    def direction(self) -> str:
        return "+".join(sorted(self.changed)) or "none"


def plan_change(ctx: RoundContext, sets: Mapping[str, Any]) -> Plan:
    """Best-so-far config + ``sets``; unknown tunables / bad values raise listing the valid ones."""
    spec, contract = ctx.spec, ctx.contract
    baseline, best = ctx.baseline_config, ctx.best_config
    candidate = spec.config({**best, **sets})
    changed = {k: v for k, v in candidate.items() if best.get(k) != v}
    if not changed:
        now = ", ".join(f"{k}={v}" for k, v in best.items())
        raise UsageError(f"--set changes nothing: the best configuration so far already is {now}",
                         hint="set a different value; one change per round")
    w = contract.workload
    raw = tune_space.untiled_tunables(spec, w.shapes[0].dims, w.dtype)
    if all(tune_space.launch_signature(spec, c.dims, candidate, w.dtype, w.mode, raw)
           == tune_space.launch_signature(spec, c.dims, best, w.dtype, w.mode, raw) for c in w.shapes):
        # warn, not refuse: the UB model's tiles are the best knowledge here, not a certainty
        console.warn(f"{tune.config_key(changed)} resolves to the same tiles as the best so far "
                     "(an auto 0 or a tile clamped to the extent): expect no change")
    return Plan(baseline, best, candidate, changed)


def ub_use(ctx: RoundContext, config: Mapping[str, int], info) -> dict[str, Any]:
    """UB use of ``config`` over the contract's shape cases (worst case); raises on npu if it overflows.

    Off-NPU an overflow is recorded, not refused (the UB is the model chip's, ``ASCENDOPT_CHIP``):
    ``warning`` then says so in words (``"118% of Ascend910B2's UB (over budget: would not compile
    on the NPU)"``) for the round summary, the ``--auto`` table and the report; None when it fits.
    """
    spec, contract = ctx.spec, ctx.contract
    worst = None
    for case in contract.workload.shapes:
        cand = tune_space.ub_prediction(spec, case.dims, config, contract.workload.dtype, info.ub_bytes,
                                  contract.workload.mode)
        if worst is None or (not cand.ub_safe and worst.ub_safe) or cand.ub_share > worst.ub_share:
            worst = cand
    whose = f"{info.chip}'s UB" if info.chip and info.ub_source != "ASCENDOPT_UB_BYTES" else \
        f"the {info.ub_bytes} B UB ({info.ub_source})"
    out = {"ub_bytes": info.ub_bytes, "enforced": bool(info.ub_enforced), "safe": worst.ub_safe,
           "share": worst.ub_share, "detail": worst.ub_detail, "source": info.ub_source, "chip": info.chip,
           "warning": None if worst.ub_safe else
           f"{worst.ub_share:.0%} of {whose} (over budget: would not compile on the NPU)"}
    if info.ub_enforced and not worst.ub_safe:
        raise UsageError(f"config {tune.config_key(config)} is refused by the UB model: {worst.ub_detail}",
                         hint="pick smaller tiles (`ascendopt ub` shows the largest safe tile)")
    return out


# -- the gate ----------------------------------------------------------------------------------


def _blocking(result):
    """The stage that keeps a round from its measurement: the red one, else a correctness stage that could not
    tell (the value probe's doubt: the change is never kept on it)."""
    undecided = result.inconclusive_stage
    return result.failed_stage or (undecided if undecided is not None and undecided.name == "correctness" else None)


def gate_passed(result) -> bool:
    """Green for a round: integrity, correctness (red or inconclusive) and kernel hit. A slower own-code
    candidate fails the gate's performance stage, but that is the bench's verdict (revert), not a drop."""
    failed = _blocking(result)
    # A workload that raised, died or hung while timed is the candidate failing, not a slower one: red.
    return failed is None or (failed.name == "performance" and not failed.workload_error)


# How much of a red stage's error lines a round keeps: enough for a few failing tests' assertions.
ERROR_LINES = 60


def gate_error(stage) -> str | None:
    """A red stage's error as a round records it: the workload's error, else the failing checks' own error
    lines (``StageResult.failure_lines``, what ``ascendopt gate`` prints), the first ``ERROR_LINES``."""
    if stage.workload_error:
        return stage.workload_error
    lines = stage.failure_lines()
    if len(lines) > ERROR_LINES:
        lines = [*lines[:ERROR_LINES], f"... {len(lines) - ERROR_LINES} more line(s): `ascendopt gate` shows all"]
    return "\n".join(lines) or None


def gate_summary(result) -> dict[str, Any]:
    """The part of a GateResult a round record keeps (never a speed on a red gate); ``error``: the red
    stage's own error lines (``gate_error``)."""
    failed = _blocking(result)
    red = not gate_passed(result)
    return {"passed": not red, "exit_code": int(result.exit_code) if red else 0,
            "failed_stage": failed.name if red else None,
            "summary": failed.summary if red else "; ".join(f"{s.name}: {s.status}" for s in result.stages),
            "error": gate_error(failed) if red else None}


def failed_after_gate(stage: str, error: str, exit_code: int = int(ExitCode.CORRECTNESS)) -> dict[str, Any]:
    """The ``gate`` part of a round whose candidate passed the gate but then failed while the round
    timed or re-profiled it (raised, died, timed out): red at ``stage`` with the error, so the round
    is recorded as a drop and the command exits 1, like a correctness failure (``exit_code`` 3: the
    candidate undid a defence of the judge, ``interleave.WorkloadTampering``)."""
    return {"passed": False, "exit_code": exit_code, "failed_stage": stage, "summary": error, "error": error}


def precheck_stage(ctx: RoundContext, gsum: dict[str, Any], config: Mapping[str, Any] | None, backend: str, *,
                   precheck: bool, ascend_python: str | None, timeout: float | None) -> dict[str, Any]:
    """Off-NPU, after a green gate: do the candidate's kernels lower for Ascend (``lint.precheck``)? The
    verdict goes into the round's ``gate["precheck"]``; one that does not lower is red at ``correctness``."""
    from ascendopt.contract.frozen import project_root
    from ascendopt.lint.precheck import loop_precheck

    record = loop_precheck(ctx.contract, backend, project_root(), config=dict(config) if config else None,
                           skip=not precheck, ascend_python=ascend_python, timeout=timeout)
    if record is None:
        return gsum
    if record["status"] == "fails":
        return {**failed_after_gate("correctness", f"precheck: {record['verdict']}"), "precheck": record}
    return {**gsum, "precheck": record}


# -- the round ---------------------------------------------------------------------------------


def _floors(ctx: RoundContext, backend) -> dict[str, float | None]:
    """Per shape case of a bundled kernel, the roofline floor in ms (``gate.stages.roofline_floor``); own
    code has no cost model: none."""
    if not ctx.is_kernel:
        return {}
    w = ctx.contract.workload
    return {case.name: roofline_floor(ctx.spec, case.dims, w.dtype, w.mode, backend) for case in w.shapes}


@dataclass
class RoundOutcome:
    record: RoundRecord
    path: Path
    exit_code: int  # 0, or the gate's exit code on a drop


# A direction name: one word, so it reads as one axis in the stop criteria and the report.
DIRECTION = re.compile(r"[A-Za-z0-9_.-]+")
# The hypothesis's direction tag: a leading ``NAME:`` word followed by a space (``tiling: larger row tile``).
_DIRECTION_TAG = re.compile(r"\s*([A-Za-z0-9_.-]+):(?:\s|$)")
OWN_CODE_DIRECTION = "code"  # an own-code round that names no direction


def check_direction(name: str | None) -> str | None:
    """``--direction NAME`` validated (None when not given); raises UsageError (exit 2) otherwise."""
    if name is None:
        return None
    if not DIRECTION.fullmatch(name):
        raise UsageError(f"--direction {name!r}: expected one word of letters, digits, '_', '.' or '-' "
                         "(e.g. tiling, vectorize, pipeline)")
    return name


def check_sets(ctx: RoundContext, sets: Mapping[str, Any] | None) -> None:
    """``--set`` on own code is a usage error (exit 2), checked before anything else runs."""
    if sets and not ctx.is_kernel:
        raise UsageError("--set applies to bundled kernels only: own code is changed by editing the working tree "
                         "(then run optimize-round without --set)")


def round_direction(direction: str | None, hypothesis: str, plan: Plan | None) -> str:
    """The direction a round is recorded under: an explicit ``--direction`` always wins (it may group
    several tunables under one strategy); a bundled kernel's default is the changed tunables; own code's
    the hypothesis's leading ``NAME:`` tag, else "code", with a hint (the "directions" stop criterion
    counts names, and every unnamed own-code round is the same one)."""
    if direction:
        return direction
    if plan is not None:
        return plan.direction
    tag = _DIRECTION_TAG.match(hypothesis)
    if tag:
        return tag.group(1)
    console.info(f"hint: this round's direction is {OWN_CODE_DIRECTION!r}: pass --direction NAME or start the "
                 "hypothesis with 'NAME: ' (e.g. 'tiling: larger row tile'); unnamed rounds all count as one "
                 "direction, so the 'directions' stop criterion cannot fire")
    return OWN_CODE_DIRECTION


def command_line(hypothesis: str, sets: Mapping[str, Any], extra: Sequence[str] = (), *, pairs: int | None = None,
                 timeout: float | None = None, force: bool = False, precheck: bool = True, reprofile: bool = True,
                 target_metric: str | None = None, accept_implausible: str | None = None,
                 ascend_python: str | None = None) -> str:
    """The round's ``command:`` as a shell runs it: every option that changes what is measured or how it is
    judged (issue 41): the change (``--set``), ``--pairs`` (always written: the default may change between
    versions, the record must not), ``--timeout``, ``--force`` (ran past a stop criterion),
    ``--no-precheck``, ``--no-reprofile``, ``--target-metric``, ``--ascend-python`` (which triton-ascend
    judged the lowering) and ``--accept-implausible``; then ``extra`` (``--direction``, ``--auto``'s
    options). Options that only change where output goes (``--json``, ``--events``, ``-w``) are left out."""
    argv = ["ascendopt", "optimize-round", "--hypothesis", hypothesis]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    if pairs is not None:
        argv += ["--pairs", str(pairs)]
    if timeout is not None:
        argv += ["--timeout", f"{timeout:g}"]
    if force:
        argv.append("--force")
    if not precheck:
        argv.append("--no-precheck")
    if ascend_python:
        argv += ["--ascend-python", str(ascend_python)]
    if not reprofile:
        argv.append("--no-reprofile")
    if target_metric:
        argv += ["--target-metric", target_metric]
    if accept_implausible:
        argv += ["--accept-implausible", accept_implausible]
    return shlex.join([*argv, *extra])


def run_round(ws: Workspace, *, hypothesis: str, sets: Mapping[str, Any] | None = None, force: bool = False,
              pairs: int = 30, target_metric: str | None = None, reprofile: bool = True,
              before_profiles: Sequence[str] | None = None, step: Step | None = None,
              timer: Callable[[], float] | None = None, direction: str | None = None,
              timeout: float | None = None, precheck: bool = True, ascend_python: str | None = None,
              accept_implausible: str | None = None) -> RoundOutcome:
    """Run and record one round under the workspace lock. Returns the record, its path and the exit code.

    Refuses past a stop criterion unless ``force``. ``before_profiles``: the best-so-far profile when
    the caller has one (else found or collected). ``reprofile=False`` skips both profiles. ``timer``: a
    clock in ms replacing the device timer (tests, like ``gate.run_gate``). ``direction``: the round's
    direction name (``round_direction``). ``timeout``: ``--timeout`` (see ``record_round``).
    ``accept_implausible``: see ``record_round``.
    """
    _check_hypothesis(hypothesis)
    check_direction(direction)
    with ws.lock() as session:
        ctx = RoundContext.load(ws)
        check_sets(ctx, sets)
        check_stop(ctx, force)
        outcome = record_round(ctx, hypothesis=hypothesis, sets=sets, pairs=pairs, target_metric=target_metric,
                               reprofile=reprofile, before_profiles=before_profiles, step=step, timer=timer,
                               direction=direction, timeout=timeout, precheck=precheck,
                               ascend_python=ascend_python, accept_implausible=accept_implausible, force=force)
        session.exit_code = outcome.exit_code  # the audit log's entry: a drop exits with the gate's code
        return outcome


def _check_hypothesis(hypothesis: str) -> None:
    if not hypothesis or not hypothesis.strip():
        raise UsageError("--hypothesis: must say what this round changes and why (one line)")


def record_round(ctx: RoundContext, *, hypothesis: str, sets: Mapping[str, Any] | None = None, pairs: int = 30,
                 target_metric: str | None = None, reprofile: bool = True,
                 before_profiles: Sequence[str] | None = None, step: Step | None = None,
                 timer: Callable[[], float] | None = None, plan: Plan | None = None,
                 command_text: str | None = None, direction: str | None = None,
                 timeout: float | None = None, precheck: bool = True,
                 ascend_python: str | None = None, accept_implausible: str | None = None,
                 force: bool = False) -> RoundOutcome:
    """One round on an already loaded context; the caller holds the workspace lock and has applied the
    stop criteria. ``plan``: the configurations to run (``--auto`` chooses them), else planned from
    ``sets`` and the best so far. ``timeout``: ``--timeout`` in seconds, replacing the contract's
    limits for every child the round starts (frozen tests, workload calls, timing, profiles).

    Every attempt is recorded: a candidate that raises, crashes or hangs at the gate, while timed or
    while re-profiled is a ``drop`` whose ``gate`` holds the error (``summary``, ``error``), and the
    outcome's exit code is 1. Off-NPU a green gate is followed by the Ascend lowering precheck
    (``precheck_stage``; ``precheck=False``: skipped, said in the record).

    A candidate faster than the baseline beyond belief (``rt.implausible_cases``: > 5x after the re-check,
    or a bundled kernel under its roofline floor) is never kept on that timing: the round is a revert
    unless ``accept_implausible`` (a person's reason, ``--accept-implausible``) is given; either way the
    finding and the acceptance go into the record's ``timing["implausible"]``."""
    from ascendopt.device import backends
    from ascendopt.gate.stages import run_gate
    from ascendopt.judge.environment import Startup, after_command

    _check_hypothesis(hypothesis)
    check_direction(direction)
    check_sets(ctx, sets)
    step = step or (lambda text: None)
    sets = dict(sets or {})
    notes: list[str] = []

    def note(text: str | None) -> None:
        if text:
            console.warn(text)
            notes.append(text)

    ws, contract, spec = ctx.ws, ctx.contract, ctx.spec
    names = ctx.kernel_names
    backend = backends.current()
    info = backend.info()
    facts = backends.describe(backend)
    number = rounds.next_number(ws)
    ub = None
    if ctx.is_kernel:
        plan = plan or plan_change(ctx, sets)
        ub = ub_use(ctx, plan.candidate, info)
        change = {"kind": "tunables", "set": dict(plan.changed), "config": dict(plan.candidate)}
        if plan.screened is not None:
            change["screened"] = plan.screened
        tree = None
    else:
        from ascendopt.contract.frozen import project_root

        root = project_root()
        tree = rtree.round_snapshot(root, ws.root, number)
        change = rtree.change_record(root, tree, ws.root)
        note(rtree.same_tree_note(tree, ctx.records, accepting=bool(accept_implausible)))
    # force: only recorded here (the caller applied the stop criteria), so the command says it ran past one
    command = command_text or command_line(hypothesis, sets, ["--direction", direction] if direction else [],
                                           pairs=pairs, timeout=timeout, force=force, precheck=precheck,
                                           reprofile=reprofile, target_metric=target_metric,
                                           accept_implausible=accept_implausible, ascend_python=ascend_python)
    direction = round_direction(direction, hypothesis, plan)

    startup = Startup()  # the environment's start-up files, before any child of the round runs
    step(f"round {number}: gate on the candidate")
    # own code: the gate's workers (frozen commit, best kept round, working tree) stay warm for the timing
    sides = None if ctx.is_kernel else rt.OwnSides(ctx, root, timeout=timeout, note=note)
    try:
        # the gate without its performance stage: the round times the candidate itself, against the best too
        gate = run_gate(ws, context=ctx, skip_perf=True, config_override=plan.candidate if plan else None,
                        timeout=timeout, open_session=sides.open if sides else None)
        gsum = gate_summary(gate)
        if gsum["passed"]:
            step(f"round {number}: Ascend lowering precheck")
            gsum = precheck_stage(ctx, gsum, plan.candidate if plan else None, backend.name, precheck=precheck,
                                  ascend_python=ascend_python, timeout=timeout)
        green = gsum["passed"]
        timing = None
        if green:
            if ctx.is_kernel:
                clocked = ClockBackend(backend, timer) if timer is not None else backend
                try:
                    timing = rt.measure_sides(spec, contract, plan.sides, pairs=pairs, backend=clocked, step=step)
                except AscendoptError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a candidate that raises while timed is a recorded drop
                    what = kernel_raised(exc, spec.name, plan.candidate)  # a device fault is raised, not recorded
                    gsum = failed_after_gate("performance", f"the candidate raised while being timed: {what}")
                    green = False
            else:
                from ascendopt.judge.interleave import FAILURES

                try:
                    timing = rt.measure_own(ctx, root, pairs=pairs, timeout=timeout, step=step, note=note,
                                            sides=sides)
                except FAILURES as exc:  # a side raised, died or hung while timed: the candidate's is a drop
                    gsum = failed_after_gate("performance", str(exc), int(ExitCode.INTEGRITY)
                                             if getattr(exc, "exit_code", None) == ExitCode.INTEGRITY else
                                             int(ExitCode.CORRECTNESS))
                    green = False
    finally:
        if sides is not None:
            sides.close()  # the workers end before the profiles start: the device is the profiler's alone
    before_paths: list[str] = []
    before_report = None
    if green and not reprofile:
        notes.append("not profiled (--no-reprofile): the round compares no pipe or UB metrics")
    if green and reprofile:  # a red gate ends the round: nothing is profiled
        try:
            before_paths = list(before_profiles or []) or rp.reference_profiles(ctx, step, timeout=timeout)
            before_report = rp.analyze_paths(before_paths)
        except AscendoptError as exc:
            console.warn(f"profile of the best so far unavailable: {exc}")
    bound_before = (round_summary.target_kernel(before_report, names) or {}).get("bound")
    target = round_summary.resolve_target_metric(target_metric, hypothesis, bound_before)

    after_paths: list[str] = []
    after_report = None
    if green and reprofile:
        step(f"round {number}: re-profiling with {', '.join(contract.metric_groups)}")
        try:
            after_paths = rp.collect_profiles(ctx, plan.candidate if plan else None, f"round-{number:04d}",
                                              timeout=timeout)
            after_report = rp.analyze_paths(after_paths)
        except WorkloadFailure as exc:  # the candidate's workload raised, died or hung while profiled: a drop
            gsum = failed_after_gate("reprofile", f"re-profile of the candidate: {exc}")
            green, timing = False, None
        except AscendoptError as exc:
            console.warn(f"re-profile failed: {exc}")
    # own code: what the candidate's children may have written into the environment
    changed = after_command(startup, root, contract.environment) if tree is not None else []
    if changed:
        gsum = failed_after_gate("integrity", changed[0][1], int(ExitCode.INTEGRITY))
        green, timing = False, None
    for case in (timing or {}).get("cases", []):
        vs_best = case.get("vs_best") or {}
        console.event("measurement", source="optimize-round", round=number, case=case["case"],
                      sides={side: case[side] for side in ("baseline", "best", "candidate") if case.get(side)},
                      ratio=vs_best.get("ratio"), verdict=vs_best.get("verdict"),
                      noise_band=vs_best.get("threshold_rel"))
    floor = None
    if timing:
        hit = [k for k in (after_report or {}).get("kernels", []) if matches_any(str(k.get("name")), names)]
        # collect's default schedule profiles one active call: the kernels' total time is one call's
        cost = spec.cost(contract.workload.shapes[0].dims, contract.workload.dtype, contract.workload.mode) \
            if spec else None
        floor = rounds.detect_floor(device_us=sum(k["total_us"] for k in hit) or None,
                                    latency_us=timing["cases"][0]["candidate"]["median_ms"] * 1e3,
                                    bytes_moved=cost.bytes if cost else None, hbm_gbs=info.hbm_gbs,
                                    backend=backend.name)
    if timing:
        found = rt.implausible_cases(timing, _floors(ctx, backend))
        if found:
            timing["implausible"] = {"cases": found, "accepted": accept_implausible}
            if accept_implausible:  # who and when, for the gate and the report to name (issue 41)
                timing["implausible"].update(rtree.accepted_by(None if ctx.is_kernel else root))
                if not ctx.is_kernel:  # the ignored code too: the tree's digest leaves it out
                    timing["implausible"]["ignored_code"] = vcs.ignored_code(root, [ws.root])
            if accept_implausible:
                note(f"implausible result accepted: {accept_implausible} ({found[0]['case']}: {found[0]['reason']})")
            else:  # recorded, not warned: the verdict's reason says it, and a reason is printed once (issue 41)
                notes.append(f"implausible: {found[0]['case']}: {found[0]['reason']}; not kept without "
                             "--accept-implausible REASON")
    # the verdict and its reason: one pure function of what was measured (rounds.decide)
    decision = decide(rt.evidence(gsum, timing if green else None, floor, accept_implausible))
    verdict = decision.verdict
    metrics = {}
    if before_report and after_report:
        from ascendopt.analyze.diagnosis import compare

        metrics = compare(before_report, after_report)
    draft = RoundRecord(number=number, hypothesis=hypothesis.strip(), direction=direction, change=change,
                        gate=gsum, verdict=verdict, stop=StopDecision(False, None, ""),
                        environment=rounds.environment_line(facts), timing=timing, metrics=metrics, ub=ub,
                        target_metric=target, floor=floor if verdict in ("keep", "floor") else None,
                        profiles=after_paths, profiles_before=before_paths, command=command,
                        contract_digest=ctx.contract_digest, notes=notes, reason=decision.reason)
    stop = ctx.stop_decision([draft])
    speed = None
    if timing:
        speed = {"candidate_ms": timing["cases"][0]["candidate"]["median_ms"],
                 "ratio_vs_best": timing["ratio_vs_best"], "ratio_vs_baseline": timing["ratio_vs_baseline"]}
    summary = round_summary.build(kernel_names=names, before=before_report, after=after_report,
                                  verdict=verdict, another_round=not stop.stop, stop_reason=stop.reason,
                                  target_metric=target, ub=ub, speed=speed,
                                  verdict_reason=decision.reason)
    record = replace(draft, stop=stop, summary=summary)
    path = rounds.save_round(ws, record)
    saved = rounds.load_rounds(ws)[-1]
    console.event("round_recorded", round=saved.number, verdict=saved.verdict, direction=saved.direction,
                  path=str(path), digest=saved.digest, exit_code=gsum["exit_code"],
                  ratio_vs_best=saved.ratio_vs_best, stop=saved.stop.to_dict())
    return RoundOutcome(saved, path, gsum["exit_code"])
