"""What the gate found: stages with their checks, the exit code, JSON and JUnit XML forms.

A stage is ``pass``, ``fail``, ``skipped`` (asked for, e.g. ``--skip-perf``) or ``not-run`` (an
earlier stage is red). Each stage lists its checks (a frozen file, one tensor of one shape case, a
failed test, one timed case); JUnit XML gets one testcase per check.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Any

from ascendopt.errors import AscendoptError, CorrectnessError, IntegrityError, RegressionError

STAGES = ("integrity", "correctness", "kernel_hit", "performance")
# What a red stage is, as the error the CLI exits with: its class carries the exit code (3, 1, 1, 4).
STAGE_ERRORS: dict[str, type[AscendoptError]] = {"integrity": IntegrityError, "correctness": CorrectnessError,
                                                 "kernel_hit": CorrectnessError, "performance": RegressionError}


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
    status: str  # "pass" | "fail" | "skipped" (asked for) | "not-run" (an earlier stage is red)
    summary: str
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return int(STAGE_ERRORS[self.name].exit_code) if self.status == "fail" else 0

    def error(self) -> AscendoptError:
        """The error a red stage ends the gate command with (its exit code is the stage's)."""
        return STAGE_ERRORS[self.name](f"gate red at {self.name}: {self.summary}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "exit_code": self.exit_code, "summary": self.summary,
                "checks": [c.to_dict() for c in self.checks], "data": self.data}


@dataclass
class GateResult:
    stages: list[StageResult]
    notes: list[str] = field(default_factory=list)

    @property
    def failed_stage(self) -> StageResult | None:
        return next((s for s in self.stages if s.status == "fail"), None)

    @property
    def exit_code(self) -> int:
        failed = self.failed_stage
        return failed.exit_code if failed else 0

    @property
    def passed(self) -> bool:
        return self.failed_stage is None

    def to_dict(self) -> dict[str, Any]:
        failed = self.failed_stage
        stages = [s.to_dict() for s in self.stages]
        # A speedup is reported only for a measured "faster" on a green gate, never on a red one.
        for stage in stages:
            for comparison in stage["data"].get("comparisons", []):
                if not self.passed or comparison.get("verdict") != "faster":
                    comparison.pop("speedup", None)
        return {"schema": 1, "passed": self.passed, "exit_code": self.exit_code,
                "failed_stage": failed.name if failed else None, "stages": stages, "notes": self.notes}

    def to_junit(self) -> str:
        """JUnit XML: one testsuite, one testcase per check (stages without checks get one)."""
        suite = ET.Element("testsuite", name="ascendopt gate")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for stage in self.stages:
            checks = stage.checks or [Check(stage.name, stage.status != "fail", stage.summary)]
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=f"gate.{stage.name}", name=check.name)
                counts["tests"] += 1
                if stage.status in ("skipped", "not-run"):
                    ET.SubElement(case, "skipped", message=stage.summary)
                    counts["skipped"] += 1
                elif not check.passed:
                    failure = ET.SubElement(case, "failure", message=check.message.splitlines()[0][:200]
                                            if check.message else stage.summary)
                    failure.text = check.message
                    counts["failures"] += 1
                elif check.message:
                    ET.SubElement(case, "system-out").text = check.message
        for key, value in counts.items():
            suite.set(key, str(value))
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
