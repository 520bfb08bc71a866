"""The gate on a real frozen own-code repository when its history or its ledger is tampered with, and the
CI case: a fresh clone with the committed ledger (``.ascendopt/`` as its ``.gitignore`` lets through).

Attack classes (KernelGuard "harness manipulation", OpenReview K0dAC7UaXL; the hacker-fixer papers on
reward hacking, where the judge's own state is attacked): the frozen commit rewritten out of the history,
the audit log deleted or rolled back, the contract edited and resealed with ascendopt's own functions.
Controls: the unchanged tree and an honest edit of the target code stay green; a full clone in CI passes
with no note.
"""

import shutil
import subprocess

import pytest

from _cli_json import json_envelope, json_payload
from _own_code import SLEEP_OP, frozen_own_repo, git, sleep_repo_files, working_copy
from ascendopt.workspace import Workspace, read_log


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return frozen_own_repo(tmp_path_factory.mktemp("own") / "repo", sleep_repo_files(0.002))


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    return working_copy(frozen_repo, tmp_path, monkeypatch)


def _gate(cli, *extra):
    code, out, err = cli("gate", "--skip-perf", "--json", *extra)
    return code, json_envelope(out), err


def _integrity(payload):
    return payload["data"]["stages"][0] if payload.get("data") else None


def test_control_the_unchanged_tree_and_an_honest_edit_stay_green(repo, cli):
    code, payload, err = _gate(cli)
    assert code == 0, err[-2000:]
    assert "frozen commit" in " ".join(c["name"] for c in _integrity(payload)["checks"])
    (repo / "op.py").write_text(SLEEP_OP.format(delay=0.001))  # the target code, honestly faster
    code, payload, err = _gate(cli)
    assert code == 0, err[-2000:]


def test_freeze_writes_the_workspace_gitignore_the_ledger_is_committable(repo):
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True).stdout.split()
    shown = sorted(p for p in status if p.startswith(".ascendopt/"))
    assert shown == [".ascendopt/.gitignore", ".ascendopt/contract.yaml", ".ascendopt/log.jsonl"]
    assert (repo / ".ascendopt" / "profiles").is_dir()  # on disk, ignored


def test_a_frozen_commit_rewritten_out_of_the_history_is_exit_3(repo, cli):
    (repo / "op.py").write_text(SLEEP_OP.format(delay=0.5))
    git(repo, "commit", "-q", "--amend", "-am", "baseline, slower now")
    code, payload, err = _gate(cli)
    assert code == 3, err[-2000:]
    integrity = _integrity(payload)
    assert integrity["status"] == "fail" and "no longer reachable" in integrity["summary"]


def test_the_audit_log_deleted_is_exit_3_and_adopt_is_explicit(repo, cli):
    ws = Workspace(repo / ".ascendopt")
    ws.log_path.unlink()
    code, payload, err = _gate(cli)
    assert code == 3, err[-2000:]
    assert "log.jsonl: deleted" in _integrity(payload)["summary"]
    code, out, err = cli("status", "--json")  # status reads: it says what the gate fails on
    assert code == 0 and any("log.jsonl: deleted" in p for p in json_payload(out)["log"]["problems"])
    code, out, err = cli("adopt", "--json")
    assert code == 0, err
    data = json_payload(out)
    assert data["entry"] == 1 and "contract.yaml" in data["adopted"] and len(data["accepted"]) == 1
    code, payload, err = _gate(cli)
    assert code == 0, err[-2000:]


def test_the_audit_log_rolled_back_is_exit_3(repo, cli):
    """The whole log replaced by an earlier copy of itself (a rollback that hides what came after): only the
    log's private ref can tell."""
    ws = Workspace(repo / ".ascendopt")
    earlier = ws.log_path.read_bytes()
    code, _, err = cli("report", "--out", str(ws.root / "report.md"))
    assert code == 0, err
    assert len(read_log(ws).entries) == 2
    ws.log_path.write_bytes(earlier)
    code, payload, err = _gate(cli)
    assert code == 3, err[-2000:]
    assert "truncated, rolled back or replaced" in _integrity(payload)["summary"]


def test_a_contract_edited_and_resealed_with_ascendopts_own_functions_is_exit_3(repo, cli):
    """The contract loosened, its digest recomputed by ascendopt's own ``save``, under the workspace lock so
    the audit log records the write as ascendopt's: the log shows no freeze wrote it."""
    from dataclasses import replace

    from ascendopt.contract import model

    ws = Workspace(repo / ".ascendopt")
    contract = model.load(ws)
    with ws.lock():
        model.save(ws, replace(contract, max_rounds=contract.max_rounds + 50))
    assert read_log(ws).problems == []  # the chain itself is intact
    code, payload, err = _gate(cli)
    assert code == 3, err[-2000:]
    assert "not by a freeze" in _integrity(payload)["summary"]


def _commit_the_ledger(repo) -> None:
    git(repo, "add", ".ascendopt")
    git(repo, "commit", "-q", "-m", "the ledger")
    (repo / "op.py").write_text(SLEEP_OP.format(delay=0.001))
    git(repo, "commit", "-q", "-am", "faster op")


def test_ci_a_fresh_clone_with_the_committed_ledger_passes_with_no_note(repo, cli, tmp_path, monkeypatch):
    _commit_the_ledger(repo)
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", f"file://{repo}", str(clone)], check=True)
    assert not (clone / ".ascendopt" / "profiles").exists() and (clone / ".ascendopt" / "log.jsonl").is_file()
    monkeypatch.chdir(clone)
    code, payload, err = _gate(cli)
    assert code == 0, err[-2000:]
    assert "note" not in err and "audit log" not in err
    assert payload["data"]["stages"][0]["status"] == "pass"


def test_ci_a_shallow_clone_is_environment_exit_5_with_the_fetch_hint(repo, cli, tmp_path, monkeypatch):
    _commit_the_ledger(repo)
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    monkeypatch.chdir(clone)
    code, payload, err = _gate(cli)
    assert code == 5, err[-2000:]
    assert "shallow clone" in payload["error"]["message"] and "fetch-depth: 0" in payload["error"]["hint"]
    shutil.rmtree(clone)
