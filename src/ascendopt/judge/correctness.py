"""Correctness of a bundled kernel: outputs and gradients vs the fp32 oracle, with NaN poisoning.

For one shape case the kernel runs with its outputs NaN-poisoned (``kernels._lib.common.nan_poisoning``:
``alloc`` fills new floating outputs with NaN, so any element the kernel never writes stays NaN
and fails). Each returned tensor is compared with the spec's fp32 reference:

* ``err_ratio`` = relative RMS error ``rms(kernel - ref) / rms(ref)`` (scale-free; fla's
  ``get_err_ratio``), with ``max_abs`` = ``max |kernel - ref|`` reported beside it;
* limit 1: ``err_ratio <= rtol`` from the contract (``tolerances.fwd`` for outputs,
  ``tolerances.bwd`` for gradients ``d<input>``);
* limit 2, low precision only (bf16/fp16 outputs): the reference is also evaluated on the
  low-precision inputs and rounded to the output dtype — "torch's own bf16 computation" — and
  the kernel must satisfy ``err_ratio <= lowp_factor * max(torch_ratio, unit roundoff)``
  (Liger's rule, factor 2). The unit-roundoff floor keeps the rule meaningful when torch's own
  result is exact.

Nothing here returns a bare bool: the caller gets one ``TensorReport`` per tensor; ``cli.render``
prints them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ascendopt.contract.model import Tolerance
from ascendopt.kernels.spec import KernelSpec

# Unit roundoff (half the machine epsilon) of the low-precision dtypes: the floor of the
# low-precision limit, so the rule stays meaningful when torch's own result is exact. It also
# covers Triton's CPU interpreter, which truncates fp32 -> bf16 instead of rounding to nearest
# (measured on rms_norm: every output equals the truncated fp32 oracle), so interpreter kernels sit
# near ulp/sqrt(3) ~ 0.0033 relative RMS, 2x torch's round-to-nearest ~ 0.0016, under 2 x 2^-9.
UNIT_ROUNDOFF = {"bfloat16": 2.0**-9, "float16": 2.0**-11}


@dataclass(frozen=True)
class TensorReport:
    """The comparison of one output or gradient of one shape case against the fp32 oracle."""

    case: str  # "<shape name>/<mode>"
    name: str  # output name, or "d<input>" for a gradient
    kind: str  # "output" | "gradient"
    dtype: str  # the kernel's result dtype, e.g. "bfloat16"
    max_abs: float  # max |kernel - fp32 reference| over finite elements
    err_ratio: float  # relative RMS error vs the fp32 reference (NaN if the kernel left NaN/inf)
    torch_ratio: float | None  # same metric for torch's own low-precision computation (None for fp32)
    limit: float  # the largest err_ratio that passes
    nan_count: int  # non-finite elements in the kernel result where the reference is finite
    passed: bool
    reason: str  # empty when passed; else what failed, in words

    def line(self) -> str:
        """fla-style one-line report: ``{name:>16} diff: ... ratio: ...``."""
        torch_part = f" torch-{self.dtype}: {self.torch_ratio:.6f}" if self.torch_ratio is not None else ""
        status = "ok" if self.passed else f"FAIL ({self.reason})"
        return (f"{self.name:>16} diff: {self.max_abs:.6f} ratio: {self.err_ratio:.6f}{torch_part} "
                f"limit: {self.limit:.6f}  {status}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rms(t) -> float:
    return float(t.double().pow(2).mean().sqrt()) if t.numel() else 0.0


def relative_rms(result, reference) -> float:
    """``rms(result - reference) / rms(reference)``, both taken in float64; absolute RMS if the reference is 0."""
    diff = result.double() - reference.double()
    scale = _rms(reference)
    return _rms(diff) / scale if scale > 0 else _rms(diff)


def compare_tensor(name: str, kind: str, result, reference, torch_lowp, tolerance: Tolerance,
                   case: str) -> TensorReport:
    """Compare one kernel result with the fp32 ``reference`` (and ``torch_lowp``, torch in the result dtype)."""
    import torch

    dtype = str(result.dtype).replace("torch.", "")
    if result.shape != reference.shape:
        return TensorReport(case, name, kind, dtype, math.inf, math.inf, None, tolerance.rtol, 0, False,
                            f"shape {tuple(result.shape)} != reference {tuple(reference.shape)}")
    # float64 on the result's device (realistic shapes stay on the GPU; only scalars come back),
    # except on npu, whose vector units do not support float64 for every op: there on the host.
    where = torch.device("cpu") if result.device.type == "npu" else result.device
    ref = reference.detach().to(device=where, dtype=torch.float64)
    res = result.detach().to(device=where, dtype=torch.float64)
    bad = ~torch.isfinite(res) & torch.isfinite(ref)
    nan_count = int(bad.sum())
    finite = torch.isfinite(res) & torch.isfinite(ref)
    max_abs = float((res - ref).abs()[finite].max()) if bool(finite.any()) else math.nan
    err = math.nan if nan_count else relative_rms(res, ref)
    limit = tolerance.rtol
    torch_ratio = None
    if dtype in UNIT_ROUNDOFF and torch_lowp is not None:
        torch_ratio = relative_rms(torch_lowp.detach().to(device=where, dtype=torch.float64), ref)
        limit = min(limit, tolerance.lowp_factor * max(torch_ratio, UNIT_ROUNDOFF[dtype]))
    if nan_count:
        reason = f"{nan_count} of {res.numel()} elements NaN/inf (unwritten or overflow)"
    elif err > limit:
        if err > tolerance.rtol:
            reason = f"ratio {err:.3g} > rtol {tolerance.rtol:g}"
        else:
            reason = f"ratio {err:.3g} > {tolerance.lowp_factor:g} x torch-{dtype} {torch_ratio:.3g}"
    else:
        reason = ""
    return TensorReport(case, name, kind, dtype, max_abs, err, torch_ratio, limit, nan_count, not reason, reason)


def _as_fp32(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Copies of the inputs with floating tensors upcast to fp32 (exact), other values unchanged."""
    import torch

    out = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            copy = value.detach().clone()
            if copy.is_floating_point():
                copy = copy.float()
            out[key] = copy.requires_grad_(value.requires_grad)
        else:
            out[key] = value
    return out


def _clone(inputs: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    return {k: (v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v)
            for k, v in inputs.items()}


def tensor_kind(name: str, inputs: Mapping[str, Any]) -> str:
    """``gradient`` for ``d<input>`` results of a fwdbwd run, else ``output``."""
    return "gradient" if name.startswith("d") and name[1:] in inputs else "output"


def check_kernel(spec: KernelSpec, dims: Mapping[str, Any], dtype: str, mode: str, config: Mapping[str, int] | None,
                 *, tolerances: Mapping[str, Tolerance] | None = None, case: str | None = None,
                 seed: int = 42) -> list[TensorReport]:
    """Run ``spec`` once on seeded inputs with NaN-poisoned outputs and compare every result.

    ``tolerances`` defaults to the spec's (``spec.tolerances[dtype]`` for outputs and gradients).
    Returns one report per output and gradient, in the kernel's output order.
    """
    from ascendopt.device import backends
    from ascendopt.kernels._lib.common import nan_poisoning

    spec.check_supported(dims, dtype, mode)
    cfg = spec.config(config)
    tolerances = tolerances or default_tolerances(spec, dtype, mode)
    case = case or f"{'x'.join(f'{k}{v}' for k, v in dims.items() if k != 'seqlens')}/{mode}"
    device = backends.current().torch_device()
    inputs = spec.make_inputs(dict(dims), dtype, device, seed)
    with nan_poisoning():
        results = spec.run(_clone(inputs), cfg, mode)
    reference = spec.reference(_as_fp32(inputs), mode)
    lowp = spec.reference(_clone(inputs), mode)
    missing = sorted(set(reference) - set(results))
    reports = []
    for name in missing:
        tol = tolerances.get("bwd" if tensor_kind(name, inputs) == "gradient" else "fwd")
        reports.append(TensorReport(case, name, tensor_kind(name, inputs), "?", math.nan, math.nan, None,
                                    tol.rtol if tol else math.nan, 0, False, "not returned by the kernel"))
    for name, result in results.items():
        kind = tensor_kind(name, inputs)
        tol = tolerances.get("bwd" if kind == "gradient" else "fwd") or tolerances["fwd"]
        if name not in reference:
            reports.append(TensorReport(case, name, kind, "?", math.nan, math.nan, None, tol.rtol, 0, False,
                                        "not produced by the reference"))
            continue
        torch_lowp = lowp.get(name)
        if torch_lowp is not None:
            torch_lowp = torch_lowp.detach().to(result.dtype)  # round torch's result like the kernel's
        reports.append(compare_tensor(name, kind, result, reference[name], torch_lowp, tol, case))
    return reports


def default_tolerances(spec: KernelSpec, dtype: str, mode: str) -> dict[str, Tolerance]:
    """The spec's tolerance for ``dtype`` for outputs (``fwd``) and, in fwdbwd, gradients (``bwd``).

    A spec may give gradients their own limits in ``extras["bwd_tolerances"]`` (dtype -> rtol).
    """
    rtol = float(spec.tolerances[dtype])
    out = {"fwd": Tolerance(rtol=rtol)}
    if mode == "fwdbwd":
        out["bwd"] = Tolerance(rtol=float(spec.extras.get("bwd_tolerances", {}).get(dtype, rtol)))
    return out

