"""Own code: the working tree's workload() outputs against the frozen commit's (judge.equivalence).

The repository's frozen test only checks the output's shape, so a wrong kernel passes it: the output
check must catch it. ``op.py`` (not frozen) is what each test edits; ``bench.py`` returns a dict of
tensors computed by a Triton kernel under the interpreter, from an input drawn without a seed (the
output children seed torch, so both sides draw the same ``x``).
"""

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, working_copy
from _own_code import git as _git
from ascendopt.contract.model import EQUIVALENCE_TOLERANCES, Contract
from ascendopt.errors import ContractError, UsageError
from ascendopt.judge import equivalence as eq
from ascendopt.workspace import read_yaml

OP = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl

    SCALE = 2.0


    @triton.jit
    def _scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


    def my_op(x):
        y = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 32),)](x, y, x.numel(), SCALE, BLOCK=32)
        return y
    """)
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op

    x = torch.randn(64)


    def workload():
        y = my_op(x)
        return {"y": y, "sum": y.sum().reshape(1), "n": torch.tensor([x.numel()])}
    """)
OUTPUTS = ["output['y']", "output['sum']", "output['n']"]


def _freeze(*extra: str):
    from conftest import run_cli

    return run_cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                   "_scale_kernel", *extra)


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    root = commit_repo(tmp_path_factory.mktemp("equiv") / "repo", {
        "op.py": OP, "bench.py": BENCH,
        "tests/test_op.py": "import torch\nfrom op import my_op\n\n\ndef test_shape():\n"
                            "    assert my_op(torch.ones(3)).shape == (3,)\n"})
    code, out, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                               "_scale_kernel")
    assert code == 0, err
    return root


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    copy = working_copy(frozen_repo, tmp_path, monkeypatch)
    return copy


def _contract(repo: Path) -> dict:
    return read_yaml(repo / ".ascendopt" / "contract.yaml")


def _set_scale(repo: Path, expr: str) -> None:
    op = repo / "op.py"
    op.write_text(op.read_text().replace("SCALE = 2.0", f"SCALE = {expr}"))


def _rebench(repo: Path, body: str) -> None:
    """A new frozen workload: ``bench.py`` replaced and committed (re-freeze follows)."""
    (repo / "bench.py").write_text(textwrap.dedent(body))
    _git(repo, "commit", "-qam", "new workload")


def _correctness(out: str) -> dict:
    return json_payload(out)["stages"][1]


# -- the gate ----------------------------------------------------------------------------------------


def test_freeze_records_the_outputs_and_the_default_tolerances(repo):
    equivalence = dict(_contract(repo)["equivalence"])
    assert equivalence == {"enabled": True, "reason": None, "outputs": OUTPUTS,
                           "tolerances": EQUIVALENCE_TOLERANCES}
    # nothing of the frozen outputs is stored: every gate calls the frozen commit's worker beside the candidate's
    assert not (repo / ".ascendopt" / "outputs").exists()


def test_a_wrong_kernel_that_passes_its_tests_is_red_naming_the_output_and_the_worst_element(repo, cli):
    _set_scale(repo, "2.5")
    junit = repo.parent / "gate.xml"
    code, out, err = cli("gate", "--skip-perf", "--json", "--junit", str(junit))
    assert code == 1, err
    stage = _correctness(out)
    assert stage["status"] == "fail" and stage["exit_code"] == 1 and stage["workload_error"] is None
    by_name = {c["name"]: c for c in stage["checks"]}
    assert by_name["tests/test_op.py::test_shape"]["passed"]  # the frozen test did not see it
    torch.manual_seed(0)
    x = torch.randn(64)
    i = int(x.abs().argmax())  # the largest |x| is furthest beyond rtol * |baseline| + atol
    base, cand = float(x[i] * 2.0), float(x[i] * 2.5)
    y = (f"output['y']: 64 of 64 element(s) out of tolerance (fp32 rtol 1e-05, atol 1e-05); worst at [{i}]: "
         f"baseline {base:.6g}, candidate {cand:.6g}, abs err {cand - base:.3g}, rel err 0.25")
    assert by_name["output['y']"] == {"name": "output['y']", "passed": False, "message": y}
    assert not by_name["output['sum']"]["passed"]
    assert by_name["output['n']"] == {"name": "output['n']", "passed": True,
                                      "message": "output['n']: 1 element(s) equal (exact, int64)"}
    assert stage["summary"].startswith("differential check against the frozen commit: " + y + "; output['sum']: ")
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")
             if c.get("classname") == "gate.correctness"}
    assert [n for n in cases if n.startswith("output")] == OUTPUTS  # one testcase per compared output
    assert cases["output['y']"].find("failure").text == y and cases["output['n']"].find("failure") is None
    code, out, err = cli("gate", "--skip-perf")
    assert code == 1 and y in " ".join(out.split())  # the table's lines wrap
    assert "gate red at correctness: differential check against the frozen commit" in err


def test_a_change_within_the_tolerance_is_green_with_a_check_per_output(repo, cli):
    _set_scale(repo, "2.0 * (1 + 2e-6)")  # 2e-6 relative: inside fp32's 1e-5
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 0, err
    stage = _correctness(out)
    checks = {c["name"]: c for c in stage["checks"] if c["name"].startswith("output")}
    assert list(checks) == OUTPUTS and all(c["passed"] for c in checks.values())
    assert checks["output['y']"]["message"].startswith(
        "output['y']: 64 element(s) within tolerance (fp32 rtol 1e-05, atol 1e-05); max abs err ")
    assert stage["summary"].endswith("; workload() ran; the differential check: 1 call on the workload's own inputs "
                                     "and 1 call the frozen tests made of op:my_op, on their arguments, match the "
                                     "frozen commit")


def test_an_in_place_write_to_a_module_level_input_is_red_naming_it(repo, cli):
    op = repo / "op.py"  # the output is computed first, so only the input write differs
    op.write_text(op.read_text().replace("    return y\n", "    x[-1] += 1\n    return y\n"))
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 1, err
    stage = _correctness(out)
    failed = [c for c in stage["checks"] if not c["passed"]]
    # the frozen test's own call of my_op writes its argument too (replayed: judge.testcalls)
    assert [c["name"] for c in failed] == ["input x", "op:my_op on the arguments of tests/test_op.py::test_shape: "
                                                      "argument 1"]
    assert failed[0]["message"].startswith("in-place write to input x: 1 of 64 element(s) changed, max abs change "
                                           "1 at [63] (")
    assert failed[0]["message"].endswith("(the frozen commit's workload() does not write it)")
    assert stage["data"]["differential"]["inputs_changed"]["baseline"] == {}


def test_an_input_the_frozen_commit_writes_in_place_too_is_not_red(repo, cli):
    op = repo / "op.py"
    op.write_text(op.read_text().replace("    return y\n", "    x[-1] += 1\n    return y\n"))
    _git(repo, "commit", "-qam", "the baseline writes its input")
    code, out, err = _freeze("--force")
    assert code == 0, err
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 0, err
    written = _correctness(out)["data"]["differential"]["inputs_changed"]
    assert list(written["baseline"]) == list(written["candidate"]) == ["x"]


def test_a_workload_raising_in_the_output_call_is_a_workload_error(repo, cli):
    op = repo / "op.py"  # the frozen test calls my_op on 3 values, the workload on 64
    op.write_text(op.read_text().replace("    y = torch", "    if x.numel() > 3:\n"
                                                        "        raise ValueError('planted')\n    y = torch"))
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 1, err
    stage = _correctness(out)
    assert stage["workload_error"] == stage["summary"]
    assert stage["summary"].startswith(f"candidate: {repo / 'bench.py'}:8: workload() raised ValueError: planted")
    assert stage["summary"].endswith("(workload() checked calls)")


def test_a_tolerance_override_at_freeze_is_frozen_and_honoured(repo, cli):
    code, out, err = _freeze("--force", "--equivalence-tol", "fp32=1e-7:0")
    assert code == 0, err
    assert _contract(repo)["equivalence"]["tolerances"]["fp32"] == {"rtol": 1e-7, "atol": 0.0}
    _set_scale(repo, "2.0 * (1 + 2e-6)")  # green under the defaults (test above), not under 1e-7
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 1, err
    assert "output['y']: 64 of 64 element(s) out of tolerance (fp32 rtol 1e-07, atol 0); worst at [" \
        in _correctness(out)["summary"]


def test_a_workload_returning_none_is_recorded_and_not_compared_but_the_tests_own_calls_are(repo, cli):
    """workload() returns None: its outputs are not compared (said in a check). The frozen test's own call of the op
    still returns a tensor, replayed in both workers (``judge.testcalls``): a change of its values is red there."""
    _rebench(repo, """\
        import torch
        from op import my_op

        x = torch.randn(64)


        def workload():
            my_op(x)
        """)
    code, out, err = _freeze("--force")
    assert code == 0, err
    assert _contract(repo)["equivalence"] == {
        "enabled": False, "reason": "workload() returned NoneType: no tensors to compare", "outputs": [],
        "tolerances": EQUIVALENCE_TOLERANCES}
    _set_scale(repo, "2.0 * (1 + 2e-6)")  # inside fp32's 1e-5
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 0, err
    checks = _correctness(out)["checks"]
    assert {"name": "output equivalence", "passed": True,
            "message": "values not compared: workload() returned NoneType: no tensors to compare"} in checks
    assert not [c for c in checks if c["name"].startswith("output[") or c["name"] == "output"]
    _set_scale(repo, "2.5")
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 1, err
    assert "op:my_op on the arguments of tests/test_op.py::test_shape: output" in _correctness(out)["summary"]


def test_a_baseline_that_does_not_repeat_is_frozen_with_the_check_off(repo):
    _rebench(repo, """\
        import os

        import torch
        from op import my_op


        def workload():
            return my_op(torch.full((4,), float(os.getpid())))
        """)
    code, out, err = _freeze("--force")
    assert code == 0, err
    frozen = _contract(repo)["equivalence"]
    assert frozen["enabled"] is False and frozen["outputs"] == ["output"]
    assert frozen["reason"].startswith("the baseline is not deterministic within the tolerances (two runs differ): "
                                       "output: 4 of 4 element(s) out of tolerance (fp32 rtol 1e-05, atol 1e-05)")
    assert "freeze: output equivalence is off: the baseline is not deterministic" in err


def test_no_equivalence_at_freeze_switches_it_off_and_says_so(repo, cli):
    code, out, err = _freeze("--force", "--no-equivalence")
    assert code == 0, err
    assert _contract(repo)["equivalence"]["enabled"] is False
    assert _contract(repo)["equivalence"]["reason"] == "switched off at freeze (--no-equivalence)"
    _set_scale(repo, "2.5")
    code, out, err = cli("gate", "--skip-perf")
    assert code == 0 and "not checked" not in out  # the check line is in --json/--junit, the gate is green


def test_bad_equivalence_options_are_usage_errors(repo, cli):
    code, out, err = _freeze("--force", "--equivalence-tol", "int32=1")
    assert code == 2 and "--equivalence-tol int32: not a floating-point dtype" in err
    code, out, err = _freeze("--force", "--equivalence-tol", "bf16=fast")
    assert code == 2 and "--equivalence-tol bf16=fast: expected RTOL[:ATOL], numbers >= 0" in err
    code, out, err = _freeze("--force", "--equivalence-tol", "bf16=1e-2", "--no-equivalence")
    assert code == 2 and "give one" in err
    code, out, err = cli("freeze", "--kernel", "rms_norm", "--no-equivalence", "-w", str(repo / "ws"))
    assert code == 2 and "--no-equivalence: only for own code" in err
    assert _contract(repo)["equivalence"]["enabled"] is True  # nothing was written


def test_the_contract_field_is_validated_by_name(repo):
    data = _contract(repo)
    for edit, message in [
        (lambda e: e.update(enabled="yes"), "equivalence.enabled: expected true or false, found 'yes'"),
        (lambda e: e["tolerances"]["fp32"].update(rtol=-1), "equivalence.tolerances.fp32.rtol: must be >= 0"),
        (lambda e: e["tolerances"]["fp32"].update(eps=1), "equivalence.tolerances.fp32.eps: unknown key"),
        (lambda e: e.update(enabled=False, reason=None), "equivalence.reason: expected a non-empty string"),
        (lambda e: e.update(outputs=[]), "equivalence.outputs: empty"),
    ]:
        bad = json.loads(json.dumps(data))
        edit(bad["equivalence"])
        with pytest.raises(ContractError, match="^" + re.escape(f"contract.yaml: {message}")):
            Contract.from_dict(bad)


# -- the comparison, the child's side ----------------------------------------------------------------


def _check(base, cand, tolerances=EQUIVALENCE_TOLERANCES):
    return eq.compare_tensor("out", base, cand, tolerances)


def test_shape_and_dtype_must_match():
    assert _check(torch.zeros(4), torch.zeros(3)).message == "out: shape [3] != baseline [4]"
    assert _check(torch.zeros(2, 2), torch.zeros(4)).message == "out: shape [4] != baseline [2, 2]"
    check = _check(torch.zeros(4), torch.zeros(4, dtype=torch.bfloat16))
    assert not check.passed and check.message == "out: dtype bf16 != baseline fp32"


def test_values_within_the_dtype_tolerance_and_the_worst_element():
    base = torch.tensor([[1.0, 2.0], [4.0, -8.0]])
    assert _check(base, base * (1 + 5e-6)).passed
    check = _check(base, torch.tensor([[1.0, 2.5], [4.1, -8.0]]))  # 0.5 beyond 2e-5 is worse than 0.1 beyond 4e-5
    assert not check.passed and check.message == (
        "out: 2 of 4 element(s) out of tolerance (fp32 rtol 1e-05, atol 1e-05); worst at [0, 1]: baseline 2, "
        "candidate 2.5, abs err 0.5, rel err 0.25")
    bf16 = torch.tensor([1.0, 3.0]).to(torch.bfloat16)
    one_ulp = torch.tensor([1.0078125, 3.0]).to(torch.bfloat16)  # 1 + 2**-7: one unit in the last place
    assert _check(bf16, one_ulp).passed and not _check(bf16, torch.tensor([1.03125, 3.0]).to(torch.bfloat16)).passed
    assert not _check(base, base * (1 + 5e-6), {"fp32": {"rtol": 1e-6, "atol": 0.0}}).passed


def test_nan_positions_must_match_and_infinities_be_equal():
    base = torch.tensor([1.0, float("nan"), float("inf"), 3.0])
    assert _check(base, base.clone()).passed
    moved = _check(base, torch.tensor([float("nan"), 2.0, float("inf"), 3.0]))
    assert not moved.passed and moved.message.startswith(
        "out: 2 of 4 element(s) out of tolerance (fp32 rtol 1e-05, atol 1e-05); worst at [0]: baseline 1, "
        "candidate nan") and moved.message.endswith("; NaN/inf differ at 2 element(s)")
    assert not _check(base, torch.tensor([1.0, float("nan"), float("-inf"), 3.0])).passed
    assert not _check(base, torch.tensor([1.0, float("nan"), 1e30, 3.0])).passed


def test_integers_and_bool_are_exact():
    assert _check(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3])).passed
    check = _check(torch.tensor([1, 2, 3]), torch.tensor([1, 7, 4]))
    assert check.message == ("out: 2 of 3 element(s) differ (exact, int64); worst at [1]: baseline 2, candidate 7, "
                             "abs err 5, rel err 2.5")
    assert not _check(torch.tensor([True, False]), torch.tensor([True, True])).passed


def test_missing_and_extra_outputs_are_named():
    base = {"output['a']": torch.ones(2), "output['b']": torch.ones(2)}
    checks = eq.compare_outputs(base, {"output['a']": torch.ones(2), "output['c']": torch.ones(2)},
                                EQUIVALENCE_TOLERANCES)
    assert [(c.name, c.passed, c.message) for c in checks] == [
        ("output['a']", True, "output['a']: 2 element(s) within tolerance (fp32 rtol 1e-05, atol 1e-05); "
                              "max abs err 0, max rel err 0"),
        ("output['b']", False, "output['b']: missing (the baseline returns it)"),
        ("output['c']", False, "output['c']: not returned by the baseline")]


def test_flatten_names_nested_outputs_and_lists_what_is_not_compared():
    t = torch.ones(1)
    tensors, skipped = eq.flatten({"y": t, "parts": (t, [t, None]), "n": 3})
    assert list(tensors) == ["output['y']", "output['parts'][0]", "output['parts'][1][0]"]
    assert skipped == ["output['n'] (int)"]
    assert eq.flatten(None) == ({}, []) and list(eq.flatten(t)[0]) == ["output"]
    assert eq.flatten([t.to_sparse()]) == ({}, ["output[0] (torch.sparse_coo tensor)"])


def test_inputs_are_module_level_tensors_one_level_deep_and_writes_are_reported():
    t = torch.arange(4.0)
    namespace = {"x": t, "inputs": [t, "s"], "cfg": {"w": t, "deep": [t]}, "torch": torch, "__file__": "b.py"}
    assert list(eq.module_inputs(namespace)) == ["x", "inputs[0]", "cfg['w']"]
    before = eq.to_cpu({"x": torch.tensor([1.0, float("nan"), 3.0]), "y": torch.zeros(2)})
    after = eq.to_cpu({"x": torch.tensor([1.0, float("nan"), 5.0]), "y": torch.zeros(3)})
    assert eq.input_writes(before, after) == {
        "x": "in-place write to input x: 1 of 3 element(s) changed, max abs change 2 at [2] (3 -> 5)",
        "y": "in-place write to input y: fp32[2] became fp32[3]"}
    assert eq.input_writes(before, eq.to_cpu(before)) == {}


def test_call_and_save_writes_the_outputs_and_the_inputs_changed(tmp_path):
    x = torch.ones(3)

    def workload():
        x.mul_(2)
        return x + 1, 5

    reply = eq.call_and_save(workload, tmp_path / "o.pt", {"x": x})
    # what the call wrote into its input is an output too, saved as the call left it
    assert reply == {"returned": "tuple", "outputs": ["output[0]", "written x"], "skipped": ["output[1] (int)"],
                     "inputs_changed": {"x": "in-place write to input x: 3 of 3 element(s) changed, max abs change "
                                             "1 at [0] (1 -> 2)"}}
    saved = eq.load(tmp_path / "o.pt")
    assert torch.equal(saved["output[0]"], torch.full((3,), 3.0))
    assert torch.equal(saved["written x"], torch.full((3,), 2.0))


def test_tolerance_overrides_parse_by_dtype():
    assert eq.parse_tolerances(["bf16=2e-2", "float32=1e-4:0"]) == {"bf16": {"rtol": 2e-2, "atol": 1e-5},
                                                                    "fp32": {"rtol": 1e-4, "atol": 0.0}}
    assert eq.parse_tolerances(None) == {}
    for bad in ("int32=1", "bf16=-1", "bf16=1:2:3", "bf16"):
        with pytest.raises(UsageError, match="^--equivalence-tol "):
            eq.parse_tolerances([bad])
    assert eq.tolerance_for(torch.float8_e4m3fn, {}) == ("float8_e4m3fn", 0.25, 0.25)  # 2 x eps (0.125)
    assert eq.tolerance_for(torch.int32, EQUIVALENCE_TOLERANCES) is None
