"""``KernelSpec``: everything the loop needs to know about one bundled kernel.

One op = one file under ``kernels/``: the ``@triton.jit`` kernel(s) (``_<op>_kernel``), the launcher
(``<op>``), the fp32 torch oracle (``<op>_reference``) and a ``SPEC = KernelSpec(...)``.

Conventions shared by every spec:

* ``dims`` is a dict of named extents, e.g. ``{"B": 4, "T": 4096, "D": 4096}``; varlen presets add
  ``seqlens`` (a tuple of sequence lengths, packed into B=1 with ``cu_seqlens``).
* ``make_inputs(dims, dtype, device, seed)`` returns a dict of tensors (never zeros: seeded
  random data) including, for ``fwdbwd``, the upstream gradients named ``d<output>``.
* ``run(inputs, config, mode)`` launches the Triton kernels and returns a dict of named outputs
  (and for ``fwdbwd`` the gradients, named ``d<input>``); ``reference(inputs, mode)`` returns the
  same names computed in fp32 torch. ``config`` holds the tunables (defaults filled in).
* ``ub_model(dims, config, dtype)`` lists every kernel stage's live tile set as ``UBStage``s.
* ``cost(dims, dtype, mode)`` gives the minimum bytes moved and flops for the roofline.
* ``supports(dims, dtype, mode)`` returns None or the reason the case is not supported.

This module is imported by the CLI for its ``NAME=VALUE`` parser (``parse_assignments``), so it
imports neither torch nor triton.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ascendopt.device.ub import DEFAULT_MARGIN
from ascendopt.errors import UsageError

Dims = Mapping[str, Any]
Tensors = dict[str, Any]  # name -> torch.Tensor (torch is not imported here)


@dataclass(frozen=True)
class Tunable:
    """A launch parameter the loop may change. ``choices`` are the only legal values."""

    name: str
    default: int
    choices: tuple[int, ...]
    doc: str

    def validate(self, value: Any) -> int:
        try:
            v = int(value)
        except (TypeError, ValueError):
            raise UsageError(f"tunable {self.name}={value!r}: not an integer",
                             hint=f"valid values: {', '.join(map(str, self.choices))}") from None
        if v not in self.choices:
            raise UsageError(f"tunable {self.name}={v}: out of range",
                             hint=f"valid values: {', '.join(map(str, self.choices))}")
        return v


@dataclass(frozen=True)
class ShapePreset:
    name: str
    dims: dict[str, Any]
    doc: str = ""

    @property
    def varlen(self) -> bool:
        return "seqlens" in self.dims


@dataclass(frozen=True)
class UBStage:
    """The live tile set of one kernel stage for the UB model (see ``ascendopt.device.ub``)."""

    stage: str
    tile: dict[str, int]
    dtype: str  # element type that dominates the live set ("fp32" for fp32 accumulators)
    multiplier: float  # live tile copies; the spec comments where the number comes from
    margin: float = DEFAULT_MARGIN  # budget = margin x UB; a stage with another margin says why


@dataclass(frozen=True)
class Cost:
    bytes: int  # minimum HBM traffic: every input read once, every output written once
    flops: int


@dataclass(frozen=True)
class KernelSpec:
    name: str
    description: str
    bound: str  # "vector" or "cube": which core count the 1D core grid uses
    modes: tuple[str, ...]  # subset of ("fwd", "fwdbwd")
    dtypes: tuple[str, ...]  # e.g. ("fp32", "bf16")
    shapes: dict[str, ShapePreset]  # must include "tiny" (CPU CI) and "realistic"
    tunables: dict[str, Tunable]
    make_inputs: Callable[..., Tensors]
    run: Callable[[Tensors, dict[str, int], str], Tensors]
    reference: Callable[[Tensors, str], Tensors]
    ub_model: Callable[[Dims, dict[str, int], str], list[UBStage]]
    cost: Callable[[Dims, str, str], Cost]
    supports: Callable[[Dims, str, str], str | None]
    kernel_names: tuple[str, ...]  # @triton.jit names that must show up in a profile (kernel hit)
    tolerances: dict[str, float]  # dtype -> max relative-RMS error vs the fp32 oracle
    extras: dict[str, Any] = field(default_factory=dict)

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, int]:
        """Defaults with ``overrides`` applied; unknown names and bad values raise, listing valid ones."""
        cfg = {name: t.default for name, t in self.tunables.items()}
        for name, value in (overrides or {}).items():
            if name not in self.tunables:
                valid = ", ".join(self.tunables) or "none"
                raise UsageError(f"kernel {self.name} has no tunable {name!r}", hint=f"tunables: {valid}")
            cfg[name] = self.tunables[name].validate(value)
        return cfg

    def shape(self, preset: str) -> ShapePreset:
        if preset not in self.shapes:
            raise UsageError(f"kernel {self.name} has no shape preset {preset!r}",
                             hint=f"presets: {', '.join(self.shapes)}")
        return self.shapes[preset]

    def check_supported(self, dims: Dims, dtype: str, mode: str) -> None:
        if mode not in self.modes:
            raise UsageError(f"kernel {self.name} does not support mode {mode!r}",
                             hint=f"modes: {', '.join(self.modes)}")
        if dtype not in self.dtypes:
            raise UsageError(f"kernel {self.name} does not support dtype {dtype!r}",
                             hint=f"dtypes: {', '.join(self.dtypes)}")
        reason = self.supports(dims, dtype, mode)
        if reason:
            raise UsageError(f"kernel {self.name}: unsupported case {dict(dims)}: {reason}")


REQUIRED_PRESETS = ("tiny", "realistic")


def parse_assignments(items: str | Iterable[str] | None, *, option: str = "--set",
                      example: str = "--set block_rows=16", integer: bool = False, minimum: int | None = None,
                      lists: Collection[str] = (), unique: bool = False, unique_why: str = "",
                      value: str = "value") -> dict[str, Any]:
    """``NAME=VALUE`` pairs -> ``{NAME: VALUE}``: the one parser behind every such option and argument.

    ``items`` is one string or several (a repeated option); each is split at commas and blank parts are
    skipped, so ``["BT=64,BD=128", "X=1"]`` and ``"BT=64, BD=128, X=1"`` give the same dict. A NAME is
    an identifier (tunables, dims and tile names all are). Values stay stripped strings (the spec
    validates tunables) unless ``integer``: then each is an ``int`` of at least ``minimum`` (when
    given), and a name in ``lists`` takes ``:``-separated integers as a tuple (``seqlens=3:17:40``).
    A name given twice keeps its last value unless ``unique`` (``unique_why`` is the reason shown).

    Every error is a ``UsageError`` that starts with ``option`` (``--set``, ``--tile``, ``shape item``)
    and names the offending part; ``example`` shows a valid form and ``value`` is the word for a value.
    """
    texts = [items] if isinstance(items, str) else list(items or [])
    out: dict[str, Any] = {}
    for text in texts:
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or not name.isidentifier():
                raise UsageError(f"{option} {part!r}: expected NAME={value.upper()} (e.g. {example})")
            if unique and name in out:
                raise UsageError(f"{option} {name} given twice" + (f": {unique_why}" if unique_why else ""))
            if not integer:
                out[name] = raw
                continue
            try:
                numbers = [int(v) for v in raw.split(":")] if name in lists else [int(raw)]
            except ValueError:
                raise UsageError(f"{option} {part!r}: {value} must be an integer") from None
            if minimum is not None and min(numbers) < minimum:
                raise UsageError(f"{option} {name}={raw}: {value} must be >= {minimum}")
            out[name] = tuple(numbers) if name in lists else numbers[0]
    return out


def parse_dims(text: str) -> dict[str, Any]:
    """``"B=2,T=64,D=128"`` -> dims; ``seqlens=3:17:40`` gives a varlen tuple. Errors name the item."""
    dims = parse_assignments(text, option="shape item", example="B=2,T=64,D=128", integer=True,
                             lists=("seqlens",))
    if not dims:
        raise UsageError(f"shape {text!r}: empty")
    return dims


def dims_text(dims: Mapping[str, Any]) -> str:
    """Dims as the text ``parse_dims`` reads back: ``B=2,T=64,D=128``, sequences joined by ``:``
    (``seqlens=3:17``)."""
    return ",".join(f"{k}={':'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in dims.items())
