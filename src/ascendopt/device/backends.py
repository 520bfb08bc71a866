"""Backends: ``npu`` (torch_npu + triton-ascend), ``cuda`` (torch + triton), ``cpu`` (Triton interpreter).

Nothing here runs at import time. ``detect()`` imports torch (and torch_npu, lazily, inside a
function) only when called. ``select()`` records the CLI's ``--backend`` choice in this module (it
writes no environment variable) so that later code (kernel registry, collectors, bench) use the
same backend via ``current()``; a child process gets the choice explicitly, in the environment
``child_env()`` builds for it.

Why the torch_npu dance: with torch_npu installed but CANN not sourced, torch's backend autoload
makes ``import torch`` itself fail (docs/install.md §2.2). So before the first
``import torch`` on such a host we set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` and import torch_npu
ourselves, catching (ImportError, OSError, RuntimeError) and turning them into a reason.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ascendopt.device.config import chip_facts, chip_key, chips, default_model_chip, user_chip
from ascendopt.errors import EnvironmentProblem, UsageError

BACKENDS = ("npu", "cuda", "cpu")
# Kernel-package modules that hold no @triton.jit code (importing them early is harmless).
KERNEL_SUPPORT_MODULES = frozenset({"ascendopt.kernels.spec", "ascendopt.kernels.describe", "ascendopt.kernels._lib",
                                    "ascendopt.kernels._lib.common"})


def jit_modules_loaded() -> list[str]:
    """Bundled-kernel modules already imported whose ``@triton.jit`` decorators have run."""
    return [m for m in sys.modules if m.startswith("ascendopt.kernels.") and m not in KERNEL_SUPPORT_MODULES]


@dataclass(frozen=True)
class DeviceInfo:
    """What the tool knows about the device. Counts are per device; ``ub_bytes`` per vector core."""

    backend: str
    device: str  # torch device string: "npu:0", "cuda:0", "cpu"
    name: str  # as the device reports it
    chip: str | None  # key in configs/chips.yaml used for facts not read from the device
    cube_cores: int  # NPU: AI (cube) cores = num_aicore; CUDA: SMs; CPU: interpreter "cores"
    vector_cores: int  # NPU: num_vectorcore; CUDA: SMs; CPU: interpreter "cores"
    cores_source: str
    ub_bytes: int  # NPU: the device's UB; elsewhere the UB of the model chip (predictions only)
    ub_source: str
    ub_enforced: bool  # True only on npu: a tile over UB fails to compile there
    hbm_gbs: float | None  # peak memory bandwidth, GB/s (from chips.yaml)
    versions: dict[str, str | None] = field(default_factory=dict)

    def cores_for(self, bound_pipe: str) -> int:
        """Core count for a 1D core grid: cube-bound kernels use cube cores, all others vector cores."""
        return self.cube_cores if bound_pipe == "cube" else self.vector_cores


@dataclass(frozen=True)
class Backend:
    name: str
    reason: str  # why this backend was chosen (auto detection) or "explicit --backend X"

    # -- torch access -------------------------------------------------------------------------
    def torch_device(self):
        import torch

        return torch.device({"npu": "npu:0", "cuda": "cuda:0", "cpu": "cpu"}[self.name])

    def synchronize(self) -> None:
        if self.name == "cpu":
            return
        import torch

        getattr(torch, self.name).synchronize()

    def timer(self) -> Timer:
        return Timer(self)

    def hold_device(self, ms: float) -> bool:
        """Queue about ``ms`` of idle work on the device ahead of what the host enqueues next.

        Why: a timed batch of calls is meant to measure device time, but when the host needs longer
        to launch a call than the device needs to run it, events on an idle device measure the
        host's launch time instead, and its jitter becomes timing noise. With the device held
        busy while the host enqueues the batch, the batch runs back to back on the device.
        Only cuda can do this (``torch.cuda._sleep``, a spin kernel of a given clock-cycle count);
        elsewhere, or with ``ASCENDOPT_HOLD_DEVICE=0``, returns False and does nothing.
        """
        if self.name != "cuda" or ms <= 0 or os.environ.get("ASCENDOPT_HOLD_DEVICE", "1") == "0":
            return False
        import torch

        torch.cuda._sleep(int(ms * _sleep_cycles_per_ms()))
        return True

    def info(self) -> DeviceInfo:
        # Reading device facts imports triton (versions); on cpu arrange the interpreter first so a
        # kernel module imported afterwards is decorated for it.
        self.prepare_kernels()
        return _device_info(self.name)

    def prepare_kernels(self) -> None:
        """Arrange the environment before any ``@triton.jit`` kernel module is imported.

        The interpreter flag only takes effect if set before the decorators run
        (docs/install.md §1.3), so a late switch is an error, not a silent no-op.
        """
        if self.name != "cpu":
            return
        if os.environ.get("TRITON_INTERPRET") == "1":
            return
        already = jit_modules_loaded()
        if already:
            raise EnvironmentProblem(
                "the cpu backend needs TRITON_INTERPRET=1 before kernel modules are imported, "
                f"but {already[0]} is already loaded",
                hint="set TRITON_INTERPRET=1 in the environment",
            )
        os.environ["TRITON_INTERPRET"] = "1"


class Timer:
    """Device timer: events on npu/cuda, synchronize + perf_counter on cpu. Times in ms."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self._events = None
        if backend.name in ("npu", "cuda"):
            import torch

            mod = getattr(torch, backend.name)
            self._events = (mod.Event(enable_timing=True), mod.Event(enable_timing=True))

    def start(self) -> None:
        if self._events is not None:
            self._events[0].record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Stop and return elapsed milliseconds (synchronizes the device)."""
        if self._events is not None:
            self._events[1].record()
            self._events[1].synchronize()
            return float(self._events[0].elapsed_time(self._events[1]))
        return (time.perf_counter() - self._t0) * 1e3


# Device faults after which the CUDA context (or the NPU stream) is unusable for the rest of the
# process: every later call fails with the same error, so a search or a gate must stop, not go on.
_STICKY_FAULTS = ("illegal memory access", "misaligned address", "unspecified launch failure",
                  "device-side assert", "illegal instruction", "hardware exception")


def sticky_device_fault(exc: BaseException) -> bool:
    """True when ``exc`` reports a device fault that poisons the context (see ``_STICKY_FAULTS``)."""
    text = str(exc).lower()
    return any(marker in text for marker in _STICKY_FAULTS)


@cache
def _sleep_cycles_per_ms() -> float:
    """Clock cycles of ``torch.cuda._sleep`` per ms on this device. Taken from the fastest of three
    timed spins (the highest clock seen), so a hold lasts at least the time asked unless the clock
    later rises above that."""
    import torch

    cycles = 2_000_000
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        stop.synchronize()
        best = min(best, float(start.elapsed_time(stop)))
    return cycles / max(best, 1e-3)


# -- detection ---------------------------------------------------------------------------------

_selected: Backend | None = None
_explicit: str | None = None  # the CLI's --backend (typer also fills it from $ASCENDOPT_BACKEND)


def _import_torch():
    """Import torch; on a host with torch_npu but no CANN keep torch's autoload from crashing it."""
    if "torch" not in sys.modules and importlib.util.find_spec("torch_npu") is not None:
        if not (os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")):
            os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    try:
        import torch
    except (ImportError, OSError, RuntimeError) as exc:
        raise EnvironmentProblem(
            f"import torch failed: {_first_line(exc)}",
            hint="if torch_npu is installed without CANN, source set_env.sh or set TORCH_DEVICE_BACKEND_AUTOLOAD=0",
        ) from None
    return torch


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def probe(name: str) -> str | None:
    """Return None if backend ``name`` can work here, else the reason it cannot."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}", hint=f"known backends: {', '.join(BACKENDS)}")
    try:
        torch = _import_torch()
    except EnvironmentProblem as exc:
        return str(exc)
    if name == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            return "torch_npu is not installed (see docs/ascend-install.md)"
        try:
            importlib.import_module("torch_npu")
        except (ImportError, OSError, RuntimeError) as exc:
            return f"torch_npu failed to import ({_first_line(exc)}); source the CANN set_env.sh first"
        npu = getattr(torch, "npu", None)
        if npu is None or not npu.is_available():
            return "torch_npu imported but torch.npu.is_available() is False (no NPU visible)"
        return None
    if name == "cuda":
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False (no CUDA device or a CPU build of torch)"
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed (pip install 'ascendopt[triton]')"
        return None
    # cpu: the interpreter needs upstream triton (triton-ascend's interpreter lacks Ascend ops)
    if importlib.util.find_spec("triton") is None:
        return ("triton is not installed (pip install 'ascendopt[triton]'); "
                "the cpu backend runs kernels in its interpreter")
    return None


def detect(explicit: str | None = None) -> Backend:
    """The explicit backend if it works (else EnvironmentProblem, exit 5), or auto: npu > cuda > cpu."""
    if explicit:
        reason = probe(explicit)
        if reason is not None:
            raise EnvironmentProblem(
                f"backend {explicit!r} is not available: {reason}", hint=f"known backends: {', '.join(BACKENDS)}"
            )
        return Backend(explicit, f"explicit --backend {explicit}")
    skipped = []
    for name in BACKENDS:
        reason = probe(name)
        if reason is None:
            why = "auto-detected" + (f" ({'; '.join(skipped)})" if skipped else "")
            return Backend(name, why)
        skipped.append(f"{name}: {reason}")
    raise EnvironmentProblem("no backend can run here: " + "; ".join(skipped))


def select(explicit: str | None) -> None:
    """Record the CLI's choice; ``current()`` resolves it lazily (so --help stays torch-free).

    The choice stays in this process: child processes receive it through ``child_env()``.
    """
    global _selected, _explicit
    _selected = None
    if explicit and explicit not in BACKENDS:
        raise UsageError(f"unknown backend {explicit!r}", hint=f"known backends: {', '.join(BACKENDS)}")
    _explicit = explicit or None


def chosen() -> str | None:
    """The backend asked for, unresolved: the selected one, else ``$ASCENDOPT_BACKEND`` (how a child
    started with ``child_env()``, or a script, asks), else None (auto-detection)."""
    return _explicit or os.environ.get("ASCENDOPT_BACKEND") or None


def current() -> Backend:
    """The backend of this process: ``chosen()`` (--backend or ``$ASCENDOPT_BACKEND``) or auto-detection."""
    global _selected
    if _selected is None:
        _selected = detect(chosen())
    return _selected


def device_count(name: str) -> int | None:
    """Devices of backend ``name`` this host shows (``--devices`` is checked against it): torch.npu's or torch.cuda's
    count, None on cpu (its pool's "devices" are core slots) or where it cannot be read."""
    if name == "cpu":
        return None
    torch = _import_torch()
    try:
        if name == "npu":
            importlib.import_module("torch_npu")
            return int(torch.npu.device_count())
        return int(torch.cuda.device_count())
    except Exception:  # noqa: BLE001 - a count that cannot be read leaves --devices unchecked
        return None


def child_env(base: dict[str, str] | None = None, *, kernels: bool = False) -> dict[str, str]:
    """The environment for a child process that must use this process's backend choice.

    A copy of ``base`` (default ``os.environ``) with ``ASCENDOPT_BACKEND`` set to the selected
    backend when one was selected; without a selection the child detects the backend as this
    process does (``$ASCENDOPT_BACKEND`` already in the environment passes on unchanged).
    ``kernels``: the child imports Triton kernels of its own (a user's tests), so on the cpu backend
    it gets ``TRITON_INTERPRET=1``: the flag must be set before their decorators run.
    """
    env = dict(os.environ if base is None else base)
    if _explicit:
        env["ASCENDOPT_BACKEND"] = _explicit
    if kernels and current().name == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def reset() -> None:
    """Forget the selected and the resolved backend and the device facts (tests; the CLI per call)."""
    global _selected, _explicit
    _selected = None
    _explicit = None
    _device_info.cache_clear()


# -- device properties -------------------------------------------------------------------------


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for mod in ("torch", "triton", "torch_npu"):
        m = sys.modules.get(mod)
        if m is None and mod != "torch_npu":
            try:
                m = importlib.import_module(mod)
            except Exception:  # noqa: BLE001 - a version probe must never fail the command
                m = None
        out[mod] = getattr(m, "__version__", None) if m is not None else None
    out["cann"] = _cann_version()
    out["python"] = sys.version.split()[0]
    return out


def _cann_version() -> str | None:
    home = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    if not home:
        return None
    for rel in ("version.cfg", "compiler/version.info", "version.info"):
        path = os.path.join(home, rel)
        if os.path.exists(path):
            for line in open(path, encoding="utf-8", errors="replace"):
                if "version" in line.lower() and "=" in line:
                    return line.split("=", 1)[1].strip()
    return os.path.basename(os.path.realpath(home))


def _ub_override() -> int | None:
    value = os.environ.get("ASCENDOPT_UB_BYTES")
    if not value:
        return None
    if not value.isdigit() or int(value) <= 0:
        raise UsageError(f"ASCENDOPT_UB_BYTES={value!r}: must be a positive integer number of bytes")
    return int(value)


def _npu_cores(torch) -> tuple[int | None, int | None, str]:
    """num_aicore / num_vectorcore: triton-ascend's driver first, then torch.npu properties."""
    try:
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(torch.npu.current_device())
        return int(props["num_aicore"]), int(props["num_vectorcore"]), "triton-ascend get_device_properties"
    except Exception:  # noqa: BLE001 - fall through to the next source, reported in cores_source
        pass
    try:
        props = torch.npu.get_device_properties(torch.npu.current_device())
        cube = getattr(props, "cube_core_num", None)
        vec = getattr(props, "vector_core_num", None)
        if cube:
            return int(cube), int(vec or 2 * cube), "torch.npu.get_device_properties"
    except Exception:  # noqa: BLE001
        pass
    return None, None, "configs/chips.yaml"


@cache
def _device_info(name: str) -> DeviceInfo:
    torch = _import_torch()
    model_chip = user_chip() or default_model_chip()  # an unknown $ASCENDOPT_CHIP is exit 2 on every backend
    override = _ub_override()
    if name == "npu":
        dev = torch.npu.current_device()
        device_name = str(torch.npu.get_device_name(dev))
        try:
            chip = chip_key(device_name)
            facts = chips()[chip]
        except UsageError:
            facts, chip = {}, None
        cube, vec, source = _npu_cores(torch)
        if cube is None:
            cube, vec = facts.get("cube_cores"), facts.get("vector_cores")
            if cube is None:
                raise EnvironmentProblem(
                    f"cannot read the core counts of {device_name!r} and it is not in configs/chips.yaml")
        if override:
            ub, ub_source = override, "ASCENDOPT_UB_BYTES"
        elif facts.get("ub_bytes"):
            ub, ub_source = int(facts["ub_bytes"]), f"configs/chips.yaml ({chip})"
        else:
            raise EnvironmentProblem(f"UB size of {device_name!r} unknown", hint="set ASCENDOPT_UB_BYTES")
        return DeviceInfo("npu", f"npu:{dev}", device_name, chip, cube, vec, source, ub, ub_source, True,
                          facts.get("hbm_gbs"), _versions())
    model = chip_facts(model_chip)  # a known chip: user_chip checked the name
    if not model.get("ub_bytes"):
        raise UsageError(f"ASCENDOPT_CHIP={model_chip!r}: no UB size in configs/chips.yaml",
                         hint="name an Ascend chip, e.g. Ascend910B2")
    ub = override or int(model["ub_bytes"])
    ub_source = ("ASCENDOPT_UB_BYTES" if override
                 else f"modelled for {model_chip} (predictions only; not enforced on {name})")
    if name == "cuda":
        props = torch.cuda.get_device_properties(0)
        try:
            facts = chip_facts(props.name)
        except UsageError:
            facts = {}
        sms = int(props.multi_processor_count)
        return DeviceInfo("cuda", "cuda:0", props.name, model_chip, sms, sms, "torch.cuda multi_processor_count",
                          ub, ub_source, False, facts.get("hbm_gbs"), _versions())
    facts = chip_facts("interpreter")
    return DeviceInfo("cpu", "cpu", "cpu (Triton interpreter)", model_chip, int(facts["cube_cores"]),
                      int(facts["vector_cores"]), "configs/chips.yaml (interpreter)", ub, ub_source, False,
                      None, _versions())


def describe(backend: Backend) -> dict[str, Any]:
    """Everything `ascendopt env` reports, as plain data."""
    info = backend.info()
    return {
        "backend": backend.name,
        "reason": backend.reason,
        "device": info.device,
        "name": info.name,
        "chip_model": info.chip,
        "cube_cores": info.cube_cores,
        "vector_cores": info.vector_cores,
        "cores_source": info.cores_source,
        "ub_bytes": info.ub_bytes,
        "ub_source": info.ub_source,
        "ub_enforced": info.ub_enforced,
        "hbm_gbs": info.hbm_gbs,
        "versions": info.versions,
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
    }

