"""Which kernel names a pattern means: the one matching rule of the whole tool.

A pattern is plain text (a substring test: device kernel names carry suffixes such as ``_mix_aiv``,
op-type prefixes or template arguments) or ``regex:EXPR`` (a regular-expression search, the
convention of Nsight Compute's ``-k regex:``). ``analyze --kernel-filter``, the gate's kernel-hit
stage, the round summary's target kernel and the floor check all use it, so a contract frozen with
``--kernel-filter regex:...`` means the same kernels everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ascendopt.errors import UsageError

REGEX_PREFIX = "regex:"


def name_matcher(pattern: str, option: str = "--kernel-filter") -> Callable[[str], bool]:
    """A predicate ``name -> bool`` for ``pattern``; a bad regular expression is a UsageError naming ``option``."""
    if pattern.startswith(REGEX_PREFIX):
        try:
            rx = re.compile(pattern[len(REGEX_PREFIX):])
        except re.error as exc:
            raise UsageError(f"{option} {pattern!r}: not a valid regular expression ({exc})") from None
        return lambda name: rx.search(name) is not None
    return lambda name: pattern in name


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """True when ``name`` matches one of ``patterns`` (empty patterns are ignored)."""
    return any(name_matcher(p)(name) for p in patterns if p)


def unmatched(patterns: Iterable[str], names: Iterable[str]) -> list[str]:
    """The patterns that match none of ``names``, in the order given."""
    names = list(names)
    return [p for p in patterns if not any(name_matcher(p)(n) for n in names)]
