"""Metric groups and profiler levels: parsing what a user types into the canonical names we store.

The groups themselves (canonical names, accepted aliases, the order the help lists them in) are
defined once, in ``ascendopt.analyze.traces.columns`` (``METRIC_GROUP_TABLE``), next to the columns
that show a profile holds them; this module only parses against that table. An alias is matched
lower-cased with ``_`` and ``-`` removed, so ``Memory_UB``, ``memory-ub`` and ``ub`` all work.
"""

from __future__ import annotations

from ascendopt.analyze.traces.columns import COLLECT_GROUP_ORDER, METRIC_GROUP_TABLE, NONE_GROUP
from ascendopt.errors import UsageError

NONE = NONE_GROUP
# Every group, in the order the help and the "unknown metric group" hint list them.
METRIC_GROUPS: tuple[str, ...] = COLLECT_GROUP_ORDER
_ALIASES = {alias: group for group, spec in METRIC_GROUP_TABLE.items() for alias in spec.aliases}

# torch_npu ProfilerLevel member names; Level0 / Level_none collect no PMU counters.
PROFILER_LEVELS: tuple[str, ...] = ("Level0", "Level1", "Level2", "Level_none")
LEVELS_WITHOUT_COUNTERS = ("Level0", "Level_none")


def _key(text: str) -> str:
    """The form aliases are compared in: ``" Memory_UB "`` -> ``"memoryub"``."""
    return text.strip().lower().replace("_", "").replace("-", "")


def valid_names() -> str:
    """Every accepted spelling, for error messages: ``"PipeUtilization (pipe, pipeutilization); ..."``."""
    parts = [f"{group} ({', '.join(METRIC_GROUP_TABLE[group].aliases)})" for group in METRIC_GROUPS]
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
