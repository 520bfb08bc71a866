"""benchmarks/sass_stats.py on this machine: Triton compiles for sm_90 without a GPU (its bundled ptxas and
cuobjdump), and the counts it reports are those the D=4096 l2norm comparison in RESULTS.md rests on.

Run as a script in a subprocess: the tests' interpreter mode (TRITON_INTERPRET=1) cannot compile."""

import os
import re
import subprocess
import sys

import _benchmarks


def test_our_l2norm_d4096_tiles_compile_to_128_bit_row_loads_and_stores():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "sass_stats.py"), "--case",
                           "l2norm_d4096_ours"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {m[0]: m[1:] for m in re.findall(r"^\| ascendopt _l2norm_fwd_kernel (BR=\d)[^|]*\| (\d+) \| (\d+) \| (\d+) "
                                            r"\| ([^|]*)\|", proc.stdout, re.M)}
    (warps2, regs2, insts2, mem2), (warps1, regs1, insts1, mem1) = rows["BR=2"], rows["BR=1"]
    # 4 warps: 2 x 4096 bf16 values are 64 a thread, eight 16-byte loads and stores; one row is half that
    assert warps2 == warps1 == "4"
    assert "LDG.E.128 x8" in mem2 and "STG.E.128 x8" in mem2
    assert "LDG.E.128 x4" in mem1 and "STG.E.128 x4" in mem1
    assert 0 < int(regs1) < int(regs2) <= 255 and int(insts1) < int(insts2)


def test_causal_conv1d_forward_row_kernel_keeps_eight_programs_an_sm():
    # 64 registers x 128 threads: 8 programs an SM. A rewrite of the tile decode once cost 72 (7 programs,
    # ~10 % slower on the H200; RESULTS.md session 5): this compile property guards the cuda default.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "sass_stats.py"), "--case",
                           "causal_conv1d_fwd_rows"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^\| ascendopt _causal_conv1d_fwd_kernel bulk rows, (\w+), (OFF=\d|STARTS) \| (\d+) \| (\d+) \|",
                      proc.stdout, re.M)
    # tiles at row 0, offset by W-1 (EDGES=5, 7), and starting where a table says (EDGES=8)
    assert {(kind, tiles) for kind, tiles, _, _ in rows} == {(kind, tiles) for kind in ("fixed", "varlen")
                                                             for tiles in ("OFF=0", "OFF=3", "STARTS")}
    for kind, tiles, warps, regs in rows:
        assert warps == "4" and int(regs) <= 64, f"{kind} {tiles}: {regs} registers"


def test_row_forms_study_prefetch_form_stays_one_row_ahead():
    # pre<R> holds one row in flight past the one it reduces: its runtime loop compiles to one row's loads in the
    # loop body plus the first row's (8 x 16-byte loads at D=4096), not R rows' (an unrolled first version hoisted
    # loads rows ahead: 96-125 registers).
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "sass_stats.py"), "--case", "l2norm_forms"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {m[0]: m[1:] for m in re.findall(r"^\| row_forms_study (\w+) \| (\d+) \| (\d+) \| \d+ \| ([^|]*)\|",
                                            proc.stdout, re.M)}
    assert set(rows) == {"one1", "one2", "pair2", "pre16", "one2s", "warp4", "rows4"}
    assert all(warps == "4" for warps, _, _ in rows.values())  # no form sets num_warps
    warps, regs, mem = rows["pre16"]
    assert "LDG.E.128 x8" in mem and int(regs) < 96
    assert "STG.E.EF.128" in rows["one2s"][2] and "STG.E.EF" not in rows["one2"][2]  # .cs stores: evict-first
    # each row in one warp: one of the two views keeps the sum inside the warp (no shared-memory round trip of the
    # tile); which one depends on the Triton version (rows<R> under 3.6, warp<R> under 3.7)
    assert min(int(re.search(r"STS x(\d+)", rows[f][2]).group(1)) for f in ("warp4", "rows4")) <= 2
