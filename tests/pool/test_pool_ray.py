"""The pool's Ray back end through a real local Ray: ``ray.init`` once for the module with the custom resource
``device`` standing for two CPU "devices" (``pool.ray_pool.CPU_RESOURCE``), one actor per device.

The same runs as the local pool (``test_pool_local.py``, ``test_gate_all.py``): ``--auto`` screening gives the
finalists of one device over both devices, a slow device is quarantined and named, ``gate --all`` gives each
workspace its code. Ray missing: a visible skip on a developer machine, a FAILURE under CI=true (CI installs
``ascendopt[pool]``). Every test runs under an alarm: a hang fails it instead of the suite.
"""

import logging
import os
import signal
from pathlib import Path

import pytest
from test_gate_all import three_workspaces

import _gate_kernels as gk
import _pool_kernels as pk
from ascendopt.gate.many import gate_all
from ascendopt.pool.options import PoolOptions
from ascendopt.rounds import auto as round_auto

TESTS = Path(__file__).resolve().parents[1]
RAY = PoolOptions(ray="local")  # this process is connected already (the fixture): the pool uses that Ray
LIMIT_S = 180  # any one test of this module, Ray's start included


@pytest.fixture(scope="module")
def ray_cluster():
    try:
        import ray
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must install ascendopt[pool] (Ray) for the pool's Ray tests")
        pytest.skip("ray is not installed (pip install 'ascendopt[pool]')")
    # the actors import the tests' kernels (``_pool_kernels``) from the tests folder
    ray.init(num_cpus=2, resources={"device": 2}, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR, runtime_env={"env_vars": {"PYTHONPATH": str(TESTS)}})
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _alarm():
    def expired(signum, frame):
        raise TimeoutError(f"a Ray pool test ran past {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def ws(ray_cluster, tmp_path, monkeypatch):
    return pk.frozen_workspace(tmp_path, monkeypatch)


def _auto(ws, **kw):
    return round_auto.run_auto(ws, pairs=12, timer=gk.virtual_clock, precheck=False, pool=RAY, **kw)


def test_ray_screening_gives_the_finalists_of_one_device_over_both_devices(ws):
    result = _auto(ws)
    pool = result["pool"]
    assert result["finalists"] == pk.FASTEST and result["screening"]["covered"] == 9
    assert pool["devices"] == ["ray:0", "ray:1"] and not pool["quarantined"] and not pool["lost"]
    assert all(pool["measured"][d] for d in pool["devices"])
    assert all(a["device"] == d for d in pool["devices"] for a in pool["anchors"][d])  # each actor knows its device


def test_ray_quarantines_a_slow_device_and_names_it(ws, monkeypatch):
    monkeypatch.setenv(pk.SLOW_ENV, "ray:1")  # the command's ASCENDOPT_* settings travel to the actors
    result = _auto(ws, confirm=2)
    pool = result["pool"]
    assert list(pool["quarantined"]) == ["ray:1"] and "baseline moved" in pool["quarantined"]["ray:1"]
    assert pool["measured"]["ray:1"] == [] and result["finalists"] == pk.FASTEST


def test_ray_gate_all_gives_each_workspace_its_code(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expected = three_workspaces(tmp_path, monkeypatch)
    result = gate_all(tmp_path, pool=RAY, skip_perf=True)
    assert {r["workspace"].split("/")[0]: r["exit_code"] for r in result["workspaces"]} == expected
    assert result["exit_code"] == 3 and {r["device"] for r in result["workspaces"]} <= {"ray:0", "ray:1"}
