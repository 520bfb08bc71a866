"""What the gate found: stages with their checks, the exit code, JSON and JUnit XML forms.

A stage is ``pass``, ``fail``, ``skipped`` (asked for, e.g. ``--skip-perf``), ``not-run`` (an
earlier stage is red) or, for performance only, ``inconclusive``: the noise band stayed wider than
``bench.DecisionRule.max_band``, so "no regression" cannot be claimed; or ``implausible``: a faster
case beyond ``bench.IMPLAUSIBLE_RATIO`` (reproduced) or under the device's roofline floor
(``bench.implausible_reason``), which no honest change can reach without a reason a person wrote down
(``gate --accept-implausible REASON``). Neither is a pass: the gate exits 6 (the measurement cannot be
vouched for: the inconclusive family) and JUnit marks each such case with an ``error`` element of type
``inconclusive`` or ``implausible`` (CI systems show errors as not green). Each stage lists its checks (a frozen file,
one tensor of one shape case, a failed test, one timed case); JUnit XML gets one testcase per check.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
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


@dataclass
class GateResult:
    stages: list[StageResult]
    notes: list[str] = field(default_factory=list)

    @property
    def failed_stage(self) -> StageResult | None:
        """The red stage (status "fail"), if any."""
        return next((s for s in self.stages if s.status == "fail"), None)

    @property
    def inconclusive_stage(self) -> StageResult | None:
        """The stage that could not tell (status "inconclusive"), if any."""
        return next((s for s in self.stages if s.status == "inconclusive"), None)

    @property
    def implausible_stage(self) -> StageResult | None:
        """The stage whose result is too good to take at its word (status "implausible"), if any."""
        return next((s for s in self.stages if s.status == "implausible"), None)

    @property
    def blocking_stage(self) -> StageResult | None:
        """What keeps the gate from passing: the red stage, else the inconclusive or implausible one."""
        return self.failed_stage or self.inconclusive_stage or self.implausible_stage

    @property
    def exit_code(self) -> int:
        blocking = self.blocking_stage
        return blocking.exit_code if blocking else 0

    @property
    def passed(self) -> bool:
        """Green: no stage red and none inconclusive."""
        return self.blocking_stage is None

    def to_dict(self) -> dict[str, Any]:
        failed, inconclusive, implausible = self.failed_stage, self.inconclusive_stage, self.implausible_stage
        stages = [s.to_dict() for s in self.stages]
        # A speedup is reported only for a measured "faster" on a green gate, never on a red one.
        for stage in stages:
            for comparison in stage["data"].get("comparisons", []):
                if not self.passed or comparison.get("verdict") != "faster":
                    comparison.pop("speedup", None)
        return {"schema": 1, "passed": self.passed, "exit_code": self.exit_code,
                "failed_stage": failed.name if failed else None,
                "inconclusive_stage": inconclusive.name if inconclusive else None,
                "implausible_stage": implausible.name if implausible else None, "stages": stages,
                "notes": self.notes}

    def to_junit(self, root: str | None = None) -> str:
        """JUnit XML: one testsuite, one testcase per check (stages without checks get one). ``root``: the project
        root; test names (a frozen file, a workspace file, a test id) under it are written relative to it, so two
        checkouts of one project name the same tests alike."""
        prefix = os.path.join(root, "") if root else None

        def relative(name: str) -> str:
            return name.replace(prefix, "") if prefix else name

        suite = ET.Element("testsuite", name="ascendopt gate")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for stage in self.stages:
            checks = stage.checks or [Check(stage.name, stage.status not in ("fail", *UNDECIDED), stage.summary)]
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=f"gate.{stage.name}", name=relative(check.name))
                counts["tests"] += 1
                if stage.status in ("skipped", "not-run"):
                    ET.SubElement(case, "skipped", message=stage.summary)
                    counts["skipped"] += 1
                elif not check.passed:
                    # an undecided or implausible timing is an error (cannot vouch), a red check a failure;
                    # neither is green
                    kind = "error" if stage.status in UNDECIDED else "failure"
                    failure = ET.SubElement(case, kind, message=check.message.splitlines()[0][:200]
                                            if check.message else stage.summary)
                    if kind == "error":
                        failure.set("type", stage.status)
                    failure.text = check.message
                    counts["failures" if kind == "failure" else "errors"] += 1
                elif check.message:
                    ET.SubElement(case, "system-out").text = check.message
        for key, value in counts.items():
            suite.set(key, str(value))
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
