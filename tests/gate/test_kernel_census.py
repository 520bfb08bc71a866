"""The kernel-hit stage judges where the time goes, not only which names ran (``judge.kernel_hit``).

Freeze records the baseline's kernel census; the gate compares the candidate's with it. Each attack
below launches the expected kernel (so the name check alone is green) and is a published pattern:

* token launch, the work in torch ops: Wafer's "A Field Guide to Reward Hacking in AI Kernel
  Generation" (wafer.ai/blog/reward-hacks-field-guide, 2026) lists candidates that call torch ops instead
  of doing the work in the kernel; Makora's reward-hack taxonomy (makora.com/blog/reward-hacks) the
  PyTorch fallback beside an inert kernel -> red (exit 1);
* work moved to the host: the field guide's "background thread injection" (work done on CPU threads,
  invisible to the device timers) and results computed on the host and copied over -> red (exit 1);
* a new kernel that takes the time: reported, not red (a split or fused kernel is often honest).

Controls: the unchanged configuration (A/A) and an honest faster configuration stay green.
Times are the CPU interpreter's; each attack spends a multiple of the frozen call's device time (read
from the contract), so the verdicts do not depend on this machine's load.
"""

import dataclasses
import os
import textwrap
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import _gate_kernels as gk
from _own_code import frozen_kernel_workspace
from ascendopt.gate.stages import run_gate
from ascendopt.judge import kernel_hit
from ascendopt.judge.kernel_hit import judge_census, make_census
from ascendopt.kernels._lib.common import alloc, launch

SHAPE = "B=2,T=32,D=64"  # 4096 elements: 64 blocks, so the kernel's time dwarfs one launch's overhead


@triton.jit
def _t_side_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0, mask=mask)


def _spend(seconds: float, work) -> None:
    """Call ``work()`` until ``seconds`` of wall time are spent (the planted attack's cost)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        work()


def _attack(kind: str, spend_s: float):
    """t_scale with the expected kernel launched on one block only (``token``/``host``) or in full
    (``side``), the real work done elsewhere for ``spend_s`` seconds; outputs stay correct."""

    def run(inputs, config, mode):
        x = inputs["x"]
        y = alloc(x.shape, x.dtype, x.device)
        if kind == "side":
            gk._scale(x, y, 2.0, config["BLOCK"])
            side = alloc(x.shape, x.dtype, x.device)
            _spend(spend_s, lambda: launch(_t_side_kernel, (triton.cdiv(x.numel(), 64),), x, side, x.numel(),
                                           BLOCK=64))
            return {"y": y}
        gk._scale(x, y, 2.0, config["BLOCK"], count=config["BLOCK"])  # a token launch: one block
        if kind == "token":  # the work in torch ops
            a = torch.ones(96, 96)
            _spend(spend_s, lambda: torch.mm(a, a))
            y.copy_(x.float() * 2.0)
        else:  # "host": the work in NumPy on the host, copied over
            _spend(spend_s, lambda: np.dot(np.ones((96, 96)), np.ones((96, 96))))
            y.copy_(torch.from_numpy(x.float().numpy() * 2.0))
        return {"y": y}

    return dataclasses.replace(gk.SPEC, run=run)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    return frozen_kernel_workspace(tmp_path, monkeypatch, kernel="t_scale", shapes=[SHAPE], mode="fwd",
                                   dtype="fp32", profile=False, precheck=False)


def _frozen_device_s(ws) -> float:
    from ascendopt.rounds.context import RoundContext

    census = RoundContext.load(ws).contract.kernel_census
    assert census["kernels"]["_t_scale_kernel"]["calls"] == 1 and census["device_us"] > 0
    return census["device_us"] * 1e-6


def _kernel_hit(ws, config=None):
    result = run_gate(ws, skip_perf=True, config_override=config)
    return result, result.stages[2]


def test_freeze_records_the_census_and_an_unchanged_tree_stays_green(ws):
    """Control: A/A. The census is in the contract: launches per call, device time, share, wall and host."""
    from ascendopt.rounds.context import RoundContext

    census = RoundContext.load(ws).contract.kernel_census
    kernel = census["kernels"]["_t_scale_kernel"]
    assert kernel["share"] > 0.8 and census["wall_us"] >= census["host_us"] >= 0
    result, stage = _kernel_hit(ws)
    assert result.exit_code == 0 and stage.status == "pass"
    assert {c.name for c in stage.checks} >= {"_t_scale_kernel", "expected share", "host time"}
    assert all(c.passed for c in stage.checks)
    assert stage.data["census"]["kernels"]["_t_scale_kernel"]["calls"] == 1


def test_honest_faster_configuration_stays_green(ws):
    """Control: BLOCK=128 halves the interpreter's work in the expected kernel; nothing moves elsewhere."""
    result, stage = _kernel_hit(ws, {"BLOCK": 128})
    assert result.exit_code == 0 and stage.status == "pass", stage.summary


def test_token_launch_with_the_work_in_torch_ops_is_red(ws, monkeypatch):
    """Wafer field guide (torch calls doing the work) / Makora taxonomy (PyTorch fallback beside an inert
    kernel): the expected kernel is launched on one block, torch ops take the time."""
    gk.install(monkeypatch, _attack("token", 3 * _frozen_device_s(ws)))
    result, stage = _kernel_hit(ws)
    assert result.exit_code == 1 and stage.status == "fail", stage.summary
    assert [c.name for c in stage.checks if not c.passed] == ["expected share"]
    assert "token launch" in stage.summary and "aten::mm" in stage.summary


def test_work_moved_to_the_host_is_red(ws, monkeypatch):
    """Wafer field guide (work moved off the device timers, to CPU threads / the host): the expected kernel
    runs on one block, NumPy on the host computes the result."""
    gk.install(monkeypatch, _attack("host", 3 * _frozen_device_s(ws)))
    result, stage = _kernel_hit(ws)
    assert result.exit_code == 1 and stage.status == "fail", stage.summary
    assert [c.name for c in stage.checks if not c.passed] == ["host time"]
    assert "work moved to the host" in stage.summary


def test_a_new_kernel_that_takes_the_time_is_reported_not_red(ws, monkeypatch):
    """The expected kernel does its full work; a kernel the frozen census never saw takes most of the time."""
    gk.install(monkeypatch, _attack("side", 2 * _frozen_device_s(ws)))
    result, stage = _kernel_hit(ws)
    assert result.exit_code == 0 and stage.status == "pass", stage.summary
    new = next(c for c in stage.checks if c.name == "new kernels")
    assert new.passed and "_t_side_kernel" in new.message and "_t_side_kernel" in stage.summary


def test_judge_census_rules_on_hand_made_censuses():
    """The pure rule: a faster expected kernel lowers its share without red; token and host are red."""
    frozen = make_census("cuda", {"k": 90.0, "other": 10.0}, {"k": 1, "other": 1}, 130.0, 20.0)
    faster = make_census("cuda", {"k": 9.0, "other": 10.0}, {"k": 1, "other": 1}, 45.0, 20.0)
    assert not any(f.red for f in judge_census(frozen, faster, ["k"]))
    token = make_census("cuda", {"k": 2.0, "other": 10.0, "gemm": 95.0}, {"k": 1, "other": 1, "gemm": 4}, 130.0,
                        20.0)
    found = {f.name: f for f in judge_census(frozen, token, ["k"])}
    assert found["expected share"].red and not found["host time"].red
    assert "gemm" in found["new kernels"].message
    # the host's results reach the device through a copy the frozen call does not make
    host = make_census("cuda", {"k": 2.0, "other": 10.0, "Memcpy HtoD (Pageable -> Device)": 3.0},
                       {"k": 1, "other": 1, "Memcpy HtoD (Pageable -> Device)": 1}, 130.0, 110.0)
    found = {f.name: f for f in judge_census(frozen, host, ["k"])}
    assert found["host time"].red and not found["expected share"].red
    helper = make_census("cuda", {"k": 2.0, "other": 10.0, "helper": 95.0}, {"k": 1, "other": 1, "helper": 1}, 130.0,
                         20.0, triton={"k", "helper"})
    found = {f.name: f for f in judge_census(frozen, helper, ["k"])}
    assert not any(f.red for f in found.values()) and "helper" in found["new kernels"].message
    split = make_census("cuda", {"k": 45.0, "other": 10.0}, {"k": 2, "other": 1}, 90.0, 20.0)
    found = {f.name: f for f in judge_census(frozen, split, ["k"])}
    assert not any(f.red for f in found.values()) and "k 2 launch(es) per call (frozen 1)" in \
        found["launch counts"].message


def test_a_contract_without_a_census_checks_names_only_and_says_so():
    stage = kernel_hit.kernel_hit_stage(["k"], make_census("cpu", {"k": 1.0}, {"k": 1}, 2.0, 1.0), None)
    assert stage.status == "pass" and any("no kernel census" in c.message for c in stage.checks)


def test_cpu_census_counts_each_interpreted_launch_once():
    """The bundled launcher and the interpreter hook each open a range per launch: one launch counts once."""
    x = torch.arange(64, dtype=torch.float32)

    def twice():
        gk._scale(x, torch.empty_like(x), 2.0, 32)
        gk._scale(x, torch.empty_like(x), 2.0, 32)

    census = kernel_hit.kernel_census(twice)
    assert census["backend"] == "cpu" and census["kernels"]["_t_scale_kernel"]["calls"] == 2
    assert census["kernels"]["_t_scale_kernel"]["share"] > 0.5


OWN_OP = '''import time

import torch
import triton
import triton.language as tl

TOKEN = False  # the planted attack: a token launch, the work in torch ops for SPEND_S seconds
SPEND_S = 0.0


@triton.jit
def my_scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def my_scale(x):
    y = torch.empty_like(x)
    n = 16 if TOKEN else x.numel()
    my_scale_kernel[(triton.cdiv(n, 16),)](x, y, n, BLOCK=16)
    if TOKEN:
        a = torch.ones(96, 96)
        deadline = time.perf_counter() + SPEND_S
        while time.perf_counter() < deadline:
            torch.mm(a, a)
        y.copy_(x * 2)
    return y
'''
OWN_TEST = "import torch\nfrom op import my_scale\n\n\ndef test_doubles():\n    x = torch.arange(40.0)\n" \
           "    assert torch.equal(my_scale(x), x * 2)\n"
OWN_BENCH = "import torch\nfrom op import my_scale\n\nx = torch.arange(512.0)\n\n\ndef workload():\n" \
            "    return my_scale(x)\n"


def test_own_code_token_launch_with_the_work_in_torch_ops_is_red(tmp_path, monkeypatch, cli):
    """Own code (a git repository with a real Triton kernel, frozen with its test): the unchanged tree is
    green at kernel hit; the planted token launch (Wafer field guide / Makora taxonomy) is red there."""
    from _own_code import commit_repo, freeze_in
    from ascendopt.contract.model import load_raw
    from ascendopt.workspace import Workspace

    root = commit_repo(tmp_path / "repo", {"op.py": OWN_OP, "tests/test_op.py": OWN_TEST,
                                           "bench.py": OWN_BENCH})
    code, out, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                               "my_scale_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    monkeypatch.chdir(root)
    census = load_raw(Workspace.resolve(None))["kernel_census"]
    assert census["kernels"]["my_scale_kernel"]["calls"] == 1 and census["kernels"]["my_scale_kernel"]["triton"]
    code, out, err = cli("gate", "--skip-perf", "--json")
    assert code == 0, err  # control: the unchanged tree

    op = root / "op.py"
    op.write_text(op.read_text().replace("TOKEN = False", "TOKEN = True").replace(
        "SPEND_S = 0.0", f"SPEND_S = {3 * census['device_us'] * 1e-6!r}"))
    code, out, err = cli("gate", "--skip-perf")
    assert code == 1, out + err
    assert "FAIL at kernel_hit" in out and "token launch" in out and "aten::mm" in out


def test_npu_census_from_the_torch_npu_profile(fake_torch_npu, monkeypatch):
    """npu: the census is read from the (fake, faithful) torch_npu profile's kernel_details rows."""
    monkeypatch.setenv("ASCENDOPT_BACKEND", "npu")
    census = kernel_hit.kernel_census(lambda: None)
    assert census["backend"] == "npu" and census["device_us"] > 0
    mm = next(k for n, k in census["kernels"].items() if "MatMulV2" in n)
    assert mm["calls"] >= 1 and 0 < mm["share"] <= 1 and census["wall_us"] >= census["host_us"] >= 0



def test_a_device_census_takes_host_time_from_unprofiled_calls_not_the_profiled_one(monkeypatch):
    """cuda/npu: the profiler adds its own cost to every launch of the profiled call, and one call can
    stall; a host time read from the profiled call rose by half a frozen call on an honest change (an
    autotuned launch), enough to call "work moved to the host". The census's host and wall time are the
    median of unprofiled calls. The CUDA profiler cannot run here: its reading is stood in for (device
    time by name, a return 50 ms late); the unprofiled calls are real (1 ms of host work each)."""
    from types import SimpleNamespace

    from ascendopt.device import backends

    calls = [0]

    def workload():
        calls[0] += 1
        time.sleep(0.001)

    def profiled(fn, backend):
        fn()
        return {"k": 40.0}, {"k": 1}, 50_400.0, 50_000.0, {"k"}, None, None  # cuda: no elements

    monkeypatch.setattr(backends, "current", lambda: SimpleNamespace(name="cuda", synchronize=lambda: None))
    monkeypatch.setattr(kernel_hit, "_profile_torch", profiled)
    census = kernel_hit.kernel_census(workload)
    assert calls[0] == 1 + kernel_hit.CENSUS_CALLS + kernel_hit.PLAIN_CALLS
    assert census["device_us"] == 40.0 and census["kernels"]["k"]["calls"] == 1
    assert 1000.0 <= census["host_us"] < 20_000.0 and census["wall_us"] >= census["host_us"]
    # judged against a frozen census of the same code, nothing moved to the host
    frozen = make_census("cuda", {"k": 90.0}, {"k": 1}, census["wall_us"], census["host_us"], {"k"})
    found = {f.name: f for f in judge_census(frozen, census, ["k"])}
    assert not found["host time"].red, found["host time"].message

def test_a_census_is_the_median_profiled_call_so_one_stalled_call_does_not_move_the_shares():
    """A loaded machine can stall one profiled call (here: the first profiled call also runs 40 torch matmuls);
    the census keeps the names of the median of three calls, so the extra work of one call is not in it. Control:
    a census whose every call does the extra work shows it, 40 launches holding most of the device time (the
    census reads CPU time less run-queue waits, so the control is a count of work, not of wall time)."""
    x = torch.randn(256, 256)
    count = [0]

    def workload(stall_every_call: bool):
        count[0] += 1
        if stall_every_call or count[0] == 2:  # call 1 warms up; call 2 is the first profiled one
            for _ in range(40):
                torch.mm(x, x)
        return torch.tanh(x)

    census = kernel_hit.kernel_census(lambda: workload(False))
    assert count[0] == 1 + kernel_hit.CENSUS_CALLS
    assert "aten::mm" not in census["kernels"] and "aten::tanh" in census["kernels"]
    stalled = kernel_hit.kernel_census(lambda: workload(True))
    mm = stalled["kernels"]["aten::mm"]
    assert mm["calls"] == 40 and mm["share"] > 0.5, stalled  # 40 matmuls against one tanh, in every call


def test_the_candidates_census_is_taken_after_the_frozen_tests_as_freeze_takes_the_frozen_one(tmp_path, monkeypatch):
    """Control: an unchanged tree stays green at kernel hit however the frozen tests load the host. The census
    compares device-time shares with freeze's, which freeze takes once its tests have ended; a gate whose census
    overlapped its tests saw another machine (on the 2-core CPU host the unchanged proxy went red, "token
    launch"). Here the frozen test holds a marker file while it runs, from the moment the working tree's worker
    has loaded the workload, and a call made while the marker exists does 30x its work in torch ops: a census
    taken during the tests would be red."""
    from _own_code import DOUBLES_TEST, SLEEP_OP, commit_repo, freeze_in
    from conftest import run_cli

    marker, loaded = tmp_path / "tests-running", tmp_path / "workload-loaded"
    bench = textwrap.dedent(f"""\
        import os

        import torch
        from op import my_op

        open({str(loaded)!r}, "a").close()


        def workload():
            with torch.profiler.record_function("my_op_kernel"):
                if os.path.exists({str(marker)!r}):
                    x = torch.randn(128, 128)
                    for _ in range(30):
                        x = torch.tanh(torch.mm(x, x))
                return my_op(3)
        """)
    test = DOUBLES_TEST.replace("def test_doubles():\n", textwrap.dedent(f"""\
        def test_doubles():
            import os
            import time

            open({str(marker)!r}, "w").close()
            try:
                deadline = time.time() + 60
                while not os.path.exists({str(loaded)!r}) and time.time() < deadline:
                    time.sleep(0.05)
                time.sleep(2.0)
            finally:
                os.remove({str(marker)!r})
        """), 1)
    root = commit_repo(tmp_path / "repo", {"op.py": SLEEP_OP.format(delay=0.002), "bench.py": bench,
                                           "tests/test_op.py": test})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    loaded.unlink()
    monkeypatch.chdir(root)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    code, out, err = run_cli("gate", "--skip-perf")
    assert code == 0, out + err
    assert "FAIL" not in out


def test_a_census_keeps_each_names_least_time_so_stalls_in_different_ops_do_not_move_the_shares():
    """A stall lands in whichever op runs when it comes: here the first profiled call stalls 30 ms in range
    ``a`` and the second in range ``b`` (each range's own work is 1 ms), so the median call is a stalled one.
    Each name keeps its least time over the calls: both ranges hold about half the device time. Control: a
    census whose every call stalls in ``a`` shows it."""
    count = [0]

    def workload(stall_a_always: bool):
        count[0] += 1
        for name, stalled in (("a", stall_a_always or count[0] == 2), ("b", count[0] == 3)):
            with torch.profiler.record_function(name):
                time.sleep(0.031 if stalled else 0.001)

    census = kernel_hit.kernel_census(lambda: workload(False))
    assert count[0] == 1 + kernel_hit.CENSUS_CALLS
    a, b = census["kernels"]["a"], census["kernels"]["b"]
    assert a["device_us"] < 10_000 and b["device_us"] < 10_000 and 0.25 < a["share"] < 0.75, census
    assert census["wall_us"] >= census["device_us"] + census["host_us"] - 1.0
    stalled = kernel_hit.kernel_census(lambda: workload(True))
    assert stalled["kernels"]["a"]["device_us"] > 25_000 and stalled["kernels"]["a"]["share"] > 0.8, stalled


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or kernel_hit.own_wait_ns() is None,
                    reason="needs CPU affinity and /proc/thread-self/schedstat (Linux)")
def test_a_cpu_census_reads_the_time_a_loaded_host_kept_the_call_waiting_out():
    """cpu: the device times are wall times of CPU work; another process on the same core stretches them (here
    a busy child pinned with this process to one core: the call runs about half the time). The census takes the
    calling thread's run-queue wait out, so the op's time stays near its unloaded one; measured, it would double."""
    import subprocess
    import sys

    def workload():
        with torch.profiler.record_function("busy"):
            total = 0
            for i in range(300_000):
                total += i
        return total

    core = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        alone = kernel_hit.kernel_census(workload)["kernels"]["busy"]["device_us"]
        spin = (f"import os, time; os.sched_setaffinity(0, {{{core}}}); end = time.monotonic() + 20\n"
                "while time.monotonic() < end: pass")
        busy = subprocess.Popen([sys.executable, "-c", spin])
        try:
            time.sleep(0.5)  # the child is spinning on the same core
            started = kernel_hit.own_wait_ns()
            loaded = kernel_hit.kernel_census(workload)["kernels"]["busy"]["device_us"]
            waited_ms = (kernel_hit.own_wait_ns() - started) / 1e6
        finally:
            busy.kill()
            busy.wait(5)
    finally:
        os.sched_setaffinity(0, mine)
    assert waited_ms > alone / 1e3, (waited_ms, alone)  # the census calls did wait (the control of the premise)
    assert 0.6 * alone < loaded < 1.5 * alone, (alone, loaded)



def test_a_device_call_whose_host_time_grew_without_copies_to_the_device_is_not_work_moved_to_the_host():
    """cuda: an honest change that makes the expected kernel 3x faster and costs the launch more host time (an
    autotuner choosing among 5 x |BT| configurations: fla's l2norm on the H100, 146 -> 48 us of device time and
    225 -> 365 us of host time a call) moved no work: nothing new is copied to the device. The same numbers with
    the outputs copied from the host (a Memcpy HtoD the frozen call does not make) are red."""
    frozen = make_census("cuda", {"l2norm_fwd_kernel": 146.0}, {"l2norm_fwd_kernel": 1}, 371.3, 225.5,
                         {"l2norm_fwd_kernel"})
    launch = make_census("cuda", {"l2norm_fwd_kernel": 48.4}, {"l2norm_fwd_kernel": 1}, 413.9, 365.5,
                         {"l2norm_fwd_kernel"})
    found = {f.name: f for f in judge_census(frozen, launch, ["l2norm_fwd_kernel"])}
    assert not found["host time"].red, found["host time"].message
    copied = make_census("cuda", {"l2norm_fwd_kernel": 1.0, "Memcpy HtoD (Pageable -> Device)": 47.4},
                         {"l2norm_fwd_kernel": 1, "Memcpy HtoD (Pageable -> Device)": 1}, 413.9, 365.5,
                         {"l2norm_fwd_kernel"})
    found = {f.name: f for f in judge_census(frozen, copied, ["l2norm_fwd_kernel"])}
    assert found["host time"].red and "work moved to the host" in found["host time"].message
