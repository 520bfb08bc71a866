"""Served-shape contracts on a real project: fla's l2norm judged over the shape mix of a model's own profile.

On a CUDA host, as a user would (fla exported as for ``own_code_loop.py --project fla``)::

    python3 benchmarks/shape_mix_loop.py --source .fla --work /tmp/mix-loop --out mix.json

1. The repository: fla committed with the de-tuned baseline (``own_code_loop.setup_fla``), and a workload with
   ``inputs(seed, shape)`` (bf16 ``[B, T, H, D]`` of the shape asked for; ``[8, 4096, 16, 128]`` by default).
2. The profile: a small model forward (q and k projections normalized by fla's ``l2norm``, 16 heads of 128) run
   under ``torch.profiler`` with ``record_shapes=True`` at decode (64 sequences, one token, 24 steps) and prefill
   lengths (one sequence of 2048 tokens, and four of 512), exported as a Chrome trace.
3. ``ascendopt analyze TRACE --shapes`` and ``ascendopt freeze --shapes-from TRACE``: the mix in the contract.
4. The verdicts, each change made, gated and undone (expected exit in brackets): an unchanged tree (0); a change
   that restores fla's own launch space (faster everywhere) but launches the kernel twice on small inputs, so the
   heavy decode bucket is slower (4, naming it); a change wrong only where the rows are off a multiple of 64 (1,
   at correctness); fla's own launch space back, an honest faster change (0, with the weighted speedup).

Each step's exit, seconds and the gate's per-bucket table go to ``--out`` as JSON after every step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from own_code_loop import FLA_DETUNED, FLA_OP, FLA_SPACE, edit, git, setup_fla  # noqa: E402

MIX_WORKLOAD = '''"""ascendopt workload: fla's l2norm forward, head dim 128, at any [B, T, H, D] of the shape mix."""

import torch

from fla.modules.l2norm import l2norm


def inputs(seed, shape=None):
    dims = shape[0] if shape is not None else [8, 4096, 16, 128]
    return (torch.randn(*dims, device="cuda", dtype=torch.bfloat16),)


def workload(x):
    with torch.no_grad():
        return l2norm(x)
'''

PROFILE = '''import sys

import torch
from fla.modules.l2norm import l2norm

torch.manual_seed(0)
H, D = 16, 128
q_proj = torch.nn.Linear(1024, H * D, device="cuda", dtype=torch.bfloat16)
k_proj = torch.nn.Linear(1024, H * D, device="cuda", dtype=torch.bfloat16)


def forward(batch, tokens):
    h = torch.randn(batch, tokens, 1024, device="cuda", dtype=torch.bfloat16)
    q = l2norm(q_proj(h).view(batch, tokens, H, D))
    k = l2norm(k_proj(h).view(batch, tokens, H, D))
    return q, k


with torch.no_grad():
    forward(1, 64)  # compile and tune before the profile
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for _ in range(24):
            forward(64, 1)  # decode: 64 sequences, one token each
        forward(1, 2048)  # prefill
        forward(4, 512)
        torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
'''

# the forward's launch, found in fla's l2norm_fwd: a second launch on small inputs (decode) only
FLA_CALL = "        l2norm_fwd_kernel[grid](\n"
RETURN = "    return y.view(x_shape_og), rstd.view(x_shape_og[:-1])\n"
WRONG_OFF_TILE = (RETURN, "    if T % 64:  # planted: wrong where the rows are off a multiple of 64\n"
                  "        y = y * 1.01\n" + RETURN)


# the gated changes, in the order they run
STEPS = ("unchanged", "faster-large-slower-decode", "wrong-off-tile", "honest-faster")


def ascendopt(repo: Path, *args: str, timeout: float = 1200) -> tuple[int, str, float, str]:
    """``ascendopt ARGS`` in ``repo`` -> (exit code, stdout + stderr, seconds, stdout alone: a --json envelope)."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ascendopt", *args], cwd=repo, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, round(time.monotonic() - t0, 1), proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="fla exported (see own_code_loop.py)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mix-loop"))
    parser.add_argument("--out", type=Path, default=Path("mix.json"))
    parser.add_argument("--pairs", default="30")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"the gated changes to run, comma-separated (default: all of {', '.join(STEPS)})")
    parser.add_argument("--resume", action="store_true",
                        help="reuse --work's repository and frozen contract from an earlier run on this machine")
    args = parser.parse_args()
    wanted = args.steps.split(",")
    if unknown := [name for name in wanted if name not in STEPS]:
        parser.error(f"--steps: unknown step {unknown[0]!r} (known: {', '.join(STEPS)})")
    result: dict = {"steps": []}

    def save() -> None:
        args.out.write_text(json.dumps(result, indent=1))

    if args.resume and (args.work / "flash-linear-attention" / ".ascendopt" / "contract.yaml").is_file():
        return run_steps(args.work / "flash-linear-attention", args, wanted, result, save)
    args.work.mkdir(parents=True, exist_ok=True)
    repo = setup_fla(args.source.resolve(), args.work.resolve())
    (repo / "ascendopt_workload.py").write_text(MIX_WORKLOAD)
    git(repo, "commit", "-qam", "workload: inputs(seed, shape)")

    trace = args.work / "trace.json"
    (args.work / "profile_model.py").write_text(PROFILE)
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(args.work / "profile_model.py"), str(trace)], cwd=repo, check=True,
                   timeout=600)
    result["profile_s"] = round(time.monotonic() - t0, 1)
    code, out, took, _ = ascendopt(repo, "analyze", str(trace), "--shapes", "--kernel-filter", "l2norm_fwd_kernel",
                                "--json")
    result["analyze"] = {"exit": code, "seconds": took, "tail": out.strip().splitlines()[-30:]}
    save()
    code, out, took, _ = ascendopt(repo, "freeze", "--exec-file", "ascendopt_workload.py", "--test",
                                "tests/modules/test_l2norm.py", "--kernel-filter", "l2norm_fwd_kernel", "--target",
                                FLA_OP, "--shapes-from", str(trace), "--no-profile")
    result["freeze"] = {"exit": code, "seconds": took, "tail": out.strip().splitlines()[-20:]}
    save()
    if code != 0:
        print(out[-3000:])
        return 1
    contract = (repo / ".ascendopt" / "contract.yaml").read_text()
    result["contract_shapes"] = contract[contract.find("shapes:"):][:3000]
    return run_steps(repo, args, wanted, result, save)


def run_steps(repo: Path, args: argparse.Namespace, wanted: list[str], result: dict, save) -> int:
    """Gate each change of ``wanted`` (names of ``STEPS``) on the frozen ``repo``, undoing it after."""
    def step(name: str, expect: int, change) -> None:
        change()
        code, out, took, stdout = ascendopt(repo, "gate", "--json", "--pairs", args.pairs)
        try:
            stages = json.loads(stdout)["data"]["stages"]
        except (ValueError, KeyError, TypeError):
            stages = []
        perf = next((s for s in stages if s.get("name") == "performance"), {})
        corr = next((s for s in stages if s.get("name") == "correctness"), {})
        data = perf.get("data", {})
        result["steps"].append({
            "step": name, "expect": expect, "exit": code, "ok": code == expect, "seconds": took,
            "correctness": corr.get("summary", "")[:400], "performance": perf.get("summary", "")[:600],
            "weighted": data.get("weighted"),
            "buckets": [{k: c.get(k) for k in ("case", "verdict", "ratio", "threshold_rel")}
                        | {"baseline_ms": c.get("baseline", {}).get("median_ms"),
                           "candidate_ms": c.get("candidate", {}).get("median_ms")}
                        for c in data.get("comparisons", [])],
            "differential": (corr.get("data") or {}).get("differential", {}).get("shapes"),
            "audit": data.get("audit"),
            "failed_checks": [f"{s.get('name')}: {c.get('message', '')[:500]}" for s in stages
                              for c in s.get("checks", []) if not c.get("passed")][:12],
            "tail": out.strip().splitlines()[-15:]})
        print(f"[{'ok' if code == expect else 'WRONG'}] {name}: exit {code} (expected {expect}), {took} s",
              flush=True)
        save()
        git(repo, "checkout", "--", ".")

    if "unchanged" in wanted:
        step("unchanged", 0, lambda: None)

    def slower_on_decode() -> None:
        edit(repo, FLA_OP, FLA_DETUNED, FLA_SPACE)
        text = (repo / FLA_OP).read_text()
        at = text.index(FLA_CALL)
        end = text.index("        )\n", at) + len("        )\n")
        launch = text[at:end]
        again = "".join("    " + line for line in launch.splitlines(keepends=True))
        twice = launch + "        if T < 4096:  # planted: small inputs launched twice\n" + again
        (repo / FLA_OP).write_text(text[:at] + twice + text[end:])

    if "faster-large-slower-decode" in wanted:
        step("faster-large-slower-decode", 4, slower_on_decode)
    if "wrong-off-tile" in wanted:
        step("wrong-off-tile", 1, lambda: edit(repo, FLA_OP, *WRONG_OFF_TILE))
    if "honest-faster" in wanted:
        step("honest-faster", 0, lambda: edit(repo, FLA_OP, FLA_DETUNED, FLA_SPACE))
    save()
    return 0 if all(s["ok"] for s in result["steps"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
