"""The registry of bundled kernels: explicit data, one module per op.

Importing this package arranges the backend first (the cpu backend needs ``TRITON_INTERPRET=1``
before any ``@triton.jit`` decorator runs), then imports each op module listed in ``_MODULES``.
"""

from __future__ import annotations

import importlib
import warnings

from ascendopt.errors import UsageError
from ascendopt.kernels.spec import KernelSpec

# Module names under ascendopt.kernels, each defining SPEC (or SPECS, a list, for multi-stage ops).
_MODULES: list[str] = ["causal_conv1d", "chunk_local_cumsum", "l2norm", "rms_norm", "gdn"]

_registry: dict[str, KernelSpec] | None = None


def _load() -> dict[str, KernelSpec]:
    global _registry
    if _registry is None:
        from ascendopt.device import backends

        backends.current().prepare_kernels()
        # Triton 3.7/3.8 warn on every make_block_ptr; Triton-Ascend kernels need block pointers
        # (the tensor-descriptor API does not lower for Ascend), so the warning is only noise here.
        warnings.filterwarnings("ignore", message="tl.make_block_ptr is deprecated")
        reg: dict[str, KernelSpec] = {}
        for mod_name in _MODULES:
            module = importlib.import_module(f"ascendopt.kernels.{mod_name}")
            specs = getattr(module, "SPECS", None) or [module.SPEC]
            for spec in specs:
                if spec.name in reg:
                    raise RuntimeError(f"duplicate kernel name {spec.name!r} in {mod_name}")
                reg[spec.name] = spec
        _registry = reg
    return _registry


def use(specs: dict[str, KernelSpec]) -> None:
    """Serve ``specs`` under their names: a pool's device in a fresh interpreter (a Ray actor) runs the kernels the
    command resolved, so both judge the same code (``gate.many.GateJob``)."""
    _load().update(specs)


def all_specs() -> list[KernelSpec]:
    return list(_load().values())


def get(name: str) -> KernelSpec:
    reg = _load()
    if name not in reg:
        raise UsageError(f"unknown kernel {name!r}", hint=f"bundled kernels: {', '.join(reg) or 'none'}")
    return reg[name]
