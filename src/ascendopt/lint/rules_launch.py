"""AO1xx: launch parameters that Ascend Triton does not have."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import NamedTuple

from ascendopt.lint.astutil import TILE_NAME, dotted, tl_func
from ascendopt.lint.context import FileContext
from ascendopt.lint.registry import rule

CUDA_ONLY = ("num_warps", "num_stages")
# Code-like only (`num_warps=4`, `"num_stages": 2`), so prose that names the rule is not a finding.  # noqa: AO101
_COMMENTED_OUT = re.compile(r"""\b(num_warps|num_stages)\s*=\s*[\w(]|['"](num_warps|num_stages)['"]\s*:""")


class Loc(NamedTuple):
    lineno: int
    col_offset: int


def _callee(call: ast.Call) -> str:
    """``kernel[grid]`` for a launch, ``triton.Config`` for a plain call."""
    func = call.func
    if isinstance(func, ast.Subscript):
        return f"{dotted(func.value) or 'kernel'}[grid]"
    return dotted(func) or "a call"


def _target_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return target.slice.value if isinstance(target.slice.value, str) else None
    return None


@rule(
    "AO101", "no-num-warps-stages",
    summary="num_warps / num_stages on an Ascend path (launch, triton.Config, autotune configs, wrappers, helpers).",
    why="Ascend Triton kernels have no warps and no software pipelining stages: the parameters are "
        "unsupported and are not a tuning lever. They creep in when code is copied from CUDA Triton.",
    fix="Delete them everywhere: launch keywords, triton.Config keywords and positional arguments, config "
        "dicts, wrapper parameters and the helpers that compute them; also delete commented-out copies. "
        "Tune with tiles, grid, layout, fusion/split and the UB budget instead (`ascendopt ub`).",
    seed=("Hard constraint (NPU launch params): Ascend Triton kernels do not supportnum_warps or num_stages.",
          ("No num_warps / num_stages anywhere: NPU does not support them. Omit from kernel call sites, autotune "
          "config dicts, and wrappers. Do not leave them commented-out \u201cfor CUDA parity\u201d; delete them.")),
    limits="a value that reaches the launch under another name through **kwargs built elsewhere; the "
           "num_warps= keyword that finally passes it is still reported.",
)
def check_cuda_launch_params(ctx: FileContext):
    for call in ctx.nodes(ast.Call):
        for kw in call.keywords:
            if kw.arg in CUDA_ONLY:
                yield kw, f"`{kw.arg}=` passed to `{_callee(call)}`: unsupported on Ascend, delete it"
        func = dotted(call.func) or ""
        if func.split(".")[-1] == "Config" and len(call.args) >= 2:
            names = ", ".join(CUDA_ONLY[: len(call.args) - 1])
            yield call.args[1], f"positional {names} in `{func}(...)`: unsupported on Ascend, keep only the kwargs dict"
    for d in ctx.nodes(ast.Dict):
        for key in d.keys:
            if isinstance(key, ast.Constant) and key.value in CUDA_ONLY:
                yield key, f"'{key.value}' key in a config dict: unsupported on Ascend, delete it"
    for a in ctx.nodes(ast.arg):
        if a.arg in CUDA_ONLY:
            yield a, f"parameter `{a.arg}`: wrappers must not take or forward it on Ascend, delete it"
    for node in ctx.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign):
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
            name = _target_name(target)
            if name in CUDA_ONLY:
                yield target, f"`{name}` computed here: unsupported on Ascend, delete the computation"
    for fn in ctx.nodes(ast.FunctionDef):
        if any(n in fn.name for n in CUDA_ONLY):
            yield fn, f"helper `{fn.name}` computes a CUDA-only launch parameter: delete it"
    if "num_warps" in ctx.source or "num_stages" in ctx.source:
        yield from _commented_out(ctx.source)


def _commented_out(source: str):
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and _COMMENTED_OUT.search(tok.string):
                yield Loc(*tok.start), "commented-out num_warps/num_stages: delete it, do not keep it for CUDA parity"
    except (tokenize.TokenError, SyntaxError):  # already parsed by ast; tokenizer quirks are not findings
        return


_SAFE_CALLS = {"range", "min", "max", "len", "int", "float", "bool", "abs", "print"}


def _is_cube_count(node: ast.AST) -> bool:
    """``grid_size("cube", n)``, ``num_cores("cube")``, ``props["num_aicore"]``, ``.num_aicore``,
    ``use_aicore=True``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = (dotted(sub.func) or "").split(".")[-1]
            if name in ("grid_size", "num_cores") and sub.args and isinstance(sub.args[0], ast.Constant) \
                    and sub.args[0].value == "cube":
                return True
            if any(k.arg == "use_aicore" and isinstance(k.value, ast.Constant) and k.value.value is True
                   for k in sub.keywords):
                return True
        elif ((isinstance(sub, ast.Constant) and sub.value == "num_aicore")
              or (isinstance(sub, ast.Attribute) and sub.attr == "num_aicore")):
            return True
    return False


def _resolves_to_cube_count(node: ast.AST, bindings: dict[str, list[ast.AST]], depth: int = 0) -> bool:
    if _is_cube_count(node):
        return True
    if depth >= 3:
        return False
    return any(_resolves_to_cube_count(v, bindings, depth + 1)
               for sub in ast.walk(node) if isinstance(sub, ast.Name) for v in bindings.get(sub.id, []))


def _vector_only(ctx: FileContext, fn: ast.FunctionDef, seen: set | None = None) -> bool:
    """True when ``fn`` certainly has no tl.dot: none of its own, and every callee a local jit helper without one."""
    seen = seen if seen is not None else set()
    seen.add(fn.name)
    local = {k.fn.name: k.fn for k in ctx.kernels.values()}
    for call in ctx.kernels[fn].nodes(ast.Call):
        func = tl_func(call)
        if func is not None:
            if func in ("dot", "dot_scaled"):
                return False
            continue
        if isinstance(call.func, ast.Name):
            callee = call.func.id
            if callee in local:
                if callee not in seen and not _vector_only(ctx, local[callee], seen):
                    return False
            elif callee not in _SAFE_CALLS:
                return False  # an imported helper: cannot see inside, so do not guess
        elif isinstance(call.func, ast.Attribute) and dotted(call.func) and "." in dotted(call.func) \
                and dotted(call.func).split(".")[0] not in ctx.kernels[fn].assigns \
                and dotted(call.func).split(".")[0] not in ctx.kernels[fn].params:
            return False  # module.helper(...) from elsewhere; methods on local tiles (b.to()) are fine
    return True


def _launches(fn: ast.FunctionDef):
    """``(kernel name, grid expression, call)`` for ``k[grid](...)`` and ``launch(k, grid, ...)`` in ``fn``."""
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
            yield call.func.value.id, call.func.slice, call
        elif (dotted(call.func) or "").split(".")[-1] == "launch" and len(call.args) >= 2 \
                and isinstance(call.args[0], ast.Name):
            yield call.args[0].id, call.args[1], call


@rule(
    "AO102", "vector-kernel-on-cube-cores",
    summary="A kernel without tl.dot (Vector work) launched on the cube-core count (num_aicore).",
    why="On A2 there are 48 vector cores and 24 cube (AI) cores: a Vector-bound kernel on a grid of "
        "num_aicore programs leaves half the vector cores idle.",
    fix="Size the 1D core grid with the vector-core count: num_vectorcore "
        "(`grid_size(\"vector\", tasks)` in ascendopt kernels); keep num_aicore for Cube-bound kernels.",
    seed=("Launching a Vector-bound kernel on num_aicore (half the vector cores idle on A2)",
          "Launching a Vector kernel on num_aicore leaves half the vector cores idle."),
    limits="kernels that call helpers imported from other modules (their tl.dot use is unknown) and "
           "grids computed in another function.",
)
def check_vector_on_cube(ctx: FileContext):
    if not ctx.kernels:
        return
    by_name = {k.fn.name: k.fn for k in ctx.kernels.values()}
    for fn in ctx.nodes(ast.FunctionDef):
        if fn in ctx.kernels:
            continue
        bindings: dict[str, list[ast.AST]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        bindings.setdefault(name, []).append(node.value)
        for kernel_name, grid, call in _launches(fn):
            kernel = by_name.get(kernel_name)
            if kernel is not None and _resolves_to_cube_count(grid, bindings) and _vector_only(ctx, kernel):
                yield call, (f"`{kernel_name}` has no tl.dot (Vector work) but its grid is the cube-core count: "
                             "half the vector cores stay idle; size the grid with num_vectorcore")


def _do_not_specialize(fn: ast.FunctionDef, params: list[str]) -> set[str] | None:
    """Names listed in ``@triton.jit(do_not_specialize=[...])`` (indices mapped to names); None if not literal."""
    names: set[str] = set()
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and (dotted(dec.func) or "").endswith("jit")):
            continue
        for kw in dec.keywords:
            if kw.arg != "do_not_specialize":
                continue
            if not isinstance(kw.value, (ast.List, ast.Tuple)):
                return None  # built elsewhere: cannot tell
            for element in kw.value.elts:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    names.add(element.value)
                elif isinstance(element, ast.Constant) and isinstance(element.value, int) \
                        and 0 <= element.value < len(params):
                    names.add(params[element.value])
                else:
                    return None
    return names


# Calls through which a loop extent keeps the dependence on its arguments (a load does not: its value is data).
_EXTENT_CALLS = {"cdiv", "min", "max", "minimum", "maximum", "int", "abs", "cast"}


def _extent_params(kernel, node: ast.AST, seen: set[str] | None = None) -> set[str]:
    """Kernel parameters that the loop extent ``node`` is computed from, through locals
    (``{"M", "N"}`` for ``total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)``); tile sizes are left out and
    loads are not followed (a loaded value is data, not a specialized argument)."""
    seen = set() if seen is None else seen
    found: set[str] = set()
    stack = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Call):
            name = (dotted(sub.func) or "").split(".")[-1]
            if name == "to" and isinstance(sub.func, ast.Attribute):
                stack.append(sub.func.value)
            elif name in _EXTENT_CALLS:
                stack.extend(sub.args)
            continue
        if isinstance(sub, ast.Name):
            if sub.id in seen or TILE_NAME.match(sub.id):
                continue
            seen.add(sub.id)
            if sub.id in kernel.params and sub.id not in kernel.assigns:
                found.add(sub.id)
            for value in kernel.assigns.get(sub.id, []):
                if value is not None:
                    found |= _extent_params(kernel, value, seen)
            continue
        stack.extend(ast.iter_child_nodes(sub))
    return found


@rule(
    "AO103", "task-extent-specialized",
    summary="A core-grid task loop's extent (its stop bound: the task count) is, or is computed from, a constexpr "
            "or a specialized int argument.",
    why="Triton compiles one kernel per constexpr value and per specialization of int arguments (equal to 1, "
        "divisible by 16); the task count changes with every shape, so the kernel recompiles, and Ascend "
        "compiles are slow.",
    fix="Pass the extent as a plain argument and list it in `@triton.jit(do_not_specialize=[\"task_num\", ...])`.",
    seed=("Keep do_not_specialize on T / task_num / num_core / dynamic extents.",),
    limits="the loop's step (the program or core count, a few values per device) and tile sizes (BT, BLOCK_M): "
           "their recompiles are few, so they are not reported; stop bounds written as an expression in the "
           "range() call itself (`range(a, min(b, T), G)`) are not followed; dynamic extents that are not the "
           "task loop's bound (T, NT); do_not_specialize lists that are built in a variable.",
)
def check_task_extent_specialized(ctx: FileContext):
    for kernel in ctx.kernels.values():
        loops = kernel.task_loops
        if not loops:
            continue
        listed = _do_not_specialize(kernel.fn, kernel.params)
        for loop in loops:
            bound = loop.iter.args[1]
            if not isinstance(bound, ast.Name):
                continue
            params = _extent_params(kernel, bound)
            if kernel.is_constexpr(bound, strict=False):
                # the whole task count is known at compile time (a constexpr, or a local computed from them);
                # a constexpr factor of a runtime count (a head count) is a model constant, not reported
                named = ", ".join(f"`{p}`" for p in sorted(params) if p in kernel.constexpr_params) or f"`{bound.id}`"
                yield bound, (f"task-loop bound `{bound.id}` is compile-time (from tl.constexpr {named}): one "
                              "compile per value; pass the task count as a plain argument listed in "
                              "do_not_specialize")
                continue
            specialized = sorted(p for p in params if p not in kernel.constexpr_params and p not in
                                 kernel.int64_params and listed is not None and p not in listed)
            if specialized:
                names = ", ".join(f"`{p}`" for p in specialized)
                where = "" if specialized == [bound.id] else f" (computed from {names})"
                yield bound, (f"task-loop bound `{bound.id}`{where} is specialized (==1, %16): add {names} to "
                              "@triton.jit(do_not_specialize=[...])")
