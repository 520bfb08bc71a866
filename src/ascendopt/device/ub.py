"""The Unified Buffer (UB) model: pure integer arithmetic in bytes, capacity injected.

    peak_bytes = memory_multiplier x tile_elements x dtype_bytes
    safe       = peak_bytes <= margin x ub_bytes

``memory_multiplier`` is the number of live tile-sized buffers (inputs, fp32 accumulators, transpose
copies, masks, temporaries of a dot, compiler double-buffering); every caller comments where its
multiplier comes from. ``margin`` is the safety factor of docs/practice.md §6 (0.75-0.85);
``DEFAULT_MARGIN`` is the one every caller uses unless it names why not. Nothing here probes a device:
the capacity comes from configs/chips.yaml, an option, or the backend. Bad input raises
``UsageError``; nothing returns None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ascendopt.errors import UsageError

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "int8": 1,
               "int32": 4, "int64": 8, "fp64": 8, "float64": 8}
# The UB safety margin, defined here once: fla's ``_UB_SAFETY_MARGIN`` for its Triton-Ascend vector
# kernels (modules/norm/triton_ascend/l2norm.py, the cumsum, chunk_scaled_dot_kkt; docs/practice.md
# §6.2), the top of the practice's 0.75-0.85 range. The rest of the UB is room for what a multiplier does
# not count (index vectors, scalars, the compiler's own temporaries). A kernel that budgets less (the
# gated delta rule's state, output and WY stages, as their fla counterparts) names its own constant.
DEFAULT_MARGIN = 0.85


def dtype_bytes(dtype: str | int) -> int:
    """Bytes per element of a dtype name (``bf16``, ``fp32``, ``torch.bfloat16``...) or an int."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype <= 0:
            raise UsageError(f"dtype size {dtype}: must be > 0 bytes")
        return dtype
    key = str(dtype).replace("torch.", "").replace("tl.", "").lower()
    if key not in DTYPE_BYTES:
        raise UsageError(f"unknown dtype {dtype!r}", hint=f"known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def _check_margin(margin: float) -> Fraction:
    if not (0 < margin <= 1):
        raise UsageError(f"margin {margin}: must be in (0, 1]")
    # Exact rational arithmetic so 0.85 x 196608 is compared without float rounding.
    return Fraction(str(margin))


@dataclass(frozen=True)
class UBCheck:
    peak_bytes: int
    budget_bytes: int  # floor(margin x ub_bytes)
    ub_bytes: int
    margin: float

    @property
    def safe(self) -> bool:
        return self.peak_bytes <= self.budget_bytes

    @property
    def share(self) -> float:
        """Peak as a fraction of the whole UB (not of the budget)."""
        return self.peak_bytes / self.ub_bytes

    def describe(self) -> str:
        verdict = "fits" if self.safe else "OVERFLOWS"
        return (f"peak {self.peak_bytes} B = {self.share:.1%} of UB {self.ub_bytes} B; budget {self.budget_bytes} B "
                f"(margin {self.margin}) -> {verdict}")


def _check_multiplier(multiplier: float) -> Fraction:
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not math.isfinite(multiplier) \
            or multiplier <= 0:
        raise UsageError(f"memory multiplier {multiplier}: must be a finite number > 0")
    return Fraction(str(multiplier))


def peak_bytes(tile: Mapping[str, int], dtype: str | int, multiplier: float) -> int:
    """``ceil(multiplier x prod(tile) x dtype_bytes)`` in bytes; every tile size must be >= 1."""
    mult = _check_multiplier(multiplier)
    if not tile:
        raise UsageError("tile: give at least one dimension, e.g. BT=64,BD=256")
    elements = 1
    for name, size in tile.items():
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise UsageError(f"tile {name}={size}: must be a positive integer")
        elements *= size
    return math.ceil(mult * elements * dtype_bytes(dtype))


def check(tile: Mapping[str, int], dtype: str | int, multiplier: float, ub_bytes: int,
          margin: float = DEFAULT_MARGIN) -> UBCheck:
    """Peak live bytes of ``tile`` against ``margin x ub_bytes``."""
    if isinstance(ub_bytes, bool) or not isinstance(ub_bytes, int) or ub_bytes <= 0:
        raise UsageError(f"UB size {ub_bytes}: must be a positive number of bytes")
    m = _check_margin(margin)
    budget = math.floor(m * ub_bytes)
    return UBCheck(peak_bytes(tile, dtype, multiplier), budget, ub_bytes, margin)


def solve(tile: Mapping[str, int], free: str, dtype: str | int, multiplier: float, ub_bytes: int,
          margin: float = DEFAULT_MARGIN, upper: int | None = None) -> int:
    """Largest power of two for dimension ``free`` with the other dims of ``tile`` fixed.

    ``upper`` caps the answer (e.g. next power of two of the real extent). Raises if even 1 overflows.
    """
    if not free:
        raise UsageError("solve: name the free dimension, e.g. BT")
    if upper is not None and (isinstance(upper, bool) or not isinstance(upper, int) or upper <= 0):
        raise UsageError(f"upper bound {upper}: must be a positive integer")
    fixed = {k: v for k, v in tile.items() if k != free}
    one = check({**fixed, free: 1}, dtype, multiplier, ub_bytes, margin)
    if not one.safe:
        raise UsageError(f"{free}=1 already overflows UB: {one.describe()}")
    per_unit = _check_multiplier(multiplier) * dtype_bytes(dtype)
    for size in fixed.values():
        per_unit *= size
    largest = int(Fraction(one.budget_bytes) / per_unit)  # floor: largest integer that fits
    best = pow2_floor(largest)
    if upper is not None:
        best = min(best, next_pow2(upper))
    return best


def pow2_floor(n: int) -> int:
    """Largest power of two <= ``n`` (1 for ``n`` < 1)."""
    return 1 << (n.bit_length() - 1) if n >= 1 else 1


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def resolve_chip(name: str) -> tuple[str, int]:
    """``(chip name in configs/chips.yaml, UB bytes)`` for a name or alias (``config.chip_key``).

    Raises ``UsageError`` for an unknown chip or one without a UB figure (GPUs, the interpreter).
    """
    from ascendopt.device.config import chip_key, chips

    try:
        match = chip_key(name)
    except UsageError as exc:
        raise UsageError(exc.message, hint=f"{exc.hint}; or pass --ub-bytes") from None
    ub = chips()[match].get("ub_bytes")
    if not isinstance(ub, int) or ub <= 0:
        raise UsageError(f"chip {match} has no Unified Buffer size in chips.yaml", hint="pass --ub-bytes N")
    return match, ub
