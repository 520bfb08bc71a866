"""What the parent judges on the bytes the workers hand over: nothing here runs in a process of the code under test.

* ``compare_values``: a candidate's decoded value (``judge.payload.decode``) against the frozen commit's for the
  same inputs, output by output, within the contract's tolerances (``judge.equivalence.compare_tensor``); a part
  the worker's reader refused (a tensor subclass, a lazy or storage-less tensor) fails, and so does a value of
  another structure.
* ``input_writes``: the inputs a call wrote in place, from the input sets as made and as handed back after the
  call.
* ``untimed_excess``: the candidate's untimed requests (loading a batch's inputs, handing its outputs over)
  against the reference's for the same bytes: work done there was moved out of the timed window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ascendopt.judge.payload import Opaque, Refused
from ascendopt.judge.result import Check

ROOT = "output"
# The candidate's untimed requests around a batch (loading its inputs, handing its outputs over) may take this much
# longer than the reference's around the same round's batch, as the median over the rounds: 0.5 ms of scheduling
# noise, plus 3 % of the candidate's timed batch (both sides do the same work there on the same bytes, so the
# median difference of an honest pair is near zero). Each request's time is read less the time the worker's main
# thread and the judge's thread waited on a run queue (``interleave._Child.batch``), which is most of what a loaded
# host adds; the median, not the sum: a few requests are still late by many ms.
UNTIMED_EXCESS_MS = 0.5
UNTIMED_EXCESS_REL = 0.03
UNTIMED_Z = 3.0  # and the median difference's own noise: 3 standard errors (a loaded host spreads the requests)


def parts(value: Any, name: str = ROOT) -> dict[str, Any]:
    """The leaves of a decoded value by name (``output``, ``output[0]``, ``output['mean']``): tensors,
    ``Refused`` tensors, scalars and ``Opaque`` objects; None leaves are left out (as a function that returns
    None for an optional part does)."""
    found: dict[str, Any] = {}

    def walk(item: Any, path: str) -> None:
        if item is None:
            return
        if isinstance(item, dict):
            for key, part in item.items():
                walk(part, f"{path}[{key!r}]")
        elif isinstance(item, (list, tuple)):
            for i, part in enumerate(item):
                walk(part, f"{path}[{i}]")
        else:
            found[path] = item

    walk(value, name)
    return found


def refusals(value: Any, name: str = ROOT) -> list[str]:
    """``name: why`` for every tensor of ``value`` the worker's reader refused."""
    return [f"{part}: {leaf.problem}" for part, leaf in parts(value, name).items() if isinstance(leaf, Refused)]


def compare_values(base: Any, cand: Any, tolerances: Mapping[str, Mapping[str, float]] | None,
                   name: str = ROOT) -> list[Check]:
    """One check per part of ``base`` (the frozen commit's value) and per part only ``cand`` has: tensors within
    ``tolerances`` (None: equivalence is off, only what the reader refused fails), other leaves equal."""
    import torch

    from ascendopt.judge.equivalence import compare_tensor

    b_parts, c_parts = parts(base, name), parts(cand, name)
    checks: list[Check] = []
    for part, b in b_parts.items():
        c = c_parts.get(part, _MISSING)
        if isinstance(c, Refused):
            checks.append(Check(part, False, f"{part}: {c.problem}"))
        elif c is _MISSING:
            checks.append(Check(part, False, f"{part}: missing (the frozen commit returns it)"))
        elif tolerances is None:
            checks.append(Check(part, True, f"{part}: returned (equivalence is off)"))
        elif isinstance(b, torch.Tensor):
            if not isinstance(c, torch.Tensor):
                checks.append(Check(part, False, f"{part}: a {_kind(c)}, the frozen commit a tensor"))
            else:
                checks.append(compare_tensor(part, b, c, tolerances))
        elif isinstance(b, Refused):
            checks.append(Check(part, True, f"{part}: not compared (the frozen commit's is {b.problem})"))
        else:
            same = _same_scalar(b, c)
            checks.append(Check(part, same, f"{part}: {c!r}" + ("" if same else f", the frozen commit {b!r}")))
    for part in c_parts:
        if part not in b_parts:
            checks.append(Check(part, False, f"{part}: not returned by the frozen commit"))
    return checks


_MISSING = object()


def _kind(value: Any) -> str:
    return value.what if isinstance(value, Opaque) else type(value).__name__


def _same_scalar(b: Any, c: Any) -> bool:
    """Plain leaves: equal (floats within 1e-9 relative, NaN equal to NaN); an ``Opaque`` by its type name."""
    if isinstance(b, float) and isinstance(c, (int, float)) and not isinstance(c, bool):
        if b != b:
            return c != c
        return abs(float(c) - b) <= 1e-9 * max(1.0, abs(b))
    return type(b) is type(c) and b == c


def input_writes(made: Sequence[Any], after: Sequence[Any]) -> dict[str, str]:
    """``{input name: message}`` for every input of the sets ``made`` (as the maker made them) that ``after`` (the
    same sets handed back after the calls) holds changed."""
    import torch

    from ascendopt.judge.equivalence import input_writes as writes

    before_t = {k: v for k, v in parts(list(made), "inputs").items() if isinstance(v, torch.Tensor)}
    after_t = {k: v for k, v in parts(list(after), "inputs").items() if isinstance(v, torch.Tensor)}
    changed = writes(before_t, {k: after_t[k] for k in before_t if k in after_t})
    for k in before_t:
        if k not in after_t:
            changed[k] = f"{k}: not handed back as a plain tensor after the call"
    return changed


def untimed_excess(cand: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]]) -> str | None:
    """None when, as the median over the rounds, the candidate's untimed requests took at most
    ``UNTIMED_EXCESS_MS`` + ``UNTIMED_EXCESS_REL`` of its timed batch, plus the median's own noise (``UNTIMED_Z``
    standard errors, from the spread of the per-round differences), longer than the reference's in the same
    round: in wall time less the run-queue wait (``untimed_ms`` - ``untimed_waited_ms``), and in the CPU time its
    worker's threads ran (``untimed_run_ms``, where both sides have it: CPU work moved there shows whatever the
    host's load). Else why (work finished outside the timed window, on the judge's time)."""
    n = min(len(cand), len(ref))
    if not n:
        return None
    cand, ref = cand[:n], ref[:n]
    batch = _median([c["parent"] * c["calls"] for c in cand])
    wall = _excess([_untimed(c) - _untimed(r) for c, r in zip(cand, ref, strict=True)], batch)
    if wall is not None:
        return (f"spent {wall[0]:.1f} ms more than the reference in the judge's untimed requests around a batch "
                f"(median of {n}: loading its inputs, handing over its outputs; allowed {wall[1]:.1f} ms against a "
                f"{batch:.1f} ms timed batch and the requests' own noise): work finished outside the timed window")
    if all("untimed_run_ms" in r for r in (*cand, *ref)):
        cpu = _excess([c["untimed_run_ms"] - r["untimed_run_ms"] for c, r in zip(cand, ref, strict=True)], batch)
        if cpu is not None:
            return (f"its worker ran {cpu[0]:.1f} ms of CPU more than the reference's in the judge's untimed requests "
                    f"around a batch (median of {n}; allowed {cpu[1]:.1f} ms against a {batch:.1f} ms timed batch): "
                    "work done outside the timed window")
    return None


def _excess(diffs: Sequence[float], batch: float) -> tuple[float, float] | None:
    """(median, allowed) of the per-round differences ``diffs`` (ms) when the median exceeds the allowance against a
    ``batch`` ms timed batch; else None."""
    import math

    extra = _median(diffs)
    spread = 1.4826 * _median([abs(d - extra) for d in diffs])  # a robust standard deviation
    noise = UNTIMED_Z * 1.2533 * spread / math.sqrt(len(diffs))  # the standard error of a median, times z
    allowed = UNTIMED_EXCESS_MS + UNTIMED_EXCESS_REL * batch + noise
    return (extra, allowed) if extra > allowed else None


def _untimed(reading: Mapping[str, Any]) -> float:
    """ms of a reading's untimed requests, less the time they waited on a run queue (where it was read)."""
    return reading["untimed_ms"] - (reading.get("untimed_waited_ms") or 0.0)


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if s else 0.0
