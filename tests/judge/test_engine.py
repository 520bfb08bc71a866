"""The judge's engine in parts: fingerprints of timed outputs, the anchor rule, the isolated worker, the
parent's clock against the worker's, and the idle-side CPU accounting (real worker processes)."""

import contextlib
import textwrap

import pytest
import torch

from ascendopt.judge import engine
from ascendopt.judge.payload import decode
from ascendopt.judge.worker import bind_ops, fingerprint

TOL = {"fp32": {"rtol": 1e-5, "atol": 1e-6}}


def _fp(value):
    return fingerprint(value, bind_ops(torch))


def test_a_fingerprint_passes_within_the_tolerance_and_names_a_wrong_block():
    torch.manual_seed(0)
    base = torch.randn(1000, 33)
    assert engine.compare_fingerprints(_fp(base), _fp(base * (1 + 1e-7)), TOL) is None
    wrong = base.clone()
    wrong[500:520] = 0.0  # a block the fast path skipped
    problem = engine.compare_fingerprints(_fp(base), _fp(wrong), TOL)
    assert problem is not None and problem.startswith("output: sum of")
    assert "shape" in engine.compare_fingerprints(_fp(base), _fp(base[:10]), TOL)
    assert "non-finite" in engine.compare_fingerprints(_fp(base), _fp(base.clone().index_fill_(0, torch.tensor([3]),
                                                                                               float("nan"))), TOL)
    ints = torch.arange(10)
    assert engine.compare_fingerprints(_fp(ints), _fp(ints + 1), TOL) is not None  # exact dtypes: exact


def test_a_fingerprint_refuses_outputs_that_are_not_plain_materialized_tensors():
    class Lazy(torch.Tensor):
        pass

    parts = _fp({"a": torch.ones(3).as_subclass(Lazy), "b": torch.empty(3, device="meta"), "c": torch.ones(2)})
    assert "not a plain torch.Tensor" in parts["parts"]["output['a']"]["problem"]
    assert parts["skipped"] == ["output['b'] (meta tensor)"]
    assert "problem" not in parts["parts"]["output['c']"]


def test_the_anchor_accepts_drift_within_the_allowance_and_names_a_moved_baseline():
    steady = [1.0 + 0.01 * (i % 3) for i in range(24)]
    assert engine.anchor_problem(1.0, steady) is None
    assert engine.anchor_problem(1.0, [x * (1 + engine.ANCHOR_DRIFT / 2) for x in steady]) is None
    moved = engine.anchor_problem(1.0, [x * 1.6 for x in steady])
    assert moved is not None and moved.startswith("baseline moved from 1000.00 us (frozen) to 16")


def test_the_anchor_excuses_only_the_time_the_baseline_waited_for_a_cpu():
    """A loaded host: each call of a baseline twice as slow as frozen waited 1 ms of its 2 on a run queue. That is
    the host, not the baseline: unmoved. The same slow baseline that waited 0.2 ms (it slept, or worked, the
    rest) is named, with its wait; a faster one is judged on its raw time whatever it waited; without a reading
    for every batch, nothing is excused."""
    steady = [1.0 + 0.01 * (i % 3) for i in range(24)]
    slow = [2 * x for x in steady]
    assert engine.anchor_problem(1.0, slow, [x - 1.0 for x in slow]) is None
    moved = engine.anchor_problem(1.0, slow, [0.2] * len(slow))
    assert moved is not None and "to 2020.00 us (+102.0%, 200.00 us of it waiting for a CPU; +82" in moved
    assert engine.anchor_problem(1.0, slow, [x - 1.0 for x in slow][:-1] + [None]) is not None
    assert engine.anchor_problem(1.0, [x * 0.5 for x in steady], [0.0] * 24) is not None
    # a wait longer than the call cannot make a call count as faster than frozen: the raw time is still read
    assert engine.anchor_problem(1.0, steady, [5.0] * 24) is None


def test_a_baseline_frozen_on_a_loaded_host_is_not_moved_when_it_runs_at_its_own_speed_now():
    """Freeze read the baseline at 1.4 ms a call, 0.4 ms of it waiting on a run queue (a loaded host); the gate, on a
    quiet host, reads 1.0 ms: the baseline has not moved, it runs at the speed it ran at freeze. Without the frozen
    wait (a contract from before it was recorded) the same reading is named; and a baseline faster than the frozen
    one's own running time (0.6 ms against 1.0) is named with the frozen wait."""
    steady = [1.0 + 0.01 * (i % 3) for i in range(24)]
    assert engine.anchor_problem(1.4, steady, [0.0] * 24, frozen_waited_ms=0.4) is None
    assert engine.anchor_problem(1.4, steady, [0.0] * 24) is not None
    moved = engine.anchor_problem(1.4, [0.6 * x for x in steady], [0.0] * 24, frozen_waited_ms=0.4)
    assert moved is not None and "400.00 us of the frozen one" in moved
    # the frozen wait excuses nothing of a slower baseline: its own wait now does
    assert engine.anchor_problem(1.0, [2 * x for x in steady], [0.0] * 24, frozen_waited_ms=0.9) is not None


def _tree(tmp_path, op: str):
    tree = tmp_path / "tree"
    tree.mkdir(parents=True)
    (tree / "op.py").write_text(textwrap.dedent(op))
    (tree / "w.py").write_text("import torch\nfrom op import my_op\n\n\ndef inputs(seed):\n    return (torch.randn(8),)"
                               "\n\n\ndef workload(x):\n    return my_op(x)\n")
    return tree


def test_the_worker_is_isolated_no_startup_hook_of_the_tree_or_pythonpath_runs(tmp_path, monkeypatch):
    from ascendopt.judge.interleave import workload_process

    tree = _tree(tmp_path, "import sys\n\n\ndef my_op(x):\n    return x * 2\n")
    marker = tmp_path / "hooked"
    hook = f"open({str(marker)!r}, 'a').write(__name__)\n"
    for name in ("sitecustomize.py", "usercustomize.py"):
        (tree / name).write_text(hook)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "sitecustomize.py").write_text(hook)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(tree, "w.py", "candidate", load_s=120, seed=True) as child:
        assert child.has_inputs
        inputs = child.inputs_blob(3)
        reading = child.batch(3, inputs)
    assert not marker.exists()  # the tree's op module was imported (explicit sys.path), its hooks were not run
    made = decode(inputs)
    assert len(reading["outputs"]) == 3 and len(made) == 3
    assert len({str(i) for i in made}) == 3  # three distinct input sets, one per call
    # each output is the op of its own input set, read back from the worker's memory
    assert all(torch.equal(out, args[0] * 2) for out, args in zip(reading["outputs"], made, strict=True))


@pytest.mark.parametrize("user_setting", [None, "2"])
def test_a_cpu_worker_computes_on_one_thread_unless_the_user_says_otherwise(tmp_path, monkeypatch, user_setting):
    """On the cpu backend the sides share the cores: each worker's torch runs one thread (a parallel region
    waits for its slowest, preempted thread); an OMP_NUM_THREADS the user set is kept."""
    from ascendopt.judge.interleave import workload_process

    threads = tmp_path / "threads"
    tree = _tree(tmp_path, f"import torch\nopen({str(threads)!r}, 'w').write(str(torch.get_num_threads()))\n\n\n"
                           "def my_op(x):\n    return x * 2\n")
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    if user_setting is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", user_setting)
    with workload_process(tree, "w.py", "candidate", load_s=120, seed=True):
        pass
    assert threads.read_text() == (user_setting or "1")


def test_the_parents_clock_is_the_reading_a_patched_worker_clock_is_a_second_one(tmp_path, monkeypatch):
    from ascendopt.judge.interleave import workload_process

    tree = _tree(tmp_path, """\
        import time

        _real = time.perf_counter
        time.perf_counter = lambda: _real() * 0.25


        def my_op(x):
            time.sleep(0.02)
            return x * 2
        """)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(tree, "w.py", "candidate", load_s=120, seed=True) as child:
        child.calibrate()
        reading = child.batch(2, child.inputs_blob(2))
    assert reading["parent"] >= 19.0  # ms per call: the sleep, by the parent's clock
    assert reading["worker"] < 0.5 * reading["parent"]  # what the patched clock claimed


BURNERS = {
    # a thread of the worker
    "thread": "def _burn():\n    while True:\n        sum(range(10000))\n",
    # short-lived children, each started and waited for between two readings of the process table: their CPU
    # is in the worker's children's time
    "short-lived children": "import subprocess\nimport sys\n\n\ndef _burn():\n    while True:\n"
                            "        subprocess.run([sys.executable, '-S', '-c', 'sum(range(300000))'])\n",
}


@pytest.mark.parametrize("burn", [None, *BURNERS])
def test_a_side_that_uses_cpu_while_the_other_is_timed_is_a_doubt(tmp_path, monkeypatch, burn):
    from ascendopt.judge.engine import Judged, Verdict, audit
    from ascendopt.judge.interleave import workload_process

    quiet = "import time\n\n\ndef my_op(x):\n    time.sleep(0.02)\n    return x * 2\n"
    noisy = quiet + "\nimport threading\n\n\n" + BURNERS.get(burn, "") + textwrap.dedent("""\


        threading.Thread(target=_burn, daemon=True).start()
        """)
    base_tree = _tree(tmp_path / "b", quiet)
    cand_tree = _tree(tmp_path / "c", noisy if burn else quiet)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(base_tree, "w.py", "baseline", load_s=120, seed=True) as base, \
            workload_process(cand_tree, "w.py", "candidate", load_s=120, seed=True) as cand:
        judged = Judged({"baseline": base, "candidate": cand}, Verdict(warmup=1, warmup_ms=0.0, min_sample_ms=1.0))
        judged.tolerances = TOL
        judged.take(12)  # a loaded CI host gives the burner less CPU: enough rounds to be clear
        found = audit(judged)
    assert found.wrong == []
    idle = [d for d in found.doubts if "CPU while baseline was timed" in d]
    assert bool(idle) == bool(burn), found.doubts


def test_the_input_makers_work_between_rounds_is_not_counted_as_cpu_while_a_side_is_timed(tmp_path, monkeypatch):
    """The trusted maker (the baseline's worker) makes each round's inputs before the round's first batch: its
    CPU then is no side's timed window, whichever side the round times first."""
    from ascendopt.judge.engine import Judged, Verdict, audit
    from ascendopt.judge.interleave import workload_process

    quiet = "import time\n\n\ndef my_op(x):\n    time.sleep(0.02)\n    return x * 2\n"
    trees = [_tree(tmp_path / side, quiet) for side in ("b", "c")]
    costly = ("import time\n\nimport torch\nfrom op import my_op\n\n\ndef inputs(seed):\n"
              "    end = time.process_time() + 0.06\n    while time.process_time() < end:\n        pass\n"
              "    return (torch.randn(8),)\n\n\ndef workload(x):\n    return my_op(x)\n")
    for tree in trees:
        (tree / "w.py").write_text(costly)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(trees[0], "w.py", "baseline", load_s=120, seed=True) as base, \
            workload_process(trees[1], "w.py", "candidate", load_s=120, seed=True) as cand:
        judged = Judged({"baseline": base, "candidate": cand}, Verdict(warmup=1, warmup_ms=0.0, min_sample_ms=1.0))
        judged.tolerances = TOL
        judged.take(12)
        found = audit(judged)
        made = sum(cpu for idle, timed, cpu, _ in judged.idle if idle == "baseline")
    assert found.wrong == []
    assert not [d for d in found.doubts if "CPU while" in d], found.doubts
    assert made < 12 * 60 / 2, made  # ms: not the maker's 60 ms a round whenever the candidate went first


def test_a_request_to_a_worker_another_process_stopped_is_continued_not_a_hang(tmp_path, monkeypatch):
    """Another process stops a worker (SIGSTOP) before the judge sends it a request larger than a pipe holds: the
    judge's write does not block for ever; it sees the stop, counts it (a doubt when sides are timed) and
    continues the worker, and the request is answered."""
    import os
    import signal
    import threading

    tree = _tree(tmp_path, "def my_op(x):\n    return x * 2\n")
    (tree / "w.py").write_text("import torch\nfrom op import my_op\n\n\ndef inputs(seed):\n"
                               "    return (torch.randn(256 * 1024),)\n\n\ndef workload(x):\n    return my_op(x)\n")
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    from ascendopt.judge.interleave import workload_process

    with workload_process(tree, "w.py", "baseline", load_s=120, seed=True) as child:
        blob = child.inputs_blob(4)  # 4 MiB of inputs: far more than a pipe's buffer
        assert len(blob) > 1 << 20
        os.kill(child.proc.pid, signal.SIGSTOP)
        got = {}
        asker = threading.Thread(target=lambda: got.update(child.call(blob, limit_s=60)), daemon=True)
        asker.start()
        asker.join(30)
        hung = asker.is_alive()
        if hung:  # the judge's write blocked: let it finish so the worker can be closed
            os.kill(child.proc.pid, signal.SIGCONT)
            asker.join(30)
    assert not hung, "the request to a stopped worker blocked the judge"
    assert child.external_stops >= 1
    assert all(torch.equal(out, args[0] * 2) for out, args in zip(got["outputs"], decode(blob), strict=True))


def test_a_worker_stopped_and_continued_while_it_replies_hands_over_every_byte(tmp_path, monkeypatch):
    """Another process stops and continues a worker every few ms while it writes replies larger than a pipe holds:
    a stop interrupts a pipe write part-way (the kernel returns the bytes written so far). Every reply still
    arrives whole, within the request's limit."""
    import os
    import signal
    import threading
    import time

    tree = _tree(tmp_path, "def my_op(x):\n    return x * 2\n")
    (tree / "w.py").write_text("import torch\nfrom op import my_op\n\n\ndef inputs(seed):\n"
                               "    return (torch.randn(256 * 1024),)\n\n\ndef workload(x):\n    return my_op(x)\n")
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    from ascendopt.judge.interleave import workload_process
    from ascendopt.process import ProcessTimeout

    with workload_process(tree, "w.py", "baseline", load_s=120, seed=True) as child:
        blob = child.inputs_blob(4)
        done = threading.Event()

        def _duty():
            while not done.is_set():
                os.kill(child.proc.pid, signal.SIGSTOP)
                time.sleep(0.002)
                os.kill(child.proc.pid, signal.SIGCONT)
                time.sleep(0.003)

        stopper = threading.Thread(target=_duty, daemon=True)
        stopper.start()
        try:
            got = [child.call(blob, limit_s=20) for _ in range(5)]
        except ProcessTimeout as exc:
            pytest.fail(f"a reply did not arrive whole: {exc}")
        finally:
            done.set()
            stopper.join(5)
            os.kill(child.proc.pid, signal.SIGCONT)
    for reply in got:
        assert all(torch.equal(out, args[0] * 2) for out, args in zip(reply["outputs"], decode(blob), strict=True))


def test_a_worker_killed_on_a_timeout_takes_what_escaped_its_group_with_it(tmp_path, monkeypatch):
    """A workload whose module code double-forks with ``setsid`` (out of the worker's process group and
    session) and then hangs: the kill on the timeout sweeps the escaped process at once, before the session
    closes, and reaps it (this process adopted it: ``process.adopt_orphans``)."""
    import os
    import signal

    from ascendopt.judge.engine import Session
    from ascendopt.process import ProcessTimeout

    pid_file = tmp_path / "escaped.pid"
    tree = _tree(tmp_path, f"""\
        import os
        import time

        if os.fork() == 0:
            os.setsid()
            if os.fork():
                os._exit(0)
            with open({str(pid_file)!r} + ".tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
            time.sleep(600)
            os._exit(0)
        time.sleep(3600)


        def my_op(x):
            return x * 2
        """)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    try:
        with Session("w.py", {"candidate": tree}, load_s=3.0) as session:
            with pytest.raises(ProcessTimeout, match="candidate: w.py module code: timed out after 3 s"):
                session.worker("candidate")
            pid = int(pid_file.read_text())
            with pytest.raises(ProcessLookupError):  # gone while the session is still open: no process, no zombie
                os.kill(pid, 0)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_every_timed_side_comes_to_the_timing_with_one_profiled_call(tmp_path, monkeypatch):
    """A process can run faster after a call under the profiler (the working tree's worker makes one for the
    kernel census; the frozen commit's did not): an unchanged tree then looked 1-3 % faster. Here the op is
    twice as fast once a profiled call was made in its process: two identical trees, only the candidate's
    census taken, and the timing must still call them the same."""
    from ascendopt.judge.engine import Verdict, time_sides
    from ascendopt.judge.interleave import workload_process

    op = """\
        import time

        import torch

        _PROFILED = [False]


        def my_op(x):
            _PROFILED[0] = _PROFILED[0] or torch.autograd._profiler_enabled()
            time.sleep(0.004 if _PROFILED[0] else 0.008)
            return x * 2
        """
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(_tree(tmp_path / "b", op), "w.py", "baseline", load_s=120, seed=True) as base, \
            workload_process(_tree(tmp_path / "c", op), "w.py", "candidate", load_s=120, seed=True) as cand:
        cand.kernel_census(120)  # as the gate's correctness stage does
        workers = {"baseline": base, "candidate": cand}
        session = type("S", (), {"worker": lambda self, name: workers[name]})()
        judged, medians = time_sides(session, ["baseline", "candidate"], Verdict(pairs=12, warmup=1, warmup_ms=0.0,
                                                                                  min_sample_ms=1.0),
                                     timing_s=120, label="w.py",
                                     decide=lambda j, on: (j.take(12), [sorted(s)[len(s) // 2] for s in j.samples])[1])
    assert medians[0] == pytest.approx(medians[1], rel=0.25), medians  # without the profiled call: 8 ms vs 4 ms
    assert base.profiled and cand.profiled


def test_a_timed_batch_holds_no_more_than_max_batch_bytes_of_inputs_and_outputs(tmp_path, monkeypatch):
    """Every call of a batch keeps its own inputs and its output until the batch is checked: with 1 MiB in
    (inputs(seed): 8 fp32 elements) and 1 MiB out a call, a 4 MiB cap allows 2 calls a batch however short a
    call is (a fast op would otherwise batch up to 200); without a cap's bite the batch is the usual one."""
    from ascendopt.judge import interleave
    from ascendopt.judge.engine import Judged, Verdict
    from ascendopt.judge.interleave import workload_process

    op = "import torch\n\n\ndef my_op(x):\n    return torch.zeros(2**18) + x.sum()\n"  # 1 MiB of fp32 out
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    fast = Verdict(pairs=2, warmup=2, warmup_ms=0.0, min_sample_ms=50.0)
    with workload_process(_tree(tmp_path, op), "w.py", "candidate", load_s=120, seed=True) as child:
        assert Judged({"candidate": child}, fast).calls > 2
        assert child.call_bytes == 2**20 + 8 * 4  # the output and the input of one call
        monkeypatch.setattr(interleave, "MAX_BATCH_BYTES", 2 * child.call_bytes)
        judged = Judged({"candidate": child}, fast)
        assert judged.calls == 2
        judged.take(2)
        assert [r["calls"] for r in child.readings] == [2, 2]


def test_payload_bytes_counts_the_tensors_of_a_decoded_value_and_batches_are_capped_by_them():
    from ascendopt.judge.interleave import batch_calls, payload_bytes

    value = [{"a": torch.ones(3, 5, dtype=torch.bfloat16), "b": torch.ones(7, dtype=torch.int64)},
             (torch.ones(2, dtype=torch.complex64), 3, "x")]
    assert payload_bytes(value) == 3 * 5 * 2 + 7 * 8 + 2 * 8
    assert batch_calls(0.01, 20.0, 0) == 200 and batch_calls(0.01, 20.0, 1 << 30) == 4
    assert batch_calls(100.0, 20.0, 1 << 40) == 1


REFUSES = "def my_op(x):\n    if x.abs().max() > 7:\n        raise ValueError('out of range')\n    return x * 2\n"
SAME = "def my_op(x):\n    return x * 2\n"


@pytest.mark.parametrize(("frozen", "working", "found", "doubt"), [
    (SAME, SAME, "matched on the workload's inputs scaled by 16", None),
    # code that refuses such values: nothing to compare there
    (REFUSES, SAME, "not run: the frozen commit's call failed on the workload's inputs scaled by 16", None),
    (SAME, REFUSES, "differs", "the working tree's call failed"),
])
def test_the_value_probe_compares_both_sides_beyond_the_workloads_range(tmp_path, monkeypatch, frozen, working,
                                                                        found, doubt):
    from ascendopt.judge.engine import value_probe
    from ascendopt.judge.interleave import workload_process

    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    with workload_process(_tree(tmp_path / "b", frozen), "w.py", "baseline", load_s=120, seed=True) as base, \
            workload_process(_tree(tmp_path / "c", working), "w.py", "candidate", load_s=120, seed=True) as cand:
        what, doubts = value_probe(base, cand, TOL, 60)
        after = cand.call(base.make([1]), 60)  # a call that raised did not end the worker
    assert what.startswith(found), what
    assert doubts == [] if doubt is None else (doubt in doubts[0] and "raised ValueError: out of range" in doubts[0])
    if what.startswith("not run"):
        assert "raised ValueError: out of range" in what
    assert len(after["outputs"]) == 1


CGROUP_CPU = "/sys/fs/cgroup/cpu"


@pytest.mark.parametrize("toggled", [False, True])
def test_a_cpu_quota_on_the_sides_group_while_one_side_is_timed_is_a_doubt(tmp_path, monkeypatch, toggled):
    """The judge and both workers in one cpu control group; a quota of 20 % of a core set on it only while the
    baseline's batches run (as code that watches the sides could) holds the baseline back, and the judge, which
    reads the groups' throttled time around every batch, names it. Without the toggle, no doubt. Needs root and a
    cgroup v1 cpu hierarchy (as on this project's machines)."""
    import os

    from ascendopt.judge.engine import Judged, Verdict, audit
    from ascendopt.judge.interleave import workload_process

    if os.geteuid() != 0 or not os.access(CGROUP_CPU, os.W_OK) or not os.path.isfile(f"{CGROUP_CPU}/cpu.cfs_quota_us"):
        pytest.skip("needs root and a writable cgroup v1 cpu controller")
    busy = "import time\n\n\ndef my_op(x):\n    end = time.process_time() + 0.01\n" \
           "    while time.process_time() < end:\n        pass\n    return x * 2\n"
    group = f"{CGROUP_CPU}/ascendopt-test-{os.getpid()}-{int(toggled)}"
    os.makedirs(group, exist_ok=True)

    def write(name: str, value: int) -> None:
        with open(f"{group}/{name}", "w") as f:
            f.write(str(value))

    write("cpu.cfs_period_us", 10000)
    write("cgroup.procs", os.getpid())
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    try:
        with workload_process(_tree(tmp_path / "b", busy), "w.py", "baseline", load_s=120, seed=True) as base, \
                workload_process(_tree(tmp_path / "c", busy), "w.py", "candidate", load_s=120, seed=True) as cand:
            if toggled:
                plain = base.sample

                def held_back(*args, **kwargs):
                    write("cpu.cfs_quota_us", 2000)
                    try:
                        return plain(*args, **kwargs)
                    finally:
                        write("cpu.cfs_quota_us", -1)

                base.sample = held_back
            judged = Judged({"baseline": base, "candidate": cand}, Verdict(warmup=1, warmup_ms=0.0,
                                                                           min_sample_ms=1.0))
            judged.tolerances = TOL
            judged.take(12)
            found = audit(judged)
    finally:
        with open(f"{CGROUP_CPU}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
        write("cpu.cfs_quota_us", -1)
        os.rmdir(group)
    held = [d for d in found.doubts if "CPU quota held its batches back" in d]
    assert bool(held) == toggled, found.doubts
    if toggled:
        assert held[0].startswith("baseline: "), held
