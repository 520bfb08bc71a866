"""Child processes with a time limit: every program ascendopt starts (tests, workloads, git, ncu) runs here.

A child runs in its own session, so on expiry (or Ctrl-C) the whole process group is killed: a test
runner's workers or a workload's compiler processes go with it and nothing is left running. The
timeout names what ran and the limit, so the caller can say which stage hit it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ascendopt.errors import AscendoptError, EnvironmentProblem

GIT_TIMEOUT_S = 60.0  # git answers in well under a second; a minute means a lock or a network remote


class ProcessTimeout(AscendoptError):
    """A child process ran past its limit and was killed with its process group."""

    def __init__(self, label: str, limit_s: float, *, output: str = "", hint: str | None = None):
        super().__init__(f"{label}: timed out after {limit_s:g} s (killed with its process group)", hint=hint)
        self.label = label
        self.limit_s = limit_s
        self.output = output


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and everything it started (it leads its own session: its group id is its pid)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie the kernel has not reaped yet
        pass


def run(argv: Sequence[str], *, label: str, timeout: float | None, cwd: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to completion with stdout and stderr captured as text (stdin closed).
    ``pass_fds``: file descriptors the child inherits (``subprocess.Popen``'s).

    ``timeout`` in seconds (None: no limit, for callers that own a limit of their own). On expiry the
    process group is killed and ``ProcessTimeout`` raised with the output so far; an interrupt kills
    the group too before it propagates.
    """
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, pass_fds=tuple(pass_fds))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        kill_group(proc)
        partial = _text(exc.stdout) + _text(exc.stderr)
        raise ProcessTimeout(label, float(timeout or 0), output=partial) from None
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def git(*args: str, cwd: str | os.PathLike, check: bool = False, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """``git args`` in ``cwd``: its stdout, stripped. Without ``check`` a failure (or no git) gives
    None; with ``check`` it raises EnvironmentProblem (exit 5) naming the command and git's message."""
    try:
        proc = run(["git", *args], label=f"git {' '.join(args[:2])}", timeout=timeout, cwd=cwd)
    except (OSError, ProcessTimeout) as exc:
        if check:
            raise EnvironmentProblem(f"git {' '.join(args[:2])} in {Path(cwd)}: {exc}") from None
        return None
    if proc.returncode != 0:
        if check:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise EnvironmentProblem(f"git {' '.join(args[:2])} failed in {Path(cwd)}: {last}",
                                     hint="the frozen commit must be reachable (CI: fetch the full history)")
        return None
    return proc.stdout.strip()
