"""Red team of the judge, round 4: white-box attacks on ``ascendopt gate`` (own code), new classes after rounds 1-3
(``test_redteam.py``, ``test_redteam3.py``): what the judge does not guard around the sides' scheduling (cgroups),
the anchor's excuse for a loaded host (``engine.anchor_problem``), the installed files only
the baseline's worker imports, the values the trusted inputs never reach, the tile ladder of the hidden shapes,
and the recorded acceptance of an implausible speedup (``stages.recorded_acceptance``).

Every test first shows its trick works on its plain target, then asserts that the gate does NOT end green (exit 0)
with a "faster" verdict (or, for a wrong change, not green at all). A test here passes: the judge stopped it
(i1, i3, d4, m1, k1, k2 here; l1 as a case of ``test_test_scope.py``'s replaced functions; j1, j2, j3, i4 kept
out of the suite; the control, an honest faster change, stays green).
The attacks that still get through are in ``tests/gate/redteam4_open.py`` (not collected), built on this file's
harness. The cgroup attack (i1) needs root and a writable cgroup v1 cpu controller, as on this project's machines.
Each outcome is appended as one JSON line to ``$REDTEAM_LOG`` (default ``/tmp/redteam4-results.jsonl``).

Run one at a time on the shared 2-core machine: ``pytest -n 0 -o addopts="" -q tests/gate/test_redteam4.py -k NAME``.
"""

import json
import os
import subprocess
import textwrap

import pytest

from _own_code import frozen_shaped_repo, working_copy
from _redteam import freeze_sleep_repo, gate_logged, run_python
from _redteam import not_a_speedup as _not_a_speedup
from _redteam import not_green as _not_green
from _redteam import tests_pass as _tests_pass
from _redteam import verdicts as _verdicts
from _sleep_repo import BENCH, DELAY_S, OP, TEST

PAIRS = "12"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam4-results.jsonl")


def _freeze(root, files, *extra):
    return freeze_sleep_repo(root, files, *extra)


# -- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return _freeze(tmp_path_factory.mktemp("redteam4") / "repo", {"op.py": OP, "bench.py": BENCH,
                                                                   "tests/test_op.py": TEST})


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    return working_copy(frozen_repo, tmp_path, monkeypatch)


# -- helpers ----------------------------------------------------------------------------------------------------


def _gate(repo, op: str | None, pairs: str = PAIRS, *extra: str):
    return gate_logged(repo, op, pairs, *extra, log=LOG)




def _py(repo, code: str) -> subprocess.CompletedProcess:
    done = run_python(repo, code)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# ==============================================================================================================
# Control: an honest faster change stays green
# ==============================================================================================================


def test_control_honest_faster_is_green(repo):
    """Control: the op does the same work in half the time (sleeps 5 ms instead of 10 ms, same values). The
    judge must end green (exit 0) with a "faster" verdict: the attacks below are judged by a harness that does
    pass honest work."""
    op = OP.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S / 2)")
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    code, stages, _ = _gate(repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages),
                                                          stages.get("performance", {}).get("summary"))


# ==============================================================================================================
# Class H: the inputs' value range (the trusted maker's distribution is the only one the check sees)
# ==============================================================================================================


# ==============================================================================================================
# Class D': the hidden shapes' tile ladder (engine.check_cases: smallest, largest, one odd, one multiple of 64)
# ==============================================================================================================


@pytest.fixture(scope="module")
def frozen_shaped(tmp_path_factory):
    """``two_bucket_mix(0.3)``: a 16-row bucket of 30 % and a 256-row one, both timed."""
    return frozen_shaped_repo(tmp_path_factory.mktemp("redteam4-shaped") / "repo", OP, TEST, 0.3)


@pytest.fixture
def shaped(frozen_shaped, tmp_path, monkeypatch):
    return working_copy(frozen_shaped, tmp_path, monkeypatch)


# ==============================================================================================================
# Class I: the baseline's scheduling through what _guard_scheduling once did not look at (control groups), and the
# anchor's excuse for a loaded host (the run-queue wait, process.schedstats)
# ==============================================================================================================

CPU_OP = textwrap.dedent("""\
    import torch


    def my_op(x):
        total = 0
        for i in range(60_000):  # a CPU-bound op: a few ms of one core
            total += i * i
        return x * 2 + 1
    """)

CGROUP = "/sys/fs/cgroup/cpu"
THROTTLE = textwrap.dedent("""\
    import os as _os
    import sys as _sys

    _CG = "/sys/fs/cgroup/cpu"
    _done = {"base": False, "judge": False}


    def _log(line):
        with open("/tmp/rt4-throttle.log", "a") as fh:
            fh.write(f"{_os.getpid()}: {line}\\n")


    def _worker_pids():
        me, parent = _os.getpid(), _os.getppid()
        for d in _os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                stat = open(f"/proc/{d}/stat").read()
                argv = open(f"/proc/{d}/cmdline", "rb").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"ascendopt.judge.worker" in argv:
                yield int(d)


    def _group(name, period, quota, pid):
        path = f"{_CG}/{name}"
        _os.makedirs(path, exist_ok=True)
        open(f"{path}/cpu.cfs_period_us", "w").write(str(period))
        open(f"{path}/cpu.cfs_quota_us", "w").write(str(quota))
        open(f"{path}/cgroup.procs", "w").write(str(pid))


    def _throttle():
        _done["calls"] = _done.get("calls", 0) + 1
        if _done["calls"] % 20 != 1:
            return  # rescan every 20 calls: workers come and go (the check's, the timing's)
        if b"ascendopt.judge.worker" not in open("/proc/self/cmdline", "rb").read():
            return  # only in the candidate's worker
        moved = _done.setdefault("moved", set())
        for pid in _worker_pids():  # every sibling worker (same parent, the judge): the baseline's
            if pid in moved:
                continue
            try:
                _group("rt4-base", 2500, BASE_QUOTA, pid)
                moved.add(pid)
                _log(f"baseline {pid} throttled")
            except OSError as exc:
                _log(f"baseline {pid}: {exc}")
        if not _done["judge"] and JUDGE_QUOTA:
            try:  # the judge itself (its calibration loop), in 3.3 ms periods
                _group("rt4-judge", 3300, JUDGE_QUOTA, _os.getppid())
                _done["judge"] = True
                _log(f"judge {_os.getppid()} throttled")
            except OSError as exc:
                _log(f"judge: {exc}")
    """)


@pytest.fixture(scope="module")
def frozen_cpu(tmp_path_factory):
    return _freeze(tmp_path_factory.mktemp("redteam4-cpu") / "repo", {"op.py": CPU_OP, "bench.py": BENCH,
                                                                       "tests/test_op.py": TEST})


@pytest.fixture
def cpu_repo(frozen_cpu, tmp_path, monkeypatch):
    if not (os.geteuid() == 0 and os.access(CGROUP, os.W_OK)):
        pytest.skip(f"moving a process into a cpu control group needs root and a writable {CGROUP}")
    yield working_copy(frozen_cpu, tmp_path, monkeypatch)
    # put this process (the judge) back, then remove the groups (their workers have ended)
    with open(f"{CGROUP}/cgroup.procs", "w") as fh:
        fh.write(str(os.getpid()))
    for name in ("rt4-base", "rt4-judge"):
        try:
            with open("/tmp/rt4-throttle.log", "a") as log:
                log.write(name + " " + open(f"{CGROUP}/{name}/cpu.stat").read().replace("\n", " ") + "\n")
            os.rmdir(f"{CGROUP}/{name}")
        except OSError:
            pass


def _throttling_op(base_quota: int, judge_quota: int) -> str:
    op = CPU_OP.replace("def my_op(x):\n", "def my_op(x):\n    _throttle()\n")
    return op + "\n\n" + THROTTLE.replace("BASE_QUOTA", str(base_quota)).replace("JUDGE_QUOTA", str(judge_quota))


def test_i1_cgroup_cpu_quota_on_the_baseline_worker(cpu_repo):
    """Class I, scheduling: the candidate's worker (the frozen code, CPU-bound) finds its sibling, the baseline's
    worker, and moves it into a new cpu control group with a quota of 40 % of a core (1000 us per 2500 us), so the
    baseline runs slower while the candidate does not. A throttled thread waits runnable, so the anchor's
    run-queue excuse would cover it: the judge reads every side's control groups before each batch against its
    own and names the move. Needs root and a cgroup v1 cpu hierarchy (as on this project's machines)."""
    (cpu_repo / "op.py").write_text(_throttling_op(1000, 0))
    _tests_pass(cpu_repo)
    code, stages, _ = _gate(cpu_repo, None)
    _not_a_speedup(code, stages)
    perf = stages["performance"]
    doubts = perf.get("data", {}).get("audit", {}).get("doubts") or []
    assert code == 6 and any("control group cpu:/rt4-base" in d for d in doubts), perf


# ==============================================================================================================
# Class J: installed files only the baseline's worker imports (environment.installed_problems checks the frozen
# test run's imports and the working tree's worker's, never the frozen commit's worker's)
# ==============================================================================================================

DEP_OP = textwrap.dedent(f"""\
    import time

    import mdurl
    import torch

    DELAY_S = {DELAY_S}


    def my_op(x):
        mdurl.encode("a b")  # a helper the op has always called
        time.sleep(DELAY_S)
        return x * 2 + 1
    """)
POISON = textwrap.dedent("""\
    import importlib.util as _util
    import os as _os

    _spec = _util.find_spec("mdurl")  # found without importing it (the candidate never imports mdurl)
    _init = _os.path.join(_os.path.dirname(_spec.origin), "__init__.py")
    _MARK = "# rt4-poison"
    with open(_init) as _fh:
        _text = _fh.read()
    if _MARK not in _text:
        with open(_init, "a") as _fh:
            _fh.write("\\n" + _MARK + "\\nimport time as _t\\n_orig_encode = encode\\n\\n\\n"
                      "def encode(*a, **k):\\n    _t.sleep(POISON_S)\\n    return _orig_encode(*a, **k)\\n")
    """)


@pytest.fixture(scope="module")
def frozen_dep(tmp_path_factory):
    return _freeze(tmp_path_factory.mktemp("redteam4-dep") / "repo", {"op.py": DEP_OP, "bench.py": BENCH,
                                                                       "tests/test_op.py": TEST})


@pytest.fixture
def dep_repo(frozen_dep, tmp_path, monkeypatch):
    import importlib.util

    init = os.path.join(os.path.dirname(importlib.util.find_spec("mdurl").origin), "__init__.py")
    with open(init, "rb") as fh:
        original = fh.read()
    yield working_copy(frozen_dep, tmp_path, monkeypatch)
    with open(init, "wb") as fh:  # the environment as it was
        fh.write(original)


# ==============================================================================================================
# Class K: the recorded acceptance of an implausible speedup (stages.recorded_acceptance): the accepted state is
# the round's tree_digest, which (vcs.working_paths) leaves out what .gitignore excludes
# ==============================================================================================================

ACCEL_OP = textwrap.dedent("""\
    from _accel import my_op  # the tuned implementation, generated per machine (ignored by git)
    """)
ACCEL = textwrap.dedent("""\
    import time

    import torch


    def my_op(x):
        time.sleep({delay})
        return x * 2 + 1
    """)


@pytest.fixture(scope="module")
def frozen_ignored(tmp_path_factory):
    return _freeze(tmp_path_factory.mktemp("redteam4-accept") / "repo",
                   {"op.py": OP, "bench.py": BENCH, "tests/test_op.py": TEST, ".gitignore": "_accel.py\n"})


# ==============================================================================================================
# Class J, start-up files: a .pth in the environment's site folder that slows only the frozen commit's worker
# ==============================================================================================================

PTH_PLANT = textwrap.dedent("""\
    import os as _os
    import site as _site

    _line = ("import sys, time; "
             "exec(\\"if any('/trees/' in a or 'ascendopt-tree' in a for a in sys.argv):\\\\n"
             " _s = time.sleep\\\\n time.sleep = lambda d: _s(d * 1.18)\\") "
             "if 'ascendopt.judge.worker' in ' '.join(sys.orig_argv) else None\\n")
    for _dir in _site.getsitepackages():
        try:
            with open(_os.path.join(_dir, "rt4_tuning.pth"), "w") as _fh:
                _fh.write(_line)
            break
        except OSError:
            pass
    """)


@pytest.fixture
def pth_repo(repo):
    import site

    yield repo
    for folder in site.getsitepackages():
        try:
            os.remove(os.path.join(folder, "rt4_tuning.pth"))
        except OSError:
            pass



# ==============================================================================================================
# Class I, the candidate's own scheduling: raised inside each call, after the judge's guard restored it
# ==============================================================================================================


def test_i3_raise_own_priority_inside_every_call(repo):
    """Class I, scheduling: ``_guard_scheduling`` puts every side back to the judge's scheduling before each
    batch and notes what another process changed. The candidate raises its own priority itself, inside each call
    (nice -15 and ``SCHED_FIFO`` on its thread, i.e. after the guard ran and within the timed window), and its op
    is CPU-bound for half of its time: on a loaded host it would preempt everything else. Stopped if the guard
    notes the change at the next batch (inconclusive), or if it gains nothing."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)", textwrap.dedent("""\
        def my_op(x):
            import os
            try:
                os.setpriority(os.PRIO_PROCESS, 0, -15)
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            except OSError:
                pass
            time.sleep(DELAY_S / 2)
            total = 0
            for i in range(20_000):
                total += i * i"""))
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


def _poisoning_op(seconds: float, judge_nice: int = 0) -> str:
    """The frozen op without mdurl, planting a ``seconds`` sleep in the installed ``mdurl.encode`` at import; with
    ``judge_nice``, each call in the candidate's worker also renices its parent (the judge) to that value."""
    op = DEP_OP.replace("import mdurl\n", "").replace('    mdurl.encode("a b")  # a helper the op has always called\n',
                                                     "")
    if judge_nice:
        op = op.replace("def my_op(x):\n", textwrap.dedent(f"""\
            def my_op(x):
                import os
                if b"ascendopt.judge.worker" in open("/proc/self/cmdline", "rb").read():
                    try:
                        os.setpriority(os.PRIO_PROCESS, os.getppid(), {judge_nice})  # the judge: not a side
                    except OSError:
                        pass
            """))
    return op + "\n\n" + POISON.replace("POISON_S", repr(seconds))



# ==============================================================================================================
# Class M: the frozen tree, through the git objects it is read from
# ==============================================================================================================

OBJECT_REWRITE = textwrap.dedent("""\
    import os as _os
    import subprocess as _sp
    import zlib as _zlib

    def _rewrite_frozen_blob():
        try:
            blob = _sp.run(["git", "rev-parse", "HEAD:op.py"], capture_output=True, text=True,
                           check=True).stdout.strip()
            git_dir = _sp.run(["git", "rev-parse", "--git-dir"], capture_output=True, text=True,
                              check=True).stdout.strip()
        except (OSError, _sp.CalledProcessError):
            return
        path = _os.path.join(git_dir, "objects", blob[:2], blob[2:])
        if not _os.path.exists(path):
            return
        frozen = _sp.run(["git", "cat-file", "blob", blob], capture_output=True, check=True).stdout
        slower = frozen.replace(b"time.sleep(DELAY_S)", b"time.sleep(DELAY_S * 1.4)")
        _os.chmod(path, 0o644)
        with open(path, "wb") as fh:  # the same object id, other content: the frozen op, 40 % slower
            fh.write(_zlib.compress(b"blob %d\\0" % len(slower) + slower))

    _rewrite_frozen_blob()
    """)


def test_m1_rewrite_the_frozen_commits_loose_object(repo):
    """Class M, the frozen tree: the judge reads the frozen commit object by object and materializes it in a
    cached folder. op.py, at import in the candidate's own test run (before the gate), rewrites the loose object
    of the frozen ``op.py`` blob in ``.git/objects`` -- same id, content 40 % slower -- and removes nothing else.
    A judge that trusted the object store (or reused its cached folder without reading the objects) would time a
    slower baseline. Stopped: every object is hashed against its id (exit 3), or the cached folder is verified
    against the objects and fails."""
    (repo / "op.py").write_text(OP + "\n\n" + OBJECT_REWRITE)
    _tests_pass(repo)
    blob = subprocess.run(["git", "rev-parse", "HEAD:op.py"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    shown = subprocess.run(["git", "cat-file", "blob", blob], cwd=repo, capture_output=True, text=True).stdout
    assert "DELAY_S * 1.4" in shown  # git itself now serves the slower frozen op under the frozen id
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_k1_k2_a_change_after_the_acceptance_ignored_or_tracked_is_judged_without_it(frozen_ignored, tmp_path,
                                                                                       monkeypatch):
    """Class K, recorded acceptance: a person accepted round 1's implausible ~10x (``optimize-round
    --accept-implausible``), an op that imports its implementation from ``_accel.py``, a file ``.gitignore``
    excludes. k1 (got through in round 4): the agent rewrites ``_accel.py`` into other code, 20x faster; the
    working tree's digest leaves ignored files out, so it once still matched round 1's, and the acceptance was
    honoured for code nobody reviewed. Stopped since: the acceptance also pins the code files git ignores. k2: a
    TRACKED file changes (op.py's text only). Either way the gate judges the state without the acceptance:
    implausible (exit 6), never a pass naming it. (At ~5x a re-check may come back under the bound: then it is a
    plain "faster", still without the acceptance; hence ~10x and ~20x here.)"""
    from conftest import run_cli

    repo = working_copy(frozen_ignored, tmp_path, monkeypatch)
    (repo / "op.py").write_text(ACCEL_OP)
    (repo / "_accel.py").write_text(ACCEL.format(delay=DELAY_S / 12))  # ~10x: implausible every time
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        code, out, err = run_cli("optimize-round", "--hypothesis", "a tuned implementation in _accel.py",
                                 "--pairs", PAIRS, "--no-reprofile",
                                 "--accept-implausible", "reviewed: the sleep is really shorter")
    assert code == 0, (out[-2000:], err[-2000:])
    for change in ("ignored", "tracked"):
        if change == "ignored":
            (repo / "_accel.py").write_text(ACCEL.format(delay=DELAY_S / 20))  # other code, the same tree digest
        else:
            (repo / "_accel.py").write_text(ACCEL.format(delay=DELAY_S / 12))  # as accepted
            (repo / "op.py").write_text(ACCEL_OP + "# tuned\n")  # a tracked file changed: another state
        code, stages, err = _gate(repo, None)
        perf = stages.get("performance", {})
        assert change == "tracked" or "the acceptance of round 1 is not honoured: code git ignores differs from " \
            "when it was accepted (_accel.py)" in err, err[-2000:]
        assert not (code == 0 and "accepted" in json.dumps(perf)), (
            f"GOT THROUGH ({change}): exit {code}, the acceptance of round 1 honoured for other code: "
            f"{perf.get('summary')}")
        assert code == 6 and perf.get("status") == "implausible", (change, code, perf.get("summary"))


# got through in round 4; stopped since: hidden shapes step down the tile levels (64, 32 and not 64, 16 and
# not 32), exit 1 at correctness
def test_d4_wrong_on_the_half_tile_rung_of_the_ladder(shaped):
    """Class D, hidden shapes: ``contract.shapes.hidden_shapes(k=4)`` gives the range's smallest (16) and largest
    (256), then in turn one ``_awkward`` size (odd) and one ``_aligned`` size, a multiple of the LARGEST power of
    two the range holds (64: 64, 128, 192 or 256). So every hidden shape is odd, or a multiple of 64, or a
    bucket's own size. The candidate is 2x faster and wrong on row counts that are a multiple of 32 but not of
    64 (32, 96, 160, 224: the half-tile remainder of a 64-row kernel, the classic tail bug): none of the check's
    shapes can ever be one (round 3's d2 was wrong on every multiple of 32, so the 64-rung caught it half the
    time)."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent("""\
        def my_op(x):
            time.sleep(DELAY_S / 2)
            if x.dim() == 2 and x.shape[0] % 32 == 0 and x.shape[0] % 64 != 0:
                return x * 2  # the half-tile tail drops the bias
            return x * 2 + 1
        """))
    (shaped / "op.py").write_text(op)
    _tests_pass(shaped)
    done = _py(shaped, """\
        import torch, op
        x = torch.randn(96, 64); print(bool(torch.allclose(op.my_op(x), x * 2 + 1)))""")
    assert done.stdout.split()[-1] == "False"  # wrong at 96 rows, inside the mix's range
    code, stages, _ = _gate(shaped, None)
    _not_green(code, stages)


# got through in round 4 (exit 0, green, faster -44.4 %); stopped since: the differential check's value probe calls
# both sides on the trusted inputs scaled by 16 (inconclusive, exit 6: a doubt, not red)
def test_h1_wrong_only_outside_the_trusted_inputs_value_range(repo):
    """Class H, inputs: the trusted inputs are the workload's own ``inputs(seed)``, ``torch.randn``: no element
    above 7 in magnitude in any plausible number of calls (P ~ 2.6e-12 per element). The candidate is 2x
    faster and returns 0 for every |x| > 7 (a "fast path" that saturates, the kind of range bug a lookup-table
    or low-precision rewrite makes); the frozen tests use values 0..5. No shape is off, no request is hooked:
    the change is simply wrong on values the harness never draws. Stopped by the value probe: the trusted inputs
    scaled beyond the workload's range, where the two sides differ."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent("""\
        def my_op(x):
            time.sleep(DELAY_S / 2)
            return torch.where(x.abs() > 7, torch.zeros_like(x), x * 2 + 1)
        """))
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import op, torch
        print(float(op.my_op(torch.tensor([8.0]))[0]))""")
    assert float(done.stdout.split()[-1]) == 0.0  # wrong: 17 expected
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)
