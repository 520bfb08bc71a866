"""Own-code workloads in child processes: the kernel-hit call, the freeze baseline, and interleaved
timing of the same workload in several source trees, one child process per tree (the gate: frozen
commit and working tree; a round: baseline, best kept commit and working tree).

Why child processes: the baseline (the frozen commit, checked out in a temporary git worktree) and
the working tree define the same module names, so they cannot share one interpreter; and a workload
can hang or crash the interpreter, which must end the command with a named stage, not hang it or
take it down. The parent keeps the measurement core's discipline anyway: all children warm up, use
one batch size, and take samples in rotating order (AB BA, ABC CBA) so slow drift of clocks and
temperature cancels in the pairs that ``bench.decide`` judges.

Every child runs in its own session and every request has a deadline: on expiry the child's process
group is killed (compiler workers go with it) and ``ProcessTimeout`` names the side (baseline,
best or candidate), the phase and the limit. A workload that raises, or a child that dies, is a
``WorkloadError`` naming the side and the workload's ``file:line``.

Child protocol (one JSON object per line; the child's own stdout is redirected to stderr so a
workload's prints cannot corrupt it): after the module code ran the child says ``{"ready": true}``;
``{"cmd": "kernels"}`` -> ``{"seen": [names], "census": {...}}`` (``kernel_hit.kernel_census``: a warm
call, then one profiled call); ``{"cmd": "warmup", "count", "min_ms"}`` -> ``{"per_call_ms"}``;
``{"cmd": "sample", "calls"}`` -> ``{"ms"}`` (per call); ``{"cmd": "measure", "repeats"}`` ->
``{"timing": bench.Timing as a dict}``; ``{"cmd": "outputs", "path"}`` -> one call whose returned tensors
are saved to ``path`` (``gate.equivalence.call_and_save``: ``{"returned", "outputs", "skipped",
"inputs_changed"}``); ``{"cmd": "exit"}``. A failure is answered ``{"error": message, "exit_code": N}``
and the child exits. A child started with ``--seed`` (those whose outputs are compared) seeds ``random``,
numpy and torch with 0 before the module code runs, so inputs drawn without a seed are the same on both
sides. A child whose environment carries ``tune.autotune.PIN_ENV`` (``optimize-round --auto`` on own code)
pins one ``@triton.autotune`` config of the named kernel before the module code runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ascendopt.collect.workload import WorkloadFailure
from ascendopt.contract.model import DEFAULT_TIMEOUTS
from ascendopt.errors import CorrectnessError, EnvironmentProblem, ExitCode
from ascendopt.process import ProcessTimeout, kill_group

MAX_NAMES = 200  # kernel names a child reports (longest total time first): enough for any match


class WorkloadError(CorrectnessError):
    """The workload raised in its child process, or the child died (exit 1: the code under test is
    broken, as a failing test is). The message names the side, the phase and ``file:line``."""


# What a workload that raised, died or hung ends with (a check in the parent, a child's error, a
# limit): the gate turns each into a red stage, freeze into a refusal.
FAILURES = (WorkloadError, WorkloadFailure, ProcessTimeout)


def load_workload(path: Path) -> Callable[[], Any]:
    """Run the exec-file's module code once and return its ``workload()`` (called once per step).

    Same semantics and ``file:line`` errors as ``ascendopt collect --exec-file``.
    """
    from ascendopt.collect.workload import check_exec_file, load_exec_file

    return load_exec_file(check_exec_file(path))


# -- the child -------------------------------------------------------------------------------------


def _seed() -> None:
    """Seed ``random``, numpy and torch (every device) with 0."""
    import random

    import torch

    random.seed(0)
    torch.manual_seed(0)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(0)


def _child_main(exec_file: str, seed: bool = False) -> None:
    import faulthandler

    from ascendopt.errors import AscendoptError, UsageError
    from ascendopt.tune.autotune import install_pin

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the workload prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    faulthandler.enable()  # a crash leaves the Python stack (with the workload's line) on stderr
    try:
        if seed:
            _seed()
        pin = install_pin()  # --auto on own code: one @triton.autotune config pinned (tune.autotune)
        fn = load_workload(Path(exec_file))
        if pin is not None and not pin.applied:
            raise UsageError(f"the workload's module code never decorated {pin.kernel} with @triton.autotune: "
                             "nothing was pinned")
        proto.write(json.dumps({"ready": True}) + "\n")
        _serve(fn, proto)
    except AscendoptError as exc:
        proto.write(json.dumps({"error": str(exc), "exit_code": int(exc.exit_code)}) + "\n")
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, with the traceback in the child's log
        traceback.print_exc()
        proto.write(json.dumps({"error": f"{type(exc).__name__}: {exc}", "exit_code": 70}) + "\n")
        sys.exit(1)


def _serve(fn: Callable[[], Any], proto) -> None:
    from ascendopt.device import backends
    from ascendopt.gate import bench

    backend = backends.current()
    run = bench.Sampler(lambda: fn(), None, backend)
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "kernels":
            from ascendopt.gate.kernel_hit import census_names, kernel_census

            census = kernel_census(fn)
            census["kernels"] = dict(list(census["kernels"].items())[:MAX_NAMES])
            reply: dict[str, Any] = {"seen": census_names(census), "census": census}
        elif msg["cmd"] == "warmup":
            reply = {"per_call_ms": run.warmup(int(msg["count"]), float(msg["min_ms"]))}
        elif msg["cmd"] == "sample":
            reply = {"ms": run.sample(int(msg["calls"]))}
        elif msg["cmd"] == "measure":
            reply = {"timing": bench.measure(lambda: fn(), backend=backend, repeats=int(msg["repeats"])).to_dict()}
        elif msg["cmd"] == "outputs":
            from ascendopt.gate.equivalence import call_and_save

            reply = call_and_save(fn, Path(msg["path"]), getattr(fn, "module_globals", {}))
        else:
            break
        proto.write(json.dumps(reply) + "\n")


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

    def __init__(self, tree: Path, exec_rel: str, side: str, *, seed: bool = False,
                 extra_env: Mapping[str, str] | None = None):
        from ascendopt.device import backends

        self.side = side
        self.exec_rel = exec_rel
        self.exec_file = (tree / exec_rel).resolve()
        self.phase = Phase("workload() calls", DEFAULT_TIMEOUTS["workload_s"])  # callers set their own
        # the child must run on the backend this process selected (cpu: in Triton's interpreter)
        env = backends.child_env(kernels=True)
        paths = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra_env or {})
        self.log = tempfile.TemporaryFile()
        self._buf = b""
        argv = [sys.executable, "-m", "ascendopt.gate.interleave", str(self.exec_file)] + (["--seed"] if seed else [])
        self.proc = subprocess.Popen(argv,
                                     cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, limit_s: float) -> None:
        """Wait (at most ``limit_s``) for the module code to run and the child to say it is ready."""
        self.ask(None, Phase("module code", limit_s))

    def ask(self, msg: dict[str, Any] | None, phase: Phase | None = None) -> dict[str, Any]:
        """Send ``msg`` (None: only read) and return the reply, within ``phase`` (default ``self.phase``)."""
        phase = phase or self.phase
        assert self.proc.stdin is not None
        try:
            if msg is not None:
                self.proc.stdin.write((json.dumps(msg) + "\n").encode())
                self.proc.stdin.flush()
            line = self._read_line(phase)
        except BrokenPipeError:
            line = b""
        except BaseException:  # an interrupt (or a timeout): nothing of the child may be left running
            kill_group(self.proc)
            raise
        if not line:
            raise self._died(phase)
        reply = json.loads(line)
        if "error" in reply:
            self.close()
            if reply.get("exit_code") == int(ExitCode.ENVIRONMENT):
                raise EnvironmentProblem(f"{self.side}: {reply['error']}")
            raise WorkloadError(f"{self.side}: {reply['error']} ({phase.name})")
        return reply

    def _read_line(self, phase: Phase) -> bytes:
        """One line from the child's stdout, b"" at its end; ProcessTimeout once ``phase`` is over."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = phase.left()
                if left <= 0 or not sel.select(None if left == float("inf") else left):
                    kill_group(self.proc)
                    raise ProcessTimeout(f"{self.side}: {self.exec_rel} {phase.name}", phase.limit_s,
                                         output="\n".join(self._tail()))
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

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
            kill_group(self.proc)
            code = self.proc.returncode
        tail = self._tail()
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit {code}"
        lines = re.findall(rf'File "{re.escape(str(self.exec_file))}", line (\d+)', "\n".join(tail))
        where = f"{self.exec_file}:{lines[-1]}" if lines else str(self.exec_file)
        last = " | ".join(tail[-3:]) or "no output"
        kill_group(self.proc)
        return WorkloadError(f"{self.side}: {where}: the workload process died ({how}) during {phase.name}: {last}")

    def warmup(self, count: int, min_ms: float) -> float:
        return float(self.ask({"cmd": "warmup", "count": count, "min_ms": min_ms})["per_call_ms"])

    def sample(self, calls: int) -> float:
        return float(self.ask({"cmd": "sample", "calls": calls})["ms"])

    def kernels(self, limit_s: float) -> list[str]:
        """Kernel names in a profile of one call (after a warm one), within ``limit_s``."""
        return list(self.ask({"cmd": "kernels"}, Phase("workload() kernel-hit calls", limit_s))["seen"])

    def kernel_census(self, limit_s: float) -> dict[str, Any]:
        """The workload's kernel census (``kernel_hit.kernel_census``) within ``limit_s``."""
        return dict(self.ask({"cmd": "kernels"}, Phase("workload() kernel-hit calls", limit_s))["census"])

    def measure(self, limit_s: float, repeats: int = 30):
        """``bench.measure`` of ``workload()`` in the child, within ``limit_s`` -> ``bench.Timing``."""
        from ascendopt.gate import bench

        reply = self.ask({"cmd": "measure", "repeats": repeats}, Phase("workload() timing", limit_s))
        return bench.Timing(**reply["timing"])

    def outputs(self, path: Path, limit_s: float) -> dict[str, Any]:
        """One call of ``workload()`` within ``limit_s``; the tensors it returned are saved to ``path``
        (``gate.equivalence.call_and_save``, whose reply this returns)."""
        return self.ask({"cmd": "outputs", "path": str(path)}, Phase("workload() output call", limit_s))

    def close(self) -> None:
        """Ask the child to exit, then kill its process group (whatever the workload started goes too)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"cmd": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        kill_group(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout, self.log):
            with contextlib.suppress(OSError):
                stream.close()


@contextlib.contextmanager
def workload_process(tree: Path, exec_rel: str, side: str, *, load_s: float, seed: bool = False,
                     extra_env: Mapping[str, str] | None = None) -> Iterator[_Child]:
    """A ready child running ``<tree>/<exec_rel>`` (module code done within ``load_s`` seconds; ``seed``:
    seeded first, see the module docstring; ``extra_env``: more environment, e.g. ``tune.autotune``'s
    pin); closed, with its process group, on exit."""
    child = _Child(tree, exec_rel, side, seed=seed, extra_env=extra_env)
    try:
        child.start(load_s)
        yield child
    finally:
        child.close()


@contextlib.contextmanager
def tree_processes(exec_rel: str, trees: Mapping[str, Path], *, load_s: float = DEFAULT_TIMEOUTS["workload_s"],
                   timing_s: float = DEFAULT_TIMEOUTS["timing_s"]) -> Iterator[dict[str, _Child]]:
    """One ready child per source tree (``{side: tree}``, e.g. baseline, best, candidate; the side names
    every error), all started at once, each one's module code within ``load_s`` seconds; they share
    one timing phase of ``timing_s`` seconds (the warm-up and every sample of every side). Closed,
    with their process groups, on exit."""
    with contextlib.ExitStack() as stack:
        children: dict[str, _Child] = {}
        for side, tree in trees.items():
            children[side] = _Child(tree, exec_rel, side)
            stack.callback(children[side].close)
        for child in children.values():
            child.start(load_s)
        phase = Phase("workload() warm-up and timing", timing_s)
        for child in children.values():
            child.phase = phase
        yield children


def outputs_of(tree: Path, exec_rel: str, side: str, path: Path, *, limit_s: float) -> dict[str, Any]:
    """A fresh seeded child's first ``workload()`` call, its outputs saved to ``path`` (module code and
    call each within ``limit_s``) -> the reply of ``_Child.outputs``."""
    with workload_process(tree, exec_rel, side, load_s=limit_s, seed=True) as child:
        return child.outputs(path, limit_s)


def compare_trees(exec_rel: str, baseline_tree: Path, candidate_tree: Path, *, pairs: int = 30, warmup: int = 5,
                  warmup_ms: float = 25.0, min_sample_ms: float = 1.0, rule=None,
                  load_s: float = DEFAULT_TIMEOUTS["workload_s"], timing_s: float = DEFAULT_TIMEOUTS["timing_s"]):
    """Interleaved timing of ``<tree>/<exec_rel>``'s ``workload()`` in both trees -> ``bench.Comparison``.

    ``load_s``: limit of each side's module code (both load at once); ``timing_s``: limit of the
    whole timing phase (warm-up and all pairs of both sides, the extra pairs of a wide band included).
    More trees (a round's baseline, best and candidate): ``tree_processes`` with ``bench.Interleaved``.
    """
    from ascendopt.gate import bench

    rule = rule or bench.DecisionRule()
    trees = {"baseline": baseline_tree, "candidate": candidate_tree}
    with tree_processes(exec_rel, trees, load_s=load_s, timing_s=timing_s) as sides:
        taker = bench.Interleaved([sides["baseline"], sides["candidate"]], warmup=warmup, warmup_ms=warmup_ms,
                                  min_sample_ms=min_sample_ms)
        # as bench.compare: a band too wide to tell gets up to 3 x the pairs before it is inconclusive
        return bench.take_until_decided(taker, pairs, None, rule)


if __name__ == "__main__":
    _child_main(sys.argv[1], seed="--seed" in sys.argv[2:])
