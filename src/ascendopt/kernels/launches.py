"""The bundled kernels' launches, for lowering them without running them (docs/lowering.md).

Each function runs spec launchers on CPU tensors; the caller has ``ascendopt.device.lowering.recording``
active, so every ``kernel[grid](...)`` is recorded, never executed. ``scripts/lower_ascend.py`` records
every spec over its presets; ``ascendopt precheck``'s loop hook (``lint.precheck.loop_precheck``) records
one contract's shape cases at one configuration, in the triton-ascend child (as the request's
``recorder``). Runs in the triton-ascend environment: imports torch, never triton itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

# Presets whose launches the bundled check records: tiny (bulk + tail variants), realistic (UB-model tiles),
# varlen, the wide rows and the state-passing cases.
PRESET_PREFIXES = ("tiny", "realistic", "varlen", "wide", "widest", "states")


def _host_only() -> None:
    """Launchers compute grids and tiles from host facts only: the cpu backend, the interpreter left off."""
    from ascendopt.device import backends

    os.environ["ASCENDOPT_BACKEND"] = "cpu"
    os.environ.pop("TRITON_INTERPRET", None)
    backends.Backend.prepare_kernels = lambda self: None  # keep TRITON_INTERPRET off: we compile, not run


def run_case(spec, dims: Mapping[str, Any], dtype: str, mode: str, config: Mapping[str, Any]) -> None:
    """One launcher call of ``spec`` on CPU inputs of ``dims`` (recorded by the caller, not executed)."""
    import torch

    with torch.no_grad():
        inputs = spec.make_inputs(dict(dims), dtype, torch.device("cpu"), 0)
        spec.run(inputs, spec.config(dict(config)), mode)


def record_spec_launches(spec_names: set[str], prefixes: Sequence[str], current: dict) -> list[dict]:
    """Every spec's launchers (all, or ``spec_names``) over its presets named by ``prefixes``, with the
    defaults plus any ``extras["lowering_configs"]``. ``current`` is updated with ``spec, preset, mode,
    config`` before each case (the recorder attaches it to each launch). Returns host problems."""
    from ascendopt.kernels import all_specs

    _host_only()
    problems = []
    for spec in all_specs():
        if spec_names and spec.name not in spec_names:
            continue
        for preset in spec.shapes:
            if not preset.startswith(tuple(prefixes)):
                continue
            dims = spec.shape(preset).dims
            for mode in spec.modes:
                dtype = spec.dtypes[0]
                if spec.supports(dims, dtype, mode):
                    continue
                # Defaults, plus any configs a spec names for constexpr paths the defaults do not take.
                for config in [{}, *spec.extras.get("lowering_configs", [])]:
                    current.update(spec=spec.name, preset=preset, mode=mode, config=config)
                    try:
                        run_case(spec, dims, dtype, mode, config)
                    except Exception as exc:  # noqa: BLE001 - reported per spec, the others go on
                        problems.append({"spec": spec.name, "preset": preset, "mode": mode, "config": config,
                                         "error": f"launcher failed on the host: {type(exc).__name__}: {exc}"})
    return problems


def record_contract(request: Mapping[str, Any]) -> list[str]:
    """The precheck child's recorder for a frozen bundled kernel: ``request["spec"]`` at ``config`` over the
    contract's shape ``cases`` (dims mappings), ``dtype`` and ``mode``. Returns problems as lines."""
    from ascendopt import kernels

    _host_only()
    spec = kernels.get(request["spec"])
    problems = []
    for dims in request["cases"]:
        try:
            run_case(spec, dims, request["dtype"], request["mode"], request.get("config") or {})
        except Exception as exc:  # noqa: BLE001 - the launcher's own failure is reported, not raised
            problems.append(f"{spec.name} launcher failed on the host for {dict(dims)}: {type(exc).__name__}: {exc}")
    return problems
