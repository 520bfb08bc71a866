"""AO1xx: launch parameters that Ascend Triton does not have."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import NamedTuple

from ascendopt.lint.astutil import dotted
from ascendopt.lint.context import FileContext
from ascendopt.lint.registry import rule

CUDA_ONLY = ("num_warps", "num_stages")
# Code-like only (`num_warps=4`, `"num_stages": 2`), so prose that names the rule is not a finding.
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
)
def check_num_warps(ctx: FileContext):
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
