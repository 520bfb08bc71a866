"""Load a script of ``benchmarks/`` as a module for its tests (the scripts are not a package)."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    """``benchmarks/<name>.py`` as module ``name`` (registered in ``sys.modules``, as an import would)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
