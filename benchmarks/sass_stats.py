"""Per-thread machine code of a kernel compiled for sm_90 on any machine (no GPU needed).

Triton compiles for a target it is given (``GPUTarget("cuda", 90, 32)``) with the ptxas it bundles; the
cubin's SASS (``cuobjdump -sass``, bundled too) and resources (``-res-usage``) say what each thread of a
program runs. Used to compare our l2norm forward at D=4096 with fla-core's one-row kernel (RESULTS.md,
session 4): the cases below are fixed; ``--case`` picks them.

    PYTHONPATH=<fla-core 0.6.0 and einops> python3 benchmarks/sass_stats.py [--case l2norm_d4096]
    python3 benchmarks/sass_stats.py --case l2norm_d4096_ours     # ours only, no fla needed
    python3 benchmarks/sass_stats.py --case causal_conv1d_fwd_rows  # the conv forward's registers

Not under ``TRITON_INTERPRET=1``: interpreted kernels cannot be compiled.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

os.environ.setdefault("ASCENDOPT_BACKEND", "cpu")  # importing the kernels needs no device

DIVISIBLE = [["tt.divisibility", 16]]  # what a launch records for aligned pointers and ints divisible by 16


def compile_sm90(fn, signature: dict, constexprs: dict, divisible: tuple[int, ...], **options):
    """``fn`` (a JITFunction) compiled for sm_90. ``divisible``: the argument positions a launch would
    specialize as divisible by 16 (torch's aligned pointers; an int argument such as D=4096 unless it is
    in ``do_not_specialize``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    attrs = {(i,): DIVISIBLE for i in divisible}
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def cuobjdump(compiled, flag: str) -> str:
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout


def stats(compiled) -> dict:
    """Registers per thread, SASS instructions, and the global/shared memory instructions by opcode."""
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", cuobjdump(compiled, "-sass"), re.M)
    regs = re.search(r"REG:(\d+)", cuobjdump(compiled, "-res-usage"))
    memory = {op: n for op, n in sorted(Counter(ops).items()) if op.startswith(("LDG", "STG", "LDS", "STS"))}
    return {"registers": int(regs.group(1)) if regs else None, "instructions": len(ops), "memory": memory,
            "warps": compiled.metadata.num_warps}


def ours_l2norm_fwd(rows: int, d: int = 4096):
    """Our l2norm forward's bulk kernel at ``rows`` x ``d`` tiles (bf16), compiled for sm_90."""
    from ascendopt.kernels import l2norm

    return compile_sm90(
        l2norm._l2norm_fwd_kernel,
        {"x": "*bf16", "y": "*bf16", "rstd": "*fp32", "eps": "fp32", "n_rows": "i32", "row_start": "i32",
         "n_tasks": "i32", "D": "constexpr", "BR": "constexpr", "BD": "constexpr", "TAIL": "constexpr"},
        {"D": d, "BR": rows, "BD": d, "TAIL": False}, divisible=(0, 1, 2))  # its ints: do_not_specialize


def l2norm_d4096(peer: bool = True) -> list[tuple[str, dict]]:
    """Ours (2 and 1 rows of 4096, Triton's default 4 warps) and, with ``peer``, fla's one-row forward at
    the 2 warps its autotuner picked on the H200 (RESULTS.md session 4, run 1)."""
    rows = [("ascendopt _l2norm_fwd_kernel BR=2 (the default tile)", stats(ours_l2norm_fwd(2))),
            ("ascendopt _l2norm_fwd_kernel BR=1", stats(ours_l2norm_fwd(1)))]
    if peer:
        from fla.modules.norm import l2norm as fla_l2norm

        one_row = compile_sm90(
            fla_l2norm.l2norm_fwd_kernel_row.fn,
            {"x": "*bf16", "y": "*bf16", "rstd": "*fp32", "eps": "fp32", "D": "i32", "BD": "constexpr"},
            {"BD": 4096}, divisible=(0, 1, 2, 4), num_warps=2)  # noqa: AO101 - fla's kernel, as fla launches it
        rows.append(("fla l2norm_fwd_kernel_row (num_warps=2)", stats(one_row)))
    return rows


def l2norm_d4096_ours() -> list[tuple[str, dict]]:
    """``l2norm_d4096`` without fla (needs only this project and Triton)."""
    return l2norm_d4096(peer=False)


def causal_conv1d_fwd_rows() -> list[tuple[str, dict]]:
    """causal_conv1d's forward bulk kernel on the row path at the cuda defaults (``resolve(..., "cuda")``),
    B4_T4096_D4096_W4 with silu and bias, fixed length and varlen, bulk tiles at row 0 and offset by W-1
    (``EDGES=5``), and tiles whose starts are read from a table (``EDGES=8``). At 64 registers an SM holds 8
    of its 4-warp programs; 65-72 registers leave 7 and cost the forward ~10 % (RESULTS.md session 5, runs
    1-2)."""
    from ascendopt.kernels.causal_conv1d import SPEC, resolve
    from ascendopt.kernels.causal_conv1d_fwd import _causal_conv1d_fwd_kernel

    cfg = resolve(SPEC.config(), "cuda")
    ints = ("T", "n_tasks", "n_per_seq", "t_first", "n_head", "tail_start")
    signature = {name: "*bf16" for name in ("x", "wt", "bias", "residual", "h0", "y")}
    signature.update({"cu_seqlens": "*i32", "tiles": "*i32", **{name: "i32" for name in ints}})
    constexprs = {"D": 4096, "W": 4, "BT": cfg["BT"], "BD": cfg["BD"], "HB": 4, "ACT": 2 if cfg["SILU"] == 2 else 1,
                  "HAS_BIAS": True, "HAS_RES": False, "USE_H0": False, "TAIL_MODE": 0, "TAPS": cfg["TAPS"] - 1,
                  "AHEAD": cfg["AHEAD"]}
    signature.update({name: "constexpr" for name in (*constexprs, "IS_VARLEN", "OFF", "STARTS")})
    rows = []
    for varlen in (False, True):
        for off, starts in ((0, False), (3, False), (0, True)):
            compiled = compile_sm90(_causal_conv1d_fwd_kernel, signature,
                                    {**constexprs, "IS_VARLEN": varlen, "OFF": off, "STARTS": starts},
                                    divisible=tuple(range(8)))  # the pointers; the ints are do_not_specialize
            rows.append((f"ascendopt _causal_conv1d_fwd_kernel bulk rows, {'varlen' if varlen else 'fixed'}, "
                         f"{'STARTS' if starts else f'OFF={off}'}", stats(compiled)))
    return rows


def l2norm_forms(forms: tuple[str, ...] = ("one1", "one2", "pair2", "pre16", "one2s", "warp4", "rows4")
                 ) -> list[tuple[str, dict]]:
    """``row_forms_study.py``'s forms of the l2norm forward at D=4096 (bf16), as that study launches them."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import row_forms_study as study

    signature = {"x": "*bf16", "y": "*bf16", "rstd": "*fp32", "eps": "fp32", "n_tasks": "i32"}
    rows = []
    for name in forms:
        form = study.parse_form(name)
        signature.update({key: "constexpr" for key in ("D", *form)})
        compiled = compile_sm90(study._forms_kernel, signature, {"D": 4096, **form}, divisible=(0, 1, 2, 4))
        rows.append((f"row_forms_study {name}", stats(compiled)))
    return rows


CASES = {"l2norm_d4096": l2norm_d4096, "l2norm_d4096_ours": l2norm_d4096_ours,
         "causal_conv1d_fwd_rows": causal_conv1d_fwd_rows, "l2norm_forms": l2norm_forms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="l2norm_d4096", choices=sorted(CASES))
    args = ap.parse_args()
    print("| kernel | warps | registers | SASS instructions | memory instructions |\n|---|---|---|---|---|")
    for name, s in CASES[args.case]():
        mem = ", ".join(f"{op} x{n}" for op, n in s["memory"].items())
        print(f"| {name} | {s['warps']} | {s['registers']} | {s['instructions']} | {mem} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
