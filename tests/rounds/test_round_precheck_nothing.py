"""Own code whose workload launches no Triton kernel (torch ops only), with a triton-ascend environment
present: freeze records "nothing to lower" and each optimize-round's precheck does too, without reddening
the round. Needs the triton-ascend venv (conftest's ``ascend_python``)."""

from _own_code import SLEEP_OP, commit_repo, sleep_repo_files
from ascendopt.freeze.task import freeze_exec_file
from ascendopt.rounds import run as round_run
from ascendopt.workspace import Workspace


def test_a_round_of_own_code_without_triton_kernels_has_nothing_to_lower(ascend_python, tmp_path, monkeypatch):
    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.008))
    monkeypatch.chdir(root)
    ws = Workspace(root / ".ascendopt")
    contract = freeze_exec_file(ws, exec_file="bench.py", tests=["tests/test_op.py"], kernel_filter="my_op_kernel",
                                ascend_python=ascend_python)
    assert contract.precheck["status"] == "nothing", contract.precheck
    (root / "op.py").write_text(SLEEP_OP.format(delay=0.004))  # an honest faster change
    outcome = round_run.run_round(ws, hypothesis="code: sleep less", pairs=6, reprofile=False,
                                  ascend_python=ascend_python)
    gate = outcome.record.gate
    assert gate["passed"] is True and outcome.exit_code == 0, gate
    assert gate["precheck"]["status"] == "nothing" and gate["precheck"]["verdict"].startswith("nothing to lower")
