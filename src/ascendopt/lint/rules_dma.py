"""AO3xx: DMA paths and control flow (constexpr splits, task-loop pointers, gate layout)."""

from __future__ import annotations

import ast
import re

from ascendopt.lint.astutil import add_terms, arg, base_name, names_in, snippet, tl_func
from ascendopt.lint.context import FileContext, Kernel
from ascendopt.lint.registry import rule

GATE_NAME = re.compile(r"^(g|gk|gv|gate|gates|g_cumsum|g_cs)(_ptr)?$")
HEAD_COUNT = {"H", "HV", "HQ", "HK", "NH", "num_heads", "n_heads"}


# Compile-time switches that choose a DMA path or a layout on purpose (a TAIL_MODE split, a varlen
# path, G_T_CONTIG, an HV == 1 special case): code under them is the seed's sanctioned variant.
DMA_SWITCH = re.compile(r"TAIL|MODE|VARLEN|SPLIT")
LAYOUT_SWITCH = re.compile(r"CONTIG|TRANSPOS|LAYOUT|HEAD_FIRST|^(H|HV|HQ|HK|NH)$")


def _compile_time_guard(ctx: FileContext, kernel: Kernel, node: ast.AST, switch: re.Pattern) -> bool:
    """Whether ``node`` sits in a branch chosen at compile time by a ``switch`` name (``if TAIL_MODE == 2:``)."""
    child = node
    for anc in ctx.ancestors(node):
        if anc is kernel.fn:
            return False
        if (isinstance(anc, (ast.If, ast.IfExp)) and child is not anc.test and _has_constexpr_part(kernel, anc.test)
                and any(switch.search(name) for name in kernel.names(anc.test))):
            return True
        child = anc
    return False


def _has_constexpr_part(kernel: Kernel, test: ast.AST) -> bool:
    if kernel.is_constexpr(test, strict=False):
        return True
    return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(
        kernel.is_constexpr(v, strict=False) for v in test.values)


@rule(
    "AO301", "constexpr-or-runtime",
    summary="A tl.constexpr flag OR-ed with a runtime condition (`if USE_INITIAL_STATE or i_t * BT < W:`).",
    why="The condition is no longer compile-time, so both branches are lowered: the branch that dereferences "
        "the optional pointer still compiles when the pointer is None.",
    fix="Nest the flag: `if not FLAG: ... elif runtime: ... else: ...`.",
    seed=("if CONSTEXPR_FLAG or runtime: around an optional pointer \u2014 else still compiles when the ptr is None",
          ("Do not OR a constexpr optional-pointer flag with a runtime check: if USE_INITIAL_STATE or i_t*BT < W "
          "still lowers the else and compiles initial_state + \u2026 when the pointer is None. Nest: if not "
          "FLAG: \u2026 elif runtime: \u2026 else: \u2026.")),
    limits="a flag OR-ed with a runtime value through an intermediate local variable; a branch that tests the "
           "flag again at compile time (`if USE_INITIAL_STATE:` inside) is taken as nested correctly, without "
           "checking that every use of the optional pointer is under it.",
)
def check_constexpr_or(ctx: FileContext):
    for kernel, node in ctx.kernel_nodes(ast.If, ast.IfExp, ast.While):
        for sub in ast.walk(node.test):
            if not (isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.Or)):
                continue
            flags = [v for v in sub.values if kernel.is_constexpr(v, strict=False)
                     and names_in(v) & kernel.constexpr_params]
            runtime = [v for v in sub.values if not kernel.is_constexpr(v, strict=False)]
            if flags and runtime and not _retested(kernel, node, set().union(*(names_in(f) for f in flags))):
                yield sub, (f"`{snippet(sub)}` ORs tl.constexpr `{snippet(flags[0])}` "
                            f"with runtime `{snippet(runtime[0])}`: "
                            "both branches compile (a None pointer too); nest `if not FLAG: ... elif ...`")


def _retested(kernel: Kernel, node: ast.AST, flags: set[str]) -> bool:
    """Whether a branch of ``node`` tests the flag again at compile time (``if USE_INITIAL_STATE:`` around the
    optional pointer): the nesting the practice asks for, done one level down."""
    if isinstance(node, ast.IfExp):
        return False
    for stmt in node.body + node.orelse:
        for sub in ast.walk(stmt):
            if (isinstance(sub, ast.If) and kernel.names(sub.test) & flags
                    and kernel.is_constexpr(sub.test, strict=False)):
                return True
    return False


def _dma_kind(kernel: Kernel, call: ast.AST) -> str | None:
    """'block' for a block-pointer load/store, 'masked' for a masked one, else None."""
    func = tl_func(call)
    if func not in ("load", "store") or not call.args:
        return None
    pointer = call.args[0]
    if (tl_func(pointer) in ("make_block_ptr", "advance") or any(k.arg == "boundary_check" for k in call.keywords)
            or isinstance(pointer, ast.Name) and pointer.id in kernel.block_pointer_names):
        return "block"
    mask = arg(call, 1, "mask") if func == "load" else arg(call, 2, "mask")
    return "masked" if mask is not None and not (isinstance(mask, ast.Constant) and mask.value is None) else None


def _first_dma(kernel: Kernel, nodes, kind: str) -> ast.AST | None:
    """The first DMA of ``kind`` that the branch itself performs: one inside a nested ``if`` is that
    branch's choice (judged on its own), not this one's."""
    stack = list(reversed(nodes))
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.If):
            continue
        if isinstance(sub, ast.Call) and _dma_kind(kernel, sub) == kind:
            return sub
        stack.extend(reversed(list(ast.iter_child_nodes(sub))))
    return None


def _mode_split(ctx: FileContext, kernel: Kernel, test: ast.AST) -> bool:
    """Whether the runtime part of ``test`` is a flag that a constexpr mode fixes: every binding of its
    names is a constant or sits under a compile-time branch, and some mode binds a constant
    (``if TAIL_MODE == 0: is_tail = False ... else: is_tail = <runtime>``): the host launches bulk and
    tail separately and each compile keeps one DMA path."""
    names = [n for n in kernel.names(test) if n not in kernel.maybe_constexpr_names]
    if not names:
        return False
    for name in names:
        bindings = [n for n in kernel.nodes(ast.Assign) if any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        if not bindings or len(bindings) != len(kernel.assigns.get(name, [])):
            return False
        constant_under_mode = False
        for node in bindings:
            guards = [a for a in ctx.ancestors(node) if isinstance(a, ast.If) and kernel.is_constexpr(a.test, False)]
            if not guards:
                return False
            constant_under_mode |= isinstance(node.value, ast.Constant)
        if not constant_under_mode:
            return False
    return True


@rule(
    "AO302", "runtime-dma-branch",
    summary="A runtime branch choosing between a block-pointer DMA and a masked DMA (e.g. `if is_tail_chunk:`).",
    why="Both DMA paths stay live in UB (peak is about their sum): Vector utilization stalls (~0.75 in "
        "causal_conv1d) even with UB bandwidth free, and larger tiles fail to compile.",
    fix="Host-split the last tile into a second launch with a tl.constexpr TAIL_MODE (0 = block pointer only, "
        "1 = always masked, 2 = runtime for varlen / NT == 1) so each compile keeps one path.",
    seed=("Leaving a runtime is_tail_chunk (or similar) between block_ptr and masked DMA \u2014 both stay in UB",
          ("Constexpr-split mutually exclusive DMA paths (critical on Ascend): a runtime if is_tail_chunk that "
          "chooses make_block_ptr vs masked tl.load keeps both paths live in UB.")),
    limits="branches under a compile-time TAIL/MODE/VARLEN/SPLIT switch are accepted (the seed's "
           "TAIL_MODE == 2 runtime path), and so are tests on a flag that a constexpr mode sets to a constant "
           "(`if TAIL_MODE == 0: is_tail = False`); a DMA inside a nested `if` belongs to that branch; whether "
           "the host really launches the bulk and the tail separately is not checked.",
)
def check_runtime_dma_branch(ctx: FileContext):
    for kernel, node in ctx.kernel_nodes(ast.If, ast.IfExp):
        if (_has_constexpr_part(kernel, node.test) or _compile_time_guard(ctx, kernel, node, DMA_SWITCH)
                or _mode_split(ctx, kernel, node.test)):
            continue
        body = node.body if isinstance(node.body, list) else [node.body]
        orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
        while len(orelse) == 1 and isinstance(orelse[0], ast.If):  # an elif chain is this branch's other side
            orelse = orelse[0].body + orelse[0].orelse
        for first, second in (("block", "masked"), ("masked", "block")):
            a, b = _first_dma(kernel, body, first), _first_dma(kernel, orelse, second)
            if a is not None and b is not None:
                yield node, (f"runtime branch `{snippet(node.test)}` chooses a {first} DMA (line {a.lineno}) or a "
                             f"{second} DMA (line {b.lineno}): both stay live in UB; split with a tl.constexpr mode")
                break


def _self_update(target: str, value: ast.AST) -> bool:
    return base_name(value) == target


@rule(
    "AO303", "task-loop-pointer-accumulation",
    summary="A pointer advanced in place (`ptr += ...`, `p = tl.advance(p, ...)`) across tasks of a core-grid loop.",
    why="In a 1D core-grid task loop each task is independent; carrying a pointer from one task to the next "
        "can be mis-compiled by Ascend Triton (and `ptr -=` across chunks gave NaN in chunk_delta_h).",
    fix="Rebind local pointers from the base argument every iteration: `q_ptr = q + offset(task_id)`.",
    seed=(("In a core-grid task loop, rebind local pointers each iteration (q_ptr = q + \u2026); do not accumulate "
          "with in-place ptr += across tasks \u2014 Ascend Triton can mis-compile that pattern."),),
    limits="task loops whose start is not visibly derived from tl.program_id.",
)
def check_task_loop_pointers(ctx: FileContext):
    for kernel in ctx.kernels.values():
        for loop in kernel.task_loops:
            fresh: set[str] = set()
            updates = []
            inside = (n for n in kernel.nodes(ast.AugAssign, ast.Assign) if any(a is loop for a in ctx.ancestors(n)))
            for sub in inside:
                if isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Add, ast.Sub)):
                    if isinstance(sub.target, ast.Name) and sub.target.id in kernel.pointer_names:
                        updates.append((sub, sub.target.id))
                elif isinstance(sub, ast.Assign):
                    for target in (t for t in sub.targets if isinstance(t, ast.Name)):
                        if _self_update(target.id, sub.value):
                            if target.id in kernel.pointer_names:
                                updates.append((sub, target.id))
                        else:
                            fresh.add(target.id)
            for node, name in updates:
                if name not in fresh:
                    yield node, (f"pointer `{name}` is advanced in place across tasks of the core-grid loop: "
                                 f"rebind it from the base each iteration ({name} = base + offset(task))")


def _tile_along(kernel: Kernel, node: ast.AST) -> bool:
    """Whether ``node`` holds a vector of indices (tl.arange, directly or through one local name)."""
    if "arange" in kernel.tl_calls(node):
        return True
    return any(v is not None and "arange" in kernel.tl_calls(v)
               for name in kernel.names(node) for v in kernel.assigns.get(name, []))


def _head_strided(kernel: Kernel, node: ast.AST) -> ast.AST | None:
    """The term ``t_tile * HV`` of a pointer offset: a tile of T indices strided by a head count."""
    for term in add_terms(node):
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult):
            for side, other in ((term.left, term.right), (term.right, term.left)):
                if isinstance(side, ast.Name) and side.id in HEAD_COUNT and _tile_along(kernel, other):
                    return term
    return None


@rule(
    "AO304", "gate-head-stride",
    summary="A gate tensor g [B, T, HV] loaded along T with stride HV inside a loop.",
    why="Stepping T with stride HV is a gather: 10x-35x slower than a contiguous load in backward hot loops "
        "(~30-45x in chunk_delta_h).",
    fix="On the host, `g.transpose(1, 2).contiguous()` when HV != 1 and pass a tl.constexpr G_T_CONTIG; load "
        "with a stride-1 pointer (`g + i_b*HV*T_seq + i_h*T_seq`, varlen `bos + i_h*T_seq`).",
    seed=(("Gate g along T (critical on Ascend): if g is [B, T, HV], host g.transpose(1, 2).contiguous() and "
          "load via G_T_CONTIG + stride-1 g_ptr (see g-contiguous-loading.md). Stride-HV gathers in bwd hot "
          "loops can be 10\u00d7\u201335\u00d7 slower than contiguous loads; HV==1 needs no transpose."),),
    limits="gate tensors under other names than g, gk, gv, gate(s), g_cumsum, g_cs; head strides passed "
           "as stride arguments.",
)
def check_gate_head_stride(ctx: FileContext):
    for kernel, call in ctx.kernel_nodes(ast.Call):
        func = tl_func(call)
        if func not in ("load", "make_block_ptr") or not call.args:
            continue
        if not _gate_pointer(kernel, call.args[0]) or _compile_time_guard(ctx, kernel, call, LAYOUT_SWITCH):
            continue
        if not any(isinstance(a, (ast.For, ast.While)) for a in _within(ctx, kernel, call)):
            continue
        if func == "make_block_ptr":
            strides = arg(call, 2, "strides")
            elts = strides.elts if isinstance(strides, (ast.Tuple, ast.List)) else []
            hit = next((e for e in elts if isinstance(e, ast.Name) and e.id in HEAD_COUNT), None)
        else:
            hit = _head_strided(kernel, call.args[0]) or _bound_head_stride(kernel, call.args[0])
        if hit is not None:
            yield call, (f"gate `{base_name(call.args[0])}` loaded in a loop with head stride (`{snippet(hit)}`): a "
                         "gather; transpose g to [B, HV, T] on the host and load it T-contiguous (G_T_CONTIG)")


def _within(ctx: FileContext, kernel: Kernel, node: ast.AST):
    for anc in ctx.ancestors(node):
        if anc is kernel.fn:
            return
        yield anc


def _gate_pointer(kernel: Kernel, pointer: ast.AST, depth: int = 0) -> bool:
    name = base_name(pointer)
    if name is None or depth > 4:
        return False
    if name in kernel.params:
        return bool(GATE_NAME.match(name))
    return any(v is not None and _gate_pointer(kernel, v, depth + 1) for v in kernel.assigns.get(name, []))


def _bound_head_stride(kernel: Kernel, pointer: ast.AST) -> ast.AST | None:
    """For ``tl.load(p_g)``: a head stride in the binding of the local pointer ``p_g``."""
    if isinstance(pointer, ast.Name):
        for value in kernel.assigns.get(pointer.id, []):
            hit = value is not None and _head_strided(kernel, value)
            if hit:
                return hit
    return None
