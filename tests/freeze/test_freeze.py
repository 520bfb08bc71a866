"""`ascendopt freeze`: what the contract records, and everything freeze refuses."""

import collections
import dataclasses
import shutil
import subprocess
import textwrap

import pytest

import _gate_kernels as gk
from _cli_json import json_payload
from ascendopt.contract.model import load
from ascendopt.freeze.task import varlen_dims
from ascendopt.workspace import Workspace


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gk.install(monkeypatch)
    return tmp_path


def test_freeze_bundled_kernel_records_the_contract(kernel_env, cli):
    ws = kernel_env / "ws"
    code, out, err = cli("freeze", "--kernel", "t_scale", "--shapes", "tiny", "--shapes", "B=1,T=3,D=20",
                         "--set", "BLOCK=32", "--json", "-w", str(ws))
    assert code == 0, err
    reported = json_payload(out)
    c = load(Workspace(ws))
    assert reported["op"] == c.op == "t_scale"
    assert (c.workload.dtype, c.workload.mode, c.workload.config) == ("bf16", "fwdbwd", {"BLOCK": 32, "EXTRA": 0})
    assert [s.name for s in c.workload.shapes] == ["tiny", "B=1,T=3,D=20"]
    assert c.workload.shapes[1].dims == {"B": 1, "T": 3, "D": 20}
    assert c.tolerances["fwd"].rtol == 0.01 and c.tolerances["bwd"].rtol == 0.01  # the spec's bf16 tolerance
    assert c.expected_kernels == ("_t_scale_kernel",) and "_t_scale_kernel" in c.kernels_seen
    assert [f.path for f in c.frozen_files] == ["_gate_kernels:t_scale_reference", "_gate_kernels:make_inputs"]
    assert [b.case for b in c.baseline] == ["tiny/fwdbwd", "B=1,T=3,D=20/fwdbwd"]
    assert all(b.n == 10 and 0 < b.p20_ms <= b.median_ms <= b.p80_ms for b in c.baseline)
    assert c.device["backend"] == "cpu" and c.device["versions"]["torch"]
    assert c.git == {"commit": None, "dirty": False}  # tmp_path is not a git repository


def test_existing_contract_is_not_overwritten_without_force(kernel_env, cli):
    ws = kernel_env / "ws"
    assert cli("freeze", "--kernel", "t_scale", "--mode", "fwd", "-w", str(ws))[0] == 0
    before = (ws / "contract.yaml").read_bytes()
    code, out, err = cli("freeze", "--kernel", "t_scale", "--mode", "fwdbwd", "-w", str(ws))
    assert code == 2 and "a contract already exists" in err and "--force" in err
    assert (ws / "contract.yaml").read_bytes() == before
    code, out, err = cli("freeze", "--kernel", "t_scale", "--mode", "fwdbwd", "--force", "-w", str(ws))
    assert code == 0 and load(Workspace(ws)).workload.mode == "fwdbwd"


def test_fallback_is_refused_with_the_names_seen(kernel_env, cli, monkeypatch):
    gk.install(monkeypatch, gk.variant("fallback"))
    code, out, err = cli("freeze", "--kernel", "t_scale", "-w", str(kernel_env / "ws"))
    assert code == 1
    assert "none of t_scale's kernels (_t_scale_kernel) ran (torch fallback?)" in err and "aten::mul" in err
    assert not (kernel_env / "ws" / "contract.yaml").exists()


def test_wrong_baseline_is_refused(kernel_env, cli, monkeypatch):
    gk.install(monkeypatch, gk.variant("unwritten"))
    code, out, err = cli("freeze", "--kernel", "t_scale", "--mode", "fwd", "-w", str(kernel_env / "ws"))
    assert code == 1 and "baseline t_scale is not correct, refusing to freeze" in err and "NaN" in err
    assert not (kernel_env / "ws" / "contract.yaml").exists()


@pytest.mark.parametrize("args, message", [
    ([], "exactly one of --kernel NAME"),
    (["--kernel", "t_scale", "--exec-file", "b.py"], "exactly one of --kernel NAME"),
    (["--kernel", "nope"], "unknown kernel 'nope'"),
    (["--kernel", "t_scale", "--test", "t.py"], "--test: only for own code"),
    (["--kernel", "t_scale", "--shapes", "huge"], "has no shape preset 'huge'"),
    (["--kernel", "t_scale", "--shapes", "B=2,T"], "expected NAME=VALUE"),
    (["--kernel", "t_scale", "--dtype", "fp8"], "does not support dtype 'fp8'"),
    (["--kernel", "t_scale", "--set", "BLOCK=7"], "tunable BLOCK=7: out of range"),
    (["--exec-file", "b.py", "--shapes", "tiny"], "--shapes: only for bundled kernels"),
    (["--exec-file", "missing.py", "--test", "t.py", "--kernel-filter", "k"], "missing.py: file not found"),
])
def test_bad_input_is_a_one_line_usage_error(kernel_env, cli, args, message):
    code, out, err = cli("freeze", *args, "-w", str(kernel_env / "ws"))
    assert code == 2 and message in err and "Traceback" not in err
    assert not (kernel_env / "ws" / "contract.yaml").exists()


def test_varlen_twin_keeps_tokens_and_is_uneven():
    dims = varlen_dims({"B": 4, "T": 100, "H": 2})
    assert dims == {"H": 2, "seqlens": (40, 80, 120, 160)}  # 1:2:3:4 of the 400 tokens, B and T replaced


def test_varlen_twin_uses_the_preset_and_is_refused_without_support(kernel_env, cli, monkeypatch):
    code, out, err = cli("freeze", "--kernel", "t_scale", "--mode", "fwd", "--varlen", "--json", "-w", "ws")
    assert code == 0, err
    shapes = json_payload(out)["workload"]["shapes"]
    assert shapes == [{"name": "tiny", "dims": {"B": 2, "T": 10, "D": 32}},
                      {"name": "tiny_varlen", "dims": {"seqlens": [7, 13], "D": 32}}]
    fixed_only = {k: v for k, v in gk.SPEC.shapes.items() if not v.varlen}
    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, shapes=fixed_only))
    code, out, err = cli("freeze", "--kernel", "t_scale", "--varlen", "--force", "-w", "ws")
    assert code == 2 and "--varlen: kernel t_scale has no variable-length (seqlens) support" in err


def _own_repo(root, *, fallback=False):
    (root / "tests").mkdir(parents=True)
    (root / "op.py").write_text("def my_op(x):\n    return x + 1\n")
    (root / "tests" / "test_op.py").write_text("from op import my_op\n\n\ndef test_op():\n    assert my_op(1) == 2\n")
    name = "aten_only" if fallback else "my_op_kernel"
    (root / "bench.py").write_text(textwrap.dedent(f"""\
        import torch
        from op import my_op


        def workload():
            with torch.profiler.record_function("{name}"):
                my_op(torch.ones(4))
        """))
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_freeze_own_code_pins_files_and_commit(tmp_path, monkeypatch, cli):
    root = tmp_path / "repo"
    _own_repo(root)
    monkeypatch.chdir(root / "tests")  # paths are stored relative to the git top level, from anywhere inside
    code, out, err = cli("freeze", "--exec-file", "../bench.py", "--test", "test_op.py", "--kernel-filter",
                         "my_op_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err
    c = load(Workspace(root / ".ascendopt"))
    assert [(f.path, f.role) for f in c.frozen_files] == [("bench.py", "workload"), ("tests/test_op.py", "test")]
    assert c.commands["validation"] == ("python", "-m", "pytest", "-q", "tests/test_op.py")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert c.git == {"commit": head, "dirty": False, "tree": tree, "tree_digest": c.git["tree_digest"]}
    assert len(c.git["tree_digest"]) == 64 and c.expected_kernels == ("my_op_kernel",)
    assert c.workload.exec_file == "bench.py" and c.baseline[0].case == "bench.py"


@pytest.mark.parametrize("git", ["none", "no commit"])
def test_own_code_freeze_without_a_commit_refuses_before_any_test_runs(tmp_path, monkeypatch, cli, git):
    """The gate judges the working tree against the frozen commit: outside git, or before the first commit, freeze
    refuses (exit 5, "commit first") instead of writing a contract every later command refuses; no test has run."""
    root = tmp_path / "repo"
    _own_repo(root)
    shutil.rmtree(root / ".git")
    if git == "no commit":
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    ran = root / "ran"
    (root / "tests" / "test_op.py").write_text(f"open({str(ran)!r}, 'w').close()\n\n\ndef test_op():\n    pass\n")
    monkeypatch.chdir(root)
    code, _, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                       "my_op_kernel", "-w", str(root / ".ascendopt"))
    why = "not a git repository" if git == "none" else "no commit yet"
    assert code == 5 and f"{root}: {why}" in err and "commit first" in err, err
    assert not ran.exists() and not (root / ".ascendopt" / "contract.yaml").exists()


@pytest.mark.parametrize("given, message", [("nope/bin/python", "no such interpreter"),
                                            (".", "a folder, not an interpreter")])
def test_an_explicit_ascend_python_that_is_not_an_interpreter_is_a_usage_error(tmp_path, monkeypatch, cli, given,
                                                                                 message):
    root = tmp_path / "repo"
    _own_repo(root)
    monkeypatch.chdir(root)
    code, _, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                       "my_op_kernel", "--ascend-python", given, "-w", str(root / ".ascendopt"))
    assert code == 2 and f"{given}: {message}" in err and len(err.strip().splitlines()) == 1, err
    assert not (root / ".ascendopt" / "contract.yaml").exists()


def test_an_unavailable_backend_fails_before_any_test_runs(tmp_path, monkeypatch, cli):
    root = tmp_path / "repo"
    _own_repo(root)
    ran = root / "ran"
    (root / "tests" / "test_op.py").write_text(f"open({str(ran)!r}, 'w').close()\n\n\ndef test_op():\n    pass\n")
    monkeypatch.chdir(root)
    code, _, err = cli("--backend", "npu", "freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                       "--kernel-filter", "my_op_kernel", "-w", str(root / ".ascendopt"))
    assert code == 5 and "backend 'npu' is not available" in err and "running the tests" not in err, err
    assert not ran.exists()


def test_freeze_help_gives_default_values_not_internal_names(cli):
    from ascendopt.contract.model import DEFAULT_TIMEOUTS, EQUIVALENCE_TOLERANCES

    code, out, _ = cli("freeze", "--help")
    text = " ".join(out.split())
    assert code == 0 and "contract.model" not in text and "DEFAULT_" not in text
    assert f"the tests {DEFAULT_TIMEOUTS['tests_s']:g} s" in text
    assert f"bf16={EQUIVALENCE_TOLERANCES['bf16']['rtol']:g}" in text


def test_freeze_own_code_refuses_a_fallback_and_a_red_test(tmp_path, monkeypatch, cli):
    root = tmp_path / "repo"
    _own_repo(root, fallback=True)
    monkeypatch.chdir(root)
    code, out, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter", "my_op")
    assert code == 1 and "no kernel matching --kernel-filter 'my_op' ran" in err and "aten_only" in err
    (root / "op.py").write_text("def my_op(x):\n    return x + 2\n")
    code, out, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter", "aten")
    assert code == 1 and "the baseline fails its tests" in err
    assert not (root / ".ascendopt" / "contract.yaml").exists()


def test_freeze_own_code_sees_a_directly_launched_triton_kernel(tmp_path, monkeypatch, cli):
    root = tmp_path / "repo"
    _own_repo(root)
    (root / "bench.py").write_text(textwrap.dedent("""\
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _my_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


        x = torch.randn(100)
        y = torch.empty_like(x)


        def workload():
            _my_copy_kernel[(4,)](x, y, 100, BLOCK=32)
        """))
    monkeypatch.chdir(root)
    code, out, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                         "--kernel-filter", "_my_copy", "--json")
    assert code == 0, err
    assert "_my_copy_kernel" in json_payload(out)["kernels_seen"]


def test_pytest_configuration_on_the_tests_paths_is_pinned_section_by_section(tmp_path):
    from ascendopt.contract.frozen import pytest_config_entries

    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    files = {"tests/unit/test_a.py": "", "tests/conftest.py": "", "other/conftest.py": "",  # other/: not on the path
             "tox.ini": "[tox]\nenvlist = py\n\n[pytest]\naddopts = -q\n",
             "setup.cfg": "[metadata]\nname = x\n",  # no [tool:pytest] section: nothing of it is pinned
             "ci.ini": "[pytest]\n"}  # named by the command's -c
    for name, text in files.items():
        (tmp_path / name).write_text(text)

    def pinned():
        entries = pytest_config_entries(["tests/unit/test_a.py"], tmp_path, ["pytest", "-c", "ci.ini", "tests"])
        return {e.path: e.sha256 for e in entries}

    before = pinned()
    assert list(before) == ["tests/conftest.py", "tox.ini::[pytest]", "ci.ini"]
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py311\n\n[pytest]\naddopts = -q\n")  # outside the section
    assert pinned() == before
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py\n\n[pytest]\naddopts = -q -k fast\n")
    assert pinned()["tox.ini::[pytest]"] != before["tox.ini::[pytest]"]


def test_freeze_times_its_baseline_interleaved_with_a_second_worker_as_a_gate_does(tmp_path, monkeypatch):
    """The anchor (``judge.engine.anchor_problem``) compares a gate's baseline with freeze's: freeze times it
    the way a gate will, each batch after the other side's, in two workers of the frozen tree. (Timed alone, a
    host-bound device call measured a third faster than in the gate, and every gate was inconclusive.)"""
    from _own_code import PROFILED_BENCH, commit_repo, sleep_repo_files
    from ascendopt.freeze.task import freeze_exec_file

    calls = tmp_path / "calls.txt"
    bench = PROFILED_BENCH.replace("def workload():\n", "def workload():\n    import os\n\n"
                                   f"    with open({str(calls)!r}, 'a') as log:\n"
                                   "        log.write(f'{os.getpid()}\\n')\n", 1)
    root = commit_repo(tmp_path / "repo", {**sleep_repo_files(0.002), "bench.py": bench})
    monkeypatch.chdir(root)
    contract = freeze_exec_file(Workspace(root / ".ascendopt"), exec_file="bench.py", tests=["tests/test_op.py"],
                                kernel_filter="my_op_kernel", profile=False, precheck=False)
    per_process = sorted(collections.Counter(calls.read_text().split()).values())
    timed = contract.baseline[0].n * contract.baseline[0].calls_per_sample
    assert len(per_process) == 2 and per_process[0] >= timed, per_process  # both workers made the timed calls
    assert contract.baseline[0].n == 30


def test_freeze_loads_the_workload_in_its_two_workers_only(tmp_path, monkeypatch):
    """Freeze's workers serve everything it asks of workload(): the outputs, the kernel census, the timing,
    the repeat check and the modules it imports (the default target code). No other process loads it."""
    from _own_code import commit_repo, logged_bench, sleep_repo_files
    from ascendopt.freeze.task import freeze_exec_file

    loads = tmp_path / "loads.txt"
    root = commit_repo(tmp_path / "repo", {**sleep_repo_files(0.002), "bench.py": logged_bench(loads)})
    monkeypatch.chdir(root)
    contract = freeze_exec_file(Workspace(root / ".ascendopt"), exec_file="bench.py", tests=["tests/test_op.py"],
                                kernel_filter="my_op_kernel", profile=False, precheck=False)
    assert contract.targets == ("op.py",)  # what workload() imports, from the baseline's worker
    assert loads.read_text().split() == [str(root.resolve())] * 2  # the baseline's worker and the repeat
