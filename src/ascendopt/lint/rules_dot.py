"""AO4xx: numerics. AO401 follows each tl.dot left operand through the kernel's statements in order."""

from __future__ import annotations

import ast

from ascendopt.lint.astutil import arg, tl_func
from ascendopt.lint.context import FileContext
from ascendopt.lint.registry import rule

Clobbered = dict  # tile name -> line of the tl.dot that took it as left operand


class _DotFlow:
    """Abstract execution of one kernel body: which tiles may have been overwritten by a tl.dot.

    Branches are followed separately and merged; loop bodies run twice so that a tile used as lhs in
    one iteration and read in the next is seen. Assigning a name (a reload) clears it.
    """

    def __init__(self, lhs_helpers: dict[str, set[int]] | None = None):
        self.found: dict[int, tuple[ast.Name, int, str]] = {}
        self.lhs_helpers = lhs_helpers or {}  # jit helper name -> argument positions it passes to tl.dot as lhs

    def block(self, stmts, state: Clobbered) -> Clobbered:
        for stmt in stmts:
            state = self.stmt(stmt, state)
        return state

    def stmt(self, node: ast.stmt, state: Clobbered) -> Clobbered:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return state
        if isinstance(node, ast.Assign):
            self.expr(node.value, state)
            for target in node.targets:
                self.bind(target, state)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            if node.value is not None:
                self.expr(node.value, state)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.read(node.target, state, "updated in place")
            self.bind(node.target, state)
        elif isinstance(node, ast.If):
            self.expr(node.test, state)
            state = _merge(self.block(node.body, dict(state)), self.block(node.orelse, dict(state)))
        elif isinstance(node, (ast.For, ast.While)):
            if isinstance(node, ast.For):
                self.expr(node.iter, state)
            entry = dict(state)
            once = self.loop_body(node, dict(state))
            twice = self.loop_body(node, _merge(entry, once))
            state = self.block(node.orelse, _merge(entry, twice))
        elif isinstance(node, (ast.With, ast.Try)):
            for item in getattr(node, "items", []):
                self.expr(item.context_expr, state)
            state = self.block(node.body, state)
            for handler in getattr(node, "handlers", []):
                state = _merge(state, self.block(handler.body, dict(state)))
            state = self.block(getattr(node, "orelse", []) + getattr(node, "finalbody", []), state)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, state)
        return state

    def loop_body(self, node, state: Clobbered) -> Clobbered:
        if isinstance(node, ast.For):
            self.bind(node.target, state)
        else:
            self.expr(node.test, state)
        return self.block(node.body, state)

    def expr(self, node: ast.AST, state: Clobbered, role: str = "read") -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.read(node, state, role)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Attribute) and node.attr in ("dtype", "shape", "numel", "type"):
            return  # metadata of a tile, not its (possibly overwritten) data
        func = tl_func(node)
        if func == "dot":
            lhs = arg(node, 0, "input")
            for child in node.args + [k.value for k in node.keywords]:
                self.expr(child, state, "as tl.dot lhs again" if child is lhs else "as tl.dot rhs/acc")
            if isinstance(lhs, ast.Name):
                state[lhs.id] = node.lineno
            return
        helper = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        if helper in self.lhs_helpers:
            lhs_args = [a for i, a in enumerate(node.args) if i in self.lhs_helpers[helper]]
            for child in node.args + [k.value for k in node.keywords]:
                self.expr(child, state, f"as tl.dot lhs again (in {helper})" if child in lhs_args else role)
            for lhs in lhs_args:
                if isinstance(lhs, ast.Name):
                    state[lhs.id] = node.lineno
            return
        if func == "store":
            role = "stored"
        for child in ast.iter_child_nodes(node):
            self.expr(child, state, role)

    def read(self, node: ast.Name, state: Clobbered, role: str) -> None:
        if node.id in state:
            self.found.setdefault(id(node), (node, state[node.id], role))

    def bind(self, target: ast.AST, state: Clobbered) -> None:
        if isinstance(target, ast.Name):
            state.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, state)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, state)
        else:  # x[i] = ... / x.a = ...: reads x and the index
            for child in ast.iter_child_nodes(target):
                if isinstance(child, ast.expr):
                    self.expr(child, state)


def _merge(a: Clobbered, b: Clobbered) -> Clobbered:
    merged = dict(a)
    for name, line in b.items():
        merged[name] = min(line, merged.get(name, line))
    return merged


def _lhs_helpers(ctx: FileContext) -> dict[str, set[int]]:
    """Jit helpers of this file that pass a parameter to tl.dot as the left operand -> its positions
    (``def mm(a, b): return tl.dot(a, b)`` -> ``{"mm": {0}}``); helpers calling such helpers count too."""
    helpers: dict[str, set[int]] = {}
    changed = True
    while changed:
        changed = False
        for kernel in ctx.kernels.values():
            positions = set(helpers.get(kernel.fn.name, set()))
            for call in kernel.nodes(ast.Call):
                if tl_func(call) == "dot":
                    lhs = [arg(call, 0, "input")]
                elif isinstance(call.func, ast.Name) and call.func.id in helpers:
                    lhs = [a for i, a in enumerate(call.args) if i in helpers[call.func.id]]
                else:
                    continue
                positions |= {kernel.params.index(a.id) for a in lhs
                              if isinstance(a, ast.Name) and a.id in kernel.params and a.id not in kernel.assigns}
            if positions and positions != helpers.get(kernel.fn.name):
                helpers[kernel.fn.name] = positions
                changed = True
    return helpers


@rule(
    "AO401", "dot-lhs-reuse",
    summary="A tl.dot left operand read again after the dot (as lhs, rhs, stored or in arithmetic).",
    why="On Ascend, tl.dot(lhs, rhs) may overwrite lhs in UB (CUDA Triton does not). Any later read of that "
        "tile sees corrupted data: silent numeric drift against the oracle, no compile error.",
    fix="Reload the tile from GM before reusing it (one large reuse between stages), or copy it with "
        "`tile_copy = tile + 0.0` BEFORE the first dot and use the copy afterwards (a copy made after the "
        "dot copies corrupted data).",
    seed=(("Ascend tl.dot clobbers the left operand: on NPU, tl.dot(lhs, rhs, \u2026) may overwrite lhs in UB "
          "(CUDA Triton does not). Any later read of that tile (second lhs, rhs, store) sees corrupted data "
          "unless you reload from GM or copy with tile + 0.0before the first lhs dot."),
          "Reused tl.dot left-hand tiles: GM reload or tile + 0.0before first lhs dot (post-dot copy invalid)"),
    limits="left operands that are expressions (tl.dot(x.to(...), y)), aliases (y = x), and helpers imported "
           "from other modules (a jit helper of the same file that passes its argument to tl.dot as lhs is "
           "followed); a dot whose lhs is dead afterwards on the path taken but read on another is reported.",
)
def check_dot_lhs(ctx: FileContext):
    lhs_helpers = _lhs_helpers(ctx)
    for kernel in ctx.kernels.values():
        if not any(tl_func(n) == "dot" or (isinstance(n.func, ast.Name) and n.func.id in lhs_helpers)
                   for n in kernel.nodes(ast.Call)):
            continue
        flow = _DotFlow(lhs_helpers)
        flow.block(kernel.fn.body, {})
        for node, dot_line, role in flow.found.values():
            yield node, (f"`{node.id}` was the left operand of tl.dot on line {dot_line} and is read again "
                         f"({role}); Ascend may overwrite it: reload from GM or copy `+ 0.0` before that dot")
