"""``ascendopt gate --all``: three workspaces under one root gated over a local pool of two CPU "devices", one exit
code for the lot (the worst by ``gate.many.EXIT_PRECEDENCE``) and one JUnit file; and a device off a contract's
anchor is quarantined, the workspace gated again elsewhere."""

import dataclasses
import xml.etree.ElementTree as ET

import pytest

import _gate_kernels as gk
import _pool_kernels as pk
from _cli_json import json_payload
from ascendopt.freeze.task import freeze_kernel
from ascendopt.gate.many import EXIT_PRECEDENCE, find_workspaces, gate_all, worst_exit
from ascendopt.pool.options import PoolOptions
from ascendopt.workspace import Workspace

# "b" is frozen correct, then its kernel turns wrong (exit 1); "c"'s contract is edited by hand (exit 3)
B_NAME = "t_scale_b"


def three_workspaces(root, monkeypatch):
    """Workspaces a (passes), b (wrong kernel: 1), c (hand-edited contract: 3) under ``root``; the registry then
    holds the kernels as the gate will see them."""
    from ascendopt import kernels

    b_spec = dataclasses.replace(pk.SPEC, name=B_NAME)
    monkeypatch.setattr(kernels, "_registry", {"t_scale": pk.SPEC, B_NAME: b_spec})
    for name, kernel in (("a", "t_scale"), ("b", B_NAME), ("c", "t_scale")):
        ws = Workspace(root / name / ".ascendopt")
        freeze_kernel(ws, **{**pk.FREEZE, "kernel": kernel}, timer=gk.virtual_clock, profile=False, precheck=False)
    contract = root / "c" / ".ascendopt" / "contract.yaml"
    contract.write_text(contract.read_text().replace("rtol: ", "rtol: 1", 1))
    monkeypatch.setitem(kernels._registry, B_NAME, dataclasses.replace(gk.variant("wrong"), name=B_NAME))
    return {"a": 0, "b": 1, "c": 3}


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (pk.SLOW_ENV, pk.SLOW_AFTER_ENV, pk.DIE_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_gate_all_over_two_devices_gives_each_workspace_its_code_and_the_lot_the_worst(root, monkeypatch, cli):
    expected = three_workspaces(root, monkeypatch)
    assert [p.parent.name for p in find_workspaces(root)] == ["a", "b", "c"]
    junit = root / "gates.xml"
    code, out, err = cli("gate", "--all", "--root", str(root), "--devices", "2", "--skip-perf", "--junit",
                         str(junit), "--json")
    data = json_payload(out)
    got = {r["workspace"].split("/")[0]: r["exit_code"] for r in data["workspaces"]}
    assert got == expected, err[-2000:]
    assert code == data["exit_code"] == 3 and not data["passed"]  # integrity outranks correctness
    assert {r["device"] for r in data["workspaces"]} <= {"cpu:0", "cpu:1"}
    assert data["pool"]["devices"] == ["cpu:0", "cpu:1"] and not data["pool"]["quarantined"]
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert [s.get("name").split()[-1].split("/")[0] for s in suites] == ["a", "b", "c"]
    by_name = {s.get("name").split()[-1].split("/")[0]: s for s in suites}
    assert by_name["a"].get("failures") == "0" and by_name["b"].get("failures") != "0"
    assert by_name["c"].find("testcase[@classname='gate.integrity']/failure") is not None
    assert all(s.find("properties/property[@name='device']").get("value") in ("cpu:0", "cpu:1") for s in suites)
    assert "gate --all: exit 3 from c/.ascendopt" in err


def test_the_lot_exit_code_follows_the_precedence():
    assert worst_exit([0, 6, 4]) == 4 and worst_exit([6, 0]) == 6 and worst_exit([4, 1, 5]) == 1
    assert worst_exit([0, 0]) == 0 and worst_exit([2, 5, 4]) == 2 and worst_exit([3, 1]) == 3
    assert [int(c) for c in EXIT_PRECEDENCE] == [3, 1, 2, 5, 4, 6, 0]


def test_gate_all_with_timing_quarantines_a_device_off_a_contracts_anchor(root, monkeypatch):
    """Timed (the virtual clock): cpu:1 is slow, so its re-measure of a contract's frozen baseline is off the anchor:
    it is quarantined, named, and every workspace is gated on cpu:0."""
    from ascendopt import kernels

    monkeypatch.setattr(kernels, "_registry", {"t_scale": pk.SPEC})
    for name in ("a", "b"):
        freeze_kernel(Workspace(root / name / ".ascendopt"), **pk.FREEZE, timer=gk.virtual_clock, profile=False,
                      precheck=False)
    monkeypatch.setenv(pk.SLOW_ENV, "cpu:1")
    result = gate_all(root, pool=PoolOptions(devices="2"), pairs=12, timer=gk.virtual_clock)
    assert [r["exit_code"] for r in result["workspaces"]] == [0, 0] and result["exit_code"] == 0
    assert list(result["pool"]["quarantined"]) == ["cpu:1"]
    assert "baseline moved" in result["pool"]["quarantined"]["cpu:1"]
    assert {r["device"] for r in result["workspaces"]} == {"cpu:0"}
    # each gate was anchored on its device first: the frozen baseline re-measured there, within the allowance
    assert all(r["anchor"]["device"] == "cpu:0" and r["anchor"]["problem"] is None for r in result["workspaces"])


def test_gate_all_bad_input_is_one_line_exit_2(root, cli):
    code, out, err = cli("gate", "--all", "--root", str(root))
    assert code == 2 and "gate --all: no workspace" in err and "Traceback" not in err
    code, out, err = cli("gate", "--all", "--root", str(root), "--devices", "0")
    assert code == 2 and "--devices 0: must be >= 1 device" in err and "Traceback" not in err
    code, out, err = cli("gate", "--devices", "2")
    assert code == 2 and "--devices applies to gate --all" in err
