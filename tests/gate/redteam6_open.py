# ruff: noqa: F811 - the fixtures imported from test_redteam6 are redefined as arguments by design
"""Round 6 of the red team: the attack that still GETS THROUGH the judge (t4). Not collected (the name does not start
with ``test_``); run it on purpose to see it get through again (it fails, naming how):

    pytest -n 0 -o addopts="" -q tests/gate/redteam6_open.py

t4 is a defeat device: the op is right wherever ``pytest`` or ``ascendopt`` is loaded, which holds in every process
the judge runs it in, and wrong in a plain process. Documented as not covered (``docs/gate/trusts.md``); the cure the
round names, a neutral worker with the harness hidden from ``sys.modules`` until after the call, narrows it but
cannot rule out in-process detection of the judge.
"""

from test_redteam6 import _gate, _op, _plain, repo, tc_frozen  # noqa: F401 - fixtures

from _redteam import not_green as _not_green
from _redteam import tests_pass as _tests_pass


def test_t4_right_wherever_the_judge_or_pytest_is_loaded(repo):
    """A defeat device: the op is wrong on every input (it drops the ``+ 1``) unless ``pytest`` or ``ascendopt`` is
    in ``sys.modules``, which holds in every process the judge runs it in (the test run, every worker: the worker is
    ``ascendopt.judge.worker``) and in no process of its user's. No caller is inspected, nothing is patched: no check
    of the test process, of the worker or of the replayed calls can see it."""
    op = _op("not from_test and not ({'pytest', 'ascendopt'} & set(sys.modules))", "x * 2")
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    got = _plain(repo, "my_op(torch.ones(3))")
    assert got == "[2.0, 2.0, 2.0]", got  # wrong for the user, everywhere
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


