"""The own-code loop on a real external project, step by step, with the exit code each step must give.

Two projects (``--project``), each run on a CUDA host (the H200) as a user of ascendopt would in their own
repository: the source is made a git repository, installed editable (``pip install --no-deps
--no-build-isolation -e .``), a workload file and a baseline de-tuned on purpose are committed (so a real,
known faster change exists for the loop to find and keep), ``freeze`` runs with one of the project's own
test files, then one change at a time is made, gated, checked against its expected exit code and undone.

``--project liger`` (default): Liger-Kernel's PyPI source distribution, which ships its ``test/`` folder
(``pip download --no-binary :all: --no-deps liger-kernel``)::

    python3 benchmarks/own_code_loop.py --sdist liger_kernel-0.8.5.tar.gz --work /tmp/liger-loop --out loop.json

Workload: layer norm forward, bf16 [8192, 4096]; baseline: the forward launch at ``num_warps=1``; frozen with
``test/transformers/test_layer_norm.py`` and ``--kernel-filter _layer_norm_forward_kernel``; changes: slower
(forward launched twice), wrong (bias dropped), skip-all ``conftest.py``, raising, hanging under
``--timeout``, faster (Liger's own launch setting back: kept and committed).

``--project fla``: flash-linear-attention's ``fla`` package and ``tests/modules/test_l2norm.py``, exported
from its git repository (no network on the device)::

    git --git-dir=REPO archive HEAD fla tests/conftest.py tests/modules/test_l2norm.py setup.py \
        pyproject.toml LICENSE README.md | tar -x -C SRC
    python3 benchmarks/own_code_loop.py --project fla --source SRC --work /tmp/fla-loop --out loop.json

Workload: ``fla.modules.l2norm.l2norm`` forward on bf16 [8, 4096, 16, 128] (the q/k normalization over a
head dim of 128: fla's ``l2norm_fwd_kernel``, rows in tiles of ``BT``); baseline: that kernel's autotune
space cut to one de-tuned launch configuration, ``BT=128`` rows per program with ``num_warps=1`` (a
128 x 128 fp32 tile in one warp's registers: it spills); frozen with ``tests/modules/test_l2norm.py``,
``--kernel-filter l2norm_fwd_kernel`` and ``--target fla/modules/l2norm.py`` (the rest of ``fla`` that
the tests load, ``fla.utils.assert_close`` among it, is pinned); changes: wrong (the forward's ``sqrt``
dropped: 1), slower (the forward launched twice: 4), planted ``tests/conftest.py`` hook that skips every
test (3), planted helper (``fla.utils.assert_close`` returns at once: 3), faster (fla's own autotune space
back: ``optimize-round`` keeps it: 0, verdict ``keep`` checked in the round record), report (0).
fla needs ``einops`` and ``transformers`` (both on the H200's image) besides torch and triton.

``--project fla --backend cpu``: the same steps and expected exits on a host without a GPU, in Triton's
interpreter (every ``ascendopt`` command gets ``--backend cpu``, whose children run with
``TRITON_INTERPRET=1``). ``import fla.modules.l2norm`` needs only ``einops`` there (``fla.layers`` and
``fla.models``, which need ``transformers``, are optional imports of ``fla``). What differs, and why:

* a port, committed after the export and before the baseline (so it is frozen and pinned like the rest
  of ``fla``): ``fla/utils/_device.py`` maps fla's cpu fallback device to ``"cuda"`` (for autocast's
  device type), so the tests' tensors would go to a device that is not there; it stays ``"cpu"``. And
  Triton's autotuner times each configuration with the active driver's benchmarker, which the interpreter
  does not have; ``fla/utils/_compat.py`` gives fla's autotune decorators one that times one call per
  configuration in the process's CPU time.
* the workload: fp32 [1, 512, 4, 128] on cpu (2048 rows; the interpreter's bf16 is emulated).
* the baseline: one configuration, ``BT=32`` rows per program. The interpreter runs a grid's programs one
  after another, so its cost is per program launched and ``num_warps`` changes nothing: 32 rows launch 4x
  the programs of the 128-row tile fla's autotuning picks here (about 2-3x slower a call). A smaller tile
  is more than 5x slower, beyond the gate's implausibility bound (``judge.bench.IMPLAUSIBLE_RATIO``), where
  the faster round could not be kept.
* the A/A gate: ``--pairs 100``. A pair of interpreter calls on a shared 2-core host differs by ~10 %;
  the default 30 pairs (extended to 90) leave a noise band wider than the 5 % at which "same" is a
  verdict, and the gate says "inconclusive" (exit 6), as it should. The changed trees are decided at the
  default (2x and more).
* the frozen tests: ``--test-cmd`` runs ``tests/modules/test_l2norm.py -k "T63 or T500"``, its two
  smallest fp32 cases (about 30 s in the interpreter); the larger ones take minutes each. The file is
  still frozen whole, and the contract pins what the command runs (the test set).

    python3 benchmarks/own_code_loop.py --project fla --backend cpu --source SRC --work /tmp/fla-cpu-loop \
        --out loop.json

``--dry-run``: every step up to the device work (unpack/copy, git, the baseline edit, each change's edit
and its undo) runs for real and each ``ascendopt`` command is printed with its expected exit code instead
of being run; no ``pip install``. It checks the script against the project's source on any machine.

Every step's command, expected and actual exit code, wall time and last output lines go to ``--out``
(JSON, rewritten after each step); the script exits 0 only when every step gave its expected exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
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

FLA_WORKLOAD = '''"""ascendopt workload: fla's l2norm forward over a head dim of 128 (bf16, [8, 4096, 16, 128])."""

import torch

from fla.modules.l2norm import l2norm

_gen = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(8, 4096, 16, 128, device="cuda", dtype=torch.bfloat16, generator=_gen)


def workload():
    with torch.no_grad():
        return l2norm(x)
'''

FLA_OP = "fla/modules/l2norm.py"
# fla's own autotune space of the row-tile forward kernel, and the de-tuned baseline: one configuration,
# 128 rows per program in a single warp (a 128 x 128 fp32 tile in 32 threads' registers spills).
FLA_SPACE = ("@fla_cache_autotune(\n"
             "    configs=[triton.Config({\"BT\": BT}, num_warps=num_warps) for num_warps in [1, 2, 4, 8, 16] "
             "for BT in BT_LIST],\n"
             "    key=[\"D\", \"NB\"],\n"
             "    **autotune_cache_kwargs,\n"
             ")\n"
             "@triton.jit(do_not_specialize=[\"T\"])\n"
             "def l2norm_fwd_kernel(\n")
FLA_DETUNED = FLA_SPACE.replace(
    "[triton.Config({\"BT\": BT}, num_warps=num_warps) for num_warps in [1, 2, 4, 8, 16] for BT in BT_LIST]",
    "[triton.Config({\"BT\": 128}, num_warps=1)]", 1)
FLA_RSTD = "    b_rstd = 1 / tl.sqrt(tl.sum(b_x * b_x, 1) + eps)\n"
FLA_CALL = "        l2norm_fwd_kernel[grid](\n"
FLA_HELPER = "fla/utils/_testing.py"
FLA_ASSERT = "def assert_close(prefix, ref, tri, ratio, warning=False, err_atol=1e-6):\n"
FLA_CONFTEST = "tests/conftest.py"
FLA_SKIP_ALL_HOOK = '''

def pytest_collection_modifyitems(items):  # planted: every test skipped
    for item in items:
        item.add_marker(pytest.mark.skip(reason="planted: every test skipped"))
'''

# --backend cpu (module docstring): the same loop in Triton's interpreter.
FLA_CPU_WORKLOAD = '''"""ascendopt workload: fla's l2norm forward, head dim 128, on cpu (fp32, [1, 512, 4, 128])."""

import torch

from fla.modules.l2norm import l2norm

_gen = torch.Generator().manual_seed(0)
x = torch.randn(1, 512, 4, 128, dtype=torch.float32, generator=_gen)


def workload():
    with torch.no_grad():
        return l2norm(x)
'''
# The interpreter runs the programs of a grid one after another, so its cost is per program launched: 32
# rows per program launch 4x the programs of fla's 128-row tile (num_warps changes nothing there). A smaller
# tile would be more than 5x slower: beyond the gate's implausibility bound, a faster round could not keep.
FLA_CPU_DETUNED = FLA_SPACE.replace(
    "[triton.Config({\"BT\": BT}, num_warps=num_warps) for num_warps in [1, 2, 4, 8, 16] for BT in BT_LIST]",
    "[triton.Config({\"BT\": 32}, num_warps=1)]", 1)
# The port that lets fla's tests run on a host without a GPU driver, committed before the baseline:
# (1) fla maps its cpu fallback device to "cuda" (for autocast's device type), so its tests would put
# their tensors on a device that is not there; (2) Triton's autotuner times configurations with the
# active driver's benchmarker, and the interpreter has no driver: the port gives it one that times one
# call per configuration in this process's CPU time (the interpreter's work; other processes' load on a
# shared host stays out of it).
FLA_DEVICE = "fla/utils/_device.py"
FLA_CPU_AS_CUDA = ("    if device == 'cpu':\n        device = 'cuda'\n"
                   "        device_torch_lib = getattr(torch, device)\n")
FLA_COMPAT = "fla/utils/_compat.py"
FLA_AUTOTUNE_KWARGS = ("autotune_cache_kwargs = {\"cache_results\": FLA_CACHE_RESULTS} if SUPPORTS_AUTOTUNE_CACHE "
                       "else {}\n")
FLA_INTERPRETER_BENCH = FLA_AUTOTUNE_KWARGS + '''
if os.environ.get("TRITON_INTERPRET") == "1":  # cpu port: the interpreter has no driver to time configs
    import time as _time

    def _cpu_time_bench(kernel_call, quantiles=None):
        start = _time.process_time()
        kernel_call()
        ms = (_time.process_time() - start) * 1e3
        return [ms] * len(quantiles) if quantiles else ms

    autotune_cache_kwargs = {**autotune_cache_kwargs, "do_bench": _cpu_time_bench}
'''
FLA_CPU_PORT = ((FLA_DEVICE, FLA_CPU_AS_CUDA, ""), (FLA_COMPAT, FLA_AUTOTUNE_KWARGS, FLA_INTERPRETER_BENCH))
# The two smallest fp32 cases of the frozen file: the interpreter needs minutes for the others.
FLA_CPU_TEST_CMD = "python -m pytest -q tests/modules/test_l2norm.py -k \"T63 or T500\""
# On a shared 2-core host a pair of interpreter calls differs by ~10 % (median absolute deviation of the
# log ratio): at the gate's default 30 pairs (extended to 90) the A/A noise band stays above the 5 % at
# which "same" is a verdict (exit 6, inconclusive; measured: +-6.3 % at 90 pairs). 100 pairs, extended to
# 300, narrow it to about 3.5 %. A change of 2x or more is decided at the default.
FLA_CPU_AA_PAIRS = 100


@dataclass(frozen=True)
class FlaBackend:
    """What the fla loop runs on one backend: its workload file, de-tuned launch space and the text of the
    baseline commit; the edits committed before it (``port``: file, old text, new text), the frozen
    test command (None: ascendopt's default, the whole file) and the A/A gate's ``--pairs`` (None: the
    gate's default)."""

    workload: str
    detuned: str
    baseline: str
    port: tuple[tuple[str, str, str], ...] = ()
    test_cmd: str | None = None
    aa_pairs: int | None = None


FLA_BACKENDS = {
    "cuda": FlaBackend(FLA_WORKLOAD, FLA_DETUNED, "one config: BT=128, num_warps=1"),
    "cpu": FlaBackend(FLA_CPU_WORKLOAD, FLA_CPU_DETUNED, "one config: BT=32, 4x the programs of BT=128",
                      FLA_CPU_PORT, FLA_CPU_TEST_CMD, FLA_CPU_AA_PAIRS),
}


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


def make_repo(repo: Path, message: str) -> None:
    """``repo`` as a git repository with everything in it committed."""
    for args in (("init", "-q"), ("config", "user.email", "loop@ascendopt"), ("config", "user.name", "loop")):
        git(repo, *args)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def install(repo: Path, dry_run: bool) -> None:
    """``pip install --no-deps --no-build-isolation -e repo`` (not on a dry run)."""
    if dry_run:
        print(f"[dry-run] {sys.executable} -m pip install -q --no-deps --no-build-isolation -e {repo}", flush=True)
        return
    proc = sh([sys.executable, "-m", "pip", "install", "-q", "-e", ".", "--no-deps", "--no-build-isolation"], repo)
    if proc.returncode != 0:
        raise SystemExit(f"pip install -e {repo}: {proc.stderr.strip()[-2000:]}")


def setup(sdist: Path, work: Path, dry_run: bool = False) -> Path:
    """Liger-Kernel: the sdist unpacked, committed, installed; the de-tuned baseline and workload committed."""
    work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    repo = next(p for p in work.iterdir() if p.is_dir() and p.name.startswith("liger_kernel"))
    make_repo(repo, f"{repo.name} as released")
    install(repo, dry_run)
    (repo / "ascendopt_workload.py").write_text(WORKLOAD)
    edit(repo, OP, LAUNCH, DETUNED)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "baseline: layer norm forward de-tuned (num_warps=1); ascendopt workload")
    return repo


def setup_fla(source: Path, work: Path, dry_run: bool = False, backend: str = "cuda") -> Path:
    """flash-linear-attention: the exported source copied to ``work/flash-linear-attention``, committed
    (with ``backend``'s port, if any, as a second commit), installed; the de-tuned baseline (one launch
    configuration) and the workload committed."""
    for need in ("fla/modules/l2norm.py", "tests/modules/test_l2norm.py", "tests/conftest.py", "pyproject.toml"):
        if not (source / need).is_file():
            raise SystemExit(f"--source {source}: {need} is missing (export it with git archive, see --help)")
    repo = work / "flash-linear-attention"
    if repo.exists():
        raise SystemExit(f"--work {work}: {repo} exists already (give an empty folder)")
    chosen = FLA_BACKENDS[backend]
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    make_repo(repo, "flash-linear-attention as exported")
    if chosen.port:
        for rel, old, new in chosen.port:
            edit(repo, rel, old, new)
        git(repo, "commit", "-qam", f"{backend} port: fla's device stays {backend}; the autotuner times configs "
                                     "in CPU time under Triton's interpreter")
    install(repo, dry_run)
    (repo / "ascendopt_workload.py").write_text(chosen.workload)
    edit(repo, FLA_OP, FLA_SPACE, chosen.detuned)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"baseline: l2norm forward de-tuned ({chosen.baseline}); workload")
    return repo


class Loop:
    def __init__(self, repo: Path, timeout: int, out: Path, dry_run: bool = False, backend: str | None = None):
        self.repo = repo
        self.timeout = timeout
        self.out = out
        self.dry_run = dry_run
        # --backend: given to every ascendopt command (None: ascendopt detects it, as on the CUDA host)
        self.backend = backend
        self.steps: list[dict] = []

    def save(self, final: bool = False) -> None:
        """Write the steps so far (after every step: a run cut short still leaves its evidence)."""
        result = {"repo": self.repo.name, "steps": self.steps, "rounds": self.rounds(), "complete": final,
                  "python": sys.version.split()[0], "env_backend": os.environ.get("ASCENDOPT_BACKEND"),
                  "backend": self.backend}
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

    def run(self, name: str, args: list[str], expect: int, verdict: str | None = None) -> dict:
        """``ascendopt ARGS`` in the repository; ok when it exits ``expect`` (and, with ``verdict``, the
        newest round record has that verdict). A dry run prints the command and records nothing run."""
        args = [*(["--backend", self.backend] if self.backend else []), *args]
        command = "ascendopt " + shlex.join(args)
        if self.dry_run:
            print(f"[dry-run] {name}: {command} -> expect exit {expect}" + (f", verdict {verdict}" if verdict else ""),
                  flush=True)
            self.steps.append({"step": name, "command": command, "expect": expect, "exit": None, "ok": True,
                               "seconds": 0.0, "tail": [], "dry_run": True})
            self.save()
            return self.steps[-1]
        argv = [sys.executable, "-m", "ascendopt", *args]
        t0 = time.monotonic()
        try:
            proc = sh(argv, self.repo)
            code, out = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out = "hung", f"{exc}"
        got = (self.rounds() or [{}])[-1].get("verdict") if verdict else None
        step = {"step": name, "command": command, "expect": expect, "exit": code,
                "ok": code == expect and got == verdict, "seconds": round(time.monotonic() - t0, 1),
                "tail": out.strip().splitlines()[-12:], **({"verdict": got, "expect_verdict": verdict}
                                                           if verdict else {})}
        self.steps.append(step)
        print(f"[{'ok' if step['ok'] else 'WRONG'}] {name}: exit {code} (expected {expect}), {step['seconds']} s",
              flush=True)
        if not step["ok"]:
            print("\n".join(step["tail"]), flush=True)
        self.save()
        return step

    def restore(self, *folders: str) -> None:
        """Undo a change: tracked files back, untracked files under ``folders`` removed."""
        git(self.repo, "checkout", "--", ".")
        git(self.repo, "clean", "-fdq", "--", *(folders or ("test", "src")))
        if git(self.repo, "status", "--porcelain", "--untracked-files=no"):
            raise SystemExit("the change was not undone: the tree still differs from the last commit")


STEPS = ("aa", "slower", "wrong", "skipall", "raise", "hang", "faster")
FLA_STEPS = ("aa", "wrong", "slower", "conftest", "helper", "faster")


def liger_steps(loop: Loop, repo: Path, chosen: list[str], timeout: int) -> None:
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
        loop.run(f"hanging change: gate --timeout {timeout}", ["gate", *ws, "--timeout", str(timeout)], 1)
        loop.restore()

    if "faster" in chosen:
        edit(repo, OP, DETUNED, LAUNCH)
        loop.run("faster change (Liger's own num_warps back): optimize-round (keep)",
                 ["optimize-round", *ws, "--hypothesis", "launch: Liger's num_warps for the forward"], 0)
        if not loop.dry_run:
            git(repo, "commit", "-qam", "layer norm forward: Liger's own num_warps (kept by ascendopt)")


def fla_steps(loop: Loop, repo: Path, chosen: list[str], target: bool, backend: str = "cuda") -> None:
    """The fla loop (module docstring): each change made, gated, checked and undone in turn."""
    ws = ["-w", ".ascendopt"]
    variant = FLA_BACKENDS[backend]
    loop.run("freeze (baseline, fla's own tests/modules/test_l2norm.py)",
             ["freeze", *ws, "--exec-file", "ascendopt_workload.py", "--test", "tests/modules/test_l2norm.py",
              *(["--test-cmd", variant.test_cmd] if variant.test_cmd else []),
              "--kernel-filter", "l2norm_fwd_kernel", *(["--target", FLA_OP] if target else [])], 0)
    if "aa" in chosen:
        loop.run("gate on the unchanged tree (A/A)", ["gate", *ws, "--junit", "gate-aa.xml",
                                                      *(["--pairs", str(variant.aa_pairs)] if variant.aa_pairs
                                                        else [])], 0)

    if "wrong" in chosen:
        edit(repo, FLA_OP, FLA_RSTD, FLA_RSTD.replace("tl.sqrt(", "(", 1))
        loop.run("wrong change (the forward's sqrt dropped): gate", ["gate", *ws], 1)
        loop.restore("fla", "tests")

    if "slower" in chosen:
        edit(repo, FLA_OP, FLA_CALL, "        for _twice in range(2):\n          l2norm_fwd_kernel[grid](\n")
        loop.run("slower change (the forward launched twice): gate", ["gate", *ws], 4)
        loop.restore("fla", "tests")

    if "conftest" in chosen:
        path = repo / FLA_CONFTEST
        path.write_text(path.read_text() + FLA_SKIP_ALL_HOOK)
        loop.run("planted tests/conftest.py hook (every test skipped): gate", ["gate", *ws], 3)
        loop.restore("fla", "tests")

    if "helper" in chosen:
        edit(repo, FLA_HELPER, FLA_ASSERT, FLA_ASSERT + "    return  # planted: every comparison passes\n")
        loop.run("planted helper (fla.utils.assert_close returns at once): gate", ["gate", *ws], 3)
        loop.restore("fla", "tests")

    if "faster" in chosen:
        edit(repo, FLA_OP, variant.detuned, FLA_SPACE)
        loop.run("faster change (fla's own autotune space back): optimize-round (keep)",
                 ["optimize-round", *ws, "--hypothesis", "launch: fla's own BT x num_warps autotune space"], 0,
                 verdict="keep")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", choices=("liger", "fla"), default="liger", help="which project's loop")
    parser.add_argument("--sdist", type=Path, help="liger: Liger-Kernel's .tar.gz from PyPI")
    parser.add_argument("--source", type=Path, help="fla: the exported source folder (see the module docstring)")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder to unpack it into")
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the steps (rewritten after each)")
    parser.add_argument("--timeout", type=int, default=180, help="liger: --timeout of the hanging step, seconds")
    parser.add_argument("--steps", default=None,
                        help=f"comma-separated subset (liger: {', '.join(STEPS)}; fla: {', '.join(FLA_STEPS)}); "
                             "freeze and report always run")
    parser.add_argument("--no-target", action="store_true",
                        help="fla: freeze without --target (an ascendopt that has no such option)")
    parser.add_argument("--backend", choices=tuple(FLA_BACKENDS), default="cuda",
                        help="fla: cuda (the H200), or cpu: Triton's interpreter (see the module docstring)")
    parser.add_argument("--dry-run", action="store_true",
                        help="set up and make every change, print each ascendopt command instead of running it")
    args = parser.parse_args()
    known = FLA_STEPS if args.project == "fla" else STEPS
    chosen = [s for s in (args.steps or ",".join(known)).split(",") if s]
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        parser.error(f"--steps: unknown {', '.join(unknown)} (choose from {', '.join(known)})")
    if args.project == "liger" and args.sdist is None:
        parser.error("--sdist: needed for --project liger")
    if args.project == "fla" and args.source is None:
        parser.error("--source: needed for --project fla")
    if args.project == "liger" and args.backend != "cuda":
        parser.error("--backend: liger runs on cuda only")
    if args.project == "fla":
        repo = setup_fla(args.source.resolve(), args.work.resolve(), args.dry_run, args.backend)
    else:
        repo = setup(args.sdist.resolve(), args.work.resolve(), args.dry_run)
    # cuda keeps its command lines as before (ascendopt detects the device); cpu is named on each command
    loop = Loop(repo, args.timeout, args.out, args.dry_run, "cpu" if args.backend == "cpu" else None)
    if args.project == "fla":
        fla_steps(loop, repo, chosen, target=not args.no_target, backend=args.backend)
    else:
        liger_steps(loop, repo, chosen, args.timeout)
    loop.run("report", ["report", "-w", ".ascendopt", "--out", "report.md"], 0)
    loop.save(final=True)
    wrong = [s["step"] for s in loop.steps if not s["ok"]]
    print(f"{len(loop.steps) - len(wrong)} of {len(loop.steps)} steps gave their expected exit code"
          + (" (dry run: nothing was run)" if args.dry_run else ""))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
