"""Own code: the ``@triton.autotune`` configs of a user's kernels, found statically and pinned one at a time.

``optimize-round --auto`` on an own-code contract screens these configs (``rounds.auto``): the frozen
workload runs once per config in a judge's worker whose ``triton.autotune`` is replaced so that the
chosen kernel gets that one config (``judge.autotune_pin``; Triton's autotuner does not benchmark a list of
one), timed with the bench core. The user then freezes the fastest config into the launch, so the
gate measures the next change, not the autotuner's choice at run time.

Discovery (``find_sites``) reads the source with ``ast`` (nothing is imported): a function decorated
with ``@triton.autotune(configs=[...], ...)`` (or ``autotune`` imported from triton) whose configs are
a literal list of ``triton.Config({...})`` calls with a literal dict. A list built at run time (a
comprehension, a helper) is reported as a site that cannot be screened, with why.

Ascend has no warps and no software-pipelining stages: a config carrying ``num_warps`` or
``num_stages`` is refused with the findings of lint rule AO101 (``refusals``), the same text
``ascendopt lint`` prints.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CUDA_ONLY_RULE = "AO101"


@dataclass(frozen=True)
class AutotuneConfig:
    """One ``triton.Config``: its index in the list, its kwargs dict and its line."""

    index: int
    kwargs: dict[str, Any]
    line: int

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.kwargs.items()) or "{}"


@dataclass(frozen=True)
class AutotuneSite:
    """One ``@triton.autotune`` kernel: where (``path`` relative to the project root, ``line``), its
    configs (empty when ``why_not`` says they cannot be read statically)."""

    path: str
    line: int
    end_line: int
    kernel: str
    configs: tuple[AutotuneConfig, ...] = ()
    why_not: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_autotune(deco: ast.AST) -> bool:
    return isinstance(deco, ast.Call) and _dotted(deco.func).split(".")[-1] == "autotune"


def _configs(call: ast.Call) -> tuple[tuple[AutotuneConfig, ...], str]:
    """The literal configs of an ``autotune(...)`` call, or ``((), why not)``."""
    node = next((kw.value for kw in call.keywords if kw.arg == "configs"), call.args[0] if call.args else None)
    if not isinstance(node, (ast.List, ast.Tuple)):
        return (), "configs built at run time (not a literal list): pin one by hand"
    out = []
    for i, elt in enumerate(node.elts):
        if not (isinstance(elt, ast.Call) and _dotted(elt.func).split(".")[-1] == "Config"):
            return (), f"config #{i} is not a triton.Config(...) call"
        arg = elt.args[0] if elt.args else next((kw.value for kw in elt.keywords if kw.arg == "kwargs"), None)
        try:
            kwargs = ast.literal_eval(arg) if arg is not None else {}
        except ValueError:
            return (), f"config #{i}'s kwargs are not a literal dict"
        if not isinstance(kwargs, dict):
            return (), f"config #{i}'s kwargs are not a dict"
        out.append(AutotuneConfig(i, kwargs, elt.lineno))
    return tuple(out), "" if out else "an empty configs list"


def sites_in_source(source: str, path: str) -> list[AutotuneSite]:
    """The ``@triton.autotune`` kernels of one file (``path`` as it should be named)."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in fn.decorator_list:
            if _is_autotune(deco):
                configs, why = _configs(deco)
                found.append(AutotuneSite(path, deco.lineno, deco.end_lineno or deco.lineno, fn.name, configs, why))
    return sorted(found, key=lambda s: s.line)


def find_sites(root: Path, files: Iterable[str]) -> list[AutotuneSite]:
    """The ``@triton.autotune`` kernels in ``files`` (paths relative to ``root``; unreadable ones skipped)."""
    out = []
    for rel in files:
        try:
            source = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "autotune" in source:
            out += sites_in_source(source, rel)
    return out


def refusals(root: Path, sites: Iterable[AutotuneSite]) -> list[str]:
    """``path:line: AO101 message`` for every num_warps/num_stages finding inside an autotune decorator
    (lint rule AO101's own findings and words)."""
    from ascendopt.lint.engine import lint_source
    from ascendopt.lint.registry import get_rule

    rule = get_rule(CUDA_ONLY_RULE)
    out = []
    by_path: dict[str, list[AutotuneSite]] = {}
    for site in sites:
        by_path.setdefault(site.path, []).append(site)
    for path, here in by_path.items():
        source = (root / path).read_text(encoding="utf-8")
        for f in lint_source(source, path, [rule]):
            if any(s.line <= f.line <= s.end_line for s in here):
                out.append(f"{f.path}:{f.line}: {f.rule} {f.message}")
    return out
