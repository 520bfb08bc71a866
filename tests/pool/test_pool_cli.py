"""The pool on the command line: ``optimize-round --auto --devices 2`` with ``--events`` (each line valid against
``cli/schemas/events.schema.json``, the pool's state among them) and ``--json`` (the screening names each row's
device), and every bad pool input as one line with exit 2: ``--devices 0``/``foo``, ``--ray`` at an address nobody
answers, ``--ray`` without Ray installed, a pool option where no pool runs."""

import functools
import json
import sys
from importlib import resources

import jsonschema
import pytest

import _gate_kernels as gk
import _pool_kernels as pk
from _cli_json import json_payload
from ascendopt.rounds import auto as round_auto


@pytest.fixture
def ws(tmp_path, monkeypatch):
    return pk.frozen_workspace(tmp_path, monkeypatch)


def test_auto_on_two_devices_streams_the_pools_state_and_names_each_rows_device(ws, cli, tmp_path, monkeypatch):
    # the virtual clock of the freeze: the devices' anchors compare like with like, whatever this machine's load
    monkeypatch.setattr(round_auto, "run_auto", functools.partial(round_auto.run_auto, timer=gk.virtual_clock))
    stream = tmp_path / "events.ndjson"
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--auto", "--devices", "2", "--confirm", "0",
                         "--no-precheck", "--pairs", "12", "--events", str(stream), "--json")
    assert code == 0, err[-2000:]
    data = json_payload(out)
    assert {r["device"] for r in data["screening"]["rows"]} == {"cpu:0", "cpu:1"}
    assert data["pool"]["devices"] == ["cpu:0", "cpu:1"] and data["finalists"] == []  # --confirm 0
    schema = json.loads(resources.files("ascendopt.cli").joinpath("schemas/events.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    for event in events:
        validator.validate(event)
    pool = [e for e in events if e["event"] == "pool"]
    assert pool and pool[-1]["done"] == pool[-1]["total"] == 9 and not pool[-1]["quarantined"]
    assert any(e["busy"] == ["cpu:0", "cpu:1"] for e in pool)  # both devices at work at once
    assert any(e.get("eta_s") is not None for e in pool)


@pytest.mark.parametrize(("args", "message"), [
    (["--auto", "--devices", "0"], "--devices 0: must be >= 1 device"),
    (["--auto", "--devices", "foo"], "--devices foo: not a count or a list of device indices"),
    (["--auto", "--ray", "127.0.0.1:9"], "--ray 127.0.0.1:9: no Ray cluster answers there"),
    (["--auto", "--ray", "nowhere"], "--ray nowhere: not a Ray address"),
    (["--hypothesis", "x", "--set", "EXTRA=0", "--devices", "2"], "--devices applies to --auto only"),
])
def test_bad_pool_input_is_one_line_exit_2(ws, cli, args, message):
    code, out, err = cli("optimize-round", "-w", str(ws.root), *args)
    assert code == 2 and message in err and "Traceback" not in err, err[-2000:]
    assert len([line for line in err.splitlines() if line.strip()]) == 1


def test_ray_not_installed_says_how_to_install_it(ws, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--auto", "--ray")
    assert code == 2 and "--ray: Ray is not installed (pip install 'ascendopt[pool]')" in err
    assert "Traceback" not in err
