"""The frozen task contract (``.ascendopt/contract.yaml``, schema 1) <-> a frozen dataclass.

``ascendopt freeze`` writes it once; every later command reads it. The contract records what may
not change during the loop (workload, tolerances, frozen files with sha256, expected kernel names)
and the evidence freeze gathered (device fingerprint, git commit, baseline latency).

Tamper evidence: at freeze, ``integrity.fields`` stores a sha256 of each top-level field's
canonical JSON and ``integrity.digest`` one over all of them. ``verify_digest`` recomputes them
from the raw YAML *before* validation, so a hand edit is reported as an integrity violation
(exit 3) that names the field, even when the edited value would also fail validation.

Validation errors name the file and the dotted field: ``contract.yaml: tolerances.fwd.rtol: must be > 0``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ascendopt.contract.shapes import ShapeMix
from ascendopt.errors import ContractError, IntegrityError
from ascendopt.workspace import Workspace, read_yaml, write_yaml

KINDS = ("kernel", "exec-file")
MODES = ("fwd", "fwdbwd")
TOLERANCE_KEYS = ("fwd", "bwd")
# test-config: pytest configuration on the frozen tests' paths (conftest.py, pytest.ini, a config section) and
# any the baseline's test run loaded; test-support: a module or data file of the repository the baseline's
# test run imported or read that is not target code (judge.scope)
FILE_ROLES = ("test", "reference", "workload", "oracle", "test-config", "test-support")
# How the frozen test command is judged (ascendopt.judge.testset): pytest test by test, another command
# by its "N passed" summary line; and the outcomes a test may have had on the baseline.
TEST_RUNNERS = ("pytest", "command")
FROZEN_TEST_OUTCOMES = ("passed", "skipped", "xfailed", "xpassed")
# Iteration cap of the loop when freeze is given none: generous next to the stall (3 non-keep rounds)
# and directions (3 tried) criteria, which usually end a loop first.
DEFAULT_MAX_ROUNDS = 20
# Time limits in seconds of the child processes the loop starts, frozen with the task (``--timeout``
# overrides them per command): one run of the frozen tests, one call of the workload (load, warm-up,
# the correctness and kernel-hit calls), one timing phase (all interleaved pairs), one profile collection.
# Generous against the interpreter's speed on a CPU; their job is to end a hang, not to judge speed.
DEFAULT_TIMEOUTS: dict[str, float] = {"tests_s": 1800.0, "workload_s": 600.0, "timing_s": 1800.0,
                                      "profile_s": 1200.0}


def frozen_timeouts(timeout: float | None = None) -> dict[str, float]:
    """The limits freeze writes into a contract: ``DEFAULT_TIMEOUTS``, or freeze's ``--timeout`` (seconds)
    for every key, so the later commands of the task allow what its freeze needed."""
    return dict.fromkeys(DEFAULT_TIMEOUTS, float(timeout)) if timeout is not None else dict(DEFAULT_TIMEOUTS)
# Output equivalence of own code (``judge.equivalence``): the working tree's ``workload()`` outputs against
# the frozen commit's, elementwise |candidate - baseline| <= atol + rtol * |baseline|, per output dtype
# (integers and bool exact). The two sides are different kernels, so the limits allow what a legitimate
# change of tiling or accumulation order moves: bf16/fp16 outputs (accumulated in fp32, rounded once)
# two units in the last place at 1.0 (2 x 2**-7, 2 x 2**-10); fp32 outputs carry the reordered fp32
# accumulation itself, about sqrt(K) ulps for a K-term reduction (~1e-5 at K = 4096, rtol and, for
# values cancelled to near zero, atol); fp64 as torch.testing. A float dtype not listed gets two units
# in the last place at 1.0 as rtol and atol (``judge.equivalence.tolerance_for``). ``freeze
# --equivalence-tol`` overrides an entry; the table is frozen in the contract's ``equivalence``.
EQUIVALENCE_TOLERANCES: dict[str, dict[str, float]] = {
    "fp64": {"rtol": 1e-7, "atol": 1e-7},
    "fp32": {"rtol": 1e-5, "atol": 1e-5},
    "fp16": {"rtol": 2e-3, "atol": 1e-5},
    "bf16": {"rtol": 1.6e-2, "atol": 1e-5},
}
# Fields outside the digest: the digest itself and the schema marker read_yaml already checks.
_UNDIGESTED = ("integrity", "schema")


class _Fields:
    """Validation helpers that prefix every error with ``<file>: <dotted.path>:``."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, problem: str) -> ContractError:
        return ContractError(f"{self.source}: {path}: {problem}",
                             hint="restore the file or re-run `ascendopt freeze --force`")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a mapping, found {type(value).__name__}")
        return value

    def get(self, data: Mapping[str, Any], key: str, path: str, *, optional: bool = False) -> Any:
        if key not in data:
            if optional:
                return None
            raise self.fail(f"{path}{key}", "missing")
        return data[key]

    def text(self, value: Any, path: str, *, choices: tuple[str, ...] | None = None, empty: bool = False) -> str:
        if not isinstance(value, str) or (not empty and not value):
            raise self.fail(path, f"expected a non-empty string, found {value!r}")
        if choices and value not in choices:
            raise self.fail(path, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def positive(self, value: Any, path: str, *, allow_zero: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a number, found {value!r}")
        if value != value or (value < 0 if allow_zero else value <= 0):  # value != value: NaN
            raise self.fail(path, "must be >= 0" if allow_zero else "must be > 0")
        return float(value)

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(path, f"expected a list of non-empty strings, found {value!r}")
        return tuple(value)


@dataclass(frozen=True)
class Tolerance:
    """Correctness limits for one tensor class (``fwd`` outputs or ``bwd`` gradients).

    ``rtol``: largest relative-RMS error vs the fp32 oracle. ``lowp_factor``: for bf16/fp16 the
    kernel's error must also stay below ``lowp_factor`` x the error of torch's own computation in
    that dtype (Liger's rule; 2.0 by default).
    """

    rtol: float
    lowp_factor: float = 2.0


@dataclass(frozen=True)
class ShapeCase:
    """One entry of the frozen shape matrix: a preset name (or ``custom``) and its dims."""

    name: str
    dims: dict[str, Any]

    @property
    def varlen(self) -> bool:
        return "seqlens" in self.dims


@dataclass(frozen=True)
class Workload:
    """What is run. ``kind="kernel"``: a bundled kernel over ``shapes`` with ``config``;
    ``kind="exec-file"``: own code, ``exec_file`` defines ``workload()``, ``kernel_filter`` names
    the target kernel."""

    kind: str
    dtype: str | None = None
    mode: str | None = None
    kernel: str | None = None
    shapes: tuple[ShapeCase, ...] = ()
    varlen: bool = False
    config: dict[str, int] = field(default_factory=dict)
    exec_file: str | None = None
    kernel_filter: str | None = None


@dataclass(frozen=True)
class FrozenFile:
    """A file (or, for ``role: oracle``, a function's source as ``file::qualname``) and its sha256."""

    path: str
    role: str
    sha256: str


@dataclass(frozen=True)
class BaselineTiming:
    """Baseline latency of one shape case, ms per call (synchronized, see ascendopt.judge.bench)."""

    case: str
    median_ms: float
    p20_ms: float
    p80_ms: float
    cv: float
    n: int
    calls_per_sample: int = 1
    # ms per call the timed batches waited on a CPU's run queue (median; process.schedstats), where it was read:
    # what a loaded host added to the median at freeze (judge.engine.anchor_problem). None: not read, or a
    # contract frozen before it was recorded
    waited_ms: float | None = None


@dataclass(frozen=True)
class Contract:
    op: str
    entry_point: str
    backend: str
    device: dict[str, Any]  # fingerprint: device name, chip, core counts, versions
    workload: Workload
    tolerances: dict[str, Tolerance]  # "fwd" / "bwd"; empty for own code (its tests hold them)
    frozen_files: tuple[FrozenFile, ...]
    commands: dict[str, tuple[str, ...]]  # "validation" / "benchmark" as argv lists
    baseline: tuple[BaselineTiming, ...]
    expected_kernels: tuple[str, ...]
    kernels_seen: tuple[str, ...]
    metric_groups: tuple[str, ...]
    git: dict[str, Any]  # {"commit": sha or None, "dirty": bool}
    created_at: str
    max_rounds: int = DEFAULT_MAX_ROUNDS  # iteration cap of the loop (rounds.records.should_stop)
    timeouts: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))  # DEFAULT_TIMEOUTS' keys
    # own code: what the frozen test command did on the baseline; pytest: {"runner": "pytest",
    # "tests": {node id: outcome}}, another command: {"runner": "command", "passed": N}; None for a bundled kernel
    test_set: dict[str, Any] | None = None
    # own code: output equivalence vs the frozen commit (judge.equivalence): {"enabled": bool, "reason": why
    # it is off or None, "outputs": [names the baseline returned], "tolerances": {dtype: {"rtol", "atol"}},
    # optional "stored" (older contracts: sha256 of outputs freeze once stored; read, no longer used),
    # "inputs_changed": {name: message}};
    # None for a bundled kernel (its oracle check compares every output) and a contract frozen without it
    equivalence: dict[str, Any] | None = None
    # the Ascend lowering precheck of the baseline's kernels off-NPU (lint.precheck.loop_precheck): {"status":
    # "lowers" | "nothing" (own code launched no Triton kernel of the target) | "skipped" | "unavailable",
    # "verdict": one line, ...}; None on npu and in older contracts
    precheck: dict[str, Any] | None = None
    # the baseline's kernel census (judge.kernel_hit.kernel_census): launches and device time per kernel name in
    # one workload call (cpu: also the elements each processed), the call's device, wall and host time; the
    # gate's kernel-hit stage compares the candidate's with it. None in contracts frozen before it existed (the
    # comparison is then skipped, said)
    kernel_census: dict[str, Any] | None = None
    # own code: the target code, the repository files (or folders) a round is meant to change, relative to
    # the project root (``freeze --target``; default: what workload() imports from the repository,
    # judge.scope); everything else the frozen test run used is pinned. None: a bundled kernel, or a
    # contract frozen before the test run's scope was recorded
    targets: tuple[str, ...] | None = None
    # own code: the installed environment the baseline's tests ran in (judge.environment.record): {"identity":
    # digest of host and prefix, "startup": {file: sha256} (its *.pth and sitecustomize files), "modified":
    # {"DIST/PATH": sha256} (installed files the tests loaded that already differed from their RECORD)}; None
    # for a bundled kernel and in contracts frozen before it existed (the since-freeze check is then skipped)
    environment: dict[str, Any] | None = None
    # the served-shape mix (contract.shapes, ``freeze --shapes-from PROFILE`` / ``--shapes-file MIX.yaml``): the
    # buckets of input shapes the target kernel runs on in the model, weighted by device time. None: the
    # contract judges one shape (the workload's own), as every contract frozen before it existed
    shapes: ShapeMix | None = None
    # own code: the frozen tests' own calls of functions of the target code (judge.testcalls), replayed by every
    # gate's differential check in both workers: {"sha256": of the payload's bytes, "functions": {"module:qualname":
    # calls}, "tests": [node ids that made them], "tolerances": {dtype: {"rtol", "atol"}}, "payload": base64 of the
    # calls (judge.payload)}. None: no call
    # was recorded, a bundled kernel, or a contract frozen before it existed
    test_calls: dict[str, Any] | None = None

    @property
    def judges_one_shape(self) -> bool:
        """True when the contract has no served-shape mix: correctness and timing are judged on the one shape
        the workload makes (``inputs(seed)`` / ``workload()``), not per bucket of ``shapes``."""
        return self.shapes is None

    def timeout(self, key: str, override: float | None = None) -> float:
        """The limit in seconds for ``key`` (``tests_s``, ``workload_s``, ``timing_s``, ``profile_s``):
        ``override`` (a command's ``--timeout``) if given, else the frozen one, else the default."""
        if override is not None:
            return float(override)
        return float(self.timeouts.get(key, DEFAULT_TIMEOUTS[key]))

    @property
    def is_kernel(self) -> bool:
        return self.workload.kind == "kernel"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["workload"]["shapes"] = [{"name": s.name, "dims": _dims_out(s.dims)} for s in self.workload.shapes]
        data["frozen_files"] = [asdict(f) for f in self.frozen_files]
        # waited_ms absent where unread, so a contract frozen before it digests as it did
        data["baseline"] = [{k: v for k, v in asdict(b).items() if k != "waited_ms" or v is not None}
                            for b in self.baseline]
        data["commands"] = {k: list(v) for k, v in self.commands.items()}
        for key in ("expected_kernels", "kernels_seen", "metric_groups"):
            data[key] = list(data[key])
        if self.shapes is None:
            data.pop("shapes")  # absent, so a contract without a mix digests as before the field existed
        else:
            data["shapes"] = self.shapes.to_dict()
        if self.targets is None:
            data.pop("targets")  # absent, as in contracts frozen before it existed
        else:
            data["targets"] = list(self.targets)
        if self.test_calls is None:
            data.pop("test_calls")  # absent, as in contracts frozen before it existed
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "contract.yaml") -> Contract:
        """Validate a raw mapping; every error names ``source`` and the dotted field."""
        f = _Fields(source)
        workload = _workload(f, f.mapping(f.get(data, "workload", ""), "workload"))
        tolerances = {}
        for key, value in f.mapping(f.get(data, "tolerances", ""), "tolerances").items():
            path = f"tolerances.{key}"
            if key not in TOLERANCE_KEYS:
                raise f.fail(path, f"unknown key (expected {', '.join(TOLERANCE_KEYS)})")
            tol = f.mapping(value, path)
            tolerances[key] = Tolerance(
                rtol=f.positive(f.get(tol, "rtol", path + "."), f"{path}.rtol"),
                lowp_factor=f.positive(tol.get("lowp_factor", 2.0), f"{path}.lowp_factor"),
            )
        if workload.kind == "kernel" and "fwd" not in tolerances:
            raise f.fail("tolerances.fwd", "missing (a bundled kernel needs output tolerances)")
        if workload.kind == "kernel" and workload.mode == "fwdbwd" and "bwd" not in tolerances:
            raise f.fail("tolerances.bwd", "missing (mode fwdbwd checks gradients)")
        files = []
        for i, item in enumerate(_list(f, f.get(data, "frozen_files", ""), "frozen_files")):
            path = f"frozen_files[{i}]"
            item = f.mapping(item, path)
            sha = f.text(f.get(item, "sha256", path + "."), f"{path}.sha256")
            if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
                raise f.fail(f"{path}.sha256", "not a sha256 hex digest")
            files.append(FrozenFile(path=f.text(f.get(item, "path", path + "."), f"{path}.path"),
                                    role=f.text(f.get(item, "role", path + "."), f"{path}.role", choices=FILE_ROLES),
                                    sha256=sha))
        commands = {}
        for key, value in f.mapping(f.get(data, "commands", ""), "commands").items():
            commands[str(key)] = f.strings(value, f"commands.{key}")
        baseline = []
        for i, item in enumerate(_list(f, f.get(data, "baseline", ""), "baseline")):
            path = f"baseline[{i}]"
            item = f.mapping(item, path)
            vals = {k: f.positive(f.get(item, k, path + "."), f"{path}.{k}") for k in ("median_ms", "p20_ms", "p80_ms")}
            n = f.get(item, "n", path + ".")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise f.fail(f"{path}.n", f"expected a positive integer, found {n!r}")
            baseline.append(BaselineTiming(case=f.text(f.get(item, "case", path + "."), f"{path}.case"),
                                           cv=f.positive(f.get(item, "cv", path + "."), f"{path}.cv", allow_zero=True),
                                           n=n, calls_per_sample=int(item.get("calls_per_sample", 1)),
                                           waited_ms=None if item.get("waited_ms") is None else
                                           f.positive(item["waited_ms"], f"{path}.waited_ms", allow_zero=True),
                                           **vals))
        if not baseline:
            raise f.fail("baseline", "empty (freeze measures at least one case)")
        expected = f.strings(f.get(data, "expected_kernels", ""), "expected_kernels")
        if not expected:
            raise f.fail("expected_kernels", "empty (the kernel-hit check needs at least one name)")
        git = f.mapping(f.get(data, "git", ""), "git")
        max_rounds = data.get("max_rounds", DEFAULT_MAX_ROUNDS)
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise f.fail("max_rounds", f"expected a positive integer, found {max_rounds!r}")
        timeouts = dict(DEFAULT_TIMEOUTS)
        for key, value in f.mapping(data.get("timeouts", {}), "timeouts").items():
            if key not in DEFAULT_TIMEOUTS:
                raise f.fail(f"timeouts.{key}", f"unknown key (expected {', '.join(DEFAULT_TIMEOUTS)})")
            timeouts[key] = f.positive(value, f"timeouts.{key}")
        test_set = _test_set(f, data.get("test_set"), required=workload.kind == "exec-file")
        equivalence = _equivalence(f, data.get("equivalence"))
        return cls(
            op=f.text(f.get(data, "op", ""), "op"),
            entry_point=f.text(f.get(data, "entry_point", ""), "entry_point"),
            backend=f.text(f.get(data, "backend", ""), "backend", choices=("npu", "cuda", "cpu")),
            device=dict(f.mapping(f.get(data, "device", ""), "device")),
            workload=workload,
            tolerances=tolerances,
            frozen_files=tuple(files),
            commands=commands,
            baseline=tuple(baseline),
            expected_kernels=expected,
            kernels_seen=f.strings(f.get(data, "kernels_seen", ""), "kernels_seen"),
            metric_groups=f.strings(f.get(data, "metric_groups", ""), "metric_groups"),
            git=dict(git),
            created_at=f.text(f.get(data, "created_at", ""), "created_at"),
            max_rounds=max_rounds,
            timeouts=timeouts,
            test_set=test_set,
            equivalence=equivalence,
            precheck=_precheck(f, data.get("precheck")),
            kernel_census=_kernel_census(f, data.get("kernel_census")),
            targets=None if data.get("targets") is None else f.strings(data["targets"], "targets"),
            environment=_environment(f, data.get("environment")),
            shapes=None if data.get("shapes") is None else ShapeMix.from_dict(data["shapes"], source),
            test_calls=_test_calls(f, data.get("test_calls")),
        )


def _test_set(f: _Fields, value: Any, *, required: bool) -> dict[str, Any] | None:
    if value is None:
        if required:
            raise f.fail("test_set", "missing (own code records which frozen tests passed on the baseline)")
        return None
    ts = f.mapping(value, "test_set")
    runner = f.text(f.get(ts, "runner", "test_set."), "test_set.runner", choices=TEST_RUNNERS)
    if runner == "command":
        passed = f.get(ts, "passed", "test_set.")
        if isinstance(passed, bool) or not isinstance(passed, int) or passed < 1:
            raise f.fail("test_set.passed", f"expected a positive integer, found {passed!r}")
        return {"runner": runner, "passed": passed}
    tests = {}
    for nodeid, outcome in f.mapping(f.get(ts, "tests", "test_set."), "test_set.tests").items():
        path = f"test_set.tests[{nodeid!r}]"
        tests[f.text(nodeid, path)] = f.text(outcome, path, choices=FROZEN_TEST_OUTCOMES)
    if "passed" not in tests.values():
        raise f.fail("test_set.tests", "no test passed on the baseline")
    found: dict[str, Any] = {"runner": runner, "tests": tests}
    plugins = ts.get("plugins")
    if plugins is not None:  # the installed pytest plugins the frozen run loaded (a contract before them: none)
        if not isinstance(plugins, list) or not all(isinstance(p, str) and p for p in plugins):
            raise f.fail("test_set.plugins", f"expected a list of pytest plugin names, found {plugins!r}")
        found["plugins"] = list(plugins)
    return found


def _precheck(f: _Fields, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    record = dict(f.mapping(value, "precheck"))
    f.text(f.get(record, "status", "precheck."), "precheck.status",
           choices=("lowers", "fails", "nothing", "skipped", "unavailable"))
    f.text(f.get(record, "verdict", "precheck."), "precheck.verdict")
    return record


def _environment(f: _Fields, value: Any) -> dict[str, Any] | None:
    """``environment``: an identity, two maps of names to sha256 digests and the pinned variables (written by
    freeze only)."""
    if value is None:
        return None
    env = f.mapping(value, "environment")
    out: dict[str, Any] = {"identity": f.text(f.get(env, "identity", "environment."), "environment.identity")}
    for key in ("startup", "modified"):
        out[key] = {f.text(name, f"environment.{key}"): f.text(digest, f"environment.{key}.{name}", empty=True)
                    for name, digest in f.mapping(env.get(key, {}), f"environment.{key}").items()}
    if env.get("variables") is not None:  # the pinned variables' values at freeze (None: not set)
        out["variables"] = {f.text(name, "environment.variables"):
                            None if text is None else f.text(text, f"environment.variables.{name}", empty=True)
                            for name, text in f.mapping(env["variables"], "environment.variables").items()}
    return out


def _test_calls(f: _Fields, value: Any) -> dict[str, Any] | None:
    """``test_calls``: a payload with its digest, and the functions and tests it holds calls of."""
    if value is None:
        return None
    calls = dict(f.mapping(value, "test_calls"))
    for key in ("sha256", "payload"):
        f.text(f.get(calls, key, "test_calls."), f"test_calls.{key}")
    for name, count in f.mapping(f.get(calls, "functions", "test_calls."), "test_calls.functions").items():
        f.positive(count, f"test_calls.functions.{name}")
    calls["tests"] = list(f.strings(calls.get("tests", []), "test_calls.tests"))
    for dtype, tol in f.mapping(f.get(calls, "tolerances", "test_calls."), "test_calls.tolerances").items():
        for key, value in f.mapping(tol, f"test_calls.tolerances.{dtype}").items():
            f.positive(value, f"test_calls.tolerances.{dtype}.{key}", allow_zero=True)
    return calls


def _kernel_census(f: _Fields, value: Any) -> dict[str, Any] | None:
    """``kernel_census``: the times the gate compares must be numbers (a census is written by freeze only)."""
    if value is None:
        return None
    census = dict(f.mapping(value, "kernel_census"))
    for key in ("device_us", "wall_us", "host_us"):
        f.positive(f.get(census, key, "kernel_census."), f"kernel_census.{key}", allow_zero=True)
    for name, item in f.mapping(f.get(census, "kernels", "kernel_census."), "kernel_census.kernels").items():
        path = f"kernel_census.kernels.{name}"
        item = f.mapping(item, path)
        for key in ("calls", "device_us", "share"):
            f.positive(f.get(item, key, path + "."), f"{path}.{key}", allow_zero=True)
        if "elements" in item:  # absent in censuses frozen before the input-size signal, and off cpu
            f.positive(item["elements"], f"{path}.elements", allow_zero=True)
    return census


def _equivalence(f: _Fields, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    eq = f.mapping(value, "equivalence")
    enabled = f.get(eq, "enabled", "equivalence.")
    if not isinstance(enabled, bool):
        raise f.fail("equivalence.enabled", f"expected true or false, found {enabled!r}")
    reason = eq.get("reason")
    if not enabled or reason is not None:
        reason = f.text(reason, "equivalence.reason")  # off: the contract says why
    outputs = f.strings(eq.get("outputs", []), "equivalence.outputs")
    if enabled and not outputs:
        raise f.fail("equivalence.outputs", "empty (the check compares the outputs the baseline returned)")
    tolerances = {}
    for key, item in f.mapping(f.get(eq, "tolerances", "equivalence."), "equivalence.tolerances").items():
        path = f"equivalence.tolerances.{key}"
        if not isinstance(key, str) or not key.isidentifier():
            raise f.fail(path, "expected a dtype name (fp32, bf16, ...)")
        tol = f.mapping(item, path)
        unknown = sorted(set(tol) - {"rtol", "atol"})
        if unknown:
            raise f.fail(f"{path}.{unknown[0]}", "unknown key (expected rtol, atol)")
        tolerances[key] = {k: f.positive(f.get(tol, k, path + "."), f"{path}.{k}", allow_zero=True)
                           for k in ("rtol", "atol")}
    out = {"enabled": enabled, "reason": reason, "outputs": list(outputs), "tolerances": tolerances}
    probe = eq.get("value_probe", True)  # absent (frozen before the probe existed): on
    if not isinstance(probe, bool):
        raise f.fail("equivalence.value_probe", f"expected true or false, found {probe!r}")
    if not probe:
        out["value_probe"] = False
    if eq.get("stored") is not None:  # sha256 of the frozen outputs under <workspace>/outputs/ (judge.engine)
        out["stored"] = f.text(eq["stored"], "equivalence.stored")
    if eq.get("inputs_changed"):  # inputs the frozen commit's workload() writes in place: {name: message}
        out["inputs_changed"] = {str(k): str(v) for k, v in f.mapping(eq["inputs_changed"],
                                                                       "equivalence.inputs_changed").items()}
    return out


def _list(f: _Fields, value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise f.fail(path, f"expected a list, found {type(value).__name__}")
    return value


def _dims_out(dims: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dims.items()}


def _dims_in(f: _Fields, value: Any, path: str) -> dict[str, Any]:
    dims: dict[str, Any] = {}
    for key, v in f.mapping(value, path).items():
        if key == "seqlens":  # empty sequences (0) are legal test cases; all-empty is not
            if (not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                   for x in v) or sum(v) == 0):
                raise f.fail(f"{path}.seqlens", f"expected a list of integers >= 0 with tokens, found {v!r}")
            dims[key] = tuple(v)
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:  # 0 is a legal flag value (act: 0)
            raise f.fail(f"{path}.{key}", f"expected an integer >= 0, found {v!r}")
        else:
            dims[str(key)] = v
    return dims


def _workload(f: _Fields, w: Mapping[str, Any]) -> Workload:
    kind = f.text(f.get(w, "kind", "workload."), "workload.kind", choices=KINDS)
    if kind == "exec-file":
        return Workload(kind=kind,
                        exec_file=f.text(f.get(w, "exec_file", "workload."), "workload.exec_file"),
                        kernel_filter=f.text(f.get(w, "kernel_filter", "workload."), "workload.kernel_filter"))
    shapes = []
    for i, item in enumerate(_list(f, f.get(w, "shapes", "workload."), "workload.shapes")):
        path = f"workload.shapes[{i}]"
        item = f.mapping(item, path)
        shapes.append(ShapeCase(name=f.text(f.get(item, "name", path + "."), f"{path}.name"),
                                dims=_dims_in(f, f.get(item, "dims", path + "."), f"{path}.dims")))
    if not shapes:
        raise f.fail("workload.shapes", "empty (the shape matrix needs at least one case)")
    config = {}
    for key, value in f.mapping(w.get("config") or {}, "workload.config").items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise f.fail(f"workload.config.{key}", f"expected an integer, found {value!r}")
        config[str(key)] = value
    varlen = w.get("varlen", False)
    if not isinstance(varlen, bool):
        raise f.fail("workload.varlen", f"expected true or false, found {varlen!r}")
    return Workload(kind=kind,
                    kernel=f.text(f.get(w, "kernel", "workload."), "workload.kernel"),
                    dtype=f.text(f.get(w, "dtype", "workload."), "workload.dtype"),
                    mode=f.text(f.get(w, "mode", "workload."), "workload.mode", choices=MODES),
                    shapes=tuple(shapes), varlen=varlen, config=config)


# -- digest ------------------------------------------------------------------------------------


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def field_digests(data: Mapping[str, Any]) -> dict[str, str]:
    """sha256 (hex) of each top-level field's canonical JSON, the digest and schema excluded."""
    return {k: hashlib.sha256(_canonical(v)).hexdigest() for k, v in data.items() if k not in _UNDIGESTED}


def digest(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(field_digests(data))).hexdigest()


def stored_digest(data: Mapping[str, Any]) -> str:
    """The digest that names a contract in its round records (``RoundRecord.contract_digest``): the
    stored ``integrity.digest``, else (no integrity block) the digest of the fields as they are."""
    stored = data.get("integrity")
    if isinstance(stored, Mapping) and isinstance(stored.get("digest"), str):
        return stored["digest"]
    return digest(data)


def verify_digest(data: Mapping[str, Any], source: str = "contract.yaml") -> None:
    """Raise IntegrityError naming the first field whose value changed since freeze."""
    stored = data.get("integrity")
    if not isinstance(stored, Mapping) or not isinstance(stored.get("fields"), Mapping):
        raise IntegrityError(f"{source}: integrity: missing or malformed (the contract was edited by hand)",
                             hint="restore the file or re-run `ascendopt freeze --force`")
    now = field_digests(data)
    frozen = dict(stored["fields"])
    for name in sorted(set(now) | set(frozen)):
        if name not in frozen:
            raise IntegrityError(f"{source}: {name}: field added after freeze",
                                 hint="restore the file or re-run `ascendopt freeze --force`")
        if name not in now:
            raise IntegrityError(f"{source}: {name}: field removed after freeze",
                                 hint="restore the file or re-run `ascendopt freeze --force`")
        if now[name] != frozen[name]:
            raise IntegrityError(f"{source}: {name}: changed after freeze (sha256 mismatch)",
                                 hint="restore the file or re-run `ascendopt freeze --force`")
    if stored.get("digest") != digest(data):
        raise IntegrityError(f"{source}: integrity.digest: does not match the frozen fields",
                             hint="restore the file or re-run `ascendopt freeze --force`")


def sealed(contract: Contract) -> dict[str, Any]:
    """The contract as YAML data with its ``integrity`` block (what ``save`` writes)."""
    data = contract.to_dict()
    # Round-trip through JSON so the digest sees exactly the types YAML will give back on load.
    data = json.loads(json.dumps(data))
    data["integrity"] = {"digest": digest(data), "fields": field_digests(data)}
    return data


# -- workspace I/O -----------------------------------------------------------------------------


def save(ws: Workspace, contract: Contract) -> None:
    """Write ``contract.yaml`` atomically with a fresh digest (only ``freeze`` calls this).

    The sealed data is validated first, so a contract that would not load is never written.
    """
    data = sealed(contract)
    Contract.from_dict(data, ws.contract_path.name)
    write_yaml(ws.contract_path, data)


def load_raw(ws: Workspace) -> dict[str, Any]:
    """The contract file as a mapping. A file that is there but does not read as one (invalid YAML, truncated
    to nothing, another schema) is a contract integrity violation (exit 3), as a readable hand edit is:
    only ``freeze`` writes it, so the one repair is the same (restore it, or freeze again)."""
    ws.require_contract()
    try:
        data = read_yaml(ws.contract_path)
    except ContractError as exc:
        raise IntegrityError(f"{exc.message} (the frozen contract was truncated or edited by hand)",
                             hint="restore the file or re-run `ascendopt freeze --force`") from None
    if not isinstance(data.get("integrity"), Mapping):
        # freeze writes the integrity record last: without it the file was cut short (or never frozen), which
        # every command refuses alike, where a readable hand edit of a field is only reported by status
        raise IntegrityError(f"{ws.contract_path}: integrity: missing (the frozen contract was truncated, or not "
                             "written by `ascendopt freeze`)", hint="restore the file or re-run `ascendopt freeze "
                             "--force`")
    return data


def load(ws: Workspace, *, check_digest: bool = True) -> Contract:
    """Read and validate the contract; with ``check_digest`` a hand edit raises IntegrityError (exit 3)."""
    data = load_raw(ws)
    source = ws.contract_path.name
    if check_digest:
        verify_digest(data, source)
    return Contract.from_dict(data, source)
