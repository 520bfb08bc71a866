"""The red team's small own-code repository: an op that sleeps ``DELAY_S`` per call (so a verdict can tell a
candidate that does the same work in less time), the workload around it and its tests (``tests/gate/
test_redteam.py``, ``test_redteam3.py``, ``test_redteam4.py``, ``test_judge_attacks.py``: its own test file)."""

import textwrap

DELAY_S = 0.01
OP = textwrap.dedent(f"""\
    import time

    import torch

    DELAY_S = {DELAY_S}


    def my_op(x):
        time.sleep(DELAY_S)
        return x * 2 + 1
    """)
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op


    def inputs(seed):
        return (torch.randn(64, 64),)


    def workload(x):
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)
TEST = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))


    def test_close():
        x = torch.arange(6.0).reshape(2, 3)
        assert torch.allclose(my_op(x), x * 2 + 1)
    """)
