"""What a lowered kernel's ``.ttadapter`` (triton-ascend's linalg/HIVM MLIR) says before any device runs it.

Two facts are read from the text, no MLIR library needed:

* **local buffers**: every ``memref.alloc() : memref<D0xD1x...xT>`` is a buffer the kernel keeps in the
  Unified Buffer (in triton-ascend 3.2's output these are the tiles ``tl.load`` copies in). Bytes =
  product of the static dims x the element size; a dynamic dim (``?``) has no static size and is listed
  apart.
* **core type**: the kernel function's ``mix_mode`` attribute: ``"aiv"`` runs on vector cores only,
  ``"aic"`` on cube cores only, ``"mix"`` on both (a ``tl.dot`` and vector work).

The UB estimate is an ESTIMATE: ``estimate_bytes = double_buffer_factor x sum(alloc bytes)``, with the
factor 2 when triton-ascend's auto multi-buffering is on (its default on the Ascend910B family: the
``multibuffer`` option, passed to bishengir-compile as ``--enable-auto-multi-buffer``), 1 when off. It
leaves out the compiler's own temporaries (intermediate tensors, masks, index vectors) and counts every
buffer as live at once; the real verdict is ``bishengir-compile``'s (CANN), which allocates the buffers
that are live at the same time. docs/lowering.md compares it with the bundled kernels' hand UB models.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ascendopt.errors import UsageError

# MLIR element type -> bytes in UB (an i1 mask element takes a byte)
ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1,
                 "ui8": 1, "ui16": 2, "ui32": 4, "ui64": 8}
CORE_TYPES = {"aiv": "vector", "aic": "cube", "mix": "mixed"}
DEFAULT_DOUBLE_BUFFER_FACTOR = 2  # triton-ascend's multibuffer default on 910B (off only on Ascend910_95)
MAX_GRID_PROGRAMS = 65535  # the practice: grid <= 65535, or a 1D core grid

_FUNC = re.compile(r"func\.func\s+@(?P<name>[\w.$-]+)\s*\(")
_MIX_MODE = re.compile(r'mix_mode\s*=\s*"(?P<mode>[^"]+)"')
_ALLOC = re.compile(r"memref\.alloc\([^)]*\)[^\n]*?:\s*memref<(?P<type>[^>]+)>")


@dataclass(frozen=True)
class LocalBuffer:
    """One ``memref.alloc``: ``shape`` (None for a dynamic dim), element type, bytes (None when dynamic)."""

    shape: tuple[int | None, ...]
    element: str
    bytes: int | None

    def describe(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{dims}x{self.element}" if dims else self.element


@dataclass(frozen=True)
class LoweredKernel:
    """The facts of one ``.ttadapter``: kernel name, ``mix_mode`` and local buffers in source order."""

    name: str
    mix_mode: str
    buffers: tuple[LocalBuffer, ...] = field(default_factory=tuple)

    @property
    def core_type(self) -> str:
        """``vector`` (aiv), ``cube`` (aic) or ``mixed`` (cube and vector)."""
        return CORE_TYPES.get(self.mix_mode, self.mix_mode)

    @property
    def alloc_bytes(self) -> int:
        """Sum of the statically sized buffers, in bytes (one copy of each)."""
        return sum(b.bytes for b in self.buffers if b.bytes is not None)

    @property
    def dynamic_buffers(self) -> int:
        return sum(1 for b in self.buffers if b.bytes is None)


def _buffer(memref_type: str) -> LocalBuffer:
    # "64x32xf16", "1024xf32", "f32" (a scalar), "?x16xbf16"; a layout after a comma is ignored
    parts = memref_type.split(",")[0].strip().split("x")
    element, dims = parts[-1], parts[:-1]
    shape = tuple(None if d == "?" else int(d) for d in dims)
    size = ELEMENT_BYTES.get(element)
    if size is None:
        raise UsageError(f"memref<{memref_type}>: unknown element type {element!r}",
                         hint=f"known: {', '.join(sorted(ELEMENT_BYTES))}")
    total = None if any(d is None for d in shape) else math.prod(shape) * size
    return LocalBuffer(shape=shape, element=element, bytes=total)


def parse(text: str, where: str = "ttadapter") -> LoweredKernel:
    """The kernel of one ``.ttadapter`` text. Raises UsageError naming ``where`` when it has no kernel function."""
    func = _FUNC.search(text)
    mode = _MIX_MODE.search(text)
    if func is None or mode is None:
        missing = "func.func" if func is None else "mix_mode attribute"
        raise UsageError(f"{where}: no {missing} found (not a triton-ascend .ttadapter?)")
    buffers = tuple(_buffer(m.group("type")) for m in _ALLOC.finditer(text))
    return LoweredKernel(name=func.group("name"), mix_mode=mode.group("mode"), buffers=buffers)


def read(path: str | Path) -> LoweredKernel:
    """``parse`` of a file; a missing or unreadable file raises UsageError naming it."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the .ttadapter ({exc.strerror or exc})") from None
    return parse(text, str(path))


@dataclass(frozen=True)
class UBEstimate:
    """``estimate_bytes = factor x alloc_bytes`` against ``ub_bytes`` of the chip (all in bytes)."""

    alloc_bytes: int
    double_buffer_factor: int
    ub_bytes: int

    @property
    def estimate_bytes(self) -> int:
        return self.alloc_bytes * self.double_buffer_factor

    @property
    def percent(self) -> float:
        return 100.0 * self.estimate_bytes / self.ub_bytes

    def to_dict(self) -> dict:
        return {"alloc_bytes": self.alloc_bytes, "double_buffer_factor": self.double_buffer_factor,
                "estimate_bytes": self.estimate_bytes, "ub_bytes": self.ub_bytes,
                "percent_of_ub": round(self.percent, 1)}


def ub_estimate(kernel: LoweredKernel, ub_bytes: int,
                double_buffer_factor: int = DEFAULT_DOUBLE_BUFFER_FACTOR) -> UBEstimate:
    if ub_bytes <= 0 or double_buffer_factor < 1:
        raise UsageError(f"UB {ub_bytes} bytes, factor {double_buffer_factor}: both must be positive")
    return UBEstimate(kernel.alloc_bytes, double_buffer_factor, ub_bytes)


def grid_findings(core_type: str, grid: list[int] | None, cube_cores: int | None,
                  vector_cores: int | None) -> list[str]:
    """What the practice says about this core type launched on this grid (empty: nothing to say).

    A vector-only kernel on exactly the cube core count leaves half the vector cores idle (A2: 24 cube,
    48 vector); a mixed (cube) kernel on the vector core count runs two waves on the cube cores; more
    than 65535 programs is over the grid limit.
    """
    if not grid:
        return []
    programs = math.prod(grid)
    found = []
    if programs > MAX_GRID_PROGRAMS:
        found.append(f"{programs} programs: over the grid limit {MAX_GRID_PROGRAMS}; use a 1D core grid "
                     "with a task loop")
    if len(grid) == 1 or programs == grid[0]:
        if core_type == "vector" and cube_cores and vector_cores and cube_cores != vector_cores \
                and programs == cube_cores:
            found.append(f"vector-only kernel launched on the cube core count ({cube_cores}): half the "
                         f"{vector_cores} vector cores stay idle; use num_vectorcore")
        if core_type == "mixed" and cube_cores and vector_cores and cube_cores != vector_cores \
                and programs == vector_cores:
            found.append(f"cube/vector kernel launched on the vector core count ({vector_cores}): two waves "
                         f"on the {cube_cores} cube cores; use num_aicore")
    return found
