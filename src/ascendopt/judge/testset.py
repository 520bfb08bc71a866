"""The frozen tests of own code: run the frozen test command, read what each test did, judge it.

What "passed" means:

* a pytest command (``pytest ...``, ``py.test ...``, ``python -m pytest ...``) runs with this
  interpreter's pytest, never one of the repository (``judge.pytest_launch``), and the plugin
  ``ascendopt.judge.pytest_report``, which reports every test by node id in a report authenticated
  with a per-run key, what the run used (``judge.scope`` pins it), and any comparison function
  replaced during the run (``SuiteRun.integrity``: an integrity failure, exit 3).
  Freeze records each test's outcome on the baseline (``Contract.test_set``) and refuses a baseline
  with a failing test, a run of no test, or no test passed. The gate requires every test that passed
  at freeze to pass again: skipped, deselected, xfailed, missing (renamed or removed), failed or
  error is red, as is any failing test, a run of no test, or a pytest exit status other than 0.
* another command must exit 0 and print a summary line with ``N passed`` (``3 passed``,
  ``Tests: 3 passed, 1 skipped``: a word and colon may precede it, other counts may follow) with
  N >= 1 and no failed or error count above 0 (``COMMAND_RULE``); the gate applies the same rule and
  also wants at least as many passed as at freeze.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendopt import process
from ascendopt.contract.frozen import pytest_args, resolve_command
from ascendopt.errors import EnvironmentProblem
from ascendopt.judge.pytest_report import (
    HASH_ALSO_ENV,
    KEY_FD_ENV,
    RECORD_CALLS_ENV,
    REPORT_ENV,
    SOURCE_ROOT_ENV,
    VERSION,
)

PLUGIN = "ascendopt.judge.pytest_report"
LAUNCHER = "ascendopt.judge.pytest_launch"
FAILING = ("failed", "error")
NOT_RUN = ("deselected", "not run")  # collected but not run (deselected, or stopped early by -x)
COMMAND_RULE = ("a frozen test command that is not pytest must exit 0 and print a summary line 'N passed' "
                "(a word and colon may precede it, ', M failed' and other counts may follow) with N >= 1 "
                "and no failures")
_PASSED = re.compile(r"(?<![\w.])(\d+) passed\b", re.IGNORECASE)
_FAILURES = re.compile(r"(?<![\w.])(\d+) (?:failed|failures?|errors?)\b", re.IGNORECASE)
_PYTEST_EXIT = {1: "tests failed", 2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
_TAIL_LINES = 20


@dataclass
class SuiteRun:
    """One run of the frozen test command.

    ``outcomes`` (pytest): node id -> passed / failed / error / skipped / xfailed / xpassed, or
    deselected / not run. ``details``: node id -> ``{"where": "path:line", "lines": [...]}`` for
    every test that did not pass (a failure's ``E`` lines, a skip's reason). ``passed``: the number
    of tests passed (another command: N of its summary line). ``problem``: why the run as a whole
    does not count (no report, no test ran, a bad exit status, the non-pytest rule), else None.
    """

    runner: str  # "pytest" | "command" (contract.model.TEST_RUNNERS)
    returncode: int
    outcomes: dict[str, str] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    passed: int = 0
    problem: str | None = None
    output_tail: str = ""
    # pytest: what the run used (the plugin's ``used``: absolute paths; ``judge.scope.used_files``)
    used: dict[str, Any] = field(default_factory=dict)
    # pytest: the repository's files (and conftests) the run compiled or read: real path -> sha256 of each
    # content compiled (``judge.sources.loaded``) or read (the plugin's ``read``)
    loaded: dict[str, list[str]] = field(default_factory=dict)
    # pytest: the installed plugins (``pytest11`` entry-point names) the run registered; None: not reported
    plugins: list[str] | None = None
    # pytest: why the run itself cannot be trusted, ``(what, message)`` each, an integrity failure (exit 3):
    # a report not written by the plugin, a runner imported from the repository, a comparison replaced
    integrity: list[tuple[str, str]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(self.outcomes.values()))

    def counts_text(self) -> str:
        return ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.counts.items())) or "no test"

    def failing(self) -> list[str]:
        return [nodeid for nodeid, outcome in self.outcomes.items() if outcome in FAILING]

    def brief(self, nodeid: str) -> str:
        """One line: ``nodeid (where): its error lines``."""
        detail = self.details.get(nodeid, {})
        lines = [ln[1:].strip() if ln.startswith("E ") else ln.strip() for ln in detail.get("lines", [])]
        where = f" ({detail['where']})" if detail.get("where") else ""
        return f"{nodeid}{where}: " + ("; ".join(ln for ln in lines[:4] if ln) or self.outcomes.get(nodeid, "?"))

    def detail_text(self, nodeid: str) -> str:
        """The test's location and error lines, one per line (empty when it passed)."""
        detail = self.details.get(nodeid, {})
        head = [f"at {detail['where']}"] if detail.get("where") else []
        return "\n".join(head + list(detail.get("lines", [])))

    def test_set(self) -> dict[str, Any]:
        """What freeze records (``Contract.test_set``)."""
        if self.runner == "command":
            return {"runner": "command", "passed": self.passed}
        found = {"runner": "pytest", "tests": {n: o for n, o in self.outcomes.items() if o not in NOT_RUN}}
        if self.plugins is not None:
            found["plugins"] = list(self.plugins)
        return found


def run_tests(argv: Sequence[str], root: Path, *, timeout: float, hash_also: Sequence[str] = (),
              plugins: Sequence[str] | None = None, record_calls: Path | None = None) -> SuiteRun:
    """Run the frozen test command ``argv`` in ``root`` on this process's backend and read what each
    test did. ``timeout`` in seconds; past it the run is killed and ``ProcessTimeout`` raised. ``hash_also``:
    real paths of data files the run reports the digest of as it reads them, whatever their size (the pinned
    ones; smaller files always are).

    A pytest command runs as ``python -m ascendopt.judge.pytest_launch ROOT -p PLUGIN -p no:cacheprovider
    ARGS`` with
    ``PYTHONSAFEPATH=1``: pytest and its plugins come from this environment, never from the repository
    (``judge.pytest_launch``), and the report is authenticated with a fresh key passed through a pipe
    (``judge.pytest_report``); ``SuiteRun.integrity`` says what of that did not hold.

    ``plugins``: the installed pytest plugins the frozen run registered (``Contract.test_set["plugins"]``): pytest's
    plugin autoload is then off and exactly these are loaded (``-p NAME``), so a plugin installed since freeze (an
    entry point that can rewrite every report) never loads; None (freeze, or a contract from before the pin):
    autoload as the environment has it, and the run reports what it registered (``SuiteRun.plugins``).

    ``record_calls`` (freeze): a folder the run writes the tests' own calls of the repository's functions into
    (``judge.testcalls``)."""
    from ascendopt.device import backends
    from ascendopt.workspace import ensure_space

    env = backends.child_env(kernels=True)  # the tests run on the backend this process selected
    args = pytest_args(argv)
    if args is None:
        proc = _run(resolve_command(argv), root, env, timeout)
        return proc if isinstance(proc, SuiteRun) else _command_run(proc)
    require_pytest()
    key = secrets.token_bytes(32)
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key)  # 32 bytes fit in any pipe buffer: the write never blocks
        os.close(write_end)
        write_end = -1
        with tempfile.TemporaryDirectory(prefix="ascendopt-tests-") as tmp:
            report = Path(tmp) / "report.json"
            env[REPORT_ENV] = str(report)
            env[KEY_FD_ENV] = str(read_end)
            env["PYTHONSAFEPATH"] = "1"  # neither the working directory nor a script's folder on sys.path
            env[SOURCE_ROOT_ENV] = str(root)  # pytest-xdist workers load the repository from source too
            env[HASH_ALSO_ENV] = os.pathsep.join(hash_also)
            if record_calls is not None:
                env[RECORD_CALLS_ENV] = str(record_calls)
            # this interpreter runs pytest, so the plugin imports from the same environment as ascendopt
            # no cache: pytest's cache (--lf, --sw) would let an earlier run decide what this one runs
            pinned: list[str] = []
            if plugins is not None:
                env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
                pinned = [a for name in plugins for a in ("-p", name)]
            proc = _run([sys.executable, "-m", LAUNCHER, str(root), "-p", PLUGIN, "-p", "no:cacheprovider", *pinned,
                         *args], root, env, timeout, pass_fds=(read_end,))
            if isinstance(proc, SuiteRun):
                return proc
            data, forged = _read_report(report, key)
            if data is None:
                # a report cut short by a full disk is the disk's fault, said as such (exit 5 is red too: filling
                # the disk cannot turn a verdict green)
                ensure_space(Path(tmp), "the test report")
            run = _pytest_run(proc, data)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if forged:
        run.integrity.append(("test report", forged))
    if data is not None:
        run.used = dict(data.get("used") or {})
        registered = (data.get("plugins") or {}).get("entry_points")
        run.plugins = [str(name) for name in registered] if isinstance(registered, list) else None
        if plugins is not None:
            run.integrity += [(name, f"{name}: an installed pytest plugin that the frozen test run did not load was "
                                     "registered; the tests' verdicts cannot be trusted")
                              for name in sorted(set(run.plugins or ()) - set(plugins))]
        run.integrity += _runner_problems(data.get("runner") or {}, root)
        replaced = (data.get("comparisons") or {}).get("replaced") or []
        run.integrity += [(name, f"{name}: the {_replaced_kind(name)} function was replaced during the test run (it "
                                 "is no longer the object pytest started with); the tests' verdicts cannot be trusted")
                          for name in replaced]
        run.integrity += [(name, f"{name}: a pytest plugin registered while the tests ran (by the code under test: it "
                                 "can rewrite their reports); the tests' verdicts cannot be trusted")
                          for name in (data.get("plugins") or {}).get("late") or []]
        loader = data.get("loader") or {}
        run.loaded = {path: [digest] for path, digest in (loader.get("loaded") or {}).items()}
        for path, digests in (loader.get("read") or {}).items():
            run.loaded.setdefault(path, []).extend(digests)
        run.integrity += [(name, f"{name}: the judge's source-only import was undone during the test run (a cached "
                                 "byte code file could have run instead of a pinned source); the tests' verdicts "
                                 "cannot be trusted")
                          for name in (data.get("loader") or {}).get("replaced") or []]
    return run


def _runner_problems(runner: Mapping[str, Any], root: Path) -> list[tuple[str, str]]:
    """A runner module (pytest, _pytest, pluggy, the plugin) imported from inside ``root``, or not at all."""
    problems = []
    top = os.path.realpath(root)
    for name, path in runner.items():
        if not path:
            problems.append((name, f"{name}: the test run did not import it from the environment"))
        elif os.path.realpath(path) == top or os.path.realpath(path).startswith(top + os.sep):
            problems.append((name, f"{name}: the test runner was imported from the repository ({path}), not from "
                                   "the environment"))
    return problems


def require_pytest() -> None:
    """Raise EnvironmentProblem (exit 5) when this Python, which runs a pytest command, has no pytest:
    its ``No module named pytest`` would otherwise read as a baseline whose tests fail."""
    import importlib.util

    if importlib.util.find_spec("pytest") is None:
        raise EnvironmentProblem(f"pytest is not installed in this Python ({sys.executable}); pip install pytest",
                                 hint="the frozen test command is a pytest command, and ascendopt runs it with "
                                      "the Python it runs in")


def _run(argv: list[str], root: Path, env: dict[str, str], timeout: float, pass_fds: Sequence[int] = ()):
    try:
        return process.run(argv, label="frozen tests", timeout=timeout, cwd=root, env=env, pass_fds=pass_fds)
    except OSError as exc:  # not found, not executable
        return SuiteRun("pytest" if pytest_args(argv) is not None else "command", -1,
                        problem=f"cannot start {argv[0]}: {exc.strerror or exc}")


def _read_report(path: Path, key: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The plugin's report and None, or None and None when there is none (the run never got to write it),
    or None and why it does not verify: a report whose HMAC under this run's ``key`` does not match was
    written by something else than the plugin (a conftest, a test, a shadowing runner)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, None
    try:
        outer = json.loads(text)
        payload, mac = outer["payload"], outer["mac"]
        if not isinstance(payload, str) or not isinstance(mac, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return None, "the test report is not one the plugin writes (no authentication code): something in the " \
                     "test run wrote it in the plugin's place"
    expected = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, mac):
        return None, "the test report's authentication code does not match this run's key: something in the " \
                     "test run wrote or altered it"
    data = json.loads(payload)
    return (data if isinstance(data, dict) and data.get("version") == VERSION else None), None


def _tail(proc) -> str:
    return "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-_TAIL_LINES:])


def _error_line(tail: str) -> str:
    """The line of pytest's output that names its error: the last ``INTERNALERROR>`` or ``ERROR`` line, else the
    last line."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("INTERNALERROR>", "ERROR"))]
    return (errors or lines or ["no output"])[-1]


def _pytest_run(proc, data: Mapping[str, Any] | None) -> SuiteRun:
    rc, tail = proc.returncode, _tail(proc)
    status = f"pytest exited {rc}" + (f" ({_PYTEST_EXIT[rc]})" if rc in _PYTEST_EXIT else "")
    if data is None:
        last = tail.splitlines()[-1] if tail else "no output"
        return SuiteRun("pytest", rc, problem=f"{status} and wrote no test report: {last}", output_tail=tail)
    outcomes = {str(k): str(v) for k, v in data.get("outcomes", {}).items()}
    for nodeid in data.get("collected", []):
        outcomes.setdefault(nodeid, "not run")
    for nodeid in data.get("deselected", []):
        outcomes.setdefault(nodeid, "deselected")
    run = SuiteRun("pytest", rc, outcomes, dict(data.get("details", {})),
                   passed=sum(o == "passed" for o in outcomes.values()), output_tail=tail)
    if all(o in NOT_RUN for o in outcomes.values()):
        run.problem = f"ran no test ({run.counts_text()})"
        if rc not in (0, 5):  # pytest itself failed (an internal or usage error): say how
            run.problem += f"; {status}: {_error_line(tail)}"
    elif rc != 0 and not run.failing():
        run.problem = status
    return run


def _command_run(proc) -> SuiteRun:
    lines = (proc.stdout + "\n" + proc.stderr).splitlines()
    summary = next((ln.strip() for ln in reversed(lines) if _PASSED.search(ln)), None)
    passed = int(_PASSED.search(summary).group(1)) if summary else 0
    failures = sum(int(n) for n in _FAILURES.findall(summary)) if summary else 0
    run = SuiteRun("command", proc.returncode, passed=passed, output_tail=_tail(proc))
    if proc.returncode != 0:
        run.problem = f"exited {proc.returncode}"
    elif summary is None:
        run.problem = "printed no 'N passed' line"
    elif passed < 1 or failures:
        run.problem = f"printed {summary!r}"
    if run.problem:
        run.problem += f"; {COMMAND_RULE}"
    return run


def baseline_refusal(run: SuiteRun) -> str | None:
    """Why freeze refuses this run of the baseline's tests (one line naming the failing tests and
    their own error lines), or None when the baseline's tests count as passed."""
    failing = run.failing()
    if failing:
        more = f" (and {len(failing) - 3} more)" if len(failing) > 3 else ""
        return ("the baseline fails its tests, refusing to freeze: "
                + " | ".join(run.brief(nodeid) for nodeid in failing[:3]) + more)
    if run.problem:
        return f"refusing to freeze: the frozen test command {run.problem}"
    if run.passed < 1:
        return f"refusing to freeze: no frozen test passed on the baseline ({run.counts_text()})"
    return None


def judge(frozen: Mapping[str, Any] | None, run: SuiteRun) -> tuple[list[tuple[str, bool, str]], str]:
    """The gate's checks ``(name, ok, message)`` of ``run`` against the frozen test set
    (``Contract.test_set``) and the stage summary; any check not ok (or ``run.problem``) is red."""
    frozen = frozen or {"runner": run.runner, "tests": {}, "passed": 1}
    if run.runner == "command":
        least = int(frozen.get("passed", 1))
        problem = run.problem or (f"{run.passed} passed, fewer than the {least} at freeze"
                                  if run.passed < least else None)
        message = problem or f"{run.passed} passed ({least} at freeze)"
        return [("frozen tests", problem is None, message)], \
            (f"the frozen test command {problem}" if problem else f"frozen tests passed: {message}")
    checks: list[tuple[str, bool, str]] = []
    bad = []
    tests = dict(frozen.get("tests", {}))
    for nodeid, before in tests.items():
        now = run.outcomes.get(nodeid, "missing")
        ok = now == "passed" if before == "passed" else now not in FAILING
        text = now if now == before else f"{now} ({before} at freeze)"
        checks.append((nodeid, ok, "\n".join(filter(None, [text, run.detail_text(nodeid)]))))
        if not ok:
            bad.append(f"{nodeid} ({now})")
    for nodeid, now in run.outcomes.items():
        if nodeid not in tests and now not in NOT_RUN:  # a test new since freeze: it must not fail
            ok = now not in FAILING
            checks.append((nodeid, ok, "\n".join(filter(None, [f"{now} (not in the frozen test set)",
                                                                 run.detail_text(nodeid)]))))
            if not ok:
                bad.append(f"{nodeid} ({now}, new since freeze)")
    if run.problem:
        checks.append(("frozen tests", False, run.problem))
        if not bad or all(o in NOT_RUN for o in run.outcomes.values()):
            return checks, f"the frozen test command {run.problem}"
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        return checks, f"{len(bad)} frozen test(s) not passing: " + ", ".join(bad[:5]) + more
    must = sum(o == "passed" for o in tests.values())
    return checks, f"frozen tests passed: {must} of {must} that passed at freeze ({run.counts_text()})"


def _replaced_kind(name: str) -> str:
    """What a replaced function bound by the report plugin is: pytest's own runner, or a comparison."""
    return "pytest runner" if name.startswith("_pytest.") else "comparison"
