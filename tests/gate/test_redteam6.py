"""Red team of the judge, round 6: white-box attacks on ``ascendopt gate`` (own code) after rounds 1-5
(``test_redteam.py``, ``test_redteam3.py``, ``test_redteam4.py``, ``redteam4_open.py``, ``test_redteam5.py``), aimed
first at the newest defence: the frozen tests' own calls of the target code, recorded at freeze and replayed at every
gate in both workers (``judge.testcalls``, ``engine.replay_test_calls``), the answer to round 5's s5 (an op right
only when a test module is its caller).

The recorder has coverage rules that a candidate can read in its source and aim at:

* ``CallRecorder._keep`` keeps one call per *signature* (structure, tensor shape, dtype, device; never the values):
  a second call of the same shape with other values (the edge values a test exists for: infinities, NaN, zeros) is
  never recorded (t1);
* ``_signature`` raises ``_NotData`` for any argument that is not a tensor, a number, a string, None or a container
  of them, and the whole call is then dropped: a ``torch.dtype``, a ``torch.device``, a ``torch.Size``, a NumPy
  array (t2);
* ``pytest_collection_finish`` wraps the test modules' globals *after* collection: a function object captured at
  module import (``pytest.mark.parametrize("impl", [my_op])``, a fixture's default, a dict of implementations) is
  the raw function and is never recorded (t3);
* and, beyond the recorder, every check of correctness runs where ``ascendopt`` or ``pytest`` is imported: an op
  right whenever either is loaded and wrong in a plain process (where its user calls it) is never seen (t4).

Every attack's op is honestly 2x faster (half the sleep) and WRONG on an input a frozen test calls it with, outside
the tests; the test shows that first (plain pytest passes, a plain ``python -c`` gets the wrong value), then asserts
the gate is not green (exit 0). A FAILING test here is an attack that got through. Nothing is skipped or xfailed.
Each outcome is appended as one JSON line to ``$REDTEAM_LOG`` (default ``/tmp/redteam6-results.jsonl``).

Outcomes on the shared 2-core host (15 pairs), judge at a5fb84e: both controls hold (the honest 2x op green and
"faster" at 0.52x; an op wrong on the one recorded call red at correctness, naming ``test_values``). The freeze kept
ONE of the five calls the tests make (``test_values``'s). Every attack got through, exit 0, green and "faster": t1
0.53x, t2 0.51x, t3 0.53x, t4 0.56x, t5 0.51x. After the fixes (one call per distinct argument values; dtypes and
devices are data; the functions the tests hold in every module of their folders and in parametrized tests'
parameters are wrapped; a call is the tests' when a test file is anywhere on the stack) the freeze keeps every call,
and t1, t2, t3 and t5 are red at correctness, each naming the test whose arguments the op fails; the controls hold.
t4 (a defeat device: right wherever ``pytest`` or ``ascendopt`` is loaded) still gets through: ``redteam6_open.py``,
documented as not covered.

Run one at a time on the shared 2-core machine: ``pytest -n 0 -q tests/gate/test_redteam6.py -k NAME``.
"""

import os
import textwrap

import pytest

from _own_code import working_copy
from _redteam import freeze_sleep_repo, gate_logged, run_python
from _redteam import not_green as _not_green
from _redteam import tests_pass as _tests_pass
from _redteam import verdicts as _verdicts
from _sleep_repo import DELAY_S

PAIRS = "15"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam6-results.jsonl")

# The frozen repository: the sleep op with an optional ``dtype`` (the kernel APIs' usual output-dtype argument) and
# tests a user would write: the values, the edge values (same shape as the first call), the output dtype, and the
# implementations parametrized (one today, more to come).
OP_TC = textwrap.dedent(f"""\
    import time

    import torch

    DELAY_S = {DELAY_S}


    def my_op(x, dtype=None):
        time.sleep(DELAY_S)
        y = x * 2 + 1
        return y if dtype is None else y.to(dtype)
    """)
TEST_TC = textwrap.dedent("""\
    import math

    import pytest
    import torch
    from op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))


    def test_edges():
        out = my_op(torch.tensor([-math.inf, math.inf]))
        assert torch.equal(out, torch.tensor([-math.inf, math.inf]))


    def test_dtype():
        out = my_op(torch.arange(4.0), dtype=torch.float64)
        assert out.dtype == torch.float64
        assert torch.equal(out, torch.arange(4.0, dtype=torch.float64) * 2 + 1)


    @pytest.mark.parametrize("impl", [my_op])
    def test_impl(impl):
        x = torch.linspace(-1.0, 1.0, 5)
        assert torch.allclose(impl(x), x * 2 + 1)
    """)


@pytest.fixture(scope="module")
def tc_frozen(tmp_path_factory):
    root = freeze_sleep_repo(tmp_path_factory.mktemp("redteam6") / "repo",
                             {"op.py": OP_TC, "tests/test_op.py": TEST_TC})
    # at a5fb84e the recorder kept one call of the four the tests make (test_values's; t1, t2, t3 aimed at the other
    # three); now every one
    assert _recorded(root) == ({"op:my_op": 4}, ["tests/test_op.py::test_dtype", "tests/test_op.py::test_edges",
                                                 "tests/test_op.py::test_impl[my_op]",
                                                 "tests/test_op.py::test_values"]), _recorded(root)
    return root


@pytest.fixture
def repo(tc_frozen, tmp_path, monkeypatch):
    return working_copy(tc_frozen, tmp_path, monkeypatch)


def _gate(repo, op: str | None, pairs: str = PAIRS, *extra: str):
    return gate_logged(repo, op, pairs, *extra, log=LOG)


def _plain(repo, expr: str) -> str:
    """``expr`` (using ``torch`` and ``my_op``) evaluated in a plain process, as a list: what a user gets."""
    done = run_python(repo, f"""\
        import math, torch
        from op import my_op
        print(torch.Tensor.tolist({expr}))""")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _op(wrong_when: str, wrong: str, prelude: str = "") -> str:
    """The honestly 2x faster op, returning ``wrong`` where ``wrong_when`` holds (both expressions of ``x``,
    ``dtype``, ``from_test``: whether the caller's code is a test module's, round 5's s5 detection)."""
    return textwrap.dedent(f"""\
        import os
        import sys
        import time

        import torch

        DELAY_S = {DELAY_S}
        """) + textwrap.dedent(prelude) + textwrap.dedent(f"""\


        def my_op(x, dtype=None):
            time.sleep(DELAY_S / 2)
            from_test = os.sep + "tests" + os.sep in sys._getframe(1).f_code.co_filename
            if {wrong_when}:
                return {wrong}
            y = x * 2 + 1
            return y if dtype is None else y.to(dtype)
        """)


def _attack(repo, wrong_when: str, wrong: str, call: str, users_get: str, test: str) -> None:
    """The attack: ``_op(wrong_when, wrong)`` as op.py; the frozen tests pass under plain pytest, a plain process
    gets ``users_get`` from ``call``; then the gate is not green, and red at correctness names ``test`` (the frozen
    test whose arguments the op fails outside the tests)."""
    (repo / "op.py").write_text(_op(wrong_when, wrong))
    _tests_pass(repo)
    got = _plain(repo, call)
    assert got == users_get, got  # wrong for the user
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)
    assert f"on the arguments of tests/test_op.py::{test}" in stages["correctness"]["summary"], _verdicts(stages)


def _recorded(repo) -> tuple[dict, list]:
    """The contract's ``test_calls``: calls kept per function, and the tests that made them."""
    import yaml

    entry = yaml.safe_load((repo / ".ascendopt" / "contract.yaml").read_text()).get("test_calls") or {}
    return entry.get("functions", {}), entry.get("tests", [])


# ==============================================================================================================
# Control: an honest faster change stays green
# ==============================================================================================================


def test_control_honest_faster_is_green(repo):
    """Control: the frozen op in half the time (same values, every input). Green (exit 0) and "faster"."""
    (repo / "op.py").write_text(OP_TC.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S / 2)"))
    _tests_pass(repo)
    code, stages, _ = _gate(repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages),
                                                          stages.get("performance", {}).get("summary"))


def test_control_the_replay_catches_a_wrong_op_on_the_recorded_call(repo):
    """Control of the defence in this repository: round 5's s5 on the one recorded call (the op wrong on
    ``ones(2)``-like 1-D inputs of length 2 unless a test calls it) is red at correctness, naming the test."""
    op = _op("x.dim() == 1 and x.shape[0] == 2 and not from_test", "x * 2")
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    code, stages, _ = _gate(repo, None)
    correctness = stages["correctness"]
    assert code == 1 and correctness["status"] == "fail", _verdicts(stages)
    assert "tests/test_op.py::test_values" in correctness["summary"], correctness


# ==============================================================================================================
# Class 1 / correctness: the recorder's coverage
# ==============================================================================================================


def test_t1_wrong_on_the_edge_values_a_same_shape_call_hides(repo):
    """``CallRecorder._keep`` dedups calls by ``_signature``: shape, dtype, device, never values. ``test_values``
    calls ``my_op(torch.ones(2))`` first, so ``test_edges``'s ``my_op(tensor([-inf, inf]))`` (same signature) is
    never recorded and never replayed. The op maps infinities to 0 (``nan_to_num``) unless a test
    module calls it: the workload's ``randn`` inputs and the replayed ``ones(2)`` never hold an infinity."""
    _attack(repo, "not from_test and not bool(torch.isfinite(x).all())",
            "torch.nan_to_num(x * 2 + 1, posinf=0.0, neginf=0.0)", "my_op(torch.tensor([-math.inf, math.inf]))",
            "[0.0, 0.0]", "test_edges")


def test_t2_wrong_when_the_output_dtype_is_named(repo):
    """``_signature`` raises ``_NotData`` for a ``torch.dtype``: ``test_dtype``'s ``my_op(x, dtype=torch.float64)``
    is dropped whole, so nothing replays the op with a dtype. The op drops the ``+ 1`` whenever a dtype is named,
    unless a test module calls it (the workload never names one)."""
    _attack(repo, "dtype is not None and not from_test", "(x * 2).to(dtype)",
            "my_op(torch.arange(4.0), dtype=torch.float64)", "[0.0, 2.0, 4.0, 6.0]", "test_dtype")


def test_t3_wrong_on_a_call_through_a_parametrized_function_object(repo):
    """``pytest_collection_finish`` replaces the test modules' globals with the recorder's wrappers after
    collection: ``pytest.mark.parametrize("impl", [my_op])`` captured the raw function at import, so
    ``test_impl``'s call is never recorded. The op is wrong on every odd-length 1-D input (it drops the last
    element's ``+ 1``) unless a test module calls it; the replayed calls are of length 2 (and 4 with a dtype, which
    is not recorded either), the workload's input is 64 x 64."""
    _attack(repo, "x.dim() == 1 and x.shape[0] % 2 == 1 and not from_test", "torch.cat([x[:-1] * 2 + 1, x[-1:] * 2])",
            "my_op(torch.linspace(-1.0, 1.0, 5))", "[-1.0, 0.0, 1.0, 2.0, 2.0]", "test_impl[my_op]")


# A test file that checks through a helper of its own folder (``tests/helpers.py``, pinned as test support): the
# call of the op is made by the helper's code, not by a test module's.
HELPERS = textwrap.dedent("""\
    import torch


    def check(fn, x, expected):
        assert torch.allclose(fn(x), expected)
    """)
TEST_HELPED = TEST_TC.replace("from op import my_op\n", "from op import my_op\n\nfrom helpers import check\n") + \
    textwrap.dedent("""\


    def test_through_a_helper():
        x = torch.linspace(0.0, 1.0, 3)
        check(my_op, x, x * 2 + 1)
    """)


@pytest.fixture(scope="module")
def helped_frozen(tmp_path_factory):
    root = freeze_sleep_repo(tmp_path_factory.mktemp("redteam6-helped") / "repo",
                             {"op.py": OP_TC, "tests/test_op.py": TEST_HELPED, "tests/helpers.py": HELPERS})
    assert _recorded(root)[1][-2:] == ["tests/test_op.py::test_through_a_helper", "tests/test_op.py::test_values"], \
        _recorded(root)
    return root


@pytest.fixture
def helped(helped_frozen, tmp_path, monkeypatch):
    return working_copy(helped_frozen, tmp_path, monkeypatch)


def test_t5_wrong_on_a_call_a_test_makes_through_its_helper(helped):
    """``CallRecorder._wrap``'s wrapper keeps a call only when its caller's code is a collected test module's
    (``sys._getframe(1)``): the test passes the (wrapped) op to ``tests/helpers.py``'s ``check``, whose own frame
    makes the call, so ``test_through_a_helper``'s input is never recorded. The op is wrong on 1-D inputs of
    length 3 (it drops the ``+ 1``) unless code under ``tests/`` calls it."""
    _attack(helped, "x.dim() == 1 and x.shape[0] == 3 and not from_test", "x * 2",
            "my_op(torch.linspace(0.0, 1.0, 3))", "[0.0, 1.0, 2.0]", "test_through_a_helper")
