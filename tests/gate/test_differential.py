"""The judge's differential check: the working tree against the frozen commit on inputs the frozen commit's worker
makes from seeds drawn per command, at the workload's shape, every bucket of the contract's shape mix and hidden
shapes drawn from the mix's range; compared in the parent, red whatever the frozen tests said.

One repository is frozen per module with a hand-written mix (``--shapes-file``): buckets of 16 and 256 rows. The
frozen test calls the op on 64 rows only, so each wrong change below passes plain pytest (checked first).
"""

import subprocess
import sys
import textwrap

import pytest

from _cli_json import json_payload
from _own_code import SHAPED_BENCH, commit_repo, freeze_in, frozen_shaped_repo, two_bucket_mix, working_copy
from conftest import run_cli

OP = "def my_op(x):\n    return x * 2 + 1\n"
TEST = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_my_op():
        x = torch.ones(64, 64)
        assert torch.equal(my_op(x), x * 2 + 1)
    """)
@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return frozen_shaped_repo(tmp_path_factory.mktemp("differential") / "repo", OP, TEST, small_weight=0.3)


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    return working_copy(frozen_repo, tmp_path, monkeypatch)


def _plain_pytest_passes(repo) -> None:
    """The frozen test alone, as a plain pytest run sees the change: it passes (the change fools it)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/test_op.py"], cwd=repo, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-1500:]


def _gate(repo, op: str):
    (repo / "op.py").write_text(op)
    code, out, err = run_cli("gate", "--skip-perf", "--json")
    return code, {s["name"]: s for s in json_payload(out)["stages"]}, err


def test_control_an_honest_change_passes_at_every_shape(repo):
    code, stages, err = _gate(repo, "def my_op(x):\n    return x + x + 1\n")
    assert code == 0, err[-2000:]
    found = stages["correctness"]["data"]["differential"]
    # the workload's shape, both buckets and at least the smallest and largest hidden shapes
    assert found["inputs"] == "trusted maker" and len(found["shapes"]) >= 5, found
    assert any(s.startswith("bucket 2 [[256, 64]]") for s in found["shapes"])
    assert all(o["passed"] for o in found["outputs"]) and found["calls"] >= 5
    assert found["value_probe"] == "matched on the workload's inputs scaled by 16", found


def test_a_change_wrong_only_off_the_tile_multiple_is_red_naming_a_hidden_shape(repo):
    op = "def my_op(x):\n    if x.shape[0] % 16:\n        return x * 2\n    return x * 2 + 1\n"
    (repo / "op.py").write_text(op)
    _plain_pytest_passes(repo)
    code, stages, _ = _gate(repo, op)
    red = stages["correctness"]
    assert code == 1 and red["status"] == "fail", red
    assert "differential check against the frozen commit: hidden shape [[" in red["summary"], red["summary"]


def test_a_change_wrong_only_on_a_heavy_bucket_is_red_naming_the_bucket(repo):
    op = "def my_op(x):\n    if x.shape[0] > 200:\n        return x * 2\n    return x * 2 + 1\n"
    (repo / "op.py").write_text(op)
    _plain_pytest_passes(repo)
    code, stages, _ = _gate(repo, op)
    red = stages["correctness"]
    assert code == 1 and "bucket 2 [[256, 64]]: output" in red["summary"], red["summary"]


def test_a_change_right_only_on_the_tests_inputs_is_red_whatever_the_tests_say(repo):
    """The frozen test's input is all ones: a change that is right there and wrong on any other values passes
    plain pytest; the differential check's inputs are drawn per command, so it cannot be right by recognition."""
    op = ("import torch\n\n\ndef my_op(x):\n    if bool((x == 1).all()):\n        return x * 2 + 1\n"
          "    return torch.zeros_like(x)\n")
    (repo / "op.py").write_text(op)
    _plain_pytest_passes(repo)
    code, stages, _ = _gate(repo, op)
    red = stages["correctness"]
    assert code == 1 and "the workload's shape: call 1: output" in red["summary"], red["summary"]
    assert stages["correctness"]["data"]["differential"]["inputs"] == "trusted maker"


def test_freeze_refuses_a_mix_the_workload_cannot_make_naming_the_buckets(tmp_path):
    bench = SHAPED_BENCH.replace("def inputs(seed, shape=None):\n    rows, cols = shape[0] if shape is not None "
                          "else (64, 64)", "def inputs(seed):\n    rows, cols = 64, 64")
    assert bench != SHAPED_BENCH
    root = tmp_path / "repo"
    commit_repo(root, {"op.py": OP, "bench.py": bench, "tests/test_op.py": TEST, "mix.yaml": two_bucket_mix(0.3)})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--shapes-file", "mix.yaml", "--no-profile", "--no-precheck")
    assert code == 2, err
    assert "cannot make 2 of 2 bucket(s) of the shape mix: bucket 1 [[16, 64]]: inputs(seed) takes no shape" in err
    assert not (root / ".ascendopt" / "contract.yaml").exists()


# right on every value the workload's randn draws, 0 wherever |x| > 7 (a saturating fast path)
SATURATES = "import torch\n\n\ndef my_op(x):\n    return torch.where(x.abs() > 7, torch.zeros_like(x), x * 2 + 1)\n"


def test_a_change_that_differs_only_outside_the_workloads_value_range_is_inconclusive_not_green(repo):
    code, stages, _ = _gate(repo, SATURATES)
    stage = stages["correctness"]
    assert code == 6 and stage["status"] == "inconclusive", stage
    assert "on the workload's inputs scaled by 16 the outputs differ from the frozen commit's" in stage["summary"]
    assert "--no-value-probe" in stage["summary"] and stage["data"]["differential"]["value_probe"] == "differs"


def test_a_contract_frozen_without_the_value_probe_judges_the_workloads_range_only(tmp_path, monkeypatch):
    frozen = frozen_shaped_repo(tmp_path / "frozen", OP, TEST, 0.3, "--no-value-probe")
    assert "value_probe: false" in (frozen / ".ascendopt" / "contract.yaml").read_text()
    repo = working_copy(frozen, tmp_path, monkeypatch)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    code, stages, err = _gate(repo, SATURATES)
    assert code == 0, err[-2000:]
    assert stages["correctness"]["data"]["differential"]["value_probe"] == "not run"
