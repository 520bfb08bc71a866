# ruff: noqa: F811 - the fixtures imported from test_redteam5 are redefined as arguments by design
"""Round 5 of the red team: the attack that still GETS THROUGH the judge (s5). Not collected (the name does not start
with ``test_``); run it on purpose to see it get through again (it fails, naming how):

    pytest -n 0 -o addopts="" -q tests/gate/redteam5_open.py

s5 is class 1 by detection: the op is right only when a test module calls it, and wrong on the frozen test's own
input, a shape the judge's differential check never makes (a 1-D tensor beside a 2-D mix). The cure named by the
round: record at freeze the arguments the frozen tests pass to the target functions and replay them in both workers
at every gate, where the code cannot tell it is under test.
"""

import textwrap

import pytest
from test_redteam import MIX, SHAPED_BENCH
from test_redteam5 import _gate, _py, _tests_pass

from _own_code import working_copy
from _redteam import freeze_sleep_repo
from _redteam import not_green as _not_green
from _sleep_repo import BENCH, DELAY_S

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
    judge's differential check calls it from ``bench.py`` on 2-D inputs only (the workload's shape, the buckets, the
    hidden shapes), where it is right. The frozen test's own input (``torch.ones(2)``) is wrong everywhere but in
    the test."""
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
    _not_green(code, stages)
