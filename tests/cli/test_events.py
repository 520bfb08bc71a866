"""``--events FILE``: the NDJSON event stream of long commands, each line valid against
``cli/schemas/events.schema.json``. A real CPU ``optimize-round`` (the tests' tiny kernel on the Triton
interpreter) followed from its start to ``round_recorded``, and failing commands that still end their
stream with an ``error`` event."""

import json
from importlib import resources

import jsonschema
import pytest

from _own_code import frozen_kernel_workspace
from ascendopt.rounds import records as rounds

FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=8)


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(resources.files("ascendopt.cli").joinpath("schemas/events.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture
def ws(tmp_path, monkeypatch):
    return frozen_kernel_workspace(tmp_path, monkeypatch, **FREEZE)


def _events(path, validator):
    lines = path.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        validator.validate(event)
    return events


def test_optimize_round_is_followed_from_start_to_round_recorded(ws, cli, tmp_path, validator):
    stream = tmp_path / "events.ndjson"
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "drop the extra pass", "--set",
                         "EXTRA=0", "--pairs", "12", "--events", str(stream))
    (record,) = rounds.load_rounds(ws)
    assert code == (0 if record.verdict != "drop" else 1), err[-2000:]
    events = _events(stream, validator)
    kinds = [e["event"] for e in events]
    assert {e["command"] for e in events} == {"optimize-round"}
    assert events[0] == {**events[0], "event": "phase_start", "phase": "optimize-round"}
    assert events[-1] == {**events[-1], "event": "phase_end", "phase": "optimize-round", "status": "ok",
                          "exit_code": 0}
    stages = [(e["stage"], e["status"]) for e in events if e["event"] == "stage_result"]
    assert stages[:3] == [("integrity", "pass"), ("correctness", "pass"), ("kernel_hit", "pass")]
    (measured,) = [e for e in events if e["event"] == "measurement"]
    timed = record.timing["cases"][0]
    assert measured["round"] == 1 and measured["sides"]["candidate"]["median_ms"] == timed["candidate"]["median_ms"]
    assert measured["ratio"] == timed["vs_best"]["ratio"]
    (recorded,) = [e for e in events if e["event"] == "round_recorded"]
    assert recorded["round"] == 1 and recorded["verdict"] == record.verdict and recorded["digest"] == record.digest
    assert recorded["path"] == str(ws.round_path(1))
    # the order a program following the stream sees: start, the gate, the timing, the record, the end
    assert kinds.index("stage_result") < kinds.index("measurement") < kinds.index("round_recorded")
    assert kinds.count("phase_start") == kinds.count("phase_end") >= 2  # the command and its progress phase
    assert any(e["event"] == "progress" and e.get("message") for e in events)
    assert "error" not in kinds
    # the same command's audit log entry: its command line, exit code and the record's file digest
    from ascendopt.workspace import read_log, sha256_file

    entry = read_log(ws).entries[-1]
    assert entry["command"].startswith(f"ascendopt optimize-round -w {ws.root} --hypothesis")
    assert entry["exit_code"] == code and entry["wrote"]["rounds/0001.yaml"] == sha256_file(ws.round_path(1))


def test_auto_streams_one_round_recorded_per_candidate(ws, cli, tmp_path, validator):
    stream = tmp_path / "events.ndjson"
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "search", "--auto", "--budget", "2",
                         "--pairs", "12", "--events", str(stream))
    assert code == 0, err[-2000:]
    events = _events(stream, validator)
    recorded = [e["round"] for e in events if e["event"] == "round_recorded"]
    # screening records nothing; each confirmed candidate is one recorded round, and one event
    assert recorded == [r.number for r in rounds.load_rounds(ws)]
    assert events[0]["phase"] == "optimize-round" and events[-1]["exit_code"] == 0
    assert any(e["event"] == "phase_start" and e["phase"].startswith("optimize-round --auto") for e in events)
    screened = [e for e in events if e["event"] == "progress" and e["phase"].startswith("optimize-round --auto")
                and e.get("total")]
    assert screened and screened[-1]["done"] == 2  # --budget 2: two candidates screened, each a progress event


def test_a_failing_command_ends_its_stream_with_an_error_event(ws, cli, tmp_path, validator):
    stream = tmp_path / "events.ndjson"
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "EXTRA=7",
                       "--events", str(stream))
    assert code == 2
    events = _events(stream, validator)
    error, end = events[-2:]
    assert error["event"] == "error" and error["kind"] == "usage" and error["exit_code"] == 2
    assert "EXTRA=7: out of range" in error["message"] and error["message"] in err
    assert end["event"] == "phase_end" and end["status"] == "error" and end["exit_code"] == 2

    # the gate on a hand-edited contract: stage results, then the integrity error (exit 3)
    ws.contract_path.write_text(ws.contract_path.read_text().replace("max_rounds: 8", "max_rounds: 9"))
    code, _, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--events", str(stream))
    assert code == 3
    events = _events(stream, validator)
    gate = [e for e in events if e["command"] == "gate"]
    assert gate[0]["event"] == "phase_start" and gate[1]["event"] == "stage_result"
    assert gate[1]["stage"] == "integrity" and gate[1]["status"] == "fail" and gate[1]["exit_code"] == 3
    assert [e["event"] for e in gate[-2:]] == ["error", "phase_end"] and gate[-2]["kind"] == "integrity"
    assert gate[-1]["exit_code"] == 3


def test_events_to_stderr_and_an_unwritable_file(ws, cli, tmp_path, validator):
    code, out, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--events", "-", "--json")
    assert code == 0, err[-2000:]
    json.loads(out)  # stdout keeps the data only
    events = [json.loads(line) for line in err.splitlines() if line.startswith('{"event":')]
    for event in events:
        validator.validate(event)
    assert [e["stage"] for e in events if e["event"] == "stage_result"] == ["integrity", "correctness", "kernel_hit",
                                                                           "performance"]
    assert events[-1]["event"] == "phase_end" and events[-1]["exit_code"] == 0
    code, _, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--events", str(tmp_path / "missing" / "e.ndjson"))
    assert code == 2 and "--events " in err and "cannot write" in err


def test_freeze_streams_its_baseline_measurement_and_the_log_continues(ws, cli, tmp_path, validator):
    from ascendopt.workspace import read_log

    stream = tmp_path / "events.ndjson"
    before = len(read_log(ws).entries)
    code, _, err = cli("freeze", "-w", str(ws.root), "--kernel", "t_scale", "--shapes", "tiny", "--dtype", "fp32",
                       "--mode", "fwd", "--force", "--no-profile", "--events", str(stream))
    assert code == 0, err[-2000:]
    events = _events(stream, validator)
    (measured,) = [e for e in events if e["event"] == "measurement"]
    assert measured["source"] == "freeze" and measured["sides"]["baseline"]["n"] >= 1
    assert events[0]["phase"] == events[-1]["phase"] == "freeze" and events[-1]["exit_code"] == 0
    log = read_log(ws)  # freeze --force continues the workspace's log; its entry names what it archived
    assert log.problems == [] and len(log.entries) == before + 1
    entry = log.entries[-1]
    assert entry["command"].startswith("ascendopt freeze -w") and "contract.yaml" in entry["wrote"]
    assert any(key.startswith("archive/") for key in entry["wrote"])
