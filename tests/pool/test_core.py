"""``pool.core.run_pool`` with an in-process back end (no processes): a device whose item outlives its limit is killed
and its item re-queued; an item that kills every device it runs on is reported, not retried forever; the whole run
has a limit; with no healthy device left the run says which and why (exit 5)."""

import time

import pytest

from ascendopt.errors import EnvironmentProblem
from ascendopt.pool.core import MAX_ATTEMPTS, DeviceLost, run_pool


class Job:
    label = "item"

    def key(self, item):
        return str(item)


class FakeDevices:
    """``names`` serve at once, except: ``hang`` (a device that never answers a run), ``dies_on`` (an item whose run
    kills whichever device takes it), ``off`` (devices whose anchor is off)."""

    def __init__(self, names, hang=(), dies_on=(), off=()):
        self.names, self.hang, self.dies_on, self.off = list(names), set(hang), set(dies_on), set(off)
        self.pending, self.killed = {}, []

    def submit(self, name, op, item):
        self.pending[name] = (op, item)

    def ready(self, timeout_s):
        ready = [n for n, (op, _) in self.pending.items() if not (op == "run" and n in self.hang)]
        if not ready:
            time.sleep(min(timeout_s, 0.05))
        return ready

    def result(self, name):
        op, item = self.pending.pop(name)
        if op == "anchor":
            return {"problem": "baseline moved from 1 to 2" if name in self.off else None}
        if item in self.dies_on:
            raise DeviceLost(name, "its process died (signal 9)")
        return {"value": item * 10}

    def kill(self, name):
        self.pending.pop(name, None)
        self.killed.append(name)

    def close(self):
        pass


def test_a_device_over_its_items_limit_is_killed_and_its_item_done_elsewhere():
    devices = FakeDevices(["d0", "d1"], hang={"d1"})
    run = run_pool(devices, Job(), [1, 2, 3], item_s=0.3, anchor_s=5, total_s=30)
    assert {k: r["value"] for k, r in run.results.items()} == {"1": 10, "2": 20, "3": 30}
    assert list(run.lost) == ["d1"] and "outlived its limit of 0.3 s" in run.lost["d1"] and "d1" in devices.killed
    assert set(run.measured["d0"]) == {"1", "2", "3"} and run.requeued


def test_an_item_that_kills_every_device_it_runs_on_is_reported_once_tried_enough():
    devices = FakeDevices(["d0", "d1", "d2"], dies_on={2})
    run = run_pool(devices, Job(), [1, 2, 3], item_s=5, anchor_s=5, total_s=30)
    assert "error" in run.results["2"] and f"lost {MAX_ATTEMPTS} devices" in run.results["2"]["error"]
    assert len(run.lost) == MAX_ATTEMPTS and run.results["1"]["value"] == 10 and run.results["3"]["value"] == 30


def test_no_healthy_device_left_names_each_device_and_why():
    devices = FakeDevices(["d0", "d1"], off={"d0"}, hang={"d1"})
    with pytest.raises(EnvironmentProblem, match=r"no healthy device left for \d item\(s\): d0: quarantined "
                                                 r"\(baseline moved from 1 to 2\); d1: lost"):
        run_pool(devices, Job(), [1, 2], item_s=0.2, anchor_s=5, total_s=30)


def test_the_whole_run_has_a_limit():
    devices = FakeDevices(["d0"], hang={"d0"})
    with pytest.raises(EnvironmentProblem, match="within the pool's limit of 0.3 s"):
        run_pool(devices, Job(), [1], item_s=60, anchor_s=60, total_s=0.3)
    assert devices.killed == ["d0"]  # what ran is killed on the way out
