"""One ``@triton.autotune`` config pinned in a worker, so a screening child times that config alone.

``optimize-round --auto`` on own code screens a kernel's configs (``tune.autotune`` finds them,
``rounds.auto`` screens them): each config runs in a judge's worker (``judge.worker``) whose environment
carries ``PIN_ENV`` (``pin_env``). Before the workload's module code runs, the worker calls ``install_pin``,
which replaces ``triton.autotune`` so that the named kernel gets only the chosen config (Triton's autotuner
does not benchmark a list of one). It lives in the judge because the worker installs it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

PIN_ENV = "ASCENDOPT_PIN_AUTOTUNE"  # {"kernel": name, "index": i, "count": n}: set in a screening child


@dataclass
class Pin:
    """What a screening child was asked to pin, and whether the workload's module code reached it."""

    kernel: str
    index: int
    count: int
    applied: list[str] = field(default_factory=list)  # kernels pinned (a name may be decorated twice)


def pin_env(kernel: str, index: int, count: int) -> dict[str, str]:
    """The environment a child needs to run with ``kernel``'s config ``index`` of ``count`` pinned."""
    return {PIN_ENV: json.dumps({"kernel": kernel, "index": index, "count": count})}


def install_pin() -> Pin | None:
    """In a child with ``PIN_ENV`` set: make ``triton.autotune`` give the named kernel only the chosen
    config, before the workload's module code runs (so ``@triton.autotune`` and ``from triton import
    autotune`` both see it). None when the variable is unset."""
    raw = os.environ.get(PIN_ENV)
    if not raw:
        return None
    wanted = json.loads(raw)
    pin = Pin(str(wanted["kernel"]), int(wanted["index"]), int(wanted["count"]))

    import triton
    from triton.runtime import autotuner

    original = autotuner.autotune

    def autotune(*args: Any, **kwargs: Any):
        configs = kwargs.get("configs", args[0] if args else None)

        def decorate(fn):
            name = getattr(getattr(fn, "fn", fn), "__name__", None)
            if name != pin.kernel:
                return original(*args, **kwargs)(fn)
            if configs is None or len(configs) != pin.count:
                from ascendopt.errors import UsageError

                raise UsageError(f"@triton.autotune of {name}: {len(configs or [])} configs at run time, "
                                 f"{pin.count} in the source: the configs list is not the literal one read")
            pin.applied.append(name)
            one = [configs[pin.index]]
            if "configs" in kwargs:
                return original(*args, **{**kwargs, "configs": one})(fn)
            return original(one, *args[1:], **kwargs)(fn)

        return decorate

    triton.autotune = autotune
    autotuner.autotune = autotune
    return pin
