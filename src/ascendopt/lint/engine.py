"""Run the rules over files: discovery, reading, one parse and one walk per file, `# noqa`, the report."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ascendopt.errors import UsageError
from ascendopt.lint.context import FileContext
from ascendopt.lint.registry import Finding, Rule, active_rules, rule

SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist"}
_NOQA = re.compile(r"#\s*noqa\b(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)

# Input problems are reported like findings (so CI annotations show them) but cannot be selected away.
rule("AO001", "syntax-error",
     summary="The file does not parse as Python, so no rule could check it.",
     why="A file the linter cannot parse is a file nobody has checked.",
     fix="Fix the syntax error (the message gives Python's own description and position).",
     seed=(("Before tuning, classify the issue: compile failure / UB overflow / grid limit / numeric error / real "
           "performance bottleneck"),))(None)
rule("AO002", "unreadable",
     summary="The file cannot be read (permissions, or not UTF-8 text).",
     why="A file the linter cannot read is a file nobody has checked.",
     fix="Make the file readable as UTF-8 text, or leave it out of the paths given to `ascendopt lint`.",
     seed=(("Make the target backend semantically correct before optimizing; never hide missing capability "
           "or kernel bugs behind a Torch fallback."),))(None)


@dataclass
class LintReport:
    """Findings of a run; ``errors`` are files that could not be checked (AO001/AO002)."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    files_checked: int = 0

    @property
    def exit_code(self) -> int:
        """2 when some input could not be checked, else 1 when there are findings, else 0."""
        return 2 if self.errors else (1 if self.findings else 0)

    def to_dict(self) -> dict:
        return {"schema": 1, "files_checked": self.files_checked,
                "findings": [f.to_dict() for f in self.findings], "errors": [f.to_dict() for f in self.errors]}


def iter_files(paths: Iterable[str | Path]) -> list[Path]:
    """Python files under ``paths`` (folders recursively, skipping hidden and build folders), sorted."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in sorted(path.rglob("*.py")):
                parts = file.relative_to(path).parts[:-1]
                if not any(p.startswith(".") or p in SKIP_DIRS for p in parts):
                    files.append(file)
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"{given}: no such file or directory", hint="give Python files or folders to lint")
    unique: dict[Path, Path] = {}
    for file in files:  # a file named twice (itself and via its folder) is linted once
        unique.setdefault(file.resolve(), file)
    return list(unique.values())


def suppressed(finding: Finding, lines: list[str]) -> bool:
    """Whether the finding's line carries ``# noqa`` (all rules) or ``# noqa: ID[,ID]`` naming its rule."""
    if not 0 < finding.line <= len(lines):
        return False
    match = _NOQA.search(lines[finding.line - 1])
    if match is None:
        return False
    codes = match.group("codes")
    if not codes:
        return True
    return any(finding.rule.startswith(code.upper()) for code in re.split(r"[\s,]+", codes))


def lint_source(source: str, path: str = "<string>", rules: list[Rule] | None = None) -> list[Finding]:
    """Findings for one source text, sorted by position; a syntax error is one AO001 finding."""
    rules = active_rules() if rules is None else rules
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        return [Finding("AO001", path, line, col, f"does not parse: {getattr(exc, 'msg', None) or exc}")]
    ctx = FileContext(path, source, tree)
    lines = source.splitlines()
    found: dict[tuple, Finding] = {}
    for r in rules:
        if r.check is None:
            continue
        for node, message in r.check(ctx):
            finding = Finding(r.id, path, node.lineno, node.col_offset + 1, message)
            if not suppressed(finding, lines):
                found.setdefault((r.id, finding.line, finding.col), finding)
    return sorted(found.values(), key=lambda f: (f.line, f.col, f.rule))


def lint_paths(paths: Iterable[str | Path], select=None, ignore=None) -> LintReport:
    """Lint every Python file under ``paths`` with the rules left by ``select``/``ignore`` (ids or prefixes)."""
    rules = active_rules(select, ignore)
    report = LintReport()
    for file in iter_files(paths):
        shown = str(file)
        try:
            source = file.read_bytes().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc.__class__.__name__
            report.errors.append(Finding("AO002", shown, 1, 1, f"cannot read: {reason}"))
            continue
        found = lint_source(source, shown, rules)
        if found and found[0].rule == "AO001":  # did not parse: an input error, not a checked file
            report.errors.extend(found)
            continue
        report.files_checked += 1
        report.findings.extend(found)
    return report
