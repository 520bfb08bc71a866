"""`ascendopt lint`: the mechanical part of the review checklist as static checks over Triton-Ascend sources."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ascendopt.cli.options import JsonOpt, examples


def lint(
    paths: Annotated[list[str] | None, typer.Argument(metavar="PATH",
        hidden=True, help="Python files or folders (searched for *.py).")] = None,
    format: Annotated[str, typer.Option("--format", metavar="FORMAT",
        help="text | json | github (workflow annotations).")] = "text",
    select: Annotated[
        str | None, typer.Option("--select", metavar="RULES",
            help="Only these rule ids or prefixes, comma-separated (AO1,AO203).")
    ] = None,
    ignore: Annotated[str | None, typer.Option("--ignore", metavar="RULES",
        help="Skip these rule ids or prefixes.")] = None,
    explain: Annotated[
        str | None, typer.Option("--explain", metavar="RULE",
            help="Print what a rule checks, why, the fix, what it does not see "
                                                   "(its blind spots) and the seed's words; `all` for every rule.")
    ] = None,
    list_rules: Annotated[bool, typer.Option("--list-rules", help="List every rule id with its summary.")] = False,
    json: JsonOpt = False,
) -> None:
    """Check Triton-Ascend kernels against the review checklist.

    PATH: Python files or folders (searched for *.py).

    Findings print as PATH:LINE:COL: ID message. Silence one line with `# noqa: ID` (or a bare `# noqa`).
    Exit 0 clean, 1 findings, 2 bad usage or a file that could not be read or parsed (reported as AO001/AO002).
    """
    from ascendopt import console
    from ascendopt.cli.lint_format import FORMATS, render, summary
    from ascendopt.errors import UsageError
    from ascendopt.lint import get_rule, iter_rules, lint_paths

    fmt = "json" if json else format.lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format {format}: unknown output format", hint=f"choose one of {', '.join(FORMATS)}")
    if explain:
        rules = [r for r in iter_rules() if r.check is not None] if explain.strip().lower() == "all" \
            else [get_rule(explain)]
        if fmt == "json":
            docs = [{"id": r.id, "name": r.name, "summary": r.summary, "why": r.why, "fix": r.fix,
                     "limits": r.limits, "seed": list(r.seed)} for r in rules]
            console.print_json(docs if len(rules) > 1 else docs[0])
        else:
            sys.stdout.write("\n".join(r.explain() for r in rules))
        return
    if list_rules:
        rules = list(iter_rules())
        if fmt == "json":
            console.print_json([{"id": r.id, "name": r.name, "summary": r.summary} for r in rules])
        else:
            sys.stdout.write("".join(f"{r.id} {r.name}: {r.summary}\n" for r in rules))
        return
    if not paths:
        raise UsageError("lint: give at least one file or folder", hint="e.g. ascendopt lint src/ --format github")
    report = lint_paths(paths, select=select, ignore=ignore)
    if json:
        console.print_json(report.to_dict())
        raise typer.Exit(report.exit_code)
    text = render(report, fmt)
    if text:
        sys.stdout.write(text + "\n")
    if fmt != "json":
        console.status(summary(report))
    raise typer.Exit(report.exit_code)


EXAMPLES = examples(
    "ascendopt lint src/my_ops/",
    "ascendopt lint src/my_ops/ --format github --select AO2 --ignore AO203",
    "ascendopt lint --list-rules",
    "ascendopt lint --explain AO401",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(lint)
