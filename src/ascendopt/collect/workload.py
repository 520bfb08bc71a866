"""Turning an exec-file or a bundled kernel into a zero-argument ``workload()`` callable.

exec-file semantics (those of the original ``profile_npu.py --exec-file``, docs/practice.md §2):
the file's folder goes first on ``sys.path`` (local imports work), the module code runs ONCE
(input creation, compilation warm-up), and the file must define a callable ``workload()`` that
each profiler step calls. Optionally it defines ``inputs(seed)`` beside ``workload(*inputs)``:
``inputs(seed)`` returns the arguments of one call (a tuple, or one value), made afresh for each seed
(torch is seeded with ``seed`` first when the judge calls it). The gate then makes the inputs itself,
gives baseline and candidate the same fresh ones, and never reuses one across timed calls
(``judge.engine``); a profiler step calls ``workload(*inputs(0))``, with the inputs made once.
Every failure names ``file:line`` and is the user's input problem
(exit 2): a syntax error, module code that raises, no ``workload()``, a ``workload()`` that raises.
"""

from __future__ import annotations

import ast
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.errors import UsageError


class WorkloadFailure(UsageError):
    """The user's workload raised, hung or crashed (exit 2: bad input, not a tool failure)."""


def _exception_line(exc: BaseException) -> str:
    """The last line of the traceback: ``ZeroDivisionError: division by zero``."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()[-1]


def _user_line(exc: BaseException, path: Path) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return frames[-1].lineno if frames else None


def describe_failure(exc: BaseException, path: Path, what: str) -> str:
    line = _user_line(exc, path)
    where = f"{path}:{line}" if line else str(path)
    return f"{where}: {what} raised {_exception_line(exc)}"


def _workload_line(source: str) -> int | None:
    """Line where a non-callable ``workload`` is bound, to point the user at it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "workload" and isinstance(node.ctx, ast.Store):
            return node.lineno
    return None


def check_exec_file(path: str | Path) -> Path:
    """Parent-side checks before any process starts (no user code runs): the file exists, is
    UTF-8 text and compiles (a syntax error is reported at once, with its line)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"--exec-file {p}: not found")
    if not p.is_file():
        raise UsageError(f"--exec-file {p}: not a file")
    try:
        source = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--exec-file {p}: not a UTF-8 text file") from None
    p = p.resolve()
    _compile(source, p)
    return p


def _compile(source: str, path: Path):
    try:
        return compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise WorkloadFailure(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None


def load_exec_file(path: Path) -> Callable[[], Any]:
    """Run the module code once and return a guarded ``workload``; see the module docstring. The
    module's namespace (its globals) is the returned function's ``module_globals``."""
    path = Path(path).resolve()
    source = path.read_text(encoding="utf-8")
    sys.path.insert(0, str(path.parent))
    code = _compile(source, path)
    namespace: dict[str, Any] = {"__name__": "__ascendopt_workload__", "__file__": str(path)}
    try:
        exec(code, namespace)  # noqa: S102 - running the user's workload file is the point
    except Exception as exc:  # noqa: BLE001 - any error in the user's module code is reported, not raised
        traceback.print_exc()  # the full traceback goes to the child's log, the error names the line
        raise WorkloadFailure(describe_failure(exc, path, "module code")) from None
    except SystemExit as exc:
        raise WorkloadFailure(f"{path}: module code called exit({exc.code!r})") from None
    workload = namespace.get("workload")
    if not callable(workload):
        line = _workload_line(source)
        where = f"{path}:{line}" if line else str(path)
        found = "is not callable" if "workload" in namespace else "is not defined"
        raise WorkloadFailure(f"{where}: workload() {found}",
                              hint="define `def workload(): ...`; it runs once per step")
    guarded = guard(workload, path)
    make = namespace.get("inputs")
    if callable(make):  # ``workload(*inputs(seed))``: called without arguments, on the inputs of seed 0
        made: list[tuple] = []
        make_guarded = guard(make, path)

        def on_seed_0() -> Any:
            if not made:
                value = make_guarded(0)
                made.append(tuple(value) if isinstance(value, (tuple, list)) else (value,))
            return guarded(*made[0])

        fn = on_seed_0
    else:
        fn = guarded
    fn.module_globals = namespace  # the module's inputs, which the gate checks for in-place writes
    fn.with_inputs = guarded  # workload(*args), for the judge's worker that makes the inputs itself
    return fn


def guard(workload: Callable[..., Any], path: Path) -> Callable[..., Any]:
    """``workload`` whose exceptions become ``WorkloadFailure`` naming ``file:line`` (arguments passed on)."""
    what = f"{getattr(workload, '__name__', 'workload')}()"

    def guarded(*args: Any) -> Any:
        try:
            return workload(*args)
        except Exception as exc:  # noqa: BLE001 - reported with file:line, exit 2
            traceback.print_exc()
            raise WorkloadFailure(describe_failure(exc, path, what)) from None
        except SystemExit as exc:
            raise WorkloadFailure(f"{path}: {what} called exit({exc.code!r})") from None

    return guarded


def kernel_callable(kernel: dict[str, Any]) -> Callable[[], Any]:
    """A bundled kernel as a workload: inputs made once (seeded, never zeros), ``spec.run`` per step."""
    from ascendopt import kernels
    from ascendopt.device import backends

    spec = kernels.get(kernel["kernel"])
    dims = dict(kernel["dims"])
    if "seqlens" in dims:
        dims["seqlens"] = tuple(dims["seqlens"])
    spec.check_supported(dims, kernel["dtype"], kernel["mode"])
    config = spec.config(kernel.get("config"))
    device = backends.current().torch_device()
    inputs = spec.make_inputs(dims, kernel["dtype"], device, 0)
    mode = kernel["mode"]
    return lambda: spec.run(inputs, config, mode)
