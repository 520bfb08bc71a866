"""``ascendopt precheck``: the no-NPU checks of a user's Triton-Ascend kernels, in one report.

For each distinct launch (kernel, argument types, constexprs) of a target file: whether it lowers through
triton-ascend's front end (the compiler's message, trimmed to the user's source line, when not), the static
UB estimate from the lowered IR's local buffers (``device/ttadapter.py``: an estimate, the real verdict is
``bishengir-compile``'s), the predicted core type against the launch grid; plus the lint findings of the
same file. The compile runs in the triton-ascend environment's child process (``device/ascend_env.py``).

Launches come from an ``--exec-file`` workload (run in the child with every ``kernel[grid](...)`` recorded
instead of executed) or a launch description (YAML)::

    chip: Ascend910B2            # optional: whose UB and core counts to judge against
    launches:
      - kernel: add_kernel       # a @triton.jit function of the target
        grid: [48]               # optional: programs per axis
        signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}
        constexprs: {BLOCK: 1024}
        label: bulk              # optional: shown next to the launch
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.device import ascend_env, ttadapter
from ascendopt.device.config import chip_facts, chip_key, default_model_chip
from ascendopt.device.lowering import SCALAR_TYPES  # standard library only: safe to import here
from ascendopt.errors import UsageError

SCHEMA = 1
LAUNCH_KEYS = {"kernel", "grid", "signature", "constexprs", "label"}
NO_LAUNCH = "no launch of the target's kernels was recorded"
WORKLOAD_FUNCTION = "workload"  # the --exec-file convention of every command (collect/workload.py)


def load_launch_file(path: str | Path) -> tuple[list[dict], str | None]:
    """``(launches, chip or None)`` of a launch description; UsageError naming the file and the entry."""
    import yaml

    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"{where}: cannot read the launch description ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{where}: not valid YAML{at}") from None
    if not isinstance(data, dict) or not isinstance(data.get("launches"), list) or not data["launches"]:
        raise UsageError(f"{where}: expected a mapping with a non-empty 'launches' list")
    chip = data.get("chip")
    if chip is not None and not isinstance(chip, str):
        raise UsageError(f"{where}: chip must be a chip name (configs/chips.yaml)")
    launches = []
    for index, item in enumerate(data["launches"]):
        at = f"{where}: launches[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("kernel"), str):
            raise UsageError(f"{at}: expected a mapping with a 'kernel' name")
        unknown = set(item) - LAUNCH_KEYS
        if unknown:
            raise UsageError(f"{at}: unknown key(s) {', '.join(sorted(unknown))}",
                             hint=f"known: {', '.join(sorted(LAUNCH_KEYS))}")
        signature = item.get("signature") or {}
        constexprs = item.get("constexprs") or {}
        if not isinstance(signature, dict) or not isinstance(constexprs, dict):
            raise UsageError(f"{at}: signature and constexprs must be mappings of parameter names")
        for name, kind in signature.items():
            if not isinstance(kind, str) or kind.lstrip("*") not in SCALAR_TYPES:
                raise UsageError(f"{at}: signature {name}: {kind!r} is not a Triton type",
                                 hint="a pointer '*fp32', '*bf16', ... or a scalar i32, i64, fp32, ...")
        for name, value in constexprs.items():
            if not isinstance(value, (int, float, bool, str)):
                raise UsageError(f"{at}: constexpr {name}: {value!r} is not a number, bool or string")
        grid = item.get("grid")
        if grid is not None:
            grid = [grid] if isinstance(grid, int) else grid
            if not isinstance(grid, list) or not grid or not all(isinstance(g, int) and g > 0 for g in grid):
                raise UsageError(f"{at}: grid must be a positive int or a list of them, not {item['grid']!r}")
        launches.append({"kernel": item["kernel"], "grid": grid, "signature": dict(signature),
                         "constexprs": dict(constexprs), "label": str(item.get("label", ""))})
    return launches, chip


def _check_target(target: str) -> tuple[str, Path | None]:
    """``(what the child imports, the source file to lint or None)``: a Python file by path, or a module path
    (``pkg.mod``, imported from the current folder; its file is found there without importing it)."""
    path = Path(target)
    if path.suffix == ".py" or "/" in target or path.exists():
        if not path.is_file():
            raise UsageError(f"{target}: no such Python file")
        return str(path.resolve()), path.resolve()
    if not all(part.isidentifier() for part in target.split(".")):
        raise UsageError(f"{target}: neither a Python file nor a module path (a.b.c)")
    base = Path.cwd().joinpath(*target.split("."))
    source = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
    return target, source


def _error_message(launch: dict) -> str:
    """The compiler's message trimmed to the user's source line: ``file:line: source: reason``."""
    location = launch.get("location")
    if location and location.get("line"):
        return f"{location['file']}:{location['line']}: {location['reason']} (at: {location['source']})"
    return str(launch.get("error", "did not lower"))


def _judge(launch: dict, chip: dict, ub_bytes: int | None, factor: int) -> dict:
    """One child launch record -> the report's launch entry (UB estimate, core type, grid findings)."""
    entry: dict[str, Any] = {k: launch.get(k) for k in ("kernel", "line", "label", "grid", "signature",
                                                         "constexprs", "status", "seconds")}
    if launch.get("status") != "lowered":
        entry["error"] = _error_message(launch)
        return entry
    kernel = ttadapter.read(launch["ttadapter"])
    entry["core_type"] = kernel.core_type
    entry["mix_mode"] = kernel.mix_mode
    entry["buffers"] = [b.describe() for b in kernel.buffers]
    entry["ub"] = ttadapter.ub_estimate(kernel, ub_bytes, factor).to_dict() if ub_bytes else None
    if kernel.dynamic_buffers:
        entry["dynamic_buffers"] = kernel.dynamic_buffers
    entry["findings"] = ttadapter.grid_findings(kernel.core_type, launch.get("grid"), chip.get("cube_cores"),
                                                chip.get("vector_cores"))
    if entry["ub"] and entry["ub"]["estimate_bytes"] > ub_bytes:
        entry["findings"].append(f"UB estimate {entry['ub']['estimate_bytes']} bytes is over the chip's "
                                 f"{ub_bytes} (an estimate: bishengir-compile decides)")
    return entry


def _chip(chip: str | None) -> tuple[str, dict, int | None, int]:
    """``(chips.yaml key, facts, UB bytes, double-buffering factor)`` of the Ascend chip judged against."""
    chip_name = chip_key(chip or default_model_chip())
    facts = chip_facts(chip_name)
    if facts.get("kind") != "npu":
        raise UsageError(f"chip {chip_name} is not an Ascend NPU", hint="precheck judges against an Ascend chip")
    # triton-ascend's multibuffer default is off only on the 910_95 family (its NPUOptions)
    factor = 1 if chip_name.startswith(("Ascend910_95", "Ascend950")) else ttadapter.DEFAULT_DOUBLE_BUFFER_FACTOR
    return chip_name, facts, facts.get("ub_bytes"), factor


def _compile(python, request: dict, chip: str | None, timeout: float | None) -> dict:
    """Run the child on ``request`` and judge each launch; the report without lint (see ``precheck``)."""
    chip_name, facts, ub_bytes, factor = _chip(chip)
    version = ascend_env.probe(python)
    with tempfile.TemporaryDirectory(prefix="ascendopt-precheck-cache-") as cache:
        result = ascend_env.run_child(python, {**request, "cache_dir": cache, "arch": chip_name},
                                      timeout or ascend_env.DEFAULT_CHILD_TIMEOUT_S)
        launches = [_judge(launch, facts, ub_bytes, factor) for launch in result["launches"]]
    report = {"schema": SCHEMA, "target": request.get("target") or request.get("exec_file") or request.get("spec"),
              "chip": chip_name, "ub_bytes": ub_bytes, "double_buffer_factor": factor, "triton": version,
              "python": str(python),
              "lowered": bool(launches) and all(entry["status"] == "lowered" for entry in launches),
              "launches": launches, "problems": result.get("problems", []),
              "other_launches": result.get("other_launches", 0), "lint": None}
    if not launches:
        report["problems"].append(NO_LAUNCH)
    return report


def exec_file_call(path: str | Path) -> str | None:
    """``"workload"`` when the exec-file binds ``workload`` at its top level, else None.

    One convention for ``--exec-file`` everywhere (``collect/workload.py``): the module code runs once, then
    ``workload()`` is called. A file without ``workload`` is a script whose module code launches the kernels
    itself (run as ``python FILE``). Decided from the file's syntax tree, so no user code runs here; a file
    that does not parse is left to the child, which reports the error.
    """
    import ast

    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == WORKLOAD_FUNCTION:
            return WORKLOAD_FUNCTION
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == WORKLOAD_FUNCTION for t in targets for n in ast.walk(t)):
                return WORKLOAD_FUNCTION
        if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                any((a.asname or a.name.split(".")[0]) == WORKLOAD_FUNCTION for a in node.names):
            return WORKLOAD_FUNCTION
    return None


def precheck(target: str, *, exec_file: str | None = None, launch_file: str | None = None,
             chip: str | None = None, ascend_python: str | None = None, install: bool = True,
             timeout: float | None = None, with_lint: bool = True,
             on_install_step: Callable[[str, int, int], None] | None = None) -> dict:
    """The precheck report of ``target`` (a Python file or module path) as a JSON-ready dict.

    Exactly one of ``exec_file`` / ``launch_file`` gives the launches. ``install``: build the managed
    triton-ascend environment when none is found (else EnvironmentProblem, exit 5). ``timeout``: seconds for
    the compile child. Keys: ``schema, target, chip, ub_bytes, double_buffer_factor, triton, python,
    lowered (bool: every launch lowered), launches [...], problems [...], other_launches, lint``.
    """
    from ascendopt.errors import EnvironmentProblem

    if (exec_file is None) == (launch_file is None):
        raise UsageError("precheck: give exactly one of --exec-file (a workload) or --launches (a YAML file)")
    target_ref, source = _check_target(target)
    described, file_chip = (load_launch_file(launch_file) if launch_file else (None, None))
    if exec_file is not None and not Path(exec_file).is_file():
        raise UsageError(f"--exec-file {exec_file}: no such file")
    _chip(chip or file_chip)  # a bad chip is a usage error before any environment is looked for
    python = ascend_env.find_python(ascend_python, install=install, on_step=on_install_step)
    if python is None:
        raise EnvironmentProblem("precheck: no triton-ascend environment",
                                 hint="run `ascendopt precheck` once to build it, or pass --ascend-python")
    request = {"target": target_ref, "exec_file": str(Path(exec_file).resolve()) if exec_file else None,
               "call": exec_file_call(exec_file) if exec_file else None, "launches": described}
    report = _compile(python, request, chip or file_chip, timeout)
    report["target"] = target
    if with_lint and source is not None:
        from ascendopt.lint import lint_paths

        lint_report = lint_paths([source])
        report["lint"] = {"findings": [f.to_dict() for f in lint_report.findings],
                          "errors": [f.to_dict() for f in lint_report.errors]}
    return report


def loop_precheck(contract, backend: str, root: Path, *, config: dict | None = None, skip: bool = False,
                  ascend_python: str | None = None, timeout: float | None = None) -> dict | None:
    """The precheck of a frozen task's kernels for ``freeze`` and ``optimize-round``; None on npu (the
    device compiles them itself).

    Never installs: it uses ``--ascend-python``, ``$ASCENDOPT_ASCEND_PYTHON`` or a managed environment that
    ``ascendopt precheck`` built earlier. Returns the record the contract or round keeps: ``{"status":
    "lowers" | "fails" | "skipped" | "unavailable", "verdict": one line, ...}``; with a compile, also
    ``triton, chip, launches, ub_max_percent``. A bundled kernel is recorded over the contract's shape cases
    at ``config`` (default the frozen one); own code through the exec-file's ``workload()``, the kernels
    whose name holds the frozen kernel filter (``root``: the project root its path is relative to).
    """
    from ascendopt.errors import EnvironmentProblem

    if backend == "npu":
        return None
    if skip:
        return {"status": "skipped", "verdict": "skipped (--no-precheck)"}
    try:
        python = ascend_env.find_python(ascend_python, install=False)
    except EnvironmentProblem as exc:
        return {"status": "unavailable", "verdict": f"not run: {exc}"}
    if python is None:
        return {"status": "unavailable", "verdict": "not run: no triton-ascend environment (`ascendopt precheck` "
                "builds one once; or pass --ascend-python)"}
    w = contract.workload
    if contract.is_kernel:
        request = {"recorder": "ascendopt.kernels.launches:record_contract", "spec": w.kernel,
                   "cases": [dict(case.dims) for case in w.shapes], "dtype": w.dtype, "mode": w.mode,
                   "config": dict(config if config is not None else w.config)}
    else:
        request = {"exec_file": str(Path(root) / w.exec_file), "call": WORKLOAD_FUNCTION,
                   "kernel_filter": w.kernel_filter}
    try:
        report = _compile(python, request, None, timeout)
    except EnvironmentProblem as exc:
        return {"status": "unavailable", "verdict": f"not run: {exc}"}
    if not report["launches"] and not contract.is_kernel:
        return nothing_recorded(report, w.kernel_filter)
    shares = [e["ub"]["percent_of_ub"] for e in report["launches"] if e.get("ub")]
    return {"status": "lowers" if report["lowered"] else "fails", "verdict": verdict(report),
            "triton": report["triton"], "chip": report["chip"], "launches": len(report["launches"]),
            "ub_max_percent": max(shares) if shares else None,
            "findings": sorted({f for e in report["launches"] for f in e.get("findings") or []})}


def nothing_recorded(report: dict, kernel_filter: str | None) -> dict:
    """The record of own code whose workload launched no Triton kernel of the target in the child.

    That is a fact about the workload (torch ops, vendor ops, Triton kernels of another package), not a
    kernel that fails to lower: ``{"status": "nothing", "verdict": "nothing to lower: ..."}``. A workload
    that stopped in the triton-ascend environment before any launch was not checked at all:
    ``"unavailable"`` with what stopped it. Neither refuses a freeze nor reddens a round.
    """
    stops = [p for p in report["problems"] if p != NO_LAUNCH]
    base = {"triton": report["triton"], "chip": report["chip"], "launches": 0, "ub_max_percent": None,
            "findings": []}
    if stops:
        return {**base, "status": "unavailable",
                "verdict": f"not run: the workload recorded no launch in the triton-ascend environment ({stops[0]})"}
    which = f" whose name holds {kernel_filter!r}" if kernel_filter else ""
    others = report.get("other_launches") or 0
    elsewhere = f"; {others} launch(es) of other Triton kernels left out" if others else ""
    return {**base, "status": "nothing",
            "verdict": f"nothing to lower: no Triton launch of a kernel{which} was recorded{elsewhere}"}


def verdict(report: dict) -> str:
    """One line for a contract or round record: ``lowers (N launches)`` or the first failure's message."""
    failed = [entry for entry in report["launches"] if entry["status"] != "lowered"]
    if failed:
        return f"{failed[0]['kernel']} does not lower: {failed[0]['error']}"
    if not report["launches"]:
        return "no launch recorded"
    from ascendopt.console import plural

    return f"lowers ({plural(len(report['launches']), 'launch')})"
