"""Each lint rule against small Triton-Ascend-like sources: positives must be found at the right line,
negatives (the seed's recommended forms) must stay clean."""

import json
import textwrap

import pytest

from _cli_json import json_payload
from ascendopt.errors import UsageError
from ascendopt.lint import RULES, active_rules, get_rule, lint_paths, lint_source

HEADER = "import triton\nimport triton.language as tl\n\n"


def findings(body: str, rule: str | None = None):
    found = lint_source(HEADER + textwrap.dedent(body).lstrip("\n"), "k.py")
    return [f for f in found if rule is None or f.rule == rule]


def lines_of(body: str, rule: str) -> list[int]:
    """1-based lines within ``body`` (header excluded) where ``rule`` fires."""
    offset = HEADER.count("\n")
    return [f.line - offset for f in findings(body, rule)]


# (rule, source, lines in the dedented source where the rule must fire)
POSITIVE = [
    ("AO101", """
        def launch(x):
            k[(1,)](x, BT=64, num_warps=4)
        """, [2]),
    ("AO101", """
        @triton.autotune(configs=[triton.Config({"BT": 64}, num_stages=2)], key=["T"])
        @triton.jit
        def k(x, BT: tl.constexpr):
            pass
        """, [1]),
    ("AO101", """
        CONFIGS = [triton.Config({"BT": 64}, 4, 2)]
        """, [1]),
    ("AO101", """
        CONFIGS = [{"BT": 64, "num_warps": 4}]
        """, [1]),
    ("AO101", """
        def wrapper(x, BT=64, num_stages=3):
            return x
        """, [1]),
    ("AO101", """
        def pick_num_warps(d):
            return 8 if d > 1024 else 4

        def launch(x, d):
            num_warps = 4 if d > 1024 else 2
            kwargs = {}
            kwargs["num_stages"] = 2
        """, [1, 5, 7]),
    ("AO101", """
        def launch(x):
            k[(1,)](x, BT=64)  # num_warps=4, kept for CUDA parity
        """, [2]),
    ("AO102", """
        @triton.jit
        def _norm_kernel(x, y, n, BD: tl.constexpr):
            for row in tl.range(tl.program_id(0), n, tl.num_programs(0)):
                b = tl.load(x + row * BD + tl.arange(0, BD)).to(tl.float32)
                tl.store(y + row * BD + tl.arange(0, BD), b * tl.rsqrt(tl.sum(b * b) / BD))

        def norm(x, y, n):
            launch(_norm_kernel, (grid_size("cube", n),), x, y, n, BD=128)
            props = driver.active.utils.get_device_properties(0)
            cores = props["num_aicore"]
            _norm_kernel[(cores,)](x, y, n, BD=128)
        """, [8, 11]),
    ("AO103", """
        @triton.jit
        def k(x, num_tasks, NUM_CORES: tl.constexpr, BD: tl.constexpr):
            for task in tl.range(tl.program_id(0), num_tasks,
                                 NUM_CORES):
                tl.store(x + task * BD + tl.arange(0, BD), 0.0)
        """, [3]),  # the step (a core count: a few values per device) is not the task extent
    ("AO201", """
        @triton.jit
        def k(x, B: tl.constexpr, T: tl.constexpr):
            i_b = tl.program_id(0)
            n = B.to(tl.int64)
            m = (B * T).to(tl.int64)
        """, [4, 5]),
    ("AO202", """
        @triton.jit
        def k(x, cu_seqlens, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
            i_t, i_n = tl.program_id(0), tl.program_id(1)
            bos = tl.load(cu_seqlens + i_n).to(tl.int64)
            t0 = bos + i_t * BT
            p = tl.make_block_ptr(x, (T, D), (D, 1), (t0, 0), (BT, BD), (1, 0))
            q = tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (tl.cast(BT, tl.int64), BD), (1, 0))
        """, [6, 7]),
    ("AO203", """
        @triton.jit(do_not_specialize=["T"])
        def k(x, T, DH_CS: tl.constexpr, BT: tl.constexpr):
            i_b = tl.program_id(0)
            NT = tl.cdiv(T, BT)
            bos = (i_b * T).to(tl.int64)
            last = tl.cast((NT - 1) * DH_CS, tl.int64)
        """, [5, 6]),
    ("AO204", """
        @triton.jit
        def k(o, cu_seqlens, HV: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
            i_n, i_hv = tl.program_id(0), tl.program_id(1)
            bos = tl.load(cu_seqlens + i_n).to(tl.int32)
            eos = tl.load(cu_seqlens + i_n + 1)
            p = o + (bos * HV + i_hv) * V
            q = o + (eos + tl.arange(0, BT)) * V
        """, [4, 5]),
    ("AO204", """
        @triton.jit
        def k(o, cu_seqlens, T, HV: tl.constexpr, V: tl.constexpr, IS_VARLEN: tl.constexpr):
            i_n, i_hv = tl.program_id(0), tl.program_id(1)
            if IS_VARLEN:
                bos = tl.load(cu_seqlens + i_n).to(tl.int32)
            else:
                bos = tl.cast(i_n, tl.int64) * T
            p = o + (bos * HV + i_hv) * V
        """, [5]),
    ("AO301", """
        @triton.jit
        def k(x, h0, T, W: tl.constexpr, BT: tl.constexpr, USE_INITIAL_STATE: tl.constexpr):
            i_t = tl.program_id(0)
            if USE_INITIAL_STATE or i_t * BT < W:
                b = tl.load(h0)
        """, [4]),
    ("AO302", """
        @triton.jit
        def k(x, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
            i_t = tl.program_id(0)
            o_t = i_t * BT + tl.arange(0, BT)
            is_tail = i_t * BT + BT > T
            if is_tail:
                b = tl.load(x + o_t[:, None] * D + tl.arange(0, BD)[None, :], mask=(o_t < T)[:, None], other=0.0)
            else:
                p = tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))
                b = tl.load(p, boundary_check=(0, 1))
            c = tl.load(tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))) if i_t > 0 \\
                else tl.load(x + o_t[:, None] * D, mask=(o_t < T)[:, None])
        """, [6, 11]),
    ("AO303", """
        @triton.jit(do_not_specialize=["num_tasks"])
        def k(q, o, num_tasks, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
            core = tl.program_id(0)
            q_ptr = q + core * BT * D
            p_o = tl.make_block_ptr(o, (num_tasks * BT, D), (D, 1), (0, 0), (BT, BD), (1, 0))
            for task in tl.range(core, num_tasks, tl.num_programs(0)):
                b = tl.load(q_ptr + tl.arange(0, BT))
                tl.store(p_o, b)
                q_ptr += BT * D
                p_o = tl.advance(p_o, (BT, 0))
        """, [9, 10]),
    ("AO304", """
        @triton.jit
        def k(g, gt, T, HV: tl.constexpr, BT: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            bos = tl.cast(i_b, tl.int64) * T
            NT = tl.cdiv(T, BT)
            for i_t in range(NT):
                o_t = i_t * BT + tl.arange(0, BT)
                b_g = tl.load(g + (bos + o_t) * HV + i_h, mask=o_t < T)
                p_g = tl.make_block_ptr(g + bos * HV + i_h, (T,), (HV,), (i_t * BT,), (BT,), (0,))
                b_g2 = tl.load(p_g, boundary_check=(0,))
        """, [8, 9]),
    ("AO304", """
        @triton.jit
        def k(g, T, HV: tl.constexpr, BT: tl.constexpr, USE_G: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            for i_t in range(tl.cdiv(T, BT)):
                if USE_G:
                    p_g = tl.make_block_ptr(g + i_b * T * HV + i_h, (T,), (HV,), (i_t * BT,), (BT,), (0,))
        """, [6]),
    ("AO302", """
        @triton.jit
        def k(x, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, HAS_X: tl.constexpr):
            i_t = tl.program_id(0)
            o_t = i_t * BT + tl.arange(0, BT)
            if HAS_X:
                if i_t * BT + BT > T:
                    b = tl.load(x + o_t[:, None] * D, mask=(o_t < T)[:, None])
                else:
                    b = tl.load(tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0)))
        """, [6]),
    ("AO205", """
        @triton.jit(do_not_specialize=["T"])
        def k(q, T, H: tl.constexpr, K: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            bos = i_b * T
            tl.store(q + (bos * H + i_h) * K, 0.0)
            tl.store(q + i_b * T * H * K, 0.0)
        """, [4, 6]),
    ("AO401", """
        @triton.jit
        def k(q, h, kk, w, o, BT: tl.constexpr, BK: tl.constexpr):
            b_q = tl.load(q + tl.arange(0, BT))
            b_h = tl.load(h + tl.arange(0, BK))
            b_k = tl.load(kk + tl.arange(0, BT))
            b_w = tl.load(w + tl.arange(0, BT))
            b_o = tl.dot(b_q, b_h)
            b_s = tl.dot(b_q, b_k)
            b_u = tl.dot(b_w, b_h)
            b_v = tl.dot(b_k, b_q)
            b_c = b_w + 0.0
            tl.store(o, b_k)
        """, [8, 10, 11, 12]),
    ("AO401", """
        @triton.jit
        def k(q, h, o, NT, BT: tl.constexpr):
            b_q = tl.load(q + tl.arange(0, BT))
            b_o = tl.zeros([BT, BT], dtype=tl.float32)
            for i_t in range(NT):
                b_h = tl.load(h + i_t * BT + tl.arange(0, BT))
                b_o += tl.dot(b_q, b_h)
            tl.store(o, b_o)
        """, [7]),
]

NEGATIVE = [
    ("AO101", """
        import os
        CONFIGS = [triton.Config({"BT": 64}), triton.Config({"BT": 128})]

        def launch(x, **kwargs):
            # Ascend has no warps: never pass num_warps here.
            kwargs.pop("num_warps", None)
            k[(1,)](x, BT=64)
            return "num_warps"
        """),
    ("AO102", """
        from helpers import fancy_exp

        @triton.jit
        def _mm_kernel(a, b, c, BT: tl.constexpr):
            tl.store(c, tl.dot(tl.load(a), tl.load(b)))

        @triton.jit
        def _vec_kernel(x, n, BD: tl.constexpr):
            tl.store(x, tl.load(x) * 2)

        @triton.jit
        def _opaque_kernel(x, BD: tl.constexpr):
            tl.store(x, fancy_exp(tl.load(x)))

        def run(a, b, c, x, n):
            launch(_mm_kernel, (grid_size("cube", n),), a, b, c, BT=64)
            launch(_vec_kernel, (grid_size("vector", n),), x, n, BD=64)
            _vec_kernel[(props["num_vectorcore"],)](x, n, BD=64)
            launch(_opaque_kernel, (grid_size("cube", n),), x, BD=64)
        """),
    ("AO103", """
        @triton.jit(do_not_specialize=["num_tasks", 2])
        def k(x, num_tasks, num_cores, BD: tl.constexpr):
            for task in tl.range(tl.program_id(0), num_tasks, num_cores):
                tl.store(x + task * BD + tl.arange(0, BD), 0.0)

        @triton.jit(do_not_specialize=["num_tasks"])
        def k2(x, num_tasks, BD: tl.constexpr):
            for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
                tl.store(x + task * BD + tl.arange(0, BD), 0.0)
        """),
    ("AO205", """
        @triton.jit(do_not_specialize=["T"])
        def k(q, g, T, H: tl.constexpr, K: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            bos = tl.cast(i_b, tl.int64) * T
            tl.store(q + (bos * H + i_h) * K, 0.0)
            tl.store(g + i_b * T * H, 0.0)  # tokens x heads: a gate-sized offset, far from 2^31
        """),
    ("AO201", """
        @triton.jit(do_not_specialize=["T"])
        def k(x, cu_seqlens, T, B: tl.constexpr, BT: tl.constexpr):
            i_b = tl.program_id(0)
            n = tl.cast(B, tl.int64) * T
            m = i_b.to(tl.int64)
            t = T.to(tl.int64)
            local = B * 2
            l64 = local.to(tl.int64)
            bos = tl.load(cu_seqlens + i_b).to(tl.int64)
            w: tl.constexpr = 4
        """),
    ("AO202", """
        @triton.jit
        def k(x, cu_seqlens, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
            i_t, i_n = tl.program_id(0), tl.program_id(1)
            bos = tl.load(cu_seqlens + i_n).to(tl.int64)
            eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
            T_cur = (eos - bos).to(tl.int32)
            p = tl.make_block_ptr(x + bos * D, (T_cur, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))
        """),
    ("AO203", """
        @triton.jit(do_not_specialize=["T"])
        def k(x, T, H: tl.constexpr, D: tl.constexpr, DH_CS: tl.constexpr, BT: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            NT = tl.cdiv(T, BT)
            bos = tl.cast(i_b, tl.int64) * T
            last = tl.cast(NT - 1, tl.int64) * DH_CS
            head = (tl.cast(i_b, tl.int64) * H + i_h) * D
            o_t = tl.arange(0, BT)
            rel = (o_t * D).to(tl.int64)
            fixed = tl.cast(H * D, tl.int64)
            row = (i_b * BT).to(tl.int64) * D
        """),
    ("AO204", """
        @triton.jit
        def k(o, cu_seqlens, HV: tl.constexpr, V: tl.constexpr):
            i_n, i_hv = tl.program_id(0), tl.program_id(1)
            bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
            T = (eos - bos).to(tl.int32)
            p = o + (bos * HV + i_hv) * V
            s32 = tl.load(cu_seqlens + i_n).to(tl.int32)
            q = o + (tl.cast(s32, tl.int64) * HV + i_hv) * V
            n = (eos - bos) * V
            w = tl.load(cu_seqlens + i_n)
            w = w.to(tl.int64)
            r = o + (w * HV + i_hv) * V
        """),
    ("AO301", """
        @triton.jit
        def k(x, h0, W: tl.constexpr, BT: tl.constexpr, USE_INITIAL_STATE: tl.constexpr, HAS_BIAS: tl.constexpr):
            i_t = tl.program_id(0)
            if not USE_INITIAL_STATE:
                b = 0.0
            elif i_t * BT < W:
                b = tl.load(h0)
            if USE_INITIAL_STATE or HAS_BIAS:
                b = 1.0
            if HAS_BIAS and i_t == 0:
                b = 2.0
        """),
    ("AO302", """
        @triton.jit
        def k(x, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, TAIL_MODE: tl.constexpr):
            i_t = tl.program_id(0)
            o_t = i_t * BT + tl.arange(0, BT)
            p = tl.make_block_ptr(x, (T, D), (D, 1), (i_t * BT, 0), (BT, BD), (1, 0))
            if TAIL_MODE == 0:
                b = tl.load(p, boundary_check=(0, 1))
            elif TAIL_MODE == 1:
                b = tl.load(x + o_t[:, None] * D, mask=(o_t < T)[:, None])
            else:
                if i_t * BT + BT > T:
                    b = tl.load(x + o_t[:, None] * D, mask=(o_t < T)[:, None])
                else:
                    b = tl.load(p, boundary_check=(0, 1))
            if i_t > 0:
                c = tl.load(x + o_t, mask=o_t < T)
            else:
                c = tl.load(x + o_t + 1, mask=o_t < T - 1)
        """),
    ("AO303", """
        @triton.jit(do_not_specialize=["num_tasks"])
        def k(q, o, num_tasks, NT, D: tl.constexpr, BT: tl.constexpr):
            core = tl.program_id(0)
            acc = tl.zeros([BT], dtype=tl.float32)
            for task in tl.range(core, num_tasks, tl.num_programs(0)):
                q_ptr = q + task * BT * D
                for i_t in range(NT):
                    acc += tl.load(q_ptr + tl.arange(0, BT))
                    q_ptr += D
            p = o
            for i in range(NT):
                tl.store(p + tl.arange(0, BT), acc)
                p += BT
        """),
    ("AO304", """
        @triton.jit
        def k(g, gk, T, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
              G_T_CONTIG: tl.constexpr):
            i_b, i_h = tl.program_id(0), tl.program_id(1)
            NT = tl.cdiv(T, BT)
            b_g0 = tl.load(g + (i_b * T + tl.arange(0, BT)) * HV + i_h)
            for i_t in range(NT):
                o_t = i_t * BT + tl.arange(0, BT)
                if G_T_CONTIG:
                    b_g = tl.load(g + (i_b * HV + i_h) * T + o_t, mask=o_t < T)
                else:
                    b_g = tl.load(g + (i_b * T + o_t) * HV + i_h, mask=o_t < T)
                b_gk = tl.load(gk + (i_b * T + o_t[:, None]) * H * K + i_h * K + tl.arange(0, K)[None, :])
        """),
    ("AO401", """
        @triton.jit
        def k(a, b, c, o, NT, BT: tl.constexpr):
            b_a = tl.load(a + tl.arange(0, BT))
            b_a_copy = b_a + 0.0
            b_x = tl.dot(b_a, tl.load(b + tl.arange(0, BT)))
            b_y = tl.dot(b_a_copy, tl.load(c + tl.arange(0, BT)))
            b_a = tl.load(a + tl.arange(0, BT))
            b_z = tl.dot(b_a, b_y)
            for i_t in range(NT):
                b_k = tl.load(a + i_t * BT + tl.arange(0, BT))
                b_x += tl.dot(b_k, b_y)
            if NT > 1:
                b_w = tl.dot(b_x, b_y)
            else:
                b_w = b_x + 1.0
            tl.store(o, (b_w + b_z).to(b_a.dtype))
        """),
]


@pytest.mark.parametrize("rule,source,expected", POSITIVE, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(POSITIVE)])
def test_rule_finds_positive(rule, source, expected):
    assert lines_of(source, rule) == expected


@pytest.mark.parametrize("rule,source", NEGATIVE, ids=[r for r, _ in NEGATIVE])
def test_rule_accepts_negative(rule, source):
    assert findings(source, rule) == []


def test_every_rule_has_positive_and_negative_examples():
    checked = {r for r, _, _ in POSITIVE} & {r for r, _ in NEGATIVE}
    assert checked == {rid for rid, r in RULES.items() if r.check is not None}


def test_every_rule_is_documented():
    for rid, r in RULES.items():
        assert r.summary and r.why and r.fix and r.seed, rid
        assert r.limits or r.check is None, rid  # every check says what it does not detect
        text = r.explain()
        assert text.startswith(f"{rid} {r.name}:") and r.seed[0] in text and r.limits in text


def test_messages_name_the_offending_code():
    (f,) = findings("""
        @triton.jit
        def k(x, B: tl.constexpr):
            n = B.to(tl.int64)
        """, "AO201")
    assert "tl.cast(B, tl.int64)" in f.message and f.col == 9


def test_noqa_specific_prefix_and_bare():
    src = """
        def launch(x):
            k[(1,)](x, num_warps=4)  # noqa: AO101
            k[(1,)](x, num_warps=4)  # noqa: AO1
            k[(1,)](x, num_warps=4)  # noqa
            k[(1,)](x, num_warps=4)  # noqa: E501
            k[(1,)](x, num_warps=4)  # noqa: AO203
        """
    assert lines_of(src, "AO101") == [5, 6]


def test_select_and_ignore():
    assert [r.id for r in active_rules("AO2", None) if r.check] == ["AO201", "AO202", "AO203", "AO204", "AO205"]
    assert "AO101" not in [r.id for r in active_rules(None, "AO101,AO4")]
    assert "AO401" not in [r.id for r in active_rules(None, "AO101,AO4")]
    with pytest.raises(UsageError, match="AO999"):
        active_rules("AO999", None)
    with pytest.raises(UsageError, match="unknown lint rule"):
        get_rule("XX1")


def test_syntax_error_is_a_finding_not_a_crash(tmp_path):
    (tmp_path / "bad.py").write_text("def k(:\n    pass\n")
    (tmp_path / "good.py").write_text(HEADER + "def launch(x):\n    k[(1,)](x, num_warps=4)\n")
    (tmp_path / "binary.py").write_bytes(b"\xff\xfe\x00bad")
    report = lint_paths([tmp_path])
    assert report.files_checked == 1
    assert [(f.rule, f.path.rsplit("/", 1)[-1], f.line) for f in report.errors] == [
        ("AO001", "bad.py", 1), ("AO002", "binary.py", 1)]
    assert [f.rule for f in report.findings] == ["AO101"]
    assert report.exit_code == 2


def test_folder_walk_skips_hidden_and_caches(tmp_path):
    for rel in ["a.py", "sub/b.py", ".hidden/c.py", "__pycache__/d.py", "notes.txt"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("k[(1,)](x, num_stages=2)\n")
    report = lint_paths([tmp_path, tmp_path / "a.py"])  # a.py named twice is linted once
    assert sorted(f.path.replace(str(tmp_path), "") for f in report.findings) == ["/a.py", "/sub/b.py"]


# ---- the command -------------------------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    (tmp_path / "clean.py").write_text(HEADER + "CONFIGS = [triton.Config({'BT': 64})]\n")
    (tmp_path / "dirty.py").write_text(HEADER + "def launch(x):\n    k[(1,)](x, num_warps=4)\n")
    return tmp_path


def test_cli_text_format_and_exit_1(cli, tree):
    code, out, err = cli("lint", str(tree))
    assert code == 1
    assert out == (f"{tree / 'dirty.py'}:5:16: AO101 `num_warps=` passed to `k[grid]`: "
                   "unsupported on Ascend, delete it\n")
    assert "2 file(s) checked, 1 finding(s) in 1 file(s)" in err


def test_cli_clean_exit_0(cli, tree):
    code, out, _ = cli("lint", str(tree / "clean.py"))
    assert code == 0 and out == ""


def test_cli_json_and_github(cli, tree):
    code, out, _ = cli("lint", str(tree), "--format", "json")
    data = json.loads(out)  # --format json: the lint report itself (a lint output format, not the envelope)
    assert code == 1 and data["files_checked"] == 2 and data["errors"] == []
    assert data["findings"][0] | {"path": ""} == {"rule": "AO101", "name": "no-num-warps-stages", "path": "",
                                                  "line": 5, "col": 16, "message": data["findings"][0]["message"]}
    code, out, _ = cli("lint", str(tree / "dirty.py"), "--format", "github")
    assert out.startswith(f"::error file={tree / 'dirty.py'},line=5,col=16::AO101 `num_warps=`")
    code, out, _ = cli("lint", str(tree), "--json", "--ignore", "AO101")
    assert code == 0 and json_payload(out)["findings"] == []


def test_cli_github_escapes_workflow_command_characters(cli, tmp_path):
    weird = tmp_path / "a,b.py"
    weird.write_text("k[(1,)](x, num_warps=4)\n")
    _, out, _ = cli("lint", str(weird), "--format", "github")
    assert "file=" + str(weird).replace(",", "%2C") + ",line=1" in out


def test_cli_bad_input_exit_2(cli, tree):
    code, out, err = cli("lint", str(tree / "missing.py"))
    assert code == 2 and "missing.py: no such file or directory" in err
    code, _, err = cli("lint", str(tree), "--format", "xml")
    assert code == 2 and "--format xml" in err
    code, _, err = cli("lint", str(tree), "--select", "AO9")
    assert code == 2 and "--select AO9" in err
    code, _, err = cli("lint")
    assert code == 2 and "at least one file" in err
    (tree / "broken.py").write_text("def (\n")
    code, out, _ = cli("lint", str(tree))
    assert code == 2 and "broken.py:1:5: AO001 does not parse" in out


def test_cli_explain_and_list(cli):
    code, out, _ = cli("lint", "--explain", "ao401")
    assert code == 0 and out.startswith("AO401 dot-lhs-reuse:") and "Why:" in out and "Fix:" in out
    assert "Ascend tl.dot clobbers the left operand" in out
    code, out, _ = cli("lint", "--explain", "AO401", "--json")
    assert json_payload(out)["id"] == "AO401"
    code, out, _ = cli("lint", "--list-rules")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == sorted(RULES)
    code, _, err = cli("lint", "--explain", "AO999")
    assert code == 2 and "unknown lint rule" in err


def test_cli_explain_all_says_what_each_rule_does_not_see(cli):
    from _cli_json import json_payload

    code, out, _ = cli("lint", "--explain", "all")
    checks = sorted(rid for rid, r in RULES.items() if r.check is not None)
    assert code == 0 and [line.split()[0] for line in out.splitlines() if line[:2] == "AO"] == checks
    assert out.count("Does not see (known blind spots):") == len(checks)
    code, out, _ = cli("lint", "--explain", "ALL", "--json")
    docs = json_payload(out)
    assert code == 0 and [d["id"] for d in docs] == checks and all(d["limits"] for d in docs)
