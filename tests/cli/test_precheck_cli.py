"""`ascendopt precheck` end to end: a compile in the separate triton-ascend environment.

The compile needs triton-ascend's venv (conftest's ``ascend_python``: $ASCENDOPT_TEST_ASCEND_PYTHON, built by
.ci/run before pytest); without it these tests skip on a developer machine and FAIL under CI=true. Two small
kernels of tests/data/precheck: one that lowers, one the front end rejects.
The input and environment errors need no venv.
"""

import json
from pathlib import Path

import pytest

from _cli_json import json_payload
from conftest import DATA, run_cli

PRECHECK = DATA / "precheck"
SCHEMA = Path(__file__).resolve().parents[2] / "src/ascendopt/cli/schemas/precheck.schema.json"


def _by_kernel(payload):
    out = {}
    for entry in payload["launches"]:
        out.setdefault(entry["kernel"], []).append(entry)
    return out


def test_workload_launches_lower_with_ub_and_core_type(ascend_python):
    code, out, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--exec-file",
                             str(PRECHECK / "vector_add_workload.py"), "--ascend-python", ascend_python, "--json")
    assert code == 0, err
    payload = json_payload(out)
    assert payload["lowered"] is True
    kernels = _by_kernel(payload)
    # the workload launches add_kernel with BLOCK 1024 and 2048 (two compiles) and matmul_kernel once
    assert sorted(e["constexprs"]["BLOCK"] for e in kernels["add_kernel"]) == [1024, 2048]
    assert len(kernels["matmul_kernel"]) == 1
    assert {e["core_type"] for e in kernels["add_kernel"]} == {"vector"}
    assert kernels["matmul_kernel"][0]["core_type"] == "mixed"
    for entry in kernels["add_kernel"]:
        block = entry["constexprs"]["BLOCK"]
        assert entry["ub"]["alloc_bytes"] == 2 * block * 4  # x and y tiles, fp32
        assert entry["ub"]["estimate_bytes"] == 2 * entry["ub"]["alloc_bytes"]  # double-buffering factor 2
        assert entry["grid"] == [4096 // block]
        assert entry["signature"] == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    assert payload["lint"] is not None and payload["chip"] == "Ascend910B2"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(payload, json.loads(SCHEMA.read_text()))


def test_launch_description_flags_a_vector_kernel_on_the_cube_core_count(ascend_python):
    code, out, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--launches",
                             str(PRECHECK / "vector_add_launches.yaml"), "--ascend-python", ascend_python)
    assert code == 0, err
    assert "vector-only kernel launched on the cube core count (24)" in out
    assert "matmul_kernel (grid" not in out  # a mixed kernel on the cube count is right


def test_rejected_op_is_exit_1_at_the_users_line(ascend_python, tmp_path):
    launches = tmp_path / "launches.yaml"
    launches.write_text("launches:\n  - kernel: clamp_window_kernel\n    grid: [48]\n"
                        "    signature: {x_ptr: '*fp32', out_ptr: '*fp32', n: i32}\n"
                        "    constexprs: {W: 3, BLOCK: 256}\n")
    code, out, err = run_cli("precheck", str(PRECHECK / "chained_bool.py"), "--launches", str(launches),
                             "--ascend-python", ascend_python, "--json")
    assert code == 1, err
    payload = json_payload(out)
    assert payload["lowered"] is False
    (entry,) = payload["launches"]
    line = next(i for i, text in enumerate((PRECHECK / "chained_bool.py").read_text().splitlines(), 1)
                if "W > 2 and" in text)
    assert entry["status"] == "failed"
    assert f"chained_bool.py:{line}:" in entry["error"]
    assert "chained boolean operators" in entry["error"]


def test_unknown_kernel_in_the_description_is_usage(ascend_python, tmp_path):
    launches = tmp_path / "launches.yaml"
    launches.write_text("launches:\n  - {kernel: no_such_kernel}\n")
    code, _, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--launches", str(launches),
                           "--ascend-python", ascend_python)
    assert code == 2
    assert "no_such_kernel" in err and "add_kernel" in err


def test_an_explicit_interpreter_that_does_not_exist_is_one_line_exit_2(tmp_path):
    """A path the user typed that names nothing is a usage error (exit 2), before any build or compile starts."""
    code, out, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--launches",
                             str(PRECHECK / "vector_add_launches.yaml"), "--ascend-python", str(tmp_path / "py"))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "no such interpreter" in err


def test_upstream_triton_environment_is_refused_exit_5():
    import sys

    code, _, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--launches",
                           str(PRECHECK / "vector_add_launches.yaml"), "--ascend-python", sys.executable)
    assert code == 5
    assert "not triton-ascend" in err and "Traceback" not in err


def test_real_example_whose_import_stops_at_a_device_line(ascend_python):
    """triton-ascend's own vector-add example (tests/data/real_ascend): torch_npu is stood in for, the import
    stops at the script's first NPU tensor, and the kernel defined above it still lowers."""
    folder = DATA / "real_ascend" / "triton_ascend_examples"
    code, out, err = run_cli("precheck", str(folder / "01_vector_add_example.py"), "--launches",
                             str(folder / "01_vector_add.launches.yaml"), "--ascend-python", ascend_python, "--json")
    assert code == 0, err
    payload = json_payload(out)
    (entry,) = payload["launches"]
    assert entry["kernel"] == "add_kernel" and entry["status"] == "lowered" and entry["core_type"] == "vector"
    device_line = next(i for i, text in enumerate((folder / "01_vector_add_example.py").read_text().splitlines(), 1)
                       if "device='npu'" in text)
    assert any(f"01_vector_add_example.py:{device_line} stopped" in p for p in payload["problems"])


def test_parameter_defaults_fill_a_description_and_a_missing_one_is_usage(ascend_python, tmp_path):
    kernel = tmp_path / "scale.py"
    kernel.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                      "def scale_kernel(x_ptr, n, SCALE: tl.constexpr = 2.0, BLOCK: tl.constexpr = 128):\n"
                      "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                      "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
                      "    tl.store(x_ptr + offs, x * SCALE, mask=offs < n)\n")
    launches = tmp_path / "launches.yaml"
    launches.write_text("launches:\n  - kernel: scale_kernel\n    signature: {x_ptr: '*fp32', n: i32}\n")
    code, out, err = run_cli("precheck", str(kernel), "--launches", str(launches), "--ascend-python", ascend_python,
                             "--json")
    assert code == 0, err
    (entry,) = json_payload(out)["launches"]
    assert entry["constexprs"] == {"SCALE": 2.0, "BLOCK": 128}  # the kernel's own defaults
    assert entry["ub"]["alloc_bytes"] == 128 * 4
    launches.write_text("launches:\n  - kernel: scale_kernel\n    signature: {x_ptr: '*fp32'}\n")
    code, _, err = run_cli("precheck", str(kernel), "--launches", str(launches), "--ascend-python", ascend_python)
    assert code == 2
    assert "parameter n of scale_kernel has no value" in err


def test_first_use_builds_the_environment_with_progress_and_fails_in_one_line(tmp_path, monkeypatch):
    """No environment given or cached: precheck builds one (progress on stderr); a failing step (here the venv
    itself, made to fail) is exit 5 with one error line naming the step, and no half-built environment is left."""
    from ascendopt.device import ascend_env

    monkeypatch.setenv("ASCENDOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ASCENDOPT_ASCEND_PYTHON", raising=False)
    monkeypatch.setattr(ascend_env.sys, "executable", "/bin/false")
    code, out, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--launches",
                             str(PRECHECK / "vector_add_launches.yaml"))
    assert code == 5
    assert out == ""
    assert "building the triton-ascend environment" in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "create the virtual environment failed" in errors[0]
    assert not (tmp_path / "cache" / "ascend-venv").exists()


def test_module_path_target_is_imported_from_the_current_folder_and_linted(ascend_python, monkeypatch):
    monkeypatch.chdir(PRECHECK)
    code, out, err = run_cli("precheck", "vector_add", "--launches", "vector_add_launches.yaml",
                             "--ascend-python", ascend_python, "--json")
    assert code == 0, err
    payload = json_payload(out)
    assert payload["target"] == "vector_add" and payload["lowered"] is True
    assert {e["kernel"] for e in payload["launches"]} == {"add_kernel", "matmul_kernel"}
    assert payload["lint"] is not None  # the module's file was found without importing it here


def test_text_report_lists_lint_findings_of_the_file(ascend_python, tmp_path):
    kernel = tmp_path / "copy.py"
    kernel.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                      "def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):\n"
                      "    offs = tl.arange(0, BLOCK)\n"
                      "    tl.store(y_ptr + offs, tl.load(x_ptr + offs))\n\n\n"
                      "def launch(x, y):\n"
                      "    copy_kernel[(1,)](x, y, BLOCK=64, num_warps=4)\n")
    launches = tmp_path / "launches.yaml"
    launches.write_text("launches:\n  - kernel: copy_kernel\n    grid: [1]\n"
                        "    signature: {x_ptr: '*fp32', y_ptr: '*fp32'}\n    constexprs: {BLOCK: 64}\n")
    code, out, err = run_cli("precheck", str(kernel), "--launches", str(launches), "--ascend-python", ascend_python)
    assert code == 0, err
    assert "lint: 1 finding(s)" in out
    assert f"{kernel}:12:" in out and "AO101" in out  # num_warps on an Ascend launch, at its line


def test_exec_file_with_workload_follows_the_one_convention(ascend_python):
    """An --exec-file that defines workload(), as freeze, collect and the gate take it: the module code runs
    once, then workload() launches the kernel; precheck records it, as freeze's own precheck does."""
    code, out, err = run_cli("precheck", str(PRECHECK / "vector_add.py"), "--exec-file",
                             str(PRECHECK / "vector_add_bench.py"), "--ascend-python", ascend_python, "--json")
    assert code == 0, err
    payload = json_payload(out)
    assert payload["lowered"] is True and "no launch of the target's kernels was recorded" not in payload["problems"]
    assert [(e["kernel"], e["constexprs"]["BLOCK"], e["grid"]) for e in payload["launches"]] == \
        [("add_kernel", 1024, [4])]


def test_freeze_of_own_code_with_torch_ops_only_records_nothing_to_lower(ascend_python, tmp_path, monkeypatch):
    """A triton-ascend environment present: own code whose workload launches no Triton kernel freezes (exit
    0), and the contract records "nothing to lower" instead of refusing a baseline that is fine."""
    import subprocess

    from ascendopt.contract.model import load
    from ascendopt.workspace import Workspace

    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "bench.py").write_text((PRECHECK / "torch_only_bench.py").read_text())
    (root / "tests" / "test_op.py").write_text("def test_op():\n    assert 1 + 1 == 2\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "baseline"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    monkeypatch.chdir(root)
    code, out, err = run_cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "aten::softmax", "--ascend-python", ascend_python)
    assert code == 0, err
    assert "refusing" not in err and "note: freeze: Ascend precheck nothing to lower" in err
    precheck = load(Workspace(root / ".ascendopt")).precheck
    assert precheck["status"] == "nothing" and precheck["verdict"].startswith("nothing to lower")
