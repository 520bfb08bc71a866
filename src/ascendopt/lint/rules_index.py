"""AO2xx: the integer width of index math (constexpr .to, int64 block-pointer offsets, late casts, cu_seqlens)."""

from __future__ import annotations

import ast

from ascendopt.lint.astutil import (
    TILE_NAME,
    add_terms,
    arg,
    cast_target,
    dotted,
    int64_cast_of,
    is_int32_dtype,
    names_in,
    snippet,
    tl_func,
)
from ascendopt.lint.context import FileContext, Kernel
from ascendopt.lint.registry import rule


@rule(
    "AO201", "constexpr-to",
    summary="`.to(...)` called on a tl.constexpr kernel parameter (or arithmetic on them).",
    why="A constexpr argument is a Python value at compile time, not a tensor: `B.to(tl.int64)` fails with "
        "AttributeError(\"'constexpr' object has no attribute 'to'\").",
    fix="Use `tl.cast(B, tl.int64)`, which accepts constexpr and tensor values alike.",
    seed=(("B.to(tl.int64) / i_t.to(tl.int64) on specialized or folded constexpr ints (constexpr has no .to); "
          "use tl.cast"),),
    limits="program ids that Triton-Ascend folds to constexpr (i_t when NT == 1) and int arguments "
           "specialized because they equal 1: in the source both look like runtime values.",
)
def check_constexpr_to(ctx: FileContext):
    for kernel, call in ctx.kernel_nodes(ast.Call):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to") or tl_func(call):
            continue
        receiver = call.func.value
        if isinstance(receiver, ast.Constant) or not names_in(receiver) & kernel.constexpr_names:
            continue
        if kernel.is_constexpr(receiver, strict=True):
            dtype = ast.unparse(call.args[0]) if call.args else "..."
            yield call, (f"`{snippet(receiver)}` is tl.constexpr, which has no .to(): "
                         f"use tl.cast({snippet(receiver)}, {dtype})")


@rule(
    "AO202", "block-ptr-int64",
    summary="An int64 value passed as a tl.make_block_ptr offset or block_shape.",
    why="Block pointers take 32-bit offsets and block shapes (\"Block pointers only support 32 bit "
        "offsets/block_shape\"); an int64 row offset such as a varlen `t0 = bos + i_t * BT` is rejected.",
    fix="Put the int64 part into the base pointer (`x + bos * D`) and pass the int32 tile offset "
        "(`i_t * BT`) to make_block_ptr.",
    seed=("Passing int64 t0 as make_block_ptr offsets (offsets/block_shape must be int32)",
          ("make_block_ptr offsets stay int32: Triton rejects int64 offsets/block_shape. Flattened pointer math "
          "(bos * D, t0 * D, i_b * stride) uses int64; pass i_t * BT (int32) as the block row offset. Do not "
          "feed t0 into make_block_ptr.")),
    limits="int64 values produced inside helper functions, or loaded from int64 tensors without an "
           "explicit cast.",
)
def check_block_ptr_int64(ctx: FileContext):
    for kernel, call in ctx.kernel_nodes(ast.Call):
        if tl_func(call) != "make_block_ptr":
            continue
        for index, keyword in ((3, "offsets"), (4, "block_shape")):
            value = arg(call, index, keyword)
            if isinstance(value, (ast.Tuple, ast.List)):
                for element in value.elts:
                    if kernel.is_int64(element):
                        yield element, (f"int64 `{snippet(element)}` in make_block_ptr {keyword}: must be int32; "
                                        "move the int64 part into the base pointer")


def _tile_local(kernel: Kernel, name: str) -> bool:
    """A name bound only to compile-time arithmetic on tl.arange (an offset inside one tile)."""
    values = kernel.assigns.get(name) or []
    return bool(values) and all(
        v is not None and "arange" in kernel.tl_calls(v)
        and all(x in kernel.maybe_constexpr_names or x == "tl" for x in kernel.names(v)) for v in values)


def _runtime_index(kernel: Kernel, node: ast.AST) -> bool:
    """Whether ``node`` involves a runtime scalar index (program id, loaded value, runtime extent)."""
    for sub in ast.walk(node):
        if tl_func(sub) in ("program_id", "num_programs", "load"):
            return True
        if (isinstance(sub, ast.Name) and (sub.id in kernel.assigns or sub.id in kernel.params)
                and sub.id not in kernel.maybe_constexpr_names and not _tile_local(kernel, sub.id)):
            return True
    return False


# Calls whose value is made of their arguments' values (so a product inside is part of the value cast).
_VALUE_CALLS = {"where", "minimum", "maximum", "min", "max", "abs"}


def _tile_size(node: ast.AST) -> bool:
    """A block-size name by the kernels' convention (BT, BK, BL, BLOCK_SIZE, TILE_N...), not a stride or extent."""
    return isinstance(node, ast.Name) and bool(TILE_NAME.match(node.id))


def _products(node: ast.AST):
    """Multiplications that make up the value of ``node``: not inside nested casts (separate values) and not
    inside other calls, ``tl.load(p + i * s).to(tl.int64)`` casts the loaded value, not the address."""
    stack = [node]
    while stack:
        sub = stack.pop()
        if sub is not node and cast_target(sub) is not None:
            continue
        if isinstance(sub, ast.Call) and (tl_func(sub) or dotted(sub.func) or "").split(".")[-1] not in _VALUE_CALLS:
            continue
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mult):
            yield sub
        stack.extend(ast.iter_child_nodes(sub))


HEAD_COUNTS = {"H", "HV", "HQ", "HK", "Hg", "NH", "G"}  # and names ending in "heads" (NUM_HEADS, num_kv_heads)
LATE_CAST_WEIGHT = 3  # an index times an extent or stride (i_b * T), or an index times two sizes


def _magnitude(kernel: Kernel, node: ast.AST, tile: int = 0, depth: int = 0) -> int:
    """How far an int32 product can grow, counted in 'sizes': a runtime index or a head count 1, an extent,
    dim or stride (a non-tile parameter: T, K, DH_CS, stride_x) 2, a literal above 1 one, a tile size
    ``tile`` (0 where it multiplies an index, `i_t * BT` < T); a local computed once from constexprs
    (``DH_CS: tl.constexpr = HV * K * V``) counts as its value; products add, sums take their largest term,
    ``a // b`` and ``a % b`` are no larger than ``a``."""
    if isinstance(node, ast.Constant):
        return 1 if isinstance(node.value, int) and node.value > 1 else 0
    if isinstance(node, ast.Name):
        if _tile_size(node):
            return tile
        if node.id in HEAD_COUNTS or node.id.lower().endswith("heads"):
            return 1
        values = kernel.assigns.get(node.id, [])
        if (len(values) == 1 and values[0] is not None and depth < 3
                and kernel.is_constexpr(values[0], strict=False)):
            return max(1, _magnitude(kernel, values[0], tile, depth + 1))
        return 2 if node.id in kernel.params and not values else 1
    if isinstance(node, ast.UnaryOp):
        return _magnitude(kernel, node.operand, tile, depth)
    if not isinstance(node, ast.BinOp):
        return 1
    left, right = _magnitude(kernel, node.left, tile, depth), _magnitude(kernel, node.right, tile, depth)
    if isinstance(node.op, ast.Mult):
        return left + right
    if isinstance(node.op, (ast.FloorDiv, ast.Mod, ast.Div)):
        return left
    return max(left, right)


@rule(
    "AO203", "late-int64-cast",
    summary="A runtime index multiplied by a stride first and cast to int64 afterwards.",
    why="Program ids, chunk indices and grid-derived values are int32: the product wraps past 2^31 before "
        "the trailing cast. `(NT - 1) * HV*K*V` with K=V=128, HV=64, BT=64 overflows at T > 131K; "
        "`(i_b * T).to(tl.int64)` from CUDA code still wraps.",
    fix="Cast the index before multiplying: `tl.cast(i_b, tl.int64) * T`, `tl.cast(NT - 1, tl.int64) * DH_CS`, "
        "`tl.cast(bos, tl.int64) * HV + i_h`.",
    seed=(("Cast the index first with tl.cast (not .to on specialized ints): tl.cast(i_t, tl.int64) * BT, "
          "tl.cast(i_b, tl.int64) * T, tl.cast(B, tl.int64) * T, tl.cast(NT - 1, tl.int64) * DH_CS."),
          "Never (i_b * T).to(tl.int64) or ((NT - 1) * DH_CS).to(tl.int64)."),
    limits="products never cast at all (AO205 reports the token-offset ones); a factor named like a tile size "
           "(BT, BK, BL, BLOCK_*, TILE_*) is taken as small on purpose; a product of an index and a head count "
           "or another index (`i_tg * H`, `i_bh * NT + i_t`: bounded by an int32 count) is taken as below 2^31; "
           "which parameter is a head count is known only by name (H, HV, HQ, HK, Hg, NH, G, *heads). int64 is known "
           "from explicit casts, `tl.int64`-typed parameters, jit-helper arguments every caller in the file "
           "passes as int64, and loops over int64 bounds; not from the dtype of a tensor a value was loaded "
           "from. A `.to(tl.int64)` of a loaded value (`tl.load(p + i * s).to(...)`) casts data, not the "
           "address, and is not read as a late cast.",
)
def check_late_cast(ctx: FileContext):
    for kernel, call in ctx.kernel_nodes(ast.Call):
        value = int64_cast_of(call)
        if value is None:
            continue
        for product in _products(value):
            left, right = product.left, product.right
            if kernel.is_int64(left) or kernel.is_int64(right):
                continue
            if kernel.is_constexpr(left, strict=False) and kernel.is_constexpr(right, strict=False):
                continue  # compile-time product: Python ints do not wrap
            if _tile_size(left) or _tile_size(right):
                continue  # i_t * BT is a token offset (< T): the seed passes it as int32 on purpose
            if _magnitude(kernel, product) < LATE_CAST_WEIGHT:
                continue  # an index times a head count (`i_tg * H`) stays far below 2^31; the big stride comes after
            if _runtime_index(kernel, left) or _runtime_index(kernel, right):
                yield product, (f"`{snippet(product)}` is computed in int32 and cast to int64 afterwards: it can "
                                f"wrap first; cast the index before multiplying (tl.cast(x, tl.int64) * stride)")
                break


def _cu_seqlens_narrowing(value: ast.AST) -> str | None:
    """'int32' for ``tl.load(cu_seqlens + i).to(tl.int32)``, 'uncast' for a bare load, else None."""
    kind = "uncast"
    cast = cast_target(value)
    if cast is not None:
        if not is_int32_dtype(cast[1]):
            return None
        value, kind = cast[0], "int32"
    if tl_func(value) == "load" and value.args and any("cu_seqlens" in n.lower() for n in names_in(value.args[0])):
        return kind
    return None


@rule(
    "AO204", "cu-seqlens-int32",
    summary="A cu_seqlens value loaded as (or narrowed to) int32 and then used in stride math.",
    why="Sequence starts are token offsets into the packed batch: `(bos * HV + i_hv) * V` in int32 wraps long "
        "before bos reaches 2^31 (HV=32, V=4096: safe only while bos < ~16K). Hosts pass int64 or int32 "
        "cu_seqlens, so the loaded dtype is not guaranteed.",
    fix="Load as int64 either way: `bos = tl.load(cu_seqlens + i_n).to(tl.int64)`; narrow only the length "
        "`T = (eos - bos).to(tl.int32)`; or cast before the stride: `tl.cast(bos, tl.int64) * HV + i_h`.",
    seed=(("Varlen cu_seqlens \u2192 int64 for pointer math: host dtype is often torch.long, but tests also pass "
          "int32; load as tl.int64 either way. Loading .to(tl.int32) then (bos * HV + i_hv) * V overflows well "
          "before bos hits 2\u00b3\u00b9 (HV=32, V=4096 \u2192 safe bos \u2248 16K)."),),
    limits="values returned by helper functions (bos = chunk_of(...)) and cu_seqlens passed under "
           "another name.",
)
def check_cu_seqlens(ctx: FileContext):
    for kernel in ctx.kernels.values():
        narrow: dict[str, tuple[str, ast.AST]] = {}  # name -> (how, the load that narrows it)
        for name, values in kernel.assigns.items():
            loads = [(_cu_seqlens_narrowing(v), v) for v in values if v is not None]
            loads = [(kind, v) for kind, v in loads if kind is not None]
            # another binding on a different path (bos = tl.cast(i_b, tl.int64) * T) does not fix the
            # varlen path; only widening the same value (bos = bos.to(tl.int64)) does
            widened = any(v is not None and isinstance(int64_cast_of(v), ast.Name) and int64_cast_of(v).id == name
                          for v in values)
            if loads and not widened:
                narrow[name] = min(loads, key=lambda kv: (kv[1].lineno, kv[1].col_offset))
        used: dict[str, ast.AST] = {}
        for product in (n for n in kernel.nodes(ast.BinOp) if isinstance(n.op, ast.Mult)):
            for operand in (product.left, product.right):
                for term in add_terms(operand):
                    if isinstance(term, ast.Name) and term.id in narrow:
                        first = used.get(term.id)
                        if first is None or (product.lineno, product.col_offset) < (first.lineno, first.col_offset):
                            used[term.id] = product
        for name, product in used.items():
            kind, load = narrow[name]
            how = "narrowed to int32" if kind == "int32" else "loaded without .to(tl.int64)"
            yield load, (f"`{name}` from cu_seqlens is {how} and multiplied at line {product.lineno} "
                         f"(`{snippet(product)}`): int32 wraps; load it with .to(tl.int64)")


# Sequence-length extents by the kernels' convention: a batch index times one of these is a token offset.
SEQ_EXTENTS = {"T", "T_max", "T_seq", "T_total", "seq_len", "seqlen", "max_seqlen"}


def _int32_token_offset(kernel: Kernel, node: ast.AST) -> ast.BinOp | None:
    """The product ``i_b * T`` when ``node`` is one made in int32: a runtime index (not int64, not
    compile-time) times a sequence extent, with no cast first."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return None
    for index, extent in ((node.left, node.right), (node.right, node.left)):
        if (isinstance(extent, ast.Name) and extent.id in SEQ_EXTENTS and not kernel.is_int64(extent)
                and not kernel.is_int64(index) and not kernel.is_constexpr(index, strict=False)
                and _runtime_index(kernel, index)):
            return node
    return None


WRAP_WEIGHT = 4  # index * T (2) times at least a head count and a dim (or one stride)


def _chain_weight(ctx: FileContext, kernel: Kernel, node: ast.AST) -> tuple[int, ast.AST]:
    """Sizes (as ``_magnitude`` counts them) multiplied onto the token offset ``node`` (itself 2: index
    times T) up through ``+`` and ``*`` in int32, and the outermost product; 0 when a factor on the way is
    int64 (the product is int64)."""
    weight, top, child = 2, node, node
    for parent in ctx.ancestors(node):
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)):
            child = parent
            continue
        if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult)):
            break
        other = parent.right if parent.left is child else parent.left
        if kernel.is_int64(other):
            return 0, top
        weight += _magnitude(kernel, other, tile=1)  # a token offset times BT grows by BT
        top = child = parent
    return weight, top


@rule(
    "AO205", "int32-token-offset",
    summary="A sequence start `i_b * T` made in int32 (never cast) and then multiplied by a stride.",
    why="`i_b * T` is a token offset into the packed batch; times heads and head dim (`bos * H * K`, "
        "`i_n * T * H * D`) it passes 2^31 long before memory runs out (H*K = 4096: at 524K tokens) and the "
        "pointer wraps. No cast anywhere means nothing widens it later.",
    fix="Cast the index before multiplying: `bos = tl.cast(i_b, tl.int64) * T` (then `bos * H * K` is int64).",
    seed=(("Non-varlen: bos = tl.cast(i_b, tl.int64) * T (CUDA/repo often writes (i_b * T).to(tl.int64), which "
          "still wraps if i_b * T exceeds 2\u00b3\u00b9)."),
          ("Runtime indices (NT, i_t, i_b, B, program IDs) via stride / / multiply \u2014 including packed . "
          "Not gated on . Do not call on specialized kernel args ( has no )")),
    limits="token offsets under other names than T, T_max, T_seq, T_total, seq_len, seqlen, max_seqlen; "
           "offsets scaled less than a head count and a dim, or one stride (`bos * H` alone, `i_h * B * T`: "
           "tensor-sized only past 2^31 elements of a gate) are not reported; in-sequence offsets (`o_t * "
           "stride`, `i_t * BT * D`), which need one sequence past 2^31 / stride; values from cu_seqlens "
           "(AO204 reports those); int64-ness learned as for AO203.",
)
def check_int32_token_offset(ctx: FileContext):
    for kernel in ctx.kernels.values():
        offsets: dict[str, ast.BinOp] = {}  # local name -> the int32 product ``i_b * T`` bound to it
        for name, values in kernel.assigns.items():
            if name in kernel.int64_names:
                continue
            for value in values:
                product = value is not None and _int32_token_offset(kernel, value)
                if product:
                    offsets.setdefault(name, product)
        bound_products = {id(p) for p in offsets.values()}
        worst: dict[str, tuple[int, ast.AST]] = {}
        for use in kernel.nodes(ast.Name):
            if isinstance(use.ctx, ast.Load) and use.id in offsets:
                weight, top = _chain_weight(ctx, kernel, use)
                if weight > worst.get(use.id, (0, None))[0]:
                    worst[use.id] = (weight, top)
        for name, (weight, top) in worst.items():
            if weight >= WRAP_WEIGHT:
                bound = offsets[name]
                yield bound, (f"`{name} = {snippet(bound)}` is a token offset made in int32 and scaled at line "
                              f"{top.lineno} (`{snippet(top)}`): it wraps past 2^31; "
                              "use tl.cast(index, tl.int64) * T")
        for product in (n for n in kernel.nodes(ast.BinOp) if isinstance(n.op, ast.Mult)):
            if id(product) in bound_products or not _int32_token_offset(kernel, product):
                continue
            weight, top = _chain_weight(ctx, kernel, product)
            if weight >= WRAP_WEIGHT:
                yield product, (f"`{snippet(product)}` is a token offset made in int32 and scaled by a stride "
                                f"(`{snippet(top)}`): it wraps past 2^31; use tl.cast(index, tl.int64) * T")
