"""benchmarks/own_code_loop.py --project fla --dry-run: the script's non-device parts, on a real git repository.

The source folder here holds the lines the script edits, as fla's files hold them (the script's own
constants), so the dry run makes every edit and undo for real; the runs with fla's exported source (cpu in
Triton's interpreter; cuda on the H200) are recorded in benchmarks/RESULTS.md.
"""

import json
import shlex
import subprocess
import sys

from _benchmarks import load, script


def _fla_like_source(root, loop):
    files = {
        "fla/modules/l2norm.py": "import triton\n\n" + loop.FLA_SPACE + "    x,\n):\n" + loop.FLA_RSTD
        + "\n\ndef l2norm_fwd(x):\n" + loop.FLA_CALL + "            x=x,\n        )\n",
        "fla/utils/_testing.py": loop.FLA_ASSERT + "    assert ratio > 0\n",
        "fla/utils/_device.py": "device = 'cpu'\nif True:\n" + loop.FLA_CPU_AS_CUDA + "    pass\n",
        "fla/utils/_compat.py": "import os\n\n" + loop.FLA_AUTOTUNE_KWARGS,
        "tests/conftest.py": "import pytest\n",
        "tests/modules/test_l2norm.py": "def test_l2norm():\n    pass\n",
        "pyproject.toml": "[project]\nname = 'fla-like'\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_fla_dry_run_makes_every_change_and_prints_each_step_with_its_exit(tmp_path):
    loop = load("own_code_loop")
    source = _fla_like_source(tmp_path / "src", loop)
    out = tmp_path / "loop.json"
    proc = subprocess.run([sys.executable, str(script("own_code_loop")), "--project", "fla", "--source", str(source),
                           "--work", str(tmp_path / "work"), "--out", str(out), "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = json.loads(out.read_text())["steps"]
    assert [(s["command"].split()[1], s["expect"]) for s in steps] == [
        ("freeze", 0), ("gate", 0), ("gate", 1), ("gate", 4), ("gate", 3), ("gate", 3), ("optimize-round", 0),
        ("report", 0)]
    assert "--kernel-filter l2norm_fwd_kernel --target fla/modules/l2norm.py" in steps[0]["command"]
    assert "verdict keep" in proc.stdout and "pip install -q --no-deps --no-build-isolation -e" in proc.stdout
    repo = tmp_path / "work" / "flash-linear-attention"
    baseline = subprocess.run(["git", "show", "HEAD:fla/modules/l2norm.py"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout
    assert loop.FLA_DETUNED in baseline and loop.FLA_SPACE not in baseline
    # every planted change was undone; only the last (the faster change) is left in the tree
    assert (repo / "fla/modules/l2norm.py").read_text().count(loop.FLA_SPACE) == 1
    assert "planted" not in (repo / "tests/conftest.py").read_text() + (repo / "fla/utils/_testing.py").read_text()


def test_fla_refuses_a_source_without_the_test_file(tmp_path):
    loop = load("own_code_loop")
    source = _fla_like_source(tmp_path / "src", loop)
    (source / "tests/modules/test_l2norm.py").unlink()
    proc = subprocess.run([sys.executable, str(script("own_code_loop")), "--project", "fla", "--source", str(source),
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "o.json"), "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "tests/modules/test_l2norm.py is missing" in proc.stderr


def _dry_run(tmp_path, source, *extra):
    return subprocess.run([sys.executable, str(script("own_code_loop")), "--project", "fla", "--source", str(source),
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "loop.json"), "--dry-run",
                           *extra], capture_output=True, text=True, timeout=120)


def test_fla_cpu_dry_run_commits_the_port_and_the_cpu_baseline_and_names_the_backend(tmp_path):
    loop = load("own_code_loop")
    proc = _dry_run(tmp_path, _fla_like_source(tmp_path / "src", loop), "--backend", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "loop.json").read_text())
    steps = result["steps"]
    assert result["backend"] == "cpu"
    assert [(s["command"].split()[1:4], s["expect"]) for s in steps] == [
        (["--backend", "cpu", step], code) for step, code in (("freeze", 0), ("gate", 0), ("gate", 1), ("gate", 4),
                                                             ("gate", 3), ("gate", 3), ("optimize-round", 0),
                                                             ("report", 0))]
    assert f"--test-cmd {shlex.quote(loop.FLA_CPU_TEST_CMD)}" in steps[0]["command"]
    assert steps[1]["command"].endswith(f"--pairs {loop.FLA_CPU_AA_PAIRS}")  # the A/A gate only
    assert not any("--pairs" in s["command"] for s in steps[2:])
    repo = tmp_path / "work" / "flash-linear-attention"

    def show(rev, rel):
        return subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout

    # history: the export, the port (device stays cpu; the interpreter's benchmarker), the de-tuned baseline
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, check=True)
    assert [line.split(":")[0] for line in log.stdout.splitlines()] == [
        "baseline", "cpu port", "flash-linear-attention as exported"]
    assert loop.FLA_CPU_AS_CUDA not in show("HEAD~1", "fla/utils/_device.py")
    assert '"do_bench": _cpu_time_bench' in show("HEAD~1", "fla/utils/_compat.py")
    baseline = show("HEAD", "fla/modules/l2norm.py")
    assert loop.FLA_CPU_DETUNED in baseline and loop.FLA_SPACE not in baseline
    assert "device=\"cuda\"" not in show("HEAD", "ascendopt_workload.py")
    # the faster change (fla's own space back) is the only change left in the tree
    assert (repo / "fla/modules/l2norm.py").read_text().count(loop.FLA_SPACE) == 1


def test_fla_cuda_dry_run_has_no_port_and_no_backend_option(tmp_path):
    loop = load("own_code_loop")
    proc = _dry_run(tmp_path, _fla_like_source(tmp_path / "src", loop))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = json.loads((tmp_path / "loop.json").read_text())["steps"]
    assert not any(option in s["command"] for s in steps for option in ("--backend", "--test-cmd", "--pairs"))
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path / "work" / "flash-linear-attention",
                         capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2


def test_liger_refuses_the_cpu_backend(tmp_path):
    proc = subprocess.run([sys.executable, str(script("own_code_loop")), "--sdist", str(tmp_path / "x.tar.gz"),
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "o.json"), "--backend", "cpu"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--backend: liger runs on cuda only" in proc.stderr
