"""Load a script of ``benchmarks/`` or ``tools/`` as a module for its tests (the scripts are not a package)."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
TOOLS = REPO / "tools"


def script(name: str) -> Path:
    """The path of ``benchmarks/<name>.py`` or, failing that, ``tools/<name>.py``."""
    path = BENCHMARKS / f"{name}.py"
    return path if path.exists() else TOOLS / f"{name}.py"


def load(name: str):
    """The script ``name`` as module ``name`` (registered in ``sys.modules``, as an import would)."""
    spec = importlib.util.spec_from_file_location(name, script(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
