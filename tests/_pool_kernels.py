"""The gate's test kernel ``t_scale`` (``tests/_gate_kernels.py``) for the pool tests, with two plants.

* Its tile matters: a launch's virtual time is scaled by ``BLOCK_COST`` (BLOCK=128 20 % faster than BLOCK=32), so
  the screening's ranking is decided by the plants (5 % apart at least), not by the clock's +-0.3 % jitter.
* A device of a pool can be planted (environment, read in the device process, so a forked process and a Ray actor
  see it alike): ``SLOW_ENV`` names a device (``cpu:1``, ``ray:1``) whose every launch takes ``SLOW`` times longer
  (its re-measured baseline is off the frozen anchor); with ``SLOW_AFTER_ENV`` set it is slow only from its first
  candidate on (its first anchor, on the frozen configuration alone, is fine: it anchors, screens, then drifts);
  ``DIE_ENV`` names a device whose process kills itself at its first candidate (a device lost mid-run).
"""

from __future__ import annotations

import dataclasses
import os
import signal

import _gate_kernels as gk
from ascendopt.pool.devices import current

BLOCK_COST = {32: 1.0, 64: 0.9, 128: 0.8}
SLOW = 1.6
SLOW_ENV = "ASCENDOPT_TEST_SLOW_DEVICE"
SLOW_AFTER_ENV = "ASCENDOPT_TEST_SLOW_AFTER"
DIE_ENV = "ASCENDOPT_TEST_DIE_DEVICE"
FROZEN = {"BLOCK": 64, "EXTRA": 50}
_SEEN = {"candidate": False}


def run(inputs, config, mode):
    here = current()
    if here is not None and here == os.environ.get(DIE_ENV) and config != FROZEN:
        os.kill(os.getpid(), signal.SIGKILL)
    if config != FROZEN:
        _SEEN["candidate"] = True
    start = gk.VIRTUAL["ms"]
    out = gk._run(inputs, config, mode)
    factor = BLOCK_COST[config["BLOCK"]]
    if here is not None and here == os.environ.get(SLOW_ENV) and (_SEEN["candidate"] or not os.environ.get(
            SLOW_AFTER_ENV)):
        factor *= SLOW
    gk.VIRTUAL["ms"] = start + factor * (gk.VIRTUAL["ms"] - start)
    return out


SPEC = dataclasses.replace(gk.SPEC, run=run)
FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=5)
# the two fastest by the plants, within CONFIRM_SLACK of nothing else: BLOCK=128 with no extra pass (0.8 of a unit),
# then BLOCK=128 with 5 % extra (0.84); the next, BLOCK=64 EXTRA=0, is 0.9
FASTEST = [{"BLOCK": 128, "EXTRA": 0}, {"BLOCK": 128, "EXTRA": 5}]


def frozen_workspace(folder, monkeypatch):
    """A workspace under ``folder`` frozen on ``t_scale`` with the plants (``SPEC``, ``FREEZE``), on the virtual clock,
    no device planted slow or lost."""
    from ascendopt.freeze.task import freeze_kernel
    from ascendopt.workspace import Workspace

    gk.install(monkeypatch, SPEC)
    for name in (SLOW_ENV, SLOW_AFTER_ENV, DIE_ENV):
        monkeypatch.delenv(name, raising=False)
    ws = Workspace(folder / ".ascendopt")
    freeze_kernel(ws, **FREEZE, timer=gk.virtual_clock, profile=False, precheck=False)
    return ws
