"""The bundled kernels follow the review checklist: `ascendopt lint src/ascendopt/kernels` is clean."""

import ast
from pathlib import Path

import ascendopt.kernels
from ascendopt.lint import lint_paths
from ascendopt.lint.context import FileContext

KERNELS = Path(ascendopt.kernels.__file__).resolve().parent


def test_bundled_kernels_are_lint_clean():
    report = lint_paths([KERNELS])
    shown = "\n".join(f"{f.path}:{f.line}:{f.col}: {f.rule} {f.message}" for f in report.errors + report.findings)
    assert report.exit_code == 0, shown


def test_the_linter_sees_the_bundled_kernels():
    # Guards the test above: a clean result must come from files whose @triton.jit kernels were analysed.
    kernels = 0
    for path in KERNELS.rglob("*.py"):
        source = path.read_text()
        kernels += len(FileContext(str(path), source, ast.parse(source)).kernels)
    assert kernels >= 3
