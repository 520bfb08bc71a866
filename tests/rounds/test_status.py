"""``ascendopt status``: where the loop stands, from any subdirectory, as text and as JSON valid against
its schema. A real frozen workspace on the tests' tiny kernel (CPU interpreter); rounds timed by its
virtual clock."""

import json
from importlib import resources

import jsonschema
import pytest

from _cli_json import json_payload
from _own_code import frozen_kernel_workspace, kernel_round

FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=8)


def _schema():
    text = resources.files("ascendopt.cli").joinpath("schemas/status.schema.json").read_text()
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    return frozen_kernel_workspace(tmp_path, monkeypatch, **FREEZE)


def test_status_from_a_subdirectory_before_and_after_rounds(ws, cli, monkeypatch):
    sub = ws.root.parent / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    validator = _schema()

    code, out, err = cli("status", "--json")
    assert code == 0, err
    data = json_payload(out)
    validator.validate(data)
    assert data["workspace"] == str(ws.root) and f"workspace: {ws.root} (found above {sub})" in err
    assert data["contract"]["kind"] == "kernel" and data["contract"]["target"] == "t_scale"
    assert data["contract"]["digest_ok"] and data["contract"]["config"] == {"BLOCK": 64, "EXTRA": 50}
    assert data["rounds"] == {"count": 0, "verdicts": {}, "directions": [], "last": None, "best": None}
    assert data["stop"]["stop"] is False and data["stop"]["rounds_left"] == 8
    assert data["next"][1].startswith("ascendopt optimize-round --hypothesis")

    keep = kernel_round(ws, {"EXTRA": "0"})
    revert = kernel_round(ws, {"EXTRA": "5"}, hypothesis="a small extra pass")
    code, out, err = cli("status", "--json")
    assert code == 0, err
    data = json_payload(out)
    validator.validate(data)
    rounds = data["rounds"]
    assert rounds["count"] == 2 and rounds["verdicts"] == {keep.verdict: 1, revert.verdict: 1}
    assert rounds["last"]["number"] == 2 and rounds["last"]["verdict"] == revert.verdict
    best = rounds["best"]
    assert keep.verdict == "keep" and best["number"] == 1 and best["config"] == keep.config
    assert best["speedup_vs_baseline"] == pytest.approx(1 / keep.timing["ratio_vs_baseline"])
    (case,) = best["cases"]
    timed = keep.timing["cases"][0]
    assert case["baseline_ms"]["p80"] == timed["baseline"]["p80_ms"] and case["best_ms"]["median"] == \
        timed["candidate"]["median_ms"]
    assert case["noise_band"] == timed["vs_baseline"]["threshold_rel"]
    assert data["stop"]["rounds_left"] == 6 and data["log"]["entries"] == 3 and data["log"]["problems"] == []

    code, out, err = cli("status")
    assert code == 0, err
    flat = " ".join(out.split())
    assert f"round 1 (BLOCK=64, EXTRA=0): {best['speedup_vs_baseline']:.3f}x vs baseline" in flat
    assert f"2 revert ({revert.direction}): a small extra pass" in flat
    assert "next: `ascendopt optimize-round --hypothesis" in err  # guidance on stderr, as every command
    code, out, err = cli("status", "--json")
    assert code == 0 and json.loads(out)["next"] == data["next"]  # the envelope's next is the status's next


def test_a_hand_edited_contract_is_reported_not_fatal(ws, cli):
    text = ws.contract_path.read_text()
    ws.contract_path.write_text(text.replace("max_rounds: 8", "max_rounds: 9"))
    code, out, err = cli("status", "-w", str(ws.root), "--json")
    assert code == 0, err
    data = json_payload(out)
    _schema().validate(data)
    assert data["contract"]["digest_ok"] is False and "max_rounds" in data["contract"]["edited"]
    assert data["next"][0] == "ascendopt gate"


def test_a_hand_edited_round_record_is_named_with_the_gate_as_next_step(ws, cli):
    kernel_round(ws, {"EXTRA": "0"})
    path = ws.round_path(1)
    path.write_text(path.read_text().replace("verdict: keep", "verdict: keep\n# edited"))
    code, out, err = cli("status", "-w", str(ws.root), "--json")
    assert code == 0, err
    data = json_payload(out)
    _schema().validate(data)
    assert data["log"]["problems"] == [f"{path}: edited by hand since ascendopt wrote it (log.jsonl line 2)"]
    assert data["next"][0] == "ascendopt gate"
    code, out, _ = cli("status", "-w", str(ws.root))
    assert code == 0 and "HAND EDIT" in out


def test_no_workspace_is_one_line_exit_2_with_the_freeze_command(tmp_path, cli, monkeypatch):
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    code, out, err = cli("status")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {repo / '.ascendopt'}: no ascendopt workspace here or above")
    assert "ascendopt freeze --kernel NAME" in line


def test_own_code_status_from_a_subdirectory_of_the_repository(tmp_path, cli, monkeypatch):
    from _own_code import commit_repo, freeze_in, sleep_repo_files

    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.004))
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile")
    assert code == 0, err[-2000:]
    monkeypatch.chdir(root / "tests")
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    code, out, err = cli("status", "--json")
    assert code == 0, err[-2000:]
    data = json_payload(out)
    _schema().validate(data)
    head = __import__("subprocess").run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                        text=True).stdout.strip()
    assert data["workspace"] == str(root / ".ascendopt")
    assert data["contract"] == {**data["contract"], "kind": "own-code", "target": "bench.py", "commit": head,
                                "config": None}
    assert data["rounds"]["count"] == 0 and data["next"][-1].endswith("--direction NAME")
    assert data["next"][0].startswith("ascendopt collect") and "--exec-file" in data["next"][0]
