"""A bundled kernel's spec as plain data: what ``ascendopt kernels`` lists and ``--json`` prints.

No ``@triton.jit`` code here (``device.backends.KERNEL_SUPPORT_MODULES`` names this module), so it may
be imported before the registry arranges the backend.
"""

from __future__ import annotations

from typing import Any

from ascendopt.kernels.spec import KernelSpec, dims_text


def describe_spec(spec: KernelSpec, *, detail: bool) -> dict[str, Any]:
    """Plain-data view of a ``KernelSpec``; ``detail`` adds per-preset support, UB model and cost.

    Detail, per preset: ``modes`` -> dtype -> "supported" or the reason it is not; when every mode
    supports the spec's first dtype, ``ub_model`` (each stage's tile at the default configuration,
    peak and budget in bytes of one vector core's UB) and ``cost`` (bytes moved and flops per mode).
    """
    from ascendopt.device import ub

    info: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "bound": spec.bound,
        "modes": list(spec.modes),
        "dtypes": list(spec.dtypes),
        "presets": {name: dims_text(p.dims) for name, p in spec.shapes.items()},
        "tunables": {name: {"default": t.default, "choices": list(t.choices), "doc": t.doc}
                     for name, t in spec.tunables.items()},
        "support": spec.extras.get("support", ""),
        "kernel_names": list(spec.kernel_names),
        "tolerances": dict(spec.tolerances),
        "peer": spec.extras.get("peer_name"),
    }
    if not detail:
        return info
    cfg = spec.config()
    presets = {}
    for name, preset in spec.shapes.items():
        entry: dict[str, Any] = {"dims": dims_text(preset.dims), "doc": preset.doc, "modes": {}}
        for mode in spec.modes:
            reasons = {dtype: spec.supports(preset.dims, dtype, mode) for dtype in spec.dtypes}
            entry["modes"][mode] = {dtype: reason or "supported" for dtype, reason in reasons.items()}
        dtype = spec.dtypes[0]
        if all(spec.supports(preset.dims, dtype, m) is None for m in spec.modes):
            stages = []
            ub_bytes = _ub_bytes()
            for stage in spec.ub_model(preset.dims, cfg, dtype):
                check = ub.check(stage.tile, stage.dtype, stage.multiplier, ub_bytes, stage.margin)
                stages.append({"stage": stage.stage, "tile": stage.tile, "dtype": stage.dtype,
                               "multiplier": stage.multiplier, "peak_bytes": check.peak_bytes,
                               "budget_bytes": check.budget_bytes, "safe": check.safe})
            entry["ub_model"] = {"dtype": dtype, "ub_bytes": ub_bytes, "stages": stages}
            entry["cost"] = {m: {"bytes": spec.cost(preset.dims, dtype, m).bytes,
                                 "flops": spec.cost(preset.dims, dtype, m).flops} for m in spec.modes}
        presets[name] = entry
    info["presets"] = presets
    return info


def _ub_bytes() -> int:
    """UB bytes per vector core of this backend's device (off-npu: the model chip's, predictions only)."""
    from ascendopt.device import backends

    return backends.current().info().ub_bytes
