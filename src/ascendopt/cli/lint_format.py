"""Render a lint report (``lint.LintReport``) for ``ascendopt lint``: ``text`` (path:line:col: ID
message), ``json``, ``github`` (workflow annotations)."""

from __future__ import annotations

from ascendopt.lint.engine import LintReport
from ascendopt.lint.registry import Finding

FORMATS = ("text", "json", "github")


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def text_line(f: Finding) -> str:
    return f"{f.path}:{f.line}:{f.col}: {f.rule} {f.message}"


def github_line(f: Finding) -> str:
    """A GitHub Actions ``::error`` command; values escaped as the workflow-command syntax requires."""
    return f"::error file={_gh_property(f.path)},line={f.line},col={f.col}::{_gh_data(f.rule + ' ' + f.message)}"


def render(report: LintReport, fmt: str) -> str:
    """The report as one string for stdout (no trailing newline when there is nothing to print)."""
    if fmt == "json":
        from ascendopt.console import dumps_json

        return dumps_json(report.to_dict())
    line = github_line if fmt == "github" else text_line
    ordered = sorted(report.errors + report.findings, key=lambda f: (f.path, f.line, f.col, f.rule))
    return "\n".join(line(f) for f in ordered)


def summary(report: LintReport) -> str:
    """One status line for stderr."""
    files = len({f.path for f in report.findings})
    parts = [f"{report.files_checked} file(s) checked"]
    parts.append(f"{len(report.findings)} finding(s) in {files} file(s)" if report.findings else "no findings")
    if report.errors:
        parts.append(f"{len(report.errors)} file(s) could not be checked")
    return ", ".join(parts)
