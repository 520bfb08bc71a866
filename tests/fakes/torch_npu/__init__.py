"""A fake ``torch_npu`` for tests on machines without an Ascend NPU.

It mirrors the names and signatures of the real torch_npu 2.13.0 that ascendopt uses
(docs/profiler-formats.md §9 and §11.1): importing it attaches ``torch.npu`` with
``is_available, device_count, current_device, set_device, get_device_name,
get_device_properties, synchronize, Event``. Behaviour knobs (environment):

* ``FAKE_TORCH_NPU_MISSING_CANN=1``: import fails exactly like a wheel without CANN
  (``ImportError: libhccl.so: cannot open shared object file``).
* ``FAKE_TORCH_NPU_CHIP``: device name (default ``Ascend910B2``).

Every call is appended to ``CALLS`` as ``(name, args, kwargs)`` so tests can assert sequences.
"""

from __future__ import annotations

import os
import time
import types
from dataclasses import dataclass

if os.environ.get("FAKE_TORCH_NPU_MISSING_CANN") == "1":
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

import torch

__version__ = "2.13.0"
CALLS: list[tuple[str, tuple, dict]] = []


def _record(name, *args, **kwargs):
    CALLS.append((name, args, kwargs))


@dataclass
class _NPUDeviceProperties:
    """Fields of torch_npu's _NPUDeviceProperties (csrc/npu/Module.cpp)."""

    name: str
    total_memory: int
    cube_core_num: int
    vector_core_num: int
    L2_cache_size: int

    @property
    def multi_processor_count(self) -> int:
        return self.vector_core_num or self.cube_core_num


_CHIPS = {"Ascend910B2": (24, 48, 201326592), "Ascend910B3": (20, 40, 201326592), "Ascend910B4": (20, 40, 100663296)}


class Event:
    """torch.npu.Event(enable_timing=False, blocking=False, interprocess=False)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._t = None

    def record(self, stream=None):
        self._t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end_event: Event) -> float:
        return (end_event._t - self._t) * 1e3


def _chip() -> str:
    return os.environ.get("FAKE_TORCH_NPU_CHIP", "Ascend910B2")


npu = types.ModuleType("torch.npu")
npu._ascendopt_fake = True
npu.Event = Event
npu.is_available = lambda: (_record("is_available") or True)
npu.device_count = lambda: 1
npu.current_device = lambda: 0
npu.set_device = lambda device: _record("set_device", device)
npu.get_device_name = lambda device=None: _chip()
npu.synchronize = lambda device=None: _record("synchronize", device)


def get_device_properties(device=None):
    cube, vec, l2 = _CHIPS.get(_chip(), (24, 48, 201326592))
    return _NPUDeviceProperties(_chip(), 64 * 2**30, cube, vec, l2)


npu.get_device_properties = get_device_properties
torch.npu = npu
