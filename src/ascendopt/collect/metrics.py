"""Metric groups and profiler levels: the names a user may type and the canonical names we store.

The canonical group names are torch_npu's ``AiCMetrics`` member names (docs/reference/
ascend-profiler.md §9.4), except that "no counters" is stored as ``none`` (the member is
``AiCoreNone``). Aliases follow the original ``profile_npu.py`` (optimization-loop.md §2): the key
is lower-cased with ``_`` and ``-`` removed, so ``Memory_UB``, ``memory-ub`` and ``ub`` all work.
"""

from __future__ import annotations

from ascendopt.errors import UsageError

NONE = "none"

# Canonical name -> accepted spellings (after lower-casing and dropping "_" and "-").
_GROUPS: dict[str, tuple[str, ...]] = {
    "PipeUtilization": ("pipe", "pipeutilization"),
    "MemoryUB": ("ub", "memoryub"),
    "Memory": ("memory",),
    "L2Cache": ("l2", "l2cache"),
    "ArithmeticUtilization": ("arith", "arithmeticutilization"),
    "MemoryAccess": ("memaccess", "memoryaccess"),
    "MemoryL0": ("memoryl0",),
    "ResourceConflictRatio": ("conflict", "resourceconflictratio"),
    NONE: ("none", "aicorenone"),
}
METRIC_GROUPS: tuple[str, ...] = tuple(_GROUPS)
_ALIASES = {alias: canonical for canonical, aliases in _GROUPS.items() for alias in aliases}

# torch_npu ProfilerLevel member names; Level0 / Level_none collect no PMU counters.
PROFILER_LEVELS: tuple[str, ...] = ("Level0", "Level1", "Level2", "Level_none")
LEVELS_WITHOUT_COUNTERS = ("Level0", "Level_none")


def _key(text: str) -> str:
    return text.strip().lower().replace("_", "").replace("-", "")


def valid_names() -> str:
    """Every accepted spelling, for error messages."""
    parts = [f"{canonical} ({', '.join(aliases)})" for canonical, aliases in _GROUPS.items()]
    return "; ".join(parts)


def normalize_metric_group(alias: str) -> str:
    """``"pipe"`` -> ``"PipeUtilization"``, ``"AiCoreNone"`` -> ``"none"``; unknown names raise UsageError."""
    canonical = _ALIASES.get(_key(str(alias)))
    if canonical is None:
        raise UsageError(f"unknown metric group {alias!r}", hint=f"valid: {valid_names()}")
    return canonical


def parse_metric_groups(text: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"pipe,ub"`` (or a list) -> canonical groups in the given order, duplicates dropped."""
    items = text.split(",") if isinstance(text, str) else list(text)
    groups: list[str] = []
    for item in items:
        if not str(item).strip():
            continue
        group = normalize_metric_group(item)
        if group not in groups:
            groups.append(group)
    if not groups:
        raise UsageError(f"--aic-metrics {text!r}: no metric group given", hint=f"valid: {valid_names()}")
    return groups


def normalize_level(level: str) -> str:
    """``"level1"`` / ``"Level1"`` / ``"1"`` -> ``"Level1"``; unknown levels raise UsageError."""
    key = _key(str(level))
    for name in PROFILER_LEVELS:
        if key in (_key(name), _key(name).removeprefix("level")):
            return name
    raise UsageError(f"unknown profiler level {level!r}", hint=f"valid: {', '.join(PROFILER_LEVELS)}")
