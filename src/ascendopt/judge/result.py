"""What a stage found: its status, its checks and the exit code it stands for.

A stage is ``pass``, ``fail``, ``skipped`` (asked for, e.g. ``--skip-perf``), ``not-run`` (an
earlier stage is red) or, for performance only, ``inconclusive``: the noise band stayed wider than
``bench.DecisionRule.max_band``, so "no regression" cannot be claimed; or ``implausible``: a faster
case beyond ``bench.IMPLAUSIBLE_RATIO`` (reproduced) or under the device's roofline floor
(``bench.implausible_reason``), which no honest change can reach without a reason a person wrote down
(``gate --accept-implausible REASON``). Neither is a pass: the gate exits 6 (the measurement cannot be
vouched for: the inconclusive family). Each stage lists its checks (a frozen file, one tensor of one shape
case, a failed test, one timed case). The gate's verdict over its stages, with its JSON and JUnit XML forms,
is ``ascendopt.gate.result``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ascendopt.errors import (
    AscendoptError,
    CorrectnessError,
    ExitCode,
    InconclusiveError,
    IntegrityError,
    RegressionError,
)

STAGES = ("integrity", "correctness", "kernel_hit", "performance")
# What a red stage is, as the error the CLI exits with: its class carries the exit code (3, 1, 1, 4).
STAGE_ERRORS: dict[str, type[AscendoptError]] = {"integrity": IntegrityError, "correctness": CorrectnessError,
                                                 "kernel_hit": CorrectnessError, "performance": RegressionError}
# What to do about an inconclusive performance stage (the error's hint, the rendered advice).
INCONCLUSIVE_ADVICE = ("time on a quiet device, or raise --pairs (the band shrinks as 1/sqrt(pairs)); a CPU "
                       "runner cannot time the device: call `ascendopt --backend cpu gate --skip-perf`")
# What to do about an implausible performance stage.
IMPLAUSIBLE_ADVICE = ("find out how the candidate got there (cached or precomputed outputs, work off the timed "
                      "stream or on the host, a wrong byte count); when the speedup is real, say why with "
                      "--accept-implausible REASON (recorded with the result)")
UNDECIDED = ("inconclusive", "implausible")  # statuses that are neither red nor a pass: exit 6


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
    # "pass" | "fail" | "skipped" (asked for) | "not-run" (an earlier stage is red) |
    # "inconclusive" (performance: the noise band is too wide to tell; exit 6, not a pass) |
    # "implausible" (performance: faster beyond belief, not accepted; exit 6, not a pass)
    status: str
    summary: str
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    # Set when the stage is red because the workload raised, crashed or timed out (the error): the
    # code under test failed, so the stage exits 1 whatever its name (not 4 at performance).
    workload_error: str | None = None
    # Set when the stage is red because what decides its verdict cannot be trusted (the frozen test run
    # used a file freeze did not pin, its report did not verify, a comparison function was replaced):
    # an integrity failure, exit 3 whatever the stage.
    integrity_error: str | None = None

    @property
    def _error_class(self) -> type[AscendoptError]:
        if self.integrity_error:
            return IntegrityError
        return CorrectnessError if self.workload_error else STAGE_ERRORS[self.name]

    @property
    def exit_code(self) -> int:
        if self.status in UNDECIDED:
            return int(ExitCode.INCONCLUSIVE)
        return int(self._error_class.exit_code) if self.status == "fail" else 0

    def error(self) -> AscendoptError:
        """The error a red or inconclusive stage ends the gate command with (its exit code is the stage's)."""
        if self.status == "inconclusive":
            return InconclusiveError(f"gate inconclusive at {self.name}: {self.summary}", hint=INCONCLUSIVE_ADVICE)
        if self.status == "implausible":
            return InconclusiveError(f"gate implausible at {self.name}: {self.summary}", hint=IMPLAUSIBLE_ADVICE)
        return self._error_class(f"gate red at {self.name}: {self.summary}")

    def failure_lines(self, *, tail: bool = True) -> list[str]:
        """The red stage's own error lines, as ``ascendopt gate`` prints them: each failed check as
        ``NAME: first line`` with its further lines indented (a frozen test's assertion lines, a tensor out
        of tolerance, an output that differs), then (``tail``) the command's last output lines where no test
        says more."""
        lines: list[str] = []
        for check in self.checks:
            if not check.passed:
                first, *rest = check.message.splitlines() or [""]
                lines += [f"{check.name}: {first}", *(f"    {line}" for line in rest)]
        if tail and self.data.get("output_tail"):
            lines += str(self.data["output_tail"]).splitlines()
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "exit_code": self.exit_code, "summary": self.summary,
                "checks": [c.to_dict() for c in self.checks], "data": self.data,
                "workload_error": self.workload_error, "integrity_error": self.integrity_error}
