"""``--devices N|LIST`` and ``--ray [ADDRESS]`` as one setting (``PoolOptions``), checked before any work starts,
and the back end they open (``open_pool``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ascendopt.errors import UsageError
from ascendopt.pool.devices import Device, parse_devices


@dataclass(frozen=True)
class PoolOptions:
    """``devices``: ``--devices`` as given (None: not given); ``ray``: ``--ray``'s address (None: not given;
    ``LOCAL_RAY``: a local Ray for the command, unless this process is already connected to one)."""

    devices: str | None = None
    ray: str | None = None

    @property
    def wanted(self) -> bool:
        return self.devices is not None or self.ray is not None

    def check(self, backend: str) -> list[Device] | None:
        """The local devices (``--devices``), or None for Ray (its cluster's devices; ``--devices`` N then caps
        how many); UsageError (exit 2) naming the bad value, before anything runs."""
        available = device_count(backend)
        if self.ray is not None:
            from ascendopt.pool import ray_pool

            ray_pool.check(self.ray)
            if self.devices is not None:
                parse_devices(self.devices, backend, None)
            return None
        if self.devices is None:
            return None
        return parse_devices(self.devices, backend, available)

    def describe(self) -> str:
        if self.ray is not None:
            return f"ray ({self.ray})" + (f", --devices {self.devices}" if self.devices else "")
        return f"--devices {self.devices}"


def device_count(backend: str) -> int | None:
    """How many devices of ``backend`` this host has (None: not counted; cpu slots are not bounded by it)."""
    from ascendopt.device import backends

    return backends.device_count(backend)


@contextlib.contextmanager
def open_pool(options: PoolOptions, job: Any, backend: str) -> Iterator[Any]:
    """The back end ``options`` asks for, serving ``job`` on ``backend`` (cpu|cuda|npu); closed on exit (every device
    process or actor it started is killed)."""
    if options.ray is not None:
        from ascendopt.pool import ray_pool

        count = len(parse_devices(options.devices, backend, None)) if options.devices else None
        pool = ray_pool.RayPool(options.ray, job, backend, count)
    else:
        from ascendopt.pool.local import LocalPool

        devices = options.check(backend) or []
        if not devices:
            raise UsageError("a pool needs --devices N|LIST or --ray [ADDRESS]")
        pool = LocalPool(devices, job, fork=backend == "cpu")
    try:
        yield pool
    finally:
        pool.close()
