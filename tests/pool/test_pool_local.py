"""A local pool of two CPU "devices" (``--devices 2``) on the gate's test kernel and its virtual clock
(``tests/_pool_kernels.py``: the tile's cost planted, a device made slow or killed by environment).

``optimize-round --auto`` screens on the pool as on one device (the same finalists), each device anchors on the
frozen baseline before and after its work, a device off the anchor is quarantined and named (and what it measured
is screened again elsewhere), and a device killed mid-run has its work re-queued.
"""

import pytest

import _gate_kernels as gk
import _pool_kernels as pk
from ascendopt.errors import UsageError
from ascendopt.freeze.task import freeze_kernel
from ascendopt.pool.devices import parse_devices
from ascendopt.pool.options import PoolOptions
from ascendopt.rounds import auto as round_auto
from ascendopt.rounds import records as rounds
from ascendopt.workspace import Workspace

TWO = PoolOptions(devices="2")


@pytest.fixture
def make_ws(tmp_path, monkeypatch):
    gk.install(monkeypatch, pk.SPEC)
    for name in (pk.SLOW_ENV, pk.SLOW_AFTER_ENV, pk.DIE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(pk._SEEN, "candidate", False)  # a forked device inherits it: no candidate seen yet

    def make(name: str) -> Workspace:
        ws = Workspace(tmp_path / name / ".ascendopt")
        freeze_kernel(ws, **pk.FREEZE, timer=gk.virtual_clock, profile=False, precheck=False)
        return ws

    return make


def _auto(ws, **kw):
    return round_auto.run_auto(ws, pairs=12, timer=gk.virtual_clock, precheck=False, **kw)


def test_a_local_pool_gives_the_finalists_of_one_device_and_records_both_devices(make_ws):
    one = _auto(make_ws("one"))
    ws = make_ws("two")
    two = _auto(ws, pool=TWO)
    assert one["finalists"] == two["finalists"] == pk.FASTEST  # the planted order, on one device and on two
    assert [c["config"] for c in two["confirmed"]] == [c["config"] for c in one["confirmed"]]
    assert two["best"] == one["best"] == pk.FASTEST[0]
    pool = two["pool"]
    assert pool["devices"] == ["cpu:0", "cpu:1"] and not pool["quarantined"] and not pool["lost"]
    assert all(pool["measured"][d] for d in pool["devices"])  # both devices screened
    rows = two["screening"]["rows"]
    assert two["screening"]["covered"] == 9 and {r["device"] for r in rows} == {"cpu:0", "cpu:1"}
    assert all(len(pool["anchors"][d]) == 2 and not any(a["problem"] for a in pool["anchors"][d])
               for d in pool["devices"])  # each device anchored before and after its work
    # the recorded round says which device screened its candidate, and what every device measured
    (rec,) = rounds.load_rounds(ws)
    screened = rec.change["screened"]
    assert screened["device"] in ("cpu:0", "cpu:1") and screened["pool"]["devices"] == ["cpu:0", "cpu:1"]
    assert rec.change["config"] in [r["config"] for r in rows if r["device"] == screened["device"]]
    assert sorted(k for keys in screened["pool"]["measured"].values() for k in keys) == sorted(
        f"BLOCK={r['config']['BLOCK']},EXTRA={r['config']['EXTRA']}" for r in rows)


def test_a_device_made_slow_is_quarantined_and_named(make_ws, monkeypatch):
    monkeypatch.setenv(pk.SLOW_ENV, "cpu:1")
    result = _auto(make_ws("slow"), pool=TWO)
    pool = result["pool"]
    assert list(pool["quarantined"]) == ["cpu:1"] and "baseline moved" in pool["quarantined"]["cpu:1"]
    assert pool["measured"]["cpu:1"] == [] and {r["device"] for r in result["screening"]["rows"]} == {"cpu:0"}
    assert result["finalists"] == pk.FASTEST and result["screening"]["covered"] == 9


def test_a_device_that_drifts_after_anchoring_has_its_results_dropped_and_screened_again(make_ws, monkeypatch):
    """cpu:1 anchors fine, screens, then slows down: its closing anchor is off, so what it screened is dropped and
    screened again on cpu:0."""
    monkeypatch.setenv(pk.SLOW_ENV, "cpu:1")
    monkeypatch.setenv(pk.SLOW_AFTER_ENV, "1")
    result = _auto(make_ws("drift"), pool=TWO)
    pool = result["pool"]
    assert list(pool["quarantined"]) == ["cpu:1"] and len(pool["anchors"]["cpu:1"]) == 2
    assert pool["anchors"]["cpu:1"][0]["problem"] is None and pool["anchors"]["cpu:1"][1]["problem"]
    assert pool["requeued"] and pool["measured"]["cpu:1"] == []
    assert set(pool["requeued"]) <= set(pool["measured"]["cpu:0"])
    assert result["finalists"] == pk.FASTEST and result["screening"]["covered"] == 9


def test_a_device_lost_mid_run_has_its_work_requeued(make_ws, monkeypatch):
    monkeypatch.setenv(pk.DIE_ENV, "cpu:1")
    result = _auto(make_ws("lost"), pool=TWO)
    pool = result["pool"]
    assert list(pool["lost"]) == ["cpu:1"] and "died" in pool["lost"]["cpu:1"] and len(pool["requeued"]) == 1
    assert result["screening"]["covered"] == 9 and result["finalists"] == pk.FASTEST


@pytest.mark.parametrize(("text", "message"), [
    ("0", "--devices 0: must be >= 1 device"),
    ("foo", "--devices foo: not a count or a list of device indices"),
    ("1,1", "--devices 1,1: a device is listed twice"),
    ("-1,2", "--devices -1,2: not a count"),
    ("999", "--devices 999: 999 devices, more than 64"),
])
def test_bad_devices_are_usage_errors_naming_the_value(text, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_devices(text, "cpu")
    with pytest.raises(UsageError, match="this host has 2 cuda device"):
        parse_devices("0,2", "cuda", available=2)
    assert [d.name for d in parse_devices("0,3", "cuda", available=4)] == ["cuda:0", "cuda:3"]
    assert parse_devices("0,3", "cuda", available=4)[1].env["CUDA_VISIBLE_DEVICES"] == "3"
