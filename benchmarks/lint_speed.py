"""Speed of `ascendopt lint` on a generated 40-file Triton-Ascend tree (target: under 2 s end to end).

The tree is written to a temporary folder at run time from templates of realistic kernels (chunked
dot-product stages, a causal-conv style constexpr tail split, a 1D core-grid row kernel, a varlen
cumsum), each file with its launchers; every fourth file carries planted violations so that the run
also proves the rules fire (the finding count must equal the planted count).

    python benchmarks/lint_speed.py [--files 40] [--repeats 5] [--out results.json]

Prints a markdown table; exit 1 when the median end-to-end time is over the target or the finding
count is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 2.0

CHUNK_DOT = '''
@triton.jit(do_not_specialize=["T", "num_tasks"])
def _{name}_chunk_kernel(q, k, v, g, o, cu_seqlens, chunk_indices, T, num_tasks, scale,
                         H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                         BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr):
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_c, i_h = task // H, task % H
        if IS_VARLEN:
            i_n = tl.load(chunk_indices + i_c * 2).to(tl.int32)
            i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int32)
            bos = tl.load(cu_seqlens + i_n).to(tl.int64)
            eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
            T_seq = (eos - bos).to(tl.int32)
        else:
            NT = tl.cdiv(T, BT)
            i_b, i_t = i_c // NT, i_c % NT
            bos = tl.cast(i_b, tl.int64) * T
            T_seq = T
        q_base = q + (bos * H + i_h) * K
        k_base = k + (bos * H + i_h) * K
        v_base = v + (bos * H + i_h) * V
        o_base = o + (bos * H + i_h) * V
        g_base = g + tl.cast(i_h, tl.int64) * T + bos
        b_s = tl.zeros([BT, BT], dtype=tl.float32)
        b_o = tl.zeros([BT, BV], dtype=tl.float32)
        for i_k in range(tl.cdiv(K, BK)):
            p_q = tl.make_block_ptr(q_base, (T_seq, K), (H * K, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0))
            p_k = tl.make_block_ptr(k_base, (K, T_seq), (1, H * K), (i_k * BK, i_t * BT), (BK, BT), (0, 1))
            b_q = tl.load(p_q, boundary_check=(0, 1))
            b_k = tl.load(p_k, boundary_check=(0, 1))
            b_s += tl.dot(b_q, b_k)
        p_g = tl.make_block_ptr(g_base, (T_seq,), (1,), (i_t * BT,), (BT,), (0,))
        b_g = tl.load(p_g, boundary_check=(0,)).to(tl.float32)
        o_t = tl.arange(0, BT)
        m_s = o_t[:, None] >= o_t[None, :]
        b_s = tl.where(m_s, b_s * tl.exp(b_g[:, None] - b_g[None, :]), 0.0) * scale
        p_v = tl.make_block_ptr(v_base, (T_seq, V), (H * V, 1), (i_t * BT, 0), (BT, BV), (1, 0))
        b_v = tl.load(p_v, boundary_check=(0, 1))
        b_o += tl.dot(b_s.to(b_v.dtype), b_v)
        p_o = tl.make_block_ptr(o_base, (T_seq, V), (H * V, 1), (i_t * BT, 0), (BT, BV), (1, 0))
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))


def {name}_chunk(q, k, v, g, scale, cu_seqlens=None, chunk_indices=None, BT=64):
    """{name}: q, k [B, T, H, K], v [B, T, H, V], g [B, H, T] -> o [B, T, H, V]."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    o = alloc(v.shape, v.dtype, v.device)
    num_tasks = (B * triton.cdiv(T, BT) if cu_seqlens is None else len(chunk_indices)) * H
    grid = (grid_size("cube", num_tasks),)
    launch(_{name}_chunk_kernel, grid, q, k, v, g, o, cu_seqlens, chunk_indices, T, num_tasks, scale,
           H=H, K=K, V=V, BT=BT, BK=min(64, K), BV=V, IS_VARLEN=cu_seqlens is not None)
    return o
'''

CONV_TAIL = '''
@triton.jit(do_not_specialize=["T", "num_tasks"])
def _{name}_conv_kernel(x, w, y, T, num_tasks, D: tl.constexpr, W: tl.constexpr, BT: tl.constexpr,
                        BD: tl.constexpr, TAIL_MODE: tl.constexpr, HAS_BIAS: tl.constexpr, bias):
    NT = tl.cdiv(T, BT)
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        i_d, i_bt = task % tl.cdiv(D, BD), task // tl.cdiv(D, BD)
        i_b, i_t = i_bt // NT, i_bt % NT
        x_seq = x + tl.cast(i_b, tl.int64) * T * D
        y_seq = y + tl.cast(i_b, tl.int64) * T * D
        o_d = i_d * BD + tl.arange(0, BD)
        o_t = i_t * BT + tl.arange(0, BT)
        b_y = tl.zeros([BT, BD], dtype=tl.float32)
        for i_w in tl.static_range(W):
            b_w = tl.load(w + i_w * D + o_d, mask=o_d < D, other=0.0).to(tl.float32)
            if TAIL_MODE == 0:
                p_x = tl.make_block_ptr(x_seq, (T, D), (D, 1), (i_t * BT + i_w - W + 1, i_d * BD), (BT, BD), (1, 0))
                b_x = tl.load(p_x, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
            else:
                o_x = o_t + i_w - W + 1
                m_x = ((o_x >= 0) & (o_x < T))[:, None] & (o_d < D)[None, :]
                b_x = tl.load(x_seq + o_x[:, None] * D + o_d[None, :], mask=m_x, other=0.0).to(tl.float32)
            b_y += b_x * b_w[None, :]
        if HAS_BIAS:
            b_y += tl.load(bias + o_d, mask=o_d < D, other=0.0).to(tl.float32)[None, :]
        b_y = b_y * tl.sigmoid(b_y)
        m_y = (o_t < T)[:, None] & (o_d < D)[None, :]
        tl.store(y_seq + o_t[:, None] * D + o_d[None, :], b_y.to(y.dtype.element_ty), mask=m_y)


def {name}_conv(x, w, bias=None, BT=64, BD=128):
    """{name}: x [B, T, D], w [W, D] (host-transposed) -> silu(conv(x) + bias) [B, T, D]."""
    B, T, D = x.shape
    W = w.shape[0]
    y = alloc(x.shape, x.dtype, x.device)
    bulk = T // BT
    tasks = B * bulk * triton.cdiv(D, BD)
    if tasks:
        launch(_{name}_conv_kernel, (grid_size("vector", tasks),), x, w, y, T, tasks, D=D, W=W, BT=BT, BD=BD,
               TAIL_MODE=0, HAS_BIAS=bias is not None, bias=bias)
    return y
'''

ROWWISE = '''
@triton.jit(do_not_specialize=["n_rows"])
def _{name}_row_kernel(x, w, y, rstd, n_rows, eps, D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr):
    num_tasks = tl.cdiv(n_rows, BR)
    for task in tl.range(tl.program_id(0), num_tasks, tl.num_programs(0)):
        o_r = task * BR + tl.arange(0, BR)
        o_d = tl.arange(0, BD)
        m = (o_r < n_rows)[:, None] & (o_d < D)[None, :]
        rows = tl.cast(o_r, tl.int64)[:, None] * D
        b_x = tl.load(x + rows + o_d[None, :], mask=m, other=0.0).to(tl.float32)
        b_var = tl.sum(b_x * b_x, 1) / D
        b_rstd = 1.0 / tl.sqrt(b_var + eps)
        b_w = tl.load(w + o_d, mask=o_d < D, other=0.0).to(tl.float32)
        b_y = b_x * b_rstd[:, None] * b_w[None, :]
        tl.store(y + rows + o_d[None, :], b_y.to(y.dtype.element_ty), mask=m)
        tl.store(rstd + o_r, b_rstd, mask=o_r < n_rows)


def {name}_rows(x, w, eps=1e-6, mult=4):
    """{name}: RMS norm of x [N, D] with weight [D]; rows per tile from the UB model (mult live fp32 tiles)."""
    n_rows, D = x.shape
    BD = triton.next_power_of_2(D)
    BR = ub.solve({{"BD": BD}}, "BR", "fp32", mult, ub_bytes(), 0.85, upper=n_rows)
    y = alloc(x.shape, x.dtype, x.device)
    rstd = alloc((n_rows,), torch.float32, x.device)
    launch(_{name}_row_kernel, (grid_size("vector", triton.cdiv(n_rows, BR)),), x, w, y, rstd, n_rows, eps,
           D=D, BR=BR, BD=BD)
    return y, rstd
'''

CUMSUM = '''
@triton.jit(do_not_specialize=["T"])
def _{name}_cumsum_kernel(s, o, cu_seqlens, chunk_indices, T, H: tl.constexpr, BT: tl.constexpr,
                          REVERSE: tl.constexpr, IS_VARLEN: tl.constexpr):
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_c * 2).to(tl.int32)
        i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int32)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        T_seq = (tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos).to(tl.int32)
    else:
        NT = tl.cdiv(T, BT)
        i_b, i_t = i_c // NT, i_c % NT
        bos = tl.cast(i_b, tl.int64) * T
        T_seq = T
    p_s = tl.make_block_ptr(s + bos * H + i_h, (T_seq,), (H,), (i_t * BT,), (BT,), (0,))
    p_o = tl.make_block_ptr(o + bos * H + i_h, (T_seq,), (H,), (i_t * BT,), (BT,), (0,))
    b_s = tl.load(p_s, boundary_check=(0,)).to(tl.float32)
    b_o = tl.cumsum(b_s, axis=0)
    if REVERSE:
        b_o = tl.sum(b_s, axis=0) - b_o + b_s
    tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0,))


def {name}_cumsum(s, BT=64, reverse=False, cu_seqlens=None, chunk_indices=None):
    """{name}: chunk-local cumulative sum of s [B, T, H] along T."""
    B, T, H = s.shape
    o = alloc(s.shape, torch.float32, s.device)
    NC = B * triton.cdiv(T, BT) if cu_seqlens is None else len(chunk_indices)
    launch(_{name}_cumsum_kernel, (NC, H), s, o, cu_seqlens, chunk_indices, T, H=H, BT=BT, REVERSE=reverse,
           IS_VARLEN=cu_seqlens is not None)
    return o
'''

# One planted violation per line; each is a distinct rule so the expected count is exact.
PLANTED = '''
@triton.jit
def _{name}_legacy_kernel(x, y, cu_seqlens, T, B: tl.constexpr, HV: tl.constexpr, V: tl.constexpr,
                          BT: tl.constexpr, USE_H0: tl.constexpr, h0):
    i_b, i_n = tl.program_id(0), tl.program_id(1)
    bos32 = tl.load(cu_seqlens + i_n).to(tl.int32)
    p = y + (bos32 * HV + i_b) * V
    n = B.to(tl.int64)
    start = (i_b * T).to(tl.int64)
    if USE_H0 or i_b * BT < T:
        tl.store(p, tl.load(h0))


def {name}_legacy(x):
    _{name}_legacy_kernel[(1,)](x, x, None, 1, B=1, HV=1, V=1, BT=16, USE_H0=False, h0=None, num_warps=4)
'''
PLANTED_FINDINGS = 5  # AO204, AO201, AO203, AO301, AO101

HEADER = '''"""Generated Triton-Ascend module {index} for the lint speed benchmark."""

import torch
import triton
import triton.language as tl

from ascendopt.device import ub
from ascendopt.kernels._lib.common import alloc, grid_size, launch


def ub_bytes():
    return 196608
'''


def build_tree(root: Path, files: int) -> tuple[int, int]:
    """Write ``files`` modules under ``root`` (nested like an op tree); returns (lines, planted findings)."""
    templates = [CHUNK_DOT, CONV_TAIL, ROWWISE, CUMSUM]
    lines = planted = 0
    for i in range(files):
        folder = root / "ops" / f"op{i // 8}" / "backends" / "triton_ascend"
        folder.mkdir(parents=True, exist_ok=True)
        parts = [HEADER.format(index=i)]
        for j in range(3):  # three kernels (+ launchers) per file, rotating templates
            parts.append(templates[(i + j) % len(templates)].format(name=f"op{i}_{j}"))
        if i % 4 == 0:
            parts.append(PLANTED.format(name=f"op{i}"))
            planted += PLANTED_FINDINGS
        text = "\n".join(parts)
        (folder / f"kernel_{i}.py").write_text(text)
        lines += text.count("\n")
    return lines, planted


def run_cli(root: Path) -> tuple[float, float, int, int]:
    """One end-to-end `python -m ascendopt lint ROOT --format json` run: (wall s, CPU s, exit code, findings)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "lint", str(root), "--format", "json"],
                          check=False, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    findings = len(json.loads(proc.stdout)["findings"]) if proc.stdout.strip() else -1
    return elapsed, cpu, proc.returncode, findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="write raw results as JSON here")
    args = parser.parse_args()

    from ascendopt.lint import lint_paths

    with tempfile.TemporaryDirectory(prefix="ascendopt-lint-speed-") as tmp:
        root = Path(tmp)
        lines, planted = build_tree(root, args.files)
        in_process, in_process_cpu, cli = [], [], []
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            report = lint_paths([root])
            in_process.append(time.perf_counter() - start)
            in_process_cpu.append(time.process_time() - cpu)
            cli.append(run_cli(root))
        found = len(report.findings)
    wall = [c[0] for c in cli]
    cpu = [c[1] for c in cli]
    ok = statistics.median(wall) < TARGET_S and found == planted and all(c[3] == planted for c in cli)
    load = os.getloadavg()[0]
    result = {
        "files": args.files, "lines": lines, "planted_findings": planted, "findings": found,
        "in_process_wall_s": in_process, "in_process_cpu_s": in_process_cpu, "cli_wall_s": wall, "cli_cpu_s": cpu,
        "cli_exit_codes": [c[2] for c in cli], "load_average_1min": load, "cpu_count": os.cpu_count(),
        "target_s": TARGET_S, "ok": ok,
    }
    med = statistics.median
    print("| files | lines | findings (planted) | lint_paths wall / CPU s | CLI end-to-end wall (max) / CPU s "
          "| target | load avg |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.files} | {lines} | {found} ({planted}) | {med(in_process):.3f} / {med(in_process_cpu):.3f} | "
          f"{med(wall):.3f} ({max(wall):.3f}) / {med(cpu):.3f} | < {TARGET_S:.1f} s wall | {load:.1f} "
          f"on {os.cpu_count()} CPUs |")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
