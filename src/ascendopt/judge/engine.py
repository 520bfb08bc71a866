"""The judge's engine for own code: warm workers, the parent's clock, checked inputs and outputs, the anchor.

Worker model (pyperf's manager/worker split is the model; no code of it is used): a verdict needs the
working tree ("candidate"), and for timing or an output comparison the frozen commit ("baseline"), in a
round also the best kept round ("best"). Each is ONE isolated worker process (``judge.worker``) that imports
the workload and warms it up once, then serves every request of the command: the outputs for equivalence,
the kernel-hit profile, and the timed batches. The frozen tests run in their own process at the same time
(``Session``), so a verdict costs about the slower of "the tests" and "one import + the timing".

The parent owns the truth:

* **Clock.** The parent starts each timed batch and times it from outside (``interleave._Child.batch``: its
  ``perf_counter`` around the "go" request, less the calibrated round trip of a null request); the verdict
  is taken on these readings. The worker's own reading (device events, or its ``perf_counter``) is a second
  one: a side whose two readings differ by more than ``AGREE_REL`` (median over its batches) makes the
  performance stage inconclusive, naming the side and both readings.
* **Inputs.** When the workload file defines ``inputs(seed)``, every call of a timed batch gets its own
  input set ``inputs(seed)`` (torch seeded with ``seed``), made before the batch, and no seed is used twice
  in a command: the pool of distinct input sets is exactly one batch (the calls per sample, at most 200
  and at most ``interleave.MAX_BATCH_BYTES`` of inputs and outputs: ``interleave.batch_calls``), remade for
  every batch. Baseline and candidate get the same seeds, and their input fingerprints must agree.
* **Outputs.** Every timed call's return value is fingerprinted (``worker.fingerprint``) and compared with
  the baseline's for the same seed, within the contract's output tolerances (``compare_fingerprints``). A
  wrong, lazy, subclassed or storage-less output of any timed call is a correctness failure (exit 1).
* **Idle sides.** While one side's batch is timed, every other process below the judge must be idle: each
  other side (its worker's process group and process tree) and, as one more budget, every process in no
  worker's group or tree (``OUTSIDE``). CPU time used during those stretches beyond ``IDLE_CPU_MS`` (+
  ``IDLE_CPU_REL`` of their wall time) makes the stage inconclusive (a process that burns CPU while a side
  is timed slows that side), naming the side, or the outside processes by pid. The judge is a child
  subreaper (``process.adopt_orphans``, Linux), so a process that escapes its worker's group and session
  (a double fork with ``setsid``) is re-parented to the judge, not to init: it stays below the judge, is
  counted as outside, and is killed and reaped when its worker is killed or the ``Session`` closes
  (``process.Escapes``). Where prctl is unavailable (not Linux) an escaped process is not seen and only
  the anchor stands against it.
* **Anchor.** The baseline re-measured by a gate must agree with the frozen baseline (``anchor_problem``):
  within its own noise band plus ``ANCHOR_DRIFT``; otherwise the stage is inconclusive ("baseline moved
  from X to Y"), never a speedup. Freeze times its baseline as a gate will: interleaved with a second
  worker (of the same tree), so the anchor compares like with like (``time_baseline``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendopt.contract.model import DEFAULT_TIMEOUTS

AGREE_REL = 0.25  # the parent's and the worker's reading of a side may differ by 25 % (median over batches)
# CPU a waiting side may use, summed over all the batches of another side: 50 ms (/proc counts in 10 ms
# ticks) plus 10 % of those batches' wall time; a worker blocked on its pipe uses ~0
IDLE_CPU_MS = 50.0
IDLE_CPU_REL = 0.10
# what the idle check calls the processes below the judge that are in no worker's tree or group (budgeted
# together, as one more side): a process that escaped its worker with a double fork and ``setsid``
OUTSIDE = "a process outside every worker's group"
# what the same check calls the processes of the timed side's own tree and group other than its worker (budgeted
# the same way): work they do may fall outside the timed window, where the judge's clock does not see it
HELPERS = "the timed side's other processes"
# How much more of its batches' wall time one side may spend held back by a control group's CPU quota (the worker's
# groups and the judge's, ``process.throttled_ns``) than another: 5 %, and IDLE_CPU_MS in all. A quota throttles
# the sides of one group alike under load; one applied while one side runs limits that side's speed from outside.
THROTTLE_REL = 0.05
# How much more of its time per call the reference side (the baseline) may spend waiting on a run queue than another
# side, as the median over the batches (its worker's most delayed thread and the judge's own thread in the timed
# window): 5 %. Load lands on both sides alike across interleaved rounds; a baseline whose thread is made to wait
# (its CPUs or policy changed during its batch and put back before the judge looks, or the judge's own thread
# held back while it times the baseline) reads slower by what it waited, which the anchor would excuse.
WAIT_REL = 0.05
# The re-measured baseline may differ from the frozen one by its noise band plus 20 %: what separate
# sessions on one machine differ by (clocks, temperature, other load), tighter than a 1.25x "speedup" a
# slowed baseline could fake.
ANCHOR_DRIFT = 0.20
# How ``anchor_problem``'s finding starts: a pool (``gate.many``) reads a gate's performance stage for it, to tell a
# device off the anchor from a slower candidate
ANCHOR_MOVED = "baseline moved from"
# The shortest timed batch, ms. The parent's reading of a batch includes two process wake-ups (the worker's
# on "go", the parent's on the reply), each up to milliseconds late on a busy CPU host: a 10 ms batch keeps
# them at the percent level there. On a device host the first calls of a batch pay for the other side's
# batch before it (the host's caches, the device's context): a host-bound call of fla's l2norm on an H100
# measured 0.25 ms a call timed alone in 2 ms batches, 0.37 ms interleaved, and its A/A band stayed at ±10 %
# after 90 pairs; in 20 ms batches (~90 calls) the A/A band was ±1.9 % (benchmarks/RESULTS.md). A batch holds
# at most ``interleave.MAX_BATCH_BYTES`` of inputs and outputs.
SAMPLE_MS = {"cpu": 10.0, "default": 20.0}


@dataclass(frozen=True)
class Verdict:
    """What one verdict is asked to do: the options every stage reads, in one place.

    ``pairs``: interleaved sample pairs per timed case; ``timeout``: a command's ``--timeout`` (replacing
    every frozen limit), None: the contract's; ``skip_perf``: no timing (and then no baseline worker when
    the frozen outputs are stored); ``precheck``/``profile``: freeze's Ascend lowering precheck and
    baseline profile; ``target_metric``: the metric a round optimizes (None: time).
    """

    pairs: int = 30
    timeout: float | None = None
    skip_perf: bool = False
    precheck: bool = True
    profile: bool = True
    target_metric: str | None = None
    min_sample_ms: float | None = None  # None: ``sample_ms()``
    warmup: int = 5
    warmup_ms: float = 25.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def sample_ms(self) -> float:
        """The shortest timed batch, ms: ``min_sample_ms``, else ``SAMPLE_MS`` of the current backend."""
        from ascendopt.device import backends

        if self.min_sample_ms is not None:
            return self.min_sample_ms
        return SAMPLE_MS.get(backends.current().name, SAMPLE_MS["default"])


# -- the timed sides -----------------------------------------------------------------------------


class Judged:
    """``bench.Interleaved``'s rotation over worker sides (``{name: interleave._Child}``), each sample a
    batch timed by the parent (``_Child.sample``), with every other side's CPU use recorded while it runs.

    ``samples``/``calls``/``take`` as ``bench.Interleaved`` (``bench.take_until_decided`` and
    ``rounds.timing.take_decided`` drive it); ``idle`` collects ``(side, while, cpu ms, wall ms)`` of every
    batch. ``on_pair`` (progress) is called after each round.
    """

    def __init__(self, sides: Mapping[str, Any], request: Verdict, shape: list[list[int]] | None = None):
        from ascendopt.judge.interleave import batch_calls

        self.names = list(sides)
        self.sides = [sides[n] for n in self.names]
        self.shape = shape  # what inputs(seed, shape) makes (a bucket of the shape mix); None: inputs(seed)
        # the round trip subtracted from every side's readings is the smallest any side measured: a worker's code
        # could make its own round trips look longer (its requests parsed slowly) and so its batches shorter
        rtt = min(side.calibrate() for side in self.sides)
        for side in self.sides:
            side.rtt_ms = rtt
        per_call = min([side.warmup(request.warmup, request.warmup_ms, shape) for side in self.sides])
        for side in self.sides:
            side.rtt_ms = rtt
        self.calls = batch_calls(per_call, request.sample_ms(), max(side.call_bytes for side in self.sides))
        self.samples: list[list[float]] = [[] for _ in self.sides]
        self.idle: list[tuple[str, str, float, float]] = []
        # ms per call each side's timed batch waited on a run queue (its reading's ``waited``),
        # parallel to ``samples``, None where unreadable: what a loaded host added to that batch, which the anchor
        # may excuse in a re-measured baseline (``anchor_problem``)
        self.waits: list[list[float | None]] = [[] for _ in self.sides]
        # {timed side: {pid: (command name, CPU ms)}}: the processes outside every worker's tree and group
        # that used CPU while that side was timed (``OUTSIDE`` in ``idle``)
        self.outside: dict[str, dict[int, tuple[str, float]]] = {}
        # {timed side: times the judge's own process was stopped and continued during its batches}: its clock ran on
        self.judge_stops: dict[str, int] = {}
        self.on_total: Callable[[int], None] | None = None  # told the rounds planned so far (progress)
        from ascendopt.process import own_scheduling

        self._scheduling = own_scheduling()  # what every side must run with (the workers inherit the judge's)
        self.scheduling: dict[str, set[str]] = {}  # side -> changes another process made to its scheduling
        # what each round's outputs are judged against: this side's, within these tolerances (None: equivalence
        # is off, only refused tensors are wrong)
        self.reference = "baseline"
        self.tolerances: Mapping[str, Mapping[str, float]] | None = None

    def take(self, pairs: int, on_pair: Callable[[], None] | None = None) -> list[list[float]]:
        """``pairs`` more rounds: in each, every side times one batch on the same input sets (made once per
        round by the sides' trusted maker, ``interleave._Child.inputs_blob``) in an order drawn at random, and
        hands over the same audited call, drawn before the round and named to each side only after its batch."""
        import secrets
        import time

        from ascendopt.process import process_table, times_continued

        if self.on_total:
            self.on_total(len(self.samples[0]) + pairs)
        for _ in range(pairs):
            inputs = self.sides[0].inputs_blob(self.calls, self.shape)
            audit = secrets.randbelow(self.calls)
            # whether every output is handed over in full: the reference side's (trusted) outputs decide, the same
            # for every side, so no side's own warm-up can move it off full reads
            full = self.sides[self.names.index(self.reference)].full_outputs(self.calls) \
                if self.reference in self.names else self.sides[0].full_outputs(self.calls)
            # every process, read again after each batch (None: no /proc, not counted); read here, after the
            # round's inputs are made, so the trusted maker's work is in no side's timed window
            table = process_table()
            order = list(range(len(self.sides)))
            _shuffle(order)
            for k in order:
                self._guard_scheduling()
                continued = times_continued()
                t0 = time.perf_counter()
                self.samples[k].append(max(self.sides[k].sample(self.calls, inputs, audit, full), 1e-9))
                wall = (time.perf_counter() - t0) * 1e3
                if continued is not None and times_continued() != continued:
                    self.judge_stops[self.names[k]] = self.judge_stops.get(self.names[k], 0) + 1
                self.waits[k].append(self.sides[k].readings[-1].get("waited"))
                now = process_table()
                if table is not None and now is not None:
                    self._account(self.names[k], table, now, wall)
                table = now
            self._compare_round()
            if on_pair:
                on_pair()
        return self.samples

    def _guard_scheduling(self) -> None:
        """Every side's threads back to the judge's own scheduling before a batch (``process.enforce_scheduling``);
        what another process had changed (a nice value, a policy, the CPUs, the timer slack of a side: a
        baseline made slower, or a candidate made faster, from outside its code) is kept in ``scheduling``."""
        from ascendopt.process import enforce_scheduling

        for name, side in zip(self.names, self.sides, strict=True):
            for what in (enforce_scheduling(side.pid, self._scheduling) if self._scheduling is not None else []):
                self.scheduling.setdefault(name, set()).add(what)
            if side.stopped_by_others():
                self.scheduling.setdefault(name, set()).add("stopped by a signal (SIGSTOP)")

    def _compare_round(self) -> None:
        """Judge the round just taken on what the workers handed over, in this process, then let the outputs
        go (a timing keeps no more than one round of them): each side's refused tensors, and each other side's
        outputs against ``reference``'s (``_against``), kept in the reading as ``"wrong"``."""
        from ascendopt.judge.evidence import compare_values, refusals

        by_name = dict(zip(self.names, self.sides, strict=True))
        ref = by_name.get(self.reference)
        for name, side in by_name.items():
            reading = side.readings[-1]
            refused = refusals(reading["outputs"])
            refused += [f"{part}: {entry['problem']}" for out in reading["prints"] or []
                        for part, entry in out["parts"].items() if "problem" in entry]
            reading["wrong"] = f"{name}: a timed call returned {refused[0]}" if refused else None
            if reading["wrong"] is None and ref is not None and side is not ref:
                reading["wrong"] = _against(name, len(side.readings), reading, ref.side, ref.readings[-1],
                                            self.tolerances)
                theirs = ref.readings[-1].get("inputs_written")
                mine = reading.get("inputs_written")
                if reading["wrong"] is None and mine is not None and theirs is not None:
                    extra = [n for n in mine if n not in theirs]
                    if extra:
                        reading["wrong"] = (f"{name}: timed batch {len(side.readings)} wrote its input {extra[0]} in "
                                            f"place (the {ref.side}'s calls do not)")
                ref_after, after = ref.readings[-1].get("inputs_after"), reading.get("inputs_after")
                if reading["wrong"] is None and ref_after is not None:  # what the reference writes is an output too
                    bad = [c for c in compare_values(ref_after, after, self.tolerances, "inputs after the call")
                           if not c.passed]
                    if bad:
                        reading["wrong"] = (f"{name}: timed batch {len(side.readings)}: {bad[0].message} (the "
                                            f"{ref.side}'s)")
        for side in self.sides:
            side.readings[-1]["outputs"] = side.readings[-1]["prints"] = side.readings[-1]["inputs_after"] = None

    def _account(self, timed: str, before: Mapping[int, Any], after: Mapping[int, Any], wall: float) -> None:
        """Record the CPU every process but ``timed``'s used during its batch (``before``/``after``:
        ``process.process_table`` readings around it). A side's processes: its worker's process group and
        its worker's process tree; ``OUTSIDE``: every other process below this one (the judge), a process
        that escaped its worker's group and was adopted here (``process.adopt_orphans``) above all."""
        from ascendopt.process import descendants

        owner: dict[int, str] = {}
        for name, side in zip(self.names, self.sides, strict=True):
            for pid in descendants(after, side.pid) | ({side.pid} & after.keys()):
                owner[pid] = name
        groups = {side.pid: name for name, side in zip(self.names, self.sides, strict=True)}
        for pid, proc in after.items():
            if proc.pgid in groups:
                owner.setdefault(pid, groups[proc.pgid])
        for name, side in zip(self.names, self.sides, strict=True):  # read around its next untimed requests
            side.helper_pids = {pid for pid, who in owner.items() if who == name and pid != side.pid}
        used = dict.fromkeys(self.names, 0.0)
        outside: dict[int, tuple[str, float]] = {}
        spent = _cpu_between(before, after)
        worker = self.sides[self.names.index(timed)].pid
        helpers = 0.0
        for pid in descendants(after, os.getpid()) | owner.keys():
            name = owner.get(pid)
            if name == timed:
                helpers += spent[pid] if pid != worker else 0.0
                continue
            if name is not None:
                used[name] += spent[pid]
            elif spent[pid] > 0:
                outside[pid] = (after[pid].name, spent[pid])
        for name in self.names:
            if name != timed:
                self.idle.append((name, timed, used[name], wall))
        self.idle.append((OUTSIDE, timed, sum(cpu for _, cpu in outside.values()), wall))
        self.idle.append((HELPERS, timed, helpers, wall))
        seen = self.outside.setdefault(timed, {})
        for pid, (command, cpu) in outside.items():
            seen[pid] = (command, seen.get(pid, (command, 0.0))[1] + cpu)


def _shuffle(order: list[int]) -> None:
    """Shuffle ``order`` in place from the operating system's random source (no side can predict its turn)."""
    import secrets

    for i in range(len(order) - 1, 0, -1):
        j = secrets.randbelow(i + 1)
        order[i], order[j] = order[j], order[i]


def _cpu_between(before: Mapping[int, Any], after: Mapping[int, Any]) -> dict[int, float]:
    """CPU ms each process of ``after`` used since ``before`` (two ``process.process_table`` readings): a
    process alive at both, the difference; a process new since, all of its CPU. A child that ended and was
    waited for in between counts in its parent's (the kernel adds it to the parent's children's time):
    less the CPU it had already used at ``before``, which was counted then."""
    def same(pid: int) -> bool:
        return pid in before and pid in after and before[pid].start == after[pid].start

    waited: dict[int, float] = {}
    for pid, proc in before.items():
        if not same(pid) and same(proc.ppid):
            waited[proc.ppid] = waited.get(proc.ppid, 0.0) + proc.cpu_ms
    return {pid: max(0.0, proc.cpu_ms - before[pid].cpu_ms - waited.get(pid, 0.0)) if same(pid) else proc.cpu_ms
            for pid, proc in after.items()}


@dataclass
class Findings:
    """What the audit of a timing found: ``wrong`` (correctness, exit 1) and ``doubts`` (the timing is
    not evidence: inconclusive, exit 6), each a list of one-line messages; ``not_checked``: checks this host
    could not make (said beside the verdict)."""

    wrong: list[str] = field(default_factory=list)
    doubts: list[str] = field(default_factory=list)
    # what this host could not give the audit (reported with the verdict, not a doubt): one line each
    not_checked: list[str] = field(default_factory=list)


UNTIMED_CPU_UNCHECKED = ("the CPU time of the untimed requests (this host gives no per-thread run time, "
                         "/proc/PID/task/TID/schedstat: they were compared in wall time only)")


def audit(judged: Judged) -> Findings:
    """Check a finished timing, in this process, on what the workers handed over: the first wrong output any
    round found (``Judged._compare_round``: a refused tensor, or an output out of tolerance of the reference's
    for the same inputs); the two readings of each side; the untimed requests' cost against the reference's;
    and the idle sides' CPU use."""
    from ascendopt.judge.evidence import untimed_excess

    found = Findings()
    by_name = dict(zip(judged.names, judged.sides, strict=True))
    ref = by_name.get(judged.reference)
    for name, side in by_name.items():
        wrong = next((r["wrong"] for r in side.readings if r.get("wrong")), None)
        if wrong and not found.wrong:
            found.wrong.append(wrong)
        if ref is not None and side is not ref:
            excess = untimed_excess(side.readings, ref.readings)
            if excess:
                found.doubts.append(f"{name}: {excess}")
            if not all("untimed_run_ms" in r for r in (*side.readings, *ref.readings)) and not found.not_checked:
                found.not_checked.append(UNTIMED_CPU_UNCHECKED)
        ratio = _agreement(side.readings)
        if ratio is not None and abs(ratio - 1.0) > AGREE_REL:
            parent = _median([r["parent"] for r in side.readings])
            worker = _median([r["worker"] for r in side.readings])
            waited = _median([r.get("waited") or 0.0 for r in side.readings])
            found.doubts.append(f"{name}: the parent's clock read {parent * 1e3:.2f} us per call, "
                                f"{waited * 1e3:.2f} us of it waiting for a CPU, the worker's own timer "
                                f"{worker * 1e3:.2f} us (ratio {ratio:.2f}, allowed 1 ± {AGREE_REL:g}): "
                                "the worker's clock disagrees")
    for name, side in by_name.items():
        if side.external_stops:
            judged.scheduling.setdefault(name, set()).add(f"stopped by a signal {side.external_stops} time(s) while "
                                                          "the judge waited for it")
    for name, stops in judged.judge_stops.items():
        found.doubts.append(f"the judge's own process was stopped and continued around {stops} batch(es) of {name} "
                            "(a signal from another process): its clock counted the stop")
    for name, changes in judged.scheduling.items():
        found.doubts.append(f"{name}: its worker's scheduling was changed by another process while the sides were "
                            f"timed ({', '.join(sorted(changes))}; reset before each batch where the judge may): a "
                            "side's speed was changed from outside its code")
    throttle = _throttled(judged)
    if throttle:
        found.doubts.append(throttle)
    held = _held_back(judged)
    if held:
        found.doubts.append(held)
    totals: dict[tuple[str, str], list[float]] = {}
    for idle, timed, cpu, wall in judged.idle:
        total = totals.setdefault((idle, timed), [0.0, 0.0])
        total[0] += cpu
        total[1] += wall
    for (idle, timed), (cpu, wall) in totals.items():
        if cpu > IDLE_CPU_MS + IDLE_CPU_REL * wall:
            if idle == HELPERS:
                found.doubts.append(f"{timed}: processes its worker started used {cpu:.0f} ms of CPU around its own "
                                    f"batches ({wall:.0f} ms in all): work outside the worker's process is not "
                                    "bound to the timed window")
                continue
            who = _outside_names(judged.outside.get(timed, {})) if idle == OUTSIDE else idle
            found.doubts.append(f"{who} used {cpu:.0f} ms of CPU while {timed} was timed ({wall:.0f} ms in all): a "
                                "side must be idle while another is measured")
    return found


def _held_back(judged: Judged) -> str | None:
    """The doubt when the reference side's batches waited on a run queue (``waited`` + ``judge_waited`` of its
    readings, per call) a larger share of their time than another side's, by more than ``WAIT_REL`` as the medians
    over the batches, and that side reads faster by more than ``WAIT_REL`` but by less than twice the difference
    (the wait, not the code, may be the speedup); None otherwise or where unreadable. Only that direction: a
    candidate held back reads slower, never faster; and a speedup well beyond the difference stands (another
    test's load on a shared host lands unevenly on short batches)."""
    by_name = dict(zip(judged.names, judged.sides, strict=True))
    ref = by_name.get(judged.reference)
    if ref is None:
        return None

    def share(side) -> float | None:
        parts = [((r.get("waited") or 0.0) + r["judge_waited"]) / r["parent"] for r in side.readings
                 if r.get("waited") is not None and r.get("judge_waited") is not None and r.get("parent")]
        return _median(parts) if parts and len(parts) == len(side.readings) else None

    mine = share(ref)
    if mine is None:
        return None
    ref_median = _median(judged.samples[judged.names.index(judged.reference)])
    for k, (name, side) in enumerate(by_name.items()):
        theirs = share(side) if side is not ref else None
        if theirs is None or not ref_median or not judged.samples[k]:
            continue
        gain = 1.0 - _median(judged.samples[k]) / ref_median
        if mine - theirs > WAIT_REL and WAIT_REL < gain < 2 * (mine - theirs):
            return (f"{judged.reference}: its batches waited on a run queue {mine:.0%} of their time (its worker's "
                    f"most delayed thread and the judge's clock), {name}'s {theirs:.0%}: a side held back by the "
                    "scheduler more than another (its CPUs or priority changed during its batches, or load that fell "
                    "on it alone)")
    return None


def _throttled(judged: Judged) -> str | None:
    """The doubt when one side's batches were held back by a control group's CPU quota (``throttled_ms`` of its
    readings) by more than ``THROTTLE_REL`` of their wall time beyond another side's, and ``IDLE_CPU_MS`` in all;
    None otherwise, or where a side's readings are unreadable."""
    held: dict[str, tuple[float, float]] = {}
    for name, side in zip(judged.names, judged.sides, strict=True):
        times = [r.get("throttled_ms") for r in side.readings]
        if not times or any(t is None for t in times):
            return None
        held[name] = (sum(times), sum(r.get("batch_ms", 0.0) for r in side.readings))
    if len(held) < 2:
        return None
    share = {name: ms / wall if wall > 0 else 0.0 for name, (ms, wall) in held.items()}
    most, least = max(share, key=share.__getitem__), min(share, key=share.__getitem__)
    if share[most] - share[least] <= THROTTLE_REL or held[most][0] <= IDLE_CPU_MS:
        return None
    return (f"{most}: a control group's CPU quota held its batches back {held[most][0]:.0f} ms ({share[most]:.0%} of "
            f"their time), {least}'s {held[least][0]:.0f} ms ({share[least]:.0%}): a side's speed was limited from "
            "outside its code")


def _outside_names(used: Mapping[int, tuple[str, float]], most: int = 3) -> str:
    """The processes outside every worker's group that used CPU (``Judged.outside``), most CPU first."""
    ranked = sorted(used.items(), key=lambda item: -item[1][1])
    named = ", ".join(f"pid {pid} '{command}'" for pid, (command, _) in ranked[:most])
    more = f" and {len(ranked) - most} more" if len(ranked) > most else ""
    if len(ranked) == 1:
        return f"{OUTSIDE} ({named}: escaped from its worker's process group)"
    return f"processes outside every worker's group ({named}{more}: escaped from their workers' process groups)"


def second_reading(judged: Judged) -> dict[str, Any] | None:
    """The verdict the workers' own readings would give (first two sides): ``{"ratio", "noise_band",
    "verdict"}`` -- shown beside the parent's, never used for the verdict (the worker is within the code
    under test's reach); None with fewer than 6 batches."""
    from ascendopt.judge import bench

    own = [[r["worker"] for r in side.readings] for side in judged.sides[:2]]
    if len(own) < 2 or min(len(x) for x in own) < 6 or min(min(x) for x in own) <= 0:
        return None
    n = min(len(x) for x in own)
    c = bench.decide(own[0][:n], own[1][:n], calls_per_sample=judged.calls)
    return {"ratio": c.ratio, "noise_band": c.threshold_rel, "verdict": c.verdict}


def _against(name: str, batch: int, mine: Mapping[str, Any], ref_name: str, theirs: Mapping[str, Any],
             tolerances: Mapping[str, Mapping[str, float]] | None) -> str | None:
    """Why ``mine`` (a side's reading of timed batch ``batch``) is wrong against ``theirs`` (the reference's
    reading on the same input sets), or None: every call in full where both handed every call over, else the
    fingerprint of every call and the audited call in full."""
    from ascendopt.judge.evidence import compare_values

    if tolerances is None:
        return None
    where = f"{name}: timed batch {batch}"
    if mine["full"] != theirs["full"] or mine["audit"] != theirs["audit"]:
        return f"{where}: its outputs were not handed over as the {ref_name}'s were (the judge's reads differ)"
    if mine["full"] and theirs["full"]:
        pairs = list(enumerate(zip(theirs["outputs"], mine["outputs"], strict=False)))
    else:
        for k, (c, b) in enumerate(zip(mine["prints"] or [], theirs["prints"] or [], strict=False)):
            problem = compare_fingerprints(b, c, tolerances)
            if problem:
                return f"{where}, call {k + 1}: {problem} (vs the {ref_name}'s output for the same inputs)"
        pairs = [(mine["audit"], (theirs["outputs"][0], mine["outputs"][0]))] if mine["outputs"] else []
    for k, (b, c) in pairs:
        bad = [check for check in compare_values(b, c, tolerances) if not check.passed]
        if bad:
            return f"{where}, call {k + 1}: {bad[0].message} (vs the {ref_name}'s output for the same inputs)"
    return None


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if s else float("nan")


def _agreement(readings: Sequence[Mapping[str, Any]]) -> float | None:
    """Median of worker / parent over a side's batches (None: no batches), the parent's reading less the time
    the worker waited on a run queue in that batch (``"waited"``, ms per call, where the judge read it): a
    loaded host delays the worker's wake-up on "go" and its reply, which the parent's clock sees and the
    worker's timer does not. A worker's timer longer than the parent's whole reading is judged on the whole."""
    ratios = []
    for r in readings:
        if r["parent"] <= 0:
            continue
        raw = r["worker"] / r["parent"]
        own = r["parent"] - (r.get("waited") or 0.0)
        ratios.append(raw if raw > 1.0 or own <= 0 else min(1.0, r["worker"] / own))
    return _median(ratios) if ratios else None


def compare_fingerprints(base: Mapping[str, Any], cand: Mapping[str, Any],
                         tolerances: Mapping[str, Mapping[str, float]]) -> str | None:
    """None when ``cand`` (a ``worker.fingerprint``) is within ``tolerances`` of ``base``; else why not.

    Each fp64 group sum may differ by ``atol * n + rtol * sum|base|`` (what elementwise ``atol + rtol *
    |base|`` allows, summed), plus 1e-9 of the sum of magnitudes for the rounding of summing in another
    order; exact dtypes (integers, bool) must match exactly; non-finite counts must match.
    """
    from ascendopt.judge.equivalence import _SHORT

    if sorted(base["parts"]) != sorted(cand["parts"]):
        return f"returned {sorted(cand['parts'])}, the baseline {sorted(base['parts'])}"
    for name, b in base["parts"].items():
        c = cand["parts"][name]
        if "problem" in b or "problem" in c:
            continue
        if b["dtype"] != c["dtype"] or b["shape"] != c["shape"]:
            return f"{name}: dtype/shape {c['dtype']}{c['shape']}, the baseline {b['dtype']}{b['shape']}"
        if b["nonfinite"] != c["nonfinite"]:
            return f"{name}: {c['nonfinite']} non-finite element(s), the baseline {b['nonfinite']}"
        key = _SHORT.get(b["dtype"], b["dtype"])
        exact = key not in tolerances and not any(w in b["dtype"] for w in ("float", "complex"))
        tol = tolerances.get(key, {"rtol": 0.0, "atol": 0.0}) if not exact else {"rtol": 0.0, "atol": 0.0}
        for g, (sb, sc, ab, n) in enumerate(zip(b["sum"], c["sum"], b["abs"], b["n"], strict=True)):
            bound = tol["atol"] * n + tol["rtol"] * ab + 1e-9 * ab
            if not abs(sc - sb) <= bound:
                where = "sum of all elements" if g == 0 else f"sum of sampled group {g}"
                return (f"{name}: {where} {sc:.6g}, the baseline {sb:.6g} (allowed ±{bound:.3g} at rtol "
                        f"{tol['rtol']:g}, atol {tol['atol']:g})")
    return None


# -- the anchor ----------------------------------------------------------------------------------


def anchor_problem(frozen_ms: float, samples_ms: Sequence[float],
                   waits_ms: Sequence[float | None] = (), frozen_waited_ms: float | None = None) -> str | None:
    """None when the re-measured baseline (``samples_ms``, ms per call) agrees with the frozen median
    ``frozen_ms``: ``|ln(median / frozen_ms)| <= ln(1 + ANCHOR_DRIFT) + band``, ``band`` the samples' own noise
    band (``bench.DecisionRule``'s z times the standard error of a median, from the MAD of their logs). Else
    "baseline moved from X to Y".

    ``waits_ms`` (parallel to the samples, ``Judged.waits``): the ms per call each batch waited on a run queue,
    runnable but not running, as the kernel counted it (``process.schedstats``). That is time a loaded host
    added, not the baseline's code: a baseline may be slower than frozen by up to it, and no more. A baseline
    slowed by what its code does (sleeps, extra work, a lock) is not on a run queue then, so nothing of that
    is excused, however loaded the host. A baseline faster than frozen is judged on its raw time against the
    frozen median less what the host made it wait at freeze (``frozen_waited_ms``, ms per call; None: not read,
    the frozen median as it is): a freeze on a loaded host read the baseline slow, and the baseline has not moved
    when it runs at its own speed now."""
    from ascendopt.judge.bench import DecisionRule

    if frozen_ms <= 0 or not samples_ms:
        return None
    med, band = _log_median_band(samples_ms, DecisionRule().z)
    known = [(x, w) for x, w in zip(samples_ms, waits_ms, strict=False) if w is not None]
    waited = ""
    own = med
    if len(known) == len(samples_ms):
        own = _log_median_band([max(x - w, 1e-12) for x, w in known], DecisionRule().z)[0]
        waited = f", {_median([w for _, w in known]) * 1e3:.2f} us of it waiting for a CPU"
    frozen_own = max(frozen_ms - (frozen_waited_ms or 0.0), 1e-12)
    raw, slower = med - math.log(frozen_ms), own - math.log(frozen_ms)
    limit = math.log1p(ANCHOR_DRIFT) + band
    if slower > limit:  # slower than frozen by more than the host made it wait
        moved = slower
    elif med - math.log(frozen_own) < -limit:  # faster than the frozen baseline ran, waits at freeze taken off
        moved = med - math.log(frozen_own)
    else:
        return None
    if frozen_waited_ms:
        waited += f"; {frozen_waited_ms * 1e3:.2f} us of the frozen one"
    return (f"{ANCHOR_MOVED} {frozen_ms * 1e3:.2f} us (frozen) to {math.exp(med) * 1e3:.2f} us "
            f"({math.expm1(raw):+.1%}{waited}; {math.expm1(moved):+.1%} beyond what the host added, allowed "
            f"±{ANCHOR_DRIFT:.0%} drift + {math.expm1(band):.1%} noise): the re-measured baseline is not the frozen "
            "one, so no speedup can be read from it")


def _log_median_band(samples: Sequence[float], z: float) -> tuple[float, float]:
    """The median of the samples' logs and its noise band: ``z`` standard errors of a median, from their MAD."""
    logs = sorted(math.log(max(x, 1e-12)) for x in samples)
    med = logs[len(logs) // 2]
    mad = _median([abs(x - med) for x in logs])
    return med, z * 1.2533 * 1.4826 * mad / math.sqrt(len(logs))


# -- a verdict's processes -------------------------------------------------------------------------


class Session:
    """The processes of one own-code verdict, started at once: the frozen tests (a thread waiting on
    their process) and one worker per tree in ``trees`` (``{side: tree}``), each loading within
    ``load_s``. ``tests`` (a zero-argument callable returning the correctness stage of the tests, or None)
    runs concurrently with the workers' imports and warm-up; ``tests_result()`` waits for it.

    Workers are seeded (``--seed``: outputs comparable) and closed with their process groups on exit; then
    every process the session started that is still below this one (``process.Escapes``: one that escaped
    its worker's group with a double fork and ``setsid`` included) is killed and reaped. A worker killed on
    a timeout, an interrupt or its death sweeps them at once (``interleave.contain``).
    """

    def __init__(self, exec_rel: str, trees: Mapping[str, Path], *, load_s: float,
                 tests: Callable[[], Any] | None = None):
        from ascendopt.judge.interleave import _Child, contain
        from ascendopt.process import Escapes

        self.exec_rel = exec_rel
        self.load_s = load_s
        self._escapes = Escapes()  # before the first child: this process adopts orphans from here on
        self._stack = contextlib.ExitStack()
        self._tests_out: list[Any] = []
        self._thread = None
        if tests is not None:
            def run() -> None:
                try:
                    self._tests_out.append(("ok", tests()))
                except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                    self._tests_out.append(("raised", exc))

            self._thread = threading.Thread(target=run, name="frozen-tests", daemon=True)
            self._thread.start()
        self.trees = dict(trees)
        self.workers: dict[str, Any] = {}
        try:
            for side, tree in trees.items():
                self.workers[side] = _Child(tree, exec_rel, side, seed=True)
                self._stack.callback(contain(self.workers[side], self._escapes))
        except BaseException:
            self.close()
            raise
        # the trusted maker of every worker's inputs: the frozen commit's worker (its tree verified, no code under
        # test runs in it); without one (frozen outside git), each worker makes its own
        maker = self.workers.get("baseline")
        for child in self.workers.values():
            child.maker = maker
        self._ready: set[str] = set()

    def tests_result(self) -> Any:
        """The tests' stage (waits for them); re-raises what the tests' thread raised."""
        if self._thread is None:
            return None
        self._thread.join()
        how, value = self._tests_out[0]
        if how == "raised":
            raise value
        return value

    def worker(self, side: str):
        """The ready worker of ``side`` (waits for its module code, within ``load_s``)."""
        child = self.workers[side]
        if side not in self._ready:
            child.start(self.load_s)
            self._ready.add(side)
        return child

    def close(self) -> None:
        try:
            self._stack.close()
            if self._thread is not None:
                self._thread.join()
        finally:
            self._escapes.sweep()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def time_sides(session: Session, sides: Sequence[str], request: Verdict, *, timing_s: float,
               decide: Callable[[Judged, Callable[[], None]], Any], label: str,
               statistics: bool = True, tolerances: Mapping[str, Mapping[str, float]] | None = None,
               shape: list[list[int]] | None = None) -> tuple[Judged, Any]:
    """The timing phase of ``sides`` (ready workers of ``session``) under one limit ``timing_s``, each having
    made one profiled call first (as the kernel census makes), with a progress bar of rounds done of the total
    and an ETA; ``decide(judged, on_pair)`` takes the pairs and returns the result (``statistics``: it decides
    with ``bench.decide``, whose scipy.stats is imported first). Every round's outputs are judged against the
    first side's within ``tolerances`` (``Judged._compare_round``); ``shape``: the inputs are
    ``inputs(seed, shape)`` (a bucket of the shape mix). -> ``(judged, result)``."""
    from ascendopt import console
    from ascendopt.judge.interleave import Phase

    workers = {name: session.worker(name) for name in sides}
    phase = Phase("workload() warm-up and timing", timing_s)
    for child in workers.values():
        child.phase = phase
    # joined before the first timed batch, which it must not share the host with
    importing = import_statistics() if statistics else None
    # every side comes to the timing with the same history: a process that made a call under the profiler
    # (the working tree's worker, for the kernel census) runs measurably faster afterwards than one that did not
    # (1-3 % on fla under Triton's interpreter), so each side that made none makes one now, untimed
    try:
        for child in workers.values():
            if not child.profiled:
                child.kernel_census(timing_s)
    finally:
        if importing is not None:
            importing.join()
    what = f"timing {label}: {', '.join(sides)} interleaved"
    with console.progress(what, total=request.pairs) as bar:
        bar.update(f"{what} (warm-up)")
        judged = Judged(workers, request, shape)
        judged.reference, judged.tolerances = sides[0], tolerances
        bar.update(what)
        judged.on_total = bar.set_total  # more rounds when the band is too wide: the total (and ETA) grows
        result = decide(judged, bar.advance)
    return judged, result


@functools.cache
def import_statistics() -> threading.Thread:
    """Start importing the verdict's statistics (scipy.stats, ~0.8 s on the 2-core CPU host) in a thread, once per
    process; -> that thread. A command that will decide calls it when it starts its processes, so the import
    runs beside the frozen tests, not on the way to the verdict; ``time_sides`` joins it."""
    thread = threading.Thread(target=_import_scipy_stats, name="import-statistics", daemon=True)
    thread.start()
    return thread


def _import_scipy_stats() -> None:
    with contextlib.suppress(ImportError):  # bench.decide reports a missing scipy itself
        import scipy.stats  # noqa: F401


def time_baseline(session: Session, request: Verdict, *, timing_s: float, label: str, partner: str | None,
                  shape: list[list[int]] | None = None):
    """Freeze's baseline timing (``bench.Timing``) within ``timing_s``: the "baseline" worker interleaved with
    ``partner`` (a second worker of the same tree) for ``request.pairs`` pairs, as a gate times it, or, with
    no partner, alone (``interleave._Child.measure``). Timed alone, a batch follows the same side's batch,
    not the other side's: a host-bound device call measured a third faster that way than in the gate. ``shape``:
    a bucket of the shape mix (``inputs(seed, shape)``; with a partner only). With a partner the timing's
    ``waited_ms`` is the median run-queue wait per call of the baseline's batches (``anchor_problem``)."""
    from ascendopt.judge import bench

    if partner is None:
        return session.worker("baseline").measure(timing_s, repeats=request.pairs, warmup=request.warmup,
                                                  warmup_ms=request.warmup_ms, min_sample_ms=request.sample_ms())
    judged, _ = time_sides(session, ["baseline", partner], request, timing_s=timing_s, label=label,
                           decide=lambda j, on: j.take(request.pairs, on), statistics=False, shape=shape)
    waits = judged.waits[0]
    waited = _median([float(w) for w in waits]) if waits and all(w is not None for w in waits) else None
    return dataclasses.replace(bench.summarize(judged.samples[0], judged.calls), waited_ms=waited)


DEFAULT_LOAD_S = DEFAULT_TIMEOUTS["workload_s"]
# The differential check's calls at each checked shape: input sets made by the trusted maker from fresh random
# seeds, candidate and frozen commit called on the same bytes, outputs compared in the parent.
DIFFERENTIAL_CALLS = 3


# Hidden shapes drawn per command from a shape mix's range (``contract.shapes.hidden_shapes``): besides every
# bucket, the differential check calls each once: the smallest, the largest, then in turn sizes off every tile
# multiple and on one, three of each (on a multiple of 64, of 32 and not 64, of 16 and not 32).
HIDDEN_SHAPES = 8


# The value probe: one more input set at the workload's shape, made by the trusted maker and every floating-point
# tensor of it multiplied by this factor, so values fall well outside the workload's own range (randn's inputs
# reach |x| > 7 on about 2/3 of the elements). A change that agrees on the workload's inputs and not there is
# a doubt, not red: an honest change may differ where the code was never meant to run.
VALUE_PROBE_SCALE = 16.0


@dataclass(frozen=True)
class CheckCase:
    """One shape the differential check calls both sides at: ``label`` names it in a failure ("bucket 2
    [[8, 4096]]", "hidden shape [[8, 4093]]"), ``shape`` is what ``inputs(seed, shape)`` receives (None: the
    workload's own ``inputs(seed)``), ``calls`` input sets are made for it."""

    label: str
    shape: list[list[int]] | None
    calls: int


def check_cases(mix, takes_shape: bool, hidden: int = HIDDEN_SHAPES) -> list[CheckCase]:
    """The differential check's shapes: the workload's own (``DIFFERENTIAL_CALLS`` calls), and with a shape mix
    (``contract.shapes``) every bucket's representative and ``hidden`` shapes drawn now, unpredictably, from the
    mix's range (one call each). A mix whose workload's ``inputs`` takes no shape adds no case (the caller says
    why the buckets were not checked)."""
    import random
    import secrets

    from ascendopt.contract.shapes import hidden_shapes

    cases = [CheckCase("the workload's shape", None, DIFFERENTIAL_CALLS)]
    if mix is None or not takes_shape:
        return cases
    cases += [CheckCase(f"bucket {i + 1} {b.shape}", b.shape, 1) for i, b in enumerate(mix.buckets)]
    drawn = hidden_shapes(mix, random.Random(secrets.randbits(64)), hidden)
    return cases + [CheckCase(f"hidden shape {shape}", shape, 1) for shape in drawn]


@dataclass
class Differential:
    """What the differential check found: ``checks`` (one per output part and call, and one per input written in
    place by the candidate only), ``calls`` made per side, ``inputs`` ("trusted maker" or "workload's own"),
    ``shapes`` the labels of the shapes checked."""

    checks: list[Any]
    calls: int
    inputs: str
    shapes: list[str] = field(default_factory=list)
    # the inputs each side's calls wrote in place: {"baseline": {name: message}, "candidate": {...}}
    writes: dict[str, dict[str, str]] = field(default_factory=lambda: {"baseline": {}, "candidate": {}})
    # the frozen tests' own calls replayed (judge.testcalls): {"module:qualname": calls}
    replayed: dict[str, int] = field(default_factory=dict)
    # the value probe (``value_probe``): what it found, and the doubts it raised (the verdict cannot be green)
    probe: str = "not run"
    doubts: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Any]:
        return [c for c in self.checks if not c.passed]


def differential(session: Session, tolerances: Mapping[str, Mapping[str, float]] | None, limit_s: float,
                 cases: Sequence[CheckCase] | None = None, test_calls: Mapping[str, Any] | None = None,
                 probe: bool = True) -> Differential:
    """The judge's differential check: the working tree's worker against the frozen commit's, at each of
    ``cases`` (default: the workload's own shape, ``DIFFERENTIAL_CALLS`` calls), on input sets the trusted maker
    (the frozen commit's worker) made from seeds drawn now, handed to both as the same bytes; or, for a workload
    without ``inputs(seed)``, one call on each worker's own module-level inputs. What each returned, and its
    inputs after the call, come back as bytes and are compared here (``judge.evidence``): an output out of
    ``tolerances`` (None: only refused tensors fail), missing or extra, or an input the candidate writes in place
    and the frozen commit does not, is a failed check naming the shape. Each request within ``limit_s``.

    ``test_calls`` (the contract's): the frozen tests' own calls of the target code, replayed in both workers
    (``replay_test_calls``) after the cases; then, with ``probe`` and ``tolerances``, the value probe
    (``value_probe``)."""
    from ascendopt.judge.evidence import compare_values, input_writes
    from ascendopt.judge.payload import decode
    from ascendopt.judge.result import Check

    base, cand = session.worker("baseline"), session.worker("candidate")
    cases = list(cases or [CheckCase("the workload's shape", None, DIFFERENTIAL_CALLS)])
    checks: list[Any] = []
    if not base.has_inputs:
        theirs, mine = base.call(None, limit_s), cand.call(None, limit_s)
        checks += compare_values(theirs["outputs"][0], mine["outputs"][0], tolerances)
        base_writes, cand_writes = _module_writes(theirs), _module_writes(mine)
        checks += [Check(f"input {name}", False, f"{message} (the frozen commit's workload() does not write it)")
                   for name, message in cand_writes.items() if name not in base_writes]
        found = Differential(checks, 1, "workload's own", [cases[0].label],
                             {"baseline": base_writes, "candidate": cand_writes})
        return replay_test_calls(session, found, test_calls, limit_s)
    calls = 0
    writes: dict[str, dict[str, str]] = {"baseline": {}, "candidate": {}}
    for case in cases:
        inputs = base.make([secrets_seed() for _ in range(case.calls)], case.shape)
        made = decode(inputs)
        theirs, mine = base.call(inputs, limit_s), cand.call(inputs, limit_s)
        calls += case.calls
        prefix = "" if len(cases) == 1 else f"{case.label}: "
        for k, (b, c) in enumerate(zip(theirs["outputs"], mine["outputs"], strict=True)):
            name = f"{prefix}output" if case.calls == 1 else f"{prefix}call {k + 1}: output"
            checks += compare_values(b, c, tolerances, name)
        base_writes, cand_writes = input_writes(made, theirs["inputs"]), input_writes(made, mine["inputs"])
        checks += [Check(f"{prefix}input {name}", False, f"{prefix}{message} (the frozen commit's workload() does "
                         "not write it)") for name, message in cand_writes.items() if name not in base_writes]
        # what the frozen commit writes into its inputs is an output too (a destination-passing op): the values
        # the candidate leaves there must match
        if base_writes:
            checks += compare_values(theirs["inputs"], mine["inputs"], tolerances, f"{prefix}inputs after the call")
        writes["baseline"].update({f"{prefix}{k}": v for k, v in base_writes.items()})
        writes["candidate"].update({f"{prefix}{k}": v for k, v in cand_writes.items()})
    found = replay_test_calls(session, Differential(checks, calls, "trusted maker", [c.label for c in cases], writes),
                              test_calls, limit_s)
    if probe and tolerances is not None:
        found.probe, found.doubts = value_probe(base, cand, tolerances, limit_s)
    return found


def value_probe(base, cand, tolerances: Mapping[str, Mapping[str, float]], limit_s: float) -> tuple[str, list[str]]:
    """Both workers called on one input set of the workload's shape made by the trusted maker (``base``) and
    scaled by ``VALUE_PROBE_SCALE`` (``payload.scaled``): values the workload's own inputs never reach. -> (what
    it found, doubts): a candidate whose outputs differ there from the frozen commit's within ``tolerances``, or
    that raises where the frozen commit does not, is a doubt; a frozen commit that raises there ends the probe
    (its code refuses such values). Each call within ``limit_s``; a raising call does not end the worker."""
    from ascendopt.judge.evidence import compare_values
    from ascendopt.judge.payload import scaled

    what = f"the workload's inputs scaled by {VALUE_PROBE_SCALE:g}"
    inputs = scaled(base.make([secrets_seed()]), VALUE_PROBE_SCALE)
    theirs = base.call(inputs, limit_s, tolerate=True)
    if theirs["raised"][0]:
        return f"not run: the frozen commit's call failed on {what} ({theirs['raised'][0]})", []
    mine = cand.call(inputs, limit_s, tolerate=True)
    if mine["raised"][0]:
        return "differs", [f"on {what} the working tree's call failed ({mine['raised'][0]}); the frozen "
                           "commit's returned"]
    bad = [c for c in compare_values(theirs["outputs"][0], mine["outputs"][0], tolerances, "output")
           if not c.passed]
    if bad:
        return "differs", [f"on {what} the outputs differ from the frozen commit's ({bad[0].message}), though they "
                           "match on the workload's own inputs"]
    return f"matched on {what}", []


def replay_test_calls(session: Session, found: Differential, test_calls: Mapping[str, Any] | None,
                      limit_s: float) -> Differential:
    """``found`` with the frozen tests' own calls (``judge.testcalls``, the contract's ``test_calls``) replayed in
    both workers, where no test is the caller: one failed check per output out of the entry's tolerances, or input
    written by the candidate only, named by function and test; the calls counted per function in
    ``found.replayed``. A payload that does not match its digest is a failed check (the contract was edited)."""
    from ascendopt.judge import testcalls
    from ascendopt.judge.evidence import compare_values
    from ascendopt.judge.result import Check

    if not test_calls:
        return found
    try:
        calls = testcalls.decode_calls(test_calls)
    except ValueError as exc:
        found.checks.append(Check("the frozen tests' calls", False, f"the frozen tests' calls: {exc}"))
        return found
    base, cand = session.worker("baseline"), session.worker("candidate")
    tolerances = test_calls.get("tolerances")
    for key, group in testcalls.groups(calls).items():
        theirs, mine = testcalls.replay(base, key, group, limit_s), testcalls.replay(cand, key, group, limit_s)
        for call, b, c, b_after, c_after in zip(group, theirs["outputs"], mine["outputs"], theirs["inputs"],
                                                mine["inputs"], strict=True):
            label = f"{key} on the arguments of {call['test']}"
            found.checks += compare_values(b, c, tolerances, f"{label}: output")
            base_writes = testcalls.written(call, b_after)
            found.checks += [Check(f"{label}: {name}", False, f"{label}: {message} (the frozen commit does not write "
                                   "it)") for name, message in testcalls.written(call, c_after).items()
                             if name not in base_writes]
            if base_writes:  # what the frozen commit writes into its arguments must match
                found.checks += compare_values(b_after, c_after, tolerances, f"{label}: arguments after the call")
        found.replayed[key] = len(group)
    return found


def trees_changed(session: Session) -> list[str]:
    """What changed in the recorded trees of ``session`` (every side but the working tree: the frozen commit, a
    kept round) since their folders were verified, and every file a started worker of theirs compiled from bytes
    other than the commit's: a candidate that rewrote the baseline's copy of its code while it loaded, or at any
    time since. Called after the code under test has run beside them and before a number of theirs is used."""
    from ascendopt.judge.worktrees import changed, source_digests

    problems: list[str] = []
    for side, tree in session.trees.items():
        if side == "candidate":
            continue
        what = changed(tree)
        if what:
            problems.append(f"the {side} commit's folder was changed while the code under test ran: {what}")
        if side in session._ready:
            expected = source_digests(tree)
            for path, digest in sorted(session.workers[side].loaded().items()):
                if path in expected and expected[path] != digest:
                    problems.append(f"the {side} worker compiled {os.path.relpath(path, tree)} from bytes that are "
                                    "not the commit's (the file was changed while it loaded)")
    return problems


def _module_writes(reply: Mapping[str, Any]) -> dict[str, str]:
    """The module-level inputs one call wrote in place (``interleave._Child.call`` without inputs)."""
    import torch

    from ascendopt.judge.equivalence import input_writes

    before = {k: v for k, v in reply["before"].items() if isinstance(v, torch.Tensor)}
    after = {k: v for k, v in reply["inputs"].items() if isinstance(v, torch.Tensor)}
    changed = input_writes(before, {k: after[k] for k in before if k in after})
    changed.update({k: f"{k}: not handed back as a plain tensor after the call" for k in before if k not in after})
    return changed


def secrets_seed() -> int:
    """A seed for ``inputs(seed)`` from the operating system's random source: no worker can predict it."""
    import secrets

    return secrets.randbits(62)
