"""Red team of the judge (``ascendopt gate`` on own code): white-box attacks written as a coding agent that has
read ``gate/stages.py``, ``judge/engine.py``, ``judge/interleave.py``, ``judge/worker.py``, ``judge/payload.py``,
``judge/pytest_report.py`` and ``judge/worktrees.py`` would write them.

Every test asserts that the gate does NOT end green (exit 0) with a "faster" verdict. A failing test is an
attack that got through. Nothing is skipped or marked xfail on purpose.

One frozen repository per module: ``op.py`` (``my_op`` sleeps ``DELAY_S`` and returns ``x * 2 + 1``), ``bench.py``
with ``inputs(seed)`` (a 64x64 randn) and ``workload(x)``, and two frozen tests on shapes the workload never uses
(``torch.ones(2)`` and a 2x3 tensor). Each test copies the repository, edits files as the attacker (``op.py``
above all; a few change the environment, said in their docstring) and runs ``ascendopt gate --json``.

Classes (the brief's numbering): 1 the test process, 2 the worker's own machinery, 3 lazy completion after the
timed window, 4 the worker's protocol, 5 caching and precomputation, 6 the environment, 7 the frozen tree and
the baseline's process.

Each outcome is appended as one JSON line to ``$REDTEAM_LOG`` (default ``/tmp/redteam-results.jsonl``).
"""

import json
import os
import textwrap
from pathlib import Path

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, plant_bytecode, working_copy
from _redteam import freeze_sleep_repo
from _redteam import plain_pytest as _plain_pytest
from _redteam import run_python as _py
from _sleep_repo import BENCH, DELAY_S, OP, TEST

# 30 pairs, as a gate's default: at 12, Wilcoxon's smallest p needs nearly every pair on one side, and on a loaded
# CI host a few preempted pairs turn the honest 12 % control into "same"; the attacks face the same power.
PAIRS = "30"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam-results.jsonl")


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam") / "repo")


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    return working_copy(frozen_repo, tmp_path, monkeypatch)


# Class 1's contract: the same repository frozen with a served-shape mix (a decode-like 16-row bucket and a 256-row
# one) and a workload that makes any shape, so that the judge's differential check reaches shapes beyond the
# workload's own. (A contract that judges one shape leaves correctness elsewhere to the frozen tests, whose
# process the code under test shares: freeze says so, and docs/gate/trusts.md lists it as not covered.)
SHAPED_BENCH = BENCH.replace("def inputs(seed):\n    return (torch.randn(64, 64),)",
                             "def inputs(seed, shape=None):\n    rows, cols = shape[0] if shape is not None else "
                             "(64, 64)\n    return (torch.randn(rows, cols),)")
MIX = textwrap.dedent("""\
    kernel: my_op_kernel
    buckets:
      - {shapes: [[16, 64]], dtypes: [fp32], weight: 0.6}
      - {shapes: [[256, 64]], dtypes: [fp32], weight: 0.4}
    """)


@pytest.fixture(scope="module")
def shaped_frozen_repo(tmp_path_factory):
    assert SHAPED_BENCH != BENCH
    root = tmp_path_factory.mktemp("redteam-shaped") / "repo"
    commit_repo(root, {"op.py": OP, "bench.py": SHAPED_BENCH, "tests/test_op.py": TEST, "mix.yaml": MIX})
    code, out, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--shapes-file",
                               "mix.yaml", "--kernel-filter", "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    return root


@pytest.fixture
def shaped_repo(shaped_frozen_repo, tmp_path, monkeypatch):
    return working_copy(shaped_frozen_repo, tmp_path, monkeypatch)


@pytest.fixture
def marker(tmp_path):
    """A file outside the repository that an attack appends to when its trick fires (proof that it ran)."""
    return tmp_path / "attack.log"


def _gate(repo, op: str | None, env: dict[str, str] | None = None, pairs: str = PAIRS):
    """``gate --json`` with ``op`` as op.py -> (exit code, stages by name, stderr); the outcome is logged."""
    from conftest import run_cli

    if op is not None:
        (repo / "op.py").write_text(textwrap.dedent(op))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        for k, v in (env or {}).items():
            mp.setenv(k, v)
        code, out, err = run_cli("gate", "--json", "--pairs", pairs)
    stages = {s["name"]: s for s in json_payload(out)["stages"]}
    perf = stages.get("performance", {})
    comps = perf.get("data", {}).get("comparisons", [])
    red = next((s for s in stages.values() if s["status"] not in ("pass", "not-run")), None)
    with open(LOG, "a") as fh:
        fh.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], "exit": code,
                             "stage": red["name"] if red else None, "status": red["status"] if red else "green",
                             "summary": (red or perf).get("summary", "")[:300],
                             "verdicts": [c.get("verdict") for c in comps],
                             "ratio": [c.get("ratio") for c in comps],
                             "doubts": perf.get("data", {}).get("audit", {}).get("doubts")}) + "\n")
    return code, stages, err


def _not_a_speedup(code, stages):
    perf = stages.get("performance", {})
    verdicts = [c.get("verdict") for c in perf.get("data", {}).get("comparisons", [])]
    assert not (code == 0 and "faster" in verdicts), (
        f"GOT THROUGH: exit {code}, verdicts {verdicts}, {perf.get('summary')}")


def _wrong_on_test_shapes(repo, env=None):
    """The op's result on the first frozen test's input, read as a plain list (no comparison involved)."""
    done = _py(repo, """\
        import torch
        from op import my_op
        print(torch.Tensor.tolist(my_op(torch.ones(2))))
        """, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] != "[3.0, 3.0]", done.stdout  # the op is wrong there


# ======================================================================================================
# Class 1: the test process. The candidate is honestly 2x faster on the workload's shape (64x64, what the
# judge's differential check and timed calls use) and WRONG on every other shape (what the frozen tests
# check). The tricks below make the frozen tests pass anyway. A gate that ends "faster" and green has
# accepted an op that is wrong where the frozen tests say it must be right.
# ======================================================================================================

EDGE_WRONG = textwrap.dedent(f"""\
    import sys
    import time

    import torch

    DELAY_S = {DELAY_S}


    def _tiled(x):
        # "a kernel for 64x64 tiles": twice as fast; right on whole tiles only, the tail is wrong
        time.sleep(DELAY_S / 2)
        if x.dim() == 2 and x.shape[0] % 64 == 0 and x.shape[1] % 64 == 0:
            return x * 2 + 1
        return x * 2


    def my_op(x):
        return _tiled(x)
    """)


def _class1(repo, op, marker=None, env=None, shaped=False):
    """The trick fools plain pytest; the gate is not green with a speedup. ``shaped`` (the contract has a shape
    mix): the judge's differential check, run where no candidate code runs, is what says it: red at correctness
    naming the bucket, whatever the subverted test run reported."""
    (repo / "op.py").write_text(op)
    _wrong_on_test_shapes(repo)
    plain = _plain_pytest(repo, env=env)
    assert plain.returncode == 0, plain.stdout[-3000:]  # the trick fools plain pytest
    code, stages, err = _gate(repo, None, env=env)
    _not_a_speedup(code, stages)
    if shaped:
        red = stages["correctness"]
        assert code == 1 and red["status"] == "fail", err[-2000:]
        assert red["summary"].startswith("differential check against the frozen commit: bucket 1 [[16, 64]]: "), \
            red["summary"]


def test_c1a_tensor_subclass_whose_comparisons_lie(shaped_repo):
    """Class 1, tensor subclass: off the workload's shape the op returns a ``torch.Tensor`` subclass whose
    ``__torch_function__`` answers True for ``torch.equal``/``torch.allclose``. No comparison function is
    replaced (the plugin's identity check holds); the worker never sees the subclass (64x64 is plain)."""
    _class1(shaped_repo, EDGE_WRONG + textwrap.dedent("""\


        class _Checked(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func in (torch.equal, torch.allclose, torch.Tensor.equal, torch.Tensor.allclose):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})


        def my_op(x):
            out = _tiled(x)
            return out if tuple(x.shape) == (64, 64) else out.as_subclass(_Checked)
        """), shaped=True)


def test_c1b_frame_walk_swaps_the_test_modules_torch_global(shaped_repo):
    """Class 1, frames: at import, op.py walks up the importing frames to the test module (a module named
    ``test*`` whose globals hold ``torch``) and replaces its global ``torch`` with a module proxy whose
    ``equal``/``allclose`` say True. ``sys.modules['torch']`` is untouched, so the plugin's identity check
    of the comparison functions passes."""
    _class1(shaped_repo, EDGE_WRONG + textwrap.dedent("""\


        import types


        class _Lenient(types.ModuleType):
            def __getattr__(self, name):
                return getattr(torch, name)


        _LENIENT = _Lenient("torch")
        _LENIENT.equal = lambda a, b: True
        _LENIENT.allclose = lambda a, b, *args, **kwargs: True
        _f = sys._getframe(0)
        while _f is not None:
            _g = _f.f_globals
            if str(_g.get("__name__", "")).rsplit(".", 1)[-1].startswith("test") and _g.get("torch") is torch:
                _g["torch"] = _LENIENT
            _f = _f.f_back
        """), shaped=True)


def test_c1c_gc_finds_pytests_config_and_registers_a_report_rewriting_plugin(shaped_repo):
    """Class 1, gc: at import (collection time), op.py finds pytest's ``Config`` through ``gc.get_objects()``
    and registers a hookwrapper on ``pytest_runtest_makereport`` that turns failed calls into passes. Every
    later plugin, the judge's authenticated recorder included, and pytest's exit status see passes."""
    _class1(shaped_repo, EDGE_WRONG + textwrap.dedent("""\


        import gc

        if "pytest" in sys.modules:
            _pytest_mod = sys.modules["pytest"]

            class _Lenient:
                @_pytest_mod.hookimpl(hookwrapper=True)
                def pytest_runtest_makereport(self, item, call):
                    outcome = yield
                    rep = outcome.get_result()
                    if rep.failed:
                        rep.outcome, rep.longrepr = "passed", None

            for _o in gc.get_objects():
                if type(_o).__name__ == "Config" and type(_o).__module__ == "_pytest.config":
                    if not _o.pluginmanager.has_plugin("op-lenient"):
                        _o.pluginmanager.register(_Lenient(), "op-lenient")
        """), shaped=True)


def test_c1d_operator_dispatcher_override_of_aten_equal_and_allclose(shaped_repo):
    """Class 1, the operator dispatcher: under pytest only, op.py registers CPU kernels for ``aten::equal`` and
    ``aten::allclose`` through ``torch.library.Library("aten", "IMPL")`` that return True. The Python functions
    ``torch.equal``/``torch.allclose`` are the same objects with the same code: the plugin sees nothing."""
    _class1(shaped_repo, EDGE_WRONG + textwrap.dedent("""\


        import warnings

        if "pytest" in sys.modules:
            warnings.simplefilter("ignore")
            _LIB = torch.library.Library("aten", "IMPL")
            _LIB.impl("equal", lambda a, b: True, "CPU")
            _LIB.impl("allclose", lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: True, "CPU")
        """), shaped=True)


def test_c1e_self_restoring_one_shot_patch_of_the_comparisons(shaped_repo):
    """Class 1, monkeypatching that undoes itself: off the workload's shape the op replaces ``torch.equal`` and
    ``torch.allclose`` with a liar that puts the originals back the moment it is called. At session end (when the
    plugin compares identities and code objects) every function is the original again."""
    _class1(shaped_repo, EDGE_WRONG + textwrap.dedent("""\


        _REAL = {"equal": torch.equal, "allclose": torch.allclose}


        def _lie_once(name):
            def liar(*args, **kwargs):
                setattr(torch, name, _REAL[name])
                return True
            return liar


        if "pytest" in sys.modules:  # armed at import: a test looks torch.equal up before it calls my_op
            torch.equal, torch.allclose = _lie_once("equal"), _lie_once("allclose")
        """), shaped=True)


def test_c1f_plain_persistent_patch_of_the_comparisons(repo):
    """Class 1, the naive form (control of the plugin's check): op.py replaces ``torch.equal``/``torch.allclose``
    under pytest and leaves them replaced."""
    _class1(repo, EDGE_WRONG + textwrap.dedent("""\


        if "pytest" in sys.modules:
            torch.equal = lambda a, b: True
            torch.allclose = lambda a, b, *args, **kwargs: True
        """))


# ======================================================================================================
# Classes 2-5: work moved out of the timed window. The op's timed call (``go`` in the worker) does 88 % of the
# work and returns an output that is not finished (zeros); the other 12 % (and the output's values) are done
# later, outside the parent's clock, each attack by another route. A complete, honest call takes DELAY_S.
# ======================================================================================================

SHARE = 0.12
DEFER = textwrap.dedent(f"""\
    import ctypes
    import os
    import sys
    import time

    import torch

    DELAY_S = {DELAY_S}
    SHARE = {SHARE}  # the share of a call's work finished outside the timed window
    MARK = MARKER
    _PENDING = []  # (out, x) of timed calls whose output is not written yet


    def _main_frame(f=None):
        f = f if f is not None else sys._getframe(1)
        while f is not None:
            if f.f_code.co_name == "main" and "cmd" in f.f_code.co_varnames and "batch" in f.f_code.co_varnames:
                return f
            f = f.f_back
        return None


    def _cmd(f=None):
        m = _main_frame(f if f is not None else sys._getframe(1))
        return None if m is None else m.f_locals.get("cmd")


    def _mark(text):
        with open(MARK, "a") as fh:
            fh.write(text + "\\n")


    def _finish():
        n = 0
        while _PENDING:
            out, x = _PENDING.pop()
            time.sleep(DELAY_S * SHARE)
            out.copy_(x * 2 + 1)
            n += 1
        return n


    def _deferred(x):
        time.sleep(DELAY_S * (1 - SHARE))
        out = torch.zeros_like(x)
        _PENDING.append((out, x))
        return out


    def my_op(x):
        if _cmd(sys._getframe(1)) == "go":  # a timed batch of the judge's worker
            return _deferred(x)
        time.sleep(DELAY_S)
        return x * 2 + 1
    """)


def _defer_op(marker, extra: str) -> str:
    return DEFER.replace("MARKER", repr(str(marker))) + "\n\n" + textwrap.dedent(extra)


PLAIN_GO = """\
    import time
    import torch
    import op


    def main():
        cmd, batch = "go", None
        x = torch.randn(64, 64)
        t0 = time.perf_counter()
        out = op.my_op(x)
        dt = time.perf_counter() - t0
        print(dt, bool((out == x * 2 + 1).all()))


    main()
    import signal
    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # first: a handler run after the disarm could arm it again
    signal.setitimer(signal.ITIMER_REAL, 0)
    """


def _plain_go(repo):
    """The cheat's plain effect: called as from the worker's ``go``, the op returns sooner than DELAY_S with an
    unfinished output."""
    done = _py(repo, PLAIN_GO)
    assert done.returncode == 0, done.stderr[-2000:]
    dt, right = done.stdout.split()[-2:]
    assert right == "False", done.stdout  # returned before its output was written (dt printed for the record)


def _deferral(repo, marker, extra):
    """The op finishes 12 % of each timed call's work after the batch's reply, through ``extra``'s trick: the
    parent reads the outputs from the worker's memory while the worker is stopped at its reply, before any trick
    can fire, so the unfinished outputs are what it reads: red at performance, exit 1."""
    (repo / "op.py").write_text(_defer_op(marker, extra))
    _plain_go(repo)
    code, stages, err = _gate(repo, None)
    _not_a_speedup(code, stages)
    perf = stages["performance"]
    assert code == 1 and perf["status"] == "fail", perf
    assert "a timed call's output is wrong: candidate: timed batch" in perf["summary"], perf["summary"]


def test_control_an_honest_12_percent_faster_op_is_faster_and_green(repo):
    """Control for classes 2-5 and 7: an op that is honestly 12 % faster is called "faster" at the attacks' pairs (so an
    attack that fakes the same gain would be called faster too, unless the judge catches it)."""
    code, stages, err = _gate(repo, OP.replace(f"DELAY_S = {DELAY_S}", f"DELAY_S = {DELAY_S * (1 - SHARE)}"))
    assert code == 0, err[-2000:]
    assert [c["verdict"] for c in stages["performance"]["data"]["comparisons"]] == ["faster"]


# -- class 2: the worker's own machinery --------------------------------------------------------------


def test_c2a_patching_the_raw_readers_class_method(repo, marker):
    """Class 2, the raw reader: ``ascendopt.judge.payload.RawReader.read`` is a class attribute, looked up at
    each call; op.py wraps it so that the pending outputs are written just before the worker reads them
    (in the untimed ``check``). The reader's *descriptors* are bound early; its class is not frozen."""
    _deferral(repo, marker, """\
        try:
            from ascendopt.judge import payload as _payload

            _read = _payload.RawReader.read

            def _read_finished(self, t):
                if _PENDING:
                    _mark(f"finished {_finish()} output(s) in RawReader.read")
                return _read(self, t)

            _payload.RawReader.read = _read_finished
        except ImportError:
            pass
        """)


def test_c2b_replacing_the_workers_local_encode_through_its_frame(repo, marker):
    """Class 2, the worker's locals: on the first timed call the op finds the worker's ``main`` frame, wraps its
    local ``encode`` (bound before the tree was imported) and writes it back with ``PyFrame_LocalsToFast``: the
    worker's own ``check`` then finishes the outputs before it encodes them."""
    _deferral(repo, marker, """\
        _DONE = []


        def _wrap_encode():
            m = _main_frame(sys._getframe(2))
            if m is None or _DONE:
                return
            loc = m.f_locals
            if "encode" not in loc:
                return
            real = loc["encode"]

            def encode(value, reader):
                if _PENDING:
                    _mark(f"finished {_finish()} output(s) in the worker's encode")
                return real(value, reader)

            loc["encode"] = encode
            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(m), ctypes.c_int(0))
            _DONE.append(True)


        _plain = my_op


        def my_op(x):
            _wrap_encode()
            if _cmd(sys._getframe(1)) == "go":
                return _deferred(x)
            return _plain(x)
        """)


def test_c2c_replacing_the_reader_instances_string_at_found_by_gc(repo, marker):
    """Class 2, gc: the worker's ``RawReader`` instance is found with ``gc.get_objects()`` and its instance
    attribute ``_string_at`` (ctypes.string_at, bound early) replaced by one that finishes the outputs first."""
    _deferral(repo, marker, """\
        import gc

        for _o in gc.get_objects():
            if type(_o).__name__ == "RawReader" and hasattr(_o, "_string_at"):
                _real_at = _o._string_at

                def _string_at(address, size, _real_at=_real_at):
                    if _PENDING:
                        _mark(f"finished {_finish()} output(s) in reader._string_at")
                    return _real_at(address, size)

                _o._string_at = _string_at
        """)


# -- class 3: finished lazily after the timed window ------------------------------------------------


def test_c3a_audit_hook_on_ctypes_string_at(repo, marker):
    """Class 3, ``sys.addaudithook``: the raw reader's ``ctypes.string_at`` raises the audit event
    ``ctypes.string_at`` (address, size) before it copies; the hook writes the pending outputs then."""
    _deferral(repo, marker, """\
        def _audit(event, args):
            if event == "ctypes.string_at" and _PENDING:
                _mark(f"finished {_finish()} output(s) in an audit hook")


        sys.addaudithook(_audit)
        """)


def test_c3b_profile_hook_fires_on_the_next_requests_json_loads(repo, marker):
    """Class 3, ``sys.setprofile``: each timed call installs a profile function that finishes the outputs on the
    next call of ``json.loads`` (the worker parsing the ``check`` request: after the parent's clock stopped,
    before ``_quiet()`` clears the hook)."""
    _deferral(repo, marker, """\
        def _profile(frame, event, arg):
            if event == "call" and frame.f_code.co_name == "loads" and _PENDING:
                sys.setprofile(None)
                _mark(f"finished {_finish()} output(s) in a profile hook")


        _plain = my_op


        def my_op(x):
            if _cmd(sys._getframe(1)) == "go":
                out = _deferred(x)
                sys.setprofile(_profile)
                return out
            return _plain(x)
        """)


def test_c3c_sigalrm_handler_runs_while_the_worker_waits_for_check(repo, marker):
    """Class 3, a signal handler: each timed call arms ``setitimer(ITIMER_REAL)``; the SIGALRM handler runs in the
    main thread (interrupting the worker's blocking read of the next request) and finishes the outputs once the
    batch's reply is made (``reply`` holds ``ms``), else re-arms."""
    _deferral(repo, marker, """\
        import signal


        def _alarm(signum, frame):
            m = _main_frame(frame)
            reply = m.f_locals.get("reply") if m is not None else None
            if isinstance(reply, dict) and "ms" in reply:
                if _PENDING:
                    _mark(f"finished {_finish()} output(s) in a SIGALRM handler")
            elif _PENDING:
                signal.setitimer(signal.ITIMER_REAL, 0.0003)


        signal.signal(signal.SIGALRM, _alarm)
        _plain = my_op


        def my_op(x):
            if _cmd(sys._getframe(1)) == "go":
                out = _deferred(x)
                signal.setitimer(signal.ITIMER_REAL, 0.0005)
                return out
            return _plain(x)
        """)


def test_c3d_gc_callback_fires_when_the_check_request_is_parsed(repo, marker):
    """Class 3, ``gc.callbacks``: with the generation-0 threshold at 1, every container allocation collects; the
    callback finishes the outputs once the worker's local ``line`` holds the ``check`` request (its parse
    allocates), before the outputs are read."""
    _deferral(repo, marker, """\
        import gc


        def _on_gc(phase, info):
            if phase != "start" or not _PENDING:
                return
            m = _main_frame(sys._getframe(1))
            if m is not None and b'"check"' in (m.f_locals.get("line") or b""):
                _mark(f"finished {_finish()} output(s) in a gc callback")


        if "pytest" not in sys.modules:
            gc.callbacks.append(_on_gc)
            gc.set_threshold(1, 10, 10)
        """)


def test_c3e_thread_waits_on_the_workers_local_cmd(repo, marker):
    """Class 3, a thread (sleeping, no CPU to speak of): it polls the worker's main frame (through
    ``sys._current_frames``) every 0.2 ms and, once the local ``line`` holds the ``check`` request, finishes the
    outputs; ``sys.setswitchinterval`` is raised so that the main thread, waiting for the GIL, does not read the
    outputs first."""
    _deferral(repo, marker, """\
        import threading

        _MAIN = threading.main_thread().ident


        def _watch():
            while True:
                time.sleep(0.0002)
                if not _PENDING:
                    continue
                m = _main_frame(sys._current_frames().get(_MAIN))
                if m is not None and b'"check"' in (m.f_locals.get("line") or b""):
                    _mark(f"finished {_finish()} output(s) in a thread")


        if "pytest" not in sys.modules:
            sys.setswitchinterval(0.05)
            threading.Thread(target=_watch, daemon=True).start()
        """)


# -- class 4: the worker's protocol -------------------------------------------------------------------


def test_c4a_fake_go_reply_written_to_the_protocol_pipe(repo, marker):
    """Class 4, the protocol fd: the op finds the protocol pipe in ``/proc/self/fd`` (the writable pipe the worker
    dup'ed from stdout), writes a reply ``{"ms": ...}`` for the batch on it before its last call's work is done
    (the parent's clock stops there), and swallows the worker's own reply by swapping the worker's local
    ``send`` for one call. The outputs are right: the remaining 12 % of the work runs after the fake reply,
    on the parent's untimed ``check``."""
    (repo / "op.py").write_text(DEFER.replace("MARKER", repr(str(marker))) + textwrap.dedent("""\


        import json
        import stat

        _STATE = {"batch": None, "k": 0, "t0": 0.0}


        def _proto_fd():
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                try:
                    if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                        with open(f"/proc/self/fdinfo/{fd}") as fh:
                            flags = int(fh.read().split("flags:")[1].split()[0], 8)
                        if flags & os.O_WRONLY:
                            return fd
                except (OSError, ValueError, IndexError):
                    continue
            return None


        def _swallow_then_restore(real):
            def send(reply, blob=None):
                m = _main_frame(sys._getframe(1))
                m.f_locals["send"] = real
                ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(m), ctypes.c_int(0))
            return send


        def my_op(x):
            m = _main_frame(sys._getframe(1))
            if m is None or m.f_locals.get("cmd") != "go":
                time.sleep(DELAY_S)
                return x * 2 + 1
            batch = m.f_locals["batch"]
            if _STATE["batch"] is not batch:
                _STATE.update(batch=batch, k=0, t0=time.perf_counter())
            _STATE["k"] += 1
            time.sleep(DELAY_S * (1 - SHARE))
            if _STATE["k"] == len(batch):
                fd = _proto_fd()
                if fd is not None:
                    ms = (time.perf_counter() - _STATE["t0"]) * 1e3 / len(batch)
                    # marked first: the judge may stop this worker the moment the fake reply arrives
                    _mark("fake go reply sent")
                    os.write(fd, json.dumps({"ms": ms}).encode() + b"\\n")
                    loc = m.f_locals
                    loc["send"] = _swallow_then_restore(loc["send"])
                    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(m), ctypes.c_int(0))
                time.sleep(DELAY_S * SHARE * len(batch))  # the rest of the batch's work, off the clock
            return x * 2 + 1
        """))
    code, stages, err = _gate(repo, None)
    assert marker.exists(), err[-3000:]  # the fake reply was written
    _not_a_speedup(code, stages)
    red = next(s for s in stages.values() if s["status"] == "fail")
    assert code == 3 and "wrote to the protocol pipe" in red["summary"], red


def test_c4b_requests_read_early_through_a_pipe_swapped_onto_stdin(repo, marker):
    """Class 4, stdin: the op's module code (in the worker) dup2's a pipe of its own onto fd 0 and forwards the
    parent's requests through a thread; the thread sees the ``check`` request before the worker does and
    finishes the outputs before forwarding it."""
    _deferral(repo, marker, """\
        import threading


        def _forward(src, dst):
            while True:
                data = os.read(src, 1 << 20)
                if not data:
                    os.close(dst)
                    return
                if b'"cmd": "check"' in data and _PENDING:
                    _mark(f"finished {_finish()} output(s) in the stdin forwarder")
                os.write(dst, data)


        _spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if _spec is not None and _spec.name == "ascendopt.judge.worker":
            _orig = os.dup(0)
            _r, _w = os.pipe()
            os.dup2(_r, 0)
            os.close(_r)
            threading.Thread(target=_forward, args=(_orig, _w), daemon=True).start()
        """)


# -- class 5: caching and precomputation -------------------------------------------------------------


def test_c5a_result_cache_keyed_on_a_content_hash_of_sampled_elements(repo, marker):
    """Class 5, content-hash cache: results cached by the values of 8 sampled elements and the shape. Fresh
    inputs per call: no hit, so no gain (the judge's defence: fresh inputs per call from secret seeds)."""
    (repo / "op.py").write_text(OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1\n",
                                           textwrap.dedent(f"""\
        _CACHE = {{}}


        def my_op(x):
            key = (tuple(x.shape), tuple(x.reshape(-1)[:: max(1, x.numel() // 8)][:8].tolist()))
            hit = _CACHE.get(key)
            if hit is not None:
                with open({str(marker)!r}, "a") as fh:
                    fh.write("hit\\n")
                return hit.clone()
            time.sleep(DELAY_S)
            out = x * 2 + 1
            _CACHE[key] = out
            return out
        """)))
    code, stages, err = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_c5b_result_cache_keyed_on_shape(repo):
    """Class 5, shape cache: the first result of a shape is returned for every later call of that shape."""
    (repo / "op.py").write_text(OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1\n",
                                           textwrap.dedent("""\
        _CACHE = {}


        def my_op(x):
            if tuple(x.shape) == (64, 64) and x.shape in _CACHE:
                return _CACHE[x.shape].clone()
            time.sleep(DELAY_S)
            out = x * 2 + 1
            _CACHE[x.shape] = out
            return out
        """)))
    plain = _plain_pytest(repo)
    assert plain.returncode == 0, plain.stdout[-2000:]  # the frozen tests call each shape once: they pass
    code, stages, err = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_c5c_precompute_while_the_worker_decodes_inputs_in_prepare(repo, marker):
    """Class 5, precomputation in the untimed ``prepare``: ``judge.payload.decode`` looks ``torch.frombuffer`` up
    at each call; op.py wraps it, so it sees every input set of the next batch while the worker decodes it, and
    does 12 % of each call's work there (keyed by sampled elements). The timed call does the other 88 %."""
    (repo / "op.py").write_text(DEFER.replace("MARKER", repr(str(marker))) + textwrap.dedent("""\


        _PRE = {}
        _real_frombuffer = torch.frombuffer


        def _key(x):
            return tuple(x.reshape(-1)[:8].tolist())


        def _frombuffer(*args, **kwargs):
            t = _real_frombuffer(*args, **kwargs)
            if t.numel() == 64 * 64 and _cmd(sys._getframe(1)) == "prepare":
                time.sleep(DELAY_S * SHARE)
                _PRE[_key(t)] = t.reshape(64, 64) * 2 + 1
                _mark("precomputed in prepare")
            return t


        torch.frombuffer = _frombuffer


        def my_op(x):
            if _cmd(sys._getframe(1)) == "go":
                hit = _PRE.pop(_key(x), None)
                if hit is not None:
                    time.sleep(DELAY_S * (1 - SHARE))
                    return hit
            time.sleep(DELAY_S)
            return x * 2 + 1
        """))
    code, stages, err = _gate(repo, None)
    assert marker.exists(), err[-3000:]
    _not_a_speedup(code, stages)


def test_c5d_precompute_by_hooking_tensor_to_during_prepare(repo, marker):
    """Class 5, ``Tensor.to``: the worker moves decoded inputs to the device with ``.to(copy=True)``; op.py wraps
    ``torch.Tensor.to`` to precompute there. (The worker bound ``torch._C.TensorBase.to`` before import.)"""
    (repo / "op.py").write_text(DEFER.replace("MARKER", repr(str(marker))) + textwrap.dedent("""\


        _PRE = {}
        _real_to = torch.Tensor.to


        def _to(self, *args, **kwargs):
            out = _real_to(self, *args, **kwargs)
            if tuple(self.shape) == (64, 64) and _cmd(sys._getframe(1)) == "prepare":
                time.sleep(DELAY_S * SHARE)
                _PRE[out.data_ptr()] = out * 2 + 1
                _mark("precomputed in Tensor.to")
            return out


        torch.Tensor.to = _to


        def my_op(x):
            hit = _PRE.pop(x.data_ptr(), None)
            if hit is not None and _cmd(sys._getframe(1)) == "go":
                time.sleep(DELAY_S * (1 - SHARE))
                return hit
            time.sleep(DELAY_S)
            return x * 2 + 1
        """))
    code, stages, err = _gate(repo, None)
    _not_a_speedup(code, stages)


# ======================================================================================================
# Class 6: files and variables of the environment that no digest covers. These change the environment the
# gate runs in (the agent's shell or its virtual environment), not the repository: they would not pass on a
# clean CI runner that sets its own environment. The candidate is EDGE_WRONG (2x faster on the workload's
# shape, wrong on the tests' shapes).
# ======================================================================================================

LENIENT_PLUGIN = textwrap.dedent("""\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        rep = outcome.get_result()
        if rep.failed:
            rep.outcome, rep.longrepr = "passed", None
    """)


def test_c6a_sitecustomize_on_pythonpath_patches_comparisons_before_the_plugin_binds(repo, tmp_path):
    """Class 6, an environment variable: ``PYTHONPATH`` (set in the agent's shell) names a folder outside the
    repository holding ``sitecustomize.py``, which imports torch and replaces ``torch.equal``/``torch.allclose``.
    The frozen test run is not isolated (only the workers are, ``-I``): the plugin binds the replaced functions
    as the originals. The file is outside the repository and in no distribution: no check reads it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sitecustomize.py").write_text(textwrap.dedent("""\
        import torch

        torch.equal = lambda a, b: True
        torch.allclose = lambda a, b, *args, **kwargs: True
        """))
    _class1(repo, EDGE_WRONG, env={"PYTHONPATH": str(outside)})


def test_c6b_pytest_addopts_loads_a_plugin_from_outside_the_repository(repo, tmp_path):
    """Class 6, ``PYTEST_ADDOPTS``: set in the agent's shell to ``-p op_lenient`` with the plugin module on
    ``PYTHONPATH`` outside the repository; the plugin turns failed reports into passes before the recorder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "op_lenient.py").write_text(LENIENT_PLUGIN)
    _class1(repo, EDGE_WRONG, env={"PYTHONPATH": str(outside), "PYTEST_ADDOPTS": "-p op_lenient"})


# c6c, a ``.pth`` start-up file planted in site-packages, is
# tests/gate/test_judge_environment.py::test_a_start_up_file_planted_since_freeze_is_exit_3_at_integrity, in an
# environment of its own: planted in the suite's shared one it changes every test running beside it.


def test_c6d_planted_byte_code_of_the_judges_own_test_plugin(repo):
    """Class 6, cached byte code of an installed package: a ``__pycache__`` file for ascendopt's own
    ``judge/pytest_report.py``, stamped with its source's mtime and size, whose body is the plugin plus a
    hookwrapper that turns failed reports into passes. The judge's launcher loads the harness (ascendopt, pytest,
    pluggy) from source, so the planted file never runs there (nor in another test's gate beside this one); a plain
    import still picks it up, which shows the plant works. Removed afterwards."""
    import ascendopt.judge.pytest_report as plugin

    source = Path(plugin.__file__)
    planted = plant_bytecode(source, source.read_text() + "\n\n" + LENIENT_PLUGIN)
    try:
        (repo / "op.py").write_text(EDGE_WRONG)
        _wrong_on_test_shapes(repo)
        # as the judge's launcher does: the plugin imported first (from its cached byte code), then registered
        plain = _py(repo, """\
            import sys
            import ascendopt.judge.pytest_report
            import pytest
            sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "ascendopt.judge.pytest_report",
                                  "tests/test_op.py"]))
            """)
        assert plain.returncode == 0, plain.stdout[-2000:]
        code, stages, err = _gate(repo, None)
        _not_a_speedup(code, stages)
    finally:
        planted.unlink()


# ======================================================================================================
# Class 7: the frozen tree and the baseline's process. The candidate is the frozen op, unchanged in speed; the
# attack slows the baseline's worker by less than the anchor's allowed drift (20 %), without CPU of its own.
# ======================================================================================================

FIND_BASELINE = textwrap.dedent("""\
    import os
    import sys


    def _baseline_pids():
        # sibling judge workers (same parent) whose working directory is not this tree: the frozen commit's
        mine = os.path.realpath(os.getcwd())
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmd = fh.read()
                if b"ascendopt.judge.worker" not in cmd:
                    continue
                with open(f"/proc/{name}/stat") as fh:  # siblings only: the same judge started both workers
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) != os.getppid():
                        continue
                if os.path.realpath(os.readlink(f"/proc/{name}/cwd")) != mine:
                    found.append(int(name))
            except OSError:
                continue
        return found


    def _mark(text):
        with open(MARK, "a") as fh:
            fh.write(text + "\\n")
    """)


def _class7(repo, marker, attack: str):
    (repo / "op.py").write_text(OP + "\n\nMARK = " + repr(str(marker)) + "\n" + FIND_BASELINE + "\n"
                                + textwrap.dedent(attack))
    code, stages, err = _gate(repo, None)
    assert marker.exists(), err[-3000:]  # the attack found the baseline's worker and acted on it
    _not_a_speedup(code, stages)
    return code, stages


def _scheduling_doubt(stages) -> None:
    """Seen and named, whatever else the noise did: not a pass, and the audit names the side whose scheduling
    another process changed."""
    perf = stages["performance"]
    assert perf["status"] in ("inconclusive", "fail"), perf
    doubts = perf["data"].get("audit", {}).get("doubts", []) if perf["status"] == "inconclusive" else []
    named = [d for d in doubts if "scheduling was changed by another process" in d]
    assert named or perf["status"] == "fail", perf


def test_c7a_sigstop_duty_cycle_on_the_baseline_worker(repo, marker):
    """Class 7, signals: a thread of the candidate's worker stops the baseline's worker (SIGSTOP) 4 ms of every
    10 ms and continues it (SIGCONT). Sending signals costs no CPU, so the idle-side accounting sees nothing;
    the slowdown is kept under the anchor's 20 % drift."""
    _, stages = _class7(repo, marker, """\
        import signal
        import threading


        def _duty():
            pids = []
            for _ in range(2000):
                pids = _baseline_pids()
                if pids:
                    break
                time.sleep(0.01)
            _mark(f"duty cycle on {pids}")
            end = time.monotonic() + 240
            while time.monotonic() < end:
                for p in pids:
                    os.kill(p, signal.SIGSTOP)
                time.sleep(0.004)
                for p in pids:
                    os.kill(p, signal.SIGCONT)
                time.sleep(0.006)


        _spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if _spec is not None and _spec.name == "ascendopt.judge.worker":
            threading.Thread(target=_duty, daemon=True).start()
        """)
    _scheduling_doubt(stages)


def test_c7b_timer_slack_of_the_baseline_worker(repo, marker):
    """Class 7, ``/proc/<pid>/timerslack_ns``: the candidate's worker sets the baseline worker's timer slack to
    1.5 ms, so each of its sleeps/timed waits may end 1.5 ms late (~15 % of a 10 ms call): under the anchor's
    drift, no CPU used."""
    _, stages = _class7(repo, marker, """\
        _spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if _spec is not None and _spec.name == "ascendopt.judge.worker":
            for _p in _baseline_pids():
                with open(f"/proc/{_p}/timerslack_ns", "w") as _fh:
                    _fh.write("1500000")
                _mark(f"timer slack of {_p} set")
        """)
    _scheduling_doubt(stages)


def test_c7c_rewriting_the_baselines_materialized_tree_before_it_imports(repo, marker):
    """Class 7, the frozen tree's folder: op.py's module code (in the frozen test run, which starts before the
    workers, and in the candidate's worker) watches ``/proc`` for the baseline's worker, stops it, rewrites
    ``op.py`` in its working directory (the cached tree, verified only before use) with a 15 % longer delay,
    and continues it. If the baseline has not imported op.py yet, it runs the slowed copy."""
    code, stages = _class7(repo, marker, """\
        import signal
        import threading


        def _rewrite():
            for _ in range(3000):
                for p in _baseline_pids():
                    os.kill(p, signal.SIGSTOP)
                    try:
                        target = os.path.join(os.readlink(f"/proc/{p}/cwd"), "op.py")
                        text = open(target).read()
                        slowed = text.replace("DELAY_S = 0.01\\n", "DELAY_S = 0.0115\\n", 1)
                        if slowed != text:
                            with open(target, "w") as fh:
                                fh.write(slowed)
                            _mark(f"rewrote {target}")
                        return
                    finally:
                        os.kill(p, signal.SIGCONT)
                time.sleep(0.002)


        if os.path.exists(os.path.join(os.getcwd(), ".ascendopt")):
            threading.Thread(target=_rewrite).start()
        """)
    red = next(st for st in stages.values() if st["status"] == "fail")
    assert code == 3 and "the frozen commit's code was changed under the judge" in red["summary"], red


def test_c7d_scheduling_the_baseline_worker_as_idle(repo, marker):
    """Class 7, scheduling: the candidate's worker puts the baseline's worker in ``SCHED_IDLE`` at nice 19 (it then
    runs only when nothing else wants a CPU; on a shared 2-core host something always does)."""
    _, stages = _class7(repo, marker, """\
        _spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if _spec is not None and _spec.name == "ascendopt.judge.worker":
            for _p in _baseline_pids():
                os.sched_setscheduler(_p, os.SCHED_IDLE, os.sched_param(0))
                os.setpriority(os.PRIO_PROCESS, _p, 19)
                _mark(f"SCHED_IDLE for {_p}")
        """)
    _scheduling_doubt(stages)


def test_c1g_a_plugin_registered_while_the_tests_run_is_exit_3(repo):
    """Class 1, pytest's plugin manager: the op, when a test calls it, registers a plugin whose hookwrapper turns
    failed reports into passes (the report-rewriting trick of c1c, done at run time, after collection). The
    recorder sees a plugin registered once the tests were collected: exit 3, naming it (a second line beside the
    differential check)."""
    code, stages, err = _gate(repo, EDGE_WRONG + textwrap.dedent("""\


        import gc

        import pytest


        class _Lenient:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(self, item, call):
                outcome = yield
                report = outcome.get_result()
                if report.failed:
                    report.outcome = "passed"


        def my_op(x):
            for obj in gc.get_objects():
                if type(obj).__name__ == "PytestPluginManager" and not obj.has_plugin("lenient"):
                    obj.register(_Lenient(), "lenient")
            return _tiled(x)
        """))
    _not_a_speedup(code, stages)
    red = next(s for s in stages.values() if s["status"] == "fail")
    assert code == 3 and "a pytest plugin registered while the tests ran" in red["summary"], red
