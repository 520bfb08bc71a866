"""Stages 1 + 2 fused: Ai = (I + strict_lower(beta_i k_i.k_j exp(gc_i - gc_j)))^-1 without storing A.

The separate stages write A in fp32 (as large as k at K = 64) and read it back; here the ten lower
16x16 blocks of A stay in UB/registers: the four diagonal ones come from one batched dot over a
[4, 16, BK] key tile (they feed the batched forward substitution of ``solve.invert_diagonals``), the
six off-diagonal ones from 16-row key slabs. Then ``solve.merge_and_store`` as in the solve stage.
One task = one (chunk, value head) on a 1D core grid over the cube cores.

tl.dot left operands are fresh beta-scaled copies made for that one dot; the key tiles themselves
are only ever right operands (seed, tl.dot lhs clobber).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascendopt.kernels._lib.common import on_cuda
from ascendopt.kernels.gdn import reference as ref
from ascendopt.kernels.gdn.indexing import chunk_task, load_token_scalars, load_token_scalars_at
from ascendopt.kernels.gdn.kkt import _make_inputs
from ascendopt.kernels.gdn.layout import CHUNK, dot_dtype
from ascendopt.kernels.gdn.solve import BC, invert_diagonals, merge_and_store
from ascendopt.kernels.gdn.workload import (
    G_T_CONTIG,
    UBStage,
    chunk_stage_args,
    dims_of,
    element_bytes,
    pick_tile,
    stage_spec,
    tile_tunable,
    value_heads,
)
from ascendopt.kernels.spec import Cost, Tunable


@triton.jit
def _key_rows(k_seq, t0, T_seq, i: tl.constexpr, i_k, H: tl.constexpr, K: tl.constexpr, BC: tl.constexpr,
              BK: tl.constexpr):
    """Rows [t0 + i*BC, t0 + (i+1)*BC) x key slab i_k, zero past the sequence."""
    p = tl.make_block_ptr(k_seq, (T_seq, K), (H * K, 1), (t0 + i * BC, i_k * BK), (BC, BK), (1, 0))
    return tl.load(p, boundary_check=(0, 1), padding_option="zero")


@triton.jit
def _scaled(b_k, b_beta, DOT_DTYPE: tl.constexpr):
    """A fresh left operand: beta-scaled rows of a key slab."""
    return (b_k.to(tl.float32) * b_beta[:, None]).to(DOT_DTYPE)


@triton.jit
def _gated(b_A, g_i, g_j, row_ok):
    """Off-diagonal block times exp(g_i - g_j); rows past the sequence masked before the exp (their
    gc reads 0, so g_i - g_j > 0 there and could overflow)."""
    return tl.where(row_ok[:, None], b_A * tl.exp(tl.where(row_ok[:, None], g_i[:, None] - g_j[None, :], 0.0)),
                    0.0)


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_kkt_solve_kernel(k, beta, gc, Ai, cu_seqlens, chunk_indices, T_total, num_tasks,
                          H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
                          BC: tl.constexpr, BK: tl.constexpr, G_T_CONTIG: tl.constexpr, DOT_DTYPE: tl.constexpr):
    tl.static_assert(BT == 4 * BC, "the block solve is written for 4 diagonal blocks")
    ROWS: tl.constexpr = HV * BT
    b3 = tl.arange(0, 4)[:, None, None]
    r3 = tl.arange(0, BC)[None, :, None]
    c3 = tl.arange(0, BC)[None, None, :]
    o_c = tl.arange(0, BC)
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        _, i_hv, i_h, bos, T_seq, t0 = chunk_task(task, chunk_indices, cu_seqlens, H, HV, BT)
        k_seq = k + (bos * H + i_h) * K  # rebound per task
        rows3 = t0 + b3 * BC + r3  # [4, BC, 1] in-sequence token of each diagonal-block row
        tokens = t0 + tl.arange(0, 4)[:, None] * BC + o_c[None, :]  # [4, BC], row-major like the blocks
        beta_d = load_token_scalars_at(beta, i_hv, bos, tokens, T_seq, T_total, HV, G_T_CONTIG)
        g_d = load_token_scalars_at(gc, i_hv, bos, tokens, T_seq, T_total, HV, G_T_CONTIG)
        beta1 = load_token_scalars(beta, i_hv, bos, t0 + BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        beta2 = load_token_scalars(beta, i_hv, bos, t0 + 2 * BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        beta3 = load_token_scalars(beta, i_hv, bos, t0 + 3 * BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        D = tl.zeros([4, BC, BC], dtype=tl.float32)
        A10 = tl.zeros([BC, BC], dtype=tl.float32)
        A20 = tl.zeros([BC, BC], dtype=tl.float32)
        A21 = tl.zeros([BC, BC], dtype=tl.float32)
        A30 = tl.zeros([BC, BC], dtype=tl.float32)
        A31 = tl.zeros([BC, BC], dtype=tl.float32)
        A32 = tl.zeros([BC, BC], dtype=tl.float32)
        for i_k in range(K // BK):
            cols = i_k * BK + tl.arange(0, BK)[None, None, :]
            K3 = tl.load(k_seq + tl.cast(rows3, tl.int64) * (H * K) + cols, mask=rows3 < T_seq, other=0.0)
            K3_scaled = (K3.to(tl.float32) * beta_d[:, :, None]).to(DOT_DTYPE)
            D += tl.dot(K3_scaled, tl.permute(K3.to(DOT_DTYPE), (0, 2, 1)), input_precision="ieee")
            kt0 = tl.trans(_key_rows(k_seq, t0, T_seq, 0, i_k, H, K, BC, BK).to(DOT_DTYPE))
            kt1 = tl.trans(_key_rows(k_seq, t0, T_seq, 1, i_k, H, K, BC, BK).to(DOT_DTYPE))
            kt2 = tl.trans(_key_rows(k_seq, t0, T_seq, 2, i_k, H, K, BC, BK).to(DOT_DTYPE))
            k1 = _key_rows(k_seq, t0, T_seq, 1, i_k, H, K, BC, BK)
            k2 = _key_rows(k_seq, t0, T_seq, 2, i_k, H, K, BC, BK)
            k3 = _key_rows(k_seq, t0, T_seq, 3, i_k, H, K, BC, BK)
            A10 += tl.dot(_scaled(k1, beta1, DOT_DTYPE), kt0, input_precision="ieee")
            A20 += tl.dot(_scaled(k2, beta2, DOT_DTYPE), kt0, input_precision="ieee")
            A21 += tl.dot(_scaled(k2, beta2, DOT_DTYPE), kt1, input_precision="ieee")
            A30 += tl.dot(_scaled(k3, beta3, DOT_DTYPE), kt0, input_precision="ieee")
            A31 += tl.dot(_scaled(k3, beta3, DOT_DTYPE), kt1, input_precision="ieee")
            A32 += tl.dot(_scaled(k3, beta3, DOT_DTYPE), kt2, input_precision="ieee")
        # diagonal blocks: strictly lower, gated; rows past the sequence are zero already (k = 0 there)
        strict = (r3 > c3) & (rows3 < T_seq)
        N = tl.where(strict, D * tl.exp(tl.where(strict, g_d[:, :, None] - g_d[:, None, :], 0.0)), 0.0)
        g0 = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BC, G_T_CONTIG)
        g1 = load_token_scalars(gc, i_hv, bos, t0 + BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        g2 = load_token_scalars(gc, i_hv, bos, t0 + 2 * BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        g3 = load_token_scalars(gc, i_hv, bos, t0 + 3 * BC, T_seq, T_total, HV, BC, G_T_CONTIG)
        ok1, ok2, ok3 = t0 + BC + o_c < T_seq, t0 + 2 * BC + o_c < T_seq, t0 + 3 * BC + o_c < T_seq
        X = invert_diagonals(N, BC)
        merge_and_store(Ai + (bos * HV + i_hv) * BT, X, _gated(A10, g1, g0, ok1), _gated(A20, g2, g0, ok2),
                        _gated(A21, g2, g1, ok2), _gated(A30, g3, g0, ok3), _gated(A31, g3, g1, ok3),
                        _gated(A32, g3, g2, ok3), t0, T_seq, ROWS, BT, BC)


@triton.jit
def _fresh(x, DTYPE: tl.constexpr):
    """A dot operand made for that one dot (a left operand is never read after its dot)."""
    return (x + 0.0).to(DTYPE)


@triton.jit
def dense_inverse(k_seq, b_beta, b_g, t0, T_seq, H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
                  BC: tl.constexpr, BK: tl.constexpr, DOT_DTYPE: tl.constexpr, SOLVE_DTYPE: tl.constexpr,
                  SOLVE_PRECISION: tl.constexpr):
    """(I + A)^-1 [BT, BT] fp32 of one chunk, A = strict_lower(beta_i k_i.k_j exp(g_i - g_j)).

    A comes from one [BT, BT] dot per key slab; then (I + A)^-1 = (I - M)(I + M^2) Xd with
    Xd = blockdiag((I + A_bb)^-1) from the batched substitution and M = Xd L, L the blocks of A below
    the diagonal blocks (M is block-strictly-lower over 4 blocks, so M^4 = 0): four [BT, BT] dots
    on the tensor/cube unit instead of sixteen 16x16 products as vector work."""
    NB: tl.constexpr = BT // BC
    tl.static_assert(NB == 4 or NB == 8, "the product form covers 4 or 8 diagonal blocks")
    o_t = tl.arange(0, BT)
    strict = o_t[:, None] > o_t[None, :]
    below_blocks = (o_t[:, None] // BC) > (o_t[None, :] // BC)
    eye = (o_t[:, None] == o_t[None, :]).to(tl.float32)
    same4 = tl.arange(0, NB)[:, None, None, None] == tl.arange(0, NB)[None, None, :, None]  # [NB, 1, NB, 1]
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(K // BK):
        p_k = tl.make_block_ptr(k_seq, (T_seq, K), (H * K, 1), (t0, i_k * BK), (BT, BK), (1, 0))
        b_k = tl.load(p_k, boundary_check=(0, 1), padding_option="zero")
        # the beta-scaled lhs is a fresh copy used once; b_k is only the rhs
        b_A += tl.dot((b_k.to(tl.float32) * b_beta[:, None]).to(DOT_DTYPE), tl.trans(b_k.to(DOT_DTYPE)),
                      input_precision="ieee")
    # strictly lower, gated; masked before the exp (above the diagonal gc_i - gc_j > 0 could
    # overflow) and on rows past the sequence (their gc reads 0)
    keep = strict & (t0 + o_t < T_seq)[:, None]
    b_A = tl.where(keep, b_A * tl.exp(tl.where(keep, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
    # diagonal blocks [NB, BC, BC] -> their inverses by forward substitution (fp32, exact)
    X = invert_diagonals(tl.sum(tl.where(same4, tl.reshape(b_A, (NB, BC, NB, BC)), 0.0), 2), BC)
    Xd = tl.reshape(tl.where(same4, X[:, :, None, :], 0.0), (BT, BT))
    L = tl.where(below_blocks, b_A, 0.0)
    M = tl.dot(_fresh(Xd, SOLVE_DTYPE), L.to(SOLVE_DTYPE), input_precision=SOLVE_PRECISION)
    M2 = tl.dot(_fresh(M, SOLVE_DTYPE), M.to(SOLVE_DTYPE), input_precision=SOLVE_PRECISION)
    # P = (I - M)(I + M^2); its diagonal blocks are exactly I, so rounding P for the dot only
    # touches the off-diagonal terms
    P = tl.dot(_fresh(-M, SOLVE_DTYPE), M2.to(SOLVE_DTYPE), eye - M + M2, input_precision=SOLVE_PRECISION)
    if NB == 8:
        # 8-row diagonal blocks (FORM 3: 6 substitution steps instead of 14): M^8 = 0, so one more
        # factor, (I - M)(I + M^2)(I + M^4)
        M4 = tl.dot(_fresh(M2, SOLVE_DTYPE), M2.to(SOLVE_DTYPE), input_precision=SOLVE_PRECISION)
        P = tl.dot(_fresh(P, SOLVE_DTYPE), M4.to(SOLVE_DTYPE), P, input_precision=SOLVE_PRECISION)
    return tl.dot(P.to(SOLVE_DTYPE), Xd.to(SOLVE_DTYPE), input_precision=SOLVE_PRECISION)


@triton.jit(do_not_specialize=["T_total", "num_tasks"])
def _gdn_kkt_solve_dense_kernel(k, beta, gc, Ai, cu_seqlens, chunk_indices, T_total, num_tasks,
                                H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
                                BC: tl.constexpr, BK: tl.constexpr, G_T_CONTIG: tl.constexpr,
                                DOT_DTYPE: tl.constexpr, SOLVE_DTYPE: tl.constexpr,
                                SOLVE_PRECISION: tl.constexpr):
    """FORM 1/2: ``dense_inverse`` per (chunk, value head), stored in Ai's dtype."""
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        _, i_hv, i_h, bos, T_seq, t0 = chunk_task(task, chunk_indices, cu_seqlens, H, HV, BT)
        b_beta = load_token_scalars(beta, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        b_g = load_token_scalars(gc, i_hv, bos, t0, T_seq, T_total, HV, BT, G_T_CONTIG)
        k_seq = k + (bos * H + i_h) * K  # rebound per task
        b_Ai = dense_inverse(k_seq, b_beta, b_g, t0, T_seq, H, K, BT, BC, BK, DOT_DTYPE, SOLVE_DTYPE,
                             SOLVE_PRECISION)
        p_Ai = tl.make_block_ptr(Ai + (bos * HV + i_hv) * BT, (T_seq, BT), (HV * BT, 1), (t0, 0), (BT, BT), (1, 0))
        tl.store(p_Ai, b_Ai.to(p_Ai.dtype.element_ty), boundary_check=(0, 1))


def _ub_stages(BK: int, form: int = 0) -> list[UBStage]:
    if form == 0:
        # 6.0 live [BT, BK] fp32 copies: the kkt stage's 5.0 (the [4, BC, BK] key tile, its beta-scaled
        # copy, the 16-row slabs and their transposes) plus one for the solve's blocks and temporaries
        # (10 A blocks, the [4, BC, BC] substitution tile, [BC, BC, BC] products: ~13 KiB).
        return [UBStage("kkt_solve", {"BT": CHUNK, "BK": BK}, "fp32", 6.0)]  # the default margin, as kkt
    # dense form: the key slab, its beta-scaled copy and the transposed rhs (3.0 [BT, BK] copies),
    # then six [BT, BT] fp32 tiles at the solve's peak (A, Xd, L, M, M^2, the product), which do
    # not depend on BK: 96 KiB at BT = 64, a stage of its own
    return [UBStage("kkt_solve.kkt", {"BT": CHUNK, "BK": BK}, "fp32", 3.0),
            UBStage("kkt_solve.dense", {"BT": CHUNK, "BT2": CHUNK}, "fp32", 6.0)]


# On CUDA registers bound the dense form, not the key slab's size: AOT-compiled for sm_90 (K = 128,
# with the JIT's pointer alignment) FORM 1 needs 172 / 188 / 182 registers per thread at BK = 32 /
# 64 / 128 (two programs per SM each; 50 / 29 / 22 barriers: the whole K in one slab is shortest),
# FORM 2 172 / 158 / 185 (BK = 64: three programs per SM). An unrequested BK follows this table.
DENSE_CUDA_BK = {1: 128, 2: 64, 3: 128}


def _tiles(K: int, config: dict) -> int:
    form = int(config.get("FORM", 0))
    if form and not config["BK"] and on_cuda():
        return min(K, DENSE_CUDA_BK[form])
    return pick_tile(config["BK"], _ub_stages(1, form)[0], "BK", K)


def gdn_kkt_solve(k, beta, gc, *, cu_seqlens=None, config=None, packing=None):
    """Ai [B,T,HV,64] in k's dtype = (I + A)^-1 per chunk, A the gated, beta-scaled k k' (never stored).

    k [B,T,H,K]; beta, gc [B,T,HV] (or ``HeadMajor``).
    """
    from ascendopt.kernels._lib.common import alloc, grid_size, launch

    cfg = SPEC.config(config)
    B, T, H, K = k.shape
    HV = value_heads(beta)
    packing, beta_arg, gc_arg, contig = chunk_stage_args(k, beta, gc, cu_seqlens, packing, cfg)
    BK = _tiles(K, cfg)
    Ai = alloc((B, T, HV, CHUNK), k.dtype, k.device)
    tasks = packing.NC * HV
    args = (k, beta_arg, gc_arg, Ai, packing.cu_seqlens, packing.chunk_indices, packing.T_total, tasks)
    consts = {"H": H, "HV": HV, "K": K, "BT": CHUNK, "BK": BK, "G_T_CONTIG": contig, "DOT_DTYPE": dot_dtype(k.dtype)}
    if cfg["FORM"] == 0:
        launch(_gdn_kkt_solve_kernel, (grid_size("cube", tasks),), *args, **consts, BC=BC)
    else:
        launch(_gdn_kkt_solve_dense_kernel, (grid_size("cube", tasks),), *args, **consts,
               **solve_products(int(cfg["FORM"]), k.dtype))
    return Ai


def solve_products(form: int, dtype) -> dict:
    """Operand type and precision of the dense form's four solve dots.

    FORM 1: fp32 operands; "ieee" (exact fp32) except on CUDA for bf16/fp16 inputs, where tf32
    (10-bit mantissa) is used: Ai is stored in the input dtype (bf16: 8 bits), so tf32 products add
    less than that final rounding, and fp32 FMA dots of 64x64x64 would cost 16x the block form's work.
    FORM 3: as FORM 1 over 8-row diagonal blocks. FORM 2: operands in the input dtype (bf16 tensor/cube
    core rate): each product rounds M, M^2 and P to bf16 first. That passes the gate at the CPU tests'
    tiny shapes but not at B4_T4096_H16_K128_V128 on the H200 (forward o relative RMS 0.0176 against the
    gate's 2 x torch-bf16 = 0.0076, benchmarks/RESULTS.md, gated delta rule), so it is never the default; the
    loop's gate rejects it where it is too coarse. fp32 inputs keep exact fp32 products in both.
    """
    import triton.language as tl

    from ascendopt.kernels._lib.common import interpreting

    low = dot_dtype(dtype) != tl.float32
    if form == 2:
        return {"SOLVE_DTYPE": dot_dtype(dtype), "SOLVE_PRECISION": "ieee", "BC": BC}
    cuda = not interpreting() and on_cuda()
    # FORM 3: FORM 1's products over 8-row diagonal blocks (shorter serial substitution, two more dots)
    return {"SOLVE_DTYPE": tl.float32, "SOLVE_PRECISION": "tf32" if (low and cuda) else "ieee",
            "BC": BC // 2 if form == 3 else BC}


def _run(inputs, config, mode):
    return {"Ai": gdn_kkt_solve(inputs["k"], inputs["beta"], inputs["gc"], cu_seqlens=inputs.get("cu_seqlens"),
                                config=config)}


def gdn_kkt_solve_reference(inputs, mode):
    """Oracle of ``gdn_kkt_solve``: ``Ai`` [B,T,HV,64] fp32, the kkt and solve stages composed."""
    cu = inputs.get("cu_seqlens")
    A = ref.kkt_reference(inputs["k"], inputs["beta"], inputs["gc"], cu, ref.lowp_of(inputs["k"]))
    return {"Ai": ref.solve_tril_reference(A, cu)}


def _ub_model(dims, config, dtype):
    cfg = SPEC.config(config)
    return _ub_stages(_tiles(int(dims["K"]), cfg), int(cfg["FORM"]))


def _cost(dims, dtype, mode):
    d, e = dims_of(dims), element_bytes(dtype)
    tokens = d.B * d.T
    moved = tokens * d.H * d.K * e + tokens * d.HV * (e + 4) + tokens * d.HV * CHUNK * e
    flops = 2 * d.chunks * d.HV * (10 * BC * BC * d.K + 4 * BC ** 3 + 16 * BC ** 3)
    return Cost(bytes=moved, flops=flops)


SPEC = stage_spec(
    name="gdn_kkt_solve",
    description="gated delta rule fwd, stages kkt + solve fused: (I + A)^-1 without storing A",
    make_inputs=_make_inputs, run=_run, reference=gdn_kkt_solve_reference, ub_model=_ub_model, cost=_cost,
    kernel_names=("_gdn_kkt_solve_kernel", "_gdn_kkt_solve_dense_kernel"),
    tunables={"BK": tile_tunable("BK", "key slab per dot"), "G_T_CONTIG": G_T_CONTIG,
              "FORM": Tunable("FORM", 1, (0, 1, 2, 3), "0: 16x16 block products as vector work; 1: dense form, "
                              "four [64, 64] solve dots in fp32 (tf32 on CUDA for bf16 inputs); 2: dense form, "
                              "solve dots in the input dtype; 3: as 1 over 8-row diagonal blocks (six dots)")},
)
