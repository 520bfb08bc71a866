"""The devices of a pool: ``--devices N|LIST`` parsed, and what a device process is told about its device.

A device is named ``<backend>:<index>`` (``npu:3``, ``cuda:0``, ``cpu:1``); the name is what progress, the round
record and a quarantine name. Its process sees only its device (``VISIBLE_ENV``: one index, so that device is
index 0 inside it); on cpu a "device" is a slot of the host's cores: with at least as many usable cores as slots,
each slot is pinned to its own cores (``os.sched_setaffinity``), else the slots share them (said in ``note``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ascendopt.errors import UsageError

# What a device process is told its device's name through (the job's code and a test may read it: ``current``)
DEVICE_ENV = "ASCENDOPT_POOL_DEVICE"
# The variable that makes a device process see one device only, by backend (cpu: none, the cores are pinned)
VISIBLE_ENV = {"cuda": "CUDA_VISIBLE_DEVICES", "npu": "ASCEND_RT_VISIBLE_DEVICES"}
# What ``--ray`` given without an address means: a Ray started for this command on this host (or the one this
# process is connected to already)
LOCAL_RAY = "local"
# The most devices --devices N takes: more than any server holds (an Ascend server has 8 NPUs, a node 16 GPUs at
# most); beyond it a typo (``--devices 800``) would start hundreds of processes
MAX_DEVICES = 64


@dataclass(frozen=True)
class Device:
    """One device of a pool: ``name`` (``cpu:1``), its ``index`` on the host, ``cpus`` the cores its process is
    pinned to (cpu backend; empty: not pinned), ``env`` what its process's environment gets."""

    name: str
    index: int
    cpus: tuple[int, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def parse_devices(text: str, backend: str, available: int | None = None) -> list[Device]:
    """``--devices`` (``N``: the first N devices; ``LIST``: ``0,2,3``) on ``backend`` (cpu|cuda|npu) -> the devices.
    ``available``: how many the host has (None: not known, cpu). UsageError (exit 2) naming the value otherwise."""
    raw = text.strip()
    try:
        if "," in raw:
            indices = [int(part) for part in raw.split(",")]
            if any(i < 0 for i in indices):
                raise ValueError(raw)
            if len(set(indices)) != len(indices):
                raise UsageError(f"--devices {text}: a device is listed twice")
        else:
            count = int(raw)
            if count < 1:
                raise UsageError(f"--devices {text}: must be >= 1 device (a count N, or a list of device indices "
                                 "such as 0,1)")
            indices = list(range(count))
    except ValueError:
        raise UsageError(f"--devices {text}: not a count or a list of device indices (e.g. 2, or 0,1,3)") from None
    if len(indices) > MAX_DEVICES:
        raise UsageError(f"--devices {text}: {len(indices)} devices, more than {MAX_DEVICES}")
    if available is not None and max(indices) >= available:
        raise UsageError(f"--devices {text}: this host has {available} {backend} device(s) (indices 0-"
                         f"{available - 1})")
    return [device(backend, i, len(indices), k) for k, i in enumerate(indices)]


def device(backend: str, index: int, count: int, position: int) -> Device:
    """Device ``index``, the ``position``-th of ``count`` in its pool, on ``backend``."""
    name = f"{backend}:{index}"
    env = {DEVICE_ENV: name}
    if backend in VISIBLE_ENV:
        env[VISIBLE_ENV[backend]] = str(index)
        return Device(name, index, (), env)
    return Device(name, index, core_set(position, count), env)


def core_set(position: int, count: int) -> tuple[int, ...]:
    """The cores slot ``position`` of ``count`` is pinned to: the usable cores dealt out in order, one share each;
    empty (not pinned) where there are fewer cores than slots or the platform cannot pin."""
    if not hasattr(os, "sched_getaffinity"):
        return ()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < count:
        return ()
    share = len(cores) // count
    return tuple(cores[position * share:(position + 1) * share])


def forwarded_env() -> dict[str, str]:
    """What a device's environment gets from the command's where it does not inherit it (a spawned process, a Ray
    actor): the backend choice and the interpreter flag a kernel needs before its module is imported
    (``backends.child_env``), and every ``ASCENDOPT_*`` setting (the model chip, the UB size, ...)."""
    from ascendopt.device import backends

    env = backends.child_env(kernels=True)
    return {k: v for k, v in env.items() if k.startswith("ASCENDOPT_") or k == "TRITON_INTERPRET"}


def current() -> str | None:
    """The name of the device this process serves in a pool (``DEVICE_ENV``), None outside a pool."""
    return os.environ.get(DEVICE_ENV) or None


def enter(dev: Device) -> None:
    """In a device process, before the job's code runs: its environment and its cores."""
    os.environ.update(dev.env)
    if dev.cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, dev.cpus)
