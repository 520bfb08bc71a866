"""Own-code workloads in worker processes, seen from the parent: ``_Child`` starts one isolated worker
(``judge.worker``: protocol and isolation there) rooted at a source tree and talks to it; ``judge.engine``
builds verdicts from them (one warm worker per tree, the parent's clock, the audit).

Why worker processes: the baseline (the frozen commit, read from git into a verified folder, ``judge.worktrees``) and
the working tree define the same module names, so they cannot share one interpreter; a workload
can hang or crash the interpreter, which must end the command with a named stage, not hang it or
take it down; and what decides a verdict (the clock above all) must be out of the candidate's reach.

Every worker runs in its own session and every request has a deadline: on expiry the worker's process
group is killed (compiler workers go with it) and ``ProcessTimeout`` names the side (baseline, best or
candidate), the phase and the limit. A workload that raises, or a worker that dies, is a
``WorkloadError`` naming the side and the workload's ``file:line``. A worker started with ``--seed``
(all of the engine's) seeds ``random``, numpy and torch with 0 before the module code runs, so inputs
drawn without a seed are the same on both sides. A worker whose environment carries
``judge.autotune_pin.PIN_ENV`` (``optimize-round --auto`` on own code) pins one ``@triton.autotune`` config of
the named kernel before the module code runs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ascendopt.collect.workload import WorkloadFailure
from ascendopt.contract.model import DEFAULT_TIMEOUTS
from ascendopt.errors import CorrectnessError, EnvironmentProblem, ExitCode
from ascendopt.process import Escapes, ProcessTimeout, disown, kill_group, own

# The sides whose tree is a recorded commit (no code under test): their workers close their memory to other
# processes of the user (``judge.worker``), so the candidate's cannot write a trusted side's state
TRUSTED_SIDES = ("baseline", "best", "repeat")
# How often the parent looks at a worker it waits for: one stopped by another process is continued (and counted)
WAKE_S = 1.0
# the judge's stop of a worker at its reply (``_Child._read_stopped``) must complete within this, or is tried again
STOP_WAIT_S = 1.0
STOP_ATTEMPTS = 3
# A batch's inputs are handed to the workers as bytes up to this size; above it (large device tensors, where
# moving them through the parent would cost more than the timing) each worker makes them from the batch's seeds.
TRUSTED_INPUT_BYTES = 256 * 2**20
# A timed batch whose outputs total at most this many bytes hands every output to the parent in full after the
# batch; a larger one hands a fingerprint of each and one call, drawn by the parent after the batch, in full.
FULL_OUTPUT_BYTES = 64 * 2**20
# the harness's own start in a worker (Python, torch, ascendopt), before the workload's module code and
# its limit: generous, since it is not the code under test, but bounded like everything else
HARNESS_START_S = 120.0
# On the cpu backend every worker computes on one thread (OpenMP, MKL and OpenBLAS pools), unless the user
# set any of these variables (then the user's settings are the workers'). The sides share the host's cores
# with each other and the judge, and a parallel region waits for its slowest thread: one preempted thread
# stalls a whole call. On the 2-core CPU machine the gate's A/A noise band was ±10-12 % at two threads and
# ±3.5-3.9 % at one (benchmarks/RESULTS.md). A cpu verdict compares the sides; it is not the host's
# multi-core throughput.
CPU_WORKER_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# A timed batch keeps every call's inputs and outputs alive until its outputs are fingerprinted (each call
# has its own inputs, and an output freed early could be reused by the next call's): the calls of a batch are
# capped so that what they hold stays under this many bytes (device memory on a device backend).
MAX_BATCH_BYTES = 4 * 2**30


class WorkloadError(CorrectnessError):
    """The workload raised in its child process, or the child died (exit 1: the code under test is
    broken, as a failing test is). The message names the side, the phase and ``file:line``."""


class WorkloadTampering(WorkloadError):
    """The code under test undid a defence of the judge in its worker (``judge.sources``): exit 3, the
    verdict cannot be trusted."""

    exit_code = ExitCode.INTEGRITY


# What a workload that raised, died or hung ends with (a check in the parent, a child's error, a
# limit): the gate turns each into a red stage, freeze into a refusal.
FAILURES = (WorkloadError, WorkloadFailure, ProcessTimeout)


def load_workload(path: Path) -> Callable[[], Any]:
    """Run the exec-file's module code once and return its ``workload()`` (called once per step).

    Same semantics and ``file:line`` errors as ``ascendopt collect --exec-file``.
    """
    from ascendopt.collect.workload import check_exec_file, load_exec_file

    return load_exec_file(check_exec_file(path))


# -- the parent side -------------------------------------------------------------------------------


class Phase:
    """A named stretch of work under one time limit, counted from its start (seconds)."""

    def __init__(self, name: str, limit_s: float):
        self.name = name
        self.limit_s = float(limit_s)
        self.start = time.monotonic()

    def left(self) -> float:
        return self.limit_s - (time.monotonic() - self.start)


class _Child:
    """One workload process rooted at ``tree`` (cwd and first on PYTHONPATH), in its own session;
    a ``bench.Side`` whose warmup and samples run in the child, each bounded by ``self.phase``.

    ``side``: "baseline", "best" or "candidate", named in every error. The child's stderr goes to a
    temporary file (a pipe nobody reads could fill and stall the workload); its last lines are
    quoted when the child fails.
    """

    on_kill: Callable[[], None] | None = None  # called after a timeout, an interrupt or its death killed it

    def __init__(self, tree: Path, exec_rel: str, side: str, *, seed: bool = False,
                 extra_env: Mapping[str, str] | None = None):
        from ascendopt.device import backends

        self.side = side
        self.exec_rel = exec_rel
        self.exec_file = (tree / exec_rel).resolve()
        self.phase = Phase("workload() calls", DEFAULT_TIMEOUTS["workload_s"])  # callers set their own
        # the child must run on the backend this process selected (cpu: in Triton's interpreter)
        env = backends.child_env(kernels=True)
        env.pop("PYTHONPATH", None)  # isolated mode ignores it anyway; the tree goes on sys.path explicitly
        # idle OpenMP threads sleep instead of spinning: a worker waiting for its next request takes no CPU
        # from the side being timed (the judge checks it, ``judge.engine``)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        if backends.current().name == "cpu" and not any(name in env for name in CPU_WORKER_THREADS):
            env.update(CPU_WORKER_THREADS)
        env.update(extra_env or {})
        paths = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])
        self.log = tempfile.TemporaryFile()
        self._buf = bytearray()
        self.rtt_ms = 0.0
        self.maker: _Child | None = None  # the worker that makes this one's inputs (None: itself)
        # the parent reads the timed outputs from the worker's memory itself (``_read_stopped``), until it cannot
        self.parent_reads = sys.platform.startswith("linux")
        self.reads_failed = ""  # why it could not, when it could not
        self.external_stops = 0  # times another process had stopped the worker (seen and continued by this one)
        # the other processes of the worker's tree and group, as the judge last saw them (``engine.Judged``): their
        # CPU in the untimed requests counts as the worker's
        self.helper_pids: set[int] = set()
        self.reader = ""  # how the worker reads device memory (``judge.payload.RawReader.through``)
        self.output_bytes = 0  # bytes of one call's outputs (the largest warm-up call's)
        self.input_bytes = 0  # bytes of one call's inputs (the largest warm-up call's)
        self.seeded_batches = 0  # batches whose inputs were too large to hand over (``inputs_blob``)
        self.readings: list[dict[str, Any]] = []
        self.has_inputs = False
        self.takes_shape = False  # inputs(seed, shape): the workload makes the inputs of any shape of a mix
        self.profiled = False  # a profiled call was made (``kernel_census``): it changes what follows
        self.call_bytes = 0  # bytes of one call's inputs and outputs (the largest warm-up call's)
        self._bound = False
        argv = [sys.executable, "-I", "-m", "ascendopt.judge.worker", str(self.exec_file)]
        argv += [a for p in paths for a in ("--path", p)] + (["--seed"] if seed else [])
        argv += ["--private"] if side in TRUSTED_SIDES else []
        self.proc = subprocess.Popen(argv,
                                     cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, limit_s: float) -> None:
        """Wait for the harness to start in the worker (importing torch: at most ``HARNESS_START_S``), then
        (at most ``limit_s``) for the module code to run and the worker to say it is ready."""
        if not self._bound:
            bound = self.ask(None, Phase("harness start-up (importing torch)", max(HARNESS_START_S, limit_s)))
            self.reader = str(bound.get("reader", ""))
            self._bound = True
        ready = self.ask(None, Phase("module code", limit_s))
        self.has_inputs = bool(ready.get("inputs"))
        self.takes_shape = bool(ready.get("shapes"))

    def calibrate(self, requests: int = 15) -> float:
        """The round trip of a request that does nothing, in ms (the median of ``requests``): what the
        parent's reading of a timed batch includes besides the batch."""
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            self.ask({"cmd": "null"})
            times.append((time.perf_counter() - t0) * 1e3)
        self.rtt_ms = sorted(times)[len(times) // 2]
        return self.rtt_ms

    def inputs_blob(self, calls: int, shape: list[list[int]] | None = None) -> bytes | dict[str, Any] | None:
        """The input sets of ``calls`` calls: made by ``self.maker`` (the trusted maker: a worker of the frozen
        tree; None: this worker) from seeds drawn now from the operating system's random source and handed over
        as bytes, so no worker can know them before it gets them; None when the workload has no ``inputs(seed)``.
        When they would exceed ``TRUSTED_INPUT_BYTES`` (large device tensors), ``{"seeds", "shape"}`` instead:
        each worker makes the sets itself from seeds it gets only with the batch (``seeded_batches`` counts
        them); their outputs are compared with the frozen commit's for the same seeds all the same."""
        maker = self.maker or self
        if not self.has_inputs or not maker.has_inputs:
            return None
        seeds = [secrets.randbits(62) for _ in range(calls)]
        if self.input_bytes * calls > TRUSTED_INPUT_BYTES:
            self.seeded_batches += 1
            return {"seeds": seeds, "shape": shape}
        return maker.make(seeds, shape)

    def make(self, seeds: list[int], shape: list[list[int]] | None = None) -> bytes:
        """``inputs(seed)`` (``inputs(seed, shape)`` for a ``shape``) of each of ``seeds``, made in this worker
        and returned as a payload (``judge.payload``)."""
        msg: dict[str, Any] = {"cmd": "make", "seeds": seeds}
        if shape is not None:
            msg["shape"] = shape
        return self.ask_blob(msg)[1]

    def batch(self, calls: int, inputs: bytes | dict[str, Any] | None, audit: int = 0, full: bool = True
              ) -> dict[str, Any]:
        """One timed batch of ``calls`` calls on the input sets ``inputs`` (a payload; None: the workload's
        own inputs): prepared first (not timed), then started by the parent and timed by its clock from
        outside, then its outputs read from the worker: every call's in full (``full``), else a fingerprint of
        each and the ``audit`` call's in full; the parent names ``audit`` only after the batch's reply.
        -> ``{"parent": ms per call (the round trip subtracted), "worker": the worker's own ms per call,
        "calls", "full", "audit", "outputs": the decoded outputs (full: one per call; else the audited one),
        "prints": fingerprints (not full), "untimed_ms": the parent's wall time of the prepare and check
        requests, "untimed_waited_ms": the part of it the worker's main thread or this thread waited on a run
        queue (``_waited``), "waited": ms per call the worker's most delayed thread waited on a run queue in the
        whole batch, its requests included (what the parent's clock may have waited for; None: unreadable),
        "inputs_written", "inputs_after": the input sets as the calls left them, where they wrote any (compared
        with the reference side's, then let go), "batch_ms": the parent's wall time of the whole batch,
        "judge_waited": ms per call this thread (the judge's clock) waited on a run queue in the timed window (None:
        unreadable),
        "throttled_ms": what the CPU quotas of the worker's and this process's control groups held them back in it
        (None: unreadable)}``."""
        from ascendopt.judge.evidence import input_writes
        from ascendopt.judge.payload import decode, readable
        from ascendopt.process import cpu_stat_files, most_waited_ms, throttled_ns

        groups = sorted(set(cpu_stat_files(self.proc.pid)) | set(cpu_stat_files(os.getpid())))
        held = throttled_ns(groups)
        marks = [self._sched()]
        t0 = time.perf_counter()
        if isinstance(inputs, dict):
            self.ask({"cmd": "prepare", "calls": calls, **inputs})
        else:
            self.ask({"cmd": "prepare", "calls": calls}, blob=inputs)
        prepared = time.perf_counter()
        marks.append(self._sched())
        reply = self.ask({"cmd": "go"})
        wall_ms = (time.perf_counter() - prepared) * 1e3
        t1 = time.perf_counter()
        marks.append(self._sched())
        # a stop and continue by another process in the timed window is reported until this parent's own stop
        # of the worker below replaces it: looked for first
        self._look_for_stops()
        described = reply.get("out")
        if not isinstance(described, dict) or "ms" not in reply:
            self._kill()
            raise WorkloadTampering(f"{self.side}: the reply to a timed batch is not the judge's worker's (it "
                                    "describes no outputs): the code under test wrote to the protocol pipe")
        outputs = None
        written: list[str] | None = None
        inputs_after = None
        if self.parent_reads and isinstance(described, dict) and readable(described):
            after = reply.get("in") if isinstance(inputs, bytes) else None
            got = self._read_stopped(described if full else _one_call(described, audit),
                                     after if isinstance(after, dict) and readable(after) else None)
            if got is not None:
                outputs, inputs_after = got
                if inputs_after is not None:
                    written = sorted(input_writes(decode(inputs), inputs_after))
        if outputs is not None:
            checked = {"outputs": None} if full else self.ask({"cmd": "check", "audit": -1})
        else:
            checked, blob = self.ask_blob({"cmd": "check", "full": full, "audit": audit})
            outputs = decode(blob)
        t2 = time.perf_counter()
        marks.append(self._sched())
        held_after = throttled_ns(groups)
        self._look_for_stops()
        return {"parent": max((wall_ms - self.rtt_ms) / calls, 1e-9), "worker": float(reply["ms"]),
                "batch_ms": (t2 - t0) * 1e3,
                "judge_waited": _per_call((marks[2][1] - marks[1][1]) / 1e6, calls)
                if marks[1][1] is not None and marks[2][1] is not None else None,
                "throttled_ms": (held_after - held) / 1e6 if held is not None and held_after is not None else None,
                "calls": calls, "full": full, "audit": audit, "outputs": outputs,
                "prints": checked["outputs"], "untimed_ms": ((prepared - t0) + (t2 - t1)) * 1e3,
                "waited": _per_call(most_waited_ms(marks[0][0], marks[3][0]), calls),
                "untimed_waited_ms": self._waited(marks[0], marks[1]) + self._waited(marks[2], marks[3]),
                **_run_ms(marks),
                "inputs_written": written, "inputs_after": inputs_after if written else None}

    def _sched(self) -> tuple[Any, int | None, dict[int, Any]]:
        """The worker's ``process.schedstats``, this thread's ``process.own_wait_ns`` and the ``schedstats`` of the
        worker's other processes (``helper_pids``), read together."""
        from ascendopt.process import own_wait_ns, schedstats

        return schedstats(self.proc.pid), own_wait_ns(), {pid: schedstats(pid) for pid in self.helper_pids}

    def _waited(self, before: tuple[Any, int | None, Any], after: tuple[Any, int | None, Any]) -> float:
        """ms the worker's main thread (less what its other threads ran: ``process.excused_wait_ms``) or this
        thread, whichever waited longer, waited on a run queue between two ``_sched`` readings: a loaded host's
        share of an untimed request's wall time."""
        from ascendopt.process import excused_wait_ms

        mine = (after[1] - before[1]) / 1e6 if before[1] is not None and after[1] is not None else 0.0
        # the larger, not the sum: the two threads may have waited at the same time
        return max(excused_wait_ms(before[0], after[0], self.proc.pid), mine, 0.0)

    def stopped_by_others(self) -> bool:
        """Whether another process stopped the worker (SIGSTOP, SIGTSTP) since this parent last looked: still
        stopped (then continued here), or stopped and already continued again by that process. These are the
        reports a parent gets from ``waitpid`` with ``WUNTRACED | WCONTINUED``; those of this parent's own stop and
        continue (``_read_stopped``, ``_continue``) are taken as they happen, so they are not counted."""
        if not sys.platform.startswith("linux"):
            return False
        try:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            return False
        if pid == 0:
            return False
        if os.WIFCONTINUED(status):  # stopped and continued again by another process since the last look
            return True
        if not os.WIFSTOPPED(status):  # it ended: keep its status for the error its next request raises
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            return False
        self._continue()
        return True

    def _continue(self) -> None:
        """Continue the worker's process group, and take the report of that continue at once (only another
        process's stop or continue is left for ``stopped_by_others`` to see)."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGCONT)
        if not sys.platform.startswith("linux"):
            return
        try:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG | os.WCONTINUED)
        except ChildProcessError:
            return
        if pid and not os.WIFCONTINUED(status) and not os.WIFSTOPPED(status):
            self.proc.returncode = os.waitstatus_to_exitcode(status)

    def _look_for_stops(self) -> None:
        """Count a stop by another process since the last look (``stopped_by_others``), continuing the worker."""
        if self.stopped_by_others():
            self.external_stops += 1

    def _read_stopped(self, described: dict[str, Any], inputs: dict[str, Any] | None = None) -> Any:
        """The outputs ``described`` (``judge.payload.describe``) read by this process from the worker's memory
        while the worker's process group is stopped (SIGSTOP at its reply, SIGCONT after): none of its code runs
        between its reply and the read, so what is read is what it delivered when the clock stopped. None (and
        ``parent_reads`` off for the rest of the command) where the memory cannot be read (not Linux, or
        ``process_vm_readv`` refused): then the worker reads them itself (``check``), a weaker second line.
        ``inputs``: the batch's input sets ``describe``d too, read in the same stop -> ``(outputs, inputs)``."""
        from ascendopt.judge.payload import PayloadError, decode, fetch

        pid = self.proc.pid  # the worker leads its own session, so its process group is its pid
        for attempt in range(STOP_ATTEMPTS):
            try:
                os.killpg(pid, signal.SIGSTOP)
            except OSError:
                self.parent_reads = False
                return None
            if self._stopped_within(STOP_WAIT_S):
                break
            # a stop that does not complete: a thread of the worker waits for a child it started with vfork,
            # which the same stop halted before its exec. Continued, and stopped again a moment later.
            self._continue()
            time.sleep(0.01 * (attempt + 1))
        else:
            raise WorkloadError(f"{self.side}: its process did not stop for the judge to read its timed outputs "
                                f"({STOP_ATTEMPTS} tries of {STOP_WAIT_S:g} s: a thread held in the kernel)")
        try:
            try:
                return decode(fetch(pid, described)), (decode(fetch(pid, inputs)) if inputs is not None else None)
            except PayloadError as exc:
                # only a refusal of the reading itself (no permission: a host that forbids it) hands the reads to
                # the worker; memory the worker described that cannot be read (unmapped, protected) is its doing
                if exc.errno in (errno.EPERM, errno.EACCES, errno.ENOSYS) and not self.readings:
                    self.reads_failed = str(exc)
                    self.parent_reads = False
                    return None
                raise WorkloadError(f"{self.side}: its timed outputs could not be read: {exc}") from None
        finally:
            self._continue()

    def _stopped_within(self, wait_s: float) -> bool:
        """Whether the worker, just sent SIGSTOP, reports itself stopped within ``wait_s`` (``waitpid`` polled; a
        blocking wait could last for ever). A worker that ended instead raises its error."""
        deadline = time.monotonic() + wait_s
        while True:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG | os.WUNTRACED)
            if pid:
                if os.WIFSTOPPED(status):
                    return True
                self.proc.returncode = os.waitstatus_to_exitcode(status)  # it died: keep its status for the error
                raise self._died(self.phase)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)

    def call(self, inputs: bytes | None, limit_s: float, function: str | None = None, tolerate: bool = False
             ) -> dict[str, Any]:
        """Untimed calls for the differential check within ``limit_s``: one per input set of ``inputs`` (a
        payload), or, with None, one on the workload's own inputs. -> ``{"outputs": [value per call],
        "inputs": [input set per call, after the call]}`` decoded, and, for the workload's own inputs,
        ``"before"``: them before the call. ``function`` (``"module:qualname"``): that function of the tree is
        called instead of ``workload``, each input set an ``[args, kwargs]`` pair (``judge.testcalls``).
        ``tolerate``: a call that raises does not end the worker; ``"raised"`` then holds each call's message
        (None: it returned)."""
        from ascendopt.judge.payload import decode

        request = {"cmd": "call", **({"function": function} if function else {}), **({"tolerate": True} if tolerate
                                                                                      else {})}
        what = f"{function} on the frozen tests' arguments" if function else "workload() checked calls"
        reply, blob = self.ask_blob(request, Phase(what, limit_s), blob=inputs)
        if "before" not in reply:
            found = decode(blob)
            if tolerate:
                raised = reply.get("raised")
                if not isinstance(raised, list) or len(raised) != len(found["outputs"]):
                    raise WorkloadTampering(f"{self.side}: the reply to the value probe is not the judge's worker's "
                                            "(no message per call): the code under test wrote to the protocol pipe")
                found["raised"] = [None if r is None else str(r) for r in raised]
            return found
        cut = int(reply["before"])
        return {**decode(blob[cut:]), "before": decode(blob[:cut])}

    def probe(self, shapes: list[list[list[int]]], limit_s: float) -> list[str]:
        """For each of ``shapes``, why ``inputs(seed, shape)`` cannot make it ("" when it can), within ``limit_s``."""
        reply = self.ask({"cmd": "probe", "shapes": shapes}, Phase("inputs(seed, shape) of the shape mix", limit_s))
        return [str(e) for e in reply["errors"]]

    def loaded(self) -> dict[str, str]:
        """Every file of the trees this worker compiled from source: real path -> sha256 of the bytes it
        compiled (``judge.sources.loaded``)."""
        return dict(self.ask({"cmd": "loaded"})["loaded"])

    def ask(self, msg: dict[str, Any] | None, phase: Phase | None = None, blob: bytes | None = None
            ) -> dict[str, Any]:
        """Send ``msg`` (None: only read) with ``blob`` after it, and return the reply, within ``phase``
        (default ``self.phase``)."""
        return self.ask_blob(msg, phase, blob)[0]

    def ask_blob(self, msg: dict[str, Any] | None, phase: Phase | None = None, blob: bytes | None = None
                 ) -> tuple[dict[str, Any], bytes]:
        """``ask``, and the bytes the reply carries (``nbytes`` after its line; b"" when none)."""
        phase = phase or self.phase
        assert self.proc.stdin is not None
        try:
            if msg is not None:
                if blob is not None:
                    msg = {**msg, "nbytes": len(blob)}
                self._send((json.dumps(msg) + "\n").encode() + (blob or b""), phase)
            line = self._read_line(phase)
        except BrokenPipeError:
            line = b""
        except BaseException:  # an interrupt (or a timeout): nothing of the child may be left running
            self._kill()
            raise
        if not line:
            raise self._died(phase)
        reply = json.loads(line)
        if "error" in reply:
            self.close()
            if reply.get("exit_code") == int(ExitCode.ENVIRONMENT):
                raise EnvironmentProblem(f"{self.side}: {reply['error']}")
            if reply.get("exit_code") == int(ExitCode.INTEGRITY):
                raise WorkloadTampering(f"{self.side}: {reply['error']} ({phase.name})")
            raise WorkloadError(f"{self.side}: {reply['error']} ({phase.name})")
        data = b""
        if "nbytes" in reply:
            try:
                data = self._read_exact(int(reply["nbytes"]), phase)
            except BaseException:
                self._kill()
                raise
        return reply, data

    def _read_line(self, phase: Phase) -> bytes:
        """One line from the child's stdout, b"" at its end; ProcessTimeout once ``phase`` is over."""
        self._fill(lambda: b"\n" in self._buf, phase)
        if b"\n" not in self._buf:
            return b""
        at = self._buf.index(b"\n")
        line = bytes(self._buf[:at])
        del self._buf[:at + 1]
        return line

    def _read_exact(self, n: int, phase: Phase) -> bytes:
        """``n`` bytes from the child's stdout; WorkloadError when it ends first."""
        self._fill(lambda: len(self._buf) >= n, phase)
        if len(self._buf) < n:
            raise self._died(phase)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _send(self, data: bytes, phase: Phase) -> None:
        """Write ``data`` to the child's stdin within ``phase``: without blocking, so that a worker that reads no
        more (stopped by another process, or stuck) ends in ProcessTimeout, never in a hang of the judge."""
        assert self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_WRITE)
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    self._wait(sel, phase)

    def _wait(self, sel: selectors.BaseSelector, phase: Phase) -> bool:
        """Wait up to ``WAKE_S`` for the worker's pipe in ``sel`` -> whether it is ready. ProcessTimeout once
        ``phase`` is over; a worker another process stopped (SIGSTOP), which neither reads nor replies, is counted
        and continued."""
        left = phase.left()
        if left <= 0:
            self._kill()
            raise ProcessTimeout(f"{self.side}: {self.exec_rel} {phase.name}", phase.limit_s,
                                 output="\n".join(self._tail()))
        if sel.select(min(left, WAKE_S)):
            return True
        self._look_for_stops()
        return False

    def _fill(self, enough: Callable[[], bool], phase: Phase) -> None:
        """Read the child's stdout into the buffer until ``enough()`` or its end; ProcessTimeout once
        ``phase`` is over."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not enough():
                if not self._wait(sel, phase):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return
                self._buf += chunk

    def _tail(self, lines: int = 20) -> list[str]:
        """The last lines the child wrote to stderr."""
        self.log.flush()
        size = self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, size - 65536))
        text = self.log.read().decode("utf-8", errors="replace")
        return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]

    def _died(self, phase: Phase) -> WorkloadError:
        """The child ended without a reply: its exit status, the workload's line, its last stderr lines."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self.proc.returncode
        tail = self._tail()
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit {code}"
        lines = re.findall(rf'File "{re.escape(str(self.exec_file))}", line (\d+)', "\n".join(tail))
        where = f"{self.exec_file}:{lines[-1]}" if lines else str(self.exec_file)
        last = " | ".join(tail[-3:]) or "no output"
        self._kill()
        return WorkloadError(f"{self.side}: {where}: the workload process died ({how}) during {phase.name}: {last}")

    def warmup(self, count: int, min_ms: float, shape: list[list[int]] | None = None) -> float:
        """At least ``count`` calls and ``min_ms`` of the parent's time, one call a batch (the round trip
        calibrated first), each on fresh inputs (of ``shape``: ``inputs(seed, shape)``); -> ms per call by the
        parent's clock. Learns ``call_bytes`` and ``output_bytes`` (the largest call's)."""
        from ascendopt.judge.payload import decode

        if not self.rtt_ms:
            self.calibrate()
        t0, n = time.perf_counter(), 0
        per_call = []
        while n < count or (time.perf_counter() - t0) * 1e3 < min_ms:
            inputs = self.inputs_blob(1, shape)
            reading = self.batch(1, inputs)
            per_call.append(reading["parent"])
            self.output_bytes = max(self.output_bytes, payload_bytes(reading["outputs"]))
            made = payload_bytes(decode(inputs)) if isinstance(inputs, bytes) else 0
            self.input_bytes = max(self.input_bytes, made)
            self.call_bytes = max(self.call_bytes, made + self.output_bytes)
            n += 1
            if n > 10_000:
                break
        return sorted(per_call)[len(per_call) // 2]

    def full_outputs(self, calls: int) -> bool:
        """Whether a batch of ``calls`` calls hands every output over in full (at most ``FULL_OUTPUT_BYTES``),
        rather than a fingerprint of each and one audited call in full."""
        return self.output_bytes * calls <= FULL_OUTPUT_BYTES

    def sample(self, calls: int, inputs: bytes | dict[str, Any] | None = None, audit: int | None = None,
               full: bool | None = None) -> float:
        """One timed batch (``batch``) on ``inputs`` (default: fresh ones, ``inputs_blob``), the audited call
        ``audit`` (default: drawn now); its reading kept in ``readings``; -> the parent's ms per call (the
        number the verdict is taken on)."""
        if inputs is None:
            inputs = self.inputs_blob(calls)
        if audit is None:
            audit = secrets.randbelow(calls)
        reading = self.batch(calls, inputs, audit, self.full_outputs(calls) if full is None else full)
        self.readings.append(reading)
        return reading["parent"]

    def kernel_census(self, limit_s: float) -> dict[str, Any]:
        """The workload's kernel census (``kernel_hit.kernel_census`` of one call after a warm one, in the
        worker, passed on as it returned it) within ``limit_s``."""
        census = dict(self.ask({"cmd": "kernels"}, Phase("workload() kernel-hit calls", limit_s))["census"])
        self.profiled = True
        return census

    def kernels(self, limit_s: float) -> list[str]:
        """The kernel names of ``kernel_census``, longest device time first."""
        from ascendopt.judge.kernel_hit import census_names

        return census_names(self.kernel_census(limit_s))

    def measure(self, limit_s: float, repeats: int = 30, warmup: int = 5, warmup_ms: float = 25.0,
                min_sample_ms: float = 1.0, shape: list[list[int]] | None = None):
        """The workload timed alone by the parent's clock (freeze's baseline), within ``limit_s``:
        warm-up, then ``repeats`` batches -> ``bench.Timing``; the readings stay in ``readings``. ``shape``: on
        inputs ``inputs(seed, shape)`` (a bucket of the shape mix)."""
        from ascendopt.judge import bench

        saved, self.phase = self.phase, Phase("workload() timing", limit_s)
        try:
            calls = batch_calls(self.warmup(warmup, warmup_ms, shape), min_sample_ms, self.call_bytes)
            samples = [self.sample(calls, self.inputs_blob(calls, shape) if shape is not None else None)
                       for _ in range(repeats)]
        finally:
            self.phase = saved
        return bench.summarize(samples, calls)

    def outputs(self, path: Path, limit_s: float) -> dict[str, Any]:
        """One call of ``workload()`` within ``limit_s``; the tensors it returned are saved to ``path``
        (``judge.equivalence.call_and_save``, whose reply this returns)."""
        return self.ask({"cmd": "outputs", "path": str(path)}, Phase("workload() output call", limit_s))

    def modules(self, limit_s: float) -> list[str]:
        """The files (absolute paths) of every module the worker loaded: the workload's module code and its
        calls so far (one call first when none was made), within ``limit_s``."""
        return list(self.ask({"cmd": "modules"}, Phase("workload() imports", limit_s))["files"])

    def close(self) -> None:
        """Kill the worker's process group (whatever the workload started goes too): a worker keeps
        nothing worth a clean exit, and tearing down its interpreter can take seconds."""
        kill_group(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout, self.log):
            with contextlib.suppress(OSError):
                stream.close()

    def _kill(self) -> None:
        """Kill the worker's process group on a timeout, an interrupt or its death, then ``on_kill``."""
        kill_group(self.proc)
        if self.on_kill is not None:
            self.on_kill()


def _one_call(described: dict[str, Any], k: int) -> dict[str, Any]:
    """The ``describe``d outputs of a batch (a list, one value per call) cut to call ``k`` alone, as a list of one."""
    calls = described["tree"].get("l", [])
    if not 0 <= k < len(calls):
        return {"tree": {"l": []}, "places": []}
    used: list[int] = []

    def renumber(node: Any) -> Any:
        if isinstance(node, dict) and "t" in node:
            used.append(int(node["t"]))
            return {"t": len(used) - 1}
        if isinstance(node, dict):
            return {key: renumber(value) for key, value in node.items()}
        if isinstance(node, list):
            return [renumber(value) for value in node]
        return node

    tree = {"l": [renumber(calls[k])]}
    return {"tree": tree, "places": [described["places"][i] for i in used]}


def payload_bytes(value: Any) -> int:
    """Bytes of the tensors in a decoded payload (``judge.payload.decode``), nested."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(payload_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(payload_bytes(v) for v in value.values())
    return 0


def batch_calls(per_call_ms: float, min_sample_ms: float, call_bytes: int) -> int:
    """Calls in one timed batch: enough to last ``min_sample_ms`` (``bench.calls_per_sample``), no more than
    keep ``MAX_BATCH_BYTES`` of inputs and outputs (``call_bytes`` a call) alive, at least one."""
    from ascendopt.judge import bench

    calls = bench.calls_per_sample(per_call_ms, min_sample_ms)
    return max(1, min(calls, MAX_BATCH_BYTES // call_bytes)) if call_bytes > 0 else calls


def contain(child: _Child, escapes: Escapes) -> Callable[[], None]:
    """Own ``child`` (``process.OWNED``: a sweep leaves its tree alone while it serves) and have a kill on a
    timeout, an interrupt or its death sweep ``escapes`` (what escaped its group goes at once, not only
    at the end) -> the function that closes it: kills its group, disowns it, sweeps."""
    def release() -> None:
        disown(child.pid)
        escapes.sweep()

    def close() -> None:
        try:
            child.close()
        finally:
            release()

    own(child.pid)
    child.on_kill = release
    return close


def _run_ms(marks: list[tuple[Any, int | None, dict[int, Any]]]) -> dict[str, float]:
    """``{"untimed_run_ms": CPU ms the worker's threads, and its other processes, ran in the untimed requests}`` from
    a batch's four ``_Child._sched`` readings (around the prepare and around the output hand-over); empty where the
    worker's were unreadable."""
    from ascendopt.process import run_ms

    total = 0.0
    for before, after in ((marks[0], marks[1]), (marks[2], marks[3])):
        mine = run_ms(before[0], after[0])
        if mine is None:
            return {}
        total += mine + sum(run_ms(before[2].get(pid), stats) or 0.0 for pid, stats in after[2].items())
    return {"untimed_run_ms": total}


def _per_call(ms: float | None, calls: int) -> float | None:
    return ms / calls if ms is not None and calls > 0 else None


@contextlib.contextmanager
def workload_process(tree: Path, exec_rel: str, side: str, *, load_s: float, seed: bool = False,
                     extra_env: Mapping[str, str] | None = None) -> Iterator[_Child]:
    """A ready child running ``<tree>/<exec_rel>`` (module code done within ``load_s`` seconds; ``seed``:
    seeded first, see the module docstring; ``extra_env``: more environment, e.g. ``tune.autotune``'s
    pin); closed on exit, with its process group and every process it started that escaped the group
    (``process.Escapes``)."""
    escapes = Escapes()
    child = _Child(tree, exec_rel, side, seed=seed, extra_env=extra_env)
    close = contain(child, escapes)
    try:
        child.start(load_s)
        yield child
    finally:
        close()
