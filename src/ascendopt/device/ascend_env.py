"""The triton-ascend environment precheck compiles in, and the child process that does the compile.

triton-ascend installs a package named ``triton``: it must never share an environment with upstream triton
(docs/install.md §3.7), so the compile runs in a separate virtual environment, in a child process started
with ``python -I`` (isolated: no PYTHONPATH, no user site-packages, not even the script's folder on
``sys.path``), so nothing of ascendopt's environment, upstream triton included, can be imported there.

Which interpreter (``find_python``), first match wins:

1. ``--ascend-python PATH`` (an existing environment with triton-ascend);
2. ``$ASCENDOPT_ASCEND_PYTHON`` (CI passes the venv it built);
3. the managed environment under ``$ASCENDOPT_CACHE`` (default ``~/.cache/ascendopt``) ``/ascend-venv``,
   created on first use with ``ASCEND_PINS`` when the caller allows installing (``ascendopt precheck``
   does; ``freeze`` and ``optimize-round`` never install, they only use one that is present).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ascendopt.errors import EnvironmentProblem, UsageError
from ascendopt.process import ProcessTimeout, run

# The managed environment's pins, the same as .ci/run's (tests/device/test_ascend_env.py checks they agree):
# torch's CPU build for the host side of a workload, numpy below 2.4 for triton-ascend 3.2, pybind11 and
# pyyaml that triton-ascend imports without declaring them, pytest that kernel files (the compiler's own
# examples among them) import at the top for their tests.
ASCEND_PINS = ("torch==2.13.0", "numpy<2.4", "pybind11", "pyyaml", "pytest", "triton-ascend==3.2.0")
ENV_MARKER = ".ascendopt-ascend-env.json"  # written last: an environment without it is incomplete
PIP_STEP_TIMEOUT_S = 1800.0  # torch (~200 MB CPU build) and triton-ascend (~1 GB) on a slow link
PROBE_TIMEOUT_S = 120.0  # importing triton-ascend takes a few seconds; two minutes means a broken install
DEFAULT_CHILD_TIMEOUT_S = 600.0  # a file's kernels lower in seconds each; ten minutes is a hang
CHILD_SCRIPT = Path(__file__).with_name("lowering.py")


def cache_dir() -> Path:
    """``$ASCENDOPT_CACHE``, else ``$XDG_CACHE_HOME/ascendopt``, else ``~/.cache/ascendopt``."""
    if os.environ.get("ASCENDOPT_CACHE"):
        return Path(os.environ["ASCENDOPT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ascendopt"


def managed_env() -> Path:
    return cache_dir() / "ascend-venv"


def _python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def managed_env_ready() -> bool:
    """Whether the managed environment is complete and was built with today's pins."""
    marker = managed_env() / ENV_MARKER
    try:
        return json.loads(marker.read_text()).get("pins") == list(ASCEND_PINS) and \
            _python_of(managed_env()).exists()
    except (OSError, ValueError):
        return False


def _child_env() -> dict[str, str]:
    """The child's environment: ours without Python or Triton switches that would change what it imports."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON") and k not in {"TRITON_INTERPRET", "VIRTUAL_ENV"}}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def probe(python: str | Path) -> str:
    """triton-ascend's version in ``python``'s environment; EnvironmentProblem (exit 5) in one line if not."""
    code = ("import triton; from triton.backends import backends; print(triton.__version__); "
            "raise SystemExit(0 if 'ascend' in backends else 3)")
    try:
        proc = run([str(python), "-I", "-c", code], label="triton-ascend probe", timeout=PROBE_TIMEOUT_S,
                   env=_child_env())
    except (OSError, ProcessTimeout) as exc:
        raise EnvironmentProblem(f"triton-ascend environment {python}: cannot run it ({exc})") from None
    if proc.returncode != 0:
        why = "its triton is not triton-ascend" if proc.returncode == 3 else \
            (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise EnvironmentProblem(f"triton-ascend environment {python}: {why}",
                                 hint="pass --ascend-python of a venv with triton-ascend, or let precheck build one")
    return proc.stdout.strip()


def create_managed_env(on_step: Callable[[str, int, int], None] | None = None) -> Path:
    """Build the managed environment with ``ASCEND_PINS`` (a few minutes, ~1.2 GB); its python.

    ``on_step(description, done, total)`` is called before each step (for a progress bar). A failed step
    removes the half-built environment and raises EnvironmentProblem naming the step and pip's last line.
    """
    env = managed_env()
    steps = [("create the virtual environment", [sys.executable, "-m", "venv", "--clear", str(env)])]
    python = str(_python_of(env))
    steps += [(f"pip install {pin}", [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", pin,
                                      *ASCEND_PINS[:i]])  # earlier pins again: pip keeps them, never upgrades
              for i, pin in enumerate(ASCEND_PINS)]
    env.parent.mkdir(parents=True, exist_ok=True)
    for done, (description, argv) in enumerate(steps):
        if on_step:
            on_step(description, done, len(steps))
        try:
            proc = run(argv, label=f"triton-ascend environment: {description}", timeout=PIP_STEP_TIMEOUT_S,
                       env=_child_env())
            failed = proc.returncode != 0
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1] if failed else ""
        except (OSError, ProcessTimeout) as exc:
            failed, last = True, str(exc)
        if failed:
            shutil.rmtree(env, ignore_errors=True)
            raise EnvironmentProblem(f"building the triton-ascend environment in {env}: {description} failed: "
                                     f"{last}", hint="pip must reach PyTorch's CPU wheel index (docs/install.md "
                                                     "§1.2), or pass --ascend-python")
    if on_step:
        on_step("done", len(steps), len(steps))
    (env / ENV_MARKER).write_text(json.dumps({"pins": list(ASCEND_PINS)}))
    return Path(python)


def find_python(explicit: str | None = None, *, install: bool = False,
                on_step: Callable[[str, int, int], None] | None = None) -> Path | None:
    """The interpreter of a triton-ascend environment (see the module docstring), or None when there is
    none and ``install`` is False. An explicit path that does not exist raises EnvironmentProblem."""
    given = explicit or os.environ.get("ASCENDOPT_ASCEND_PYTHON")
    if given:
        path = Path(given).expanduser()
        if not path.exists():
            source = "--ascend-python" if explicit else "$ASCENDOPT_ASCEND_PYTHON"
            raise EnvironmentProblem(f"{source} {given}: no such interpreter")
        return path
    if managed_env_ready():
        return _python_of(managed_env())
    if not install:
        return None
    return create_managed_env(on_step)


def run_child(python: Path, request: dict, timeout: float = DEFAULT_CHILD_TIMEOUT_S) -> dict:
    """Run ``lowering.py`` in ``python``'s environment on ``request``; its result dict.

    The request's ``cache_dir`` receives the ``.ttir``/``.ttadapter`` files. A request with a ``recorder``
    (``module:function`` of ascendopt, e.g. ``ascendopt.kernels.launches:record_contract``) gets
    ``package_root``: a folder holding only a link to this ascendopt package, so the child can import
    ascendopt and nothing else of this environment (its upstream triton above all). A child that does not
    answer (crash, timeout, a ``fatal`` result) raises EnvironmentProblem with its reason in one line.
    """
    with tempfile.TemporaryDirectory(prefix="ascendopt-precheck-") as tmp:
        if request.get("recorder"):
            root = Path(tmp) / "package"
            root.mkdir()
            (root / "ascendopt").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
            request = {**request, "package_root": str(root)}
        request_file, out_file = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_file.write_text(json.dumps(request))
        argv = [str(python), "-I", str(CHILD_SCRIPT), "--request", str(request_file), "--out", str(out_file)]
        try:
            proc = run(argv, label="precheck compile (triton-ascend child)", timeout=timeout, env=_child_env())
        except ProcessTimeout as exc:
            raise EnvironmentProblem(str(exc), hint="raise --timeout, or precheck fewer launches") from None
        except OSError as exc:
            raise EnvironmentProblem(f"precheck compile: cannot start {python} ({exc.strerror or exc})") from None
        try:
            result = json.loads(out_file.read_text())
        except (OSError, ValueError):
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}, no message"])[-1]
            raise EnvironmentProblem(f"precheck compile in {python} gave no result: {last}") from None
    if "fatal" in result:
        problem = UsageError if result.get("kind") == "usage" else EnvironmentProblem
        raise problem(f"precheck: {result['fatal']}")
    return result
