"""Static checks of Triton-Ascend sources: the mechanical part of the review checklist as rules.

Public API: ``lint_paths(paths, select=None, ignore=None) -> LintReport``, ``lint_source(source, path)``,
``RULES`` (id -> Rule, each with ``explain()``), ``get_rule(id)``. One ``ast.parse`` and one tree walk
per file; rules read the shared ``FileContext``. Ids: AO0xx input, AO1xx launch parameters, AO2xx
index width, AO3xx DMA paths and control flow, AO4xx numerics.
"""

from __future__ import annotations

from ascendopt.lint import rules_dma, rules_dot, rules_index, rules_launch  # noqa: F401 - registers the rules
from ascendopt.lint.engine import LintReport, iter_files, lint_paths, lint_source
from ascendopt.lint.registry import RULES, Finding, Rule, active_rules, get_rule, iter_rules

__all__ = ["RULES", "Finding", "LintReport", "Rule", "active_rules", "get_rule", "iter_files", "iter_rules",
           "lint_paths", "lint_source"]
