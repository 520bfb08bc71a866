"""The contract: YAML round trip, validation errors that name the field, digest against hand edits."""

import dataclasses

import pytest
import yaml

from ascendopt.contract import model as contract_mod
from ascendopt.contract.model import (
    BaselineTiming,
    Contract,
    FrozenFile,
    ShapeCase,
    Tolerance,
    Workload,
    load,
    save,
    sealed,
)
from ascendopt.errors import ContractError, IntegrityError, UsageError
from ascendopt.workspace import Workspace


def _contract(**changes) -> Contract:
    base = Contract(
        op="rms_norm",
        entry_point="ascendopt.kernels.rms_norm:rms_norm",
        backend="cpu",
        device={"backend": "cpu", "name": "cpu (Triton interpreter)", "versions": {"torch": "2.13.0", "cann": None}},
        workload=Workload(kind="kernel", kernel="rms_norm", dtype="bf16", mode="fwdbwd",
                          shapes=(ShapeCase("tiny", {"B": 2, "T": 64, "D": 128, "act": 0}),
                                  ShapeCase("tiny_varlen", {"D": 128, "seqlens": (42, 0, 86)})),
                          varlen=True, config={"BLOCK": 64}),
        tolerances={"fwd": Tolerance(0.01), "bwd": Tolerance(0.02, 2.0)},
        frozen_files=(FrozenFile("ascendopt.kernels.rms_norm:rms_norm_reference", "oracle", "a" * 64),),
        commands={"validation": ("ascendopt", "gate", "--skip-perf"), "benchmark": ("ascendopt", "gate")},
        baseline=(BaselineTiming("tiny/fwdbwd", 0.012, 0.011, 0.013, 0.02, 30),),
        expected_kernels=("_rms_norm_fwd_kernel",),
        kernels_seen=("_rms_norm_fwd_kernel", "aten::empty"),
        metric_groups=("PipeUtilization",),
        git={"commit": "0" * 40, "dirty": False},
        created_at="2026-12-01T00:00:00+00:00",
    )
    return dataclasses.replace(base, **changes)


def test_round_trip_keeps_every_field_and_varlen_tuple(tmp_path):
    ws = Workspace(tmp_path / "ws")
    c = _contract()
    save(ws, c)
    back = load(ws)
    assert back == c
    assert back.workload.shapes[1].dims["seqlens"] == (42, 0, 86) and back.workload.shapes[1].varlen
    text = ws.contract_path.read_text()
    assert text.startswith("schema: 1\n") and "integrity:" in text


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("tolerances", "fwd", "rtol"), 0, "contract.yaml: tolerances.fwd.rtol: must be > 0"),
        (("tolerances", "bwd", "lowp_factor"), "two", "contract.yaml: tolerances.bwd.lowp_factor: expected a number"),
        (("workload", "mode"), "bwd", "contract.yaml: workload.mode: 'bwd' is not one of fwd, fwdbwd"),
        (("workload", "shapes"), [], "contract.yaml: workload.shapes: empty"),
        (("workload", "config", "BLOCK"), 6.5, "contract.yaml: workload.config.BLOCK: expected an integer"),
        (("baseline",), [], "contract.yaml: baseline: empty"),
        (("expected_kernels",), [], "contract.yaml: expected_kernels: empty"),
        (("backend",), "tpu", "contract.yaml: backend: 'tpu' is not one of npu, cuda, cpu"),
        (("max_rounds",), 0, "contract.yaml: max_rounds: expected a positive integer"),
        (("workload", "shapes", 0, "dims", "T"), -1,
         "contract.yaml: workload.shapes[0].dims.T: expected an integer >= 0"),
        (("workload", "shapes", 1, "dims", "seqlens"), [0, 0], "contract.yaml: workload.shapes[1].dims.seqlens: "),
    ],
)
def test_validation_names_file_and_field(path, value, message):
    data = sealed(_contract())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ContractError) as err:
        Contract.from_dict(data)
    assert str(err.value).startswith(message)


def test_missing_fields_and_bad_digests_are_named():
    data = sealed(_contract())
    del data["tolerances"]["fwd"]
    with pytest.raises(ContractError, match=r"contract.yaml: tolerances.fwd: missing"):
        Contract.from_dict(data)
    data = sealed(_contract())
    data["frozen_files"][0]["sha256"] = "xyz"
    with pytest.raises(ContractError, match=r"frozen_files\[0\].sha256: not a sha256 hex digest"):
        Contract.from_dict(data)
    data = sealed(_contract())
    del data["workload"]["dtype"]
    with pytest.raises(ContractError, match=r"workload.dtype: missing"):
        Contract.from_dict(data)


def test_hand_edited_tolerance_is_an_integrity_error_naming_the_field(tmp_path):
    ws = Workspace(tmp_path / "ws")
    save(ws, _contract())
    text = ws.contract_path.read_text()
    assert "rtol: 0.01\n" in text
    ws.contract_path.write_text(text.replace("rtol: 0.01\n", "rtol: 0.5\n"))
    with pytest.raises(IntegrityError, match=r"contract.yaml: tolerances: changed after freeze"):
        load(ws)
    assert load(ws, check_digest=False).tolerances["fwd"].rtol == 0.5  # the edit itself is valid YAML


def test_digest_is_checked_before_validation(tmp_path):
    # A hand edit that also breaks validation is still reported as tampering (exit 3), not as bad input.
    ws = Workspace(tmp_path / "ws")
    save(ws, _contract())
    ws.contract_path.write_text(ws.contract_path.read_text().replace("rtol: 0.01\n", "rtol: -1\n"))
    with pytest.raises(IntegrityError, match="tolerances"):
        load(ws)
    with pytest.raises(ContractError, match="tolerances.fwd.rtol: must be > 0"):
        load(ws, check_digest=False)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(op="other"), "op"),
    (lambda d: d["workload"]["shapes"].pop(), "workload"),
    (lambda d: d.update(extra_field=1), "extra_field"),
    (lambda d: d.pop("kernels_seen"), "kernels_seen"),
    (lambda d: d["integrity"].pop("fields"), "integrity"),
])
def test_any_edit_of_a_frozen_field_is_detected(tmp_path, edit, field):
    ws = Workspace(tmp_path / "ws")
    save(ws, _contract())
    data = yaml.safe_load(ws.contract_path.read_text())
    edit(data)
    ws.contract_path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(IntegrityError, match=rf"contract.yaml: {field}:"):
        load(ws)


def test_re_sealing_by_hand_edit_of_the_overall_digest_is_detected():
    data = sealed(_contract())
    data["integrity"]["digest"] = "0" * 64
    with pytest.raises(IntegrityError, match="integrity.digest"):
        contract_mod.verify_digest(data)


TEST_SET = {"runner": "pytest",
            "tests": {"tests/test_op.py::test_a": "passed", "tests/test_op.py::test_b[2]": "skipped"}}


def _own(**changes) -> Contract:
    return _contract(**{"workload": Workload(kind="exec-file", exec_file="bench.py", kernel_filter="chunk_fwd"),
                        "tolerances": {}, "expected_kernels": ("chunk_fwd",), "test_set": TEST_SET,
                        "frozen_files": (FrozenFile("tests/conftest.py", "test-config", "b" * 64),
                                         FrozenFile("pyproject.toml::[tool.pytest]", "test-config", "c" * 64)),
                        **changes})


def test_own_code_contract_needs_no_tolerances(tmp_path):
    ws = Workspace(tmp_path / "ws")
    own = _own()
    save(ws, own)
    assert load(ws) == own
    data = sealed(own)
    del data["workload"]["kernel_filter"]
    with pytest.raises(ContractError, match="workload.kernel_filter: missing"):
        Contract.from_dict(data)


@pytest.mark.parametrize("test_set, message", [
    (None, "contract.yaml: test_set: missing (own code records which frozen tests passed on the baseline)"),
    ({"runner": "nose", "tests": {}}, "contract.yaml: test_set.runner: 'nose' is not one of pytest, command"),
    ({"runner": "pytest"}, "contract.yaml: test_set.tests: missing"),
    ({"runner": "pytest", "tests": {"t.py::a": "failed"}},
     "contract.yaml: test_set.tests['t.py::a']: 'failed' is not one of passed, skipped, xfailed, xpassed"),
    ({"runner": "pytest", "tests": {"t.py::a": "skipped"}}, "contract.yaml: test_set.tests: no test passed"),
    ({"runner": "command", "passed": 0}, "contract.yaml: test_set.passed: expected a positive integer"),
])
def test_own_code_test_set_is_validated_naming_the_field(test_set, message):
    data = sealed(_own())
    data["test_set"] = test_set
    with pytest.raises(ContractError) as err:
        Contract.from_dict(data)
    assert str(err.value).startswith(message)


def test_an_edited_frozen_test_outcome_is_an_integrity_error(tmp_path):
    ws = Workspace(tmp_path / "ws")
    save(ws, _own())
    text = ws.contract_path.read_text()
    ws.contract_path.write_text(text.replace("test_b[2]: skipped", "test_b[2]: passed"))
    with pytest.raises(IntegrityError, match=r"contract.yaml: test_set: changed after freeze"):
        load(ws)


def test_missing_contract_says_run_freeze(tmp_path):
    with pytest.raises(UsageError, match="run `ascendopt freeze` first"):
        load(Workspace(tmp_path / "nothing"))


def test_save_refuses_a_contract_that_would_not_load(tmp_path):
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(ContractError, match="tolerances.fwd.rtol: must be > 0"):
        save(ws, _contract(tolerances={"fwd": Tolerance(0.0), "bwd": Tolerance(0.02)}))
    assert not ws.contract_path.exists()
