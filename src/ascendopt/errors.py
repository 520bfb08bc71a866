"""One exception family for everything the user is meant to see.

Each class maps to one exit code of the design (README "Exit codes"). The CLI's error boundary
prints ``str(error)`` on one line and exits with ``error.exit_code``; anything that is not an
``AscendoptError`` is a bug and gets a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CORRECTNESS = 1  # outputs/gradients wrong, frozen tests fail, expected kernel did not run
    USAGE = 2  # bad option, bad input file, unknown name
    INTEGRITY = 3  # frozen contract or frozen files changed
    PERFORMANCE = 4  # measured regression against the baseline
    ENVIRONMENT = 5  # backend, device or profiler not available
    # performance cannot be vouched for: the noise band stayed wider than DecisionRule.max_band (5 %), or the
    # speedup is implausible (> 5x reproduced, or under the roofline floor) and no reason accepted it
    INCONCLUSIVE = 6


class AscendoptError(Exception):
    """An expected failure with a one-line message that says what and where."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class UsageError(AscendoptError):
    """Bad option value, unknown kernel/tunable/metric group, malformed input."""

    exit_code = ExitCode.USAGE


class ProfileError(UsageError):
    """A profile folder or file that cannot be read: names the file and the problem."""


class ContractError(UsageError):
    """A contract or round file that does not validate (names the file and field)."""


class IntegrityError(AscendoptError):
    """A frozen file or frozen contract field changed since `ascendopt freeze`."""

    exit_code = ExitCode.INTEGRITY


class CorrectnessError(AscendoptError):
    """Wrong results, failing frozen tests, or the expected kernel did not run."""

    exit_code = ExitCode.CORRECTNESS


class RegressionError(AscendoptError):
    """The candidate is measurably slower than the baseline."""

    exit_code = ExitCode.PERFORMANCE


class InconclusiveError(AscendoptError):
    """The performance measurement cannot tell: its noise band stayed wider than ``DecisionRule.max_band``
    after the extra pairs (not a pass: the noise could hide a regression), or its speedup is implausible
    (``bench.implausible_reason``) and no ``--accept-implausible`` reason was given."""

    exit_code = ExitCode.INCONCLUSIVE


class EnvironmentProblem(AscendoptError):
    """A backend, device, profiler or tool that is not available here."""

    exit_code = ExitCode.ENVIRONMENT


class DeviceFault(EnvironmentProblem):
    """A kernel broke the device (an illegal memory access, ...): nothing more can run in this process."""

    def __init__(self, message: str, *, config: dict | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.config = dict(config or {})
