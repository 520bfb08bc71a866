"""The tree passes the ruff rules selected in pyproject.toml ([tool.ruff], [tool.ruff.lint])."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("src", "tests", "benchmarks", "tools", "scripts")


def test_ruff_check_is_clean():
    # ruff is in the dev extra that CI installs: its absence is a broken environment, not a reason to skip
    if importlib.util.find_spec("ruff") is None:
        pytest.fail(f"ruff is not importable by {sys.executable}: install the dev extra (pip install -e '.[dev]')")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", *CHECKED], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"ruff check {' '.join(CHECKED)} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
