"""Own-code workloads: loading ``workload()`` from an exec-file, and interleaved A/B timing of the
same workload in two source trees, one child process per tree.

Why child processes: the baseline (the frozen commit, checked out in a temporary git worktree) and
the working tree define the same module names, so they cannot share one interpreter. The parent
keeps the measurement core's discipline anyway: both children warm up, use one batch size, and
take samples alternately (ABBA) so slow drift of clocks and temperature cancels in the pairs that
``bench.decide`` judges.

Child protocol (one JSON object per line; the child's own stdout is redirected to stderr so a
workload's prints cannot corrupt it): ``{"cmd": "warmup", "count", "min_ms"}`` -> ``{"per_call_ms"}``;
``{"cmd": "sample", "calls"}`` -> ``{"ms"}`` (per call); ``{"cmd": "exit"}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.errors import UsageError


def load_workload(path: Path) -> Callable[[], Any]:
    """Run the exec-file's module code once and return its ``workload()`` (called once per step).

    Same semantics and ``file:line`` errors as ``ascendopt collect --exec-file``.
    """
    from ascendopt.collect.workload import check_exec_file, load_exec_file

    return load_exec_file(check_exec_file(path))


def _child_main(exec_file: str) -> None:
    from ascendopt.device import backends
    from ascendopt.gate import bench

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the workload prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    fn = load_workload(Path(exec_file))
    backend = backends.current()
    run = bench.Sampler(lambda: fn(), None, backend)
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "warmup":
            reply = {"per_call_ms": run.warmup(int(msg["count"]), float(msg["min_ms"]))}
        elif msg["cmd"] == "sample":
            reply = {"ms": run.sample(int(msg["calls"]))}
        else:
            break
        proto.write(json.dumps(reply) + "\n")


class _Child:
    """One workload process rooted at ``tree`` (cwd and first on PYTHONPATH); a ``bench.Side``
    whose warmup and samples run in the child."""

    def __init__(self, tree: Path, exec_file: Path, label: str):
        from ascendopt.device import backends

        self.label = label
        env = backends.child_env()  # the child must time on the backend this process selected
        paths = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.proc = subprocess.Popen([sys.executable, "-m", "ascendopt.gate.interleave", str(exec_file)], cwd=tree,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def ask(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.proc.wait(timeout=30)
            tail = (self.proc.stderr.read() if self.proc.stderr else "").strip().splitlines()[-3:]
            raise UsageError(f"{self.label} workload process exited ({self.proc.returncode}): {' | '.join(tail)}")
        return json.loads(line)

    def warmup(self, count: int, min_ms: float) -> float:
        return float(self.ask(cmd="warmup", count=count, min_ms=min_ms)["per_call_ms"])

    def sample(self, calls: int) -> float:
        return float(self.ask(cmd="sample", calls=calls)["ms"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask(cmd="exit")
            except (UsageError, ValueError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


def compare_trees(exec_rel: str, baseline_tree: Path, candidate_tree: Path, *, pairs: int = 30, warmup: int = 5,
                  warmup_ms: float = 25.0, min_sample_ms: float = 1.0, rule=None):
    """Interleaved timing of ``<tree>/<exec_rel>``'s ``workload()`` in both trees -> ``bench.Comparison``."""
    from ascendopt.gate import bench

    rule = rule or bench.DecisionRule()
    a = _Child(baseline_tree, baseline_tree / exec_rel, "baseline")
    try:
        b = _Child(candidate_tree, candidate_tree / exec_rel, "candidate")
        try:
            taker = bench.Interleaved([a, b], warmup=warmup, warmup_ms=warmup_ms, min_sample_ms=min_sample_ms)
            base, cand = taker.take(pairs)
            return bench.decide(base, cand, rule, taker.calls)
        finally:
            b.close()
    finally:
        a.close()


if __name__ == "__main__":
    _child_main(sys.argv[1])
