"""Kernel hit judges the expected kernels' absolute work, not only their share (``kernel_hit.unaccounted_work``).

The attack: the expected kernel is launched once on a single element and the outputs are computed by code the
profiler does not record (a library such as NumPy, or pure Python). The whole call's device time collapses
with the kernel's, so the kernel keeps its share and nothing else gains: the token-launch and host rules stay
quiet, and before this rule the gate was green with a large speedup. The input-size signal (elements the
kernel processed per call) tells that apart from an honest kernel that became cheaper on the whole input, or
was split into two launches of the same name.

The verdicts rest on element counts (2 elements per call against 2048) and on device-time ratios with wide
margins (a token launch or a one-program launch costs about 1/50 of the frozen 64-program launch in the
interpreter; the rule's floor is 1/4), not on this machine's speed: the census reads each call's run-queue
wait out (on a host at load 5 to 8 the token launch's raw time rose from 1/20 to 0.44 of the frozen one).
"""

import textwrap

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, working_copy
from ascendopt.judge import kernel_hit
from ascendopt.judge.kernel_hit import judge_census, make_census, unaccounted_work

OP = textwrap.dedent('''\
    import torch
    import triton
    import triton.language as tl

    MODE = "full"  # the change under test: full | numpy | python | wide | split
    BLOCK = 16


    @triton.jit
    def my_double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


    def my_double(x):
        y = torch.empty_like(x)
        n = x.numel()
        if MODE == "wide":  # honest: one program over the whole input
            my_double_kernel[(1,)](x, y, n, BLOCK=triton.next_power_of_2(n))
        elif MODE == "split":  # honest: two launches, one per half
            half = n // 2
            my_double_kernel[(triton.cdiv(half, BLOCK),)](x, y, half, BLOCK=BLOCK)
            my_double_kernel[(triton.cdiv(n - half, BLOCK),)](x[half:], y[half:], n - half, BLOCK=BLOCK)
        elif MODE in ("numpy", "python"):  # a token launch on one element ...
            my_double_kernel[(1,)](x, y, 1, BLOCK=BLOCK)
            if MODE == "numpy":  # ... the outputs computed by a library the profiler does not record
                y.copy_(torch.from_numpy(x.numpy() * 2))
            else:  # ... or in pure Python
                y.copy_(torch.tensor([v * 2 for v in x.tolist()], dtype=x.dtype))
        else:
            my_double_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
    ''')
TEST = "import torch\nfrom op import my_double\n\n\ndef test_doubles():\n    x = torch.arange(40.0)\n" \
       "    assert torch.equal(my_double(x), x * 2)\n"
BENCH = "import torch\nfrom op import my_double\n\nx = torch.arange(1024.0)\n\n\ndef workload():\n" \
        "    return my_double(x)\n"
FROZEN_ELEMENTS = 2 * 1024  # each element loaded once and stored once


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    root = commit_repo(tmp_path_factory.mktemp("work") / "repo", {"op.py": OP, "tests/test_op.py": TEST,
                                                                  "bench.py": BENCH})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_double_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    return root


def _gate(frozen_repo, tmp_path, monkeypatch, mode: str):
    """The gate (``--skip-perf --json``) on a copy of the frozen repository whose op runs ``mode``: its exit
    code, the kernel-hit stage, and the frozen census."""
    from ascendopt.contract.model import load_raw
    from ascendopt.workspace import Workspace
    from conftest import run_cli

    root = working_copy(frozen_repo, tmp_path, monkeypatch)
    op = root / "op.py"
    op.write_text(op.read_text().replace('MODE = "full"', f"MODE = {mode!r}"))
    code, out, err = run_cli("gate", "--skip-perf", "--json")
    stages = {s["name"]: s for s in json_payload(out)["stages"]}
    assert "kernel_hit" in stages, out + err  # the earlier stages passed: the outputs are right
    return code, stages["kernel_hit"], load_raw(Workspace.resolve(None))["kernel_census"]


def _failed(stage) -> list[str]:
    return [c["name"] for c in stage["checks"] if not c["passed"]]


def test_the_frozen_census_records_the_elements_the_kernel_processed(frozen_repo, tmp_path, monkeypatch):
    """Control: the unchanged tree is green, and both censuses count 1024 loads and 1024 stores."""
    code, stage, frozen = _gate(frozen_repo, tmp_path, monkeypatch, "full")
    assert code == 0 and stage["status"] == "pass", stage["summary"]
    assert frozen["kernels"]["my_double_kernel"]["elements"] == FROZEN_ELEMENTS
    assert stage["data"]["census"]["kernels"]["my_double_kernel"]["elements"] == FROZEN_ELEMENTS


@pytest.mark.parametrize("mode", ["numpy", "python"])
def test_a_token_launch_with_the_work_outside_the_profile_is_red(frozen_repo, tmp_path, monkeypatch, mode):
    """A token launch on one element, the outputs computed by NumPy or in pure Python: red at kernel hit,
    naming the frozen and current figures and where the work must have gone."""
    code, stage, frozen = _gate(frozen_repo, tmp_path, monkeypatch, mode)
    assert code == 1 and stage["status"] == "fail", stage["summary"]
    assert _failed(stage) == ["expected work"], stage["summary"]
    now = stage["data"]["census"]["kernels"]["my_double_kernel"]
    assert now["calls"] == 1 and now["elements"] == 2
    summary = stage["summary"]
    assert "1 launch(es), 2 elements per launch" in summary
    assert f"1 launch(es), {FROZEN_ELEMENTS} elements per launch" in summary
    assert f"{frozen['kernels']['my_double_kernel']['device_us']:.1f} us device time" in summary
    assert "outside the profiled kernels: host code or a library the profiler does not record" in summary


def test_an_honest_kernel_made_cheaper_on_the_whole_input_stays_green(frozen_repo, tmp_path, monkeypatch):
    """One program over the whole input instead of 64: the kernel's device time collapses as the token
    launch's does, but it still processes every element: green."""
    code, stage, frozen = _gate(frozen_repo, tmp_path, monkeypatch, "wide")
    assert code == 0 and stage["status"] == "pass", stage["summary"]
    now = stage["data"]["census"]["kernels"]["my_double_kernel"]
    assert now["elements"] == FROZEN_ELEMENTS
    # the device time alone would have called it: only the elements tell it from the token launch
    assert now["device_us"] < kernel_hit.WORK_FLOOR * frozen["kernels"]["my_double_kernel"]["device_us"]


def test_an_honest_split_into_two_launches_of_the_same_name_stays_green(frozen_repo, tmp_path, monkeypatch):
    code, stage, _ = _gate(frozen_repo, tmp_path, monkeypatch, "split")
    assert code == 0 and stage["status"] == "pass", stage["summary"]
    now = stage["data"]["census"]["kernels"]["my_double_kernel"]
    assert now["calls"] == 2 and now["elements"] == FROZEN_ELEMENTS


def test_unaccounted_work_on_hand_made_censuses():
    """The pure rule: elements decide where they are recorded; without them device time alone, at a stricter
    floor, and the message says so; work the profile shows elsewhere is left to the other rules."""
    frozen = make_census("cpu", {"k": 1000.0, "other": 10.0}, {"k": 1, "other": 1}, 1100.0, 90.0,
                         elements={"k": 2048, "other": 10})
    token = make_census("cpu", {"k": 20.0, "other": 10.0}, {"k": 1, "other": 1}, 120.0, 90.0,
                        elements={"k": 2, "other": 10})
    message = unaccounted_work(frozen, token, ["k"])
    assert message and "20.0 us device time in 1 launch(es), 2 elements per launch" in message
    assert "frozen 1000.0 us device time in 1 launch(es), 2048 elements per launch" in message
    found = {f.name: f for f in judge_census(frozen, token, ["k"])}
    assert found["expected work"].red and not found["expected share"].red and not found["host time"].red
    cheaper = make_census("cpu", {"k": 20.0, "other": 10.0}, {"k": 1, "other": 1}, 120.0, 90.0,
                          elements={"k": 2048, "other": 10})
    assert unaccounted_work(frozen, cheaper, ["k"]) is None
    split = make_census("cpu", {"k": 900.0, "other": 10.0}, {"k": 2, "other": 1}, 1000.0, 90.0,
                        elements={"k": 2048, "other": 10})
    assert unaccounted_work(frozen, split, ["k"]) is None
    # the saving shows up as other device work: the token-launch rule and the new-kernels note judge that
    shown = make_census("cpu", {"k": 20.0, "other": 10.0, "helper": 900.0}, {"k": 1, "other": 1, "helper": 1},
                        1000.0, 90.0, triton={"helper"}, elements={"k": 2, "other": 10, "helper": 2048})
    assert unaccounted_work(frozen, shown, ["k"]) is None
    # no elements (cuda, or a census frozen before them): device time alone, below DEVICE_ONLY_FLOOR
    old = make_census("cuda", {"k": 1000.0, "other": 10.0}, {"k": 1, "other": 1}, 1100.0, 90.0)
    assert unaccounted_work(old, make_census("cuda", {"k": 100.0, "other": 10.0}, {"k": 1, "other": 1}, 200.0,
                                             90.0), ["k"]) is None  # 10x faster: not judged without sizes
    gone = unaccounted_work(old, make_census("cuda", {"k": 20.0, "other": 10.0}, {"k": 1, "other": 1}, 120.0,
                                             90.0), ["k"])
    assert gone and "judged on device time alone" in gone
    assert unaccounted_work(old, cheaper, ["k"]) is not None  # a frozen census without elements: device only


def test_a_named_range_counts_the_elements_its_aten_ops_were_given_views_aside():
    """cpu, a ``record_function`` range named in the contract: its elements are those of the tensors its aten ops
    computed on; a view of the whole input (``x[:n]``) moves no data and does not count."""
    import torch

    x = torch.ones(4096)

    def call(n: int):
        with torch.profiler.record_function("my_op_kernel"):
            return (x[:n] * 2).sum()

    full = kernel_hit.kernel_census(lambda: call(4096))["kernels"]["my_op_kernel"]
    token = kernel_hit.kernel_census(lambda: call(1))["kernels"]["my_op_kernel"]
    assert full["calls"] == token["calls"] == 1
    assert full["elements"] == 2 * 4096 and token["elements"] == 2  # mul's input, then sum's
