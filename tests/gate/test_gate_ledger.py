"""The gate's integrity stage against the ledger: a round record, the audit log or the best configuration
edited by hand is exit 3 naming the file. A real frozen workspace on the tests' tiny kernel (CPU
interpreter), one recorded round timed by its virtual clock, and the real CLI."""

import json

import pytest

from _cli_json import json_payload
from _own_code import frozen_kernel_workspace, kernel_round
from ascendopt.workspace import read_log

FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=8)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    ws = frozen_kernel_workspace(tmp_path, monkeypatch, **FREEZE)
    record = kernel_round(ws, {"EXTRA": "0"})
    assert record.verdict == "keep" and record.digest, record.gate  # a red gate says which stage
    return ws


def _gate(cli, ws):
    code, out, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--json")
    integrity = json_payload(out)["stages"][0]
    return code, integrity, err


def test_the_untouched_ledger_passes_and_every_write_was_logged(ws, cli):
    code, integrity, err = _gate(cli, ws)
    assert code == 0, err[-2000:]
    assert integrity["status"] == "pass" and "the ledger (2 file(s) against log.jsonl)" in integrity["summary"]
    log = read_log(ws)
    assert log.problems == [] and [sorted(e["wrote"]) for e in log.entries][-1] == ["rounds/0001.yaml"]
    assert "contract.yaml" in log.entries[0]["wrote"]


def test_a_green_gate_on_the_kept_rounds_state_does_not_ask_to_record_it_again(ws, cli):
    """The gate judges the best kept configuration (round 1): the next step is to re-profile it, not to record the
    same change as a round; a configuration no round holds (--set) is a change to record."""
    code, out, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--json")
    steps = json.loads(out)["next"]
    assert code == 0 and steps[0].startswith("ascendopt reprofile"), (steps, err[-2000:])
    code, _, err = cli("gate", "-w", str(ws.root), "--skip-perf")
    assert code == 0 and "round 1 already records this state" in err, err[-2000:]
    code, out, err = cli("gate", "-w", str(ws.root), "--skip-perf", "--json", "--set", "EXTRA=5")
    steps = json.loads(out)["next"]
    assert code == 0 and steps[0].startswith("ascendopt optimize-round"), (steps, err[-2000:])


def test_a_round_record_edited_by_hand_is_exit_3_naming_it(ws, cli):
    path = ws.round_path(1)
    path.write_text(path.read_text().replace("vector-bound: drop the planted extra pass", "a better story"))
    code, integrity, err = _gate(cli, ws)
    assert code == 3 and integrity["status"] == "fail"
    assert integrity["summary"] == f"{path}: edited by hand (its content no longer matches its digest)"
    assert f"{path}: edited by hand" in err


def test_the_best_configuration_edited_by_hand_is_exit_3(ws, cli):
    """The best so far is the latest keep's configuration: a record whose digest was recomputed after the
    edit still differs from what the log recorded."""
    import yaml

    from ascendopt.rounds.records import record_digest

    path = ws.round_path(1)
    data = yaml.safe_load(path.read_text())
    data["change"]["config"]["BLOCK"] = 128
    data["digest"] = record_digest(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, integrity, _ = _gate(cli, ws)
    assert code == 3
    assert integrity["summary"] == f"{path}: edited by hand since ascendopt wrote it (log.jsonl line 2)"


def test_a_log_line_deleted_or_edited_is_exit_3_naming_the_log(ws, cli):
    lines = ws.log_path.read_text().splitlines()
    ws.log_path.write_text(lines[1] + "\n")  # the freeze's entry removed
    code, integrity, _ = _gate(cli, ws)
    assert code == 3 and integrity["summary"] == (f"{ws.log_path}: line 1: the entry before it was removed or "
                                                  "edited (chain broken)")
    entry = json.loads(lines[1])
    entry["exit_code"] = 0 if entry["exit_code"] else 1
    ws.log_path.write_text(lines[0] + "\n" + json.dumps(entry) + "\n")
    code, integrity, _ = _gate(cli, ws)
    assert code == 3 and integrity["summary"] == (f"{ws.log_path}: line 2: edited by hand (its digest does not "
                                                  "match its content)")


def test_a_torn_last_log_line_is_not_an_integrity_failure(ws, cli):
    with open(ws.log_path, "a") as fh:
        fh.write('{"time": "2026-')  # a writer killed mid-append
    code, integrity, err = _gate(cli, ws)
    assert code == 0 and integrity["status"] == "pass", err[-2000:]
    assert "line(s) 3 torn" in err
