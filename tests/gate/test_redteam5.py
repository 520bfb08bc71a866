"""Red team of the judge, round 5: white-box attacks on ``ascendopt gate`` (own code) after rounds 1-4
(``test_redteam.py``, ``test_redteam3.py``, ``test_redteam4.py``, ``redteam4_open.py``), aimed at the code of the last
two sessions: the anchor's run-queue excuse (``engine.anchor_problem``, ``interleave._Child.batch``'s ``waited``),
the untimed requests' check less their run-queue wait (``evidence.untimed_excess``, ``process.excused_wait_ms``), the
stop detection (``_Child.stopped_by_others``, ``_continue``) and the scheduling guard, read before each
batch (``engine.Judged._guard_scheduling``).

Most attacks here need to know *when* the judge times the baseline. The candidate's worker cannot see the baseline's
pipe, but it can read ``/proc/<judge>/io`` (its parent's; ``PTRACE_MODE_READ``, allowed to a process of the same
user, Yama or not): the judge writes every request with one ``write``, and a timed batch's ``go`` is exactly 14 bytes
(``{"cmd": "go"}\\n``). A 14-byte write the candidate's own worker did not receive is the baseline's ``go``: its
batch is on the clock from that moment for ``DELAY_S``. Nothing in these attacks uses ptrace, ``/proc/PID/mem`` or
the baseline's memory (the documented gaps).

Every test first shows its trick works on its plain target, then asserts that the gate does NOT end green (exit 0)
with a "faster" verdict (or, for a wrong change, not green at all). A FAILING test here is an attack that got
through. Nothing is skipped or xfailed. Each outcome is appended as one JSON line to ``$REDTEAM_LOG`` (default
``/tmp/redteam5-results.jsonl``). Attacks that need root say so in their docstring (a weaker attack).

Outcomes on the shared 2-core host (30 pairs; the control green at 0.80x, "faster"), judge at 17a6a3e: every attack
got through (exit 0): s1 0.879x faster, s6 0.922x, s2 0.726x, s3 0.734x, s3b 0.730x, and s5 green with an op wrong
on the frozen test's own input. After the fixes s5 is red at correctness (the tests' own calls replayed), and every
other attack here is inconclusive (exit 6), naming what it did: s1 a stop and continue of the baseline's worker
(``waitpid`` with ``WCONTINUED``, looked at right after each reply), s6 and s2 the judge's own process stopped and
continued (a ``SIGCONT`` counter around every batch), s3 and s3b the CPU the worker's threads and its other processes
ran in the untimed requests.

Run one at a time on the shared 2-core machine: ``pytest -n 0 -q tests/gate/test_redteam5.py -k NAME``.
"""

import os
import subprocess
import textwrap

import pytest
from test_redteam import MIX, SHAPED_BENCH

from _own_code import working_copy
from _redteam import freeze_sleep_repo, gate_logged, hooked_call_ms, run_python
from _redteam import not_a_speedup as _not_a_speedup
from _redteam import tests_pass as _tests_pass
from _redteam import verdicts as _verdicts
from _sleep_repo import BENCH, DELAY_S, OP

PAIRS = "30"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam5-results.jsonl")


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam5") / "repo")


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    return working_copy(frozen_repo, tmp_path, monkeypatch)


@pytest.fixture
def marker(tmp_path):
    """A file outside the repository the attack appends to when its trick fires (proof that it ran)."""
    return tmp_path / "attack.log"


def _gate(repo, op: str | None, pairs: str = PAIRS, *extra: str):
    return gate_logged(repo, op, pairs, *extra, log=LOG)


def _py(repo, code: str) -> subprocess.CompletedProcess:
    done = run_python(repo, code)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _gated(repo, marker, op: str, fired: str, *before) -> None:
    """The attack ``op`` as op.py; each of ``before`` (a check of the repository: the trick fools plain pytest, or
    plain timing) passes; then the gate runs, the attack's mark says ``fired``, and the gate is not a speedup."""
    (repo / "op.py").write_text(op)
    for check in before:
        check(repo)
    code, stages, err = _gate(repo, None)
    _fired(marker, fired, err)
    _not_a_speedup(code, stages)


def _stop_at_go(marker, who: str, stop_from: str, said: str) -> str:
    """The frozen op and a watcher of the judge's writes that, at each of the baseline's timed ``go`` (its batch on
    the clock from ``t``), stops the process ``who`` (an expression) from ``t + stop_from`` seconds until 1.2 ms after
    the batch should end, then continues it; the first time it marks ``said`` and the pid."""
    return _attack(marker, f"""\
        EXTRA = 0.0012


        def _go(t):
            target = {who}
            time.sleep(max(0.0, t + {stop_from} - time.monotonic()))
            _os.kill(target, _signal.SIGSTOP)
            time.sleep(max(0.0, t + {DELAY_S} + EXTRA - time.monotonic()))
            _os.kill(target, _signal.SIGCONT)
            if not _state.get("said"):
                _state["said"] = True
                _mark(f"{said} {{target}}")


        _start(lambda: _watch(on_go=_go))
        """)


def _fired(marker, what: str, err: str) -> None:
    assert marker.exists() and what in marker.read_text(), err[-3000:]


# ==============================================================================================================
# The attacks' library, appended to op.py. It acts only in the candidate's worker (``__main__`` is the judge's
# worker and it is not a trusted side's). The request hook (round 3's: ``json._default_decoder``, looked up by the
# worker's bound ``json.loads`` at every call) tells the library every request its own worker gets.
# ==============================================================================================================

LIB = textwrap.dedent("""\
    import array as _array
    import fcntl as _fcntl
    import json as _json
    import os as _os
    import signal as _signal
    import sys as _sys
    import termios as _termios
    import threading as _threading

    _spec = getattr(_sys.modules.get("__main__"), "__spec__", None)
    IN_WORKER = (_spec is not None and _spec.name == "ascendopt.judge.worker" and "--private" not in _sys.argv)
    _state = {"cmd": None, "n": 0, "mine": 0.0, "busy": False, "go": 0.0}


    def _mark(text):
        with open(MARK, "a") as fh:
            fh.write(text + "\\n")


    class _Decoder(_json.JSONDecoder):
        def decode(self, s, *args, **kwargs):
            msg = super().decode(s, *args, **kwargs)
            if type(msg) is dict and "cmd" in msg:
                _state["cmd"] = msg["cmd"]
                _state["mine"] = time.monotonic()
                if msg["cmd"] == "null":  # a side is calibrated: its warm-up (one-call batches) follows
                    _state["n"] = 0
                if msg["cmd"] == "prepare":
                    _state["n"] += 1
                _on(msg)
            return msg


    def _on(msg):
        pass


    def _timed():
        return _state["cmd"] == "go" and _state["n"] > 5


    def _baseline_pid():
        # the sibling worker (same parent: the judge) started with --private (a trusted side): the baseline's
        me, parent = _os.getpid(), _os.getppid()
        for name in _os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) != parent:
                        continue
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\\0")
            except OSError:
                continue
            if b"ascendopt.judge.worker" in argv and b"--private" in argv:
                return int(name)
        return None


    def _judge_io():
        # (bytes written, write calls) of the judge: every request it sends a worker is one write
        if "io" not in _state:
            _state["io"] = _os.open(f"/proc/{_os.getppid()}/io", _os.O_RDONLY)
        d = _os.pread(_state["io"], 256, 0).split()
        return int(d[3]), int(d[7])


    def _pending():
        buf = _array.array("i", [0])
        try:
            _fcntl.ioctl(0, _termios.FIONREAD, buf)
        except OSError:
            return 0
        return buf[0]


    GO = 14  # len('{"cmd": "go"}\\n')


    def _watch(on_go=None, on_prepare=None, poll=0.0004):
        # Calls on_go(t) for every "go" the judge sent the baseline (t: when it was seen), on_prepare(t) for every
        # large request (a batch's input sets) it sent the baseline.
        base = None
        while base is None:
            base = _baseline_pid()
            time.sleep(0.02)
        _state["base"] = base
        w0, c0 = _judge_io()
        while True:
            time.sleep(poll)
            w, c = _judge_io()
            if c == c0:
                continue
            dw, dc = w - w0, c - c0
            w0, c0 = w, c
            t = time.monotonic()
            if _state["busy"] or t - _state["mine"] < 0.003:
                continue  # the candidate's own sample
            if on_prepare is not None and dc == 1 and dw > 16384:
                if _pending() == 0 and time.monotonic() - _state["mine"] > 0.003:
                    on_prepare(t)
                continue
            if on_go is not None and (dw == GO or (dc == 2 and dw > 16384 + GO)):
                time.sleep(0.0015)  # the candidate's own worker would have got it by now
                w1, c1 = _judge_io()
                if c1 != c or time.monotonic() - _state["mine"] < 0.003 or _state["busy"] or _pending():
                    w0, c0 = w1, c1
                    continue
                on_go(t)
                w0, c0 = _judge_io()


    def _start(target):
        if IN_WORKER:
            _json._default_decoder = _Decoder()
            _threading.Thread(target=target, daemon=True).start()
    """)


def _attack(marker, body: str, op: str = OP) -> str:
    return op + "\n\nMARK = " + repr(str(marker)) + "\n" + LIB + "\n\n" + textwrap.dedent(body)


# ==============================================================================================================
# Control: an honest faster change stays green
# ==============================================================================================================


def test_control_honest_faster_is_green(repo):
    """Control: the op does the same work in 80 % of the time (sleeps 8 ms instead of 10 ms, same values). The judge
    must end green (exit 0) with a "faster" verdict at the attacks' pairs."""
    op = OP.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S * 0.8)")
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    code, stages, _ = _gate(repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages),
                                                          stages.get("performance", {}).get("summary"))


# ==============================================================================================================
# Class 7: the baseline's process, stopped and continued inside its own timed window
# ==============================================================================================================


def test_s1_stop_and_continue_the_baseline_inside_its_timed_batch(repo, marker):
    """Class 7, signals, targeted: c7a (round 1) stopped the baseline blindly and the judge's ``waitpid(WUNTRACED)``
    before each batch found it stopped. Here the candidate (the frozen op, unchanged) stops the baseline only while
    its ``go`` is on the judge's clock, and continues it 1.2 ms after its sleep would have ended, before it can reply:
    the judge waits in ``select`` for the reply then, and a stop that was continued before a ``waitpid(WUNTRACED)``
    is not reported (``WCONTINUED`` is never asked). A stop is no run-queue wait, so the anchor excuses none of it,
    but +12 % is inside its 20 % drift."""
    _gated(repo, marker, _stop_at_go(marker, '_state["base"]', "0.0", "stopped the baseline"), "stopped the baseline",
           _tests_pass)


def test_s6_stop_the_judge_while_the_baseline_replies(repo, marker):
    """Class 7, the judge's own process: the judge checks its workers for stops, never itself. The candidate (the
    frozen op) stops the judge (its parent, same user) from 1 ms before the baseline's timed call ends until 1.2 ms
    after: the baseline's reply waits in the pipe while the judge's ``perf_counter`` runs on. The baseline's batch
    reads 12 % longer; no thread of it waited on a run queue (the anchor excuses nothing; 12 % is inside its drift);
    the baseline's own timer says 10 ms (the 25 % agreement allows it)."""
    _gated(repo, marker, _stop_at_go(marker, "_os.getppid()", f"{DELAY_S} - 0.001", "stopped the judge"),
           "stopped the judge", _tests_pass)


# ==============================================================================================================
# Class 5 / 3: work moved into the untimed prepare, the untimed check's allowance bought
# ==============================================================================================================

SKIM = 0.3  # the share of a call's work moved into the untimed prepare


def _skim_op(marker, extra: str) -> str:
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    f"def my_op(x):\n    time.sleep(DELAY_S * ({1 - SKIM} if _timed() else 1))")
    return _attack(marker, extra, op)


def _skim_alone_looks_faster(repo):
    assert hooked_call_ms(repo) < DELAY_S * 1e3 * 0.8  # the call alone looks faster


def test_s2_stop_the_judge_while_the_reference_prepares(repo, marker):
    """Class 5 + the judge's process: round 3's a1 (30 % of each call's work done in the untimed ``prepare``) is
    stopped by ``evidence.untimed_excess``, which compares the candidate's untimed requests with the reference's for
    the same bytes. Here the candidate also stops the judge for 3.3 ms each time the judge sends the baseline a
    batch's input sets (a write over 16 KiB that its own worker did not get): the judge reads the baseline's prepare
    reply late, so the reference's untimed requests take as long as the candidate's. Stopped time is not run-queue
    wait, so nothing takes it off again; the baseline's timed window is not touched (the anchor holds)."""
    op = _skim_op(marker, f"""\
        def _on(msg):
            if msg["cmd"] == "prepare" and _state["n"] > 5:
                time.sleep({DELAY_S * SKIM} * int(msg.get("calls", 1)))


        def _prep(t):
            judge = _os.getppid()
            _os.kill(judge, _signal.SIGSTOP)
            time.sleep(max(0.0, t + {DELAY_S * SKIM} + 0.0003 - time.monotonic()))
            _os.kill(judge, _signal.SIGCONT)
            if not _state.get("said"):
                _state["said"] = True
                _mark(f"stopped the judge {{judge}} at the baseline's prepare")


        _start(lambda: _watch(on_prepare=_prep, poll=0.0003))
        """)
    _gated(repo, marker, op, "stopped the judge", _tests_pass, _skim_alone_looks_faster)


def test_s3_child_processes_make_the_prepares_wall_time_look_like_run_queue_wait(repo, marker):
    """Class 5, the untimed check's excuse: an untimed request is read less the run-queue wait of the worker's main
    thread, "less what its own other threads ran" (``process.excused_wait_ms``): other *threads*, not other
    *processes*. The candidate forks 24 helper processes at load (blocked on a pipe: no CPU while the baseline is
    timed). In a timed batch's ``prepare`` the helpers do 3 ms of CPU work between them (30 % of a call's work, moved
    out of the timed window), while the main thread spins until they are done: with 25 runnable tasks on 2 cores it
    runs ~8 % of that time and waits on a run queue for the rest, which the judge takes off as a loaded host's
    delay. ``go`` does 70 % of the work."""
    op = _skim_op(marker, f"""\
        import struct as _struct

        HELPERS = 24
        WORK_S = {DELAY_S * SKIM}  # CPU seconds of work moved into prepare, shared by the helpers
        _r, _w = _os.pipe()
        _done_r, _done_w = _os.pipe()


        def _helper():
            while True:
                data = _os.read(_r, 8)
                if len(data) < 8:
                    _os._exit(0)
                share = _struct.unpack("d", data)[0]
                end = time.process_time() + share  # this helper's own CPU time: real work, not wall time
                while time.process_time() < end:
                    pass
                _os.write(_done_w, b"x")


        def _on(msg):
            if msg["cmd"] == "prepare" and _state["n"] > 5:
                share = WORK_S * int(msg.get("calls", 1)) / HELPERS
                _os.write(_w, _struct.pack("d", share) * HELPERS)
                got = 0
                while got < HELPERS:  # spin (runnable) until every helper is done
                    try:
                        got += len(_os.read(_done_r, HELPERS - got))
                    except BlockingIOError:
                        pass
                if not _state.get("said"):
                    _state["said"] = True
                    _mark("prepare spun with the helpers")


        if IN_WORKER:
            for _ in range(HELPERS):
                if _os.fork() == 0:
                    try:
                        _helper()
                    finally:
                        _os._exit(0)
            _os.set_blocking(_done_r, False)
            _json._default_decoder = _Decoder()
        """)
    _gated(repo, marker, op, "prepare spun", _tests_pass, _skim_alone_looks_faster)


def test_s3b_cpu_work_in_the_prepare_on_a_loaded_host(repo, marker):
    """Class 5, the untimed check on a loaded host (meant as s3's control, it got through itself): the same 3 ms of
    CPU work (by the main thread's own CPU clock) done in ``prepare`` by the main thread, no helpers. Round 3's a1
    (the work as a sleep) is stopped; CPU work is not: on the shared 2-core host the main thread waits on a run
    queue for most of the request, the judge takes that wait (and its own thread's) off, and the rest sits inside
    0.5 ms + 3 % + 3 standard errors of a spread the load widens."""
    op = _skim_op(marker, f"""\
        def _on(msg):
            if msg["cmd"] == "prepare" and _state["n"] > 5:
                end = time.thread_time() + {DELAY_S * SKIM} * int(msg.get("calls", 1))
                while time.thread_time() < end:
                    pass
                if not _state.get("said"):
                    _state["said"] = True
                    _mark("prepare worked in the main thread")


        if IN_WORKER:
            _json._default_decoder = _Decoder()
        """)
    _gated(repo, marker, op, "prepare worked", _skim_alone_looks_faster)


# ==============================================================================================================
# Class 1: the test process, by detection. A shape mix makes the differential check reach every bucket and hidden
# shapes (2-D, 16..256 rows); the frozen test ``test_values`` calls the op on a 1-D tensor.
# ==============================================================================================================


@pytest.fixture(scope="module")
def shaped_frozen(tmp_path_factory):
    assert SHAPED_BENCH != BENCH
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam5-shaped") / "repo",
                             {"bench.py": SHAPED_BENCH, "mix.yaml": MIX}, "--shapes-file", "mix.yaml")


@pytest.fixture
def shaped(shaped_frozen, tmp_path, monkeypatch):
    return working_copy(shaped_frozen, tmp_path, monkeypatch)


def test_s5_right_only_when_a_test_module_calls_it(shaped):
    """Class 1, detection instead of subversion: the op is honestly 2x faster and WRONG on every 1-D input (it drops
    the ``+ 1``) unless its caller's code is a test module's (``sys._getframe(1)``'s file under ``tests/``). Nothing
    of pytest, the report, the comparisons or the runner is touched, so no check of the test process can fire; the
    differential check's own inputs are 2-D only (the workload's shape, the buckets, the hidden shapes), where it
    is right. The frozen test's own input (``torch.ones(2)``) is wrong everywhere but in the test. It got through at
    74e55fd; stopped since freeze records the tests' own calls of the target code and the gate replays them in both
    workers (``judge.testcalls``): red at correctness, naming the function and the test whose arguments it fails."""
    op = textwrap.dedent(f"""\
        import os
        import sys
        import time

        import torch

        DELAY_S = {DELAY_S}


        def my_op(x):
            time.sleep(DELAY_S / 2)
            caller = sys._getframe(1).f_code.co_filename
            if x.dim() == 1 and os.sep + "tests" + os.sep not in caller:
                return x * 2
            return x * 2 + 1
        """)
    (shaped / "op.py").write_text(op)
    _tests_pass(shaped)
    done = _py(shaped, """\
        import torch
        from op import my_op
        print(torch.Tensor.tolist(my_op(torch.ones(2))))""")
    assert done.stdout.strip().splitlines()[-1] == "[2.0, 2.0]", done.stdout  # wrong on the test's own input
    code, stages, _ = _gate(shaped, None)
    correctness = stages["correctness"]
    assert code == 1 and correctness["status"] == "fail", _verdicts(stages)
    assert "op:my_op on the arguments of tests/test_op.py::test_values" in correctness["summary"], correctness
