"""What the rules see of one file: the tree walked once (parents + nodes by type) and facts per kernel.

A *kernel* is a function decorated with ``triton.jit`` (bare, called, or under ``triton.autotune`` /
``triton.heuristics``). Facts are computed lazily and only from names, so they are approximate in
one direction only: when unsure whether a value is compile-time, rules that flag runtime values
treat it as compile-time (precision matters more than recall).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cached_property

from ascendopt.lint.astutil import (
    TILE_NAME,
    TL_PREFIXES,
    arg,
    base_name,
    dotted,
    int64_cast_of,
    is_int64_dtype,
    names_in,
    tl_func,
)

# Calls whose result is a compile-time value when every argument is (certain in Triton).
_CONST_CALLS = {"min", "max", "abs", "int", "bool", "tl.constexpr", "triton.cdiv", "triton.next_power_of_2"}
# Triton jit helpers that very likely fold on constexpr arguments; used only where "compile-time" means "do not flag".
_MAYBE_CONST_CALLS = _CONST_CALLS | {"tl.cdiv", "float", "len", "tl.static_range"}


def _is_jit_decorator(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = dotted(target) or ""
    return name in ("triton.jit", "jit", "tl.jit", "triton.language.jit")


class Kernel:
    """Facts about one ``@triton.jit`` function, computed on first use."""

    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn
        all_args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        self.params = [a.arg for a in all_args]
        self.constexpr_params = {a.arg for a in all_args
                                 if a.annotation is not None and _is_constexpr_ann(a.annotation)}
        self.by_type: dict[type, list[ast.AST]] = defaultdict(list)  # filled by FileContext's walk
        self._names: dict[int, frozenset[str]] = {}
        self._tl_calls: dict[int, frozenset[str]] = {}

    def nodes(self, *types: type) -> list[ast.AST]:
        """This kernel's nodes of ``types`` (walk order; findings are sorted by the engine)."""
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        return [n for t in types for n in self.by_type.get(t, [])]

    def names(self, node: ast.AST) -> frozenset[str]:
        """Names read or written inside ``node`` (memoized: rules ask about the same bindings often)."""
        key = id(node)
        if key not in self._names:
            self._names[key] = frozenset(names_in(node))
        return self._names[key]

    def tl_calls(self, node: ast.AST) -> frozenset[str]:
        """``tl.*`` functions called inside ``node`` (``{"arange", "load"}``), memoized."""
        key = id(node)
        if key not in self._tl_calls:
            self._tl_calls[key] = frozenset(f for f in map(tl_func, ast.walk(node)) if f)
        return self._tl_calls[key]

    @cached_property
    def assigns(self) -> dict[str, list[ast.AST | None]]:
        """Every value bound to a local name (None: unknown, e.g. an unpacked call result)."""
        table: dict[str, list[ast.AST | None]] = defaultdict(list)
        for node in self.nodes(ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.AugAssign, ast.For):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind(table, target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                _bind(table, node.target, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                table[node.target.id].append(ast.BinOp(node.target, node.op, node.value))
            elif isinstance(node, ast.For):
                static = (dotted(node.iter.func) if isinstance(node.iter, ast.Call) else "") in (
                    "tl.static_range", "triton.language.static_range")
                for name in names_in(node.target):
                    # static_range loop variables are compile-time; others are runtime
                    table[name].append(ast.Constant(0) if static else None)
        return table

    def _fixed_point(self, seeds: set[str], accepts) -> set[str]:
        """Names with at least one binding, all of which satisfy ``accepts(value, known)``."""
        known = set(seeds)
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                if name in known or name in self.params:
                    continue
                if values and all(v is not None and accepts(v, known) for v in values):
                    known.add(name)
                    changed = True
        return known

    @cached_property
    def constexpr_names(self) -> set[str]:
        """Names certainly holding a constexpr: constexpr params, ``X: tl.constexpr = ...`` locals and
        static_range loop variables. A plain ``x = B * 2`` is NOT one: Triton's assignment turns
        compile-time values into tensors (code_generator ``visit_Assign`` -> ``to_tensor``)."""
        names = {p for p in self.constexpr_params if p not in self.assigns}
        for node in self.nodes(ast.AnnAssign, ast.For):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _is_constexpr_ann(
                    node.annotation):
                names.add(node.target.id)
            elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and dotted(node.iter.func) in (
                    "tl.static_range", "triton.language.static_range"):
                names |= names_in(node.target)
        return names

    @cached_property
    def maybe_constexpr_names(self) -> set[str]:
        """Names whose value is known at compile time, including locals computed from constexprs."""
        seeds = set(self.constexpr_params) | self.constexpr_names
        local = self.assigns
        return self._fixed_point(seeds, lambda v, k: _const(v, k, strict=False, params=self.params, local=local))

    def is_constexpr(self, node: ast.AST, strict: bool) -> bool:
        known = self.constexpr_names if strict else self.maybe_constexpr_names
        return _const(node, known, strict=strict, params=self.params, local=self.assigns)

    @cached_property
    def int64_params(self) -> set[str]:
        """Parameters typed int64 in the signature (``T: tl.int64``); FileContext adds a jit helper's
        parameters that every call site in the file passes an int64 value."""
        all_args = self.fn.args.posonlyargs + self.fn.args.args + self.fn.args.kwonlyargs
        return {a.arg for a in all_args if a.annotation is not None and is_int64_dtype(a.annotation)}

    @cached_property
    def int64_names(self) -> set[str]:
        """Names certainly holding int64: typed parameters, locals bound only to int64 values, and the
        variables of loops whose only binding is a ``range``/``tl.range`` with an int64 bound (Triton
        gives the induction variable the bounds' type: ``for t in tl.range(pid, task_num_i64, n)``)."""
        loops = [n for n in self.nodes(ast.For) if isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Call)
                 and dotted(n.iter.func) in ("range", "tl.range", "triton.language.range")
                 and len(self.assigns.get(n.target.id, [])) == 1]
        known = set(self.int64_params)
        while True:
            known = self._fixed_point(known, lambda v, k: _int64(v, k))
            widened = {n.target.id for n in loops if any(_int64(a, known) for a in n.iter.args)} - known
            if not widened:
                return known
            known |= widened

    def is_int64(self, node: ast.AST) -> bool:
        return _int64(node, self.int64_names)

    @cached_property
    def pointer_names(self) -> set[str]:
        """Names used as the base of a load/store/block pointer, plus names derived from them by +/-."""
        seeds = {n for n in self.params + list(self.assigns) if n.endswith("_ptr")}
        for node in self.nodes(ast.Call):
            func = tl_func(node)
            if func in ("load", "store", "make_block_ptr", "make_tensor_descriptor") or (
                    func or "").startswith("atomic_"):
                base = base_name(node.args[0]) if node.args else None
                if base:
                    seeds.add(base)
        known = set(seeds)
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                if name not in known and any(v is not None and _is_pointer_value(v, known) for v in values):
                    known.add(name)
                    changed = True
        return known

    @cached_property
    def task_loops(self) -> list[ast.For]:
        """1D core-grid task loops: ``for t in tl.range(pid, tasks, num_cores)`` (start derived from program_id)."""
        strided = [n for n in self.nodes(ast.For) if isinstance(n.iter, ast.Call)
                   and dotted(n.iter.func) in ("range", "tl.range", "triton.language.range")
                   and len(n.iter.args) >= 3 and not isinstance(n.iter.args[2], ast.Constant)
                   and not TILE_NAME.match(dotted(n.iter.args[2]) or "")]  # a tile walk, not a task loop
        if not strided:
            return []
        pid: set[str] = set()  # names derived from tl.program_id
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                if name not in pid and any(v is not None and ("program_id" in self.tl_calls(v) or self.names(v) & pid)
                                           for v in values):
                    pid.add(name)
                    changed = True
        return [loop for loop in strided
                if "program_id" in self.tl_calls(loop.iter.args[0]) or self.names(loop.iter.args[0]) & pid]

    @cached_property
    def block_pointer_names(self) -> set[str]:
        return {name for name, values in self.assigns.items()
                if any(tl_func(v) in ("make_block_ptr", "advance") for v in values if v is not None)}


def _is_constexpr_ann(ann: ast.AST) -> bool:
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.split(".")[-1] == "constexpr"
    name = dotted(ann) or ""
    return name.split(".")[-1] == "constexpr"


def _bind(table, target: ast.AST, value: ast.AST) -> None:
    if isinstance(target, ast.Name):
        table[target.id].append(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                _bind(table, t, v)
        else:
            for name in names_in(target):
                table[name].append(None)


def _const(node, known: set[str], *, strict: bool, params=(), local=None) -> bool:
    """Whether ``node`` is a compile-time value given the compile-time names in ``known``."""

    def rec(n) -> bool:
        return _const(n, known, strict=strict, params=params, local=local)

    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        if node.id in known:
            return True
        # A name that is neither a parameter nor local is a global, which Triton requires to be constexpr.
        return not strict and local is not None and node.id not in params and node.id not in local
    if isinstance(node, ast.Attribute):
        if node.attr in ("dtype", "shape", "numel") or (dotted(node) or "").startswith(TL_PREFIXES):
            return True
        return not strict and rec(node.value)
    if isinstance(node, ast.Subscript):
        return rec(node.value) and rec(node.slice)
    if isinstance(node, ast.BinOp):
        return rec(node.left) and rec(node.right)
    if isinstance(node, ast.UnaryOp):
        return rec(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(rec(v) for v in node.values)
    if isinstance(node, ast.Compare):
        return rec(node.left) and all(rec(c) for c in node.comparators)
    if isinstance(node, ast.IfExp):
        return rec(node.test) and rec(node.body) and rec(node.orelse)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(rec(e) for e in node.elts)
    if isinstance(node, ast.Call):
        allowed = _CONST_CALLS if strict else _MAYBE_CONST_CALLS
        return dotted(node.func) in allowed and all(rec(a) for a in node.args)
    return False


def _int64(node, known: set[str]) -> bool:
    """Whether ``node`` certainly has an int64 value (explicit cast, or arithmetic with one)."""
    if int64_cast_of(node) is not None:
        return True
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.BinOp):
        return _int64(node.left, known) or _int64(node.right, known)
    if isinstance(node, ast.UnaryOp):
        return _int64(node.operand, known)
    if isinstance(node, ast.IfExp):
        return _int64(node.body, known) and _int64(node.orelse, known)
    if isinstance(node, ast.Subscript):
        return _int64(node.value, known)
    if isinstance(node, ast.Call):
        func = tl_func(node)
        if func in ("full", "zeros", "arange") and is_int64_dtype(arg(node, 99, "dtype")):
            return True
        if func in ("where", "minimum", "maximum"):
            vals = node.args[1:] if func == "where" else node.args
            return any(_int64(v, known) for v in vals)
    return False


def _is_pointer_value(value: ast.AST, pointers: set[str]) -> bool:
    if tl_func(value) in ("make_block_ptr", "advance", "make_tensor_descriptor"):
        return True
    base = base_name(value)
    return base is not None and base in pointers


class FileContext:
    """One parsed file: nodes by type, its kernels, and the parent of every node inside a kernel."""

    def __init__(self, path: str, source: str, tree: ast.Module):
        self.path = path
        self.source = source
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        self.by_type: dict[type, list[ast.AST]] = defaultdict(list)
        self.kernels: dict[ast.FunctionDef, Kernel] = {}
        self._kernel_of: dict[ast.AST, Kernel] = {}
        stack: list[tuple[ast.AST, Kernel | None]] = [(tree, None)]
        while stack:  # the one walk over the file: buckets by type, parents, enclosing kernel
            node, kernel = stack.pop()
            kind = type(node)
            self.by_type[kind].append(node)
            if kernel is not None:
                kernel.by_type[kind].append(node)
                self._kernel_of[node] = kernel
            elif kind is ast.FunctionDef and any(_is_jit_decorator(d) for d in node.decorator_list):
                kernel = self.kernels[node] = Kernel(node)
            parent = self.parent if kernel is not None else None  # only kernel rules ask for ancestors
            for field in node._fields:  # ast.iter_child_nodes without its generator overhead
                value = getattr(node, field, None)
                if isinstance(value, list):
                    for child in value:
                        if isinstance(child, ast.AST):
                            if parent is not None:
                                parent[child] = node
                            stack.append((child, kernel))
                elif isinstance(value, ast.AST):
                    if parent is not None:
                        parent[value] = node
                    stack.append((value, kernel))

        self._int64_helper_arguments()

    def _int64_helper_arguments(self) -> None:
        """A jit helper's parameter is int64 when every call of the helper in this file passes an int64
        value there (``_base(x, tl.cast(i_b, tl.int64) * T)``): one level, callers judged on their own."""
        helpers = {k.fn.name: k for k in self.kernels.values()}
        passed: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for caller in self.kernels.values():
            for call in caller.nodes(ast.Call):
                helper = helpers.get(call.func.id) if isinstance(call.func, ast.Name) else None
                if helper is None or helper is caller:
                    continue
                bound = dict(zip(helper.params, call.args, strict=False))
                bound.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
                for name in helper.params:
                    value = bound.get(name)
                    passed[(helper.fn.name, name)].append(value is not None and caller.is_int64(value))
        for (helper_name, name), int64_at_every_call in passed.items():
            if int64_at_every_call and all(int64_at_every_call):
                helpers[helper_name].int64_params.add(name)
        for kernel in self.kernels.values():  # recomputed on demand with the parameters found above
            kernel.__dict__.pop("int64_names", None)

    def nodes(self, *types: type) -> list[ast.AST]:
        """Nodes of ``types`` anywhere in the file (walk order)."""
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        return [n for t in types for n in self.by_type.get(t, [])]

    def ancestors(self, node: ast.AST):
        while node in self.parent:
            node = self.parent[node]
            yield node

    def kernel_of(self, node: ast.AST) -> Kernel | None:
        return self._kernel_of.get(node)

    def kernel_nodes(self, *types: type):
        """``(kernel, node)`` for every node of ``types`` inside a kernel."""
        for kernel in self.kernels.values():
            for node in kernel.nodes(*types):
                yield kernel, node

