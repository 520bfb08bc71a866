"""Expression helpers shared by the lint rules: dotted names, tl calls, casts, pointer bases."""

from __future__ import annotations

import ast
import re

# Block/tile sizes by the kernels' convention (BT, BK, BLOCK_M, TILE_SIZE, TRITON_BLOCK_SIZE): small on purpose.
TILE_NAME = re.compile(r"^(B[A-Z]{1,2}|BLOCK\w*|\w*BLOCK_SIZE|TILE\w*|\w*TILE_SIZE|block_size)$")
TL_PREFIXES = ("tl.", "triton.language.", "language.")
def dotted(node: ast.AST) -> str | None:
    """``tl.load`` for ``Attribute(Name('tl'), 'load')``; None when not a plain dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def tl_func(call: ast.AST) -> str | None:
    """``load`` for a call of ``tl.load`` / ``triton.language.load``; None otherwise."""
    if not isinstance(call, ast.Call):
        return None
    name = dotted(call.func)
    if name:
        for prefix in TL_PREFIXES:
            if name.startswith(prefix):
                return name[len(prefix):]
    return None


def arg(call: ast.Call, index: int, keyword: str) -> ast.AST | None:
    """The argument at ``index`` or passed as ``keyword``."""
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return None


def _is_dtype(node: ast.AST | None, names: tuple[str, ...]) -> bool:
    name = dotted(node) if node is not None else None
    return bool(name) and any(name == p + n for p in TL_PREFIXES for n in names)


def is_int64_dtype(node) -> bool:
    return _is_dtype(node, ("int64", "uint64"))


def is_int32_dtype(node) -> bool:
    return _is_dtype(node, ("int32", "uint32", "int16", "int8"))


def cast_target(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    """``(value, dtype)`` for ``value.to(dtype)`` or ``tl.cast(value, dtype)``; None otherwise."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and tl_func(node) is None:
        dtype = arg(node, 0, "dtype")
        return (node.func.value, dtype) if dtype is not None else None
    if tl_func(node) == "cast":
        value, dtype = arg(node, 0, "input"), arg(node, 1, "dtype")
        if value is not None and dtype is not None:
            return value, dtype
    return None


def int64_cast_of(node: ast.AST) -> ast.AST | None:
    """The value cast when ``node`` casts to int64, else None."""
    cast = cast_target(node)
    return cast[0] if cast and is_int64_dtype(cast[1]) else None


def base_name(node: ast.AST) -> str | None:
    """Leftmost name of a pointer expression: ``x`` for ``x + i * D + offs`` or ``tl.advance(x, ...)``."""
    while True:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            node = node.left
        elif isinstance(node, ast.Call) and tl_func(node) == "advance" and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def add_terms(node: ast.AST) -> list[ast.AST]:
    """Operands of a chain of ``+``: ``[a, b * c, d]`` for ``a + b * c + d``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return add_terms(node.left) + add_terms(node.right)
    return [node]


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def snippet(node: ast.AST, limit: int = 50) -> str:
    """Source text of ``node`` for a message, shortened to ``limit`` characters."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
