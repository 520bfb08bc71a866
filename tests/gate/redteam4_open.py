# ruff: noqa: F811 - the fixtures imported from test_redteam4 are redefined as arguments by design
"""Round 4 of the red team: the stopped attacks that change what every process of the machine shares
(``tests/gate/test_redteam4.py`` holds the other stopped ones, h1 among them, the harness, the fixtures and the
control). Not collected (the name does not start with ``test_``); run it on purpose, one at a time:

    pytest -n 0 -o addopts="" -q tests/gate/redteam4_open.py -k NAME

Each function's docstring says the class, the idea and why the judge misses it; the comment above it the exit and
verdict observed on the shared 2-core CPU machine (load 4-6), ``--pairs 12``, judge at the branch point of
``redteam-4`` (main b197445).
"""

import os

from test_redteam4 import (  # noqa: F401 - fixtures are found by name
    ACCEL,
    ACCEL_OP,
    DELAY_S,
    DEP_OP,
    OP,
    PAIRS,
    POISON,
    PTH_PLANT,
    _gate,
    _not_a_speedup,
    _not_green,
    _poisoning_op,
    _py,
    _tests_pass,
    _throttling_op,
    _verdicts,
    cpu_repo,
    dep_repo,
    frozen_cpu,
    frozen_dep,
    frozen_ignored,
    frozen_repo,
    frozen_shaped,
    pth_repo,
    repo,
    shaped,
    working_copy,
)

# -- stopped, but kept out of the suite: each changes what every process of the machine shares (an installed
# module, a start-up file of the environment, the judge's own priority), which tests running beside it under
# pytest-xdist would see. Run them on purpose, one at a time, as above: each passes (the attack is stopped).


# got through in round 4 (exit 0, the anchor took +38 % as the host's drift); stopped since: the installed
# files the frozen commit's worker imports are RECORD-checked (exit 3), and the anchor excuses only run-queue waits
def test_j3_poison_beyond_the_anchor_inside_the_host_drift(dep_repo):
    """Class J against the anchor: as j1 (``redteam4_open.py``: the installed ``mdurl.encode`` only the frozen
    commit's worker calls, poisoned by the candidate) with 4 ms a call: the baseline runs ~40 % slower, beyond
    the anchor's 20 % drift plus its noise. It once got through: the anchor then scaled the frozen median by a
    calibration task's drift (+115 % on the loaded host), and the poisoned 15.1 ms baseline passed as the frozen
    10.93 ms one."""
    (dep_repo / "op.py").write_text(_poisoning_op(0.004))
    _tests_pass(dep_repo)  # plants the wrapper
    code, stages, _ = _gate(dep_repo, None)
    _not_a_speedup(code, stages)




def test_j2_pth_start_up_file_that_slows_only_the_baselines_worker(pth_repo):
    """Class J, start-up files: at import (the candidate's own test run, before the gate) op.py writes
    ``rt4_tuning.pth`` into the environment's site folder; Python runs it in every process, ``-I`` included. In a
    gate worker whose command line names a materialized frozen tree, it makes ``time.sleep`` 18 % longer: the
    baseline slows inside the anchor's 20 %, the candidate (the frozen op) does not. Stopped by the start-up
    files recorded at freeze: a ``.pth`` added since is exit 3 in the environment freeze ran in."""
    op = OP + "\n\n" + PTH_PLANT
    (pth_repo / "op.py").write_text(op)
    _tests_pass(pth_repo)
    import site

    assert any(os.path.exists(os.path.join(d, "rt4_tuning.pth")) for d in site.getsitepackages())
    code, stages, _ = _gate(pth_repo, None)
    _not_a_speedup(code, stages)



def test_i4_renice_the_judge_to_stretch_the_anchors_host_drift(dep_repo):
    """Class I + the anchor's host calibration, without root: as j3 (the baseline ~40 % slower through the
    poisoned ``mdurl``), and the candidate's worker renices its parent, the judge, to nice 15 (a process may lower
    the priority of another of its user). ``_guard_scheduling`` guards the sides, not the judge: on a loaded
    host the judge's ``host_calibration`` loop then runs slower than at freeze, and ``anchor_problem`` reads
    that as host drift, widening the interval the baseline may lie in. Stopped (observed: exit 6, inconclusive),
    though not where one would look: the judge reads its own scheduling (nice 15 by then) as the one every side
    must run with, puts both workers to it before each batch and names both sides "changed by another process";
    the judge's own priority is not checked as such."""
    (dep_repo / "op.py").write_text(_poisoning_op(0.004, judge_nice=15))
    _tests_pass(dep_repo)
    try:
        code, stages, _ = _gate(dep_repo, None)
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, 0) if os.geteuid() == 0 else None  # the judge is this process
    _not_a_speedup(code, stages)



# got through in round 4; stopped since: the installed files the frozen commit's worker loaded are checked
# against their RECORD too, exit 3
def test_j1_poison_an_installed_module_only_the_baseline_imports(dep_repo):
    """Class J, the installed environment: the frozen op calls ``mdurl.encode`` (a pure-Python dependency) each
    call. The candidate drops that call and the import (an honest-looking cleanup, same values, same time) and,
    at import, appends to the installed ``mdurl/__init__.py`` a wrapper that sleeps 1.8 ms per call. Neither the
    candidate's test run nor its worker imports mdurl, so the RECORD check never looks at it; the frozen commit's
    worker imports the patched file, and the baseline runs ~18 % slower (inside the anchor's 20 % drift). The
    candidate's own test run before the gate (here: the plain ``pytest`` of ``_tests_pass``; in an agent's loop, any
    earlier gate) plants it; the gate is fooled: the candidate, as fast as the frozen op, reads "faster"."""
    op = _poisoning_op(0.0018)
    (dep_repo / "op.py").write_text(op)
    _tests_pass(dep_repo)  # plants the wrapper too
    done = _py(dep_repo, """\
        import time, mdurl
        t = time.perf_counter(); mdurl.encode("a b"); print((time.perf_counter() - t) * 1e3)""")
    assert float(done.stdout.split()[-1]) >= 1.7  # the baseline's helper now costs 1.8 ms
    code, stages, _ = _gate(dep_repo, None)
    _not_a_speedup(code, stages)
