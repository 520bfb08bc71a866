"""Lower Triton kernels through triton-ascend's front end to linalg/HIVM MLIR (``.ttadapter``) on a CPU.

This module runs INSIDE the triton-ascend environment, never in ascendopt's own (triton-ascend installs a
package named ``triton``; it must never meet upstream triton, docs/install.md §3.7). It imports only the
standard library, triton and (when present) torch, so it can run as a plain file
(``python .../device/lowering.py --request req.json``) without ascendopt's dependencies on the path; the
parent side is ``device/ascend_env.py``. ``scripts/lower_ascend.py`` (the bundled 18-kernel check) uses the
same ``recording`` / ``lower`` functions, so both checks share one code path.

How a launch is lowered: ``kernel[grid](...)`` is recorded instead of run (``recording()`` replaces
``JITFunction.run``; an ``@triton.autotune`` kernel records one launch per config instead of benchmarking),
each distinct (kernel, argument types, constexprs) is compiled with
``triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("npu", arch, 0))`` after the
``npubin`` stage (``bishengir-compile``, shipped with CANN, not the wheel) is dropped. A kernel lowers when
its ``.ttadapter`` is written.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import runpy
import sys
import time
import types
from pathlib import Path

DEFAULT_ARCH = "Ascend910B2"
# torch dtype name -> Triton signature type of a pointer to it
TYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64", "int32": "i32",
              "int64": "i64", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}
# Launch keywords that are compile options, not kernel parameters (kept out of the signature).
ERROR_CHARS = 400  # the one-line compiler message is trimmed to its location and its last characters


class TensorType:
    """A recorded pointer argument: its dtype only (presets are large; the signature needs no data)."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"TensorType({self.dtype})"


def _light(value):
    """A recorded argument without its data: tensors (anything with ``dtype`` and ``data_ptr``) by dtype."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return TensorType(str(value.dtype).replace("torch.", ""))
    return value


def _grid_dims(grid, meta: dict) -> list[int] | None:
    """The launch grid as a list of ints (a callable grid is called with the launch's named values)."""
    try:
        value = grid(meta) if callable(grid) else grid
        if isinstance(value, int):
            value = (value,)
        return [int(v) for v in value]
    except Exception:  # noqa: BLE001 - a grid that needs device facts: the launch is still lowered
        return None


@contextlib.contextmanager
def recording(launches: list[dict], extra: dict | None = None):
    """Record every ``kernel[grid](...)`` launch into ``launches`` instead of running it.

    Each record: ``{"kernel": JITFunction, "args": [...], "kwargs": {...}, "grid": [ints] | None, **extra}``
    (``extra`` is read at each launch, so a caller can update it between launches). Autotuned kernels record
    one launch per config; ``@triton.heuristics`` values are computed by triton itself before the record.
    """
    from triton.runtime import autotuner, jit

    extra = extra if extra is not None else {}
    original_run = jit.JITFunction.run
    original_tune = autotuner.Autotuner.run

    def run(self, *args, grid, warmup, **kwargs):
        names = self.arg_names
        meta = {**dict(zip(names, args, strict=False)), **kwargs}
        launches.append({"kernel": self, "args": [_light(a) for a in args],
                         "kwargs": {k: _light(v) for k, v in kwargs.items()}, "grid": _grid_dims(grid, meta),
                         **extra})
        return None

    def tune(self, *args, **kwargs):
        for config in self.configs:  # lower every config: the autotuner would try them all on the device
            self.fn.run(*args, **kwargs, **config.all_kwargs())
        return None

    jit.JITFunction.run = run
    autotuner.Autotuner.run = tune
    try:
        yield launches
    finally:
        jit.JITFunction.run = original_run
        autotuner.Autotuner.run = original_tune


def signature_of(fn, args: list, kwargs: dict) -> tuple[dict, dict]:
    """Triton signature (parameter -> type) and constants (constexprs and None arguments) of one launch.

    Positional arguments may stop short of the parameter list: the rest come from ``kwargs`` or the
    parameter's default. Raises TypeError naming a parameter that has no value or no Triton type.
    """
    names = fn.arg_names
    values = dict(zip(names, args, strict=False))
    values.update({k: v for k, v in kwargs.items() if k in names})
    signature, constants = {}, {}
    for index, name in enumerate(names):
        param = fn.params[index]
        if name not in values:
            default = getattr(param, "default", inspect.Parameter.empty)
            if default is inspect.Parameter.empty:
                raise TypeError(f"parameter {name} of {fn.__name__} has no value in the launch")
            values[name] = default
        value = values[name]
        if type(value).__name__ == "constexpr":
            value = value.value
        if param.is_constexpr or value is None:
            signature[name], constants[name] = "constexpr", value
        elif isinstance(value, TensorType):
            if value.dtype not in TYPE_NAMES:
                raise TypeError(f"parameter {name} of {fn.__name__}: no Triton type for tensor dtype {value.dtype}")
            signature[name] = "*" + TYPE_NAMES[value.dtype]
        elif isinstance(value, str) and (value.startswith("*") or value in SCALAR_TYPES):
            signature[name] = value  # a type given by a launch description
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"parameter {name} of {fn.__name__}: cannot type a {type(value).__name__}")
    return signature, constants


SCALAR_TYPES = {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"}


def launch_key(fn, signature: dict, constants: dict) -> tuple:
    """What makes two launches compile to the same kernel."""
    return (fn.__module__, fn.__name__, tuple(signature.items()),
            tuple(sorted((k, repr(v)) for k, v in constants.items())))


def patch_out_npubin() -> None:
    """Drop the ``npubin`` stage from the backend class that ``triton.backends`` actually loaded."""
    from triton.backends import backends as loaded

    cls = loaded["ascend"].compiler
    original = cls.add_stages
    if getattr(original, "_no_npubin", False):
        return

    def add_stages(self, stages, options):
        original(self, stages, options)
        stages.pop("npubin", None)

    add_stages._no_npubin = True
    cls.add_stages = add_stages


def ascend_is_loaded() -> bool:
    """Whether the ``triton`` importable here is triton-ascend (its ``ascend`` backend is registered)."""
    try:
        from triton.backends import backends as loaded
    except ImportError:
        return False
    return "ascend" in loaded


def _innermost_compilation_error(exc: BaseException):
    """The deepest triton CompilationError in the cause chain (the one that names the failing line)."""
    found, seen = None, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in {"CompilationError", "UnsupportedLanguageConstruct",
                                  "CompileTimeAssertionFailure"} and getattr(exc, "node", None) is not None:
            found = exc
        exc = exc.__cause__ or exc.__context__
    return found


def source_location(exc: BaseException, fn) -> dict | None:
    """``{"file", "line", "source", "reason"}`` of a front-end error in the user's file, or None.

    Triton's message gives the line relative to the failing function's source; the absolute line is
    found by looking that source line up in the file of the kernel (or of a ``@triton.jit`` helper it calls).
    """
    inner = _innermost_compilation_error(exc)
    if inner is None or not getattr(inner, "src", None) or not hasattr(inner.node, "lineno"):
        return None
    src_lines = inner.src.split("\n")
    if not 0 < inner.node.lineno <= len(src_lines):
        return None
    text = src_lines[inner.node.lineno - 1].strip()
    reason = " ".join(str(getattr(inner, "error_message", "") or "").split())
    file = getattr(getattr(fn, "fn", None), "__code__", None)
    path = file.co_filename if file else None
    line = None
    if path and Path(path).is_file():
        lines = Path(path).read_text(errors="replace").split("\n")
        start = max(getattr(fn, "starting_line_number", 1) - 1, 0)
        # the kernel's own body first (the usual case), then anywhere in the file (a jit helper)
        order = list(range(start, len(lines))) + list(range(0, start))
        line = next((i + 1 for i in order if lines[i].strip() == text), None)
    return {"file": path, "line": line, "source": text, "reason": reason or type(inner).__name__}


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= ERROR_CHARS else f"{one[:60]} ... {one[-(ERROR_CHARS - 65):]}"


def lower(fn, signature: dict, constants: dict, cache: Path, arch: str = DEFAULT_ARCH) -> dict:
    """Compile one launch to ``.ttadapter`` under ``cache`` (the TRITON_CACHE_DIR).

    Returns ``{"status": "lowered"|"failed", "seconds", "ttadapter"?, "error"?, "error_full"?, "location"?}``.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    result: dict = {}
    before = set(cache.rglob("*.ttadapter"))
    t0 = time.perf_counter()
    try:
        triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("npu", arch, 0))
    except AttributeError as exc:
        if "KernelMetadata" not in str(exc):  # expected: no npubin metadata after the last stage
            result.update(status="failed", error=f"AttributeError: {_short(str(exc))}")
    except Exception as exc:  # noqa: BLE001 - the lowering error is the result
        result.update(status="failed", error=f"{type(exc).__name__}: {_short(str(exc))}",
                      error_full=str(exc)[:6000])
        location = source_location(exc, fn)
        if location:
            result["location"] = location
    result["seconds"] = round(time.perf_counter() - t0, 2)
    new = sorted(set(cache.rglob("*.ttadapter")) - before)
    if "status" not in result:
        if new:
            result.update(status="lowered", ttadapter=str(new[0]))
        else:
            result.update(status="failed", error="no .ttadapter written (cache hit or silent stop)")
    return result


# ---- the precheck child: a user's file, its launches, one JSON result ----------------------------------


def _load_target(target: str) -> tuple[object, str | None]:
    """Import a Python file (by path) or a module (dotted path, from the current folder).

    Returns ``(module, problem)``. Where torch_npu is not installed (no NPU here) an empty module stands in
    for it, so a file that imports it at the top still loads. A file whose top-level code needs the device
    (an example script) stops there: the kernels it defined before that point are still checked, and the
    stop is the problem line. A module path that cannot be imported raises.
    """
    try:
        import torch_npu  # noqa: F401 - only whether it imports
    except ImportError:
        sys.modules.setdefault("torch_npu", types.ModuleType("torch_npu"))
    path = Path(target)
    if path.suffix != ".py" and not path.exists():
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(target), None
    name = "_precheck_target_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - top-level script code that needs a device
        line = next((f.lineno for f in reversed(_frames(exc)) if f.filename == str(path.resolve())), None)
        where = f"{target}:{line}" if line else target
        return module, f"importing {where} stopped: {type(exc).__name__}: {_short(str(exc))} " \
                       "(the kernels defined above that line are checked)"
    return module, None


def _frames(exc: BaseException) -> list:
    import traceback

    return traceback.extract_tb(exc.__traceback__)


def _kernels_of(module) -> dict:
    """``{name: JITFunction}`` of the ``@triton.jit`` kernels a module defines (through any autotune/heuristics)."""
    found = {}
    for name, value in vars(module).items():
        inner = value
        while hasattr(inner, "fn") and type(inner).__name__ != "JITFunction":
            inner = inner.fn
        if type(inner).__name__ == "JITFunction":
            found[name] = inner
    return found


def _described_launches(kernels: dict, described: list[dict]) -> list[dict]:
    """Launch records from a launch description (parsed and checked by the parent)."""
    launches = []
    for item in described:
        fn = kernels.get(item["kernel"])
        if fn is None:
            raise LookupError(f"kernel {item['kernel']!r} is not a @triton.jit function of the target "
                              f"(found: {', '.join(sorted(kernels)) or 'none'})")
        kwargs = {**item.get("signature", {}), **item.get("constexprs", {})}
        launches.append({"kernel": fn, "args": [], "kwargs": kwargs, "grid": item.get("grid"),
                         "label": item.get("label", "")})
    return launches


def run_request(request: dict) -> dict:
    """The child's work: import the target, record or build its launches, lower each distinct one."""
    cache = Path(request["cache_dir"])
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    os.environ.pop("TRITON_INTERPRET", None)  # the real front end, not the interpreter
    import triton

    if not ascend_is_loaded():
        return {"fatal": f"the triton in {sys.prefix} is not triton-ascend (no 'ascend' backend)"}
    patch_out_npubin()
    arch = request.get("arch") or DEFAULT_ARCH
    problems: list[str] = []
    launches: list[dict] = []
    kernels: dict = {}
    with recording(launches):
        if request.get("target"):
            try:
                module, stopped = _load_target(request["target"])
            except BaseException as exc:  # noqa: BLE001 - the user's file: reported, not raised
                return {"fatal": f"importing {request['target']} failed: {type(exc).__name__}: {_short(str(exc))}",
                        "kind": "usage"}
            kernels = _kernels_of(module)
            if stopped:
                if not kernels:
                    return {"fatal": stopped.split(" (the kernels")[0] + ", before any @triton.jit kernel (its "
                            "imports must be in the triton-ascend environment: see --ascend-python)", "kind": "usage"}
                problems.append(stopped)
        if request.get("launches") is not None:
            try:
                launches.extend(_described_launches(kernels, request["launches"]))
            except LookupError as exc:
                return {"fatal": str(exc.args[0]), "kind": "usage"}
        elif request.get("exec_file"):
            problems += _run_workload(request["exec_file"], request.get("call"))
        elif request.get("recorder"):
            problems += _run_recorder(request)
    if kernels:
        target_files = {fn.fn.__code__.co_filename for fn in kernels.values()}

        def keep(fn):
            return fn.fn.__code__.co_filename in target_files
    else:
        name_filter = request.get("kernel_filter") or ""

        def keep(fn):
            return name_filter in fn.__name__
    results, lower_problems, elsewhere = lower_launches(launches, cache, arch, keep=keep)
    if request.get("launches") is not None and lower_problems:  # a launch description that does not type
        return {"fatal": f"launch description: {lower_problems[0]}", "kind": "usage"}
    return {"triton": triton.__version__, "arch": arch, "python": sys.executable, "launches": results,
            "problems": problems + lower_problems, "other_launches": elsewhere}


def _run_workload(exec_file: str, call: str | None) -> list[str]:
    """Run a workload file while launches are recorded: with ``call`` (``workload``), as every ``--exec-file``
    of the tool runs (``collect/workload.py``: the module code once under its name, then ``workload()``),
    without it as ``python FILE``; what stopped it early, as problems (launches recorded so far still count)."""
    sys.path.insert(0, str(Path(exec_file).parent))  # its own imports, as `python FILE`
    try:
        namespace = runpy.run_path(exec_file, run_name="__ascendopt_workload__" if call else "__main__")
        if call:
            if not callable(namespace.get(call)):
                return [f"{exec_file} defines no {call}()"]
            namespace[call]()
    except SystemExit:
        pass
    except BaseException as exc:  # noqa: BLE001 - the user's workload: reported, not raised
        return [f"{exec_file} stopped: {type(exc).__name__}: {_short(str(exc))}"]
    return []


def _run_recorder(request: dict) -> list[str]:
    """A recorder named by the request (``module:function``, importable from ``package_root``; e.g. the
    bundled kernels' spec launchers) called with the request: it launches, we record; it returns problems."""
    sys.path.insert(0, request["package_root"])
    module_name, function = request["recorder"].split(":")
    return list(getattr(importlib.import_module(module_name), function)(request) or [])


def lower_launches(launches: list[dict], cache: Path, arch: str, keep=lambda fn: True) -> tuple[list, list, int]:
    """Lower each distinct launch ``keep(kernel)`` accepts: ``(results, problems, launches not kept)``.

    A result: ``kernel, file, line, grid, label, signature`` (non-constexpr types), ``constexprs`` and
    ``lower``'s keys, plus any extra keys the recorder attached (``spec``, ``preset``, ``mode``, ``config``).
    """
    results, problems, seen, elsewhere = [], [], set(), 0
    for launch in launches:
        fn = launch["kernel"]
        if not keep(fn):
            elsewhere += 1  # a kernel of another file the workload launched: not the target's
            continue
        try:
            signature, constants = signature_of(fn, launch["args"], launch["kwargs"])
        except TypeError as exc:
            problems.append(str(exc))
            continue
        key = launch_key(fn, signature, constants)
        if key in seen:
            continue
        seen.add(key)
        extra = {k: v for k, v in launch.items() if k not in {"kernel", "args", "kwargs"}}
        record = {"kernel": fn.__name__, "file": fn.fn.__code__.co_filename,
                  "line": getattr(fn, "starting_line_number", None), "label": "", **extra,
                  "signature": {k: v for k, v in signature.items() if v != "constexpr"},
                  "constexprs": {k: v for k, v in constants.items() if v is not None}}
        record.update(lower(fn, signature, constants, cache, arch))
        results.append(record)
    return results, problems, elsewhere


def main(argv: list[str] | None = None) -> int:
    """Child entry point: ``--request FILE`` (JSON) -> the result JSON in ``--out FILE``. Exit 0 when the
    result was written (whatever lowered), 3 when the request itself could not be served (``fatal``)."""
    ap = argparse.ArgumentParser(description="precheck child: lower a file's Triton kernels (triton-ascend venv)")
    ap.add_argument("--request", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    request = json.loads(Path(args.request).read_text())
    result = run_request(request)
    Path(args.out).write_text(json.dumps(result, default=repr))
    return 3 if "fatal" in result else 0


if __name__ == "__main__":
    sys.exit(main())
