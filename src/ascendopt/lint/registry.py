"""Rule records, the registry keyed by stable id, and --select/--ignore resolution.

Ids never change meaning once released: AO0xx input problems, AO1xx launch parameters,
AO2xx integer width of index math, AO3xx DMA paths and control flow, AO4xx numerics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ascendopt.errors import UsageError

if TYPE_CHECKING:
    from ascendopt.lint.context import FileContext


@dataclass(frozen=True)
class Finding:
    """One violation: where (1-based line, 1-based column) and what."""

    rule: str
    path: str
    line: int
    col: int
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "name": RULES[self.rule].name, "path": self.path, "line": self.line,
                "col": self.col, "message": self.message}


@dataclass(frozen=True)
class Rule:
    """A static check: ``check(ctx)`` yields ``(node, message)`` pairs for one parsed file."""

    id: str
    name: str
    summary: str
    why: str
    fix: str
    seed: tuple[str, ...]  # the seed's own sentences this rule enforces, quoted verbatim
    check: Callable[[FileContext], Iterable[tuple[object, str]]] | None = field(default=None, compare=False)
    limits: str = ""  # what the rule deliberately does not detect (precision over recall)

    def explain(self) -> str:
        """The rule's documentation as plain text (what ``ascendopt lint --explain ID`` prints)."""
        quotes = "\n".join(f'  "{q}"' for q in self.seed)
        limits = f"Does not see (known blind spots): {self.limits}\n\n" if self.limits else ""
        return (f"{self.id} {self.name}: {self.summary}\n\nWhy: {self.why}\n\nFix: {self.fix}\n\n{limits}"
                f"From the practice (fla-ascend-performance skill):\n{quotes}\n")


RULES: dict[str, Rule] = {}


def rule(id: str, name: str, *, summary: str, why: str, fix: str, seed: tuple[str, ...], limits: str = ""):
    """Decorator that registers a check function under a stable id."""

    def wrap(check):
        if id in RULES:
            raise RuntimeError(f"duplicate lint rule id {id}")
        RULES[id] = Rule(id, name, summary, why, fix, seed, check, limits)
        return check

    return wrap


def get_rule(rule_id: str) -> Rule:
    key = rule_id.strip().upper()
    if key not in RULES:
        raise UsageError(f"unknown lint rule {rule_id!r}", hint=f"known: {', '.join(sorted(RULES))}")
    return RULES[key]


def _expand(spec: str | Iterable[str] | None, option: str) -> set[str] | None:
    """``"AO1,AO203"`` -> ids; a token may be a prefix of several ids (``AO2`` = all AO2xx)."""
    if spec is None:
        return None
    tokens = spec.split(",") if isinstance(spec, str) else list(spec)
    ids: set[str] = set()
    for token in (t.strip().upper() for t in tokens):
        if not token:
            continue
        matched = {rid for rid in RULES if rid.startswith(token)}
        if not matched:
            raise UsageError(f"{option} {token}: no lint rule has this id or prefix",
                             hint=f"known: {', '.join(sorted(RULES))}")
        ids |= matched
    return ids


def active_rules(select=None, ignore=None) -> list[Rule]:
    """Rules left after ``select`` (default: all) minus ``ignore``, in id order."""
    chosen = _expand(select, "--select")
    dropped = _expand(ignore, "--ignore") or set()
    ids = (set(RULES) if chosen is None else chosen) - dropped
    return [RULES[i] for i in sorted(ids)]


def iter_rules() -> Iterator[Rule]:
    return iter(RULES[i] for i in sorted(RULES))
