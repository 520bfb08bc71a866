"""The own-code loop on a real external project, step by step, with the exit code each step must give.

Run on a CUDA host (the H200) with Liger-Kernel's source distribution from PyPI, which ships its own
``test/`` folder (``pip download --no-binary :all: --no-deps liger-kernel``)::

    python3 benchmarks/own_code_loop.py --sdist liger_kernel-0.8.5.tar.gz --work /tmp/liger-loop --out loop.json

What it does, as a user of ascendopt would in their own repository:

1. unpacks the sdist, makes it a git repository and installs it editable (``pip install -e . --no-deps``);
2. commits a workload file (``ascendopt_workload.py``: Liger's layer norm forward, bf16 [8192, 4096]) and a
   baseline whose forward launch is de-tuned on purpose (``num_warps=1`` instead of Liger's own setting),
   so that a real, known faster change exists for the loop to find and keep;
3. freezes with Liger's own ``test/transformers/test_layer_norm.py`` and ``--kernel-filter
   _layer_norm_forward_kernel``;
4. makes one change at a time, runs ``gate`` and/or ``optimize-round`` on it, checks the exit code and
   restores the tree: a slower change (the forward launched twice), a wrong change (the bias dropped), a
   skip-all ``conftest.py``, a raising change, a hanging change under ``--timeout``, and the faster change
   (Liger's own launch setting back), which must be kept and is committed;
5. writes the report.

Every step's command, expected and actual exit code, duration and last output lines go to ``--out``
(JSON); the script exits 0 only when every step gave its expected exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

WORKLOAD = '''"""ascendopt workload: Liger-Kernel's layer norm forward on one realistic shape (bf16, [8192, 4096])."""

import torch

from liger_kernel.ops import LigerLayerNormFunction

_gen = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16, generator=_gen)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=_gen)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=_gen)


def workload():
    with torch.no_grad():
        return LigerLayerNormFunction.apply(x, w, b, 1e-6)
'''

SKIP_ALL_CONFTEST = '''import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="planted: every test skipped"))
'''

OP = "src/liger_kernel/ops/layer_norm.py"
LAUNCH = ("        num_warps=num_warps,\n        **kernel_args,\n    )\n\n"
          "    return Y.view(*shape), X, Mean, RSTD, BLOCK_SIZE, num_warps")
DETUNED = LAUNCH.replace("num_warps=num_warps,\n", "num_warps=1,\n", 1)
KERNEL_CALL = "    _layer_norm_forward_kernel[grid](\n"


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{rel}: the text to change was found {text.count(old)} times (expected once)")
    path.write_text(text.replace(old, new))


def sh(argv: list[str], cwd: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def git(repo: Path, *args: str) -> str:
    proc = sh(["git", *args], repo)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def setup(sdist: Path, work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    repo = next(p for p in work.iterdir() if p.is_dir() and p.name.startswith("liger_kernel"))
    for args in (("init", "-q"), ("config", "user.email", "loop@ascendopt"), ("config", "user.name", "loop")):
        git(repo, *args)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"{repo.name} as released")
    proc = sh([sys.executable, "-m", "pip", "install", "-q", "-e", ".", "--no-deps", "--no-build-isolation"], repo)
    if proc.returncode != 0:
        raise SystemExit(f"pip install -e {repo}: {proc.stderr.strip()[-2000:]}")
    (repo / "ascendopt_workload.py").write_text(WORKLOAD)
    edit(repo, OP, LAUNCH, DETUNED)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "baseline: layer norm forward de-tuned (num_warps=1); ascendopt workload")
    return repo


class Loop:
    def __init__(self, repo: Path, timeout: int, out: Path):
        self.repo = repo
        self.timeout = timeout
        self.out = out
        self.steps: list[dict] = []

    def save(self, final: bool = False) -> None:
        """Write the steps so far (after every step: a run cut short still leaves its evidence)."""
        result = {"repo": self.repo.name, "steps": self.steps, "rounds": self.rounds(), "complete": final,
                  "python": sys.version.split()[0], "env_backend": os.environ.get("ASCENDOPT_BACKEND")}
        report = self.repo / "report.md"
        if final and report.exists():
            result["report"] = report.read_text()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(result, indent=2))

    def rounds(self) -> list[dict]:
        import yaml

        folder = self.repo / ".ascendopt" / "rounds"
        out = []
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            rec = yaml.safe_load(path.read_text())
            timing = rec.get("timing") or {}
            out.append({"round": rec.get("number"), "hypothesis": rec.get("hypothesis"), "verdict": rec.get("verdict"),
                        "direction": rec.get("direction"), "ratio_vs_baseline": timing.get("ratio_vs_baseline"),
                        "ratio_vs_best": timing.get("ratio_vs_best"), "vs_best": timing.get("vs_best"),
                        "gate": (rec.get("gate") or {}).get("summary")})
        return out

    def run(self, name: str, args: list[str], expect: int) -> dict:
        argv = [sys.executable, "-m", "ascendopt", *args]
        t0 = time.monotonic()
        try:
            proc = sh(argv, self.repo)
            code, out = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out = "hung", f"{exc}"
        step = {"step": name, "command": "ascendopt " + " ".join(args), "expect": expect, "exit": code,
                "ok": code == expect, "seconds": round(time.monotonic() - t0, 1),
                "tail": out.strip().splitlines()[-12:]}
        self.steps.append(step)
        print(f"[{'ok' if step['ok'] else 'WRONG'}] {name}: exit {code} (expected {expect}), {step['seconds']} s",
              flush=True)
        if not step["ok"]:
            print("\n".join(step["tail"]), flush=True)
        self.save()
        return step

    def restore(self) -> None:
        git(self.repo, "checkout", "--", ".")
        git(self.repo, "clean", "-fdq", "--", "test", "src")


STEPS = ("aa", "slower", "wrong", "skipall", "raise", "hang", "faster")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, required=True, help="Liger-Kernel's .tar.gz from PyPI")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder to unpack it into")
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the steps (rewritten after each)")
    parser.add_argument("--timeout", type=int, default=180, help="--timeout of the hanging step, seconds")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated subset of {', '.join(STEPS)} (freeze and report always run)")
    args = parser.parse_args()
    chosen = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(chosen) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown {', '.join(unknown)} (choose from {', '.join(STEPS)})")
    repo = setup(args.sdist.resolve(), args.work.resolve())
    loop = Loop(repo, args.timeout, args.out)
    ws = ["-w", ".ascendopt"]

    loop.run("freeze (baseline, Liger's own layer-norm tests)",
             ["freeze", *ws, "--exec-file", "ascendopt_workload.py", "--test", "test/transformers/test_layer_norm.py",
              "--kernel-filter", "_layer_norm_forward_kernel"], 0)
    if "aa" in chosen:
        loop.run("gate on the unchanged tree (A/A)", ["gate", *ws, "--junit", "gate-aa.xml"], 0)

    if "slower" in chosen:
        twice = "    for _twice in range(2):\n      _layer_norm_forward_kernel[grid](\n"
        edit(repo, OP, KERNEL_CALL, twice)
        loop.run("slower change: gate", ["gate", *ws], 4)
        loop.run("slower change: optimize-round (revert)",
                 ["optimize-round", *ws, "--hypothesis", "launch: forward twice (planted slowdown)"], 0)
        loop.restore()

    if "wrong" in chosen:
        edit(repo, OP, "B,\n        B.stride(0),", "W,\n        B.stride(0),")
        loop.run("wrong change (bias read from the weight): gate", ["gate", *ws], 1)
        loop.run("wrong change: optimize-round (drop, recorded)",
                 ["optimize-round", *ws, "--hypothesis", "bias: planted wrong bias"], 1)
        loop.restore()

    if "skipall" in chosen:
        (repo / "test" / "transformers" / "conftest.py").write_text(SKIP_ALL_CONFTEST)
        loop.run("skip-all conftest.py: gate", ["gate", *ws], 3)
        loop.restore()

    if "raise" in chosen:
        edit(repo, OP, "    shape = X.shape\n    dim = shape[-1]\n",
             "    shape = X.shape\n    raise RuntimeError('planted: the forward raises')\n    dim = shape[-1]\n")
        loop.run("raising change: gate", ["gate", *ws, "--junit", "gate-raise.xml"], 1)
        loop.run("raising change: optimize-round (drop, recorded)",
                 ["optimize-round", *ws, "--hypothesis", "raise: planted exception"], 1)
        loop.restore()

    if "hang" in chosen:
        edit(repo, OP, "    shape = X.shape\n    dim = shape[-1]\n",
             "    shape = X.shape\n    import time; time.sleep(3600)\n    dim = shape[-1]\n")
        loop.run(f"hanging change: gate --timeout {args.timeout}", ["gate", *ws, "--timeout", str(args.timeout)], 1)
        loop.restore()

    if "faster" in chosen:
        edit(repo, OP, DETUNED, LAUNCH)
        loop.run("faster change (Liger's own num_warps back): optimize-round (keep)",
                 ["optimize-round", *ws, "--hypothesis", "launch: Liger's num_warps for the forward"], 0)
        git(repo, "commit", "-qam", "layer norm forward: Liger's own num_warps (kept by ascendopt)")
    loop.run("report", ["report", *ws, "--out", "report.md"], 0)
    loop.save(final=True)
    wrong = [s["step"] for s in loop.steps if not s["ok"]]
    print(f"{len(loop.steps) - len(wrong)} of {len(loop.steps)} steps gave their expected exit code")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
