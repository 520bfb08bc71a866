"""Every attempt is recorded: a candidate that passes the gate but then raises while the round times it,
or fails while the round re-profiles it, is a recorded drop with the error and exit 1 — not a lost
round. A device fault still stops the round (nothing after it can be trusted), unrecorded.

The own-code paths (a workload that raises or hangs at the gate) are in tests/gate/test_gate_failures.py.
"""

import pytest

import _gate_kernels as gk
from ascendopt.collect.workload import WorkloadFailure
from ascendopt.errors import DeviceFault
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import records as rounds
from ascendopt.rounds import run as round_run
from ascendopt.workspace import Workspace


@pytest.fixture
def ws(tmp_path, monkeypatch):
    gk.install(monkeypatch)
    w = Workspace(tmp_path / ".ascendopt")
    freeze_kernel(w, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=5)
    return w


def _round(ws, **kw):
    return round_run.run_round(ws, hypothesis="drop the planted extra pass", sets={"EXTRA": "0"}, pairs=12,
                               timer=gk.virtual_clock, **kw)


def test_a_candidate_that_raises_while_timed_is_a_recorded_drop(ws, monkeypatch):
    def measure_sides(*args, **kwargs):
        raise RuntimeError("out of resource: shared memory, required 300000 (planted)\nsecond line")

    monkeypatch.setattr(round_run.rt, "measure_sides", measure_sides)
    outcome = _round(ws, reprofile=False)
    rec = outcome.record
    assert outcome.exit_code == 1 and rec.verdict == "drop" and rec.timing is None
    error = "the candidate raised while being timed: RuntimeError: out of resource: shared memory, required 300000 " \
            "(planted)"
    assert rec.gate == {"passed": False, "exit_code": 1, "failed_stage": "performance", "summary": error,
                        "error": error}
    assert [r.verdict for r in rounds.load_rounds(ws)] == ["drop"] and outcome.path.exists()


def test_a_device_fault_while_timed_still_stops_the_round_unrecorded(ws, monkeypatch):
    def measure_sides(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(round_run.rt, "measure_sides", measure_sides)
    with pytest.raises(DeviceFault, match="t_scale at .* broke the device"):
        _round(ws, reprofile=False)
    assert rounds.load_rounds(ws) == []


def test_a_candidate_that_fails_its_reprofile_is_a_recorded_drop(ws, monkeypatch):
    failure = WorkloadFailure("bench.py: timed out after 5 s (killed with its process group)")

    def collect_profiles(*args, **kwargs):
        raise failure

    monkeypatch.setattr(round_run.rp, "reference_profiles", lambda *a, **k: [])
    monkeypatch.setattr(round_run.rp, "collect_profiles", collect_profiles)
    outcome = _round(ws)
    rec = outcome.record
    assert outcome.exit_code == 1 and rec.verdict == "drop" and rec.timing is None
    assert rec.gate["failed_stage"] == "reprofile"
    assert rec.gate["error"] == f"re-profile of the candidate: {failure}" and rec.profiles == []
