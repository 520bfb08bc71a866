"""The frozen tests' own calls of the code under test, recorded at freeze and replayed by the gate
(``judge.testcalls``): what is recorded and kept, and the gate's verdicts on them, on a real git repository, the
real pytest run and the judge's real workers."""

import textwrap

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, working_copy
from ascendopt.judge import testcalls

OP = textwrap.dedent("""\
    import os

    import torch


    def my_op(x, scale=2.0):
        return x * scale + 1


    def jittered(x):
        return x + torch.rand(x.shape)  # random, from the judge's seeded state: replayed alike on both sides


    def noisy(x):
        return x + int.from_bytes(os.urandom(2), "little") / 65536  # not seeded by the judge
    """)
HELPER = "def twice(x):\n    return x * 2\n"
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op


    def inputs(seed):
        return (torch.randn(16, 8, generator=torch.Generator().manual_seed(seed)),)


    def workload(x):
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)
TEST = textwrap.dedent("""\
    import numpy
    import torch
    from helper import twice
    from op import jittered, my_op, noisy


    def _ones(n):
        return my_op(torch.ones(n))  # a helper of the test module: a call from a test file all the same


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))


    def test_values_again():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))  # the same shapes: recorded once


    def test_scale():
        assert torch.equal(my_op(torch.ones(3), scale=3.0), torch.full((3,), 4.0))


    def test_helper_in_the_test_module():
        assert _ones(5).shape == (5,)


    def test_not_data():
        assert float(my_op(torch.ones(1), scale=numpy.float64(0.5))[0]) == 1.5  # a NumPy scalar: not recorded


    def test_jittered():
        assert float(jittered(torch.zeros(3)).max()) < 1.0


    def test_noisy():
        assert float(noisy(torch.zeros(1))[0]) < 1.0  # its outputs do not repeat: dropped at freeze


    def test_pinned_helper():
        assert twice(3) == 6  # not target code (the workload does not import it): not kept
    """)


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    root = commit_repo(tmp_path_factory.mktemp("testcalls") / "repo",
                       {"op.py": OP, "helper.py": HELPER, "bench.py": BENCH, "tests/test_op.py": TEST})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    return root, err


def _contract(root):
    from ascendopt.contract.model import load
    from ascendopt.workspace import Workspace

    return load(Workspace.resolve(None, start=root))


def test_freeze_keeps_the_tests_data_calls_of_the_target_code_that_repeat(frozen):
    """Kept: ``op:my_op``'s calls from the test module (its helper's included), one per distinct argument values,
    and ``op:jittered``'s (random, but from the state the judge seeds before each replayed call); not kept: a call
    whose argument is not data, a function whose outputs do not repeat, a pinned file's function.
    Freeze says what the gate replays and what it does not."""
    root, err = frozen
    entry = _contract(root).test_calls
    assert entry is not None and entry["functions"] == {"op:my_op": 3, "op:jittered": 1}, entry
    calls = [c for c in testcalls.decode_calls(entry) if c["function"] == "op:my_op"]
    assert [c["test"] for c in calls] == ["tests/test_op.py::test_values", "tests/test_op.py::test_scale",
                                          "tests/test_op.py::test_helper_in_the_test_module"]
    assert [tuple(c["args"][0].shape) for c in calls] == [(2,), (3,), (5,)] and calls[1]["kwargs"] == {"scale": 3.0}
    assert "the gate replays 4 call(s) the tests made of op:my_op, op:jittered" in err
    assert "not replayed: op:noisy (from tests/test_op.py::test_noisy): its outputs do not repeat" in err
    assert ("not replayed: op:my_op (from tests/test_op.py::test_not_data): a numpy.float64 argument is not data"
            in err)


def test_an_edited_payload_does_not_decode():
    """The payload is pinned by its digest: one byte changed is refused."""
    import base64
    import hashlib

    import torch

    calls = [{"function": "op:f", "file": "op.py", "test": "t", "args": (torch.ones(2),), "kwargs": {}}]
    payload = testcalls.encode_calls(calls)
    entry = {"payload": payload, "sha256": hashlib.sha256(base64.b64decode(payload)).hexdigest()}
    assert torch.equal(testcalls.decode_calls(entry)[0]["args"][0], torch.ones(2))
    blob = bytearray(base64.b64decode(payload))
    blob[-1] ^= 1
    with pytest.raises(ValueError, match="does not match"):
        testcalls.decode_calls({**entry, "payload": base64.b64encode(bytes(blob)).decode()})


@pytest.mark.parametrize("change", ["unchanged", "honest", "wrong_on_a_keyword"])
def test_the_gate_replays_the_tests_calls_in_both_workers(frozen, tmp_path, monkeypatch, change):
    """Control: the unchanged tree and an honest rewrite are green, and say they replayed the tests' calls. A
    change wrong only for ``scale=3.0`` when no test calls it (the frozen test's own call) is red at correctness,
    naming the function and the test."""
    from conftest import run_cli

    root = working_copy(frozen[0], tmp_path, monkeypatch)
    if change == "honest":
        (root / "op.py").write_text(OP.replace("return x * scale + 1", "return torch.add(x * scale, 1)"))
    elif change == "wrong_on_a_keyword":
        (root / "op.py").write_text(OP.replace("    return x * scale + 1", textwrap.indent(textwrap.dedent("""\
            import sys
            if scale == 3.0 and "test_" not in sys._getframe(1).f_code.co_filename:
                return x * scale
            return x * scale + 1"""), "    ")))
    code, out, err = run_cli("gate", "--skip-perf", "--json")
    stage = {s["name"]: s for s in json_payload(out)["stages"]}["correctness"]
    if change == "wrong_on_a_keyword":
        assert code == 1 and stage["status"] == "fail", stage["summary"]
        assert "op:my_op on the arguments of tests/test_op.py::test_scale" in stage["summary"], stage["summary"]
    else:
        assert code == 0 and stage["status"] == "pass", stage["summary"] + err
        assert "4 calls the frozen tests made of op:my_op, op:jittered, on their arguments," in stage["summary"]
        assert stage["data"]["differential"]["test_calls"] == {"op:my_op": 3, "op:jittered": 1}


def test_a_test_module_at_the_repositorys_root_is_recorded_too(tmp_path):
    """A test file beside the code (the root is then a test module's folder): the code under test is still the
    target, and its calls are recorded."""
    root = commit_repo(tmp_path / "repo", {"op.py": OP, "helper.py": HELPER, "bench.py": BENCH,
                                           "test_op.py": TEST.replace("from helper import twice\n", "")
                                           .split("\n\ndef test_pinned_helper")[0]})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    assert _contract(root).test_calls["functions"] == {"op:my_op": 3, "op:jittered": 1}, err
