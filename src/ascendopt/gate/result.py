"""What the gate found: its stages in order, the exit code, JSON and JUnit XML forms.

The gate's verdict is its first blocking stage: a red one, else an inconclusive or implausible one
(``judge.result``: what each stage's status means and the exit code it stands for). JUnit marks each
inconclusive or implausible case with an ``error`` element of type ``inconclusive`` or ``implausible`` (CI
systems show errors as not green); JUnit XML gets one testcase per check.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from ascendopt.judge.result import UNDECIDED, Check, StageResult


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
