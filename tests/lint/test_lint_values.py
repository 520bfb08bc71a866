"""The rules follow values far enough to be right on real code (issue 22 item 7): what a value is cast
to, which operands are already int64, which names a constexpr mode fixes, and a loop's step vs its bound.
Each case is a form seen in public Triton-Ascend kernels (tests/data/lint_real) reduced to a few lines."""

import textwrap

import pytest

from ascendopt.lint import lint_source

HEADER = "import triton\nimport triton.language as tl\n\n"


def lines_of(body: str, rule: str) -> list[int]:
    """1-based lines within ``body`` (header excluded) where ``rule`` fires."""
    found = lint_source(HEADER + textwrap.dedent(body).lstrip("\n"), "k.py")
    return [f.line - HEADER.count("\n") for f in found if f.rule == rule]


CASES = [
    # AO203: `.to(tl.int64)` after a load casts the loaded value; the address product is not cast at all
    ("AO203", """
        @triton.jit
        def k(h0, idx, stride_seq, stride_tok):
            i_n = tl.program_id(0)
            base = tl.load(idx + i_n * stride_seq).to(tl.int64) * stride_tok
            tl.store(h0 + base, 0.0)
        """, []),
    # AO203: an operand typed int64 in the signature makes the product int64
    ("AO203", """
        @triton.jit
        def k(x, T: tl.int64):
            i_b = tl.program_id(0)
            tl.store(x + (i_b * T).to(tl.int64), 0.0)
        """, []),
    # AO203: a jit helper's argument that every caller passes as int64 is int64 inside the helper
    ("AO203", """
        @triton.jit
        def _row(x, bos, H: tl.constexpr):
            return x + (bos * H).to(tl.int64)

        @triton.jit
        def k(x, T, H: tl.constexpr):
            i_b = tl.program_id(0)
            tl.store(_row(x, tl.cast(i_b, tl.int64) * T, H), 0.0)
        """, []),
    # ...but not when one caller passes an int32 value
    ("AO203", """
        @triton.jit
        def _row(x, bos, H: tl.constexpr):
            return x + (bos * H).to(tl.int64)

        @triton.jit
        def k(x, T, H: tl.constexpr):
            i_b = tl.program_id(0)
            tl.store(_row(x, i_b * T, H), 0.0)
        """, [3]),
    # AO203: a stride derived in a local from constexprs is as large as its value (HV * K * V)
    ("AO203", """
        @triton.jit(do_not_specialize=["T"])
        def k(h, T, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
            DH_CS: tl.constexpr = HV * K * V
            NT = tl.cdiv(T, BT)
            i_t = tl.program_id(0)
            tl.store(h + ((NT - 1) * DH_CS).to(tl.int64), 0.0)
            tl.store(h + (i_t * HV).to(tl.int64) * K * V, 0.0)
        """, [6]),
    # AO203: a tile offset `i_l * BL` stays below its int32 extent L
    ("AO203", """
        @triton.jit
        def k(x, L, BL: tl.constexpr):
            for i_l in range(tl.cdiv(L, BL)):
                o_l = (i_l * BL + tl.arange(0, BL)).to(tl.int64)
                tl.store(x + o_l, 0.0)
        """, []),
    # AO205: a loop over an int64 task count gives int64 indices (Triton types the induction variable)
    ("AO205", """
        @triton.jit(do_not_specialize=["T", "NT", "num_core"])
        def k(q, T, NT, num_core, H: tl.constexpr, K: tl.constexpr):
            task_num = tl.cast(NT, tl.int64) * H
            for task in tl.range(tl.program_id(0), task_num, num_core):
                i_b = task // H
                bos = i_b * T
                tl.store(q + (bos * H) * K, 0.0)
        """, []),
    ("AO205", """
        @triton.jit(do_not_specialize=["T", "NT", "num_core"])
        def k(q, T, NT, num_core, H: tl.constexpr, K: tl.constexpr):
            for task in tl.range(tl.program_id(0), NT * H, num_core):
                i_b = task // H
                bos = i_b * T
                tl.store(q + (bos * H) * K, 0.0)
        """, [5]),
    # AO205: tokens times a head count is gate-sized (B*T*H elements), far below 2^31; times a dim it is not
    ("AO205", """
        @triton.jit(do_not_specialize=["seq_len", "NUM_HEADS"])
        def k(g, q, seq_len, NUM_HEADS, K: tl.constexpr):
            i_b, i_s = tl.program_id(0), tl.program_id(1)
            tl.store(g + i_b * seq_len * NUM_HEADS + i_s * NUM_HEADS, 0.0)
            tl.store(q + i_b * seq_len * NUM_HEADS * K, 0.0)
        """, [5]),
    # AO103: the step (a core count) and tile walks are not the task extent
    ("AO103", """
        @triton.jit(do_not_specialize=["T"])
        def k(x, T, NS, BT: tl.constexpr, TILE_SIZE: tl.constexpr):
            NT = tl.cdiv(T, BT)
            for i_t in range(tl.program_id(0), NT, NS):
                tl.store(x + i_t, 0.0)
            start = tl.program_id(0) * TILE_SIZE
            for off in range(start, T, TILE_SIZE):
                tl.store(x + off, 0.0)
        """, []),
    # AO103: a task count derived in a local from specialized int arguments, or from constexprs only
    ("AO103", """
        @triton.jit
        def k(x, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
            total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
            for t in range(tl.program_id(0), total, tl.num_programs(0)):
                tl.store(x + t, 0.0)

        @triton.jit(do_not_specialize=["num_core"])
        def k2(x, num_core, NB: tl.constexpr, NH: tl.constexpr):
            total: tl.constexpr = NB * NH
            for t in tl.range(tl.program_id(0), total, num_core):
                tl.store(x + t, 0.0)

        @triton.jit(do_not_specialize=["num_core"])
        def k3(x, num_core, NB: tl.constexpr, NT: tl.constexpr):
            n_tasks = NB * NT
            for t in tl.range(tl.program_id(0), n_tasks, num_core):
                tl.store(x + t, 0.0)
        """, [4, 10, 16]),
    # AO103: a constexpr factor (a head count) of a runtime task count is a model constant
    ("AO103", """
        @triton.jit(do_not_specialize=["NT", "num_core"])
        def k(x, NT, num_core, HV: tl.constexpr):
            task_num = tl.cast(NT, tl.int64) * HV
            for t in tl.range(tl.program_id(0), task_num, num_core):
                tl.store(x + t, 0.0)
        """, []),
    # AO302: a flag that a constexpr TAIL_MODE fixes; the host launches bulk and tail apart
    ("AO302", """
        @triton.jit
        def k(x, y, n, BT: tl.constexpr, TAIL_MODE: tl.constexpr):
            i_t = tl.program_id(0)
            if TAIL_MODE == 0:
                is_tail = False
            elif TAIL_MODE == 1:
                is_tail = True
            else:
                is_tail = (i_t + 1) * BT > n
            if is_tail:
                o = i_t * BT + tl.arange(0, BT)
                b = tl.load(x + o, mask=o < n)
            else:
                b = tl.load(tl.make_block_ptr(x, (n,), (1,), (i_t * BT,), (BT,), (0,)), boundary_check=(0,))
            tl.store(y + i_t, tl.sum(b))
        """, []),
    # ...and the same runtime flag without a mode is the anti-pattern
    ("AO302", """
        @triton.jit
        def k(x, y, n, BT: tl.constexpr):
            i_t = tl.program_id(0)
            is_tail = (i_t + 1) * BT > n
            if is_tail:
                o = i_t * BT + tl.arange(0, BT)
                b = tl.load(x + o, mask=o < n)
            else:
                b = tl.load(tl.make_block_ptr(x, (n,), (1,), (i_t * BT,), (BT,), (0,)), boundary_check=(0,))
            tl.store(y + i_t, tl.sum(b))
        """, [5]),
    # AO302: an outer branch whose DMA kinds come from a nested branch is not itself the choice
    ("AO302", """
        @triton.jit
        def k(x, y, n, W: tl.constexpr, BT: tl.constexpr):
            i_t = tl.program_id(0)
            t0 = i_t * BT
            if t0 >= W:
                b = tl.load(tl.make_block_ptr(x, (n,), (1,), (t0,), (BT,), (0,)), boundary_check=(0,))
            else:
                o = t0 + tl.arange(0, BT)
                b = tl.load(x + o, mask=o >= 0)
            tl.store(y + i_t, tl.sum(b))
            if t0 < 0:
                if n > 0:
                    tl.store(y, 0.0)
            else:
                o = t0 + tl.arange(0, BT)
                tl.store(y + o, 0.0, mask=o < n)
        """, [5]),
    # ...but the other side of an elif chain is still this branch's choice
    ("AO302", """
        @triton.jit
        def k(x, y, n, BT: tl.constexpr):
            i_t = tl.program_id(0)
            if (i_t + 1) * BT > n:
                o = i_t * BT + tl.arange(0, BT)
                b = tl.load(x + o, mask=o < n)
            elif n > BT:
                b = tl.load(tl.make_block_ptr(x, (n,), (1,), (i_t * BT,), (BT,), (0,)), boundary_check=(0,))
            else:
                b = tl.zeros([BT], dtype=tl.float32)
            tl.store(y + i_t, tl.sum(b))
        """, [4]),
    # AO301: the OR-ed flag tested again around the optional pointer is the nesting the practice asks for
    ("AO301", """
        @triton.jit
        def k(x, h0, W: tl.constexpr, BT: tl.constexpr, USE_INITIAL_STATE: tl.constexpr):
            t0 = tl.program_id(0) * BT
            if not USE_INITIAL_STATE or t0 >= W:
                b = tl.load(x + t0)
            else:
                b = tl.load(x + t0)
                if USE_INITIAL_STATE:
                    b += tl.load(h0 + t0)
            tl.store(x + t0, b)
        """, []),
    # AO401: a tile handed to a jit helper that takes it as tl.dot's left operand is clobbered too
    ("AO401", """
        @triton.jit
        def _mm(a, b):
            return tl.dot(a, b, input_precision="ieee")

        @triton.jit
        def k(x, y, o, BT: tl.constexpr):
            b_a = tl.load(x + tl.arange(0, BT))
            b_b = tl.load(y + tl.arange(0, BT))
            b_c = _mm(b_a, b_b)
            b_d = _mm(b_a, b_c)
            tl.store(o, b_d)
        """, [10]),
]


@pytest.mark.parametrize("rule,source,expected", CASES, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(CASES)])
def test_rule_follows_values(rule, source, expected):
    assert lines_of(source, rule) == expected
