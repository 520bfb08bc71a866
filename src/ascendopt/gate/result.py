"""What the gate found: stages with their checks, the exit code, JSON and JUnit XML forms.

A stage is ``pass``, ``fail``, ``skipped`` (asked for, e.g. ``--skip-perf``), ``not-run`` (an
earlier stage is red) or, for performance only, ``inconclusive``: the noise band stayed wider than
``bench.DecisionRule.max_band``, so "no regression" cannot be claimed. Inconclusive is not a pass:
the gate exits 6 and JUnit marks each undecided case with an ``error`` element of type
``inconclusive`` (CI systems show errors as not green). Each stage lists its checks (a frozen file,
one tensor of one shape case, a failed test, one timed case); JUnit XML gets one testcase per check.
"""

from __future__ import annotations

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
    # "inconclusive" (performance: the noise band is too wide to tell; exit 6, not a pass)
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
        if self.status == "inconclusive":
            return int(ExitCode.INCONCLUSIVE)
        return int(self._error_class.exit_code) if self.status == "fail" else 0

    def error(self) -> AscendoptError:
        """The error a red or inconclusive stage ends the gate command with (its exit code is the stage's)."""
        if self.status == "inconclusive":
            return InconclusiveError(f"gate inconclusive at {self.name}: {self.summary}", hint=INCONCLUSIVE_ADVICE)
        return self._error_class(f"gate red at {self.name}: {self.summary}")

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
    def blocking_stage(self) -> StageResult | None:
        """What keeps the gate from passing: the red stage, else the inconclusive one."""
        return self.failed_stage or self.inconclusive_stage

    @property
    def exit_code(self) -> int:
        blocking = self.blocking_stage
        return blocking.exit_code if blocking else 0

    @property
    def passed(self) -> bool:
        """Green: no stage red and none inconclusive."""
        return self.blocking_stage is None

    def to_dict(self) -> dict[str, Any]:
        failed, inconclusive = self.failed_stage, self.inconclusive_stage
        stages = [s.to_dict() for s in self.stages]
        # A speedup is reported only for a measured "faster" on a green gate, never on a red one.
        for stage in stages:
            for comparison in stage["data"].get("comparisons", []):
                if not self.passed or comparison.get("verdict") != "faster":
                    comparison.pop("speedup", None)
        return {"schema": 1, "passed": self.passed, "exit_code": self.exit_code,
                "failed_stage": failed.name if failed else None,
                "inconclusive_stage": inconclusive.name if inconclusive else None, "stages": stages,
                "notes": self.notes}

    def to_junit(self) -> str:
        """JUnit XML: one testsuite, one testcase per check (stages without checks get one)."""
        suite = ET.Element("testsuite", name="ascendopt gate")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for stage in self.stages:
            checks = stage.checks or [Check(stage.name, stage.status not in ("fail", "inconclusive"), stage.summary)]
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=f"gate.{stage.name}", name=check.name)
                counts["tests"] += 1
                if stage.status in ("skipped", "not-run"):
                    ET.SubElement(case, "skipped", message=stage.summary)
                    counts["skipped"] += 1
                elif not check.passed:
                    # an undecided timing is an error (could not tell), a red check a failure; both not green
                    kind = "error" if stage.status == "inconclusive" else "failure"
                    failure = ET.SubElement(case, kind, message=check.message.splitlines()[0][:200]
                                            if check.message else stage.summary)
                    if kind == "error":
                        failure.set("type", "inconclusive")
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
