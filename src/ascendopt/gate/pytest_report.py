"""A pytest plugin for the frozen test run (``-p ascendopt.gate.pytest_report``): every test's outcome
by node id, and the failing tests' own error lines, written as JSON to the file named by
``$ASCENDOPT_PYTEST_REPORT`` when the session ends.

Freeze records which tests passed on the baseline and the gate requires each of them to pass again,
so a test that is skipped, deselected, xfailed or gone is seen even when pytest exits 0. Outcomes:
``passed``, ``failed``, ``error`` (setup, teardown or collection), ``skipped``, ``xfailed``,
``xpassed``; deselected node ids are listed apart. ``ascendopt.gate.testset`` starts the run and
reads the file. This module runs inside the user's pytest process: it imports nothing of ascendopt.

File format (``version`` 1)::

    {"version": 1, "exitstatus": 0, "collected": [nodeid, ...], "deselected": [nodeid, ...],
     "outcomes": {nodeid: outcome}, "details": {nodeid: {"where": "path:line", "lines": [...]}}}

``where``: the crash location (a skip: the skip's); ``lines``: the ``E`` lines of a failure's
traceback (else its crash message), a skip's reason.
"""

from __future__ import annotations

import json
import os

REPORT_ENV = "ASCENDOPT_PYTEST_REPORT"
MAX_LINES = 12  # error lines kept per test: the first ``E`` lines of its traceback


def _detail(report) -> dict[str, object]:
    """Where the test stopped and its own error lines: the crash message and the ``E`` lines of the
    traceback (what pytest marks as the error); for a skip, its reason."""
    longrepr = report.longrepr
    if report.skipped:
        if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
            return {"where": f"{longrepr[0]}:{longrepr[1]}", "lines": [str(longrepr[2])]}
        return {"where": "", "lines": [f"xfail: {report.wasxfail}"] if getattr(report, "wasxfail", "") else []}
    crash = getattr(longrepr, "reprcrash", None)
    where, lines = "", []
    if crash is not None:
        path = os.path.relpath(crash.path) if os.path.isabs(crash.path) else crash.path
        where = f"{path}:{crash.lineno}"
        lines = [(crash.message or "").strip().splitlines()[0]] if (crash.message or "").strip() else []
    text = getattr(report, "longreprtext", "") or ""
    marked = [ln.rstrip() for ln in text.splitlines() if ln.startswith("E ") and ln[1:].strip()]
    if marked:
        lines = marked
    elif not lines:  # no traceback (a collection error as text, an internal error): its last lines
        lines = [ln.rstrip() for ln in text.strip().splitlines()[-4:] if ln.strip()]
    return {"where": where, "lines": lines[:MAX_LINES]}


class _Recorder:
    def __init__(self, path: str):
        self.path = path
        self.collected: list[str] = []
        self.deselected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, dict[str, object]] = {}

    def _record(self, nodeid: str, outcome: str, report) -> None:
        # The first outcome that is not a pass wins (a teardown error after a passed call is an error).
        if self.outcomes.get(nodeid) in (None, "passed", "xpassed"):
            self.outcomes[nodeid] = outcome
            if outcome not in ("passed", "xpassed"):
                self.details[nodeid] = _detail(report)

    def pytest_collection_finish(self, session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_deselected(self, items) -> None:
        self.deselected += [item.nodeid for item in items]

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self._record(report.nodeid or "<collection>", "error", report)

    def pytest_runtest_logreport(self, report) -> None:
        xfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed:
                outcome = "xpassed" if xfail else "passed"
            elif report.skipped:
                outcome = "xfailed" if xfail else "skipped"
            else:
                outcome = "failed"
        elif report.failed:
            outcome = "error"
        elif report.skipped:  # skipped in setup: a skip or skipif mark, pytest.skip() in a fixture
            outcome = "xfailed" if xfail else "skipped"
        else:
            return  # a clean setup or teardown says nothing about the test
        self._record(report.nodeid, outcome, report)

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        data = {"version": 1, "exitstatus": int(exitstatus), "collected": self.collected,
                "deselected": self.deselected, "outcomes": self.outcomes, "details": self.details}
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)


def pytest_configure(config) -> None:
    path = os.environ.get(REPORT_ENV)
    # pytest-xdist workers send their reports to the controller, which alone writes the file
    if path and not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("ascendopt-report"):
        config.pluginmanager.register(_Recorder(path), "ascendopt-report")
