"""precheck's inputs, checked before any compile: the YAML launch description, the target, the options."""

from types import SimpleNamespace

import pytest

from ascendopt.errors import EnvironmentProblem, UsageError
from ascendopt.lint import precheck as pc
from conftest import DATA

PRECHECK = DATA / "precheck"


def test_launch_file_of_the_test_data():
    launches, chip = pc.load_launch_file(PRECHECK / "vector_add_launches.yaml")
    assert chip == "Ascend910B2"
    assert [item["kernel"] for item in launches] == ["add_kernel", "matmul_kernel"]
    assert launches[0]["signature"]["x_ptr"] == "*fp32"
    assert launches[0]["constexprs"] == {"BLOCK": 1024}
    assert launches[0]["grid"] == [24]


@pytest.mark.parametrize("text, message", [
    ("launches: []\n", "non-empty 'launches'"),
    ("- kernel: k\n", "non-empty 'launches'"),
    ("launches:\n  - grid: [1]\n", r"launches\[0\]: expected a mapping with a 'kernel'"),
    ("launches:\n  - {kernel: k, grids: [1]}\n", r"launches\[0\]: unknown key\(s\) grids"),
    ("launches:\n  - {kernel: k, signature: {x: '*fp33'}}\n", r"signature x: '\*fp33' is not a Triton type"),
    ("launches:\n  - {kernel: k, signature: [x]}\n", "must be mappings"),
    ("launches:\n  - {kernel: k, grid: [0]}\n", "grid must be a positive int"),
    ("launches:\n  - {kernel: k, constexprs: {B: [1, 2]}}\n", "constexpr B"),
    ("chip: 5\nlaunches:\n  - {kernel: k}\n", "chip must be a chip name"),
    ("launches: [\n", "not valid YAML at line"),
])
def test_bad_launch_files_name_the_file_and_entry(tmp_path, text, message):
    path = tmp_path / "launches.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        pc.load_launch_file(path)
    assert str(path) in str(info.value)


def test_missing_launch_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read the launch description"):
        pc.load_launch_file(tmp_path / "none.yaml")


def test_exactly_one_launch_source():
    target = str(PRECHECK / "vector_add.py")
    with pytest.raises(UsageError, match="exactly one of --exec-file"):
        pc.precheck(target)
    with pytest.raises(UsageError, match="exactly one of --exec-file"):
        pc.precheck(target, exec_file="w.py", launch_file="l.yaml")


def test_bad_targets_and_chips(tmp_path):
    launches = str(PRECHECK / "vector_add_launches.yaml")
    with pytest.raises(UsageError, match="no such Python file"):
        pc.precheck(str(tmp_path / "missing.py"), launch_file=launches)
    with pytest.raises(UsageError, match="neither a Python file nor a module path"):
        pc.precheck("not a-module", launch_file=launches)
    with pytest.raises(UsageError, match="--exec-file .*no such file"):
        pc.precheck(str(PRECHECK / "vector_add.py"), exec_file=str(tmp_path / "w.py"))
    with pytest.raises(UsageError, match="not an Ascend NPU"):
        pc.precheck(str(PRECHECK / "vector_add.py"), launch_file=launches, chip="NVIDIA H200")


def test_no_environment_without_install_is_exit_5(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ASCENDOPT_ASCEND_PYTHON", raising=False)
    with pytest.raises(EnvironmentProblem, match="no triton-ascend environment"):
        pc.precheck(str(PRECHECK / "vector_add.py"), launch_file=str(PRECHECK / "vector_add_launches.yaml"),
                    install=False)


def test_verdict_lines():
    ok = {"launches": [{"kernel": "a", "status": "lowered"}, {"kernel": "b", "status": "lowered"}]}
    bad = {"launches": [{"kernel": "a", "status": "lowered"},
                        {"kernel": "b", "status": "failed", "error": "k.py:3: unsupported"}]}
    assert pc.verdict(ok) == "lowers (2 launches)"
    assert pc.verdict(bad) == "b does not lower: k.py:3: unsupported"
    assert pc.verdict({"launches": []}) == "no launch recorded"


def _own_code_contract(exec_file: str, kernel_filter: str):
    workload = SimpleNamespace(exec_file=exec_file, kernel_filter=kernel_filter)
    return SimpleNamespace(is_kernel=False, workload=workload)


def test_loop_precheck_is_not_run_on_npu_and_can_be_skipped(tmp_path):
    contract = _own_code_contract("w.py", "k")
    assert pc.loop_precheck(contract, "npu", tmp_path) is None  # the device compiles the kernels itself
    assert pc.loop_precheck(contract, "cpu", tmp_path, skip=True) == {"status": "skipped",
                                                                     "verdict": "skipped (--no-precheck)"}


def test_loop_precheck_never_installs(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ASCENDOPT_ASCEND_PYTHON", raising=False)
    record = pc.loop_precheck(_own_code_contract("w.py", "k"), "cpu", tmp_path)
    assert record["status"] == "unavailable" and "no triton-ascend environment" in record["verdict"]
    assert not (tmp_path / "cache").exists()


def test_loop_precheck_own_code_that_does_not_lower(ascend_python, tmp_path):
    contract = _own_code_contract("chained_bool_workload.py", "clamp_window")
    record = pc.loop_precheck(contract, "cpu", PRECHECK, ascend_python=ascend_python)
    assert record["status"] == "fails"
    assert record["verdict"].startswith("clamp_window_kernel does not lower: ")
    assert "chained_bool.py:17:" in record["verdict"] and "chained boolean" in record["verdict"]


def test_loop_precheck_bundled_kernel_lowers_at_the_candidate_config(ascend_python, tmp_path):
    """A frozen bundled kernel: its launcher runs in the child over the contract's shape cases at the candidate's
    configuration (kernels/launches.py:record_contract), every launch recorded and lowered."""
    case = SimpleNamespace(dims={"B": 2, "T": 37, "D": 64})
    workload = SimpleNamespace(kernel="l2norm", shapes=[case], dtype="bf16", mode="fwd", config={})
    contract = SimpleNamespace(is_kernel=True, workload=workload)
    record = pc.loop_precheck(contract, "cpu", tmp_path, config={"block_rows": 8}, ascend_python=ascend_python)
    assert record["status"] == "lowers", record
    # fwd only: the forward kernel, bulk and tail tiles of 74 rows at 8 rows per tile
    assert record["launches"] == 2 and record["verdict"] == "lowers (2 launches)"
    assert 0 < record["ub_max_percent"] < 100


@pytest.mark.parametrize("source, call", [
    ("def workload():\n    pass\n", "workload"),
    ("import torch\nx = 1\n\ndef workload():\n    return x\n\nif __name__ == '__main__':\n    workload()\n",
     "workload"),
    ("def make():\n    return print\n\nworkload = make()\n", "workload"),
    ("from helpers import run as workload\n", "workload"),
    ("class workload:\n    def __init__(self):\n        pass\n", "workload"),
    ("x = 1\nprint(x)\n", None),  # a script: its module code launches, as `python FILE`
    ("def main():\n    workload = 1\n", None),  # only a top-level binding counts
    ("def workload(:\n", None),  # does not parse: the child reports it
])
def test_exec_file_call_follows_the_tools_one_convention(tmp_path, source, call):
    path = tmp_path / "bench.py"
    path.write_text(source)
    assert pc.exec_file_call(path) == call


def _report(launches=(), problems=(), other=0):
    return {"triton": "3.2.0", "chip": "Ascend910B2", "launches": list(launches),
            "problems": [*problems, pc.NO_LAUNCH] if not launches else list(problems), "other_launches": other}


def test_own_code_without_a_triton_launch_has_nothing_to_lower():
    record = pc.nothing_recorded(_report(), "my_op")
    assert record["status"] == "nothing"
    assert record["verdict"] == "nothing to lower: no Triton launch of a kernel whose name holds 'my_op' was recorded"
    record = pc.nothing_recorded(_report(other=3), "my_op")
    assert record["status"] == "nothing"
    assert record["verdict"].endswith("; 3 launch(es) of other Triton kernels left out")
    # a workload that stopped in the triton-ascend environment was not checked: not run, never "fails"
    stopped = pc.nothing_recorded(_report(problems=["bench.py stopped: ImportError: no module named vendor"]), "k")
    assert stopped["status"] == "unavailable" and "ImportError: no module named vendor" in stopped["verdict"]


def test_the_contract_accepts_every_status_the_precheck_records():
    from ascendopt.contract.model import _Fields, _precheck

    for status in ("lowers", "fails", "nothing", "skipped", "unavailable"):
        assert _precheck(_Fields("contract.yaml"), {"status": status, "verdict": "v"})["status"] == status


def test_loop_precheck_own_code_with_torch_ops_only_has_nothing_to_lower(ascend_python):
    contract = _own_code_contract("torch_only_bench.py", "my_op")
    record = pc.loop_precheck(contract, "cpu", PRECHECK, ascend_python=ascend_python)
    assert record["status"] == "nothing", record
    assert record["verdict"].startswith("nothing to lower: no Triton launch")


def test_loop_precheck_own_code_whose_triton_kernels_are_elsewhere_has_nothing_to_lower(ascend_python):
    """The workload launches add_kernel, but the frozen filter names another kernel (a vendor op, say)."""
    contract = _own_code_contract("vector_add_bench.py", "aclnnMatmul")
    record = pc.loop_precheck(contract, "cpu", PRECHECK, ascend_python=ascend_python)
    assert record["status"] == "nothing", record
    assert record["verdict"].endswith("; 1 launch(es) of other Triton kernels left out")
    control = pc.loop_precheck(_own_code_contract("vector_add_bench.py", "add_kernel"), "cpu", PRECHECK,
                               ascend_python=ascend_python)
    assert control["status"] == "lowers" and control["verdict"].startswith("lowers (1 launch")
