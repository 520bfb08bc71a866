"""The judge against code that games it: no attack below obtains a PASS with a speedup (``judge.engine``).

One small own-code repository is frozen per module (an op that sleeps ``DELAY_S`` a call, so its time is
steady on a loaded machine; a workload file with ``inputs(seed)``); each test writes its own ``op.py`` into a
copy and runs ``ascendopt gate``. Each attack is named after the published taxonomy it comes from:

* KernelBench's adversarial cases (Ouyang et al., "KernelBench", 2025, and its evaluator's hardening): timing
  manipulation, result caching / reuse across trials, returning a non-computed (lazy or uninitialized)
  output;
* KernelGuard's reward-hacking patterns: tampering with the evaluation harness, stateful outputs that are
  right only on the checked call;
* the Wafer reward-hack field guide: monkey-patching timers, caching keyed on input identity, lazy
  evaluation, resource contention against the reference.

Controls: the unchanged tree is "same" and green; an honestly faster op is "faster" and green. The defences
are classes (the parent's clock, per-call output fingerprints on fresh inputs, idle-side CPU accounting,
the anchor), not checks on a name or a string: each attack below could be written a hundred ways.
"""

import json
import os
import re
import signal
import textwrap

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, plant_bytecode, working_copy
from _redteam import freeze_sleep_repo
from _sleep_repo import BENCH, DELAY_S, OP

TEST = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))
    """)
PAIRS = "12"  # an attack must not pass: 12 pairs (up to 36) decide that
# a control must pass: "same" needs the band under 5 %, which 12 pairs of 10 ms sleeps do not always reach on
# two loaded cores (sleeps overshoot by milliseconds there); 30 pairs (up to 90) do
CONTROL_PAIRS = "30"


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("judge") / "repo")


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    return working_copy(frozen_repo, tmp_path, monkeypatch)


def _gate(repo, op: str | None, pairs: str = PAIRS):
    """``gate --json`` with ``op`` as the working tree's op.py (None: as it is) -> (exit code, stages by
    name, stderr)."""
    from conftest import run_cli

    if op is not None:
        (repo / "op.py").write_text(textwrap.dedent(op))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        code, out, err = run_cli("gate", "--json", "--pairs", pairs)
    stages = {s["name"]: s for s in json_payload(out)["stages"]}
    return code, stages, err


def _no_speedup_pass(code, stages) -> None:
    perf = stages["performance"]
    assert code != 0, perf
    assert perf["status"] != "pass", perf


# -- controls ----------------------------------------------------------------------------------------


def test_control_an_unchanged_tree_is_never_red(repo):
    """An unchanged tree is "same" and green; on a host so loaded that the noise band stays wider than the 5 % at
    which "same" rules out a change (2 cores at load 8: ±11-16 %), inconclusive (exit 6) for that reason, named.
    Never slower, never wrong, never a judge's doubt."""
    code, stages, err = _gate(repo, OP, CONTROL_PAIRS)
    perf = stages["performance"]
    assert code in (0, 6), err[-2000:]
    audit = perf["data"]["audit"]
    assert audit["doubts"] == [] and audit["inputs"] == "trusted maker" and audit["timed_calls"] > 0
    if code == 6:
        assert perf["status"] == "inconclusive" and "noise band" in perf["summary"], perf["summary"]
        assert [c["verdict"] for c in perf["data"]["comparisons"]] == ["inconclusive"]
    else:
        assert perf["status"] == "pass" and [c["verdict"] for c in perf["data"]["comparisons"]] == ["same"]


def test_control_an_honest_faster_change_is_faster_and_green(repo):
    code, stages, err = _gate(repo, OP.replace(f"DELAY_S = {DELAY_S}", f"DELAY_S = {DELAY_S / 2}"), CONTROL_PAIRS)
    assert code == 0, err[-2000:]
    assert [c["verdict"] for c in stages["performance"]["data"]["comparisons"]] == ["faster"]


# -- the clock ---------------------------------------------------------------------------------------


def test_timing_manipulation_a_patched_interpreter_clock_is_caught_by_the_parents_clock(repo):
    """KernelBench timing manipulation / Wafer "monkey-patching the timer": the candidate's import slows
    the interpreter's clocks to a quarter; its worker's own reading claims 4x, the parent's clock does not."""
    code, stages, err = _gate(repo, OP + textwrap.dedent("""\

        _real_pc, _real_mono = time.perf_counter, time.monotonic
        time.perf_counter = lambda: _real_pc() * 0.25
        time.monotonic = lambda: _real_mono() * 0.25
        """))
    _no_speedup_pass(code, stages)
    perf = stages["performance"]
    # inconclusive (exit 6); slower (exit 4) when the noise of a loaded machine made it so
    assert (perf["status"], code) in (("inconclusive", 6), ("fail", 4)), perf["summary"]
    said = json.dumps(perf)
    assert "candidate: the parent's clock read" in said and "the worker's clock disagrees" in said
    assert [c["verdict"] for c in perf["data"]["comparisons"]] != ["faster"]  # the parent's clock saw no gain


# -- the harness -------------------------------------------------------------------------------------


@pytest.mark.parametrize("patches", [
    # the worker's fingerprint and the engine's comparison replaced: wrong timed outputs should look right
    "worker.fingerprint = lambda value, ops: {'parts': {}, 'skipped': []}\n"
    "engine.compare_fingerprints = lambda *a, **k: None\n",
    # and the function that finds the tensors in what a call returned: nothing to compare at all
    "worker.fingerprint = lambda value, ops: {'parts': {}, 'skipped': []}\n"
    "equivalence.flatten = lambda value, name='output': ({}, [])\n",
])
def test_harness_tampering_patching_the_judges_functions_does_not_hide_wrong_outputs(repo, patches):
    """KernelGuard harness tampering: right on the first calls, then fast and wrong, with the harness's
    functions (as the code under test can import them) replaced so that wrong looks right."""
    code, stages, err = _gate(repo, textwrap.dedent("""\
        import time

        import torch

        import ascendopt.judge.engine as engine
        import ascendopt.judge.equivalence as equivalence
        import ascendopt.judge.worker as worker

        CALLS = [0]
        """) + patches + textwrap.dedent("""\


        def my_op(x):
            CALLS[0] += 1
            if CALLS[0] > 3 and x.shape == (64, 64):
                return torch.zeros_like(x)
            time.sleep(0.01)
            return x * 2 + 1
        """))
    _no_speedup_pass(code, stages)
    assert code == 1
    red = next(s for s in stages.values() if s["status"] == "fail")
    # the frozen outputs are compared in the parent; every timed output against the baseline's there too
    assert red["name"] in ("correctness", "performance")
    assert ("differential check against the frozen commit" in red["summary"]
            or "a timed call's output is wrong: candidate: timed batch" in red["summary"]), red


def test_planted_byte_code_the_measured_code_is_the_source_a_round_records(repo):
    """Wafer's field guide ("stale or planted artefacts") / KernelGuard ("the evaluated artefact is not the
    submitted one"): op.py is unchanged, but a ``__pycache__`` file stamped with its modification time and size
    holds an op twice as fast. A gate that ran it would call the unchanged source faster, and a keep would
    record that source. The workers load op.py from its source: no speedup."""
    (repo / "op.py").write_text(OP)
    plant_bytecode(repo / "op.py", OP.replace(f"DELAY_S = {DELAY_S}", f"DELAY_S = {DELAY_S / 2}"))
    code, stages, err = _gate(repo, None, CONTROL_PAIRS)
    # the planted op would be "faster" by 2x; the source is the frozen op: "same", or noise of a loaded machine
    assert code in (0, 4, 6), err[-2000:]
    assert [c["verdict"] for c in stages["performance"]["data"]["comparisons"]] != ["faster"]


def test_undoing_the_source_only_import_in_a_worker_is_exit_3(repo):
    """KernelGuard's harness manipulation, against that defence: the op restores byte code reading in its
    worker (where it could then import planted code). The worker reports it at its next reply."""
    code, stages, err = _gate(repo, "import sys\nfrom importlib.machinery import SourceFileLoader\n\n"
                                    "if 'pytest' not in sys.modules:\n    del SourceFileLoader.get_code\n" + OP)
    assert code == 3, err[-2000:]
    assert "the judge's source-only import was undone by the workload" in err


# -- state across timed calls ------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["x.data_ptr()", "id(x)"])
def test_result_caching_keyed_on_input_identity_is_caught_on_fresh_inputs(repo, key):
    """KernelBench result caching / Wafer "caching keyed on input identity": a result cache keyed on the
    input's address or id. Fresh inputs per call: a hit returns another input's result (wrong), a miss
    saves nothing."""
    code, stages, err = _gate(repo, f"""\
        import time

        import torch

        _CACHE = {{}}


        def my_op(x):
            key = ({key}, tuple(x.shape))
            if key in _CACHE:
                return _CACHE[key]
            time.sleep(0.01)
            out = x * 2 + 1
            _CACHE[key] = out
            return out
        """)
    perf = stages["performance"]  # a green "same" is no gain for the cheat: only a PASS with a speedup would be
    if stages["correctness"]["status"] == "fail":  # a hit already in the differential check's calls
        assert code == 1 and "differential check against the frozen commit" in stages["correctness"]["summary"]
    elif stages["kernel_hit"]["status"] == "fail":  # hits in the census's calls: the expected kernel did no work
        assert code == 1 and "expected work" in " ".join(c["name"] for c in stages["kernel_hit"]["checks"]
                                                         if not c["passed"])
    elif perf["status"] == "fail":  # a hit on a reused address: another input's result
        assert code == 1 and "a timed call's output is wrong" in perf["summary"]
    else:  # never a hit: no faster, and the verdict says so
        assert perf["data"]["comparisons"] and all(c["verdict"] != "faster" for c in perf["data"]["comparisons"])


# -- outputs that were not computed ------------------------------------------------------------------


@pytest.mark.parametrize("returned, why", [
    ("torch.empty_like(x).as_subclass(Lazy)", "not a plain torch.Tensor"),
    ("_STALE[: x.shape[0]]", "out of tolerance"),
])
def test_lazy_or_stale_outputs_of_timed_calls_are_a_correctness_failure(repo, returned, why):
    """KernelBench / Wafer lazy evaluation: after the checked first calls (past the differential check's, so
    that the timed calls' audit is what must see it), a tensor subclass standing for a result not computed, or
    a view of memory holding an earlier result (stale)."""
    code, stages, err = _gate(repo, f"""\
        import time

        import torch

        CALLS = [0]
        _STALE = torch.zeros(64, 64)


        class Lazy(torch.Tensor):
            pass


        def my_op(x):
            CALLS[0] += 1
            if CALLS[0] > 12 and x.shape == (64, 64):
                return {returned}
            time.sleep(0.01)
            return x * 2 + 1
        """)
    _no_speedup_pass(code, stages)
    perf = stages["performance"]
    assert code == 1 and perf["status"] == "fail", perf
    assert "a timed call's output is wrong" in perf["summary"] and why in perf["summary"]


def test_thread_injection_work_finished_after_the_timed_call_returns_is_not_a_speedup(repo):
    """KernelBench's "thread injection" / Wafer's async offload: after the checked first calls, each call
    returns a zeroed tensor at once and a thread fills it 10 ms later, outside the timed call. The outputs
    are fingerprinted as the batch ends: the last call's is not written yet."""
    code, stages, err = _gate(repo, """\
        import threading
        import time

        import torch

        CALLS = [0]


        def _fill(out, x):
            time.sleep(0.01)
            out.copy_(x * 2 + 1)


        def my_op(x):
            CALLS[0] += 1
            if CALLS[0] > 12 and x.shape == (64, 64):
                out = torch.zeros_like(x)
                threading.Thread(target=_fill, args=(out, x), daemon=True).start()
                return out
            time.sleep(0.01)
            return x * 2 + 1
        """)
    _no_speedup_pass(code, stages)
    perf = stages["performance"]
    assert code == 1 and "a timed call's output is wrong" in perf["summary"], perf


# -- slowing the baseline ----------------------------------------------------------------------------


# the frozen op scales its sleep by a setting of the machine it runs on: any state the baseline's process
# shares with the candidate (an environment variable here; a file, a lock, a governor elsewhere)
SHARED_STATE_OP = OP.replace("import time\n", "import os\nimport time\n", 1).replace(
    f"DELAY_S = {DELAY_S}", f"DELAY_S = {DELAY_S} * float(os.environ.get('JUDGE_TEST_SLOWDOWN', '1'))", 1)


def test_baseline_sabotage_a_baseline_slower_than_frozen_gives_no_speedup_and_says_so(tmp_path, monkeypatch):
    """Wafer's field guide, "resource contention against the reference" / KernelBench's baseline sabotage:
    the baseline is made slower than it was at freeze (here through a setting its frozen code reads; the
    candidate ignores it), so the candidate measures 2x faster against it. The anchor sees the re-measured
    baseline away from the frozen one: inconclusive (exit 6), never a speedup, and the text names why."""
    from conftest import run_cli

    root = tmp_path / "repo"
    commit_repo(root, {"op.py": SHARED_STATE_OP, "bench.py": BENCH, "tests/test_op.py": TEST})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py",
                             "--kernel-filter", "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    (root / "op.py").write_text(OP)  # the candidate: the same op, deaf to the setting
    monkeypatch.chdir(root)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    monkeypatch.setenv("JUDGE_TEST_SLOWDOWN", "2")
    code, out, err = run_cli("gate", "--pairs", CONTROL_PAIRS)
    assert code == 6, out + err
    assert re.search(r"gate: INCONCLUSIVE at performance \(exit 6\): baseline moved from [\d.]+ us \(frozen\) "
                     r"to [\d.]+ us \(\+\d+\.\d%", out), out
    assert "not a pass" in out and "gate: PASS" not in out and "Traceback" not in out + err



@pytest.mark.parametrize("burner", [
    # a thread of the candidate's worker that spins while its own workload is not running
    """\
    import threading

    _BUSY = [False]


    def _burn():
        while True:
            if _BUSY[0]:
                time.sleep(0.001)
            else:
                sum(range(20000))


    threading.Thread(target=_burn, daemon=True).start()
    """,
    # a process the candidate's workload starts on its first call, spinning for as long as it lives
    """\
    import subprocess
    import sys

    _BURNER = []
    _first = my_op


    def my_op(x):
        if not _BURNER and x.shape == (64, 64):
            _BURNER.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        return _first(x)
    """,
])
def test_resource_contention_a_candidate_burning_cpu_while_the_baseline_runs_is_not_a_pass(repo, burner):
    """Wafer resource contention against the reference: the candidate keeps the CPU busy while the
    baseline is timed. The idle side's process group is accounted for during the other side's batches."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    "def my_op(x):\n    _BUSY[0] = True\n    time.sleep(DELAY_S)\n    _BUSY[0] = False"
                    if "threading" in burner else "def my_op(x):\n    time.sleep(DELAY_S)")
    code, stages, err = _gate(repo, op + "\n" + textwrap.dedent(burner))
    _no_speedup_pass(code, stages)
    perf = stages["performance"]
    # inconclusive (exit 6); or slower (exit 4) when the burner slowed the candidate's own batches too
    assert (perf["status"], code) in (("inconclusive", 6), ("fail", 4)), perf
    assert re.search(r"candidate used \d+ ms of CPU while baseline was timed", json.dumps(perf)), perf


# -- a process that escapes its worker --------------------------------------------------------------

ESCAPE = textwrap.dedent("""\
    import mmap
    import os
    import struct

    _BUSY = mmap.mmap(-1, 1)  # shared with the forked burner: 1 while the candidate's own op runs
    _STARTED = []
    _first = my_op


    def _daemon(pid_file, always):
        # the classic daemon: fork, setsid, fork again; the grandchild is in no worker's group or session
        if os.fork():
            return
        os.setsid()
        if os.fork():
            os._exit(0)
        with open(pid_file, "w") as fh:
            fh.write(str(os.getpid()))
        end = time.monotonic() + 600  # a bounded attack, even where nothing kills it
        while time.monotonic() < end:
            if always or not _BUSY[0]:
                sum(range(20000))
            else:
                time.sleep(0.001)
        os._exit(0)


    def my_op(x):
        if not _STARTED and x.shape == (64, 64):  # in the worker only (the tests call it on 2 elements)
            _STARTED.append(_daemon(PID_FILE, ALWAYS))
        _BUSY[0] = 1
        try:
            return _first(x)
        finally:
            _BUSY[0] = 0
    """)


def _alive(pid: int) -> bool:
    """Any process with this pid, a zombie included (a zombie left unreaped is a leak too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("always", [False, True], ids=["while-the-candidate-is-idle", "always"])
def test_resource_contention_a_burner_escaped_with_setsid_is_seen_and_killed(repo, tmp_path, always):
    """Wafer resource contention against the reference, by a process that escapes its worker's process
    group (the "background work" class of KernelBench's adversarial cases: work that outlives the timed
    call): the candidate's op double-forks with ``os.setsid`` a CPU burner that spins while the candidate's
    own op is not running (so while the baseline is timed), or always. The judge adopts orphans (child
    subreaper): the burner stays below it, its CPU counts in the idle check by pid, and it is killed and
    reaped when the command ends."""
    pid_file = tmp_path / "burner.pid"
    burner = ESCAPE.replace("PID_FILE", repr(str(pid_file))).replace("ALWAYS", repr(always))
    try:
        code, stages, err = _gate(repo, OP + "\n" + burner)
        assert pid_file.exists(), err[-2000:]  # the attack ran
        pid = int(pid_file.read_text())
        _no_speedup_pass(code, stages)
        perf = stages["performance"]
        # inconclusive (exit 6); or slower (exit 4) when the burner slowed the candidate's own batches too
        assert (perf["status"], code) in (("inconclusive", 6), ("fail", 4)), perf
        named = re.findall(r"(?:a process|processes) outside every worker's group \(pid (\d+) '[^']*'[^)]*\) "
                           r"used \d+ ms of CPU while baseline was timed", json.dumps(perf))
        assert str(pid) in named, perf["data"]["audit"]
        assert not _alive(pid)  # killed and reaped with the command: no process, no zombie
    finally:
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
