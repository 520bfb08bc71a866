"""Own code: the working tree's ``workload()`` outputs against the frozen commit's (a second oracle
beside the frozen tests, which may check less than the workload computes).

When ``workload()`` returns tensors (a tensor, or tuples, lists and dicts of them, nested), each side's
child process calls it once and saves what it returned, on the CPU, to a file (``call_and_save``); the
gate compares the two (``compare_outputs``) with the tolerances frozen in the contract
(``contract.model.EQUIVALENCE_TOLERANCES`` by default, per output dtype; integers and bool exact): the
same output names, shapes and dtypes, NaN at the same positions, infinities equal, and elementwise
``|candidate - baseline| <= atol + rtol * |baseline|``. A mismatch names the output and its worst element.

"Inputs" are the tensors the workload module holds at module level (``x = torch.randn(...)``, and tensors
inside module-level lists, tuples and dicts, one level deep). They are copied before the call and compared
after it: a changed one is reported as an in-place write, which the gate refuses unless the baseline
writes it too.

Torch is imported inside the functions (the package is imported by commands that must not load it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ascendopt.contract.model import EQUIVALENCE_TOLERANCES
from ascendopt.errors import UsageError
from ascendopt.judge.result import Check

ROOT = "output"  # the name of what workload() returned; its parts are output[0], output['key'], ...
MAX_DEPTH = 8  # nesting followed into the returned value (deeper parts are listed as not compared)
_SHORT = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


# -- dtypes and tolerances ---------------------------------------------------------------------------


def dtype_key(dtype) -> str:
    """The contract's name of a torch dtype: ``fp32``, ``bf16``, ``fp16``, ``fp64``, else torch's own
    (``int64``, ``bool``, ``float8_e4m3fn``)."""
    name = str(dtype).removeprefix("torch.")
    return _SHORT.get(name, name)


def tolerance_for(dtype, tolerances: Mapping[str, Mapping[str, float]]) -> tuple[str, float, float] | None:
    """``(key, rtol, atol)`` for a floating-point ``dtype`` (a complex one: its real part's), None for the
    exact dtypes (integers, bool). A float dtype not in ``tolerances`` gets two units in the last place
    at 1.0 (``2 * finfo.eps``) as both rtol and atol, the rule the bf16/fp16 defaults follow."""
    import torch

    if dtype.is_complex:
        dtype = torch.empty(0, dtype=dtype).real.dtype
    if not dtype.is_floating_point:
        return None
    key = dtype_key(dtype)
    if key in tolerances:
        return key, float(tolerances[key]["rtol"]), float(tolerances[key]["atol"])
    ulps = 2 * torch.finfo(dtype).eps
    return key, ulps, ulps


def parse_tolerances(items: str | list[str] | None) -> dict[str, dict[str, float]]:
    """``--equivalence-tol DTYPE=RTOL[:ATOL]`` (repeatable, comma-separated) -> ``{key: {"rtol", "atol"}}``.

    DTYPE is fp64, fp32, fp16, bf16 or a torch floating-point dtype name (``float8_e4m3fn``); an ATOL left
    out keeps the dtype's default. Every bad item is a UsageError (exit 2) naming it.
    """
    import torch

    from ascendopt.kernels.spec import parse_assignments

    example = "--equivalence-tol bf16=2e-2:1e-5"
    out: dict[str, dict[str, float]] = {}
    for name, raw in parse_assignments(items, option="--equivalence-tol", example=example,
                                       value="rtol[:atol]").items():
        dtype = getattr(torch, {v: k for k, v in _SHORT.items()}.get(name, name), None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise UsageError(f"--equivalence-tol {name}: not a floating-point dtype (fp64, fp32, fp16, bf16, or a "
                             "torch name such as float8_e4m3fn); integers and bool are compared exactly")
        try:
            numbers = [float(part) for part in raw.split(":")]
        except ValueError:
            numbers = []
        if not 1 <= len(numbers) <= 2 or not all(0 <= x < float("inf") for x in numbers):
            raise UsageError(f"--equivalence-tol {name}={raw}: expected RTOL[:ATOL], numbers >= 0 (e.g. {example})")
        default = tolerance_for(dtype, EQUIVALENCE_TOLERANCES)
        assert default is not None
        out[default[0]] = {"rtol": numbers[0], "atol": numbers[1] if len(numbers) == 2 else default[2]}
    return out


# -- the child's side: one call, its outputs and its inputs ------------------------------------------


def flatten(value: Any, name: str = ROOT) -> tuple[dict[str, Any], list[str]]:
    """The tensors in ``value`` by name (``output``, ``output[0]``, ``output['mean']``, nested), and the
    parts that are not compared (``output[1] (int)``; None parts are left out silently)."""
    import torch

    tensors: dict[str, Any] = {}
    skipped: list[str] = []

    def walk(item: Any, path: str, depth: int) -> None:
        if isinstance(item, torch.Tensor):
            if item.layout == torch.strided and not item.is_meta:
                tensors[path] = item
            else:  # sparse, nested or meta: no dense values to compare elementwise
                skipped.append(f"{path} ({'meta' if item.is_meta else item.layout} tensor)")
        elif item is None:
            return
        elif depth >= MAX_DEPTH:
            skipped.append(f"{path} (nested deeper than {MAX_DEPTH})")
        elif isinstance(item, Mapping):
            for key, part in item.items():
                walk(part, f"{path}[{key!r}]", depth + 1)
        elif isinstance(item, (list, tuple)):
            for i, part in enumerate(item):
                walk(part, f"{path}[{i}]", depth + 1)
        else:
            skipped.append(f"{path} ({type(item).__name__})")

    walk(value, name, 0)
    return tensors, skipped


def module_inputs(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The workload module's tensors: module-level ones (``x``) and those inside module-level lists,
    tuples and dicts one level deep (``inputs[0]``, ``cfg['w']``); dense (strided) tensors only."""
    import torch

    found: dict[str, Any] = {}
    for key, value in namespace.items():
        if key.startswith("__"):
            continue
        if isinstance(value, Mapping):
            parts = [(f"{key}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            parts = [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        else:
            parts = [(key, value)]
        for name, item in parts:
            if isinstance(item, torch.Tensor) and item.layout == torch.strided:
                found[name] = item
    return found


def to_cpu(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """Detached, contiguous CPU copies (a copy also from the CPU: later calls may write the original)."""
    import torch

    return {k: t.detach().to(device="cpu", copy=True, memory_format=torch.contiguous_format)
            for k, t in tensors.items()}


def call_and_save(fn: Callable[[], Any], path: Path, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Call ``fn`` once; save the tensors it returned (by name, on the CPU) to ``path`` with ``torch.save``.

    Returns the child's reply: ``returned`` (the type name of the value), ``outputs`` (the saved names,
    in order; empty: nothing to compare), ``skipped`` (parts not compared) and ``inputs_changed``
    (``{input name: message}``, the module-level tensors of ``namespace`` the call wrote in place).
    The inputs are copied to the host before the call (memory: one host copy of each).
    """
    import torch

    inputs = module_inputs(namespace)
    before = to_cpu(inputs)
    value = fn()
    tensors, skipped = flatten(value)
    after = to_cpu(inputs)
    changed = input_writes(before, after)
    # what the call wrote into its inputs is an output too (a destination-passing op returns nothing)
    tensors.update({f"written {name}": after[name] for name in changed if name in after})
    torch.save(to_cpu(tensors), path)  # the copy to the host waits for the device
    return {"returned": type(value).__name__, "outputs": list(tensors), "skipped": skipped,
            "inputs_changed": changed}


def load(path: Path) -> dict[str, Any]:
    """The tensors a child saved with ``call_and_save``."""
    import torch

    return torch.load(path, weights_only=True)


# -- comparison (pure: CPU tensors in, checks out) ---------------------------------------------------


def _value(v: Any) -> str:
    """An element for a message: floats to 6 significant digits, integers and bools as they are."""
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def _index(flat: int, shape) -> str:
    """Flat position -> ``[i, j, ...]`` in ``shape``."""
    idx = []
    for size in reversed(list(shape)):
        idx.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def input_writes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, str]:
    """``{name: message}`` for each input in ``before`` (CPU copies) that differs in ``after``: the shape,
    the dtype, or elements (NaN equals NaN), with the count and the largest change and where it is."""
    import torch

    changed: dict[str, str] = {}
    for name, old in before.items():
        new = after[name]
        what = f"in-place write to input {name}"
        if list(new.shape) != list(old.shape) or new.dtype != old.dtype:
            changed[name] = (f"{what}: {dtype_key(old.dtype)}{list(old.shape)} became "
                             f"{dtype_key(new.dtype)}{list(new.shape)}")
            continue
        same = new == old
        if old.is_floating_point() or old.is_complex():
            same |= torch.isnan(new) & torch.isnan(old)
        if bool(same.all()):
            continue
        diff = (new.to(torch.complex128 if old.is_complex() else torch.float64)
                - old.to(torch.complex128 if old.is_complex() else torch.float64)).abs().flatten()
        diff = torch.where(same.flatten(), torch.zeros_like(diff), torch.nan_to_num(diff, nan=float("inf")))
        at = int(diff.argmax())
        changed[name] = (f"{what}: {int((~same).sum())} of {old.numel()} element(s) changed, max abs change "
                         f"{float(diff[at]):.3g} at {_index(at, old.shape)} ({_value(old.flatten()[at].item())} -> "
                         f"{_value(new.flatten()[at].item())})")
    return changed


def compare_outputs(baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                    tolerances: Mapping[str, Mapping[str, float]]) -> list[Check]:
    """One check per output: each of the baseline's (in its order), then any the baseline does not return."""
    checks = []
    for name, base in baseline.items():
        if name not in candidate:
            checks.append(Check(name, False, f"{name}: missing (the baseline returns it)"))
        else:
            checks.append(compare_tensor(name, base, candidate[name], tolerances))
    checks += [Check(name, False, f"{name}: not returned by the baseline") for name in candidate
               if name not in baseline]
    return checks


def compare_tensor(name: str, baseline, candidate, tolerances: Mapping[str, Mapping[str, float]]) -> Check:
    """Shape, dtype, then values of one output (CPU tensors); the message names the worst element."""
    import torch

    base, cand = baseline, candidate
    if list(cand.shape) != list(base.shape):
        return Check(name, False, f"{name}: shape {list(cand.shape)} != baseline {list(base.shape)}")
    if cand.dtype != base.dtype:
        return Check(name, False, f"{name}: dtype {dtype_key(cand.dtype)} != baseline {dtype_key(base.dtype)}")
    tol = tolerance_for(base.dtype, tolerances)
    if base.is_complex():  # real and imaginary parts compared as floats (a trailing index 0/1)
        base, cand = torch.view_as_real(base), torch.view_as_real(cand)
    shape, n = base.shape, base.numel()
    if tol is None:
        return _compare_exact(name, base, cand)
    key, rtol, atol = tol
    b, c = base.double().flatten(), cand.double().flatten()
    finite = torch.isfinite(b) & torch.isfinite(c)
    diff = torch.where(finite, (c - b).abs(), torch.zeros_like(b))
    bound = atol + rtol * b.abs()
    over = finite & (diff > bound)
    # NaN where the other side has a number, an inf of the other sign, or a number where the other has inf
    nonfinite = ~finite & (c != b) & ~(torch.isnan(b) & torch.isnan(c))
    rel = torch.where(b != 0, diff / b.abs(), torch.where(diff > 0, float("inf"), 0.0))
    limits = f"{key} rtol {rtol:g}, atol {atol:g}"
    bad = over | nonfinite
    if not bool(bad.any()):
        worst = f"; max abs err {float(diff.max()):.3g}, max rel err {float(rel.max()):.3g}" if n else ""
        return Check(name, True, f"{name}: {n} element(s) within tolerance ({limits}){worst}")
    if bool(nonfinite.any()):
        at = int(nonfinite.nonzero()[0])
    else:
        ratio = torch.where(over, diff / bound, torch.zeros_like(diff))  # bound 0 (exact limits): inf
        at = int(ratio.argmax())
    abs_err = float(diff[at]) if bool(finite[at]) else abs(float(c[at]) - float(b[at]))
    rel_err = float(rel[at]) if bool(finite[at]) else abs_err
    extra = f"; NaN/inf differ at {int(nonfinite.sum())} element(s)" if bool(nonfinite.any()) else ""
    return Check(name, False, f"{name}: {int(bad.sum())} of {n} element(s) out of tolerance ({limits}); worst at "
                              f"{_index(at, shape)}: baseline {float(b[at]):.6g}, candidate {float(c[at]):.6g}, "
                              f"abs err {abs_err:.3g}, rel err {rel_err:.3g}{extra}")


def _compare_exact(name: str, base, cand) -> Check:
    """Integers and bool: every element equal; the worst is the largest difference."""
    import torch

    key, n = dtype_key(base.dtype), base.numel()
    differ = (cand != base).flatten()
    if not bool(differ.any()):
        return Check(name, True, f"{name}: {n} element(s) equal (exact, {key})")
    b, c = base.flatten(), cand.flatten()
    diff = torch.where(differ, (c.double() - b.double()).abs(), torch.zeros(n, dtype=torch.float64))
    at = int(diff.argmax())
    bv, cv = b[at].item(), c[at].item()
    rel = float(diff[at]) / abs(float(bv)) if float(bv) != 0 else float("inf")
    return Check(name, False, f"{name}: {int(differ.sum())} of {n} element(s) differ (exact, {key}); worst at "
                              f"{_index(at, base.shape)}: baseline {_value(bv)}, candidate {_value(cv)}, abs err "
                              f"{float(diff[at]):g}, rel err {rel:.3g}")
